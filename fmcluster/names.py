"""Every name fmcluster gives things that more than one module must agree on, defined once: stack names, mount paths,
reserved node-group names and SSM parameter names.

Plain strings and functions only (no CDK, no pydantic): the cluster file's rules, the constructs, the stacks, the
live checks and the CLI all import them.

>>> stack_name("llm", STORAGE_STACK), image_parameter_name("llm"), nccl_parameter_name("/fmcluster/llm", "gpu")
('llm-storage', '/fmcluster/llm/image-uri', '/fmcluster/llm/gpu/nccl-env')
"""

from __future__ import annotations

# --- stacks: `<cluster name>-<part>` ---------------------------------------------------------------------------
NETWORK_STACK = "network"
MIRROR_STACK = "mirror"
STORAGE_STACK = "storage"
DATA_LINKS_STACK = "data-links"
IMAGE_STACK = "image"
NODE_IMAGE_STACK = "node-image"
NODE_IMAGE_TAG = "fmcluster:node-image"
"""The tag of a PCS node group naming its baked node image by digest (stacks.cluster_pcs; update_plan reads it)."""
CLUSTER_STACK = "cluster"
OBSERVABILITY_STACK = "observability"


def stack_name(cluster_name: str, part: str) -> str:
    """The CloudFormation stack of one part of a cluster file's app: `llm-storage`."""
    return f"{cluster_name}-{part}"


# --- mount paths ---------------------------------------------------------------------------------------------
LUSTRE_MOUNT_PATH = "/fsx"
"""Where every node mounts the FSx for Lustre file system (HyperPod's storage config, PCS nodes' mount-lustre.sh)."""
HOMES_PATH = f"{LUSTRE_MOUNT_PATH}/home"
"""Where the cluster file's users have their homes, `<HOMES_PATH>/<name>` (users.sh; /home on a node without /fsx)."""
SHARED_DIRECTORIES: tuple[tuple[str, int], ...] = (("checkpoints", 0o1777), ("datasets", 0o1777), ("jobs", 0o1777))
"""The directories under `LUSTRE_MOUNT_PATH` every user writes in, with their modes (shared-dirs.sh makes them): the
first job's (examples/jobs: checkpoints under /fsx/checkpoints/<user>/, data from /fsx/datasets, the job copied to
/fsx/jobs). 1777 as /tmp: everyone may add an entry, and the sticky bit keeps one user from removing or renaming
another's (chmod(2), S_ISVTX)."""
CHECKPOINTS_PATH = f"{LUSTRE_MOUNT_PATH}/checkpoints"
"""Where train.py writes checkpoints, `<CHECKPOINTS_PATH>/<user>/<job name>/` (examples/jobs/train.py's default)."""
DATASETS_PATH = f"{LUSTRE_MOUNT_PATH}/datasets"
"""Where train.py reads its data (examples/jobs/train.py's default; the quickstart links /datasets to S3)."""
JOBS_PATH = f"{LUSTRE_MOUNT_PATH}/jobs"
"""Where docs/first-job.md copies the first job to."""

# --- node groups -----------------------------------------------------------------------------------------------
CONTROLLER_GROUP = "controller"
"""HyperPod's instance group (Slurm node type Controller) of the controller."""
LOGIN_GROUP = "login"
"""The node group (HyperPod instance group, PCS node group) of the login node."""
HEAD_GROUP = "head"
"""The PCS node group of the head node when there is no login node. A PCS ComputeNodeGroupName (botocore `pcs`
2023-02-10: 3-25 characters, `(?!pcs_)^[A-Za-z][A-Za-z0-9-]+`, no underscore)."""
RESERVED_GROUP_NAMES = (CONTROLLER_GROUP, LOGIN_GROUP, HEAD_GROUP)
"""Names no compute group may take: the cluster's own groups."""

# --- SSM parameters: `/fmcluster/<cluster name>/...` ------------------------------------------------------------


def parameter_prefix(cluster_name: str) -> str:
    """The SSM path of one cluster's own parameters."""
    return f"/fmcluster/{cluster_name}"


def image_parameter_name(cluster_name: str) -> str:
    """The SSM String parameter holding the training image's `<repository-uri>@<digest>`, which the nodes read."""
    return f"{parameter_prefix(cluster_name)}/image-uri"


def image_build_parameter_name(cluster_name: str) -> str:
    """The SSM parameter naming the training image's build (for the nodes' image watch)."""
    return f"{parameter_prefix(cluster_name)}/image-build"


def prometheus_endpoint_parameter_name(cluster_name: str) -> str:
    """The SSM parameter holding the Amazon Managed Service for Prometheus remote-write endpoint."""
    return f"{parameter_prefix(cluster_name)}/observability/prometheus-endpoint"


def users_parameter_name(cluster_name: str) -> str:
    """The SSM String parameter holding the cluster file's users as the nodes read them (`users.sh sync`: at boot,
    then every 10 minutes)."""
    return f"{parameter_prefix(cluster_name)}/users"


def nccl_parameter_name(prefix: str, group: str) -> str:
    """The SSM parameter one compute group's nodes read their NCCL environment from, under `prefix`."""
    return f"{prefix}/{group}/nccl-env"
