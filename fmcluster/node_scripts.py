"""Node bootstrap as EC2 user data: fmcluster's node scripts (package data under `fmcluster/node/`), embedded.

`bootstrap_user_data()` returns an `ec2.UserData` whose shell script unpacks `lib.sh`, `nvme-raid.sh`,
`mount-lustre.sh`, `nccl-env.sh` and `bootstrap.sh` into `/opt/fmcluster/node/` and runs `bootstrap.sh` with the
file system and SSM parameter given. The scripts travel as a gzip-compressed tar archive in base64, with their
full-line comments left out (the documented sources are the package files): EC2 allows 16 KB of user data
and AWS PCS merges its own parts into the same 16 KB, so the whole part is kept under `USER_DATA_BUDGET`.
The archive is built byte-for-byte the same on every synth (sorted members, zero timestamps and owners), so an
unchanged script never changes the launch template.

What does not fit in user data travels in the node bundle: a zip of every node script, `observability.sh`, the
dashboards folder (Prometheus agent configuration, rules, Grafana dashboards) and `nccl-tests.sbatch`, laid out as
`/opt/fmcluster` is on a node (`bundle_files()`). `bundle_path()` writes it for a CDK S3 asset; given that asset's
URI, `bootstrap.sh` downloads and unpacks it, then runs `observability.sh` when asked (`NodeObservability`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import os
import shlex
import tarfile
import tempfile
import textwrap
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import aws_cdk as cdk
import zopfli.gzip
from aws_cdk import aws_ec2 as ec2

from fmcluster.config.value_rules import (
    HYPERPOD_CLUSTER_NAME_PATTERN,
    LUSTRE_MOUNT_NAME_PATTERN,
    LUSTRE_MOUNT_NAME_RULE,
    MOUNT_POINT_PATTERN,
    S3_URI_PATTERN,
    SSM_PATH_PATTERN,
    lustre_dns_name_problem,
    lustre_mount_name_problem,
)
from fmcluster.names import LUSTRE_MOUNT_PATH
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token, known

NODE_SCRIPTS: tuple[str, ...] = ("bootstrap.sh", "lib.sh", "mount-lustre.sh", "nccl-env.sh", "nvme-raid.sh")
"""The scripts under `fmcluster/node/`; all but `lib.sh` (which is sourced) are executable."""
INSTALL_DIR = "/opt/fmcluster/node"
"""Where the scripts land on a node; the systemd units they install run them from here."""
USER_DATA_BUDGET = 12 * 1024
"""Bytes this part may take of EC2's 16 KB user data, leaving room for AWS PCS's own parts."""
SHELL_CONTENT_TYPE = 'text/x-shellscript; charset="us-ascii"'
"""The MIME type AWS PCS documents for a shell part of launch-template user data."""

NODE_RULES: Mapping[str, str] = {
    "LUSTRE_MOUNT_NAME_PATTERN": LUSTRE_MOUNT_NAME_PATTERN.pattern,
    "LUSTRE_MOUNT_NAME_RULE": LUSTRE_MOUNT_NAME_RULE,
    "MOUNT_POINT_PATTERN": MOUNT_POINT_PATTERN.pattern,
}
"""The rules a node script applies too (mount-lustre.sh), rendered from the Python ones into lib.sh's block between
`RULES_BEGIN` and `RULES_END` (`rendered_lib`): one source, so the node and `fmcluster validate` cannot differ."""
RULES_BEGIN = "# --- rules rendered from fmcluster's own (node_scripts.NODE_RULES); do not edit here ---"
RULES_END = "# --- end of rendered rules ---"
_ARCHIVE_MARK = "FMCLUSTER_NODE_SCRIPTS"

BUNDLE_DIR = "/opt/fmcluster"
"""Where the node bundle unpacks on a node (HyperPod's lifecycle scripts install the same layout there)."""
BUNDLE_SCRIPTS: tuple[str, ...] = (
    *NODE_SCRIPTS,
    "observability.sh",
    "lnet-efa.sh",
    "enroot-pyxis.sh",
    "slurm-hooks.sh",
    "slurm/task-prolog.sh",
    "slurm/gpu-job-map.sh",
    "image-watch.sh",
    "training-image.sh",
    "users.sh",
    "hyperpod/ssm.sh",
    "hyperpod/import-image.sh",
)
"""The scripts of `fmcluster/node/` in the bundle, under `node/`."""
NCCL_TESTS = "nccl-tests.sbatch"
"""The nccl-tests job (fmcluster/node/nccl-tests.sbatch); the bundle puts it at /opt/fmcluster/nccl-tests.sbatch."""
DASHBOARDS = "dashboards"
"""The package folder observability.sh needs beside node/: agent.yml, rules/, the Grafana dashboards."""
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
"""The earliest time a zip entry can hold: no build time ends up in the bundle."""


def _shell_word(value: str) -> str:
    """`value` as one bash word: single quotes, or double quotes when it holds a single quote (no `$`, backquote
    or backslash may then appear)."""
    if "'" not in value:
        return f"'{value}'"
    assert not any(c in value for c in '$`\\"'), value
    return f'"{value}"'


def rendered_lib(text: str) -> str:
    """lib.sh's `text` with its rules block rewritten from `NODE_RULES` (a test keeps the shipped file equal to it;
    `python -c "import fmcluster.node_scripts as n; n.write_rendered_lib()"` rewrites it)."""
    head, rest = text.split(RULES_BEGIN + "\n", 1)
    _, tail = rest.split(RULES_END + "\n", 1)
    # exported: the scripts that source lib.sh read them (and shellcheck, which sees lib.sh alone, knows they are used)
    block = "".join(f"export {name}={_shell_word(value)}\n" for name, value in NODE_RULES.items())
    return f"{head}{RULES_BEGIN}\n{block}{RULES_END}\n{tail}"


def write_rendered_lib() -> None:
    """Rewrite the rules block of this checkout's fmcluster/node/lib.sh (after a rule in `NODE_RULES` changed)."""
    path = Path(__file__).parent / "node" / "lib.sh"
    path.write_text(rendered_lib(path.read_text(encoding="ascii")), encoding="ascii")


def script_text(name: str) -> str:
    """The documented source of one node script, read from the installed package."""
    if name not in NODE_SCRIPTS:
        raise ValueError(f"unknown node script {name!r}; known: {', '.join(NODE_SCRIPTS)}")
    return resources.files("fmcluster").joinpath("node", name).read_text(encoding="ascii")


def _compact(text: str) -> str:
    """`text` without full-line comments and blank lines, keeping the `#!` line."""
    lines = text.splitlines()
    kept = [lines[0]] + [line for line in lines[1:] if line.strip() and not line.lstrip().startswith("#")]
    return "\n".join(kept) + "\n"


@functools.cache
def scripts_archive() -> bytes:
    """The node scripts as a reproducible .tar.gz: sorted, mtime 0, owned by root, modes 0755 (lib.sh 0644).

    Compressed with Zopfli, which writes standard gzip (any `tar -xz` reads it) about 3% smaller than zlib's level 9:
    the difference keeps the user data within `USER_DATA_BUDGET`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name in sorted(NODE_SCRIPTS):
            data = _compact(script_text(name)).encode("ascii")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644 if name == "lib.sh" else 0o755
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            archive.addfile(info, io.BytesIO(data))
    return zopfli.gzip.compress(buffer.getvalue())  # mtime 0 in its header: the same bytes on every synth


def _package_files(folder: Traversable, prefix: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for entry in folder.iterdir():
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            found.update(_package_files(entry, f"{prefix}{entry.name}/"))
        else:
            found[f"{prefix}{entry.name}"] = entry.read_bytes()
    return found


def dashboard_files() -> dict[str, bytes]:
    """Every file of the package's dashboards folder, by path relative to it (e.g. "rules/alerts.yml")."""
    return dict(sorted(_package_files(resources.files("fmcluster").joinpath(DASHBOARDS), "").items()))


def bundle_files() -> dict[str, tuple[bytes, int]]:
    """The node bundle: path under /opt/fmcluster -> (content, mode). Scripts and the sbatch job 0755, the rest 0644.

    `node/` holds `BUNDLE_SCRIPTS` as the package has them (comments kept), `dashboards/` the dashboards folder,
    and `nccl-tests.sbatch` sits at the top, where users find it.
    """
    node = resources.files("fmcluster").joinpath("node")
    files: dict[str, tuple[bytes, int]] = {}
    for name in BUNDLE_SCRIPTS:
        files[f"node/{name}"] = (node.joinpath(name).read_bytes(), 0o644 if name == "lib.sh" else 0o755)
    for name, data in dashboard_files().items():
        files[f"{DASHBOARDS}/{name}"] = (data, 0o644)
    files[NCCL_TESTS] = (node.joinpath(NCCL_TESTS).read_bytes(), 0o755)
    return dict(sorted(files.items()))


def zip_archive(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """`files` (path -> (content, mode)) as a reproducible zip: sorted entries, fixed times, Unix modes (which unzip
    restores).

    Entries are stored, not deflated: deflate's output differs between zlib builds (zlib-ng, say), and an archive
    that changed with the build machine would change every template that ships it (a launch template's change rolls
    the nodes).
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, mode="w", compression=zipfile.ZIP_STORED) as archive:
        for name, (data, mode) in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.create_system = 3  # Unix, so that external_attr carries the mode
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_STORED
            archive.writestr(info, data)
    return buffer.getvalue()


def bundle_archive() -> bytes:
    """The node bundle (`bundle_files()`) as a reproducible zip."""
    return zip_archive(bundle_files())


def bundle_path() -> str:
    """The node bundle written for a CDK S3 asset (`archive_path`).

    Example::

        bundle = s3_assets.Asset(stack, "NodeBundle", path=bundle_path())
        bundle.grant_read(node_role)
        user_data = bootstrap_user_data(bundle_s3_uri=bundle.s3_object_url, ...)
    """
    return archive_path(bundle_archive(), "fmcluster-node-bundle")


def archive_path(data: bytes, name: str) -> str:
    """A zip `data` written to a file named after `name` and its content in the temporary directory, for an asset.

    The same content always gives the same file name and bytes, and so the same asset hash (CDK fingerprints a
    single-file asset by its content only); an existing file with that content is left as it is, and a new one is
    written under a temporary name and renamed, so concurrent synths never read a partial archive. Only when another
    user's file holds the name is the archive left under its temporary name (with the same content and hash).
    """
    path = os.path.join(tempfile.gettempdir(), f"{name}-{hashlib.sha256(data).hexdigest()[:16]}.zip")
    try:
        with open(path, "rb") as existing:
            if existing.read() == data:
                return path
    except OSError:
        pass
    descriptor, partial = tempfile.mkstemp(prefix=f".{name}-", suffix=".zip")
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)
    os.chmod(partial, 0o644)
    try:
        os.replace(partial, path)
    except OSError:  # another user's file holds the name (a shared temporary directory): keep ours under its own
        return partial
    return path


@dataclass(frozen=True)
class NodeObservability:
    """How `observability.sh` (from the node bundle) runs at the end of the bootstrap; see its header.

    Args:
        cluster_name: the cluster's name (the `cluster` label of every series).
        endpoint_parameter: the SSM parameter holding the AMP workspace's Prometheus endpoint
            (`fmcluster.constructs.observability.endpoint_parameter_name`); the node role needs ssm:GetParameter on it.
        head_node: also run the Slurm exporter (nodes with sinfo/squeue: the PCS login nodes). Omitted: False.
        grafana: also run a self-hosted Grafana (on the head node). Omitted: False.
        mirror: an S3 prefix holding every binary and image observability.sh installs, for nodes without an internet
            path (`network.egress: none`); the node role needs read on it. Omitted: the public release sites.
    """

    cluster_name: str
    endpoint_parameter: str
    head_node: bool = False
    grafana: bool = False
    mirror: str | None = None

    def arguments(self, region: str) -> list[str]:
        """observability.sh's arguments, shell-quoted."""
        arguments = ["--cluster", self.cluster_name, "--region", region]
        arguments += ["--endpoint-parameter", self.endpoint_parameter]
        if self.head_node:
            arguments.append("--head-node")
        if self.grafana:
            arguments.append("--grafana")
        if self.mirror is not None:
            arguments += ["--mirror", self.mirror]
        return [shlex.quote(argument) for argument in arguments]


def bootstrap_commands(
    *,
    lustre_dns_name: str | None = None,
    lustre_mount_name: str | None = None,
    lustre_mount_point: str = LUSTRE_MOUNT_PATH,
    lustre_efa: bool = False,
    nccl_parameter_name: str | None = None,
    region: str | None = None,
    bundle_s3_uri: str | None = None,
    observability: NodeObservability | None = None,
    image_parameter: str | None = None,
    slurm_version: str | None = None,
) -> list[str]:
    """The shell commands of the user data (see `bootstrap_user_data` for the arguments)."""
    _check(lustre_dns_name, lustre_mount_name, lustre_mount_point, lustre_efa, nccl_parameter_name)
    _check_bundle(bundle_s3_uri, observability)
    region = region if region is not None else cdk.Aws.REGION
    encoded = "\n".join(textwrap.wrap(base64.b64encode(scripts_archive()).decode("ascii"), 76))
    arguments: list[str] = []
    if lustre_dns_name is not None and lustre_mount_name is not None:
        arguments += [
            "--lustre-dns-name",
            shlex.quote(lustre_dns_name),
            "--lustre-mount-name",
            shlex.quote(lustre_mount_name),
        ]
        arguments += ["--lustre-mount-point", shlex.quote(lustre_mount_point)]
        if lustre_efa:
            arguments.append("--lustre-efa")
    if nccl_parameter_name is not None:
        arguments += ["--nccl-parameter", shlex.quote(nccl_parameter_name)]
    if slurm_version is not None:
        arguments += ["--slurm-version", shlex.quote(slurm_version)]
    if bundle_s3_uri is not None:
        arguments += ["--bundle", shlex.quote(bundle_s3_uri)]
    if image_parameter is not None:
        if bundle_s3_uri is None:
            raise ValueError("image_parameter: image-watch.sh comes in the node bundle; give bundle_s3_uri too")
        arguments += ["--image-parameter", shlex.quote(image_parameter)]
    if observability is not None:
        arguments += ["--observability", *observability.arguments(region)]  # the rest goes to observability.sh
    return [
        "set -euo pipefail",
        "# fmcluster node bootstrap: unpack the node scripts, then run bootstrap.sh (logs: /var/log/fmcluster/)",
        f'dest="${{FMCLUSTER_ROOT:-}}{INSTALL_DIR}"',
        'mkdir -p "$dest"',
        f"base64 -d <<'{_ARCHIVE_MARK}' | tar -xzmf - --no-same-owner -C \"$dest\"",
        encoded,
        _ARCHIVE_MARK,
        f"export AWS_DEFAULT_REGION={shlex.quote(region)}",
        " ".join(['"$dest/bootstrap.sh"', *arguments]),
    ]


def bootstrap_user_data(
    *,
    lustre_dns_name: str | None = None,
    lustre_mount_name: str | None = None,
    lustre_mount_point: str = LUSTRE_MOUNT_PATH,
    lustre_efa: bool = False,
    nccl_parameter_name: str | None = None,
    region: str | None = None,
    bundle_s3_uri: str | None = None,
    observability: NodeObservability | None = None,
    image_parameter: str | None = None,
    slurm_version: str | None = None,
    multipart: bool = True,
) -> ec2.UserData:
    """EC2 user data that installs fmcluster's node scripts and runs `bootstrap.sh` at first boot.

    The node gets local NVMe scratch at /scratch (RAID 0 of the instance-store disks), the Lustre file system at
    `lustre_mount_point` when one is given, and the NCCL environment in /etc/profile.d/fmcluster-nccl.sh and
    /etc/fmcluster/nccl.env; with `bundle_s3_uri`, the node bundle unpacked in /opt/fmcluster (so
    /opt/fmcluster/nccl-tests.sbatch), and with `observability`, observability.sh run from it. Every value may be a
    CDK token (e.g. `lustre.dns_name`), resolved at deploy time.

    Example::

        user_data = bootstrap_user_data(
            lustre_dns_name=lustre.dns_name, lustre_mount_name=lustre.mount_name, lustre_efa=True,
            nccl_parameter_name=nccl_parameter.parameter_name,
        )
        EfaLaunchTemplate(stack, "Gpu", instance_type="p5.48xlarge", subnet=network.compute_subnet,
                          security_groups=[network.efa_security_group], user_data=user_data)

    Args:
        lustre_dns_name: the FSx for Lustre file system's DNS name. Omitted: no file system is mounted.
        lustre_mount_name: its mount name; required with `lustre_dns_name`, forbidden without it.
        lustre_mount_point: where to mount it, an absolute path. Omitted: "/fsx".
        lustre_efa: the file system is EFA-enabled: set up LNet over EFA on the node first (the FSx EFA client
            set-up). Omitted: False (TCP).
        nccl_parameter_name: an SSM parameter holding a JSON object of NCCL/libfabric variables laid over the
            defaults; the node role needs ssm:GetParameter on it. Omitted: the defaults alone.
        region: the region of the SSM parameters (and observability.sh's `--region`). Omitted: the stack's region
            (`AWS::Region`).
        bundle_s3_uri: the S3 URI of the node bundle (`bundle_path()` as an S3 asset: its `s3_object_url`); the
            node role needs read on it. The node downloads it with retries (in the region its instance metadata
            names) and unpacks it into /opt/fmcluster. Omitted: no bundle.
        observability: run observability.sh from the bundle with these settings; needs `bundle_s3_uri`.
            Omitted: no metrics collection on the node.
        image_parameter: the training image's SSM parameter (`/fmcluster/<cluster>/image-uri`): the node runs
            image-watch.sh from the bundle, which brings the image to /fsx when it is published (give it to one node,
            the head node; needs `bundle_s3_uri`). Omitted: no watcher on this node.
        slurm_version: the cluster's Slurm version (AWS PCS): pyxis is built against
            /opt/aws/pcs/scheduler/slurm-<version> and the node fails when the image lacks it. Omitted: every Slurm
            version the image holds.
        multipart: return MIME multi-part user data with one shell part, the form AWS PCS requires (it merges
            its own parts in); False returns a plain shell script. Omitted: True.
    """
    shell = ec2.UserData.for_linux()
    shell.add_commands(
        *bootstrap_commands(
            lustre_dns_name=lustre_dns_name,
            lustre_mount_name=lustre_mount_name,
            lustre_mount_point=lustre_mount_point,
            lustre_efa=lustre_efa,
            nccl_parameter_name=nccl_parameter_name,
            region=region,
            bundle_s3_uri=bundle_s3_uri,
            observability=observability,
            image_parameter=image_parameter,
            slurm_version=slurm_version,
        )
    )
    user_data = shell
    if multipart:
        user_data = ec2.MultipartUserData()
        # a raw part: `add_user_data_part` would base64 the script (a third more bytes of the 16 KB)
        user_data.add_part(ec2.MultipartBody.from_raw_body(content_type=SHELL_CONTENT_TYPE, body=shell.render()))
    size = len(user_data.render().encode())
    if size > USER_DATA_BUDGET:
        raise ValueError(
            f"bootstrap_user_data: the node bootstrap user data is {size} bytes, over its budget of "
            f"{USER_DATA_BUDGET} (EC2 allows 16 KB in all, shared with AWS PCS); shorten the node scripts"
        )
    return user_data


def _check(dns_name: str | None, mount_name: str | None, mount_point: str, efa: bool, parameter: str | None) -> None:
    problems: list[Problem] = []
    if (dns_name is None) != (mount_name is None):
        problems.append(
            Problem(
                "", "lustre_dns_name and lustre_mount_name go together: give both to mount a file system, or neither"
            )
        )
    if efa and dns_name is None:
        problems.append(Problem("lustre_efa", "needs a file system (lustre_dns_name and lustre_mount_name)"))
    for prop, problem in (
        ("lustre_dns_name", lustre_dns_name_problem(known(dns_name))),
        ("lustre_mount_name", lustre_mount_name_problem(known(mount_name))),
    ):
        if problem:
            problems.append(Problem(prop, problem))
    for prop, value, pattern, right in (
        ("lustre_mount_point", mount_point, MOUNT_POINT_PATTERN, "an absolute directory like /fsx"),
        ("nccl_parameter_name", parameter, SSM_PATH_PATTERN, "an SSM parameter name like /fmcluster/nccl"),
    ):
        if value is not None and not is_token(value) and not pattern.match(value):
            problems.append(Problem(prop, f"must be {right}; got {value!r}"))
    raise_if_any("bootstrap_user_data", problems)


def _check_bundle(bundle_s3_uri: str | None, observability: NodeObservability | None) -> None:
    problems: list[Problem] = []
    if bundle_s3_uri is not None and not is_token(bundle_s3_uri) and not S3_URI_PATTERN.match(bundle_s3_uri):
        problems.append(
            Problem("bundle_s3_uri", f"must be an S3 URI like s3://bucket/bundle.zip; got {bundle_s3_uri!r}")
        )
    if observability is not None:
        if bundle_s3_uri is None:
            problems.append(
                Problem(
                    "observability", "needs bundle_s3_uri (observability.sh and its dashboards come in the node bundle)"
                )
            )
        for prop, value, pattern, right in (
            ("cluster_name", observability.cluster_name, HYPERPOD_CLUSTER_NAME_PATTERN,
             "a cluster name like llm-pretrain"),
            ("endpoint_parameter", observability.endpoint_parameter, SSM_PATH_PATTERN,
             "an SSM parameter name like /fmcluster/llm/observability/prometheus-endpoint"),
            ("mirror", observability.mirror, S3_URI_PATTERN, "an S3 prefix like s3://my-bucket/fmcluster-mirror"),
        ):  # fmt: skip
            if value is not None and not is_token(value) and not pattern.match(value):
                problems.append(Problem(f"observability.{prop}", f"must be {right}; got {value!r}"))
    raise_if_any("bootstrap_user_data", problems)
