"""PcsSlurmCluster: an AWS PCS Slurm cluster: its node groups on EFA launch templates, login node, node bundle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_pcs as pcs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import custom_resources as cr
from constructs import Construct

from fmcluster.catalog import instance_architecture
from fmcluster.config.models import ComputeGroup
from fmcluster.config.orchestrators import pcs as pcs_rules
from fmcluster.config.value_rules import AMI_ID_PATTERN
from fmcluster.constructs.acknowledgments import acknowledge_findings, acknowledge_wildcards
from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.efa import HOP_LIMIT_REASON, METADATA_HOP_LIMIT, EfaLaunchTemplate
from fmcluster.constructs.functions import provider_with_handler
from fmcluster.constructs.image import grant_image_pull
from fmcluster.constructs.image import parameter_name as image_parameter_name
from fmcluster.constructs.lustre import LustreFileSystem
from fmcluster.constructs.observability import GrafanaMode, PrometheusMode, endpoint_parameter_name
from fmcluster.constructs.pcs.prop_rules import group_name_problem, validated
from fmcluster.fabric import fabric_expectation
from fmcluster.names import LUSTRE_MOUNT_PATH, nccl_parameter_name, parameter_prefix
from fmcluster.node_scripts import INSTALL_DIR, NodeObservability, bundle_path, node_lifecycle_actions, runner_path
from fmcluster.problems import InvalidProps, Problem, raise_if_any
from fmcluster.tokens import is_token

GPU_JOB_MAP = f"{INSTALL_DIR}/slurm/gpu-job-map.sh"
"""fmcluster's Slurm Prolog and Epilog (the node bundle installs it before slurmd starts)."""
LOGIN_ROOT_VOLUME_GIB = pcs_rules.LOGIN_ROOT_VOLUME_GIB
ROOT_DEVICE = "/dev/sda1"
"""Root device of the PCS-Ready DLAMI (Ubuntu 24.04): awsome-distributed-training
`architectures/aws-pcs/assets/pcs-ready-dlami-with-enroot-pyxis.yaml` (DLAMIConfigs.ubuntu2404.deviceName). A
mismatch would attach a second volume and leave the root at the AMI's size; an `ami_id` of another OS family
(Amazon Linux: /dev/xvda) needs `root_device_name`."""
PURCHASE_OPTIONS: dict[str, PurchaseOption] = {
    "on-demand": "ONDEMAND",
    "odcr": "ONDEMAND",
    "capacity-block": "CAPACITY_BLOCK",
}
"""An ODCR is consumed as on-demand capacity through the launch template's reservation target."""
ASSET_READ_ACTIONS = ("s3:GetObject*", "s3:GetBucket*", "s3:List*")
"""What `Asset.grant_read` allows (CDK's bucket read grant)."""
LUSTRE_MOUNT_POINT = LUSTRE_MOUNT_PATH
NODE_IMAGE_PARAMETERS = "/aws/service/pcs/ami/dlami-base-ubuntu2404"
"""Where AWS publishes the PCS-Ready DLAMI per architecture (`<arch>/latest/ami-id`; FACTS.md, Node images)."""

PurchaseOption = Literal["ONDEMAND", "CAPACITY_BLOCK"]


def cluster_size(nodes: int) -> str:
    """The default AWS PCS size for `nodes` instances: room to double (`pcs_rules.default_size`), in the API's case."""
    if problem := pcs_rules.node_limit_problem(nodes):
        raise InvalidProps("PcsSlurmCluster", [Problem("expected_nodes", problem)])
    return pcs_rules.default_size(nodes).upper()


def node_image_provider(scope: Construct) -> cr.Provider:
    """The Provider of `Custom::PcsNodeImage` (fmcluster/lambdas/pcs_ami): reads the PCS-Ready DLAMI's SSM public
    parameters, nothing else."""
    handler, provider = provider_with_handler(
        scope,
        "NodeImageLookup",
        "NodeImageProvider",
        code="pcs_ami",
        timeout=cdk.Duration.seconds(60),
        description="Resolves the PCS-Ready DLAMI for a CPU architecture once (SSM public parameter)",
        calls="reads the PCS-Ready DLAMI's SSM public parameter (ssm:GetParameter)",
    )
    parameters = cdk.Stack.of(scope).format_arn(
        service="ssm", account="", resource="parameter", resource_name=f"{NODE_IMAGE_PARAMETERS.lstrip('/')}/*"
    )
    handler.add_to_role_policy(iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[parameters]))
    acknowledge_wildcards(
        handler,
        resources=[parameters],
        reason="Reads only AWS's public PCS-Ready DLAMI parameters (one per CPU architecture)",
    )
    return provider


