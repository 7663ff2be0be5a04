"""SageMaker HyperPod with API-driven Slurm: the cluster (`cluster`), its execution role (`role`), and its nodes'
lifecycle scripts, their bucket and settings (`lifecycle`)."""

from fmcluster.constructs.hyperpod.cluster import HyperPodSlurmCluster
from fmcluster.constructs.hyperpod.lifecycle import (
    LIFECYCLE_DATA,
    LIFECYCLE_ENV,
    LIFECYCLE_PREFIX,
    LIFECYCLE_SCRIPTS,
    lifecycle_bucket_name,
    lifecycle_settings,
)

__all__ = [
    "LIFECYCLE_DATA",
    "LIFECYCLE_ENV",
    "LIFECYCLE_PREFIX",
    "LIFECYCLE_SCRIPTS",
    "HyperPodSlurmCluster",
    "lifecycle_bucket_name",
    "lifecycle_settings",
]
