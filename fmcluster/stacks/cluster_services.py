"""What both cluster stacks (PCS and HyperPod) add next to their nodes."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from fmcluster.config import ClusterConfig
from fmcluster.constructs.nccl_tuning import NcclTuning
from fmcluster.stacks.storage import StorageStack



def nccl_tuning(scope: Construct, config: ClusterConfig) -> NcclTuning:
    """The NCCL environment of every compute group in SSM, tuned for the versions built into the image."""
    return NcclTuning(
        scope,
        "Nccl",
        cluster_name=config.name,
        groups=[(group.name, group.instance_type) for group in config.compute],
        nccl_version=config.image.nccl,
        ofi_nccl_version=config.image.aws_ofi_nccl,
        efa_installer_version=config.image.efa_installer,
        user_env=config.nccl.env,
        removal_policy=cdk.RemovalPolicy.RETAIN if config.storage.retain_on_delete else cdk.RemovalPolicy.DESTROY,
    )


def observability_mirror(config: ClusterConfig, storage: StorageStack) -> str | None:
    """The project's artifact mirror, s3://<data bucket>/fmcluster-mirror, in every egress mode: the nodes install
    enroot, pyxis and the exporters from it only (`fmcluster.mirror`). A deploy-time value of the mirror's custom
    resource, so the nodes' stack waits until the mirror job has filled it."""
    return storage.mirror.uri
