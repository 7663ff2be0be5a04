"""A node's set-up, built from the one list of node files and steps (`fmcluster.node_files`).

The node bundle is every node file laid out as /opt/fmcluster is on a node (`bundle_files()`: the scripts, the
dashboards folder, nccl-tests.sbatch and the `manifest` of paths and modes), a reproducible zip that `bundle_path()`
writes for a CDK S3 asset. The runner, `node/run-step.sh`, is an S3 asset of its own: on AWS PCS every step of a
node's set-up is a node lifecycle action (`node_lifecycle_actions()`) that runs it, the first installing the bundle,
the others one step each, a required step with onError TERMINATE (the node is ended and replaced rather than left
taking jobs) and a warn-only step with CONTINUE. PCS runs the actions of the nodeBootstrapped stage before slurmd
starts (botocore pcs `NodeLifecycleStages`), so no job lands on a node before its set-up. Nothing of fmcluster
travels in user data any more: AWS PCS keeps EC2's 16 KB for its own parts.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_pcs as pcs

from fmcluster.config.value_rules import (
    GROUP_NAME_PATTERN,
    HOST_NAME_PATTERN,
    HYPERPOD_CLUSTER_NAME_PATTERN,
    LUSTRE_DNS_NAME_PATTERN,
    LUSTRE_MOUNT_NAME_PATTERN,
    LUSTRE_MOUNT_NAME_RULE,
    MOUNT_POINT_PATTERN,
    RESERVATION_ID_PATTERN,
    S3_URI_PATTERN,
    SSM_PATH_PATTERN,
    TRAINING_PLAN_ARN_FORM,
    lustre_dns_name_problem,
    lustre_mount_name_problem,
)
from fmcluster.fabric import FabricExpectation
from fmcluster.names import LUSTRE_MOUNT_PATH, SHARED_DIRECTORIES
from fmcluster.nccl import ENV_KEY_PATTERN
from fmcluster.node_files import INSTALL, NODE_ROOT, STEPS, Step, image_tree, node_tree, step
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token, known

INSTALL_DIR = f"{NODE_ROOT}/node"
"""Where the node scripts land on a node; the systemd units they install run them from here."""
RUNNER = "node/run-step.sh"
"""The step runner (package path, and path under /opt/fmcluster): every PCS lifecycle action runs it."""
NCCL_TESTS = "nccl-tests.sbatch"
"""The nccl-tests job, at /opt/fmcluster/nccl-tests.sbatch on every node (fmcluster/node/nccl-tests.sbatch)."""
ON_ERROR = {True: "TERMINATE", False: "CONTINUE"}
"""A PCS lifecycle action's onError by whether its step is required (botocore pcs `OnError`: TERMINATE "terminates
the compute node", CONTINUE "ignores the error and continues running the next script")."""
EXECUTION_POLICY = "FIRST_BOOT_ONLY"
"""Each action runs at a node's first boot, as user data did: what must be redone at every boot (/scratch, LNet over
EFA, the Lustre tunables) the steps install as systemd units of their own."""
LIFECYCLE_STAGE = "nodeBootstrapped"
"""Every step runs in this stage, before slurmd starts (botocore pcs `NodeLifecycleStages`). Not nodeReady, even for
the warn-only steps: whether a node group without a queue (the login node) ever reaches it is unconfirmed."""
READY_STAGE = "nodeReady"
"""The stage of the fabric check alone: "after the Slurm daemon (slurmd) starts and the compute node registers with the
Slurm controller ... such as running Slurm commands" (botocore pcs `NodeLifecycleStages`), so fabric-check.sh can drain
the node; it runs at every boot (a reboot can lose a device), and drains the node while it checks (`--hold`)."""
READY_EXECUTION_POLICY = "EVERY_BOOT"
MAX_SCRIPTS_PER_STAGE = 20
MAX_ARGUMENTS = 20
MAX_ARGUMENT_LENGTH = 256
"""PCS's limits on lifecycle actions (cfn-lint AWS::PCS::ComputeNodeGroup NodeLifecycleStages and
NodeLifecycleScript; botocore pcs NodeLifecycleScriptList, NodeLifecycleScriptArguments): the budget that replaced
user data's 16 KB."""

