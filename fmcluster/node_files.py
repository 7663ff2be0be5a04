"""What a node receives and the steps it runs: the one list both orchestrators are built from.

Every node, of AWS PCS or SageMaker HyperPod, gets the same files laid out the same way under `NODE_ROOT`
(/opt/fmcluster), and runs its set-up as the same steps through one runner, `node/run-step.sh`, with one fail/warn
policy. From these two lists come the PCS node bundle and its node lifecycle actions (`fmcluster.node_scripts`), the
HyperPod lifecycle archive (`fmcluster.constructs.hyperpod.lifecycle`), the `manifest` the runner installs the files
by (path and mode, since S3 keeps no mode), the runner's own step table, and the tests' list of files.

To give nodes a new file, add one line to `NODE_FILES` (its path under /opt/fmcluster, which is its path under
`fmcluster/` too); to run a new script as a step, add one line to `STEPS` and call it where the orchestrator runs its
steps (`node_scripts.pcs_steps` for PCS, `node/hyperpod/on_create.sh` for HyperPod), then re-render the runner's
table: `python -c "import fmcluster.node_scripts as n; n.write_rendered_scripts()"`.

Example::

    >>> node_file("node/lib.sh").mode == 0o644
    True
    >>> step("lustre").required, step("observability").required
    (True, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Literal

from fmcluster.names import LUSTRE_MOUNT_PATH, SHARED_DIRECTORIES

NODE_ROOT = "/opt/fmcluster"
"""Where every node file lands, on both orchestrators (`NodeFile.path` is relative to it)."""
MANIFEST = "manifest"
"""The file, at the top of the bundle and of the lifecycle archive, listing every node file as `MODE PATH` lines."""
EXECUTABLE = 0o755
SOURCED = 0o644
"""Files sourced or read, never run (lib.sh, ssm.sh, the dashboards)."""


@dataclass(frozen=True)
class NodeFile:
    """One file a node receives: `path` under /opt/fmcluster, its mode there, and where it is in the package.

    Args:
        path: where it lands, relative to `NODE_ROOT` (e.g. "node/lib.sh" -> /opt/fmcluster/node/lib.sh).
        mode: its mode on the node. Omitted: 0755.
        source: its path under `fmcluster/` in the package. Omitted: `path`.
    """

    path: str
    mode: int = EXECUTABLE
    source: str | None = None

    @property
    def package_path(self) -> str:
        return self.source or self.path


NODE_FILES: tuple[NodeFile, ...] = (
    NodeFile("node/lib.sh", SOURCED),
    NodeFile("node/mirror.sh", SOURCED),
    NodeFile("node/run-step.sh"),
    NodeFile("node/package-updates.sh"),
    NodeFile("node/image-check.sh"),
    NodeFile("node/nvme-raid.sh"),
    NodeFile("node/mount-lustre.sh"),
    NodeFile("node/lnet-efa.sh"),
    NodeFile("node/lustre-efa-check.sh"),
    NodeFile("node/nccl-env.sh"),
    NodeFile("node/enroot-pyxis.sh"),
    NodeFile("node/slurm-hooks.sh"),
    NodeFile("node/slurm/task-prolog.sh"),
    NodeFile("node/slurm/gpu-job-map.sh"),
    NodeFile("node/image-watch.sh"),
    NodeFile("node/training-image.sh"),
    NodeFile("node/observability.sh"),
    NodeFile("node/hyperpod/ssm.sh", SOURCED),
    NodeFile("node/hyperpod/import-image.sh"),
    NodeFile("node/hyperpod/slurm-hold.sh"),
    NodeFile("node/block-end-drain.sh"),
    NodeFile("node/plan-end-drain.sh"),
    NodeFile("node/fabric-check.sh"),
    NodeFile("node/shared-dirs.sh"),
    NodeFile("node/users.sh"),
    NodeFile("node/slurm-accounting.sh"),
    NodeFile("nccl-tests.sbatch", source="node/nccl-tests.sbatch"),  # at the top, where users find it
)
"""Every file of `fmcluster/node/` a node receives, one line each (the dashboards folder comes with `DASHBOARDS`)."""
DASHBOARDS = "dashboards"
"""The package folder observability.sh reads (agent.yml, rules/, Grafana dashboards): every file, 0644, under
/opt/fmcluster/dashboards."""


@dataclass(frozen=True)
class Step:
    """One step of a node's set-up, run by `node/run-step.sh NAME [ARGUMENTS...]`.

    Args:
        name: the step's name (also the PCS lifecycle action's name: letters, digits, ' ', '_', '-').
        script: the script it runs, under /opt/fmcluster/node.
        required: a node cannot train without it: its failure fails the node (PCS: the lifecycle action's
            onError TERMINATE; HyperPod: the lifecycle fails and the node stays drained). Otherwise it only warns.
        consequence: what a warn-only step's failure means, in its one WARNING line.
        needs: steps that must have succeeded first; without them the step is skipped (and counts as failed).
        bake: what a baked node image (`orchestrator.node_image: baked`) does with the step. "boot" (default): only
            nodes run it, at boot. "also": the image build runs it too (`run-step.sh bake`), so what it installs is in
            the image; nodes run it again, and it finds its software there and only configures. "image": the image
            build runs it and a node of a baked image skips it (what it does is all on the image's disk already).
    """

    name: str
    script: str
    required: bool
    consequence: str = ""
    needs: tuple[str, ...] = ()
    bake: Literal["boot", "also", "image"] = "boot"


_SHARED = ", ".join(f"{LUSTRE_MOUNT_PATH}/{name}" for name, _ in SHARED_DIRECTORIES)
INSTALL = "install"
"""The runner's built-in first step: the node files, from the bundle or the lifecycle directory, into /opt/fmcluster."""
STEPS: tuple[Step, ...] = (
    Step("hold", "hyperpod/slurm-hold.sh", False, "Slurm may give this node a job before its set-up is done"),
    Step("updates", "package-updates.sh", False, "upgrades may restart slurmd or change the driver", bake="image"),
    Step("scratch", "nvme-raid.sh", True),
    Step("lustre", "mount-lustre.sh", True),
    Step("shared-dirs", "shared-dirs.sh", False, f"users cannot write in {_SHARED} until an administrator makes them"),
    Step("nccl", "nccl-env.sh", True),
    # warn-only while the mirror holds no pinned enroot/pyxis digests (fmcluster/mirror/artifacts.json, issue 22): on an
    # image without them a required step would fail every node, and on PCS TERMINATE would relaunch it in a loop
    Step(
        "enroot",
        "enroot-pyxis.sh",
        False,
        "jobs cannot use --container-image (no enroot/pyxis on this node)",
        bake="also",
    ),
    Step("slurm-hooks", "slurm-hooks.sh", False, "jobs get the submitter's environment, not the group's NCCL settings"),
    Step("users", "users.sh", True),
    Step(
        "accounting",
        "slurm-accounting.sh",
        False,
        "the users have no Slurm association: their jobs run outside it, or are refused where Slurm enforces it",
        ("users",),
    ),
    Step("image", "hyperpod/import-image.sh", False, "jobs pull the training image from ECR", ("enroot",)),
    Step("image-watch", "image-watch.sh", False, "a training image published later is not imported", ("enroot",)),
    Step("observability", "observability.sh", False, "the node runs without metrics"),
    Step("plan-drain", "plan-end-drain.sh", False, "jobs are not asked to checkpoint before a training plan ends"),
    # warn-only: the script drains a node that fails (reason "fmcluster fabric: ..."), which keeps it from jobs; a
    # required step would instead end the node on PCS (TERMINATE) and fail the whole cluster's creation on HyperPod
    Step("fabric", "fabric-check.sh", False, "the node is drained in Slurm if Slurm knows it (sinfo -R says why)"),
    Step("release", "hyperpod/slurm-hold.sh", True),
)
"""Every step, one line each, in the order they run (an orchestrator runs those that apply to the node)."""


def node_file(path: str) -> NodeFile:
    """The entry of `NODE_FILES` for `path` (under /opt/fmcluster)."""
    for entry in NODE_FILES:
        if entry.path == path:
            return entry
    raise KeyError(f"{path!r} is no node file; known: {', '.join(entry.path for entry in NODE_FILES)}")


def baked_steps() -> tuple[Step, ...]:
    """The steps an image build runs (`Step.bake` "also" or "image"), in their order: what a baked image holds.

    >>> [entry.name for entry in baked_steps()]
    ['updates', 'enroot']
    """
    return tuple(entry for entry in STEPS if entry.bake != "boot")


def step(name: str) -> Step:
    """The entry of `STEPS` named `name`."""
    for entry in STEPS:
        if entry.name == name:
            return entry
    raise KeyError(f"{name!r} is no step; known: {', '.join(entry.name for entry in STEPS)}")


def _folder_files(folder: Traversable, prefix: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for entry in folder.iterdir():
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            found.update(_folder_files(entry, f"{prefix}{entry.name}/"))
        else:
            found[f"{prefix}{entry.name}"] = entry.read_bytes()
    return found


def dashboard_files() -> dict[str, bytes]:
    """Every file of the package's dashboards folder, by path relative to it (e.g. "rules/alerts.yml")."""
    return dict(sorted(_folder_files(resources.files("fmcluster").joinpath(DASHBOARDS), "").items()))


def node_tree() -> dict[str, tuple[bytes, int]]:
    """Every node file: path under /opt/fmcluster -> (content, mode), with the `manifest` that lists them.

    The PCS bundle and the HyperPod lifecycle archive are this tree (the archive adds its entry script and
    settings), so a file lands in the same place with the same mode on both."""
    package = resources.files("fmcluster")
    files = {entry.path: (package.joinpath(entry.package_path).read_bytes(), entry.mode) for entry in NODE_FILES}
    files |= {f"{DASHBOARDS}/{name}": (data, SOURCED) for name, data in dashboard_files().items()}
    return with_manifest(files)


IMAGE_FILES = ("node/lib.sh", "node/mirror.sh", "node/run-step.sh", "node/image-check.sh")
"""What every image build needs besides its steps' scripts: the runner, the helpers, the mirror's pins, the check."""


def image_tree() -> dict[str, tuple[bytes, int]]:
    """The node files an image build installs (`run-step.sh bake`): `IMAGE_FILES` and the scripts of `baked_steps()`,
    with their `manifest`. Only a change of these rebuilds a baked image; a node of it installs the whole tree at boot.
    """
    keep = {*IMAGE_FILES, *(f"node/{entry.script}" for entry in baked_steps())}
    return with_manifest({path: entry for path, entry in node_tree().items() if path in keep})


def with_manifest(files: dict[str, tuple[bytes, int]]) -> dict[str, tuple[bytes, int]]:
    """`files` (path -> (content, mode)) and the `manifest` listing them, sorted by path."""
    files = {path: entry for path, entry in files.items() if path != MANIFEST}
    listing = "".join(f"{mode:04o} {path}\n" for path, (_, mode) in sorted(files.items()))
    files[MANIFEST] = (listing.encode("ascii"), SOURCED)
    return dict(sorted(files.items()))
