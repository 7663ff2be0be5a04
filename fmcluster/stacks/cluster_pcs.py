"""The cluster stack for `orchestrator.type: pcs`: AWS PCS, EFA launch templates, node bootstrap."""

from __future__ import annotations

from dataclasses import replace

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from fmcluster.config import ClusterConfig, ComputeGroup
from fmcluster.config.service_rules import pcs_head_group
from fmcluster.constructs.compliance import acknowledge_findings, encrypt_log_groups
from fmcluster.constructs.efa import HOP_LIMIT_REASON, METADATA_HOP_LIMIT, EfaLaunchTemplate
from fmcluster.constructs.image import grant_image_pull, parameter_name
from fmcluster.constructs.nag import acknowledge_wildcards
from fmcluster.constructs.observability import endpoint_parameter_name
from fmcluster.constructs.pcs import PcsSlurmCluster
from fmcluster.node_scripts import NodeObservability, bootstrap_user_data, bundle_path
from fmcluster.stacks.cluster_services import nccl_tuning, observability_mirror
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.storage import StorageStack

LOGIN_ROOT_VOLUME_GIB = 200
ROOT_DEVICE = "/dev/xvda"
"""Root device of Amazon Linux 2023, which the AWS PCS sample AMIs (and most PCS images) are built on; a
mismatch would attach a second volume and leave the root at the AMI's size."""
PURCHASE_OPTIONS = {"on-demand": "ONDEMAND", "odcr": "ONDEMAND", "capacity-block": "CAPACITY_BLOCK"}
"""An ODCR is consumed as on-demand capacity through the launch template's reservation target."""
ASSET_READ_ACTIONS = ("s3:GetObject*", "s3:GetBucket*", "s3:List*")
"""What `Asset.grant_read` allows (CDK's bucket read grant)."""