NODE_RULES: Mapping[str, str] = {
    "LUSTRE_MOUNT_NAME_PATTERN": LUSTRE_MOUNT_NAME_PATTERN.pattern,
    "LUSTRE_MOUNT_NAME_RULE": LUSTRE_MOUNT_NAME_RULE,
    "MOUNT_POINT_PATTERN": MOUNT_POINT_PATTERN.pattern,
    "LUSTRE_DNS_NAME_PATTERN": LUSTRE_DNS_NAME_PATTERN.pattern,
    "HOST_NAME_PATTERN": HOST_NAME_PATTERN.pattern,
    "RESERVATION_ID_PATTERN": RESERVATION_ID_PATTERN.pattern,
    "TRAINING_PLAN_ARN_FORM": TRAINING_PLAN_ARN_FORM,
    "GROUP_NAME_PATTERN": GROUP_NAME_PATTERN.pattern,
    "NCCL_ENV_KEY_PATTERN": ENV_KEY_PATTERN.pattern,
    "SHARED_MOUNT": LUSTRE_MOUNT_PATH,
    "SHARED_DIRECTORIES": " ".join(f"{name}={mode:04o}" for name, mode in SHARED_DIRECTORIES),
}
"""The rules node scripts apply too (mount-lustre.sh, block-end-drain.sh, plan-end-drain.sh, nccl-env.sh and Slurm's
TaskProlog), and the shared file system's names (`fmcluster.names`: its mount path, which users.sh looks for, and the
directories shared-dirs.sh makes there, `NAME=MODE` words), rendered from the Python ones into the block between
`RULES_BEGIN` and `RULES_END` of each of `RULES_FILES` (`rendered_rules`): one source, so the node and `fmcluster
validate` cannot differ. Each pattern is a POSIX extended regular expression as much as a Python one (bash's `=~`
reads it)."""
RULES_FILES: Mapping[str, Sequence[str]] = {
    "lib.sh": tuple(NODE_RULES),
    "slurm/task-prolog.sh": ("NCCL_ENV_KEY_PATTERN",),
}
"""The node scripts (under fmcluster/node) that carry a rules block, and the rules in it: lib.sh, which the scripts
source, every one; the TaskProlog, which Slurm runs on its own, the one it applies."""
RULES_BEGIN = "# --- rules rendered from fmcluster's own (node_scripts.NODE_RULES); do not edit here ---"
RULES_END = "# --- end of rendered rules ---"
STEPS_BEGIN = "# --- steps rendered from fmcluster's one list (node_files.STEPS); do not edit here ---"
STEPS_END = "# --- end of rendered steps ---"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
"""The earliest time a zip entry can hold: no build time ends up in the bundle."""


def _shell_word(value: str) -> str:
    """`value` as one bash word: single quotes, or double quotes when it holds a single quote (no `$`, backquote
    or backslash may then appear)."""
    if "'" not in value:
        return f"'{value}'"
    assert not any(c in value for c in '$`\\"'), value
    return f'"{value}"'


def _rendered(text: str, begin: str, end: str, block: str) -> str:
    head, rest = text.split(begin + "\n", 1)
    _, tail = rest.split(end + "\n", 1)
    return f"{head}{begin}\n{block}{end}\n{tail}"


def rendered_rules(text: str, names: Sequence[str] = tuple(NODE_RULES)) -> str:
    """The `text` of one of `RULES_FILES` with its rules block rewritten from `NODE_RULES` (the rules `names`; a
    test keeps the shipped files equal to it; `write_rendered_scripts()` rewrites them)."""
    # exported: the scripts that source lib.sh read them (and shellcheck, which sees lib.sh alone, knows they are used)
    block = "".join(f"export {name}={_shell_word(NODE_RULES[name])}\n" for name in names)
    return _rendered(text, RULES_BEGIN, RULES_END, block)


