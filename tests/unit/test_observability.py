"""ClusterObservability and ObservabilityStack: every valid combination of the cluster file's `observability` keys
(prometheus managed|none x grafana self-hosted|managed|none x alarm_email given|not; Grafana needs Prometheus), each
synthesized into its own stack of one app (built once for the module), checked with Template assertions, cdk-nag and
cfn-lint; and the quickstart's own observability stack from the session, watching the storage stack's file system."""

from __future__ import annotations

import itertools
import json

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from fmcluster.constructs.block_end import WARNING_TYPES
from fmcluster.constructs.observability import (
    DASHBOARD_FILES,
    HYPERPOD_FAILED_STATUSES,
    HYPERPOD_STATE_CHANGE,
    ClusterObservability,
    dashboard_files,
    endpoint_parameter_name,
    rule_file,
)
from fmcluster.outputs import SELF_HOSTED_GRAFANA_URL
from fmcluster.stacks.observability import capacity_blocks_to_drain, grafana_url
from tests import support
from tests.conftest import SynthesizedExample

pytestmark = pytest.mark.synth

ENV = cdk.Environment(account="123456789012", region="us-east-1")
FILE_SYSTEM = "fs-0123456789abcdef0"
COMBINATIONS = [
    (prometheus, grafana, email)
    for prometheus, grafana, email in itertools.product(
        ("managed", "none"), ("self-hosted", "managed", "none"), ("ops@example.com", None)
    )
    if prometheus == "managed" or grafana == "none"  # Grafana needs Prometheus (tests/unit/test_rule_agreement.py)
]


def combination_id(combination: tuple) -> str:
    prometheus, grafana, email = combination
    return f"prometheus-{prometheus}_grafana-{grafana}_{'email' if email else 'no-email'}"


class Synthesized:
    """One stack per combination in one app, synthesized once with tests/support.py; the quickstart's own
    observability stack (`composed`, as `build()` composes it) comes from the session."""

    def __init__(self, outdir, examples: dict[str, SynthesizedExample]) -> None:
        quickstart = examples["quickstart"]
        app = support.app(outdir)
        self.stacks: dict[str, cdk.Stack] = {}
        self.constructs: dict[str, ClusterObservability] = {}
        for combination in COMBINATIONS:
            prometheus, grafana, email = combination
            stack = cdk.Stack(app, combination_id(combination).replace("_", "-"), env=ENV)
            role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
            self.constructs[combination_id(combination)] = ClusterObservability(
                stack, "Observability", cluster_name="llm", prometheus=prometheus, grafana=grafana, alarm_email=email,
                file_system_id=FILE_SYSTEM, lustre_capacity_gib=4800, lustre_throughput_per_tib=250, node_roles=[role],
            )  # fmt: skip
            self.stacks[combination_id(combination)] = stack
        pcs = cdk.Stack(app, "pcs", env=ENV)
        ClusterObservability(pcs, "Observability", cluster_name="llm", orchestrator="pcs", prometheus="none",
                             grafana="none")  # fmt: skip
        self.stacks["pcs"] = pcs
        self.built = support.synthesize(app, list(self.stacks.values()))
        self.templates = {
            name: Template.from_json(self.built.templates[stack.stack_name]) for name, stack in self.stacks.items()
        }
        self.examples = examples
        composed, cluster = quickstart.built.observability, quickstart.built.cluster
        self.templates["composed"] = Template.from_json(quickstart.templates[composed.stack_name])
        self.node_role_id = cluster.resolve(cluster.get_logical_id(cluster.node_role.node.default_child))
        """Logical id of the quickstart's node role, in its cluster stack."""


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory, synthesized) -> Synthesized:
    return Synthesized(tmp_path_factory.mktemp("observability"), synthesized)


def resources(template: Template, kind: str) -> list[dict]:
    return [r["Properties"] for r in template.find_resources(kind).values()]


# -- gates ----------------------------------------------------------------------------------------------------


def test_cdk_nag_finds_nothing_unacknowledged(synthesized):
    assert synthesized.built.nag == []


def test_cfn_lint_reports_nothing(synthesized):
    """The quickstart's observability stack passes the same gate in tests/gates/test_templates.py."""
    assert synthesized.built.lint() == {stack.stack_name: [] for stack in synthesized.stacks.values()}


