"""The gaps the Control Tower proactive controls and checkov found, closed in every example's templates, and the two
scanners shown to catch them (so their zero-findings gates can fail).

Expected shapes come from the controls themselves (cdklabs.cdk-validator-cfnguard 0.0.62,
rules/control-tower/cfn-guard/: CT.CLOUDWATCH.PR.1 and PR.3, CT.KMS.PR.3), the VPC user guide's default security
group rules (all traffic in from the group itself, all traffic out to 0.0.0.0/0) and the CloudWatch Logs user guide's
key policy for log encryption ("Encrypt log data in CloudWatch Logs using AWS KMS").
"""

from __future__ import annotations

import json

import pytest

from tests import support
from tests.conftest import EXAMPLES
from tests.scanners import FAIL_SYNTH_ON_VALIDATION_ERRORS, checkov_findings, guard_findings, guard_validator

pytestmark = pytest.mark.synth

EXAMPLE_IDS = [path.stem for path in EXAMPLES]


def _resources(templates: dict[str, dict], resource_type: str) -> dict[str, tuple[str, dict]]:
    return {
        f"{stack}/{logical_id}": (stack, resource)
        for stack, template in templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_every_log_group_is_encrypted_with_a_customer_key(synthesized, example):
    templates = synthesized[example].templates
    groups = _resources(templates, "AWS::Logs::LogGroup")
    assert groups
    assert [name for name, (_, group) in groups.items() if "KmsKeyId" not in group["Properties"]] == []


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_every_function_logs_to_a_log_group_of_its_template_none_made_at_run_time(synthesized, example):
    """Lambda creates /aws/lambda/<function> at the first invocation (no key, no retention) unless the function
    names a log group (`LoggingConfig.LogGroup`, CloudFormation AWS::Lambda::Function) or one of that name exists.
    CDK's singletons (BucketNotificationsHandler, the S3 auto-delete provider) do neither by themselves."""
    templates = synthesized[example].templates
    missing = []
    for stack, template in templates.items():
        resources = template["Resources"]
        groups = {
            logical_id: r["Properties"] for logical_id, r in resources.items() if r["Type"] == "AWS::Logs::LogGroup"
        }
        named = {json.dumps(group.get("LogGroupName")) for group in groups.values()}
        for logical_id, function in resources.items():
            if function["Type"] != "AWS::Lambda::Function":
                continue
            target = function["Properties"].get("LoggingConfig", {}).get("LogGroup", {})
            by_config = isinstance(target, dict) and groups.get(target.get("Ref"), {})
            by_name = json.dumps({"Fn::Join": ["", ["/aws/lambda/", {"Ref": logical_id}]]}) in named
            group = by_config or next(
                (g for g in groups.values() if json.dumps(g.get("LogGroupName")) == json.dumps(
                    {"Fn::Join": ["", ["/aws/lambda/", {"Ref": logical_id}]]})), None)  # fmt: skip
            if not (by_config or by_name) or "RetentionInDays" not in group or "KmsKeyId" not in group:
                missing.append(f"{stack}/{logical_id}")
    assert missing == []


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_every_key_lets_logs_use_it_only_for_this_accounts_log_groups(synthesized, example):
    keys = _resources(synthesized[example].templates, "AWS::KMS::Key")
    assert keys
    for name, (_, key) in keys.items():
        statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
        logs = statements["CloudWatchLogsOfThisAccount"]
        assert logs["Principal"]["Service"].startswith("logs."), name
        assert list(logs["Condition"]) == ["ArnLike"], name
        assert "kms:EncryptionContext:aws:logs:arn" in logs["Condition"]["ArnLike"], name
        deny = statements["DenyGrantsExceptForAwsResources"]
        assert (deny["Effect"], deny["Action"], deny["Principal"], deny["Resource"]) == (
            "Deny",
            "kms:CreateGrant",
            {"AWS": "*"},
            "*",
        ), name
        assert deny["Condition"] == {
            "BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}
        }, name


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_every_alarm_notifies_the_alarm_topic(synthesized, example):
    templates = synthesized[example].templates
    alarms = _resources(templates, "AWS::CloudWatch::Alarm")
    assert alarms
    for name, (stack, alarm) in alarms.items():
        actions = alarm["Properties"].get("AlarmActions", [])
        assert actions, name
        resources = templates[stack]["Resources"]
        topics = {logical_id for logical_id, r in resources.items() if r["Type"] == "AWS::SNS::Topic"}
        assert all(action.get("Ref") in topics for action in actions), name
        assert alarm["Properties"].get("ActionsEnabled", True) is True, name


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_cloudwatch_may_publish_every_alarm_to_its_encrypted_topic(synthesized, example):
    """A topic with a policy of its own loses SNS's default policy: CloudWatch alarms must be allowed sns:Publish by
    name (AWS Knowledge Center, "Why didn't I receive an SNS notification for my CloudWatch alarm trigger?",
    cloudwatch-receive-sns-for-alarm-trigger), and on a KMS-encrypted topic cloudwatch.amazonaws.com needs
    kms:Decrypt and kms:GenerateDataKey* on its key (SNS developer guide, "Enable compatibility between event sources
    from AWS services and encrypted topics")."""
    templates = synthesized[example].templates
    alarms = _resources(templates, "AWS::CloudWatch::Alarm")
    assert alarms
    for name, (stack, alarm) in alarms.items():
        resources = templates[stack]["Resources"]
        for action in alarm["Properties"]["AlarmActions"]:
            topic = action["Ref"]
            publishers = [
                statement
                for policy in resources.values()
                if policy["Type"] == "AWS::SNS::TopicPolicy" and {"Ref": topic} in policy["Properties"]["Topics"]
                for statement in policy["Properties"]["PolicyDocument"]["Statement"]
                if statement["Effect"] == "Allow" and statement["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
            ]
            assert [s["Action"] for s in publishers] == ["sns:Publish"], name
            source_arn = json.dumps(publishers[0]["Condition"]["ArnLike"]["aws:SourceArn"])
            assert ":alarm:*" in source_arn, name
            key = resources[resources[topic]["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]]
            key_users = [
                statement
                for statement in key["Properties"]["KeyPolicy"]["Statement"]
                if statement["Effect"] == "Allow"
                and "cloudwatch.amazonaws.com" in json.dumps(statement["Principal"].get("Service"))
            ]
            assert any(
                {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(statement["Action"]) for statement in key_users
            ), name


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_the_default_security_group_loses_both_default_rules(synthesized, example):
    templates = synthesized[example].templates
    network = next(template for name, template in templates.items() if name.endswith("-network"))
    vpcs = [logical_id for logical_id, r in network["Resources"].items() if r["Type"] == "AWS::EC2::VPC"]
    if not vpcs:  # network.vpc_id: a VPC of your own, whose default group fmcluster leaves alone
        assert "Custom::AWS" not in {r["Type"] for r in network["Resources"].values()}
        return
    (vpc,) = vpcs
    default_group = {"Fn::GetAtt": [vpc, "DefaultSecurityGroup"]}

    def call(resource: dict) -> dict:
        separator, parts = resource["Properties"]["Create"]["Fn::Join"]
        assert all(isinstance(part, str) or part == default_group for part in parts)
        return json.loads(separator.join(part if isinstance(part, str) else "SG" for part in parts))

    custom = [resource for _, resource in _resources({"network": network}, "Custom::AWS").values()]
    calls = {c["action"]: c for c in map(call, custom)}
    assert set(calls) == {"revokeSecurityGroupIngress", "revokeSecurityGroupEgress"}
    assert calls["revokeSecurityGroupIngress"]["parameters"] == {
        "GroupId": "SG",
        "IpPermissions": [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": "SG"}]}],
    }
    assert calls["revokeSecurityGroupEgress"]["parameters"] == {
        "GroupId": "SG",
        "IpPermissions": [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}],
    }
    assert all(c["service"] == "EC2" for c in calls.values())


@pytest.fixture(scope="module")
def careless(tmp_path_factory):
    """A stack with an unencrypted log group and an alarm that notifies no one, synthesized as the gates do."""
    import aws_cdk as cdk
    from aws_cdk import aws_cloudwatch as cloudwatch
    from aws_cdk import aws_logs as logs

    outdir = tmp_path_factory.mktemp("careless")
    app = support.app(outdir, {FAIL_SYNTH_ON_VALIDATION_ERRORS: False})
    stack = cdk.Stack(app, "careless")
    logs.LogGroup(stack, "Logs", retention=logs.RetentionDays.ONE_YEAR)
    cloudwatch.Alarm(
        stack,
        "Alarm",
        metric=cloudwatch.Metric(namespace="test", metric_name="m"),
        threshold=1,
        evaluation_periods=1,
    )
    cdk.Validations.of(app).add_plugins(guard_validator())
    app.synth()
    return outdir


def test_control_tower_rules_catch_an_unencrypted_log_group_and_a_silent_alarm(careless):
    rules = {finding.split()[0] for finding in guard_findings(careless)}
    assert {"cloudwatch_log_group_encrypted_check", "cloudwatch_alarm_action_check"} <= rules


def test_checkov_catches_an_unencrypted_log_group(careless):
    failed, _ = checkov_findings([careless / "careless.template.json"])
    assert any(finding.startswith("CKV_AWS_158 AWS::Logs::LogGroup.") for finding in failed)