def rendered_runner(text: str, steps: Sequence[Step] = STEPS) -> str:
    """run-step.sh's `text` with its step table rewritten from `steps` (`fmcluster.node_files.STEPS`)."""

    def table(name: str, value: object) -> str:
        cells = " ".join(f"[{entry.name}]={_shell_word(str(value(entry)))}" for entry in steps)  # type: ignore[operator]
        return f"declare -A {name}=({cells})\n"

    block = (
        table("STEP_SCRIPT", lambda entry: entry.script)
        + table("STEP_REQUIRED", lambda entry: int(entry.required))
        + table("STEP_NEEDS", lambda entry: " ".join(entry.needs))
        + table("STEP_CONSEQUENCE", lambda entry: entry.consequence)
        + table("STEP_BAKE", lambda entry: entry.bake)
        + f"STEP_ORDER=({' '.join(entry.name for entry in steps)})\n"
    )
    return _rendered(text, STEPS_BEGIN, STEPS_END, block)


def write_rendered_scripts() -> None:
    """Rewrite the rendered blocks of this checkout's `RULES_FILES` (`NODE_RULES`) and run-step.sh (`STEPS`)."""
    node = Path(__file__).parent / "node"
    renders: dict[str, Callable[[str], str]] = {
        name: partial(rendered_rules, names=names) for name, names in RULES_FILES.items()
    }
    renders["run-step.sh"] = rendered_runner
    for name, render in renders.items():
        path = node / name
        path.write_text(render(path.read_text(encoding="ascii")), encoding="ascii")


def bundle_files() -> dict[str, tuple[bytes, int]]:
    """The node bundle: path under /opt/fmcluster -> (content, mode), every file of `fmcluster.node_files`."""
    return node_tree()


def runner_path() -> str:
    """The package's run-step.sh, for a CDK S3 asset (a single-file asset is uploaded as it is)."""
    return str(resources.files("fmcluster").joinpath(RUNNER))


def runner_checksum() -> str:
    """run-step.sh's SHA-256, the lifecycle actions' `Checksum`: the PCS agent verifies the script it downloads."""
    return hashlib.sha256(resources.files("fmcluster").joinpath(RUNNER).read_bytes()).hexdigest()


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
        actions = node_lifecycle_actions(runner_s3_uri=runner.s3_object_url, bundle_s3_uri=bundle.s3_object_url)
    """
    return archive_path(bundle_archive(), "fmcluster-node-bundle")


def image_bundle_path() -> str:
    """The image bundle (`fmcluster.node_files.image_tree()`, what `run-step.sh bake` installs) written for an asset."""
    return archive_path(zip_archive(image_tree()), "fmcluster-image-bundle")


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
    """How `observability.sh` (from the node bundle) runs as the last step of a PCS node; see its header.

    Args:
        cluster_name: the cluster's name (the `cluster` label of every series).
        endpoint_parameter: the SSM parameter holding the AMP workspace's Prometheus endpoint
            (`fmcluster.constructs.observability.endpoint_parameter_name`); the node role needs ssm:GetParameter on it.
        head_node: also run the Slurm exporter (nodes with sinfo/squeue: the PCS login nodes). Omitted: False.
        grafana: also run a self-hosted Grafana (on the head node). Omitted: False.

    observability.sh installs from the node's artifact mirror, FMCLUSTER_ARTIFACT_MIRROR (run-step.sh install
    --mirror keeps it in node.env), as every other step does; the node role reads it for those steps already.
    """

    cluster_name: str
    endpoint_parameter: str
    head_node: bool = False
    grafana: bool = False

    def arguments(self, region: str) -> list[str]:
        """observability.sh's arguments (each a lifecycle action argument of its own)."""
        arguments = ["--cluster", self.cluster_name, "--region", region]
        arguments += ["--endpoint-parameter", self.endpoint_parameter]
        if self.head_node:
            arguments.append("--head-node")
        if self.grafana:
            arguments.append("--grafana")
        return arguments


