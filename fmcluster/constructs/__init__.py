"""fmcluster's L3 constructs, one per module."""

from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.efa import EfaLaunchTemplate
from fmcluster.constructs.lustre import LustreStorage
from fmcluster.constructs.network import TrainingNetwork

__all__ = ["EfaLaunchTemplate", "LustreStorage", "ProjectBuckets", "TrainingNetwork"]