def pcs_ready_dlami(
    scope: Construct, construct_id: str, provider: cr.Provider, architecture: str, refresh: str | None
) -> str:
    """The AMI id (a deploy-time token) of the PCS-Ready DLAMI for `architecture`: `Custom::PcsNodeImage` reads
    `/aws/service/pcs/ami/dlami-base-ubuntu2404/<arch>/latest/ami-id` at Create and again only when `refresh` (the
    cluster file's `image_refresh`) changes, so an unrelated stack update never moves an image."""
    properties = {"Architecture": architecture}
    if refresh is not None:
        properties["Refresh"] = refresh
    image = cdk.CustomResource(
        scope,
        construct_id,
        service_token=provider.service_token,
        resource_type="Custom::PcsNodeImage",
        properties=properties,
    )
    return image.get_att_string("ImageId")


def _cluster_settings(
    job_hook: str | None, enforce_associations: bool
) -> list[pcs.CfnCluster.SlurmCustomSettingProperty] | None:
    """The cluster-level Slurm custom settings: Prolog and Epilog (the job hook), AccountingStorageEnforce. Only keys
    PCS lists for clusters (TaskProlog is not among them: see tests/unit/test_pcs.py); None when there are none."""
    settings = [("Prolog", job_hook), ("Epilog", job_hook)] if job_hook else []
    if enforce_associations:
        settings.append(("AccountingStorageEnforce", pcs_rules.ACCOUNTING_ENFORCE))
    return [
        pcs.CfnCluster.SlurmCustomSettingProperty(parameter_name=name, parameter_value=value)
        for name, value in settings
    ] or None


