"""HyperPodSlurmCluster: a SageMaker HyperPod cluster with API-driven Slurm: controller, login node, partitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from fmcluster.config.models import ComputeGroup, Orchestrator
from fmcluster.config.orchestrators import hyperpod
from fmcluster.config.value_rules import (
    HYPERPOD_CLUSTER_NAME_PATTERN,
    training_plan_elsewhere,
)
from fmcluster.constructs.acknowledgments import acknowledge_findings
from fmcluster.constructs.buckets import INCOMPLETE_UPLOAD_EXPIRATION, ProjectBuckets, quiet_auto_delete_provider
from fmcluster.constructs.hyperpod.lifecycle import (
    LIFECYCLE_ENV,
    LIFECYCLE_PREFIX,
    ON_CREATE,
    REPLACED_SCRIPTS_EXPIRATION,
    acknowledge_deployment_findings,
    lifecycle_archive_path,
    lifecycle_bucket_name,
    lifecycle_settings,
)
from fmcluster.constructs.hyperpod.role import execution_role
from fmcluster.constructs.lustre import LustreFileSystem, file_system_problems
from fmcluster.constructs.observability import GrafanaMode, PrometheusMode, endpoint_parameter_name
from fmcluster.constructs.props import (
    compute_group_models,
    node_settings_problems,
    orchestrator_group_problems,
    prop_problems,
    repeated_group_problems,
)
from fmcluster.drains import plan_words
from fmcluster.fabric import fabric_expectation
from fmcluster.names import CONTROLLER_GROUP, LOGIN_GROUP, LUSTRE_MOUNT_PATH, image_parameter_name, parameter_prefix
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token, known

LOGIN_NODES = 1
MOUNT_PATH = LUSTRE_MOUNT_PATH
"""Where HyperPod mounts the FSx for Lustre file system on every node."""
CONTROLLER_VOLUME_GIB = hyperpod.CONTROLLER_VOLUME_GIB
EFA_INTERFACE_TYPE = "efa-only"
"""EFA devices without an ENA part take no IP address, so a node uses one address of the subnet, not one per card
(EC2's current multi-card guidance; `efa` would give every EFA device an IP address too)."""
SLURM_CONFIG_STRATEGIES = ("Managed", "Overwrite", "Merge")
DEFAULT_SLURM_CONFIG_STRATEGY = "Managed"
MAX_SECURITY_GROUPS = 5


class HyperPodSlurmCluster(Construct):
    """A SageMaker HyperPod cluster whose Slurm is configured by the API: a controller, a login node, partitions.

    The cluster (`AWS::SageMaker::Cluster`, Slurm orchestrator) has a `controller` instance group of one node
    (Slurm node type Controller, with an extra encrypted EBS volume at /opt/sagemaker), a `login` group of one node
    when `login_instance_type` is given, and one group per compute group (node type Compute, partition named after
    the group, `ml.` + its instance type, its count). Accelerated groups run one thread per core, and a group's nodes
    pass the HyperPod deep health checks its `deep_health_checks` lists before joining; a group with `efa` gets
    `efa-only` EFA interfaces (no IP address per EFA device); a group with `training_plan_arn` draws its nodes
    from that SageMaker training plan. Every group mounts the FSx for Lustre file system at /fsx. Faulty nodes are
    replaced automatically. The nodes' interfaces live in `subnet`, in `security_groups`.

    Lifecycle: `on_create.sh` with every node file beside it, laid out as on the node (`lifecycle_files()`, from the
    one list `fmcluster.node_files`, the same a PCS node gets), and a `fmcluster.env` of this cluster's settings are
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
        file_system: the FSx for Lustre file system to mount at /fsx on every node: a `LustreStorage`, or a
            `LustreMount(dns_name=..., mount_name=...)` for one created elsewhere. Omitted: no shared file system
            (and so no shared training image).
        buckets: the project's `ProjectBuckets`; nodes may read and write its data and checkpoint buckets.
            Omitted: no access to project buckets.
        nccl_parameter_prefix: SSM path under which each group's NCCL environment lives, as
            `<prefix>/<group>/nccl-env`. Omitted: "/fmcluster/<cluster_name>".
        key: a customer KMS key for the controller's extra EBS volume; the role may use it for EBS (through
            grants for AWS resources only). Omitted: HyperPod encrypts the volume with an AWS owned key.
        image_repositories: the ECR repositories nodes pull images from; empty: none (grant pulls yourself, e.g.
            with `fmcluster.constructs.image.grant_image_pull`). Omitted: any repository of this account in this
            region.
        access_logs_bucket: a bucket for the lifecycle bucket's server access logs (its policy must let S3 logging
            write to it). Omitted: no access logs; the scripts' only writer is the stack's own deployment.
        controller_volume_gib: size of the controller's extra EBS volume, 1-16384 GiB. Omitted: 500.
        slurm_config_strategy: "Managed", "Overwrite" or "Merge" (how HyperPod treats slurm.conf changes made
            outside the API). Omitted: "Managed", sent explicitly as AWS's API-driven examples do (SageMaker HyperPod
            reference, "SlurmConfigStrategy": Managed is the default, detects drift and blocks manual changes; it can
            be changed later through UpdateCluster, and CloudFormation updates it in place: `Orchestrator/Slurm` is
            not create-only).
        prometheus: "managed": every node runs fmcluster/node/observability.sh (node, EFA, Lustre and GPU exporters
            and a Prometheus agent) remote-writing to the Amazon Managed Service for Prometheus workspace whose
            endpoint is in the SSM parameter `endpoint_parameter_name(cluster_name)` (give the same cluster name to a
            `ClusterObservability` with `node_roles=[cluster.role]`); the controller also runs the Slurm exporter.
            "none": no collectors on the nodes. Omitted: "none".
        grafana: "self-hosted" runs Grafana on the controller (needs `prometheus="managed"`, its data source);
            "managed" (an Amazon Managed Grafana workspace of `ClusterObservability`) and "none" run none on the
            nodes. Omitted: "none".
        artifact_mirror: the project's artifact mirror (`fmcluster.mirror`: `ArtifactMirror.uri`, the storage stack's
            `mirror.uri`), which nodes install enroot and pyxis from, in every egress mode (never from the internet);
            the role must be able to read it. Omitted: nodes install neither (an image without them fails that step).
        users_parameter: an SSM parameter under this cluster's prefix holding the cluster users (`NAME UID ADMIN
            [KEY]` lines, `fmcluster.stacks.cluster_services.users_parameter`): every node runs users.sh with it, and
            the controller, where HyperPod runs slurmdbd, also makes their Slurm associations in the account named
            after the cluster. Omitted: no users beyond the image's.
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
        file_system: LustreFileSystem | None = None,
        buckets: ProjectBuckets | None = None,
        nccl_parameter_prefix: str | None = None,
        key: kms.IKey | None = None,
        image_repositories: Sequence[ecr.IRepository] | None = None,
        access_logs_bucket: s3.IBucket | None = None,
        controller_volume_gib: int = CONTROLLER_VOLUME_GIB,
        slurm_config_strategy: str = DEFAULT_SLURM_CONFIG_STRATEGY,
        prometheus: PrometheusMode = "none",
        grafana: GrafanaMode = "none",
        artifact_mirror: str | None = None,
        users_parameter: str | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        stack = cdk.Stack.of(scope)
        groups = _validated(
            cluster_name=cluster_name,
            security_groups=security_groups,
            compute_groups=compute_groups,
            controller_instance_type=controller_instance_type,
            login_instance_type=login_instance_type,
            file_system=file_system,
            nccl_parameter_prefix=nccl_parameter_prefix,
            controller_volume_gib=controller_volume_gib,
            slurm_config_strategy=slurm_config_strategy,
            prometheus=prometheus,
            grafana=grafana,
            region=stack.region,
            account=stack.account,
        )
        super().__init__(scope, construct_id)
        self.cluster_name = cluster_name
        self.compute_groups: tuple[ComputeGroup, ...] = groups
        self.parameter_prefix = parameter_prefix(cluster_name)
        """SSM path of this cluster's own parameters (the training image's URI is `<prefix>/image-uri`)."""
        self.nccl_parameter_prefix = nccl_parameter_prefix or self.parameter_prefix
        self.image_parameter_name = image_parameter_name(cluster_name)
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
                s3deploy.Source.asset(lifecycle_archive_path()),
                s3deploy.Source.data(
                    LIFECYCLE_ENV,
                    lifecycle_settings(
                        cluster_name=cluster_name,
                        region=stack.region,
                        nccl_parameter_prefix=self.nccl_parameter_prefix,
                        image_parameter_name=self.image_parameter_name,
                        mount_path=MOUNT_PATH if file_system is not None else "",
                        prometheus=prometheus,
                        grafana=grafana,
                        endpoint_parameter_name=self.endpoint_parameter_name if prometheus == "managed" else "",
                        artifact_mirror=artifact_mirror or "",
                        users_parameter=users_parameter or "",
                        fabric=" ".join(
                            expectation.setting(group.name)
                            for group in groups
                            if (expectation := fabric_expectation(group.instance_type, efa=group.efa))
                        ),
                        training_plans=" ".join(plan_words(groups)),
                    ),
                ),
            ],
            prune=True,
            retain_on_delete=False,
        )
        """Copies the scripts into the bucket on every deploy (and removes scripts no longer shipped)."""
        acknowledge_deployment_findings(self.lifecycle_deployment, self.lifecycle_bucket)

        self.node_log_group = logs.LogGroup(
            self, "NodeLogs", retention=logs.RetentionDays.ONE_YEAR, removal_policy=removal_policy
        )
        """For agents that ship node logs such as /var/log/fmcluster/*.log; the nodes may write to it."""
        self.role = execution_role(
            self,
            subnet=subnet,
            security_groups=security_groups,
            buckets=buckets,
            key=key,
            image_repositories=image_repositories,
        )
        """The execution role of every instance group."""

        storage = []
        if file_system is not None:
            storage.append(
                sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    fsx_lustre_config=sagemaker.CfnCluster.ClusterFsxLustreConfigProperty(
                        dns_name=file_system.dns_name, mount_name=file_system.mount_name, mount_path=MOUNT_PATH
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
        **extra: Any,
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
            on_start_deep_health_checks=list(group.deep_health_checks) or None,
            training_plan_arn=group.training_plan_arn,
            network_interface=(
                sagemaker.CfnCluster.ClusterNetworkInterfaceProperty(interface_type=EFA_INTERFACE_TYPE)
                if group.efa
                else None
            ),
        )


def _validated(
    *,
    cluster_name: str,
    security_groups: Sequence[ec2.ISecurityGroup],
    compute_groups: Sequence[ComputeGroup | Mapping[str, object]],
    controller_instance_type: str,
    login_instance_type: str | None,
    file_system: LustreFileSystem | None,
    nccl_parameter_prefix: str | None,
    controller_volume_gib: int,
    slurm_config_strategy: str | None,
    region: str,
    account: str,
    prometheus: str = "none",
    grafana: str = "none",
) -> tuple[ComputeGroup, ...]:
    """The compute groups as models; or `InvalidProps` naming every problem."""
    problems: list[Problem] = []
    if not is_token(cluster_name) and not HYPERPOD_CLUSTER_NAME_PATTERN.match(cluster_name):
        problems.append(
            Problem(
                "cluster_name",
                "must be 1-63 letters, digits and '-', starting and ending with a letter or digit "
                f"(HyperPod's rule); got {cluster_name!r}",
            )
        )
    if not 1 <= len(security_groups) <= MAX_SECURITY_GROUPS:
        problems.append(
            Problem(
                "security_groups",
                f"HyperPod takes 1-{MAX_SECURITY_GROUPS} security groups (give the EFA group); "
                f"got {len(security_groups)}",
            )
        )
    problems += prop_problems(
        Orchestrator,
        type="hyperpod-slurm",
        controller_instance_type=controller_instance_type,
        login_instance_type=login_instance_type,
    )
    problems += node_settings_problems(
        prometheus=prometheus,
        grafana=grafana,
        nccl_parameter_prefix=nccl_parameter_prefix,
    )
    if not compute_groups:
        problems.append(
            Problem("compute_groups", "needs at least one compute group (each becomes a Slurm partition); got none")
        )
    groups, group_problems = compute_group_models(compute_groups)
    problems += group_problems
    for index, group in groups:
        where = f"compute_groups[{index}]"
        problems += orchestrator_group_problems(hyperpod, where, group)
        for message in training_plan_elsewhere(group.training_plan_arn, known(region), known(account)):
            problems.append(Problem(f"{where}.training_plan_arn", message))
        given = compute_groups[index]
        if volume_problem := hyperpod.root_volume_problem(
            given.model_fields_set if isinstance(given, ComputeGroup) else given
        ):
            problems.append(Problem(f"{where}.root_volume_gib", volume_problem))
    problems += repeated_group_problems(groups)
    typed: list[tuple[str, str | None]] = [
        ("controller_instance_type", controller_instance_type),
        ("login_instance_type", login_instance_type),
    ]
    typed += [(f"compute_groups[{index}].instance_type", group.instance_type) for index, group in groups]
    reported = {problem.path for problem in problems}  # a type the Orchestrator model refused already
    problems += [
        Problem(prop, refused)
        for prop, instance_type in typed
        if instance_type is not None
        and not is_token(instance_type)
        and prop not in reported
        and (refused := hyperpod.instance_type_problem(instance_type, known(region)))
    ]
    problems += file_system_problems(file_system)
    if not is_token(controller_volume_gib) and not 1 <= controller_volume_gib <= 16384:
        problems.append(Problem("controller_volume_gib", f"must be 1-16384 GiB; got {controller_volume_gib}"))
    if slurm_config_strategy is not None and slurm_config_strategy not in SLURM_CONFIG_STRATEGIES:
        problems.append(
            Problem(
                "slurm_config_strategy",
                f"must be one of {', '.join(SLURM_CONFIG_STRATEGIES)}; got {slurm_config_strategy!r}",
            )
        )
    raise_if_any("HyperPodSlurmCluster", problems)
    return tuple(group for _, group in groups)
