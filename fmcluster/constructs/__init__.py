"""fmcluster's L3 constructs: each module is named after the construct it holds.

- `network` TrainingNetwork, `existing_network` ExistingNetwork (a VPC and subnet of your own), `efa`
  EfaLaunchTemplate (named after what it wires), `lustre` LustreStorage (and
  LustreMount, a file system created elsewhere), `buckets` ProjectBuckets, `image` TrainingImage, `observability`
  ClusterObservability, `pcs` PcsSlurmCluster, `node_image` BakedNodeImage (an AMI built by EC2 Image Builder);
- `nccl_tuning` NcclTuning and `nccl_validation` NcclValidation (deployed in different stacks; the pure NCCL rules
  they share are `fmcluster.nccl`);
- `hyperpod/` HyperPodSlurmCluster (`cluster`), its execution role (`role`) and its lifecycle scripts (`lifecycle`).

Helpers, not constructs: `props` (validation of props with the cluster file's rules, which live in
`fmcluster.config.value_rules`), `functions` (what Lambda functions share), `nag` (cdk-nag acknowledgments).
"""

from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.efa import EfaLaunchTemplate
from fmcluster.constructs.existing_network import ExistingNetwork
from fmcluster.constructs.hyperpod import HyperPodSlurmCluster
from fmcluster.constructs.image import TrainingImage
from fmcluster.constructs.lustre import LustreMount, LustreStorage
from fmcluster.constructs.nccl_tuning import NcclTuning
from fmcluster.constructs.nccl_validation import NcclValidation
from fmcluster.constructs.network import TrainingNetwork
from fmcluster.constructs.node_image import BakedNodeImage
from fmcluster.constructs.observability import ClusterObservability
from fmcluster.constructs.pcs import PcsSlurmCluster

__all__ = [
    "BakedNodeImage",
    "ClusterObservability",
    "EfaLaunchTemplate",
    "ExistingNetwork",
    "HyperPodSlurmCluster",
    "LustreMount",
    "LustreStorage",
    "NcclTuning",
    "NcclValidation",
    "PcsSlurmCluster",
    "ProjectBuckets",
    "TrainingImage",
    "TrainingNetwork",
]
