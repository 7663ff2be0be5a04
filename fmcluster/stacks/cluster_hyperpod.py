"""The cluster stack for `orchestrator.type: hyperpod-slurm`: SageMaker HyperPod with API-driven Slurm."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from fmcluster.config import ClusterConfig
from fmcluster.constructs.hyperpod import HyperPodSlurmCluster
from fmcluster.constructs.hyperpod.lifecycle import CONTROLLER_GROUP
from fmcluster.constructs.image import grant_image_pull
from fmcluster.constructs.keys import encrypt_log_groups
from fmcluster.names import users_parameter_name
from fmcluster.stacks.cluster_services import artifact_mirror, grant_mirror_read, nccl_tuning, users_parameter
from fmcluster.stacks.mirror import MirrorStack
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.outputs import add_output
from fmcluster.stacks.storage import StorageStack


class HyperPodClusterStack(cdk.Stack):
    """`HyperPodSlurmCluster` configured from the cluster file: one Slurm partition per compute group.

    The nodes' interfaces sit in the network's compute subnet (in `availability_zone_id`, where a training plan's
    capacity is) and in its EFA security group, which the file system already admits; the storage stack's FSx for
    Lustre file system is mounted at /fsx on every node. The execution role gets the storage stack's node data
    policy (read datasets, read and write checkpoints), as AWS PCS nodes do. `orchestrator.controller_instance_type`
    and `login_instance_type` size the controller and the optional login node. The node log group follows
    `storage.retain_on_delete`. With `observability.prometheus: managed` every node runs observability.sh (the
    controller as head node, with Grafana when `observability.grafana` is `self-hosted`), taking its downloads from
    the artifact mirror as every other step does (the data bucket's fmcluster-mirror/ prefix, or the mirror
    stack's bucket with a baked node image, in every egress mode).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        network: NetworkStack,
        storage: StorageStack,
        mirror: MirrorStack | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.hyperpod = HyperPodSlurmCluster(
            self,
            "HyperPod",
            cluster_name=config.name,
            subnet=network.network.compute_subnet,
            security_groups=[network.network.efa_security_group],
            compute_groups=config.compute,
            controller_instance_type=config.orchestrator.controller_instance_type,
            login_instance_type=config.orchestrator.login_instance_type,
            file_system=storage.lustre,
            image_repositories=(),  # by the image's tag below: no reference, so no wait for the image stack
            prometheus=config.observability.prometheus,
            grafana=config.observability.grafana,
            artifact_mirror=artifact_mirror(storage, mirror),
            users_parameter=users_parameter_name(config.name),
            removal_policy=cdk.RemovalPolicy.RETAIN if config.storage.retain_on_delete else cdk.RemovalPolicy.DESTROY,
        )
        self.hyperpod.role.add_managed_policy(storage.node_data_policy)
        grant_mirror_read(self.hyperpod.role, mirror)
        grant_image_pull(self.hyperpod.role, config.name, sign_in=False)  # the construct grants the sign-in
        self.nccl = nccl_tuning(self, config)
        self.users = users_parameter(self, config)
        self.node_role = self.hyperpod.role
        """The role every node of the cluster runs with."""
        encrypt_log_groups(self, storage.buckets.key)
        add_output(self, "cluster", "Orchestrator", "hyperpod-slurm")
        add_output(self, "cluster", "ClusterName", config.name)
        # HyperPod's cluster id is the last part of its ARN (arn:...:cluster/<id>), what its SSM targets name.
        add_output(self, "cluster", "ClusterId", cdk.Fn.select(1, cdk.Fn.split("/", self.hyperpod.cluster_arn)))
        add_output(self, "cluster", "ClusterArn", self.hyperpod.cluster_arn)
        add_output(self, "cluster", "HeadNodeGroup", CONTROLLER_GROUP)
