"""NcclTuning and NcclValidation: resources, least privilege, the subscription, alarms, prop errors, cdk-nag, cfn-lint.

Two apps, each built and synthesized once for the module (every jsii call is a round trip to node):

* a library user's stack with cdk.json's feature flags: the project buckets, NcclTuning for four groups (two share
  p5.48xlarge; one is Trainium) with a user environment that sets an obsolete variable, NcclValidation on the same
  stack's checkpoints bucket with an encrypted SNS topic for the alarms, and a node role granted one group's parameter;
* the shape of the cluster file's app: a storage stack holding the buckets and a cluster stack holding both constructs
  with their defaults (the bucket crosses stacks), plus an environment-agnostic stack on an imported bucket.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import assertions, cx_api
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns

from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.functions import LAMBDA_RUNTIME
from fmcluster.constructs.nccl_tuning import NcclTuning, parameter_name
from fmcluster.constructs.nccl_validation import NcclValidation
from fmcluster.nccl import baseline_spec, nccl_environment
from tests import support
from tests.support import of_type

pytestmark = pytest.mark.synth

ENV = cdk.Environment(account="123456789012", region="us-east-1")
CLUSTER = "llm-pretrain"
GROUPS = [("gpu", "p5.48xlarge"), ("b200", "p6-b200.48xlarge"), ("spare", "p5.48xlarge"), ("trn", "trn1.32xlarge")]
USER_ENV = {"NCCL_DEBUG": "WARN", "NCCL_BUFFSIZE": "4194304"}
ONE_YEAR = 365


@dataclass
class Built:
    app: cdk.App
    outdir: Path
    nag: list[str]
    stacks: dict[str, cdk.Stack]
    templates: dict[str, dict]
    assembly: cx_api.CloudAssembly
    synthesized: support.Synthesized

    def assertions(self, name: str) -> assertions.Template:
        return assertions.Template.from_json(self.templates[name])

    def logical_id(self, name: str, element: cdk.CfnElement) -> str:
        return self.stacks[name].resolve(self.stacks[name].get_logical_id(element))


def build(app: cdk.App, stacks: dict[str, cdk.Stack]) -> Built:
    """The stacks by a short name, synthesized once with tests/support.py."""
    result = support.synthesize(app, list(stacks.values()))
    templates = {name: result.templates[stack.stack_name] for name, stack in stacks.items()}
    return Built(app, result.outdir, result.nag, stacks, templates, result.assembly, result)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    app = support.app(tmp_path_factory.mktemp("nccl-library"))
    stack = cdk.Stack(app, "NcclLibrary", env=ENV)
    buckets = ProjectBuckets(stack, "Buckets")
    tuning = NcclTuning(stack, "Tuning", cluster_name=CLUSTER, groups=GROUPS, user_env=USER_ENV)
    key = kms.Key(stack, "AlarmKey", enable_key_rotation=True)
    key.grant_encrypt_decrypt(iam.ServicePrincipal("cloudwatch.amazonaws.com"))
    topic = sns.Topic(stack, "Alarms", master_key=key, enforce_ssl=True)
    validation = NcclValidation(
        stack, "Validation", cluster_name=CLUSTER, results_bucket=buckets.checkpoints_bucket, groups=GROUPS,
        alarm_topic=topic,
    )  # fmt: skip
    node_role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    tuning.grant_read(node_role, "gpu")
    built = build(app, {"lib": stack})
    built.tuning, built.validation, built.buckets, built.topic, built.node_role = (
        tuning,
        validation,
        buckets,
        topic,
        node_role,
    )
    return built


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    app = support.app(tmp_path_factory.mktemp("nccl-split"))
    storage = cdk.Stack(app, f"{CLUSTER}-storage", env=ENV)
    buckets = ProjectBuckets(storage, "Buckets")
    cluster = cdk.Stack(app, f"{CLUSTER}-cluster", env=ENV)
    tuning = NcclTuning(cluster, "Nccl", cluster_name=CLUSTER, groups=[("gpu", "p5.48xlarge")])
    validation = NcclValidation(
        cluster, "NcclTests", cluster_name=CLUSTER, results_bucket=buckets.checkpoints_bucket,
        groups=[("gpu", "p5.48xlarge")],
    )  # fmt: skip
    agnostic = cdk.Stack(app, "Agnostic")
    NcclTuning(agnostic, "Nccl", cluster_name="other", groups=[("gpu", "p5en.48xlarge")])
    NcclValidation(
        agnostic, "NcclTests", cluster_name="other", groups=[("gpu", "p5en.48xlarge")],
        results_bucket=s3.Bucket.from_bucket_name(agnostic, "Imported", "other-checkpoints"),
    )  # fmt: skip
    built = build(app, {"storage": storage, "cluster": cluster, "agnostic": agnostic})
    built.tuning, built.validation, built.buckets = tuning, validation, buckets
    return built


# --- NcclTuning ---------------------------------------------------------------------------------------------------


def test_one_custom_resource_per_group_through_one_provider(lib):
    template = lib.templates["lib"]
    resources = of_type(template, "Custom::NcclEnvironment")
    assert len(resources) == len(GROUPS)
    framework = lib.logical_id("lib", lib.tuning.provider.node.find_child("framework-onEvent").node.default_child)
    by_name = {r["Properties"]["ParameterName"]: r["Properties"] for r in resources.values()}
    for group, instance_type in GROUPS:
        properties = by_name[f"/fmcluster/{CLUSTER}/{group}/nccl-env"]
        assert properties["ServiceToken"] == {"Fn::GetAtt": [framework, "Arn"]}
        expected = nccl_environment(
            instance_type, nccl_version="2.31.2", ofi_nccl_version="1.21.1", efa_installer_version="1.50.0",
            user_env=USER_ENV,
        )  # fmt: skip
        assert json.loads(properties["Environment"]) == expected == lib.tuning.environments[group]
        assert (
            properties["Description"] == f"NCCL environment for compute group {group} ({instance_type}), by fmcluster"
        )
    assert lib.tuning.parameter_names == {group: parameter_name(CLUSTER, group) for group, _ in GROUPS}


def test_functions_run_the_newest_python_runtime_cdk_nag_accepts(lib):
    newest = max(
        (runtime for runtime in lambda_.Runtime.ALL if runtime.name.startswith("python")),
        key=lambda runtime: tuple(int(part) for part in runtime.name.removeprefix("python").split(".")),
    )
    assert LAMBDA_RUNTIME.name == newest.name == "python3.14"
    functions = of_type(lib.templates["lib"], "AWS::Lambda::Function")
    ours = {
        r["Properties"]["Handler"]: r["Properties"]
        for r in functions.values()
        if "handler." in r["Properties"]["Handler"]
    }
    assert set(ours) == {"handler.on_event", "handler.handler"}
    assert {p["Runtime"] for p in ours.values()} == {"python3.14"}
    assert (ours["handler.on_event"]["Timeout"], ours["handler.handler"]["Timeout"]) == (30, 60)
    assert (ours["handler.on_event"]["MemorySize"], ours["handler.handler"]["MemorySize"]) == (128, 256)


def test_every_function_logs_to_a_log_group_kept_a_year(lib):
    template = lib.templates["lib"]
    groups = of_type(template, "AWS::Logs::LogGroup")
    mine = [
        f
        for f in of_type(template, "AWS::Lambda::Function").values()
        if "LoggingConfig" in f["Properties"]  # CDK's bucket-notifications singleton logs to its default group
    ]
    assert len(mine) == 3  # on_event handler, the Provider framework, the results function
    for function in mine:
        group = groups[function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]]
        assert group["Properties"]["RetentionInDays"] == ONE_YEAR
        assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == ("Retain", "Retain")


def policy_statements(template: dict, role_logical_id: str) -> list[dict]:
    statements = []
    for policy in of_type(template, "AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def role_of(built: Built, name: str, function: lambda_.Function) -> str:
    return built.logical_id(name, function.role.node.default_child)


def test_the_handler_may_only_put_and_delete_this_clusters_parameters(lib):
    template = lib.templates["lib"]
    role = role_of(lib, "lib", lib.tuning.function)
    log_group = lib.logical_id("lib", lib.tuning.log_group.node.default_child)
    assert policy_statements(template, role) == [
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [log_group, "Arn"]},
        },
        {
            "Action": ["ssm:DeleteParameter", "ssm:PutParameter"],
            "Effect": "Allow",
            "Resource": f"arn:aws:ssm:us-east-1:123456789012:parameter/fmcluster/{CLUSTER}/*",
        },
    ]
    roles = of_type(template, "AWS::IAM::Role")
    assert "ManagedPolicyArns" not in roles[role]["Properties"]
    framework_role = lib.logical_id(
        "lib", lib.tuning.provider.node.find_child("framework-onEvent").role.node.default_child
    )
    handler = lib.logical_id("lib", lib.tuning.function.node.default_child)
    actions = [s["Action"] for s in policy_statements(template, framework_role)]
    assert actions == [["logs:CreateLogStream", "logs:PutLogEvents"], "lambda:InvokeFunction", "lambda:GetFunction"]
    assert policy_statements(template, framework_role)[1]["Resource"][0] == {"Fn::GetAtt": [handler, "Arn"]}
    assert "ManagedPolicyArns" not in roles[framework_role]["Properties"]


def test_grant_read_gives_a_node_role_exactly_its_groups_parameter(lib):
    statements = policy_statements(lib.templates["lib"], lib.logical_id("lib", lib.node_role.node.default_child))
    assert statements == [
        {
            "Action": "ssm:GetParameter",
            "Effect": "Allow",
            "Resource": f"arn:aws:ssm:us-east-1:123456789012:parameter/fmcluster/{CLUSTER}/gpu/nccl-env",
        }
    ]
    with pytest.raises(KeyError, match="unknown group 'cpu'; known: gpu, b200, spare, trn"):
        lib.tuning.parameter_arn("cpu")


def test_obsolete_user_variables_become_synth_warnings_and_are_still_applied(lib):
    artifact = lib.assembly.get_stack_artifact(lib.stacks["lib"].artifact_id)
    warnings = sorted(m.entry.data for m in artifact.messages if m.level == cx_api.SynthesisMessageLevel.WARNING)
    assert warnings == sorted(
        [
            f"nccl.env for group '{group}': NCCL_BUFFSIZE: remove it; aws-ofi-nccl 1.21.1 sets NCCL_BUFFSIZE=8388608 "
            f"itself on {instance_type}; setting it overrides the plugin's per-platform choice (aws-ofi-nccl "
            "src/platform-aws.cpp) [ack: fmcluster:nccl-env:" + group + ":NCCL_BUFFSIZE]"
            for group, instance_type in GROUPS
            if group != "trn"
        ]
        + [
            "nccl.env for group 'trn': NCCL_BUFFSIZE: remove it; NCCL's default buffer size is recommended with EFA "
            "(aws-ofi-nccl doc/efa-env-var.md) [ack: fmcluster:nccl-env:trn:NCCL_BUFFSIZE]"
        ]
    )
    assert lib.tuning.warnings["gpu"][0].startswith("NCCL_BUFFSIZE: remove it;")
    assert lib.tuning.environments["gpu"]["NCCL_BUFFSIZE"] == "4194304"


# --- NcclValidation -----------------------------------------------------------------------------------------------


def test_the_results_function_reads_nccl_tests_logs_and_puts_its_own_metrics_only(lib):
    template = lib.templates["lib"]
    role = role_of(lib, "lib", lib.validation.function)
    bucket = lib.logical_id("lib", lib.buckets.checkpoints_bucket.node.default_child)
    key = lib.logical_id("lib", lib.buckets.key.node.default_child)
    log_group = lib.logical_id("lib", lib.validation.log_group.node.default_child)
    assert policy_statements(template, role) == [
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [log_group, "Arn"]},
        },
        {
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, "/nccl-tests/*"]]},
        },
        {"Action": "kms:Decrypt", "Effect": "Allow", "Resource": {"Fn::GetAtt": [key, "Arn"]}},
        {
            "Action": "cloudwatch:PutMetricData",
            "Condition": {"StringEquals": {"cloudwatch:namespace": "fmcluster/nccl"}},
            "Effect": "Allow",
            "Resource": "*",
        },
    ]
    assert "ManagedPolicyArns" not in of_type(template, "AWS::IAM::Role")[role]["Properties"]


def test_the_function_knows_each_instance_types_baseline(lib):
    function = lib.templates["lib"]["Resources"][lib.logical_id("lib", lib.validation.function.node.default_child)]
    variables = function["Properties"]["Environment"]["Variables"]
    assert json.loads(variables["BASELINES"]) == {
        instance_type: baseline_spec(instance_type)
        for instance_type in ("p5.48xlarge", "p6-b200.48xlarge", "trn1.32xlarge")
    }
    assert {k: v for k, v in variables.items() if k != "BASELINES"} == {
        "CLUSTER_NAME": CLUSTER,
        "LINE_RATE_FRACTION": "0.7",
        "PUBLISHED_MARGIN": "0.9",
        "MIN_BASELINE_BYTES": "1073741824",
    }
    lib.assertions("lib").has_resource_properties(
        "AWS::Lambda::EventInvokeConfig", {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 21600}
    )


def notification(template: dict) -> dict:
    (resource,) = of_type(template, "Custom::S3BucketNotifications").values()
    return resource["Properties"]


def test_new_nccl_tests_logs_invoke_the_function(lib, split):
    for built, name, managed in ((lib, "lib", True), (split, "cluster", False)):
        properties = notification(built.templates[name])
        function = built.logical_id(name, built.validation.function.node.default_child)
        assert properties["NotificationConfiguration"] == {
            "LambdaFunctionConfigurations": [
                {
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {
                        "Key": {
                            "FilterRules": [
                                {"Name": "suffix", "Value": ".log"},
                                {"Name": "prefix", "Value": "nccl-tests/"},
                            ]
                        }
                    },
                    "LambdaFunctionArn": {"Fn::GetAtt": [function, "Arn"]},
                }
            ]
        }
        assert properties["Managed"] is managed
    # across stacks, the bucket's stack is untouched: the subscription lives with the function, keeping the bucket's
    # other notifications, and the storage stack never depends on the cluster stack
    storage = split.templates["storage"]
    assert of_type(storage, "Custom::S3BucketNotifications") == {} and of_type(storage, "AWS::Lambda::Function") == {}
    assert split.stacks["cluster"] not in split.stacks["storage"].dependencies
    assert notification(split.templates["agnostic"])["BucketName"] == "other-checkpoints"


def test_one_alarm_per_instance_type_and_one_for_rejections_notify_the_topic(lib, split):
    alarms = of_type(lib.templates["lib"], "AWS::CloudWatch::Alarm")
    below = {
        next(d["Value"] for d in a["Properties"]["Dimensions"] if d["Name"] == "InstanceType"): a["Properties"]
        for a in alarms.values()
        if a["Properties"]["MetricName"] == "BelowBaseline"
    }
    assert set(below) == {"p5.48xlarge", "p6-b200.48xlarge", "trn1.32xlarge"}  # gpu and spare share one alarm
    topic = {"Ref": lib.logical_id("lib", lib.topic.node.default_child)}
    for instance_type, properties in below.items():
        assert properties["Dimensions"] == [
            {"Name": "Cluster", "Value": CLUSTER},
            {"Name": "InstanceType", "Value": instance_type},
        ]
        assert (properties["Namespace"], properties["Statistic"], properties["Period"]) == (
            "fmcluster/nccl",
            "Maximum",
            300,
        )
        assert (properties["Threshold"], properties["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
        assert properties["TreatMissingData"] == "ignore"  # stays in alarm until a run meets the baseline
        assert properties["AlarmActions"] == properties["OKActions"] == [topic]
    assert "compute group gpu, spare" in below["p5.48xlarge"]["AlarmDescription"]
    (rejected,) = [a["Properties"] for a in alarms.values() if a["Properties"]["MetricName"] == "RejectedResults"]
    assert (rejected["Statistic"], rejected["TreatMissingData"], rejected["AlarmActions"]) == (
        "Sum",
        "notBreaching",
        [topic],
    )
    assert set(lib.validation.alarms) == set(below)
    # without a topic there are no alarms (CT.CLOUDWATCH.PR.1: an alarm must have an action) until add_alarms
    assert of_type(split.templates["cluster"], "AWS::CloudWatch::Alarm") == {}
    assert (dict(split.validation.alarms), split.validation.rejected_alarm) == ({}, None)


def test_lambda_assets_hold_only_their_code(lib):
    for function, files in (
        (lib.tuning.function, ["handler.py"]),
        (lib.validation.function, ["handler.py", "nccl_log.py"]),
    ):
        code = lib.templates["lib"]["Resources"][lib.logical_id("lib", function.node.default_child)]["Properties"][
            "Code"
        ]
        asset_hash = code["S3Key"].split(".")[0]
        folder = lib.outdir / f"asset.{asset_hash}"
        assert sorted(p.name for p in folder.iterdir()) == files


# --- prop errors --------------------------------------------------------------------------------------------------
BAD_TUNING = [
    (
        {"cluster_name": "LLM"},
        "NcclTuning: cluster_name: must be 2-24 characters of lowercase letters, digits and '-', starting with a "
        "letter and ending with a letter or digit; got 'LLM'",
    ),
    ({"groups": []}, "NcclTuning: groups: give at least one (group name, instance type) pair"),
    (
        {"groups": [("gpu", "p5.48xlarge"), ("gpu", "p4d.24xlarge")]},
        "NcclTuning: groups[1]: 'gpu' is already the name of groups[0]; group names must be unique",
    ),
    (
        {"groups": [("GPU", "p5.48xlarge")]},
        "NcclTuning: groups[0]: group name must be a lowercase letter, then up to 19 lowercase letters, digits or '-', "
        "not ending with '-'; got 'GPU'",
    ),
    (
        {"groups": [("gpu", "p5.96xlarge")]},
        "NcclTuning: groups[0]: unknown instance type 'p5.96xlarge': EC2 offers no such type (botocore ec2 "
        "InstanceType); did you mean 'p5.4xlarge'?",
    ),
    ({"groups": ["gpu"]}, "NcclTuning: groups[0]: must be a (group name, instance type) pair; got 'gpu'"),
    (
        # aws-ofi-nccl doc/efa-env-var.md, p5.48xlarge: nccl>=2.18.0 is required (2.18.5 only recommended)
        {"nccl_version": "2.17.1", "groups": [("gpu", "p5.48xlarge"), ("old", "p4d.24xlarge")]},
        "NcclTuning: groups[0] (gpu, p5.48xlarge): nccl_version: P5-class instances (p5*, p6*) need 2.18.0 or later; "
        "got '2.17.1' (below 2.18.5 the plugin disables NVLS on NVLink Switch platforms; aws-ofi-nccl "
        "doc/efa-env-var.md)",
    ),
    (
        {"ofi_nccl_version": "newest"},
        "NcclTuning: ofi_nccl_version: must be a release version like 1.2.3 (a leading 'v' and a '-1' or '-aws' "
        "suffix are accepted); got 'newest'",
    ),
    (
        {"user_env": {"LD_PRELOAD": "/x.so"}},
        "NcclTuning: user_env: 'LD_PRELOAD' is not an NCCL, libfabric or aws-ofi-nccl variable; names must match "
        "^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$ (the nodes ignore the whole parameter otherwise)",
    ),
]


@pytest.fixture(scope="module")
def scope():
    app = cdk.App()
    stack = cdk.Stack(app, "Errors", env=ENV)
    bucket = s3.Bucket.from_bucket_name(stack, "Bucket", "some-bucket")
    return stack, bucket


@pytest.mark.parametrize(("props", "message"), BAD_TUNING, ids=[m.split(":")[1] for _, m in BAD_TUNING])
def test_bad_tuning_props_are_rejected_before_anything_is_built(scope, props, message):
    stack, _ = scope
    with pytest.raises(ValueError) as error:
        NcclTuning(stack, "Bad", **{"cluster_name": CLUSTER, "groups": [("gpu", "p5.48xlarge")], **props})
    assert str(error.value) == message
    assert stack.node.try_find_child("Bad") is None


def test_every_tuning_problem_is_reported_at_once(scope):
    stack, _ = scope
    with pytest.raises(ValueError) as error:
        NcclTuning(
            stack, "Bad", cluster_name="x", groups=[("gpu", "nope")], efa_installer_version="one",
            user_env={"NCCL_DEBUG": "A\nB"},
        )  # fmt: skip
    assert [line.split(":")[1].strip() for line in str(error.value).splitlines()] == [
        "cluster_name",
        "groups[0]",
        "efa_installer_version",
        "user_env",
    ]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"groups": []}, "NcclValidation: groups: give at least one (group name, instance type) pair"),
        ({"line_rate_fraction": 1.5}, "NcclValidation: line_rate_fraction: must be above 0 and at most 1; got 1.5"),
        ({"cluster_name": "a"}, "NcclValidation: cluster_name: must be 2-24 characters of lowercase letters, digits "
         "and '-', starting with a letter and ending with a letter or digit; got 'a'"),
    ],
)  # fmt: skip
def test_bad_validation_props_are_rejected_before_anything_is_built(scope, props, message):
    stack, bucket = scope
    with pytest.raises(ValueError) as error:
        NcclValidation(
            stack,
            "Bad",
            **{"cluster_name": CLUSTER, "results_bucket": bucket, "groups": [("gpu", "p5.48xlarge")], **props},
        )
    assert str(error.value) == message
    assert stack.node.try_find_child("Bad") is None


# --- gates --------------------------------------------------------------------------------------------------------


def test_cdk_nag_finds_nothing(lib, split):
    assert lib.nag == []
    assert split.nag == []


def acknowledged(app: cdk.App) -> dict[tuple[str, str], str]:
    found = {}
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule, reason in entry.data.items():
                    found[(construct.node.path, rule.removeprefix("Annotation::"))] = reason
    return found


def test_every_acknowledgment_is_finding_level_next_to_its_construct_with_a_reason(split):
    # cdk-nag's acknowledgments; the Control Tower ones (cdk-validator-cfnguard::) are held by tests/gates
    found = {key: reason for key, reason in acknowledged(split.app).items() if key[1].startswith("AwsSolutions-")}
    assert sorted(found) == [
        (
            "Agnostic/BucketNotificationsHandler050a0587b7544547bf325f094a3db834",
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        ),
        (
            "Agnostic/Nccl/HandlerRole",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ssm:<AWS::Region>:<AWS::AccountId>:parameter/fmcluster/"
            "other/*]",
        ),
        ("Agnostic/Nccl/ProviderRole", "AwsSolutions-IAM5[Resource::<NcclHandlerBE985D43.Arn>:*]"),
        ("Agnostic/NcclTests/Role", "AwsSolutions-IAM5[Resource::*]"),
        (
            "Agnostic/NcclTests/Role",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::other-checkpoints/nccl-tests/*]",
        ),
        (
            f"{CLUSTER}-cluster/BucketNotificationsHandler050a0587b7544547bf325f094a3db834",
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        ),
        (
            f"{CLUSTER}-cluster/Nccl/HandlerRole",
            f"AwsSolutions-IAM5[Resource::arn:aws:ssm:us-east-1:123456789012:parameter/fmcluster/{CLUSTER}/*]",
        ),
        (f"{CLUSTER}-cluster/Nccl/ProviderRole", "AwsSolutions-IAM5[Resource::<NcclHandlerBE985D43.Arn>:*]"),
        (f"{CLUSTER}-cluster/NcclTests/Role", "AwsSolutions-IAM5[Resource::*]"),
        (
            f"{CLUSTER}-cluster/NcclTests/Role",
            "AwsSolutions-IAM5[Resource::<BucketsCheckpointsBucketAB894006.Arn>/nccl-tests/*]",
        ),
    ]
    for (path, rule), reason in found.items():
        assert len(reason) >= 100, (path, rule)


def test_cfn_lint_reports_no_error_and_no_warning(lib, split):
    for built in (lib, split):
        assert built.synthesized.lint() == {stack.stack_name: [] for stack in built.stacks.values()}


# --- a group running without EFA ------------------------------------------------------------------------------------


def test_a_group_with_efa_false_gets_no_nccl_net_so_its_communicators_can_initialize():
    """`efa: false` on an EFA type: the nodes have no EFA device, aws-ofi-nccl fails to initialize, and NCCL_NET
    naming it would fail every communicator ("Failed to initialize any NET plugin": NVIDIA/nccl src/plugin/net.cc
    `ncclNetInit`). Only the groups whose `efa` is true keep NCCL_NET (fail closed over sockets)."""
    import yaml

    from fmcluster.config import parse
    from fmcluster.stacks.cluster_services import nccl_tuning

    data = yaml.safe_load((Path(__file__).parents[2] / "examples" / "pcs-cpu-and-gpu.yaml").read_text())
    gpu = next(group for group in data["compute"] if group["name"] == "gpu")
    data["compute"].append({**gpu, "name": "noefa", "efa": False, "placement_group": False})
    config = parse(data)
    tuning = nccl_tuning(cdk.Stack(cdk.App(), "NoEfa", env=ENV), config)
    assert tuning.environments["gpu"]["NCCL_NET"] == "Libfabric"
    assert "NCCL_NET" not in tuning.environments["noefa"]
    assert tuning.environments["noefa"]["NCCL_SOCKET_IFNAME"] == "^docker,lo,veth"
