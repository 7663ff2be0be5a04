"""Warnings about a valid cluster file: it will deploy, but probably not do what its author wants."""

from __future__ import annotations

import re
from dataclasses import replace

from fmcluster import nccl, sizing
from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.config.models import IMAGE_KEY_OF_NCCL_PROP
from fmcluster.problems import Problem, note, warning


def warnings(config: ClusterConfig) -> list[Problem]:
    """Every warning for `config`: checkpoint time, NCCL variables to drop, an image that cannot run."""
    return [
        *sizing.checkpoint_warnings(config),
        *nccl_env_warnings(config),
        *image_floor_warnings(config),
        *image_architecture_warnings(config),
        *uncataloged_accelerator_warnings(config),
        *no_file_system_warnings(config),
        *accounting_notes(config),
    ]


def nccl_env_warnings(config: ClusterConfig) -> list[Problem]:
    """`nccl.env` variables that are obsolete or that aws-ofi-nccl sets better itself, per instance type."""
    versions = config.image.nccl_versions()
    seen: dict[str, Problem] = {}
    for group in config.compute:
        for found in nccl.obsolete_variables(config.nccl.env, versions, instance_type=group.instance_type):
            seen.setdefault(found.path, found.at("nccl.env"))
    return list(seen.values())


def image_floor_warnings(config: ClusterConfig) -> list[Problem]:
    """Image versions that meet the P5-class requirement but not aws-ofi-nccl's recommendation (below it, the
    file is refused: `Image.problems_for`)."""
    p5_class = [group.instance_type for group in config.compute if nccl.is_p5_class(group.instance)]
    if not p5_class:
        return []
    return [
        replace(found, path=f"image.{IMAGE_KEY_OF_NCCL_PROP[found.path]}")
        for found in nccl.floor_warnings(p5_class[0], config.image.nccl_versions())
    ]


def image_architecture_warnings(config: ClusterConfig) -> list[Problem]:
    """The training image is built for x86_64; arm64 groups (p6e-gb200's Grace, Graviton types) cannot run it."""
    found = []
    for index, group in enumerate(config.compute):
        if group.instance.architecture != "arm64":
            continue
        arm64 = "arm64 (Grace)" if group.instance.is_accelerated else "arm64"
        found.append(
            warning(
                f"compute[{index}].instance_type",
                f"{group.instance_type} is {arm64}, but fmcluster builds the training image for x86_64; "
                "run jobs there from an arm64 image of your own",
            )
        )
    return found


ACCELERATED_FAMILY = re.compile(r"^(p|g|gr|trn|inf|dl|f|vt)\d")
"""EC2's accelerated-computing families by name (EC2 user guide, "Accelerated computing instances": P, G, Trn, Inf,
DL, F, VT): a type of theirs outside the catalog has GPUs or accelerators fmcluster does not know the layout of."""


def uncataloged_accelerator_warnings(config: ClusterConfig) -> list[Problem]:
    """An accelerated-family type outside the catalog runs as a general-purpose group: say what it goes without."""
    return [
        warning(
            f"compute[{index}].instance_type",
            f"{group.instance_type} is not in fmcluster's instance catalog, so it runs as a general-purpose group: no "
            "EFA, no GPU count in the plan, no nccl-tests baseline; its accelerators are used only as the node image "
            "and your jobs find them",
        )
        for index, group in enumerate(config.compute)
        if not group.instance.cataloged and ACCELERATED_FAMILY.match(group.instance_type)
    ]


NO_FILE_SYSTEM_WARNING = (
    "no shared file system: nothing is mounted at /fsx (HyperPod gets no FsxLustreConfig, PCS nodes no lustre "
    "step), so users' homes are local to each node (/home), the training image is not imported into /fsx (every job "
    "pulls it from ECR), checkpoints must go to S3 (the checkpoints bucket) or storage of your own, nccl-tests.sbatch "
    "and examples/jobs/train.sbatch need FMCLUSTER_SHARED_DIR set to a directory every node of a job shares to run on "
    "more than one node, and there is no CloudWatch FSx dashboard or free-space alarm (Grafana's FSx dashboard stays "
    "empty); omit storage.lustre for the default file system, or give storage.lustre.file_system_id to mount your own"
)
"""What a cluster without a file system does differently (users.sh's home base, hyperpod/on_create.sh's skipped image
step, the PCS cluster's steps without lustre and image-watch, nccl-tests.sbatch's ECR credentials directory,
train.sbatch's container mount; docs/cluster-file.md, `storage.lustre`)."""


def no_file_system_warnings(config: ClusterConfig) -> list[Problem]:
    """`storage.lustre: none`: the cluster works, but without what every node shares on /fsx."""
    return [warning("storage.lustre", NO_FILE_SYSTEM_WARNING)] if config.storage.lustre is None else []


def accounting_notes(config: ClusterConfig) -> list[Problem]:
    """With `users`: a warning when no node makes their Slurm associations, else a note on what fair share does."""
    if not config.users:
        return []
    orchestrator = orchestrators.of(config.orchestrator.type)
    if problem := orchestrator.associations_problem(config.orchestrator, config.observability):
        return [warning("users", problem)]
    enforcement = orchestrator.enforcement_note(config.orchestrator)
    return [
        note(
            "users",
            f"each user gets an association in Slurm account {config.name!r} with an equal share (Fairshare=1) and "
            f"QoS normal; {orchestrator.FAIR_SHARE_WEIGHT}; {enforcement} (docs/operations.md, 'Fair-share and QoS')",
        )
    ]
