"""PcsSlurmCluster: an AWS PCS Slurm cluster with static node groups on fmcluster's launch templates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_pcs as pcs
from aws_cdk import custom_resources as cr
from constructs import Construct

from fmcluster.catalog import instance_architecture
from fmcluster.config.checks import AMI_ID_PATTERN, api_name_problem
from fmcluster.config.models import (
    PCS_DEFAULT_SLURM_VERSION,
    PCS_MAX_NODES,
    PCS_SIZES,
    PCS_SLURM_VERSIONS,
    pcs_default_size,
)
from fmcluster.constructs.functions import provider_with_handler
from fmcluster.constructs.nag import acknowledge_wildcards
from fmcluster.node_scripts import INSTALL_DIR

GPU_JOB_MAP = f"{INSTALL_DIR}/slurm/gpu-job-map.sh"
"""fmcluster's Slurm Prolog and Epilog (the node bundle installs it before slurmd starts)."""

PurchaseOption = Literal["ONDEMAND", "CAPACITY_BLOCK"]


def cluster_size(nodes: int) -> str:
    """The default AWS PCS size for `nodes` instances: room to double (`pcs_default_size`), as the API spells it."""
    if nodes > PCS_MAX_NODES:
        raise ValueError(f"PcsSlurmCluster: {nodes} nodes exceed the {PCS_MAX_NODES:,} an AWS PCS cluster manages")
    return pcs_default_size(nodes).upper()


def _check_name(prop: str, shape: str, value: str) -> None:
    """ValueError when `value` breaks botocore's PCS shape `shape` (tokens are skipped)."""
    if problem := api_name_problem("pcs", shape, value):
        raise ValueError(f"PcsSlurmCluster: {prop}: {problem}")


