"""HyperPodSlurmCluster: a SageMaker HyperPod cluster with API-driven Slurm, its lifecycle scripts and its role."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct
from pydantic import ValidationError

from fmcluster.config.errors import problems_from_validation_error
from fmcluster.config.models import (
    S3_URI_PATTERN,
    TRAINING_PLAN_ARN_PATTERN,
    ComputeGroup,
    Observability,
    Orchestrator,
)
from fmcluster.config.regions import REGIONS
from fmcluster.constructs.buckets import INCOMPLETE_UPLOAD_EXPIRATION, ProjectBuckets, quiet_auto_delete_provider
from fmcluster.constructs.compliance import acknowledge_deploy_time_functions, acknowledge_findings
from fmcluster.constructs.functions import quiet_redundant_depends_on
from fmcluster.constructs.lustre import LustreStorage
from fmcluster.constructs.nag import nag_form
from fmcluster.constructs.observability import GrafanaMode, PrometheusMode, endpoint_parameter_name
from fmcluster.constructs.props import check_props
from fmcluster.node_scripts import DASHBOARDS, NCCL_TESTS, dashboard_files

CONTROLLER_GROUP = "controller"
"""Instance group (and Slurm node type Controller) of the one slurmctld node."""
LOGIN_GROUP = "login"
"""Instance group (and Slurm node type Login) of the login node, when there is one."""
LOGIN_NODES = 1
MOUNT_PATH = "/fsx"
"""Where HyperPod mounts the FSx for Lustre file system on every node."""
CONTROLLER_VOLUME_GIB = 500
"""Default size of the controller's extra EBS volume (HyperPod mounts it at /opt/sagemaker): Slurm state, logs."""
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
"""Run on every accelerated node before it joins: GPU/accelerator stress and EFA connectivity tests."""
EFA_INTERFACE_TYPE = "efa-only"
"""EFA devices without an ENA part take no IP address, so a node uses one address of the subnet, not one per card
(EC2's current multi-card guidance; `efa` would give every EFA device an IP address too)."""
LIFECYCLE_PREFIX = "fmcluster-lifecycle"
REPLACED_SCRIPTS_EXPIRATION = cdk.Duration.days(30)
"""Lifecycle scripts replaced or removed by a deploy stay in the bucket as old versions for this long."""
"""Key prefix of the lifecycle scripts in the lifecycle bucket; `SourceS3Uri` points here."""
ON_CREATE = "on_create.sh"
"""Entry script, run as `OnInitComplete` (HyperPod's Extended mode): after HyperPod has installed and
configured its own software, Slurm from the API-driven configuration included. `OnCreate` (Customer Managed
mode) would leave setting up Slurm to the scripts, as the older provisioning_parameters.json model did."""
LIFECYCLE_ENV = "fmcluster.env"
"""The cluster's settings for the lifecycle scripts, written next to them (KEY=value lines)."""
LIFECYCLE_SCRIPTS: Mapping[str, str] = {
    ON_CREATE: "node/hyperpod/on_create.sh",
    "enroot-pyxis.sh": "node/hyperpod/enroot-pyxis.sh",
    "import-image.sh": "node/hyperpod/import-image.sh",
    "ssm.sh": "node/hyperpod/ssm.sh",
    "lib.sh": "node/lib.sh",
    "nvme-raid.sh": "node/nvme-raid.sh",
    "nccl-env.sh": "node/nccl-env.sh",
    "observability.sh": "node/observability.sh",
}
"""Object name under the lifecycle prefix -> package file of fmcluster: flat, so `lib.sh` sits next to the scripts."""
LIFECYCLE_DATA: Mapping[str, str] = {
    NCCL_TESTS: f"node/{NCCL_TESTS}",
    **{f"{DASHBOARDS}/{name}": f"{DASHBOARDS}/{name}" for name in dashboard_files()},
}
"""Files the lifecycle installs besides the scripts: the nccl-tests job and the dashboards folder observability.sh
reads (object name under the lifecycle prefix -> package file)."""
SAGEMAKER_BUCKET_PREFIX = "sagemaker-"
"""HyperPod's managed instance policy reaches only such buckets (SageMaker API reference, ClusterLifeCycleConfig)."""
MAX_BUCKET_NAME = 63
ACCOUNT_ID_LENGTH = 12
MAX_REGION_LENGTH = max(len(region) for region in REGIONS)
CLUSTER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""HyperPod cluster names (the CloudFormation resource schema of AWS::SageMaker::Cluster)."""
DNS_NAME_PATTERN = re.compile(r"^(fs|fc)i?-[0-9a-f]{8,}\..{4,253}$")
MOUNT_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,8}$")
"""FSx for Lustre DNS and mount names as HyperPod's ClusterFsxLustreConfig accepts them."""
SSM_PATH_PATTERN = re.compile(r"^(/[A-Za-z0-9_.-]+)+$")
SLURM_CONFIG_STRATEGIES = ("Managed", "Overwrite", "Merge")
MAX_SECURITY_GROUPS = 5
HYPERPOD_CAPACITIES = ("on-demand", "training-plan")
VPC_DESCRIBE_ACTIONS = (
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
)
"""Read-only calls HyperPod makes in VPC mode; EC2 offers no resource-level permission for them."""
NETWORK_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterfacePermission",
    "ec2:CreateTags",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DetachNetworkInterface",
)
"""What HyperPod does to the nodes' interfaces in the compute subnet (AWS's HyperPod IAM prerequisites list these,
with ec2:CreateNetworkInterface and the Describe calls, for clusters in your own VPC)."""
ECR_PULL_ACTIONS = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
MANAGED_INSTANCE_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"


