"""fmcluster's L3 constructs, one per module."""

from fmcluster.constructs.network import TrainingNetwork

__all__ = ["TrainingNetwork"]
