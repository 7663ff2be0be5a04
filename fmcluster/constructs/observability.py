"""ClusterObservability: Amazon Managed Service for Prometheus with fmcluster's rules, Grafana, CloudWatch alarms and
a dashboard for FSx, node-health events, all alerting through one encrypted SNS topic."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from importlib.resources import files
from typing import Literal, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_grafana as grafana_
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from fmcluster import names
from fmcluster.config import orchestrators
from fmcluster.config.models import Observability, Orchestrator, lustre_capacity_problem
from fmcluster.config.value_rules import grafana_without_source
from fmcluster.constructs.functions import provider_with_handler
from fmcluster.constructs.keys import customer_key, every_arn_here
from fmcluster.constructs.props import prop_problems
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token

PrometheusMode = Literal["managed", "none"]
GrafanaMode = Literal["self-hosted", "managed", "none"]
OrchestratorType = Literal["hyperpod-slurm", "pcs"]
RULE_NAMESPACES = {"fmcluster-recording": "recording.yml", "fmcluster-alerts": "alerts.yml"}
"""AMP rule groups namespace -> rule file under fmcluster/dashboards/rules/."""
DASHBOARD_FILES = ("efa.json", "fsx.json", "gpu.json", "slurm.json")
MANAGED_GRAFANA_VERSION = "10.4"
"""Amazon Managed Grafana version (service accounts, which the provisioning Lambda uses, need 9.4 or later)."""
FSX_FREE_ALARM_RATIO = 0.10
"""The FreeDataStorageCapacity alarm fires below this share of the file system's capacity."""
QUERY_ACTIONS = ("aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata")
CLOUDWATCH_READ_ACTIONS = (
    "cloudwatch:DescribeAlarmsForMetric",
    "cloudwatch:DescribeAlarmHistory",
    "cloudwatch:DescribeAlarms",
    "cloudwatch:ListMetrics",
    "cloudwatch:GetMetricData",
    "cloudwatch:GetInsightRuleReport",
)
"""What Amazon Managed Grafana's CloudWatch data source reads (AMG user guide, "CloudWatch data source" policy)."""
HYPERPOD_STATE_CHANGE = "SageMaker HyperPod Cluster State Change"
"""detail-type of the event HyperPod sends when a cluster's status changes (SageMaker developer guide, "Events that
Amazon SageMaker AI sends to Amazon EventBridge", HyperPod cluster state change: detail.ClusterName,
detail.ClusterStatus). Not `SageMaker HyperPod Cluster Event`: the cluster events reference says those exist only for
clusters with `NodeProvisioningMode: Continuous`, which fmcluster does not set (botocore sagemaker CreateCluster:
"only supported for EKS orchestrated clusters"; see docs/observability.md)."""
HYPERPOD_FAILED_STATUSES = ("Failed", "RollingBack")
"""The botocore sagemaker `ClusterStatus` values that mean a create or update did not take (the others: Creating,
Deleting, InService, SystemUpdating, Updating, are planned work)."""


def endpoint_parameter_name(cluster_name: str) -> str:
    """The SSM parameter holding the workspace's Prometheus endpoint; node scripts read it (observability.sh)."""
    return names.prometheus_endpoint_parameter_name(cluster_name)


def rule_file(name: str) -> str:
    return files("fmcluster").joinpath("dashboards", "rules", name).read_text(encoding="utf-8")


def dashboard_files() -> dict[str, str]:
    """fmcluster's Grafana dashboards, file name -> JSON text (compact)."""
    folder = files("fmcluster").joinpath("dashboards")
    return {
        name: json.dumps(json.loads(folder.joinpath(name).read_text(encoding="utf-8")), separators=(",", ":"))
        for name in DASHBOARD_FILES
    }


