"""Node bootstrap as EC2 user data: fmcluster's node scripts (package data under `fmcluster/node/`), embedded.

`bootstrap_user_data()` returns an `ec2.UserData` whose shell script unpacks `lib.sh`, `nvme-raid.sh`,
`mount-lustre.sh`, `nccl-env.sh` and `bootstrap.sh` into `/opt/fmcluster/node/` and runs `bootstrap.sh` with the
file system and SSM parameter given. The scripts travel as a gzip-compressed tar archive in base64, with their
full-line comments left out (the documented sources are the package files): EC2 allows 16 KB of user data
and AWS PCS merges its own parts into the same 16 KB, so the whole part is kept under `USER_DATA_BUDGET`.
The archive is built byte-for-byte the same on every synth (sorted members, zero timestamps and owners), so an
unchanged script never changes the launch template.
"""

from __future__ import annotations

import base64
import gzip
import io
import re
import shlex
import tarfile
import textwrap
from importlib import resources

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2

NODE_SCRIPTS: tuple[str, ...] = ("bootstrap.sh", "lib.sh", "mount-lustre.sh", "nccl-env.sh", "nvme-raid.sh")
"""The scripts under `fmcluster/node/`; all but `lib.sh` (which is sourced) are executable."""
INSTALL_DIR = "/opt/fmcluster/node"
"""Where the scripts land on a node; the systemd units they install run them from here."""
USER_DATA_BUDGET = 12 * 1024
"""Bytes this part may take of EC2's 16 KB user data, leaving room for AWS PCS's own parts."""
SHELL_CONTENT_TYPE = 'text/x-shellscript; charset="us-ascii"'
"""The MIME type AWS PCS documents for a shell part of launch-template user data."""

_DNS_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
_MOUNT_NAME = re.compile(r"^[A-Za-z0-9_]{1,16}$")
_MOUNT_POINT = re.compile(r"^(/[A-Za-z0-9._-]+)+$")
_SSM_NAME = re.compile(r"^/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
_ARCHIVE_MARK = "FMCLUSTER_NODE_SCRIPTS"


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


def scripts_archive() -> bytes:
    """The node scripts as a reproducible .tar.gz: sorted, mtime 0, owned by root, modes 0755 (lib.sh 0644)."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.USTAR_FORMAT) as archive,
    ):
        for name in sorted(NODE_SCRIPTS):
            data = _compact(script_text(name)).encode("ascii")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644 if name == "lib.sh" else 0o755
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def bootstrap_commands(
    *,
    lustre_dns_name: str | None = None,
    lustre_mount_name: str | None = None,
    lustre_mount_point: str = "/fsx",
    lustre_efa: bool = False,
    nccl_parameter_name: str | None = None,
    region: str | None = None,
) -> list[str]:
    """The shell commands of the user data (see `bootstrap_user_data` for the arguments)."""
    _check(lustre_dns_name, lustre_mount_name, lustre_mount_point, lustre_efa, nccl_parameter_name)
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
    return [
        "set -euo pipefail",
        "# fmcluster node bootstrap: unpack the node scripts, then run bootstrap.sh (logs: /var/log/fmcluster/)",
        f'dest="${{FMCLUSTER_ROOT:-}}{INSTALL_DIR}"',
        'mkdir -p "$dest"',
        f"base64 -d <<'{_ARCHIVE_MARK}' | tar -xzmf - --no-same-owner -C \"$dest\"",
        encoded,
        _ARCHIVE_MARK,
        f"export AWS_DEFAULT_REGION={shlex.quote(region if region is not None else cdk.Aws.REGION)}",
        " ".join(['"$dest/bootstrap.sh"', *arguments]),
    ]


def bootstrap_user_data(
    *,
    lustre_dns_name: str | None = None,
    lustre_mount_name: str | None = None,
    lustre_mount_point: str = "/fsx",
    lustre_efa: bool = False,
    nccl_parameter_name: str | None = None,
    region: str | None = None,
    multipart: bool = True,
) -> ec2.UserData:
    """EC2 user data that installs fmcluster's node scripts and runs `bootstrap.sh` at first boot.

    The node gets local NVMe scratch at /scratch (RAID 0 of the instance-store disks), the Lustre file system at
    `lustre_mount_point` when one is given, and the NCCL environment in /etc/profile.d/fmcluster-nccl.sh and
    /etc/fmcluster/nccl.env. Every value may be a CDK token (e.g. `lustre.dns_name`), resolved at deploy time.

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
        region: the region of the SSM parameter. Omitted: the stack's region (`AWS::Region`).
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
    problems = []
    if (dns_name is None) != (mount_name is None):
        problems.append(
            "lustre_dns_name and lustre_mount_name go together: give both to mount a file system, or neither"
        )
    if efa and dns_name is None:
        problems.append("lustre_efa: needs a file system (lustre_dns_name and lustre_mount_name)")
    for prop, value, pattern, right in (
        ("lustre_dns_name", dns_name, _DNS_NAME, "a DNS name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"),
        ("lustre_mount_name", mount_name, _MOUNT_NAME, "1-16 letters, digits or '_' like abcdef12"),
        ("lustre_mount_point", mount_point, _MOUNT_POINT, "an absolute directory like /fsx"),
        ("nccl_parameter_name", parameter, _SSM_NAME, "an SSM parameter name like /fmcluster/nccl"),
    ):
        if value is not None and not cdk.Token.is_unresolved(value) and not pattern.match(value):
            problems.append(f"{prop}: must be {right}; got {value!r}")
    if problems:
        raise ValueError("\n".join(f"bootstrap_user_data: {problem}" for problem in problems))