class HyperPodSlurmCluster(Construct):
    """A SageMaker HyperPod cluster whose Slurm is configured by the API: a controller, a login node, partitions.

    The cluster (`AWS::SageMaker::Cluster`, Slurm orchestrator) has a `controller` instance group of one node
    (Slurm node type Controller, with an extra encrypted EBS volume at /opt/sagemaker), a `login` group of one node
    when `login_instance_type` is given, and one group per compute group (node type Compute, partition named after
    the group, `ml.` + its instance type, its count). Accelerated groups run one thread per core and pass
    HyperPod's deep health checks (InstanceStress, InstanceConnectivity) before joining; a group with `efa` gets
    `efa-only` EFA interfaces (no IP address per EFA device); a group with `training_plan_arn` draws its nodes
    from that SageMaker training plan. Every group mounts the FSx for Lustre file system at /fsx. Faulty nodes are
    replaced automatically. The nodes' interfaces live in `subnet`, in `security_groups`.

    Lifecycle: the scripts of `fmcluster/node/hyperpod/`, with `lib.sh`, `nvme-raid.sh`, `nccl-env.sh` and
    `observability.sh` of `fmcluster/node/` beside them (`LIFECYCLE_SCRIPTS`), `nccl-tests.sbatch` and the
    `dashboards/` folder (`LIFECYCLE_DATA`), and a `fmcluster.env` of this cluster's settings are
    deployed from the installed package into a bucket of this construct, named
    `sagemaker-<cluster name>-<account>-<region>` (HyperPod's managed instance policy reaches only `sagemaker-*`
    buckets; a cluster name too long for S3's 63 characters is shortened and given a hash).
    `on_create.sh` runs on every node as it joins: /scratch on local NVMe, the NCCL environment from the SSM
    parameter `<nccl prefix>/<group>/nccl-env`, enroot and pyxis with caches on /scratch, and on the controller
    the training image named by the SSM parameter `/fmcluster/<cluster>/image-uri` (when it exists) imported once
    into a squashfs on /fsx; /opt/fmcluster/nccl-tests.sbatch and /opt/fmcluster/dashboards; and, with
    `prometheus="managed"`, `observability.sh` (exporters and a Prometheus agent remote-writing to the workspace
    whose endpoint `ClusterObservability` publishes in SSM; on the controller also the Slurm exporter, and Grafana
    when `grafana="self-hosted"`). Logs: /var/log/fmcluster/lifecycle.log on the node, and HyperPod's CloudWatch
    group.
    The bucket only holds scripts rebuilt from the package on every deploy, so it is deleted with the stack
    whatever `removal_policy` says: a retained bucket's fixed name would make the next deploy fail.

    The execution role (trusted by sagemaker.amazonaws.com) has AWS's AmazonSageMakerClusterInstanceRolePolicy
    and, besides, only: the VPC calls HyperPod needs to place interfaces in `subnet`; reading the lifecycle
    scripts; reading and writing the project's data and checkpoint buckets (and using their key through S3) when
    `buckets` is given; ssm:GetParameter on this cluster's parameters; pulling from ECR; writing the node log group
    and metrics in the namespace `fmcluster/<cluster name>`; and, with `key`, using that key for the controller's
    volume. The cluster is created only after the role's policies and the scripts are in place.

    Example::

        network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
        buckets = ProjectBuckets(stack, "Buckets")
        lustre = LustreStorage(stack, "Lustre", vpc=network.vpc, subnet=network.compute_subnet,
                               client_security_groups=[network.efa_security_group], capacity_gib=1200)
        cluster = HyperPodSlurmCluster(
            stack, "HyperPod",
            cluster_name="llm",
            subnet=network.compute_subnet,
            security_groups=[network.efa_security_group],
            compute_groups=[ComputeGroup(name="gpu", instance_type="p5.48xlarge", count=16)],
            login_instance_type="m5.4xlarge",
            file_system=lustre,
            buckets=buckets,
        )
        cluster.role  # the nodes' execution role; grant it more with other constructs' grant_* methods

    Args:
        cluster_name: the HyperPod cluster's name: 1-63 letters, digits and '-', starting and ending with a letter
            or digit. Also names the lifecycle bucket, the SSM parameter paths and the metrics namespace.
        subnet: the subnet of every node's interfaces (for a training plan, in the plan's availability zone).
        security_groups: 1-5 groups of the nodes' interfaces; give the EFA group (all traffic to and from itself).
            The file system must admit them (`LustreStorage(client_security_groups=...)` or `allow_clients`).
        compute_groups: 1 or more `fmcluster.config.ComputeGroup` (or mappings of the cluster file's `compute`
            keys), each a Slurm partition; names unique, capacity "on-demand" or "training-plan".
        controller_instance_type: EC2 type of the controller (without `ml.`). Omitted: "m5.4xlarge".
        login_instance_type: EC2 type of the one login node (without `ml.`). Omitted: no login node.
        file_system: the `LustreStorage` to mount at /fsx on every node. Omitted: `lustre_dns_name` and
            `lustre_mount_name`, or no shared file system (and so no shared training image).
        lustre_dns_name: DNS name of an FSx for Lustre file system, with `lustre_mount_name`, instead of
            `file_system`. Omitted: none.
        lustre_mount_name: its mount name (1-8 characters). Omitted: none.
        buckets: the project's `ProjectBuckets`; nodes may read and write its data and checkpoint buckets.
            Omitted: no access to project buckets.
        nccl_parameter_prefix: SSM path under which each group's NCCL environment lives, as
            `<prefix>/<group>/nccl-env`. Omitted: "/fmcluster/<cluster_name>".
        key: a customer KMS key for the controller's extra EBS volume; the role may use it for EBS (through
            grants for AWS resources only). Omitted: HyperPod encrypts the volume with an AWS owned key.
        image_repositories: the ECR repositories nodes pull images from. Omitted: any repository of this account
            in this region.
        access_logs_bucket: a bucket for the lifecycle bucket's server access logs (its policy must let S3 logging
            write to it). Omitted: no access logs; the scripts' only writer is the stack's own deployment.
        controller_volume_gib: size of the controller's extra EBS volume, 1-16384 GiB. Omitted: 500.
        slurm_config_strategy: "Managed", "Overwrite" or "Merge" (how HyperPod treats slurm.conf changes made
            outside the API). Omitted: HyperPod's default.
        prometheus: "managed": every node runs fmcluster/node/observability.sh (node, EFA, Lustre and GPU exporters
            and a Prometheus agent) remote-writing to the Amazon Managed Service for Prometheus workspace whose
            endpoint is in the SSM parameter `endpoint_parameter_name(cluster_name)` (give the same cluster name to a
            `ClusterObservability` with `node_roles=[cluster.role]`); the controller also runs the Slurm exporter.
            "none": no collectors on the nodes. Omitted: "none".
        grafana: "self-hosted" runs Grafana on the controller (needs `prometheus="managed"`, its data source);
            "managed" (an Amazon Managed Grafana workspace of `ClusterObservability`) and "none" run none on the
            nodes. Omitted: "none".
        observability_mirror: an S3 prefix holding every binary and image observability.sh installs (its header
            gives the layout), for nodes without an internet path; the role must be able to read it. Omitted: the
            public release sites.
        removal_policy: what `cdk destroy` does to the node log group. Omitted: RETAIN.

    Raises:
        ValueError: naming every prop that HyperPod or the cluster file's rules would reject (unresolved tokens
            are skipped).

    Attributes:
        cluster: the `sagemaker.CfnCluster`; `cluster_arn` its ARN.
        role: the execution role of every instance group.
        instance_group_names: controller, then login (when there is one), then the compute groups.
        lifecycle_bucket, lifecycle_s3_uri, lifecycle_deployment: where the scripts are and what puts them there.
        node_log_group: a log group the nodes may write to (for agents shipping /var/log/fmcluster).
        parameter_prefix, nccl_parameter_prefix, image_parameter_name, endpoint_parameter_name: the SSM names the
            nodes read.
        metrics_namespace: the CloudWatch namespace the nodes may put metrics in.
        connections: the nodes' security groups.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        subnet: ec2.ISubnet,
        security_groups: Sequence[ec2.ISecurityGroup],
        compute_groups: Sequence[ComputeGroup | Mapping[str, object]],
        controller_instance_type: str = "m5.4xlarge",
        login_instance_type: str | None = None,
        file_system: LustreStorage | None = None,
        lustre_dns_name: str | None = None,
        lustre_mount_name: str | None = None,
        buckets: ProjectBuckets | None = None,
        nccl_parameter_prefix: str | None = None,
        key: kms.IKey | None = None,
        image_repositories: Sequence[ecr.IRepository] | None = None,
        access_logs_bucket: s3.IBucket | None = None,
        controller_volume_gib: int = CONTROLLER_VOLUME_GIB,
        slurm_config_strategy: str | None = None,
        prometheus: PrometheusMode = "none",
        grafana: GrafanaMode = "none",
        observability_mirror: str | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        stack = cdk.Stack.of(scope)
        groups = validate_props(
            cluster_name=cluster_name,
            security_groups=security_groups,
            compute_groups=compute_groups,
            controller_instance_type=controller_instance_type,
            login_instance_type=login_instance_type,
            has_file_system=file_system is not None,
            lustre_dns_name=lustre_dns_name,
            lustre_mount_name=lustre_mount_name,
            nccl_parameter_prefix=nccl_parameter_prefix,
            controller_volume_gib=controller_volume_gib,
            slurm_config_strategy=slurm_config_strategy,
            prometheus=prometheus,
            grafana=grafana,
            observability_mirror=observability_mirror,
            region=stack.region,
            account=stack.account,
        )
        super().__init__(scope, construct_id)
        if file_system is not None:
            lustre_dns_name, lustre_mount_name = file_system.dns_name, file_system.mount_name
        self.cluster_name = cluster_name
        self.compute_groups: tuple[ComputeGroup, ...] = groups
        self.parameter_prefix = f"/fmcluster/{cluster_name}"
        """SSM path of this cluster's own parameters (the training image's URI is `<prefix>/image-uri`)."""
        self.nccl_parameter_prefix = nccl_parameter_prefix or self.parameter_prefix
        self.image_parameter_name = f"{self.parameter_prefix}/image-uri"
        """SSM parameter the controller reads the training image's ECR URI from (optional at deploy time)."""
        self.endpoint_parameter_name = endpoint_parameter_name(cluster_name)
        """SSM parameter observability.sh reads the Prometheus endpoint from (with prometheus="managed")."""
        self.metrics_namespace = f"fmcluster/{cluster_name}"
        """The CloudWatch namespace nodes may put metrics in."""
        self.connections = ec2.Connections(security_groups=list(security_groups))
        """The nodes' security groups."""

        self.lifecycle_bucket = s3.Bucket(
            self,
            "LifecycleBucket",
            bucket_name=lifecycle_bucket_name(cluster_name, stack.account, stack.region),
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=access_logs_bucket,
            server_access_logs_prefix=f"{LIFECYCLE_PREFIX}/" if access_logs_bucket is not None else None,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-replaced-scripts",
                    noncurrent_version_expiration=REPLACED_SCRIPTS_EXPIRATION,
                    abort_incomplete_multipart_upload_after=INCOMPLETE_UPLOAD_EXPIRATION,
                )
            ],
            removal_policy=cdk.RemovalPolicy.DESTROY,
            auto_delete_objects=True,  # a versioned bucket keeps old versions that would block its deletion
        )
        """Holds the lifecycle scripts (name starts with `sagemaker-`, S3-managed encryption, TLS only); versioned, so
        the scripts a node ran stay readable for 30 days after a deploy replaces them."""
        quiet_auto_delete_provider(stack)
        acknowledge_findings(
            self.lifecycle_bucket,
            checkov=["CKV_AWS_145"],
            controls=["s3_bucket_default_encryption_kms_check"],
            reason="Holds only the lifecycle scripts generated from the fmcluster package (no data, no secret); "
            "S3-managed keys let HyperPod's managed instance policy read them without a key grant",
        )
        acknowledge_findings(
            self.lifecycle_bucket,
            controls=["s3_event_notifications_enabled_check"],
            reason="Nothing consumes the lifecycle bucket's object events: HyperPod reads the scripts when a node "
            "starts",
        )
        acknowledge_findings(
            self.lifecycle_bucket,
            controls=["s3_bucket_object_lock_enabled_check"],
            reason="Every deploy replaces and prunes the scripts (BucketDeployment) and `cdk destroy` empties the "
            "bucket; Object Lock would block both. Versioning keeps replaced scripts for 30 days",
        )
        if access_logs_bucket is None:
            reason = (
                "Holds only lifecycle scripts generated from the fmcluster package; the one writer is this stack's "
                "BucketDeployment (recorded by CloudTrail with the stack update), the one reader the cluster's "
                "execution role. Pass access_logs_bucket to log object access as well"
            )
            cdk.Validations.of(self.lifecycle_bucket).acknowledge(
                cdk.Acknowledgment(id="AwsSolutions-S1", reason=reason)
            )
            acknowledge_findings(
                self.lifecycle_bucket,
                checkov=["CKV_AWS_18"],
                controls=["s3_bucket_logging_enabled_check"],
                reason=reason,
            )
        self.lifecycle_s3_uri = f"s3://{self.lifecycle_bucket.bucket_name}/{LIFECYCLE_PREFIX}/"
        """HyperPod's `SourceS3Uri`: where the nodes download the lifecycle scripts from."""
        self.lifecycle_deployment = s3deploy.BucketDeployment(
            self,
            "LifecycleScripts",
            destination_bucket=self.lifecycle_bucket,
            destination_key_prefix=LIFECYCLE_PREFIX,
            sources=[
                *(s3deploy.Source.data(name, _package_text(path)) for name, path in LIFECYCLE_SCRIPTS.items()),
                *(s3deploy.Source.data(name, _package_data(path)) for name, path in LIFECYCLE_DATA.items()),
                s3deploy.Source.data(
                    LIFECYCLE_ENV,
                    lifecycle_settings(
                        cluster_name=cluster_name,
                        region=stack.region,
                        nccl_parameter_prefix=self.nccl_parameter_prefix,
                        image_parameter_name=self.image_parameter_name,
                        mount_path=MOUNT_PATH if lustre_dns_name is not None else "",
                        prometheus=prometheus,
                        grafana=grafana,
                        endpoint_parameter_name=self.endpoint_parameter_name if prometheus == "managed" else "",
                        mirror=observability_mirror or "",
                    ),
                ),
            ],
            prune=True,
            retain_on_delete=False,
        )
        """Copies the scripts into the bucket on every deploy (and removes scripts no longer shipped)."""
        _acknowledge_deployment_findings(self.lifecycle_deployment, self.lifecycle_bucket)

        self.node_log_group = logs.LogGroup(
            self, "NodeLogs", retention=logs.RetentionDays.ONE_YEAR, removal_policy=removal_policy
        )
        """For agents that ship node logs such as /var/log/fmcluster/*.log; the nodes may write to it."""
        self.role = self._execution_role(
            subnet=subnet,
            security_groups=security_groups,
            buckets=buckets,
            key=key,
            image_repositories=image_repositories,
        )
        """The execution role of every instance group."""

        storage = []
        if lustre_dns_name is not None and lustre_mount_name is not None:
            storage.append(
                sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    fsx_lustre_config=sagemaker.CfnCluster.ClusterFsxLustreConfigProperty(
                        dns_name=lustre_dns_name, mount_name=lustre_mount_name, mount_path=MOUNT_PATH
                    )
                )
            )
        controller_volume = sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
            ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                volume_size_in_gb=controller_volume_gib, volume_kms_key_id=key.key_arn if key is not None else None
            )
        )
        lifecycle = sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
            source_s3_uri=self.lifecycle_s3_uri, on_init_complete=ON_CREATE
        )
        instance_groups = [
            self._group(CONTROLLER_GROUP, controller_instance_type, 1, "Controller", lifecycle,
                        [controller_volume, *storage]),
        ]  # fmt: skip
        if login_instance_type is not None:
            instance_groups.append(
                self._group(LOGIN_GROUP, login_instance_type, LOGIN_NODES, "Login", lifecycle, storage)
            )
        for group in groups:
            instance_groups.append(self._compute_group(group, lifecycle, storage))

        self.cluster = sagemaker.CfnCluster(
            self,
            "Cluster",
            cluster_name=cluster_name,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                slurm=sagemaker.CfnCluster.ClusterOrchestratorSlurmConfigProperty(
                    slurm_config_strategy=slurm_config_strategy
                )
            ),
            instance_groups=instance_groups,
            node_recovery="Automatic",
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                subnets=[subnet.subnet_id],
                security_group_ids=[group.security_group_id for group in security_groups],
            ),
        )
        """The `AWS::SageMaker::Cluster`."""
        # HyperPod uses the role and downloads the scripts as soon as creation starts: the role's policy (which the
        # cluster does not reference) and the scripts must be in place before.
        self.cluster.node.add_dependency(self.role.node.find_child("DefaultPolicy"))
        self.cluster.node.add_dependency(self.lifecycle_deployment)
        self.cluster_arn: str = self.cluster.attr_cluster_arn
        self.instance_group_names: list[str] = [CONTROLLER_GROUP]
        """Names of the instance groups, controller first, then login (if any), then the compute groups."""
        if login_instance_type is not None:
            self.instance_group_names.append(LOGIN_GROUP)
        self.instance_group_names += [group.name for group in groups]

    def _group(
        self,
        name: str,
        instance_type: str,
        count: int,
        node_type: str,
        lifecycle: sagemaker.CfnCluster.ClusterLifeCycleConfigProperty,
        storage: Sequence[sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty],
        *,
        partition: str | None = None,
        **extra: object,
    ) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=name,
            instance_type=f"ml.{instance_type}",
            instance_count=count,
            execution_role=self.role.role_arn,
            life_cycle_config=lifecycle,
            slurm_config=sagemaker.CfnCluster.ClusterSlurmConfigProperty(
                node_type=node_type, partition_names=[partition] if partition is not None else None
            ),
            instance_storage_configs=list(storage) or None,
            **extra,
        )

    def _compute_group(
        self,
        group: ComputeGroup,
        lifecycle: sagemaker.CfnCluster.ClusterLifeCycleConfigProperty,
        storage: Sequence[sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty],
    ) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        accelerated = group.instance.is_accelerated
        return self._group(
            group.name,
            group.instance_type,
            group.count,
            "Compute",
            lifecycle,
            storage,
            partition=group.name,
            threads_per_core=1 if accelerated else None,
            on_start_deep_health_checks=list(DEEP_HEALTH_CHECKS) if accelerated else None,
            training_plan_arn=group.training_plan_arn,
            network_interface=(
                sagemaker.CfnCluster.ClusterNetworkInterfaceProperty(interface_type=EFA_INTERFACE_TYPE)
                if group.efa
                else None
            ),
        )

    def _execution_role(
        self,
        *,
        subnet: ec2.ISubnet,
        security_groups: Sequence[ec2.ISecurityGroup],
        buckets: ProjectBuckets | None,
        key: kms.IKey | None,
        image_repositories: Sequence[ecr.IRepository] | None,
    ) -> iam.Role:
        stack = cdk.Stack.of(self)
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker HyperPod cluster {self.cluster_name}: its nodes and its VPC interfaces",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(MANAGED_INSTANCE_POLICY)],
        )
        wildcards: list[tuple[str, str]] = []

        def allow(actions: Sequence[str], resources: Sequence[str], reason: str | None = None, **condition) -> None:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=list(actions), resources=list(resources), conditions=condition or None)
            )
            if reason is not None:
                wildcards.extend((r, reason) for r in resources if "*" in json.dumps(stack.resolve(r)))

        # VPC mode (HyperPod IAM prerequisites): interfaces in the compute subnet, in the cluster's groups.
        interfaces = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
        allow(
            VPC_DESCRIBE_ACTIONS,
            ["*"],
            "EC2 Describe calls support no resource-level permissions; HyperPod reads the VPC, subnet, security "
            "groups and DHCP options to place the nodes' interfaces",
        )
        allow(
            ["ec2:CreateNetworkInterface"],
            [
                interfaces,
                stack.format_arn(service="ec2", resource="subnet", resource_name=subnet.subnet_id),
                *(
                    stack.format_arn(service="ec2", resource="security-group", resource_name=group.security_group_id)
                    for group in security_groups
                ),
            ],
            "HyperPod creates each node's interfaces itself, so their ids are unknown in advance; creation is "
            "limited to this account and region, the compute subnet and the cluster's security groups",
        )
        allow(
            NETWORK_INTERFACE_ACTIONS,
            [interfaces],
            "HyperPod tags, shares with its service account, detaches and deletes the interfaces it created for "
            "the nodes; their ids are known only at run time, so the statement names this account's and region's "
            "interfaces",
        )
        allow(
            ["ec2:DetachNetworkInterface"],
            [stack.format_arn(service="ec2", resource="instance", resource_name="*", account="*")],
            "HyperPod's instances live in a SageMaker-owned account; detaching an interface from one is "
            "authorized on that instance, whose account and id are HyperPod's",
        )

        # The lifecycle scripts (the managed policy reaches sagemaker-* buckets too; this names the one prefix).
        allow(
            ["s3:GetObject"],
            [self.lifecycle_bucket.arn_for_objects(f"{LIFECYCLE_PREFIX}/*")],
            "Nodes download every lifecycle script under the one prefix of their own lifecycle bucket",
        )
        allow(
            ["s3:ListBucket"],
            [self.lifecycle_bucket.bucket_arn],
            StringLike={"s3:prefix": [f"{LIFECYCLE_PREFIX}/*", LIFECYCLE_PREFIX]},
        )

        if buckets is not None:
            project = (
                (buckets.data_bucket, ("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload",
                                       "s3:ListMultipartUploadParts")),
                (buckets.checkpoints_bucket, ("s3:GetObject", "s3:PutObject", "s3:DeleteObject",
                                              "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")),
            )  # fmt: skip
            for bucket, object_actions in project:
                allow(
                    object_actions,
                    [bucket.arn_for_objects("*")],
                    "Jobs read datasets and write checkpoints under keys they choose at run time, anywhere in "
                    "the project's data and checkpoint buckets (checkpoints may also be pruned; the bucket keeps "
                    "old versions)",
                )
                allow(["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"], [bucket.bucket_arn])
            allow(
                ["kms:Decrypt", "kms:GenerateDataKey"],
                [buckets.key.key_arn],
                StringEquals={"kms:ViaService": f"s3.{stack.region}.{stack.url_suffix}"},
            )

        # This cluster's SSM parameters: the NCCL environment of each group and the training image's URI.
        prefixes = dict.fromkeys([self.parameter_prefix, self.nccl_parameter_prefix])
        allow(
            ["ssm:GetParameter"],
            [
                stack.format_arn(service="ssm", resource="parameter", resource_name=f"{p.lstrip('/')}/*")
                for p in prefixes
            ],
            "Nodes read only this cluster's own SSM parameters (the NCCL environment of each group, the training "
            "image URI), whose names end in group names",
        )

        # Pulling training images from ECR.
        allow(
            ["ecr:GetAuthorizationToken"],
            ["*"],
            "ecr:GetAuthorizationToken supports no resource-level permissions; the token it returns only "
            "reaches what the role's ECR statements allow",
        )
        if image_repositories:
            allow(ECR_PULL_ACTIONS, [repository.repository_arn for repository in image_repositories])
        else:
            allow(
                ECR_PULL_ACTIONS,
                [stack.format_arn(service="ecr", resource="repository", resource_name="*")],
                "No image repository was named, so nodes may pull (never push) from this account's repositories "
                "in this region; pass image_repositories to narrow it",
            )

        # Logs and metrics of the nodes.
        self.node_log_group.grant_write(role)
        allow(
            ["cloudwatch:PutMetricData"],
            ["*"],
            "cloudwatch:PutMetricData supports no resource-level permissions; the condition keeps the nodes to "
            "their own namespace",
            StringEquals={"cloudwatch:namespace": self.metrics_namespace},
        )

        if key is not None:
            allow(["kms:DescribeKey", "kms:Decrypt", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom",
                   "kms:ReEncryptTo"], [key.key_arn])  # fmt: skip
            allow(["kms:CreateGrant"], [key.key_arn], Bool={"kms:GrantIsForAWSResource": "true"})

        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{MANAGED_INSTANCE_POLICY}]",
                reason="The HyperPod instance policy AWS requires on every cluster execution role: its agents' "
                "CloudWatch logs and metrics under /aws/sagemaker/Clusters, SSM sessions to nodes, and reading "
                "sagemaker-* lifecycle buckets; AWS keeps it in step with the HyperPod agents",
            ),
            *(
                cdk.Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{nag_form(role, resource)}]", reason=reason)
                for resource, reason in dict(wildcards).items()
            ),
        )
        return role