class PcsSlurmCluster(Construct):
    """An AWS PCS cluster (managed Slurm controller) with its compute node groups, login node and node software.

    The controller lives in AWS's account and reaches the nodes through an interface in `subnet`, in
    `security_groups` (give the EFA group: it admits all traffic from itself, which covers slurmctld and slurmd).
    Each of `compute_groups` becomes an `EfaLaunchTemplate` (all EFA interfaces, its capacity and reservation, its
    placement group from `placement_groups`, or the existing one it names), a node group (static, min = max = count,
    unless the group's `min_count` is lower: then PCS starts nodes for queued jobs and stops them when idle) and a
    queue (Slurm partition) of the same name.
    `login_instance_type` adds a login node (no EFA, no public IP); it is the head node. Without one, when
    `prometheus="managed"` wants a head node (Slurm exporter, self-hosted Grafana), a node group `head` of one
    m5.xlarge plays that part.

    Every node group's PCS node lifecycle actions (`fmcluster.node_scripts.node_lifecycle_actions`), run before
    slurmd starts, install the node bundle (an S3 asset: node scripts, dashboards, nccl-tests.sbatch) into
    /opt/fmcluster, make /scratch on local NVMe, mount `file_system` at /fsx (over EFA where the file system is
    EFA-enabled and the node can), write the group's NCCL environment from the SSM parameter
    `<nccl_parameter_prefix>/<group>/nccl-env` and set up enroot and pyxis; a failure of any of these terminates the
    node (PCS replaces it). With `prometheus="managed"` they also run observability.sh, whose failure only warns.
    With a `file_system`, one node watches for the training image (`/fmcluster/<cluster>/image-uri`) and imports it
    into /fsx when it is published or rebuilt: the head node, or without one every compute node (the import's lock
    on /fsx lets one of them do it).

    Nodes share one instance profile whose role sits under the path `/aws-pcs/` (AWS PCS accepts no other role). It
    may register with this cluster only, be managed through SSM, read this cluster's SSM parameters
    (`/fmcluster/<cluster>/*` and `nccl_parameter_prefix`), pull the cluster's training image (ECR repositories
    tagged for `cluster_name`, as `TrainingImage` tags its repository; nothing of the image is referenced, so the
    nodes boot while it builds), read the node bundle and, with `buckets`, the project's data
    (`ProjectBuckets.grant_node_access`). Without an `ami_id`, a node group runs the PCS-Ready DLAMI (Ubuntu 24.04,
    NVIDIA driver, EFA, PCS agent and Slurm) for the instance's architecture, resolved at deploy time by a custom
    resource from AWS's SSM public parameter and kept until `image_refresh` changes.

    Example::

        network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
        lustre = LustreStorage(stack, "Lustre", vpc=network.vpc, subnet=network.compute_subnet,
                               client_security_groups=[network.efa_security_group], capacity_gib=1200)
        cluster = PcsSlurmCluster(
            stack, "Slurm",
            cluster_name="llm",
            subnet=network.compute_subnet,
            security_groups=[network.efa_security_group],
            compute_groups=[ComputeGroup(name="gpu", instance_type="p5.48xlarge", count=16,
                                         capacity="capacity-block", reservation_id="cr-0123456789abcdef0")],
            login_instance_type="m5.4xlarge",
            file_system=lustre,
        )
        cluster.role  # the nodes' role; grant it more with other constructs' grant_* methods

    Args:
        cluster_name: the PCS cluster's name (botocore pcs ClusterName: 3-40 characters); also names the SSM
            parameters the nodes read.
        subnet: where the controller's interface and every node live (for a reservation, in its availability zone).
        security_groups: groups of the controller's interface and of every node; give the EFA group. The file
            system must admit them.
        compute_groups: `fmcluster.config.ComputeGroup`s (or mappings of the cluster file's `compute` keys), each a
            node group and queue; names unique, PCS names (3-25 characters), capacity "on-demand", "odcr" or
            "capacity-block". Omitted: none (add node groups on launch templates of your own with `add_node_group`).
        placement_groups: a cluster placement group per compute group name, for groups whose `placement_group` is
            true (not capacity blocks, which EC2 places itself, nor reservations made outside the group). Omitted: the
            construct makes one for each group that wants one.
        login_instance_type: EC2 type of the one login node. Omitted: no login node.
        file_system: the FSx for Lustre file system to mount at /fsx on every node: a `LustreStorage`, or a
            `LustreMount` for one created elsewhere. Omitted: no shared file system (and so no shared training
            image).
        buckets: the project's `ProjectBuckets`; nodes get `grant_node_access` (read data, read and write
            checkpoints). Omitted: no access to project buckets.
        nccl_parameter_prefix: SSM path under which each group's NCCL environment lives, as
            `<prefix>/<group>/nccl-env` (what `NcclTuning` writes). Omitted: "/fmcluster/<cluster_name>".
        prometheus: "managed": every node runs observability.sh (exporters and a Prometheus agent) remote-writing to
            the workspace whose endpoint `ClusterObservability` publishes in SSM; the head node also runs the Slurm
            exporter. "none": no collectors. Omitted: "none".
        grafana: "self-hosted" runs Grafana on the head node (needs `prometheus="managed"`); "managed" and "none"
            run none on the nodes. Omitted: "none".
        artifact_mirror: the project's artifact mirror (`fmcluster.mirror`: `ArtifactMirror.uri`, the storage stack's
            `mirror.uri`), which nodes install enroot and pyxis from, in every egress mode (never from the internet);
            the role must be able to read it. Omitted: nodes install neither (an image without them fails that step).
        users_parameter: an SSM parameter under this cluster's prefix holding the cluster users (`NAME UID ADMIN
            [KEY]` lines, `fmcluster.stacks.cluster_services.users_parameter`): every node runs users.sh with it as a
            required lifecycle action (slurmd cannot start a job of a user the node lacks). Omitted: no users beyond
            the image's.
        ami_id: one image for every node group (one CPU architecture). Omitted: the PCS-Ready DLAMI per architecture
            (`node_image`).
        node_images: an image per CPU architecture ("x86_64", "arm64"), e.g. `BakedNodeImage.image_id`s (the
            node-image stack's `image_ids`): node groups of that architecture run it. Not with `ami_id`. Omitted: the
            PCS-Ready DLAMI.
        image_refresh: a label (e.g. "2026-12-01") of the default image's resolution: change it to move every node
            group to the PCS-Ready DLAMI AWS publishes then (the node groups roll). Omitted: resolved once, at create.
        slurm_version: a Slurm version AWS PCS creates clusters with (24.11, 25.05, 25.11, 26.05); pyxis is built
            against this version's Slurm on the node. Omitted: 26.05.
        expected_nodes: how many instances the node groups will hold; picks the size when `size` is omitted: the
            smallest that manages twice as many (SMALL 32, MEDIUM 512, LARGE 2,048). Omitted: the compute groups'
            nodes and the head node, or 32 without compute groups.
        size: "SMALL", "MEDIUM" or "LARGE" (any case). Size is create-only: changing it replaces the cluster with
            every node group and queue, so pin it once the cluster runs (and before changing `compute_groups` or
            `expected_nodes` moves the default). Omitted: from `expected_nodes`.
        scale_down_idle_seconds: for node groups with min < max; static groups never scale. Omitted: 600.
        job_hook: the Prolog and Epilog every compute node runs as root (PCS runs Slurm configless, so only the
            cluster's Slurm custom settings can set them). Omitted: fmcluster's gpu-job-map.sh, which the node
            bundle installs before slurmd starts. None: no hook, for nodes without the bundle (a missing Prolog
            drains the node at its first job).
        detailed_monitoring: one-minute EC2 metrics on every node (billed per instance). Omitted: False.
        accounting: PCS's managed Slurm accounting (`SlurmConfiguration.Accounting` mode STANDARD, records kept while
            the cluster lives): sacct, sshare, sreport, associations. PCS bills it on top of the cluster; it can be
            turned on later in place (botocore pcs UpdateAccountingRequest; CloudFormation: no interruption) but never
            turned off (PCS user guide, "Slurm accounting in AWS PCS"). With
            `users_parameter`, the head node (login node, or head node of its own) also gives each user an association
            in the account named after the cluster (slurm-accounting.sh: Fairshare=1, QoS normal, from a timer).
            Omitted: False (the cluster file's `orchestrator.accounting` defaults to true).
        enforce_associations: with `accounting`, the cluster setting `AccountingStorageEnforce=associations,limits,qos`
            (`pcs_rules.ACCOUNTING_ENFORCE`): jobs of a user without an association are refused at submission, and
            association and QoS limits hold. Only where every user who runs jobs gets an association, and after
            checking that the managed slurmctld accepts your users' jobs (the cluster file sets it with
            `orchestrator.accounting_enforce`, opt-in: docs/operations.md, "Fair-share and QoS"). Omitted: False.

    Raises:
        ValueError: naming every prop that AWS PCS or the cluster file's rules would reject (unresolved tokens are
            skipped).

    Attributes:
        cluster: the `pcs.CfnCluster`. role, instance_profile: what every node runs with.
        launch_templates: the `EfaLaunchTemplate` of each compute group; login_template: the login (head) node's.
        node_groups, queues: by name. node_bundle, node_runner: the S3 assets of the node software and of the step
            runner every lifecycle action runs (after `node_bundle_uri()`).
        parameter_prefix, nccl_parameter_prefix, image_parameter_name, endpoint_parameter_name: the SSM names the
            nodes read.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        subnet: ec2.ISubnet,
        security_groups: Sequence[ec2.ISecurityGroup],
        compute_groups: Sequence[ComputeGroup | Mapping[str, object]] = (),
        placement_groups: Mapping[str, ec2.IPlacementGroup | ec2.CfnPlacementGroup] | None = None,
        login_instance_type: str | None = None,
        file_system: LustreFileSystem | None = None,
        buckets: ProjectBuckets | None = None,
        nccl_parameter_prefix: str | None = None,
        prometheus: PrometheusMode = "none",
        grafana: GrafanaMode = "none",
        artifact_mirror: str | None = None,
        users_parameter: str | None = None,
        ami_id: str | None = None,
        node_images: Mapping[str, str] | None = None,
        image_refresh: str | None = None,
        slurm_version: str = pcs_rules.DEFAULT_SLURM_VERSION,
        expected_nodes: int | None = None,
        size: str | None = None,
        scale_down_idle_seconds: int = 600,
        job_hook: str | None = GPU_JOB_MAP,
        detailed_monitoring: bool = False,
        accounting: bool = False,
        enforce_associations: bool = False,
    ) -> None:
        placement_groups = placement_groups or {}
        groups, orchestrator, observability, nodes = validated(
            cluster_name=cluster_name,
            security_groups=security_groups,
            compute_groups=compute_groups,
            placement_groups=placement_groups,
            login_instance_type=login_instance_type,
            file_system=file_system,
            nccl_parameter_prefix=nccl_parameter_prefix,
            prometheus=prometheus,
            grafana=grafana,
            ami_id=ami_id,
            image_refresh=image_refresh,
            slurm_version=slurm_version,
            expected_nodes=expected_nodes,
            size=size,
        )
        if ami_id is not None and node_images:
            raise InvalidProps("PcsSlurmCluster", [Problem("node_images", "give ami_id or node_images, not both")])
        super().__init__(scope, construct_id)
        self.cluster_name = cluster_name
        self.slurm_version = slurm_version
        self.image_refresh = image_refresh
        self.subnet = subnet
        self.security_groups = tuple(security_groups)
        self.file_system = file_system
        self.detailed_monitoring = detailed_monitoring
        self.parameter_prefix = parameter_prefix(cluster_name)
        """SSM path of this cluster's own parameters."""
        self.nccl_parameter_prefix = nccl_parameter_prefix or self.parameter_prefix
        self.image_parameter_name = image_parameter_name(cluster_name)
        """SSM parameter the image watcher reads the training image's ECR URI from (optional at deploy time)."""
        self.endpoint_parameter_name = endpoint_parameter_name(cluster_name)
        """SSM parameter observability.sh reads the Prometheus endpoint from (with prometheus="managed")."""
        self.cluster = pcs.CfnCluster(
            self,
            "Cluster",
            name=cluster_name,
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=slurm_version),
            size=size.upper() if size is not None and not is_token(size) else size or cluster_size(nodes),
            networking=pcs.CfnCluster.NetworkingProperty(
                subnet_ids=[subnet.subnet_id], security_group_ids=[group.security_group_id for group in security_groups]
            ),
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=scale_down_idle_seconds,
                accounting=pcs.CfnCluster.AccountingProperty(mode="STANDARD", default_purge_time_in_days=-1)
                if accounting
                else None,
                slurm_custom_settings=_cluster_settings(job_hook, accounting and enforce_associations),
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
        self._grant_parameter_read()
        grant_image_pull(self.role, cluster_name)  # by name and tag: the nodes need not wait for the image
        if buckets is not None:
            buckets.grant_node_access(self.role)
        self.instance_profile = iam.InstanceProfile(self, "NodeProfile", role=self.role, path="/aws-pcs/")
        self.mirror = artifact_mirror
        """The artifact mirror nodes install enroot and pyxis from (FMCLUSTER_ARTIFACT_MIRROR), or None."""
        self.users_parameter = users_parameter
        """The SSM parameter of the cluster users every node creates (users.sh install), or None."""
        self.accounting = accounting
        """Managed accounting on: the head node gives each cluster user an association (slurm-accounting.sh)."""
        self._images: dict[str, str] = dict(node_images or {})
        self._image_provider: cr.Provider | None = None
        self._health_checks_provider: cr.Provider | None = None
        self._health_checks_handler: lambda_.Function
        self.health_checks: dict[str, cdk.CustomResource] = {}
        """Each compute group's PCS instance health checks (`compute[].health_checks`), by group name."""
        self.node_bundle: s3_assets.Asset | None = None
        """The node bundle (`fmcluster.node_scripts.bundle_files()`) as an S3 asset the nodes may read."""
        self.node_runner: s3_assets.Asset | None = None
        """run-step.sh as an S3 asset: the script of every node lifecycle action."""
        self.node_groups: dict[str, pcs.CfnComputeNodeGroup] = {}
        self.queues: dict[str, pcs.CfnQueue] = {}
        self.launch_templates: dict[str, EfaLaunchTemplate] = {}
        self.login_template: ec2.LaunchTemplate | None = None

        node_observability = (
            NodeObservability(cluster_name=cluster_name, endpoint_parameter=self.endpoint_parameter_name)
            if prometheus == "managed"
            else None
        )
        head = pcs_rules.head_group(orchestrator, observability)
        for group in groups:
            self._add_compute_group(
                group,
                placement_groups.get(group.name) or self._own_placement_group(group),
                node_observability,
                ami_id=ami_id,
                watch_image=head is None and file_system is not None,  # the image is imported into /fsx
            )
        if head is not None:
            _, head_name, head_type = head
            self._add_head_node(
                head_name,
                head_type,
                replace(node_observability, head_node=True, grafana=grafana == "self-hosted")
                if node_observability is not None
                else None,
                ami_id=ami_id,
            )

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
        min_count: int | None = None,
        scale_down_idle_seconds: int | None = None,
        lifecycle_actions: pcs.CfnComputeNodeGroup.NodeLifecycleActionsProperty | None = None,
    ) -> pcs.CfnComputeNodeGroup:
        """A node group of up to `count` instances on a launch template of your own (and, with `queue`, a Slurm
        partition named `name`); `compute_groups` and `login_instance_type` use it for theirs.

        `min_count` omitted: `count`, a static group. Below `count`, PCS starts nodes for queued jobs and stops them
        once idle for `scale_down_idle_seconds` (omitted: the cluster-wide setting, 600 s by default; a node group's
        own time needs Slurm 25.11 or later: botocore pcs ComputeNodeGroupSlurmConfigurationRequest).

        `ami_id` omitted: the PCS-Ready DLAMI for the type's architecture (`node_image`).

        `lifecycle_actions` omitted: `lifecycle_actions()`, the steps every node needs (the node bundle, /scratch, the
        NCCL defaults, enroot and pyxis), so the default `job_hook`, a script of the bundle, is there before slurmd
        starts (a missing Prolog drains a node at its first job).

        Example::

            template = EfaLaunchTemplate(stack, "P5", instance_type="p5.48xlarge", subnet=network.compute_subnet,
                                         security_groups=[network.efa_security_group])
            cluster.add_node_group("gpu", instance_type="p5.48xlarge", count=16,
                                   launch_template_id=template.launch_template_id,
                                   launch_template_version=template.latest_version,
                                   lifecycle_actions=cluster.lifecycle_actions(nccl_parameter_name="/my/nccl"))
        """
        problems: list[Problem] = []
        if ami_id is not None and not is_token(ami_id) and not AMI_ID_PATTERN.match(ami_id):
            problems.append(Problem("ami_id", f"must be an AMI id like ami-0123456789abcdef0; got {ami_id!r}"))
        elif ami_id is None and (problem := pcs_rules.node_image_problem(instance_type)):
            problems.append(Problem("ami_id", problem))
        if name in self.node_groups:
            problems.append(Problem("name", f"a node group named {name!r} exists already"))
        elif problem := group_name_problem(name, queue=queue):
            problems.append(Problem("name", problem))
        raise_if_any("PcsSlurmCluster", problems)
        group = pcs.CfnComputeNodeGroup(
            self,
            f"{name}NodeGroup",
            name=name,
            cluster_id=self.cluster.attr_id,
            ami_id=ami_id or self.node_image(instance_architecture(instance_type)),
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=launch_template_id, version=launch_template_version
            ),
            iam_instance_profile_arn=self.instance_profile.instance_profile_arn,
            instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=instance_type)],
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=count if min_count is None else min_count, max_instance_count=count
            ),
            slurm_configuration=pcs.CfnComputeNodeGroup.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=scale_down_idle_seconds
            )
            if scale_down_idle_seconds is not None
            else None,
            subnet_ids=[self.subnet.subnet_id],
            purchase_option=purchase_option,
            node_lifecycle_actions=lifecycle_actions or self.lifecycle_actions(),
        )
        # nodes call pcs:RegisterComputeNodeGroupInstance as they boot; the statement granting it is in the role's
        # default policy, which the node group does not reference: without this, instances may start before it exists
        group.node.add_dependency(self.role.node.find_child("DefaultPolicy"))
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

    def node_image(self, architecture: str) -> str:
        """The AMI id (a deploy-time token) of the PCS-Ready DLAMI for `architecture`, resolved once and kept.

        A custom resource reads the SSM public parameter
        `/aws/service/pcs/ami/dlami-base-ubuntu2404/<arch>/latest/ami-id` at Create and again only when
        `image_refresh` changes (fmcluster/lambdas/pcs_ami/handler.py), so an unrelated stack update never moves a
        node group onto a newer image.
        """
        if architecture not in self._images:
            if self._image_provider is None:
                self._image_provider = node_image_provider(self)
            self._images[architecture] = pcs_ready_dlami(
                self,
                f"NodeImage{architecture.replace('_', '')}",
                self._image_provider,
                architecture,
                self.image_refresh,
            )
        return self._images[architecture]

    def _grant_update_node_groups(self, handler: lambda_.Function) -> None:
        """What a caller of UpdateComputeNodeGroup needs besides pcs:UpdateComputeNodeGroup (AWS PCS user guide,
        "Minimum permissions for AWS PCS", UpdateComputeNodeGroup's row): EC2 reads, launches and tags, and passing
        the nodes' role through their instance profile. The page names no resources or conditions for them."""
        ec2_actions = [
            "ec2:DescribeVpcs",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeLaunchTemplates",
            "ec2:DescribeLaunchTemplateVersions",
            "ec2:DescribeInstanceTypes",
            "ec2:DescribeInstanceTypeOfferings",
            "ec2:RunInstances",
            "ec2:CreateFleet",
            "ec2:CreateTags",
        ]
        handler.add_to_role_policy(iam.PolicyStatement(actions=ec2_actions, resources=["*"]))
        handler.add_to_role_policy(iam.PolicyStatement(actions=["iam:PassRole"], resources=[self.role.role_arn]))
        handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:GetInstanceProfile"], resources=[self.instance_profile.instance_profile_arn]
            )
        )
        acknowledge_wildcards(
            handler,
            resources=["*"],
            reason="The PCS user guide's minimum permissions for UpdateComputeNodeGroup: ec2 Describe*, RunInstances, "
            "CreateFleet and CreateTags with no resource named (the instances PCS launches are known only then); the "
            "Describe actions support no resource-level permissions",
        )
        acknowledge_findings(
            cast(iam.IRole, handler.role),
            checkov=["CKV_AWS_111"],
            resource_type="AWS::IAM::Policy",
            reason="ec2:RunInstances, CreateFleet and CreateTags without constraints: the PCS user guide's minimum "
            "permissions for UpdateComputeNodeGroup name no resource or condition for them (the instances PCS "
            "launches for the update are known only then)",
        )

    def _grant_parameter_read(self) -> None:
        """ssm:GetParameter on this cluster's parameters: each group's NCCL environment, the image URI, the endpoint."""
        stack = cdk.Stack.of(self)
        prefixes = dict.fromkeys([self.parameter_prefix, self.nccl_parameter_prefix])
        parameters = [
            stack.format_arn(service="ssm", resource="parameter", resource_name=f"{prefix.lstrip('/')}/*")
            for prefix in prefixes
        ]
        self.role.add_to_principal_policy(iam.PolicyStatement(actions=["ssm:GetParameter"], resources=parameters))
        acknowledge_wildcards(
            self.role,
            resources=parameters,
            reason="Nodes read only this cluster's own SSM parameters (NCCL settings per group, image URI)",
        )

    def lifecycle_actions(self, **settings: Any) -> pcs.CfnComputeNodeGroup.NodeLifecycleActionsProperty:
        """Node lifecycle actions for a node group of this cluster: `fmcluster.node_scripts.node_lifecycle_actions`
        with this cluster's runner, bundle and Slurm version (`settings` as there: lustre_dns_name, ...)."""
        return node_lifecycle_actions(
            runner_s3_uri=self.node_runner_uri(),
            bundle_s3_uri=self.node_bundle_uri(),
            slurm_version=self.slurm_version,
            mirror=self.mirror,
            users_parameter=self.users_parameter,
            **settings,
        )

    def node_runner_uri(self) -> str:
        """run-step.sh's S3 URI (the script of every lifecycle action), made and granted on first use."""
        self.node_bundle_uri()
        assert self.node_runner is not None
        return self.node_runner.s3_object_url

    def node_bundle_uri(self) -> str:
        """The node bundle's S3 URI (`node_lifecycle_actions(bundle_s3_uri=...)`), made and granted to the nodes on
        first use, with the runner's; the bundle installs the Prolog and Epilog `job_hook` names by default."""
        if self.node_bundle is None:
            self.node_bundle = s3_assets.Asset(self, "NodeBundle", path=bundle_path())
            self.node_bundle.grant_read(self.role)
            self.node_runner = s3_assets.Asset(self, "NodeRunner", path=runner_path())
            self.node_runner.grant_read(self.role)
            acknowledge_wildcards(
                self.role,
                actions=ASSET_READ_ACTIONS,
                resources=[self.node_bundle.bucket.arn_for_objects("*")],
                reason="CDK's Asset.grant_read: nodes read their node bundle (scripts, dashboards, the nccl-tests job) "
                "and the step runner of their lifecycle actions "
                "from the CDK bootstrap assets bucket, read-only; that bucket holds deployment artifacts of this "
                "account's CDK apps (code and scripts named by content hash), not training data",
            )
        return self.node_bundle.s3_object_url

    def _own_placement_group(self, group: ComputeGroup) -> ec2.IPlacementGroup | None:
        """The existing placement group a group names (used as it is, nothing created), or a new cluster placement
        group for a group that wants one (`placement_group: true`) and was given none."""
        if group.existing_placement_group is not None:
            return ec2.PlacementGroup.from_placement_group_name(
                self, f"{group.name}ExistingPlacementGroup", group.existing_placement_group
            )
        if not group.new_placement_group:
            return None
        return ec2.PlacementGroup(self, f"{group.name}PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER)

    def _lustre(self) -> dict[str, Any]:
        if self.file_system is None:
            return {}
        return {"lustre_dns_name": self.file_system.dns_name, "lustre_mount_name": self.file_system.mount_name}

    def _add_compute_group(
        self,
        group: ComputeGroup,
        placement_group: ec2.IPlacementGroup | ec2.CfnPlacementGroup | None,
        observability: NodeObservability | None,
        *,
        ami_id: str | None,
        watch_image: bool,
    ) -> None:
        file_system_efa = self.file_system is not None and self.file_system.efa
        over_efa = file_system_efa and group.efa and group.instance.lustre_efa_client
        template = EfaLaunchTemplate(
            self,
            f"{group.name}LaunchTemplate",
            instance_type=group.instance_type,
            security_groups=self.security_groups,
            subnet=self.subnet,
            efa=group.efa,
            root_volume_gib=group.root_volume_gib,
            root_device_name=ROOT_DEVICE,
            capacity=group.capacity,  # type: ignore[arg-type]  # never training-plan: validation refuses it with pcs
            reservation_id=group.reservation_id,
            placement_group=placement_group,
            detailed_monitoring=self.detailed_monitoring,
        )
        self.launch_templates[group.name] = template
        node_group = self.add_node_group(
            group.name,
            instance_type=group.instance_type,
            count=group.count,
            launch_template_id=template.launch_template_id,
            launch_template_version=template.latest_version,
            purchase_option=PURCHASE_OPTIONS[group.capacity],
            ami_id=ami_id,
            min_count=group.min_count,
            scale_down_idle_seconds=group.scale_down_idle_minutes * 60 if group.scale_down_idle_minutes else None,
            lifecycle_actions=self.lifecycle_actions(
                **self._lustre(),
                lustre_efa=over_efa,
                nccl_parameter_name=nccl_parameter_name(self.nccl_parameter_prefix, group.name),
                observability=observability,
                image_parameter=self.image_parameter_name if watch_image else None,
                fabric=fabric_expectation(group.instance_type, efa=group.efa),
            ),
        )
        if group.health_checks is not None:
            self.add_instance_health_checks(group.name, node_group, group.health_checks.request())

    def add_instance_health_checks(
        self, name: str, node_group: pcs.CfnComputeNodeGroup, instance_health_checks: Mapping[str, object]
    ) -> cdk.CustomResource:
        """PCS instance health checks on `node_group` (`instance_health_checks`: botocore pcs
        UpdateInstanceHealthChecksRequest, e.g. `HealthChecks(deep_check="quick").request()`), applied by a custom
        resource calling UpdateComputeNodeGroup (fmcluster/lambdas/pcs_health_checks): CloudFormation's
        AWS::PCS::ComputeNodeGroup has no such property yet (cfn-lint's schema); the custom resource is there until it
        does. They need Slurm 26.05 or later, and changing them replaces the group's instances (botocore pcs).

        Example::

            cluster.add_instance_health_checks("gpu", cluster.node_groups["gpu"], {
                "healthMonitoring": {"mode": "STANDARD"}, "deepHealthChecks": {"onStart": {"profile": "QUICK"}}})
        """
        if self._health_checks_provider is None:
            self._health_checks_handler, self._health_checks_provider = provider_with_handler(
                self,
                "InstanceHealthChecksFunction",
                "InstanceHealthChecksProvider",
                code="pcs_health_checks",
                timeout=cdk.Duration.minutes(14),
                description="Applies PCS instance health checks to node groups (UpdateComputeNodeGroup) until "
                "CloudFormation has the property",
                calls="reads and updates this cluster's PCS node groups (pcs:GetComputeNodeGroup, "
                "pcs:UpdateComputeNodeGroup)",
            )
            self._grant_update_node_groups(self._health_checks_handler)
        self._health_checks_handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=["pcs:GetComputeNodeGroup", "pcs:UpdateComputeNodeGroup"],
                resources=[self.cluster.attr_arn, node_group.attr_arn],
            )
        )
        resource = cdk.CustomResource(
            self,
            f"{name}InstanceHealthChecks",
            service_token=self._health_checks_provider.service_token,
            resource_type="Custom::PcsInstanceHealthChecks",
            properties={
                "ClusterId": self.cluster.attr_id,
                "ComputeNodeGroupId": node_group.attr_id,
                "InstanceHealthChecks": dict(instance_health_checks),
            },
        )
        self.health_checks[name] = resource
        return resource

    def _add_head_node(
        self, name: str, instance_type: str, observability: NodeObservability | None, *, ami_id: str | None
    ) -> None:
        """The login node (or the head node of its own), which also watches for the training image."""
        template = ec2.LaunchTemplate(
            self,
            "loginLaunchTemplate",
            security_group=self.security_groups[0],
            associate_public_ip_address=False,
            detailed_monitoring=self.detailed_monitoring or None,
            require_imdsv2=True,
            http_put_response_hop_limit=METADATA_HOP_LIMIT,
            block_devices=[
                ec2.BlockDevice(
                    device_name=ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        LOGIN_ROOT_VOLUME_GIB, encrypted=True, volume_type=ec2.EbsDeviceVolumeType.GP3
                    ),
                )
            ],
        )
        for group in self.security_groups[1:]:
            template.connections.add_security_group(group)
        acknowledge_findings(template, controls=["ec2_launch_template_token_hop_limit_check"], reason=HOP_LIMIT_REASON)
        if not self.detailed_monitoring:
            acknowledge_findings(
                template,
                controls=["ec2_launch_template_monitoring_enabled_check"],
                reason="Detailed monitoring is billed per instance; the head node reports its metrics every 15 s "
                "through its own exporters to Prometheus. `compliance: control-tower` turns it on",
            )
        self.login_template = template
        self.add_node_group(
            name,
            instance_type=instance_type,
            count=1,
            launch_template_id=cast(str, template.launch_template_id),  # set: the template is made here
            launch_template_version=template.latest_version_number,
            ami_id=ami_id,
            queue=False,
            lifecycle_actions=self.lifecycle_actions(
                **self._lustre(),
                observability=observability,
                image_parameter=self.image_parameter_name if self.file_system is not None else None,
                accounting_account=self.cluster_name if self.accounting and self.users_parameter else None,
            ),
        )
