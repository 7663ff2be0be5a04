"""fmcluster's L3 constructs, one per module."""

from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.efa import EfaLaunchTemplate
from fmcluster.constructs.hyperpod import HyperPodSlurmCluster
from fmcluster.constructs.lustre import LustreStorage
from fmcluster.constructs.network import TrainingNetwork
from fmcluster.constructs.pcs import PcsSlurmCluster

__all__ = [
    "EfaLaunchTemplate",
    "HyperPodSlurmCluster",
    "LustreStorage",
    "PcsSlurmCluster",
    "ProjectBuckets",
    "TrainingNetwork",
]
