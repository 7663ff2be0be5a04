"""The cluster file: typed, frozen models, every rule of the contract, and its error messages."""

from fmcluster.config.errors import ConfigError, Problem
from fmcluster.config.loader import load, parse
from fmcluster.config.models import ClusterConfig, ComputeGroup, Image, Lustre, Repository

__all__ = ["ClusterConfig", "ComputeGroup", "ConfigError", "Image", "Lustre", "Problem", "Repository", "load", "parse"]