def validate_props(
    *,
    cluster_name: str,
    security_groups: Sequence[ec2.ISecurityGroup],
    compute_groups: Sequence[ComputeGroup | Mapping[str, object]],
    controller_instance_type: str,
    login_instance_type: str | None,
    has_file_system: bool,
    lustre_dns_name: str | None,
    lustre_mount_name: str | None,
    nccl_parameter_prefix: str | None,
    controller_volume_gib: int,
    slurm_config_strategy: str | None,
    region: str,
    account: str,
    prometheus: str = "none",
    grafana: str = "none",
    observability_mirror: str | None = None,
) -> tuple[ComputeGroup, ...]:
    """The compute groups as models; or ValueError naming every problem, one line each."""
    problems: list[str] = []
    if not _token(cluster_name) and not CLUSTER_NAME_PATTERN.match(cluster_name):
        problems.append(
            "cluster_name: must be 1-63 letters, digits and '-', starting and ending with a letter or digit "
            f"(HyperPod's rule); got {cluster_name!r}"
        )
    if not 1 <= len(security_groups) <= MAX_SECURITY_GROUPS:
        problems.append(
            f"security_groups: HyperPod takes 1-{MAX_SECURITY_GROUPS} security groups (give the EFA group); "
            f"got {len(security_groups)}"
        )
    try:
        check_props(
            Orchestrator,
            "",
            type="hyperpod-slurm",
            controller_instance_type=controller_instance_type,
            login_instance_type=login_instance_type,
        )
    except ValueError as error:
        problems.extend(line.removeprefix(": ") for line in str(error).splitlines())
    try:
        check_props(Observability, "", prometheus=prometheus, grafana=grafana)
    except ValueError as error:
        problems.extend(line.removeprefix(": ") for line in str(error).splitlines())
    if grafana == "self-hosted" and prometheus == "none":
        problems.append("grafana: 'self-hosted' needs prometheus='managed' as its data source; got prometheus='none'")
    mirror = observability_mirror
    if mirror is not None and not _token(mirror) and not S3_URI_PATTERN.match(mirror):
        problems.append(f"observability_mirror: must be an S3 prefix like s3://bucket/fmcluster-mirror; got {mirror!r}")
    groups: list[ComputeGroup] = []
    if not compute_groups:
        problems.append("compute_groups: needs at least one compute group (each becomes a Slurm partition); got none")
    first: dict[str, int] = {}
    for index, given in enumerate(compute_groups):
        where = f"compute_groups[{index}]"
        try:
            data = given.model_dump(exclude_none=True) if isinstance(given, ComputeGroup) else dict(given)
            group = ComputeGroup.model_validate(data)
        except ValidationError as error:
            problems.extend(f"{where}.{p.path}: {p.message}" for p in problems_from_validation_error(error, {}))
            continue
        except (TypeError, ValueError):
            problems.append(f"{where}: must be a ComputeGroup or a mapping of its keys; got {given!r}")
            continue
        if group.name in first:
            problems.append(
                f"{where}.name: {group.name!r} is already the name of compute_groups[{first[group.name]}]; "
                "HyperPod instance group names must be unique"
            )
        first.setdefault(group.name, index)
        if group.capacity not in HYPERPOD_CAPACITIES:
            problems.append(
                f"{where}.capacity: {group.capacity!r} is for AWS PCS (EC2 reservations go through launch "
                "templates); HyperPod reserves capacity with capacity: training-plan and a training_plan_arn"
            )
        match = TRAINING_PLAN_ARN_PATTERN.match(group.training_plan_arn or "")
        if match and not _token(region) and match["region"] != region:
            problems.append(
                f"{where}.training_plan_arn: the training plan is in {match['region']}, the stack in {region}; "
                "a plan serves only its own region"
            )
        if match and not _token(account) and match["account"] != account:
            problems.append(
                f"{where}.training_plan_arn: the training plan belongs to account {match['account']}, the stack "
                f"to {account}"
            )
        groups.append(group)
    if has_file_system and (lustre_dns_name is not None or lustre_mount_name is not None):
        problems.append("file_system: give either file_system or lustre_dns_name with lustre_mount_name, not both")
    elif (lustre_dns_name is None) != (lustre_mount_name is None):
        problems.append(
            "lustre_dns_name and lustre_mount_name go together: give both to mount a file system, or neither"
        )
    for prop, value, pattern, right in (
        ("lustre_dns_name", lustre_dns_name, DNS_NAME_PATTERN,
         "an FSx DNS name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"),
        ("lustre_mount_name", lustre_mount_name, MOUNT_NAME_PATTERN,
         "an FSx mount name of 1-8 letters, digits, '_' or '-'"),
        ("nccl_parameter_prefix", nccl_parameter_prefix, SSM_PATH_PATTERN, "an SSM path like /fmcluster/llm"),
    ):  # fmt: skip
        if value is not None and not _token(value) and not pattern.match(value):
            problems.append(f"{prop}: must be {right}; got {value!r}")
    if not _token(controller_volume_gib) and not 1 <= controller_volume_gib <= 16384:
        problems.append(f"controller_volume_gib: must be 1-16384 GiB; got {controller_volume_gib}")
    if slurm_config_strategy is not None and slurm_config_strategy not in SLURM_CONFIG_STRATEGIES:
        problems.append(
            f"slurm_config_strategy: must be one of {', '.join(SLURM_CONFIG_STRATEGIES)}; got {slurm_config_strategy!r}"
        )
    if problems:
        raise ValueError("\n".join(f"HyperPodSlurmCluster: {problem}" for problem in problems))
    return tuple(groups)