class ClusterObservability(Construct):
    """Metrics, dashboards and alarms for one training cluster.

    Always: an SNS topic for every alarm and alert (encrypted with a customer KMS key that CloudWatch, EventBridge and
    Amazon Managed Service for Prometheus may use; HTTPS only), with an email subscription when `alarm_email` is
    given; with `orchestrator="hyperpod-slurm"` an EventBridge rule that sends this cluster's HyperPod status changes
    to Failed or RollingBack to the topic (EventBridge may publish only for this construct's rules, and use the key
    only for this topic); and a CloudWatch dashboard of the alarms and those events. No rule watches EC2 instance
    state or AWS Health events: an event pattern cannot select one cluster's instances (no tags in EC2 state-change
    events, instance ids unknown at synth), HyperPod's instances are not in this account, and a lost node is caught
    from outside it by the Prometheus rules (NodeNotReporting, SlurmNodesDown); see docs/observability.md.

    `prometheus="managed"`: an Amazon Managed Service for Prometheus workspace with fmcluster's recording and alert
    rules (fmcluster/dashboards/rules/) as two rule groups namespaces and an alert manager that routes to the topic;
    `node_roles` may remote-write to it (and, with `grafana="self-hosted"`, query it), and read the SSM parameter
    `endpoint_parameter_name(cluster_name)` that tells node scripts the workspace's Prometheus endpoint.

    `grafana="managed"`: an Amazon Managed Grafana workspace (IAM Identity Center sign-in, which must be enabled in
    the account) with Prometheus and CloudWatch data sources; a custom resource provisions the Prometheus data source
    and fmcluster's dashboards through Grafana's HTTP API. Either Grafana needs `prometheus="managed"`, its data
    source (the cluster file's rule). `"self-hosted"` creates nothing here: the
    head node runs Grafana (fmcluster/node/observability.sh --grafana). `"none"`: no Grafana.

    With a file system: CloudWatch widgets for FSx (read and write throughput against the provisioned throughput, free
    capacity, metadata operations) and an alarm when free capacity falls below 10%.

    Example::

        observability = ClusterObservability(stack, "Observability", cluster_name="llm",
                                             file_system_id=lustre.file_system_id, lustre_capacity_gib=4800,
                                             lustre_throughput_per_tib=250, node_roles=[cluster.role],
                                             alarm_email="ops@example.com")
        observability.workspace.attr_prometheus_endpoint  # for node scripts

    Args:
        cluster_name: the cluster's name: resource names, the HyperPod event filter, the SSM parameter path.
        orchestrator: "hyperpod-slurm" (a HyperPod cluster named `cluster_name`: its state-change rule) or "pcs"
            (no HyperPod rule). Omitted: "hyperpod-slurm".
        prometheus: "managed" or "none". Omitted: "managed".
        grafana: "self-hosted", "managed" or "none". Omitted: "self-hosted".
        alarm_email: an address subscribed to the topic (AWS sends a confirmation mail first). Omitted: none.
        file_system_id: the FSx for Lustre file system to watch. Omitted: no FSx widgets or alarm.
        lustre_capacity_gib: its capacity; required with `file_system_id` (the alarm threshold is 10% of it).
        lustre_throughput_per_tib: its throughput tier in MB/s per TiB, drawn as the provisioned-throughput line.
            Omitted: no line.
        node_roles: roles of the cluster's nodes, granted remote write (and query with a self-hosted Grafana) on the
            workspace and read on its endpoint parameter. Omitted: none; use `grant_remote_write` later.
        removal_policy: what `cdk destroy` does to the workspace (the metrics history) and the topic's key.
            Omitted: RETAIN.

    Raises:
        ValueError: naming every prop that breaks the cluster file's `observability` rules or the FSx capacity rules.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        orchestrator: OrchestratorType = "hyperpod-slurm",
        prometheus: PrometheusMode = "managed",
        grafana: GrafanaMode = "self-hosted",
        alarm_email: str | None = None,
        file_system_id: str | None = None,
        lustre_capacity_gib: int | None = None,
        lustre_throughput_per_tib: int | None = None,
        node_roles: Sequence[iam.IRole] = (),
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        _validated(prometheus, grafana, alarm_email, file_system_id, lustre_capacity_gib, orchestrator)
        super().__init__(scope, construct_id)
        self.cluster_name = cluster_name
        stack = cdk.Stack.of(self)

        self.key = customer_key(
            self,
            "AlarmKey",
            removal_policy=removal_policy,
            description=f"fmcluster {cluster_name}: encrypts the alarm topic",
        )
        """The customer key of the alarm topic."""
        self.topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"fmcluster {cluster_name} alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        """Every alarm, alert and node-health event of the cluster arrives here."""
        self._let_publish_encrypted(iam.ServicePrincipal("cloudwatch.amazonaws.com"))
        # The topic has a policy of its own (TLS only, Prometheus, EventBridge), which replaces SNS's default one, so
        # CloudWatch alarms must be allowed by name: without this statement every alarm action fails with "... is not
        # authorized to perform: SNS:Publish" (AWS Knowledge Center, "cloudwatch-receive-sns-for-alarm-trigger").
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsOfThisAccount",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnLike": {
                        "aws:SourceArn": every_arn_here(stack, "cloudwatch", "alarm"),
                    }
                },
            )
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))

        self.workspace: aps.CfnWorkspace | None = None
        """The Amazon Managed Service for Prometheus workspace (None with prometheus="none")."""
        self.endpoint_parameter: ssm.StringParameter | None = None
        self.rule_namespaces: list[aps.CfnRuleGroupsNamespace] = []
        if prometheus == "managed":
            self._managed_prometheus(stack, removal_policy)
            if node_roles:
                self._grant_nodes(node_roles, query=grafana == "self-hosted")

        self.grafana_workspace: grafana_.CfnWorkspace | None = None
        """The Amazon Managed Grafana workspace (None unless grafana="managed")."""
        if grafana == "managed":
            self._managed_grafana(stack)

        self.event_rules = self._event_rules(orchestrator)
        self.alarms: list[cloudwatch.Alarm] = []
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"fmcluster-{cluster_name}", default_interval=cdk.Duration.hours(6)
        )
        """The CloudWatch dashboard: FSx (with a file system), alarms, node-health events."""
        if file_system_id is not None and lustre_capacity_gib is not None:  # _validated: both or neither
            self._fsx(file_system_id, lustre_capacity_gib, lustre_throughput_per_tib)
        self._cluster_widgets()

    # -- Prometheus -------------------------------------------------------------------------------------------

    def _managed_prometheus(self, stack: cdk.Stack, removal_policy: cdk.RemovalPolicy) -> None:
        workspace = aps.CfnWorkspace(
            self,
            "Workspace",
            alias=f"fmcluster-{self.cluster_name}",
            alert_manager_definition=self._alert_manager(stack),
        )
        workspace.apply_removal_policy(removal_policy)
        self.workspace = workspace
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PrometheusAlertManager",
                principals=[iam.ServicePrincipal("aps.amazonaws.com")],
                actions=["sns:Publish", "sns:GetTopicAttributes"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnEquals": {"aws:SourceArn": workspace.attr_arn},
                    "StringEquals": {"aws:SourceAccount": stack.account},
                },
            )
        )
        self._let_publish_encrypted(iam.ServicePrincipal("aps.amazonaws.com"))
        for name, file_name in RULE_NAMESPACES.items():
            namespace = aps.CfnRuleGroupsNamespace(
                self,
                f"{name.title().replace('-', '')}Rules",
                name=name,
                workspace=workspace.attr_arn,
                data=rule_file(file_name),
            )
            self.rule_namespaces.append(namespace)
        self.endpoint_parameter = ssm.StringParameter(
            self,
            "EndpointParameter",
            parameter_name=endpoint_parameter_name(self.cluster_name),
            string_value=workspace.attr_prometheus_endpoint,
            description=f"fmcluster {self.cluster_name}: Prometheus endpoint of the cluster's AMP workspace",
        )

    def _alert_manager(self, stack: cdk.Stack) -> str:
        """AMP's alert manager definition: every alert to the topic, one notification per cluster and alert name.

        Grouping by `cluster` and `alertname` (Alertmanager's `group_by`) puts every firing instance of one cause in
        one message, re-sent every 4 hours while it lasts; nodes lost together also raise SlurmNodesDown, which
        NodeNotReporting inhibits for the same cluster (one page for one cause).
        """
        subject = "fmcluster " + self.cluster_name + ": {{ .CommonLabels.alertname }} ({{ .CommonLabels.severity }})"
        return "\n".join(
            [
                "alertmanager_config: |",
                "  route:",
                "    receiver: sns",
                "    group_by: [cluster, alertname]",
                "    group_wait: 30s",
                "    group_interval: 5m",
                "    repeat_interval: 4h",
                "  inhibit_rules:",
                "    - source_matchers: [alertname = NodeNotReporting]",
                "      target_matchers: [alertname = SlurmNodesDown]",
                "      equal: [cluster]",
                "  receivers:",
                "    - name: sns",
                "      sns_configs:",
                f"        - topic_arn: {self.topic.topic_arn}",
                "          sigv4:",
                f"            region: {stack.region}",
                f"          subject: '{subject}'",
                "          attributes:",
                f"            cluster: {self.cluster_name}",
                "",
            ]
        )

    def _grant_nodes(self, roles: Sequence[iam.IRole], *, query: bool) -> None:
        workspace, parameter = self.workspace, self.endpoint_parameter
        assert workspace is not None and parameter is not None  # called with prometheus='managed' only
        statements = [
            iam.PolicyStatement(actions=["aps:RemoteWrite"], resources=[workspace.attr_arn]),
            iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[parameter.parameter_arn]),
        ]
        if query:
            statements.append(iam.PolicyStatement(actions=list(QUERY_ACTIONS), resources=[workspace.attr_arn]))
        self.node_policy = iam.Policy(self, "NodeAccess", statements=statements, roles=list(roles))
        """Remote write (and query) on the workspace for the node roles, in this construct's stack."""

    def grant_remote_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` remote-write to the workspace and read its endpoint parameter."""
        if self.workspace is None:
            raise ValueError("ClusterObservability: grant_remote_write needs prometheus='managed'")
        assert self.endpoint_parameter is not None  # made with the workspace
        self.endpoint_parameter.grant_read(grantee)
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["aps:RemoteWrite"], resource_arns=[self.workspace.attr_arn]
        )

    def grant_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` query the workspace (Grafana, notebooks)."""
        if self.workspace is None:
            raise ValueError("ClusterObservability: grant_query needs prometheus='managed'")
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(QUERY_ACTIONS), resource_arns=[self.workspace.attr_arn]
        )

    # -- Grafana ----------------------------------------------------------------------------------------------

    def _managed_grafana(self, stack: cdk.Stack) -> None:
        role = iam.Role(
            self,
            "GrafanaRole",
            assumed_by=iam.ServicePrincipal(
                "grafana.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
            description=f"Amazon Managed Grafana of fmcluster {self.cluster_name}: read metrics",
        )
        role.add_to_policy(iam.PolicyStatement(actions=list(CLOUDWATCH_READ_ACTIONS), resources=["*"]))
        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="CloudWatch metric and alarm reads (ListMetrics, GetMetricData, DescribeAlarms) support no "
                "resource-level permission; the role reads metrics only",
            )
        )
        self.grant_query(role)
        self.grafana_role = role
        self.grafana_workspace = grafana_.CfnWorkspace(
            self,
            "Grafana",
            name=f"fmcluster-{self.cluster_name}",
            description=f"fmcluster {self.cluster_name}: GPU, EFA, FSx and Slurm dashboards",
            account_access_type="CURRENT_ACCOUNT",
            authentication_providers=["AWS_SSO"],
            permission_type="CUSTOMER_MANAGED",
            role_arn=role.role_arn,
            data_sources=["PROMETHEUS", "CLOUDWATCH"],
            grafana_version=MANAGED_GRAFANA_VERSION,
        )
        self._provision_dashboards(stack)

    def _provision_dashboards(self, stack: cdk.Stack) -> None:
        workspace, prometheus = self.grafana_workspace, self.workspace
        assert workspace is not None and prometheus is not None  # managed Grafana needs prometheus='managed'
        workspace_arn = f"arn:{stack.partition}:grafana:{stack.region}:{stack.account}:/workspaces/{workspace.attr_id}"
        handler, provider = provider_with_handler(
            self,
            "DashboardProvisioner",
            "DashboardProvider",
            code="grafana_dashboards",
            timeout=cdk.Duration.minutes(2),
            description="Provisions fmcluster's dashboards and Prometheus data source in Amazon Managed Grafana",
            calls="provisions dashboards through the Amazon Managed Grafana API and the workspace's HTTPS endpoint",
        )
        handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "grafana:ListWorkspaceServiceAccounts",
                    "grafana:CreateWorkspaceServiceAccount",
                    "grafana:CreateWorkspaceServiceAccountToken",
                    "grafana:DeleteWorkspaceServiceAccountToken",
                ],
                resources=[workspace_arn],
            )
        )
        self.dashboards = cdk.CustomResource(
            self,
            "Dashboards",
            service_token=provider.service_token,
            resource_type="Custom::GrafanaDashboards",
            properties={
                "WorkspaceId": workspace.attr_id,
                "Endpoint": workspace.attr_endpoint,
                "PrometheusUrl": prometheus.attr_prometheus_endpoint,
                "Region": stack.region,
                "Dashboards": dashboard_files(),
            },
        )
        """fmcluster's dashboards in the managed Grafana workspace (re-provisioned when a dashboard changes)."""

    # -- events, alarms, dashboard ----------------------------------------------------------------------------

    def _let_publish_encrypted(self, principal: iam.ServicePrincipal) -> None:
        """A service that publishes to the topic must be able to use its key (SNS encrypts with it on its behalf)."""
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[principal],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}},
            )
        )

    def _event_rules(self, orchestrator: str) -> dict[str, events.Rule]:
        """This cluster's EventBridge rules, name -> rule, each publishing to the topic."""
        rules: dict[str, events.Rule] = {}
        if orchestrators.of(orchestrator).CLUSTER_STATUS_EVENTS:
            rules["HyperPodStateChanges"] = events.Rule(
                self,
                "HyperPodStateChanges",
                rule_name=f"fmcluster-{self.cluster_name}-hyperpod-failures",
                event_pattern=events.EventPattern(
                    source=["aws.sagemaker"],
                    detail_type=[HYPERPOD_STATE_CHANGE],
                    detail={"ClusterName": [self.cluster_name], "ClusterStatus": list(HYPERPOD_FAILED_STATUSES)},
                ),
                description=f"HyperPod cluster {self.cluster_name} turning Failed or RollingBack, to the alarm topic",
                targets=[_TopicTarget(self.topic)],  # type: ignore[list-item]  # an IRuleTarget by jsii.implements
            )
        if rules:
            self._let_rules_publish(list(rules.values()))
        return rules

    def _let_rules_publish(self, rules: Sequence[events.Rule]) -> None:
        """EventBridge may publish to the topic, and have SNS use the key, for these rules only.

        Topic policy: the EventBridge user guide's statement ("Amazon SNS permissions": events.amazonaws.com,
        sns:Publish on the topic) with the rules' ARNs as `aws:SourceArn`. Key policy: the SNS developer guide's
        statement for AWS services publishing to an encrypted topic (kms:GenerateDataKey*, kms:Decrypt) with
        `aws:SourceArn` and the topic's ARN as `kms:EncryptionContext:aws:sns:topicArn`, the context SNS encrypts
        under. The rules are named, so their ARNs are known without referring to them, and the context names any topic
        of this account and region: the key policy cannot refer to the topic or the rules, which refer to the key (a
        dependency cycle). Delivery through these conditions has not been measured on AWS here (unconfirmed).
        """
        stack = cdk.Stack.of(self)
        rule_arns = [
            stack.format_arn(
                service="events", resource="rule", resource_name=cast(events.CfnRule, rule.node.default_child).name
            )
            for rule in rules
        ]
        topics_here = stack.format_arn(service="sns", resource="*", arn_format=cdk.ArnFormat.NO_RESOURCE_NAME)
        principal = iam.ServicePrincipal("events.amazonaws.com")
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeRulesOfThisCluster",
                principals=[principal],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"ArnEquals": {"aws:SourceArn": rule_arns}},
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[principal],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions={
                    "ArnEquals": {"aws:SourceArn": rule_arns},
                    "ArnLike": {"kms:EncryptionContext:aws:sns:topicArn": topics_here},
                },
            )
        )

    def _fsx(self, file_system_id: str, capacity_gib: int, throughput_per_tib: int | None) -> None:
        def metric(name: str, statistic: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace="AWS/FSx",
                metric_name=name,
                dimensions_map={"FileSystemId": file_system_id},
                statistic=statistic,
                period=cdk.Duration.minutes(1),
            )

        capacity_bytes = capacity_gib * 1024**3
        free = metric("FreeDataStorageCapacity", "Minimum")
        alarm = cloudwatch.Alarm(
            self,
            "FsxFreeCapacityAlarm",
            alarm_description=f"FSx for Lustre of fmcluster {self.cluster_name}: less than "
            f"{FSX_FREE_ALARM_RATIO:.0%} of {capacity_gib} GiB free. Delete old checkpoints or raise capacity_gib.",
            metric=free.with_(period=cdk.Duration.minutes(5)),
            threshold=capacity_bytes * FSX_FREE_ALARM_RATIO,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            treat_missing_data=cloudwatch.TreatMissingData.MISSING,
        )
        alarm.add_alarm_action(cloudwatch_actions.SnsAction(self.topic))
        alarm.add_ok_action(cloudwatch_actions.SnsAction(self.topic))
        self.alarms.append(alarm)
        self.fsx_free_capacity_alarm = alarm

        annotations = []
        if throughput_per_tib is not None:
            provisioned = capacity_gib / 1024 * throughput_per_tib
            annotations.append(
                cloudwatch.HorizontalAnnotation(value=provisioned, label=f"provisioned {provisioned:g} MB/s")
            )
        throughput = cloudwatch.GraphWidget(
            title="FSx throughput (MB/s) against provisioned",
            width=12,
            left=[
                cloudwatch.MathExpression(
                    period=cdk.Duration.minutes(1),
                    expression="read / PERIOD(read) / 1000000",
                    label="read",
                    using_metrics={"read": metric("DataReadBytes", "Sum")},
                ),
                cloudwatch.MathExpression(
                    period=cdk.Duration.minutes(1),
                    expression="write / PERIOD(write) / 1000000",
                    label="write",
                    using_metrics={"write": metric("DataWriteBytes", "Sum")},
                ),
            ],
            left_annotations=annotations,
            left_y_axis=cloudwatch.YAxisProps(label="MB/s", show_units=False, min=0),
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"## FSx for Lustre `{file_system_id}` of fmcluster {self.cluster_name}", width=24, height=1
            ),
            throughput,
            cloudwatch.GraphWidget(
                title="FSx free capacity (bytes)",
                width=12,
                left=[free],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=capacity_bytes * FSX_FREE_ALARM_RATIO, label=f"alarm ({FSX_FREE_ALARM_RATIO:.0%})"
                    )
                ],
                left_y_axis=cloudwatch.YAxisProps(min=0),
            ),
            cloudwatch.GraphWidget(
                title="FSx metadata operations per second",
                width=12,
                left=[
                    cloudwatch.MathExpression(
                        period=cdk.Duration.minutes(1),
                        expression="ops / PERIOD(ops)",
                        label="metadata operations",
                        using_metrics={"ops": metric("MetadataOperations", "Sum")},
                    )
                ],
            ),
        )

    def _cluster_widgets(self) -> None:
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"## fmcluster {self.cluster_name}: alarms and node events", width=24, height=1
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=12, height=4)
            if self.alarms
            else cloudwatch.TextWidget(markdown="No CloudWatch alarms: no file system to watch.", width=12, height=4),
            cloudwatch.GraphWidget(
                title="HyperPod events sent to the alarm topic",
                width=12,
                left=[
                    cloudwatch.Metric(
                        namespace="AWS/Events",
                        metric_name="MatchedEvents",
                        dimensions_map={"RuleName": rule.rule_name},
                        statistic="Sum",
                        period=cdk.Duration.minutes(5),
                        label=name,
                    )
                    for name, rule in self.event_rules.items()
                ],
            )
            if self.event_rules
            else cloudwatch.TextWidget(
                markdown="No EventBridge rules: node loss is judged by the Prometheus rules (docs/observability.md).",
                width=12,
                height=4,
            ),
        )


