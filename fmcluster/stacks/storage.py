"""The storage stack: the project's KMS key and buckets, and FSx for Lustre linked to them."""

from __future__ import annotations

from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.config import ClusterConfig
from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.existing_network import ExistingNetwork
from fmcluster.constructs.keys import encrypt_log_groups
from fmcluster.constructs.lustre import ExistingFileSystemAccess, LustreMount, LustreStorage
from fmcluster.constructs.mirror import ArtifactMirror
from fmcluster.constructs.nccl_validation import NcclValidation
from fmcluster.constructs.network import TrainingNetwork
from fmcluster.stacks.mirror import mirror_has_own_stack
from fmcluster.stacks.outputs import add_output


class StorageStack(cdk.Stack):
    """`ProjectBuckets` and `LustreStorage` configured from the cluster file's `storage` section, without its S3 links;
    with `storage.lustre.file_system_id`, no file system: the existing one is mounted (`LustreMount`) and only the
    nodes' egress to its security group is added; with `storage.lustre: none`, no file system at all (`lustre` is None:
    the cluster stacks mount nothing, and nothing is imported into /fsx).

    The file system sits in the network's compute subnet and admits the nodes' EFA security group. With
    `storage.retain_on_delete: true` (the default) the stack is termination-protected and the key, buckets,
    file system and its log group are retained by `cdk destroy` and on replacement; with `false` the stack is
    not protected and they are deleted with it (buckets emptied first).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        network: TrainingNetwork | ExistingNetwork,
        **kwargs,
    ) -> None:
        retain = config.storage.retain_on_delete
        kwargs["termination_protection"] = retain
        super().__init__(scope, construct_id, **kwargs)
        removal_policy = cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY
        lustre = config.storage.lustre

        self.buckets = ProjectBuckets(self, "Buckets", removal_policy=removal_policy)
        self.lustre: LustreStorage | LustreMount | None = None
        """The file system the nodes mount: created here, or (`storage.lustre.file_system_id`) an existing one; None
        with `storage.lustre: none`."""
        if lustre is None:
            pass
        elif lustre.existing:
            self.lustre = LustreMount(
                dns_name=cast(str, lustre.dns_name),  # required with file_system_id
                mount_name=cast(str, lustre.mount_name),
                efa=lustre.efa,
                file_system_id=lustre.file_system_id,
            )
            ExistingFileSystemAccess(
                self,
                "ExistingLustre",
                clients=network.efa_security_group,
                file_system_security_group_id=cast(str, lustre.security_group_id),
                efa=lustre.efa,
            )
        else:
            self.lustre = LustreStorage(
                self,
                "Lustre",
                vpc=network.vpc,
                subnet=network.compute_subnet,
                client_security_groups=[network.efa_security_group],
                capacity_gib=lustre.capacity_gib,
                throughput_per_tib=lustre.throughput_per_tib,
                efa=lustre.efa,
                compression=lustre.compression,
                metadata_iops=lustre.metadata_iops,
                # The S3 links live in a stack of their own (DataLinksStack), so the cluster need not wait for them.
                data_bucket=self.buckets.data_bucket,
                kms_key=self.buckets.key,
                removal_policy=removal_policy,
            )
        self.mirror = (
            ArtifactMirror(
                self, "Mirror", bucket=self.buckets.data_bucket, key=self.buckets.key, removal_policy=removal_policy
            )
            if not mirror_has_own_stack(config)
            else None
        )
        """With `orchestrator.node_image: boot`, every file a node installs, copied in by a job outside the VPC while
        the file system is created (beside it, so it adds nothing to the deploy's critical path); the cluster stacks
        give `mirror.uri` to the nodes, who read it through `node_data_policy`. None with `baked`: the mirror stack
        holds it then (`fmcluster.stacks.mirror`)."""
        self.node_data_policy = self._node_data_policy()
        """What cluster nodes may do with the project's data: read datasets, read and write checkpoints.
        Attach it to node roles (`role.add_managed_policy(...)`) in the cluster stack."""
        accelerated = [(group.name, group.instance_type) for group in config.compute if group.instance.is_accelerated]
        self.nccl_tests = (
            NcclValidation(
                self,
                "NcclTests",
                cluster_name=config.name,
                results_bucket=self.buckets.checkpoints_bucket,
                groups=accelerated,
                removal_policy=removal_policy,
            )
            if accelerated
            else None
        )
        """nccl-tests results uploaded under nccl-tests/ in the checkpoints bucket become metrics; the observability
        stack adds the alarms (`add_alarms`), next to the alarm topic. Only accelerated groups run nccl-tests and have
        a baseline; a cluster of general-purpose groups only has none."""
        encrypt_log_groups(self, self.buckets.key)
        outputs = [
            ("DataBucket", self.buckets.data_bucket.bucket_name),
            ("CheckpointsBucket", self.buckets.checkpoints_bucket.bucket_name),
        ]
        if self.lustre is not None:
            outputs += [
                ("FileSystemId", cast(str, self.lustre.file_system_id)),
                ("FileSystemDnsName", self.lustre.dns_name),
                ("FileSystemMountName", self.lustre.mount_name),
            ]
        for key, value in outputs:
            add_output(self, "storage", key, value)

    def _node_data_policy(self) -> iam.ManagedPolicy:
        policy = iam.ManagedPolicy(
            self,
            "NodeDataAccess",
            description="fmcluster nodes: read the data bucket, read and write the checkpoints bucket",
            statements=self.buckets.node_access_statements(),
        )
        self.buckets.acknowledge_node_access(policy)
        return policy