def lifecycle_bucket_name(cluster_name: str, account: str, region: str) -> str:
    """`sagemaker-<cluster>-<account>-<region>` (lowercase), shortened with a hash to fit S3's 63 characters.

    `account` and `region` may be tokens; the room left for the cluster name then assumes the longest region. A
    cluster name that is itself a token is used as it is (it must then be lowercase and short enough).
    """
    if _token(cluster_name):
        return f"{SAGEMAKER_BUCKET_PREFIX}{cluster_name}-{account}-{region}"
    region_length = MAX_REGION_LENGTH if _token(region) else len(region)
    room = MAX_BUCKET_NAME - len(SAGEMAKER_BUCKET_PREFIX) - ACCOUNT_ID_LENGTH - region_length - 2
    name = cluster_name.lower()
    if len(name) > room:
        digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:8]
        name = f"{name[: room - len(digest) - 1].rstrip('-')}-{digest}"
    return f"{SAGEMAKER_BUCKET_PREFIX}{name}-{account}-{region}"


def lifecycle_settings(
    *,
    cluster_name: str,
    region: str,
    nccl_parameter_prefix: str,
    image_parameter_name: str,
    mount_path: str,
    prometheus: str = "none",
    grafana: str = "none",
    endpoint_parameter_name: str = "",
    mirror: str = "",
) -> str:
    """The `fmcluster.env` the lifecycle scripts read: KEY=value lines (values may be deploy-time tokens).

    `prometheus`, `grafana`, `endpoint_parameter_name` and `mirror` are what on_create.sh's observability step needs
    (it runs only when `prometheus` is "managed"; an empty mirror means the public release sites).
    """
    settings = {
        "FMCLUSTER_CLUSTER": cluster_name,
        "FMCLUSTER_REGION": region,
        "FMCLUSTER_NCCL_PREFIX": nccl_parameter_prefix,
        "FMCLUSTER_IMAGE_PARAMETER": image_parameter_name,
        "FMCLUSTER_CONTROLLER_GROUP": CONTROLLER_GROUP,
        "FMCLUSTER_FSX_MOUNT": mount_path,
        "FMCLUSTER_PROMETHEUS": prometheus,
        "FMCLUSTER_GRAFANA": grafana,
        "FMCLUSTER_ENDPOINT_PARAMETER": endpoint_parameter_name,
        "FMCLUSTER_MIRROR": mirror,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _package_text(path: str) -> str:
    return resources.files("fmcluster").joinpath(path).read_text(encoding="ascii")


def _package_data(path: str) -> str:
    """A data file of the package (dashboards may hold any UTF-8 text; scripts are ASCII)."""
    return resources.files("fmcluster").joinpath(path).read_text(encoding="utf-8")


def _acknowledge_deployment_findings(deployment: s3deploy.BucketDeployment, bucket: s3.IBucket) -> None:
    """cdk-nag findings of CDK's BucketDeployment function (one per stack), each with its reason."""
    function = deployment.handler_role.node.scope
    stack = cdk.Stack.of(deployment)
    policy = deployment.handler_role.node.try_find_child("DefaultPolicy")
    statements = stack.resolve(policy.document.to_json())["Statement"] if isinstance(policy, iam.Policy) else []
    ours = stack.resolve(bucket.arn_for_objects("*"))
    acknowledgments = [
        cdk.Acknowledgment(
            id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            reason="CDK's BucketDeployment function writes only its own CloudWatch logs with this policy",
        ),
        cdk.Acknowledgment(
            id="AwsSolutions-L1",
            reason="The BucketDeployment function's runtime is chosen and updated by aws-cdk-lib, not by this project",
        ),
        *(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Action::{action}]",
                reason="CDK's bucket grants to the BucketDeployment function: read the staged assets, copy them "
                "into the destination prefix and prune what is no longer shipped",
            )
            for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*")
        ),
    ]
    for statement in statements:
        listed = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for resource in listed:
            if "*" not in str(resource):
                continue
            reason = (
                "The function replaces the lifecycle scripts, whose object keys follow the package's files"
                if resource == ours
                else "The function reads the staged script assets, named by content hash, from the CDK assets bucket"
            )
            acknowledgments.append(
                cdk.Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{nag_form(function, resource)}]", reason=reason)
            )
    cdk.Validations.of(function).acknowledge(*acknowledgments)
    quiet_redundant_depends_on(function)
    acknowledge_deploy_time_functions(
        function, "copies the lifecycle scripts into their bucket (S3 only)", resource_type="AWS::Lambda::Function"
    )


def _token(value: object) -> bool:
    return isinstance(value, str | int | float) and cdk.Token.is_unresolved(value)