# -- every combination ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("combination", COMBINATIONS, ids=combination_id)
def test_the_grafana_url_output_is_the_managed_workspace_or_the_self_hosted_port_forward(synthesized, combination):
    prometheus, grafana, _ = combination
    name = combination_id(combination)
    stack, observability = synthesized.stacks[name], synthesized.constructs[name]
    url = grafana_url(observability, grafana)
    if grafana == "managed":
        workspace = stack.get_logical_id(observability.grafana_workspace)
        assert stack.resolve(url) == {"Fn::Join": ["", ["https://", {"Fn::GetAtt": [workspace, "Endpoint"]}]]}
    elif grafana == "self-hosted" and prometheus == "managed":
        assert url == SELF_HOSTED_GRAFANA_URL
    else:
        assert url is None


@pytest.mark.parametrize("combination", COMBINATIONS, ids=combination_id)
def test_each_combination_creates_what_its_options_ask_for(synthesized, combination):
    prometheus, grafana, email = combination
    template = synthesized.templates[combination_id(combination)]
    managed_prometheus = prometheus == "managed"

    template.resource_count_is("AWS::APS::Workspace", 1 if managed_prometheus else 0)
    template.resource_count_is("AWS::APS::RuleGroupsNamespace", 2 if managed_prometheus else 0)
    template.resource_count_is("AWS::Grafana::Workspace", 1 if grafana == "managed" else 0)
    template.resource_count_is("Custom::GrafanaDashboards", 1 if grafana == "managed" else 0)
    template.resource_count_is("AWS::SSM::Parameter", 1 if managed_prometheus else 0)
    subscriptions = resources(template, "AWS::SNS::Subscription")
    assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions] == ([("email", email)] if email else [])

    # always: encrypted HTTPS-only topic, node-health rules, FSx alarm and dashboard
    (topic,) = resources(template, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic
    statements = [s for p in resources(template, "AWS::SNS::TopicPolicy") for s in p["PolicyDocument"]["Statement"]]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )
    assert any(s.get("Principal") == {"Service": "events.amazonaws.com"} for s in statements)
    assert len(resources(template, "AWS::Events::Rule")) == 1  # HyperPod's state changes, nothing account-wide
    template.resource_count_is("AWS::CloudWatch::Alarm", 1)
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    (key,) = resources(template, "AWS::KMS::Key")
    assert key["EnableKeyRotation"] is True
    key_services = set()
    for statement in key["KeyPolicy"]["Statement"]:
        services = statement["Principal"].get("Service", [])
        key_services |= {services} if isinstance(services, str) else set(services)
    # logs.<region>: the CloudWatch Logs user guide's key policy for encrypted log groups (every fmcluster key has it)
    expected = {"cloudwatch.amazonaws.com", "events.amazonaws.com", "logs.us-east-1.amazonaws.com"}
    assert key_services == (expected | {"aps.amazonaws.com"} if managed_prometheus else expected)

    node_statements = [
        s for p in resources(template, "AWS::IAM::Policy") if p["PolicyName"].startswith("ObservabilityNodeAccess")
        for s in p["PolicyDocument"]["Statement"]
    ]  # fmt: skip
    actions = {a for s in node_statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    if managed_prometheus:
        assert {"aps:RemoteWrite", "ssm:GetParameter"} <= actions
        assert ("aps:QueryMetrics" in actions) == (grafana == "self-hosted")  # the head node's Grafana queries
    else:
        assert node_statements == []


def test_workspace_has_the_rules_and_routes_alerts_to_the_topic(synthesized):
    template = synthesized.templates[combination_id(("managed", "self-hosted", None))]
    namespaces = {n["Name"]: n for n in resources(template, "AWS::APS::RuleGroupsNamespace")}
    assert set(namespaces) == {"fmcluster-recording", "fmcluster-alerts"}
    assert namespaces["fmcluster-alerts"]["Data"] == rule_file("alerts.yml")
    assert namespaces["fmcluster-recording"]["Data"] == rule_file("recording.yml")
    (workspace,) = resources(template, "AWS::APS::Workspace")
    assert workspace["Alias"] == "fmcluster-llm"
    definition = workspace["AlertManagerDefinition"]["Fn::Join"][1]
    rendered = "".join(part if isinstance(part, str) else "<topic-arn>" for part in definition)
    config = yaml.safe_load(yaml.safe_load(rendered)["alertmanager_config"])
    assert config["route"]["receiver"] == "sns"
    # one notification per cluster and cause (Alertmanager's group_by), and a node loss pages once, not twice
    assert config["route"]["group_by"] == ["cluster", "alertname"]
    assert config["inhibit_rules"] == [{
        "source_matchers": ["alertname = NodeNotReporting"], "target_matchers": ["alertname = SlurmNodesDown"],
        "equal": ["cluster"]}]  # fmt: skip
    alerts = yaml.safe_load(rule_file("alerts.yml"))["groups"][0]["rules"]
    assert {"NodeNotReporting", "SlurmNodesDown"} <= {rule["alert"] for rule in alerts}
    (receiver,) = config["receivers"]
    assert receiver["sns_configs"][0]["topic_arn"] == "<topic-arn>"
    assert receiver["sns_configs"][0]["sigv4"] == {"region": "us-east-1"}
    statements = [s for p in resources(template, "AWS::SNS::TopicPolicy") for s in p["PolicyDocument"]["Statement"]]
    (aps,) = [s for s in statements if s.get("Sid") == "PrometheusAlertManager"]
    assert aps["Principal"] == {"Service": "aps.amazonaws.com"}
    assert aps["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
    (parameter,) = resources(template, "AWS::SSM::Parameter")
    assert parameter["Name"] == endpoint_parameter_name("llm") == "/fmcluster/llm/observability/prometheus-endpoint"
    assert parameter["Value"]["Fn::GetAtt"][1] == "PrometheusEndpoint"


def test_managed_grafana_reads_the_workspace_and_gets_the_dashboards(synthesized):
    template = synthesized.templates[combination_id(("managed", "managed", None))]
    (workspace,) = resources(template, "AWS::Grafana::Workspace")
    assert workspace["AuthenticationProviders"] == ["AWS_SSO"]
    assert workspace["PermissionType"] == "CUSTOMER_MANAGED"
    assert workspace["DataSources"] == ["PROMETHEUS", "CLOUDWATCH"]
    (dashboards,) = resources(template, "Custom::GrafanaDashboards")
    assert sorted(dashboards["Dashboards"]) == sorted(DASHBOARD_FILES)
    assert dashboards["Dashboards"] == dashboard_files()
    assert dashboards["PrometheusUrl"]["Fn::GetAtt"][1] == "PrometheusEndpoint"
    functions = resources(template, "AWS::Lambda::Function")
    assert any(f.get("Runtime") == "python3.14" and f["Handler"] == "handler.on_event" for f in functions)
    statements = [s for p in resources(template, "AWS::IAM::Policy") for s in p["PolicyDocument"]["Statement"]]
    (provisioner,) = [s for s in statements if "grafana:CreateWorkspaceServiceAccountToken" in s["Action"]]
    assert ":/workspaces/" in json.dumps(provisioner["Resource"])  # this workspace only, no wildcard
    roles = resources(template, "AWS::IAM::Role")
    (grafana_role,) = [r for r in roles if r["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "grafana.amazonaws.com"}]  # fmt: skip
    assert grafana_role["AssumeRolePolicyDocument"]["Statement"][0]["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"}
    }


def test_events_and_the_fsx_alarm(synthesized):
    """The one rule: HyperPod's cluster state change (SageMaker developer guide, "Events that Amazon SageMaker AI sends
    to Amazon EventBridge"); `ClusterStatus` values from botocore sagemaker's ClusterStatus enum."""
    template = synthesized.templates[combination_id(("none", "none", None))]
    (rule,) = resources(template, "AWS::Events::Rule")
    assert rule["EventPattern"] == {
        "source": ["aws.sagemaker"],
        "detail-type": [HYPERPOD_STATE_CHANGE],
        "detail": {"ClusterName": ["llm"], "ClusterStatus": ["Failed", "RollingBack"]},
    }
    assert HYPERPOD_STATE_CHANGE == "SageMaker HyperPod Cluster State Change"
    assert rule["Targets"][0]["Arn"]["Ref"].startswith("ObservabilityAlarmTopic")
    assert "RoleArn" not in rule["Targets"][0]  # the EventBridge guide: resource policies only for SNS targets
    (alarm,) = resources(template, "AWS::CloudWatch::Alarm")
    assert alarm["MetricName"] == "FreeDataStorageCapacity" and alarm["Namespace"] == "AWS/FSx"
    assert alarm["Dimensions"] == [{"Name": "FileSystemId", "Value": FILE_SYSTEM}]
    assert alarm["ComparisonOperator"] == "LessThanThreshold"
    assert alarm["Threshold"] == pytest.approx(4800 * 1024**3 * 0.1)
    assert alarm["AlarmActions"][0]["Ref"].startswith("ObservabilityAlarmTopic")
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    for needle in ("DataReadBytes", "DataWriteBytes", "FreeDataStorageCapacity", "MetadataOperations",
                   "provisioned 1171.88 MB/s", "MatchedEvents"):  # fmt: skip
        assert needle in body, needle


def test_stateful_parts_are_retained_by_default(synthesized):
    template = synthesized.templates[combination_id(("managed", "none", None))]
    for kind in ("AWS::APS::Workspace", "AWS::KMS::Key"):
        (resource,) = template.find_resources(kind).values()
        assert resource["DeletionPolicy"] == "Retain", kind


# -- the composed stack ---------------------------------------------------------------------------------------


def test_composed_stack_watches_the_storage_stacks_file_system_and_grants_the_node_role(synthesized):
    template = synthesized.templates["composed"]
    # the stack also holds the nccl-tests alarms (AWS/FSx is the FSx namespace); the FSx one is checked here
    (alarm,) = [a for a in resources(template, "AWS::CloudWatch::Alarm") if a.get("Namespace") == "AWS/FSx"]
    file_system = alarm["Dimensions"][0]["Value"]  # a reference to the storage stack's file system
    assert not isinstance(file_system, str) and "LustreFileSystem" in json.dumps(file_system)
    assert alarm["Threshold"] == pytest.approx(1200 * 1024**3 * 0.1)
    (policy,) = [
        p for p in resources(template, "AWS::IAM::Policy") if p["PolicyName"].startswith("ObservabilityNodeAccess")
    ]
    assert synthesized.node_role_id in json.dumps(policy["Roles"]) and not isinstance(policy["Roles"][0], str)
    template.resource_count_is("AWS::APS::Workspace", 1)  # quickstart: observability defaults
    template.resource_count_is("AWS::Grafana::Workspace", 0)
    (workspace,) = template.find_resources("AWS::APS::Workspace").values()
    assert workspace["DeletionPolicy"] == "Retain"  # storage.retain_on_delete defaults to true


# -- library users --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"prometheus": "self-hosted"}, "ClusterObservability: prometheus: "),
        ({"grafana": "cloud"}, "ClusterObservability: grafana: "),
        ({"prometheus": "none", "grafana": "self-hosted"}, "ClusterObservability: grafana: 'self-hosted' needs "
         "prometheus: managed as its data source; set grafana: none or prometheus: managed"),
        (
            {"alarm_email": "ops"},
            "ClusterObservability: alarm_email: must be an email address like ops@example.com; got 'ops'",
        ),
        ({"file_system_id": FILE_SYSTEM}, "ClusterObservability: file_system_id and lustre_capacity_gib go together"),
        ({"file_system_id": FILE_SYSTEM, "lustre_capacity_gib": 1000},
         "ClusterObservability: lustre_capacity_gib: must be 1200, 2400 or a multiple of 2400 GiB; got 1000 (nearest: "
         "1200)"),
    ],
    ids=["prometheus", "grafana", "grafana-without-prometheus", "email", "half-fsx", "capacity"],
)  # fmt: skip
def test_library_users_get_clear_errors(props, message):
    stack = cdk.Stack(cdk.App(), "Lib")
    with pytest.raises(ValueError) as error:
        ClusterObservability(stack, "Observability", cluster_name="llm", **props)
    assert message in str(error.value)


def test_grants_need_a_managed_prometheus():
    stack = cdk.Stack(cdk.App(), "Lib")
    observability = ClusterObservability(stack, "Observability", cluster_name="llm", prometheus="none", grafana="none")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    with pytest.raises(ValueError, match="grant_remote_write needs prometheus='managed'"):
        observability.grant_remote_write(role)
    with pytest.raises(ValueError, match="grant_query needs prometheus='managed'"):
        observability.grant_query(role)


def test_botocore_lists_the_statuses_the_rule_treats_as_failures():
    import botocore.session

    statuses = botocore.session.get_session().get_service_model("sagemaker").shape_for("ClusterStatus").enum
    assert set(HYPERPOD_FAILED_STATUSES) <= set(statuses)
    assert set(statuses) - set(HYPERPOD_FAILED_STATUSES) == {
        "Creating", "Deleting", "InService", "SystemUpdating", "Updating"
    }  # fmt: skip


def test_eventbridge_may_publish_and_use_the_key_for_this_clusters_rules_only(synthesized):
    """Topic policy in the EventBridge user guide's form ("Amazon SNS permissions"), key policy in the SNS developer
    guide's form for AWS services publishing to an encrypted topic; both scoped by aws:SourceArn to the rule."""
    template = synthesized.templates[combination_id(("none", "none", None))]
    (rule,) = resources(template, "AWS::Events::Rule")
    assert rule["Name"] == "fmcluster-llm-hyperpod-failures"
    rule_arn = ["arn:aws:events:us-east-1:123456789012:rule/fmcluster-llm-hyperpod-failures"]
    statements = [s for p in resources(template, "AWS::SNS::TopicPolicy") for s in p["PolicyDocument"]["Statement"]]
    events_statements = [s for s in statements if s.get("Principal") == {"Service": "events.amazonaws.com"}]
    assert len(events_statements) == 1  # targets.SnsTopic's unconditioned grant is not there
    (publish,) = events_statements
    assert publish["Action"] == "sns:Publish"
    assert publish["Condition"] == {"ArnEquals": {"aws:SourceArn": rule_arn}}
    (key,) = resources(template, "AWS::KMS::Key")
    (use,) = [s for s in key["KeyPolicy"]["Statement"] if s["Principal"] == {"Service": "events.amazonaws.com"}]
    assert sorted(use["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert use["Condition"]["ArnEquals"] == {"aws:SourceArn": rule_arn}
    assert use["Condition"]["ArnLike"] == {
        "kms:EncryptionContext:aws:sns:topicArn": "arn:aws:sns:us-east-1:123456789012:*"
    }


def test_a_pcs_cluster_gets_no_hyperpod_rule_and_no_eventbridge_access(synthesized):
    template = synthesized.templates["pcs"]
    template.resource_count_is("AWS::Events::Rule", 0)
    body = json.dumps(template.to_json())
    assert "events.amazonaws.com" not in body and "aws.sagemaker" not in body
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard")
    assert "No EventBridge rules" in json.dumps(dashboard["DashboardBody"])


@pytest.mark.parametrize("example", ["p5-capacity-block", "p6-b300-isolated", "quickstart", "hyperpod-training-plan"])
def test_each_examples_event_rules_match_what_its_orchestrator_emits(synthesized, example):
    """Done-when of issue 24: a PCS template has no HyperPod rule; a HyperPod one matches its state changes only."""
    built = synthesized.examples[example]
    patterns = [
        rule["Properties"]["EventPattern"]
        for stack in built.templates.values()
        for rule in stack.get("Resources", {}).values()
        if rule["Type"] == "AWS::Events::Rule" and "EventPattern" in rule["Properties"]
    ]
    hyperpod = [p for p in patterns if p.get("source") == ["aws.sagemaker"]]
    if built.config.orchestrator.type == "pcs":
        assert hyperpod == []
    else:
        assert [p["detail-type"] for p in hyperpod] == [[HYPERPOD_STATE_CHANGE]]
    # EC2's own events only where a capacity block drains before its end (tests/unit/test_block_end.py)
    ec2 = [p["detail-type"] for p in patterns if p.get("source") == ["aws.ec2"]]
    assert ec2 == ([list(WARNING_TYPES)] if capacity_blocks_to_drain(built.config) else [])
    assert not [p for p in patterns if p.get("source") == ["aws.health"]]
