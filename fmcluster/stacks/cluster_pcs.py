"""The cluster stack for `orchestrator.type: pcs`: AWS PCS, EFA launch templates, node bootstrap."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, cast

import aws_cdk as cdk
from constructs import Construct

from fmcluster.catalog import instance_architecture
from fmcluster.config import ClusterConfig
from fmcluster.config.orchestrators import pcs as pcs_rules
from fmcluster.config.orchestrators.pcs import head_group as pcs_head_group
from fmcluster.constructs.keys import encrypt_log_groups
from fmcluster.constructs.pcs import PcsSlurmCluster
from fmcluster.names import NODE_IMAGE_TAG, users_parameter_name
from fmcluster.stacks.cluster_services import artifact_mirror, grant_mirror_read, nccl_tuning, users_parameter
from fmcluster.stacks.mirror import MirrorStack
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.node_image import NodeImageStack
from fmcluster.stacks.outputs import add_output
from fmcluster.stacks.storage import StorageStack

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2

NAME_TAG_PRIORITY = 101
"""Above the default priority (100) with which ec2.LaunchTemplate sets its Name tag."""


class PcsClusterStack(cdk.Stack):
    """`PcsSlurmCluster` configured from the cluster file: one node group and queue per compute group.

    The nodes sit in the network's compute subnet (in `availability_zone_id`, where a reservation's capacity is) and
    its EFA security group, which the file system already admits; each compute group gets its placement group from the
    network stack. The storage stack's FSx for Lustre file system is mounted at /fsx on every node. The node role gets
    the storage stack's node data policy (read datasets, read and write checkpoints), as HyperPod's execution role
    does.
    `orchestrator.login_instance_type` adds the login node (the head node); with `observability.prometheus: managed`
    every node runs observability.sh, taking its downloads from the artifact mirror as every other step does (the
    data bucket's fmcluster-mirror/ prefix, or the mirror stack's bucket with a baked node image, in every egress
    mode). `compliance: control-tower` turns on detailed monitoring. With `orchestrator.node_image: baked`, every node
    group runs the node-image stack's image of its architecture, and the node role also gets the mirror stack's read
    policy.
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
        node_image: NodeImageStack | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        orchestrator = config.orchestrator
        self.slurm = PcsSlurmCluster(
            self,
            "Slurm",
            cluster_name=config.name,
            subnet=network.network.compute_subnet,
            security_groups=[network.network.efa_security_group],
            compute_groups=config.compute,
            placement_groups=network.placement_groups,
            login_instance_type=orchestrator.login_instance_type,
            file_system=storage.lustre,
            prometheus=config.observability.prometheus,
            grafana=config.observability.grafana,
            artifact_mirror=artifact_mirror(storage, mirror),
            users_parameter=users_parameter_name(config.name),
            ami_id=orchestrator.ami_id,
            node_images=node_image.image_ids if node_image is not None else None,
            image_refresh=orchestrator.image_refresh,
            slurm_version=orchestrator.slurm_version,  # type: ignore[arg-type]  # resolved for pcs by the model
            size=orchestrator.size,
            detailed_monitoring=config.compliance == "control-tower",
            accounting=orchestrator.accounting,
            enforce_associations=pcs_rules.enforces_associations(
                orchestrator, config.observability, bool(config.users)
            ),
        )
        if node_image is not None:
            _tag_node_images(self.slurm, node_image)
        self.slurm.role.add_managed_policy(storage.node_data_policy)
        grant_mirror_read(self.slurm.role, mirror)
        self.nccl = nccl_tuning(self, config)
        self.users = users_parameter(self, config)
        for group in self.slurm.node_groups.values():  # the users step (required) reads it at boot
            group.node.add_dependency(self.users)
        self.node_role = self.slurm.role
        """The role every node of the cluster runs with."""
        self.node_bundle = self.slurm.node_bundle
        _keep_released_logical_ids(self.slurm)
        encrypt_log_groups(self, storage.buckets.key)
        add_output(self, "cluster", "Orchestrator", "pcs")
        add_output(self, "cluster", "ClusterName", config.name)
        add_output(self, "cluster", "ClusterId", self.slurm.cluster.attr_id)
        add_output(self, "cluster", "ClusterArn", self.slurm.cluster.attr_arn)
        head = pcs_head_group(orchestrator, config.observability)
        if head is not None:  # without a login or head node there is no node to name: connect takes --group
            add_output(self, "cluster", "HeadNodeGroup", head[1])
            add_output(self, "cluster", "HeadNodeGroupId", self.slurm.node_groups[head[1]].attr_id)


def _tag_node_images(cluster: PcsSlurmCluster, node_image: NodeImageStack) -> None:
    """Tag every node group with its baked image's digest, so a rebuilt image changes this stack's template.

    The node groups take the image id from the node-image stack's output (`Fn::GetStackOutput`), whose text stays the
    same when the image is rebuilt: without a change of its own, the CDK CLI may skip this stack and the node groups
    keep the old image (FACTS.md: unconfirmed). The tag changes with the digest, so the stack is deployed, its AmiId
    resolved anew, and `fmcluster plan --previous` sees which node groups move (update_plan.IN_PLACE_EFFECTS).
    """
    for group in cluster.node_groups.values():
        (config,) = cast("list", group.instance_configs)
        image = node_image.images[instance_architecture(config.instance_type)]
        cdk.Tags.of(group).add(NODE_IMAGE_TAG, image.digest)


def _keep_released_logical_ids(cluster: PcsSlurmCluster) -> None:
    """The launch templates keep the logical ids (and the login template its Name tag) they had as children of this
    stack, before they moved into `PcsSlurmCluster`, so upgrading fmcluster does not replace them and roll every node
    group onto new ones.

    CDK's own advice for a refactor that moves resources (`overrideLogicalId`).
    """
    templates = {f"{name}LaunchTemplate": lt.launch_template for name, lt in cluster.launch_templates.items()}
    if cluster.login_template is not None:
        templates["loginLaunchTemplate"] = cast("ec2.CfnLaunchTemplate", cluster.login_template.node.default_child)
        # ec2.LaunchTemplate tags its instances and volumes Name=<construct path>; a new path would be a new template
        # version, and PCS launches the login node's replacements from it.
        released_name = f"{cdk.Stack.of(cluster).stack_name}/loginLaunchTemplate"
        cdk.Tags.of(cluster.login_template).add("Name", released_name, priority=NAME_TAG_PRIORITY)
    for construct_id, resource in templates.items():
        resource.override_logical_id(released_logical_id(f"{construct_id}/Resource"))


def released_logical_id(path: str) -> str:
    """The logical id CDK gives a resource at `path` under a stack (aws-cdk-lib `makeUniqueId`: the path's
    components, letters and digits only, then the first 8 hex digits of the MD5 of the path, upper case).

    >>> released_logical_id("gpuLaunchTemplate/Resource")
    'gpuLaunchTemplate1B3D7A93'
    """
    components = [part for part in path.split("/") if part != "Default"]
    human = "".join(re.sub(r"[^A-Za-z0-9]", "", part) for part in components if part != "Resource")
    return human + hashlib.md5("/".join(components).encode()).hexdigest()[:8].upper()