def pcs_steps(
    *,
    bundle_s3_uri: str,
    region: str | None = None,
    lustre_dns_name: str | None = None,
    lustre_mount_name: str | None = None,
    lustre_mount_point: str = LUSTRE_MOUNT_PATH,
    lustre_efa: bool = False,
    nccl_parameter_name: str | None = None,
    observability: NodeObservability | None = None,
    image_parameter: str | None = None,
    slurm_version: str | None = None,
    mirror: str | None = None,
    users_parameter: str | None = None,
    accounting_account: str | None = None,
) -> list[tuple[Step | None, list[str]]]:
    """The steps of an AWS PCS node, in order, each with run-step.sh's arguments (`None`: the install step).

    Arguments may be CDK tokens. See `node_lifecycle_actions` for what each argument does."""
    _check(lustre_dns_name, lustre_mount_name, lustre_mount_point, lustre_efa, nccl_parameter_name)
    _check_bundle(bundle_s3_uri, observability, mirror)
    region = region if region is not None else cdk.Aws.REGION
    install = [INSTALL, bundle_s3_uri, "--region", region]
    if slurm_version is not None:
        install += ["--slurm-version", slurm_version]
    if mirror is not None:
        install += ["--mirror", mirror]
    steps: list[tuple[Step | None, list[str]]] = [(None, install), (step("updates"), []), (step("scratch"), [])]
    if lustre_dns_name is not None and lustre_mount_name is not None:
        lustre = [lustre_dns_name, lustre_mount_name, lustre_mount_point]
        steps.append((step("lustre"), [*lustre, "--efa"] if lustre_efa else lustre))
        steps.append((step("shared-dirs"), [lustre_mount_point]))
    steps.append((step("nccl"), [nccl_parameter_name] if nccl_parameter_name is not None else []))
    steps += [(step("enroot"), []), (step("slurm-hooks"), [])]
    if users_parameter is not None:
        # The home base is the file's, never guessed on the node: with Lustre, a sync while it is not mounted fails
        # (and is tried again) rather than settling the homes on /home for good.
        shared = lustre_dns_name is not None and lustre_mount_name is not None
        home_base = f"{lustre_mount_point}/home" if shared else "/home"
        steps.append((step("users"), ["install", users_parameter, "--home-base", home_base]))
        if accounting_account is not None:
            steps.append((step("accounting"), ["install", users_parameter, accounting_account]))
    if image_parameter is not None:
        steps.append((step("image-watch"), ["install", region, image_parameter, lustre_mount_point]))
    if observability is not None:
        steps.append((step("observability"), observability.arguments(region)))
    return steps


def pcs_ready_steps(fabric: FabricExpectation | None) -> list[tuple[Step, list[str]]]:
    """The steps of a PCS node's nodeReady stage, with run-step.sh's arguments: the fabric check, when there is one."""
    return [] if fabric is None else [(step("fabric"), ["--hold", *fabric.arguments()])]


def _script(
    runner_s3_uri: str, name: str, arguments: list[str], required: bool, policy: str
) -> pcs.CfnComputeNodeGroup.NodeLifecycleScriptProperty:
    return pcs.CfnComputeNodeGroup.NodeLifecycleScriptProperty(
        name=name,
        script_source=pcs.CfnComputeNodeGroup.ScriptSourceProperty(
            script_location=runner_s3_uri, checksum=runner_checksum()
        ),
        arguments=arguments,
        on_error=ON_ERROR[required],
        execution_policy=policy,
    )