class PcsClusterStack(cdk.Stack):
    """`PcsSlurmCluster` with one node group and queue per compute group, and login nodes when asked.

    Every compute group gets an `EfaLaunchTemplate` (all EFA interfaces, its capacity, its placement group)
    whose user data makes /scratch on local NVMe, mounts the FSx file system at /fsx (over EFA where the file
    system and the node support it) and writes the NCCL environment. Every node, login nodes included, then
    unpacks the node bundle (an S3 asset: the node scripts, observability.sh, the dashboards folder and
    nccl-tests.sbatch) into /opt/fmcluster and, with `observability.prometheus: managed`, runs observability.sh;
    the login node is the head node (Slurm exporter, and Grafana when `observability.grafana` is `self-hosted`);
    without one, a small node group `head` of its own plays that part.
    With `network.egress: none` observability.sh takes its downloads from the data bucket's fmcluster-mirror/ prefix.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        network: NetworkStack,
        storage: StorageStack,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        orchestrator = config.orchestrator
        head_group = pcs_head_group(orchestrator, config.observability)
        efa_group = network.network.efa_security_group
        subnet = network.network.compute_subnet
        self.slurm = PcsSlurmCluster(
            self,
            "Slurm",
            cluster_name=config.name,
            subnet=subnet,
            security_groups=[efa_group],
            slurm_version=orchestrator.slurm_version,
            size=config.pcs_size.upper(),
        )
        self._grant_node_access(config, storage)
        grant_image_pull(self.slurm.role, config.name)  # by name and tag: the nodes need not wait for the image
        self.nccl = nccl_tuning(self, config)
        self.node_role = self.slurm.role
        """The role every node of the cluster runs with."""
        self.node_bundle = self._node_bundle()
        """The node bundle (`fmcluster.node_scripts.bundle_files()`) as an S3 asset the nodes may read."""
        bundle_uri = self.node_bundle.s3_object_url
        observability = self._observability(config, storage)
        lustre = storage.lustre
        # One node watches for the training image and imports it into /fsx for all (image-watch.sh): the head node,
        # or, without one, every compute node (the import's lock on /fsx lets one of them do it).
        has_head = orchestrator.login_instance_type is not None or observability is not None
        image_parameter = parameter_name(config.name)
        self.launch_templates: dict[str, EfaLaunchTemplate] = {}
        for group in config.compute:
            template = EfaLaunchTemplate(
                self,
                f"{group.name}LaunchTemplate",
                instance_type=group.instance_type,
                security_groups=[efa_group],
                subnet=subnet,
                efa=group.efa,
                root_volume_gib=group.root_volume_gib,
                root_device_name=ROOT_DEVICE,
                capacity=group.capacity,
                reservation_id=group.reservation_id,
                placement_group=network.placement_groups.get(group.name),
                detailed_monitoring=config.compliance == "control-tower",
                user_data=bootstrap_user_data(
                    lustre_dns_name=lustre.dns_name,
                    lustre_mount_name=lustre.mount_name,
                    lustre_efa=_mounts_over_efa(config, group),
                    nccl_parameter_name=self.nccl.parameter_names[group.name],
                    bundle_s3_uri=bundle_uri,
                    observability=observability,
                    image_parameter=None if has_head else image_parameter,
                ),
            )
            self.launch_templates[group.name] = template
            self.slurm.add_node_group(
                group.name,
                instance_type=group.instance_type,
                count=group.count,
                launch_template_id=template.launch_template_id,
                launch_template_version=template.latest_version,
                purchase_option=PURCHASE_OPTIONS[group.capacity],
                ami_id=orchestrator.ami_id,
            )
        if head_group is not None:
            # The login node, or without one (when metrics want a head node: Slurm exporter, self-hosted Grafana) a
            # small node group of its own, so it gets the cluster's Slurm configuration.
            _, head_name, head_type = head_group
            head = None
            if observability is not None:
                head = replace(observability, head_node=True, grafana=config.observability.grafana == "self-hosted")
            login = self._login_template(
                head_type,
                efa_group,
                config.compliance == "control-tower",
                bootstrap_user_data(
                    lustre_dns_name=lustre.dns_name,
                    lustre_mount_name=lustre.mount_name,
                    bundle_s3_uri=bundle_uri,
                    observability=head,
                    image_parameter=image_parameter,
                ),
            )
            self.slurm.add_node_group(
                head_name,
                instance_type=head_type,
                count=1,
                launch_template_id=login.launch_template_id,
                launch_template_version=login.latest_version_number,
                ami_id=orchestrator.ami_id,
                queue=False,
            )
        encrypt_log_groups(self, storage.buckets.key)

    def _grant_node_access(self, config: ClusterConfig, storage: StorageStack) -> None:
        role = self.slurm.role
        role.add_managed_policy(storage.node_data_policy)
        parameters = self.format_arn(service="ssm", resource="parameter", resource_name=f"fmcluster/{config.name}/*")
        role.add_to_principal_policy(iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[parameters]))
        acknowledge_wildcards(
            role,
            resources=[parameters],
            reason="Nodes read only this cluster's own SSM parameters (NCCL settings per group, image URI)",
        )

    def _node_bundle(self) -> s3_assets.Asset:
        bundle = s3_assets.Asset(self, "NodeBundle", path=bundle_path())
        bundle.grant_read(self.slurm.role)
        acknowledge_wildcards(
            self.slurm.role,
            actions=ASSET_READ_ACTIONS,
            resources=[bundle.bucket.arn_for_objects("*")],
            reason="CDK's Asset.grant_read: nodes read their node bundle (scripts, dashboards, the nccl-tests job) "
            "from the CDK bootstrap assets bucket, read-only; that bucket holds deployment artifacts of this "
            "account's CDK apps (code and scripts named by content hash), not training data",
        )
        return bundle

    def _observability(self, config: ClusterConfig, storage: StorageStack) -> NodeObservability | None:
        """observability.sh's settings for compute nodes (None with `observability.prometheus: none`)."""
        if config.observability.prometheus != "managed":
            return None
        return NodeObservability(
            cluster_name=config.name,
            endpoint_parameter=endpoint_parameter_name(config.name),
            mirror=observability_mirror(config, storage),
        )

    def _login_template(
        self, instance_type: str, group: ec2.ISecurityGroup, detailed_monitoring: bool, user_data: ec2.UserData
    ) -> ec2.LaunchTemplate:
        """Login nodes: no EFA, the cluster's group, no public IP, IMDSv2, encrypted gp3 root volume, /fsx mounted."""
        template = ec2.LaunchTemplate(
            self,
            "loginLaunchTemplate",
            security_group=group,
            associate_public_ip_address=False,
            detailed_monitoring=detailed_monitoring or None,
            require_imdsv2=True,
            http_put_response_hop_limit=METADATA_HOP_LIMIT,
            user_data=user_data,
            block_devices=[
                ec2.BlockDevice(
                    device_name=ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        LOGIN_ROOT_VOLUME_GIB, encrypted=True, volume_type=ec2.EbsDeviceVolumeType.GP3
                    ),
                )
            ],
        )
        acknowledge_findings(template, controls=["ec2_launch_template_token_hop_limit_check"], reason=HOP_LIMIT_REASON)
        if not detailed_monitoring:
            acknowledge_findings(
                template,
                controls=["ec2_launch_template_monitoring_enabled_check"],
                reason="Detailed monitoring is billed per instance; the head node reports its metrics every 15 s "
                "through its own exporters to Prometheus. `compliance: control-tower` turns it on",
            )
        return template


def _mounts_over_efa(config: ClusterConfig, group: ComputeGroup) -> bool:
    return config.storage.lustre.efa and group.efa and group.instance.lustre_efa_client