@jsii.implements(events.IRuleTarget)
class _TopicTarget:
    """A rule target that publishes to `topic` without granting anything: `targets.SnsTopic` adds an unconditioned
    sns:Publish for every EventBridge rule of the account, which `ClusterObservability._let_rules_publish` replaces
    with one limited to this construct's rules."""

    def __init__(self, topic: sns.ITopic) -> None:
        self.topic = topic

    def bind(self, _rule: events.IRule, _id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self.topic.topic_arn)


def _validated(
    prometheus: str,
    grafana: str,
    alarm_email: str | None,
    file_system_id: str | None,
    capacity_gib: int | None,
    orchestrator: str,
) -> None:
    """Nothing; or ValueError naming every problem with the props, in the cluster file's words."""
    problems = prop_problems(Observability, prometheus=prometheus, grafana=grafana, alarm_email=alarm_email)
    problems += [replace(problem, path="orchestrator") for problem in prop_problems(Orchestrator, type=orchestrator)]
    if problem := grafana_without_source(grafana, prometheus):
        problems.append(Problem("grafana", problem))
    if (file_system_id is None) != (capacity_gib is None):
        problems.append(
            Problem("", "file_system_id and lustre_capacity_gib go together: give both to watch a file system")
        )
    if capacity_gib is not None and not is_token(capacity_gib) and (problem := lustre_capacity_problem(capacity_gib)):
        problems.append(Problem("lustre_capacity_gib", problem))
    raise_if_any("ClusterObservability", problems)