def node_lifecycle_actions(
    *, runner_s3_uri: str, fabric: FabricExpectation | None = None, **settings: object
) -> pcs.CfnComputeNodeGroup.NodeLifecycleActionsProperty:
    """A PCS node group's `NodeLifecycleActions`: every step of `pcs_steps(**settings)` as one action running the
    runner (`runner_path()` as an S3 asset, its `s3_object_url` here) in the nodeBootstrapped stage, before slurmd.

    A required step (install, scratch, lustre, nccl) has onError TERMINATE: PCS ends the node, and a static
    group replaces it, rather than let it take jobs it cannot run; the others have CONTINUE, and the runner exits 0
    after its WARNING line anyway. The node role needs read on the runner and the bundle (S3 GetObject; PCS user guide,
    node lifecycle actions; the PCS agent downloads the script, checks `Checksum`, and runs it as root). Each
    action's output is in /var/log/amazon/pcs/lifecycle/actions/nodeBootstrapped/<name>.log (aws-hpc-recipes
    `recipes/pcs-scripts`), and the runner's in /var/log/fmcluster/.

    Example::

        actions = node_lifecycle_actions(
            runner_s3_uri=runner.s3_object_url, bundle_s3_uri=bundle.s3_object_url,
            lustre_dns_name=lustre.dns_name, lustre_mount_name=lustre.mount_name, lustre_efa=True,
            nccl_parameter_name=nccl_parameter.parameter_name, slurm_version="25.05",
        )
        pcs.CfnComputeNodeGroup(stack, "Gpu", ..., node_lifecycle_actions=actions)

    Args (`settings`):
        bundle_s3_uri: the node bundle (`bundle_path()` as an S3 asset: its `s3_object_url`).
        region: the region of the bundle's bucket and of the SSM parameters. Omitted: the stack's (`AWS::Region`).
        lustre_dns_name, lustre_mount_name: the FSx for Lustre file system to mount (both, or neither).
        lustre_mount_point: where. Omitted: "/fsx". lustre_efa: over EFA (LNet over EFA set up first). Omitted: TCP.
        nccl_parameter_name: an SSM parameter of NCCL/libfabric variables laid over the defaults. Omitted: defaults.
        observability: run observability.sh with these settings. Omitted: no metrics collection on the node.
        image_parameter: run image-watch.sh, which brings the training image to the file system when published.
        slurm_version: the cluster's Slurm version: every step uses that version's Slurm of the image.
        mirror: the project's artifact mirror, s3://<data bucket>/fmcluster-mirror (the storage stack's `mirror.uri`):
            enroot and pyxis are installed from it only (FMCLUSTER_ARTIFACT_MIRROR; the node role needs read on it).
            Omitted: an image without them fails the enroot step, naming what is missing.
        users_parameter: the SSM parameter of the cluster users (users.sh install: now, then from a timer every 10
            minutes): a required step. Omitted: none.
        accounting_account: with users_parameter, on the node that reaches slurmdbd (the login or head node): the
            Slurm account the users' associations go in (slurm-accounting.sh install: a timer, since this stage runs
            before Slurm). Omitted: no associations made here.
        fabric: what the node's fabric check expects (`fmcluster.fabric.fabric_expectation`): fabric-check.sh in the
            nodeReady stage (`READY_STAGE`), warn-only (it drains a node that fails). Omitted: no fabric check.
    """
    bootstrapped = []
    for entry, arguments in pcs_steps(**settings):  # type: ignore[arg-type]
        name = entry.name if entry is not None else INSTALL
        required = entry.required if entry is not None else True
        full = arguments if entry is None else [name, *arguments]
        bootstrapped.append(_script(runner_s3_uri, name, full, required, EXECUTION_POLICY))
    ready = [
        _script(runner_s3_uri, entry.name, [entry.name, *arguments], entry.required, READY_EXECUTION_POLICY)
        for entry, arguments in pcs_ready_steps(fabric)
    ]
    return pcs.CfnComputeNodeGroup.NodeLifecycleActionsProperty(
        stages=pcs.CfnComputeNodeGroup.NodeLifecycleStagesProperty(
            node_bootstrapped=bootstrapped, node_ready=ready or None
        )
    )


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
    raise_if_any("node_lifecycle_actions", problems)


def _check_bundle(bundle_s3_uri: str, observability: NodeObservability | None, mirror: str | None) -> None:
    problems: list[Problem] = []
    if not is_token(bundle_s3_uri) and not S3_URI_PATTERN.match(bundle_s3_uri):
        problems.append(
            Problem("bundle_s3_uri", f"must be an S3 URI like s3://bucket/bundle.zip; got {bundle_s3_uri!r}")
        )
    if mirror is not None and not is_token(mirror) and not S3_URI_PATTERN.match(mirror):
        problems.append(Problem("mirror", f"must be an S3 prefix like s3://my-bucket/fmcluster-mirror; got {mirror!r}"))
    if observability is not None:
        for prop, value, pattern, right in (
            ("cluster_name", observability.cluster_name, HYPERPOD_CLUSTER_NAME_PATTERN,
             "a cluster name like llm-pretrain"),
            ("endpoint_parameter", observability.endpoint_parameter, SSM_PATH_PATTERN,
             "an SSM parameter name like /fmcluster/llm/observability/prometheus-endpoint"),
        ):  # fmt: skip
            if value is not None and not is_token(value) and not pattern.match(value):
                problems.append(Problem(f"observability.{prop}", f"must be {right}; got {value!r}"))
    raise_if_any("node_lifecycle_actions", problems)