class PcsSlurmCluster(Construct):
    """An AWS PCS cluster (managed Slurm controller) whose node groups run on `EfaLaunchTemplate`s.

    The controller lives in AWS's account and reaches the nodes through an interface in `subnet`, in
    `security_groups` (give the EFA group: it admits all traffic from itself, which covers slurmctld and slurmd).
    Node groups are static (min = max = count): training capacity is reserved or expensive, and a job must
    not wait for nodes to boot. Each compute node group gets a queue (Slurm partition) of the same name.

    Nodes share one instance profile whose role sits under the path `/aws-pcs/` (AWS PCS accepts no other
    role), may register with this cluster only, and may be managed through SSM. Without an `ami_id`, a node
    group runs the newest AWS PCS sample AMI (NVIDIA driver, EFA; Amazon Linux 2 up to Slurm 25.05, Amazon Linux
    2023 from 25.11) for the Slurm version
    and the instance's architecture, looked up at deploy time by a custom resource and kept until the
    version changes; production clusters usually pin an image of their own.

    Example::

        cluster = PcsSlurmCluster(stack, "Slurm", cluster_name="llm", subnet=network.compute_subnet,
                                  security_groups=[network.efa_security_group], expected_nodes=16)
        template = EfaLaunchTemplate(stack, "P5", instance_type="p5.48xlarge", subnet=network.compute_subnet,
                                     security_groups=[network.efa_security_group])
        cluster.add_node_group("gpu", instance_type="p5.48xlarge", count=16,
                               launch_template_id=template.launch_template_id,
                               launch_template_version=template.latest_version)

    Args:
        cluster_name: the PCS cluster's name (also tags and log names).
        subnet: where the controller's interface and every node live.
        security_groups: groups of the controller's interface; the nodes' groups come from their templates.
        slurm_version: a Slurm version AWS PCS supports. Omitted: 25.11.
        expected_nodes: how many instances all node groups will hold; picks the size when `size` is omitted: the
            smallest that manages twice as many (SMALL 32, MEDIUM 512, LARGE 2,048). Omitted: 32.
        size: "SMALL", "MEDIUM" or "LARGE". Size is create-only: changing it replaces the cluster with every node
            group and queue, so pin it once the cluster runs. Omitted: from `expected_nodes`.
        scale_down_idle_seconds: for node groups with min < max; static groups never scale. Omitted: 600.
        job_hook: the Prolog and Epilog every compute node runs as root (PCS runs Slurm configless, so only the
            cluster's Slurm custom settings can set them). Omitted: fmcluster's gpu-job-map.sh, which the node
            bundle installs before slurmd starts. None: no hook, for nodes without the bundle (a missing Prolog
            drains the node at its first job).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        subnet: ec2.ISubnet,
        security_groups: Sequence[ec2.ISecurityGroup],
        slurm_version: str = PCS_DEFAULT_SLURM_VERSION,
        expected_nodes: int = 32,
        size: str | None = None,
        scale_down_idle_seconds: int = 600,
        job_hook: str | None = GPU_JOB_MAP,
    ) -> None:
        super().__init__(scope, construct_id)
        if slurm_version not in PCS_SLURM_VERSIONS:
            raise ValueError(
                f"PcsSlurmCluster: slurm_version must be one of {', '.join(PCS_SLURM_VERSIONS)}; got {slurm_version!r}"
            )
        if size is not None and not cdk.Token.is_unresolved(size) and size.lower() not in PCS_SIZES:
            raise ValueError(f"PcsSlurmCluster: size must be SMALL, MEDIUM or LARGE; got {size!r}")
        if not security_groups:
            raise ValueError("PcsSlurmCluster: security_groups needs at least one group (the EFA group)")
        _check_name("cluster_name", "ClusterName", cluster_name)
        self.slurm_version = slurm_version
        self.subnet = subnet
        self.cluster = pcs.CfnCluster(
            self,
            "Cluster",
            name=cluster_name,
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=slurm_version),
            size=size or cluster_size(expected_nodes),
            networking=pcs.CfnCluster.NetworkingProperty(
                subnet_ids=[subnet.subnet_id], security_group_ids=[group.security_group_id for group in security_groups]
            ),
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=scale_down_idle_seconds,
                # TaskProlog is not among the cluster settings PCS takes (see tests/unit/test_pcs.py).
                slurm_custom_settings=[
                    pcs.CfnCluster.SlurmCustomSettingProperty(parameter_name=name, parameter_value=job_hook)
                    for name in ("Prolog", "Epilog")
                ]
                if job_hook
                else None,
            ),
        )
        self.role = iam.Role(
            self,
            "NodeRole",
            path="/aws-pcs/",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"AWS PCS nodes of {cluster_name}: register with the cluster, SSM sessions",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSSMManagedInstanceCore")],
        )
        """The nodes' role; give it more with `grant_*` methods of other constructs."""
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["pcs:RegisterComputeNodeGroupInstance"], resources=[self.cluster.attr_arn])
        )
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]",
                reason="SSM Session Manager is how operators reach nodes without SSH keys or open ports; AWS "
                "maintains this policy's action list as the SSM agent changes",
            )
        )
        self.instance_profile = iam.InstanceProfile(self, "NodeProfile", role=self.role, path="/aws-pcs/")
        self._images: dict[str, str] = {}
        self._image_provider: cr.Provider | None = None
        self.node_groups: dict[str, pcs.CfnComputeNodeGroup] = {}
        self.queues: dict[str, pcs.CfnQueue] = {}

    def add_node_group(
        self,
        name: str,
        *,
        instance_type: str,
        count: int,
        launch_template_id: str,
        launch_template_version: str,
        purchase_option: PurchaseOption = "ONDEMAND",
        ami_id: str | None = None,
        queue: bool = True,
    ) -> pcs.CfnComputeNodeGroup:
        """A static node group of `count` instances (and, with `queue`, a Slurm partition named `name`).

        `ami_id` omitted: the AWS PCS sample AMI for the cluster's Slurm version and the type's architecture.
        """
        if ami_id is not None and not cdk.Token.is_unresolved(ami_id) and not AMI_ID_PATTERN.match(ami_id):
            raise ValueError(f"PcsSlurmCluster: ami_id must look like ami-0123456789abcdef0; got {ami_id!r}")
        if name in self.node_groups:
            raise ValueError(f"PcsSlurmCluster: a node group named {name!r} exists already")
        for shape in ("ComputeNodeGroupName", "QueueName") if queue else ("ComputeNodeGroupName",):
            _check_name("name", shape, name)
        group = pcs.CfnComputeNodeGroup(
            self,
            f"{name}NodeGroup",
            name=name,
            cluster_id=self.cluster.attr_id,
            ami_id=ami_id or self.sample_image(instance_architecture(instance_type)),
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=launch_template_id, version=launch_template_version
            ),
            iam_instance_profile_arn=self.instance_profile.instance_profile_arn,
            instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=instance_type)],
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=count, max_instance_count=count
            ),
            subnet_ids=[self.subnet.subnet_id],
            purchase_option=purchase_option,
        )
        self.node_groups[name] = group
        if queue:
            self.queues[name] = pcs.CfnQueue(
                self,
                f"{name}Queue",
                name=name,
                cluster_id=self.cluster.attr_id,
                compute_node_group_configurations=[
                    pcs.CfnQueue.ComputeNodeGroupConfigurationProperty(compute_node_group_id=group.attr_id)
                ],
            )
        return group

    def sample_image(self, architecture: str) -> str:
        """The AMI id (a deploy-time token) of the newest AWS PCS sample AMI for `architecture`."""
        if architecture not in self._images:
            image = cdk.CustomResource(
                self,
                f"SampleImage{architecture.replace('_', '')}",
                service_token=self._provider().service_token,
                resource_type="Custom::PcsSampleImage",
                properties={"SlurmVersion": self.slurm_version, "Architecture": architecture},
            )
            self._images[architecture] = image.get_att_string("ImageId")
        return self._images[architecture]

    def _provider(self) -> cr.Provider:
        if self._image_provider is None:
            handler, self._image_provider = provider_with_handler(
                self,
                "SampleImageLookup",
                "SampleImageProvider",
                code="pcs_ami",
                timeout=cdk.Duration.seconds(60),
                description="Finds the newest AWS PCS sample AMI for a Slurm version and CPU architecture",
                calls="looks up the newest AWS PCS sample AMI (ec2:DescribeImages)",
            )
            handler.add_to_role_policy(iam.PolicyStatement(actions=["ec2:DescribeImages"], resources=["*"]))
            acknowledge_wildcards(
                handler,
                resources=["*"],
                reason="ec2:DescribeImages supports no resource-level permission; it only reads image metadata",
            )
        return self._image_provider
