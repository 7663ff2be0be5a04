"""What both cluster stacks (PCS and HyperPod) add next to their nodes."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from fmcluster.config import ClusterConfig
from fmcluster.config.models import rendered_users
from fmcluster.constructs.nccl_tuning import NcclTuning
from fmcluster.names import users_parameter_name
from fmcluster.stacks.mirror import MirrorStack
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
        without_efa=[group.name for group in config.compute if not group.efa],
        removal_policy=cdk.RemovalPolicy.RETAIN if config.storage.retain_on_delete else cdk.RemovalPolicy.DESTROY,
    )


def artifact_mirror(storage: StorageStack, mirror: MirrorStack | None) -> str:
    """The project's artifact mirror, in every egress mode: enroot, pyxis and the exporters come from it only
    (`fmcluster.mirror`). `s3://<data bucket>/fmcluster-mirror` of the storage stack with `orchestrator.node_image:
    boot`, the mirror stack's bucket with `baked` (`mirror_has_own_stack`). A deploy-time value of the mirror's
    custom resource, so the nodes' stack deploys only once the mirror job has filled it; the node role needs
    `grant_mirror_read`."""
    if mirror is not None:
        return mirror.mirror.uri
    assert storage.mirror is not None, "the storage stack holds the mirror when no mirror stack does"
    return storage.mirror.uri


def grant_mirror_read(role: iam.IRole, mirror: MirrorStack | None) -> None:
    """Let `role` read the artifact mirror: the mirror stack's read policy, or nothing when the storage stack holds
    the mirror (its `node_data_policy`, which every node role attaches, reads the data bucket: the grant boot
    clusters always had, so their node roles do not change)."""
    if mirror is not None:
        role.add_managed_policy(mirror.mirror.read_policy)


def users_parameter(scope: Construct, config: ClusterConfig) -> ssm.StringParameter:
    """The cluster file's `users` in SSM (`/fmcluster/<cluster>/users`, standard tier: the file's rule keeps them
    within its 4 KB), which every node's users.sh reads; `fmcluster.config.users.NO_USERS` without users. It exists,
    and every node runs the users step, from the first deploy: editing `users` (the first ones too) changes only this
    value: no launch template, no node group."""
    return ssm.StringParameter(
        scope,
        "Users",
        parameter_name=users_parameter_name(config.name),
        string_value=rendered_users(config.users),
        description=f"{config.name}: cluster users as NAME UID ADMIN [KEY] lines (fmcluster/node/users.sh)",
        tier=ssm.ParameterTier.STANDARD,
    )
