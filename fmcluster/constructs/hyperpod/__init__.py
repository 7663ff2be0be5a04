"""SageMaker HyperPod with API-driven Slurm: the cluster (`cluster`), its execution role (`role`), and its nodes'
lifecycle scripts, their bucket and settings (`lifecycle`)."""

from fmcluster.constructs.hyperpod.cluster import HyperPodSlurmCluster
from fmcluster.constructs.hyperpod.lifecycle import (
    LIFECYCLE_ENV,
    LIFECYCLE_PREFIX,
    lifecycle_bucket_name,
    lifecycle_files,
    lifecycle_settings,
)

__all__ = [
    "LIFECYCLE_ENV",
    "LIFECYCLE_PREFIX",
    "HyperPodSlurmCluster",
    "lifecycle_bucket_name",
    "lifecycle_files",
    "lifecycle_settings",
]
