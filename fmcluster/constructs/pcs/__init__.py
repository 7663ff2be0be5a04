"""AWS PCS: `PcsSlurmCluster` (`cluster`: the cluster, its node groups, login node, node bundle and grants) and the
checks of its props (`prop_rules`, run before anything is built)."""

from fmcluster.constructs.pcs.cluster import GPU_JOB_MAP, PcsSlurmCluster, cluster_size

__all__ = ["GPU_JOB_MAP", "PcsSlurmCluster", "cluster_size"]
