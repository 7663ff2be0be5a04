"""The drain before a capacity block ends, as the p5-capacity-block example synthesizes it (its observability stack):
the schedule, EC2's warning rule, the function's environment and its permissions. cfn-lint and cdk-nag run over the
same templates in tests/gates; the function's decisions: tests/lambdas/test_block_end_handler.py; the drain on a
real Slurm: tests/node/test_block_end_drain.py."""

from __future__ import annotations

import json

import pytest

from fmcluster.config import parse
from fmcluster.stacks.observability import capacity_blocks_to_drain

pytestmark = pytest.mark.synth

RID = "cr-0123456789abcdef0"


def of_type(template: dict, kind: str) -> dict[str, dict]:
    return {name: row for name, row in template["Resources"].items() if row["Type"] == kind}


@pytest.fixture(scope="module")
def observability(synthesized) -> dict:
    return synthesized["p5-capacity-block"].templates["llm-pretrain-observability"]


def test_the_block_is_checked_every_5_minutes_and_on_ec2s_expiration_warning(observability):
    rules = {name: row["Properties"] for name, row in of_type(observability, "AWS::Events::Rule").items()
             if name.startswith("BlockEnd")}  # fmt: skip
    schedules = [rule["ScheduleExpression"] for rule in rules.values() if "ScheduleExpression" in rule]
    patterns = [rule["EventPattern"] for rule in rules.values() if "EventPattern" in rule]
    assert schedules == ["rate(5 minutes)"]
    # EC2 user guide, "Monitor Capacity Blocks using EventBridge": source, both spellings of the detail-type, and
    # the detail field naming the reservation
    assert patterns == [{
        "source": ["aws.ec2"],
        "detail-type": ["Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"],
        "detail": {"capacity-reservation-id": [RID]},
    }]  # fmt: skip
    targets = [target["Arn"] for rule in rules.values() for target in rule["Targets"]]
    (function,) = [name for name in of_type(observability, "AWS::Lambda::Function") if name.startswith("BlockEnd")]
    assert targets == [{"Fn::GetAtt": [function, "Arn"]}] * 2


def test_the_function_knows_the_blocks_partitions_and_grace_and_the_topic(observability):
    (function,) = [row for name, row in of_type(observability, "AWS::Lambda::Function").items()
                   if name.startswith("BlockEnd")]  # fmt: skip
    variables = function["Properties"]["Environment"]["Variables"]
    assert json.loads(variables["BLOCKS"]) == {RID: {"partitions": ["gpu"], "minutes": 60}}
    assert variables["CLUSTER_NAME"] == "llm-pretrain" and variables["CLUSTER_TAG"] == "fmcluster:cluster"
    topic = next(iter(of_type(observability, "AWS::SNS::Topic")))
    assert variables["TOPIC_ARN"] == {"Ref": topic}


def test_run_command_reaches_only_the_clusters_instances_and_the_shell_document(observability):
    (policy,) = [row for name, row in of_type(observability, "AWS::IAM::Policy").items()
                 if name.startswith("BlockEndRole")]  # fmt: skip
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    send = [s for s in statements if s["Action"] == "ssm:SendCommand"]
    assert [s.get("Condition") for s in send] == [
        None,
        {"StringEquals": {"ssm:resourceTag/fmcluster:cluster": "llm-pretrain"}},
    ]
    assert "AWS-RunShellScript" in json.dumps(send[0]["Resource"]) and "instance/*" in json.dumps(send[1]["Resource"])
    actions = sorted(a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    assert actions == sorted([
        "logs:CreateLogStream", "logs:PutLogEvents", "ec2:DescribeCapacityReservations", "ec2:DescribeInstances",
        "ssm:DescribeInstanceInformation", "ssm:GetCommandInvocation", "ssm:SendCommand", "ssm:SendCommand",
        "sns:Publish", "kms:GenerateDataKey", "kms:Decrypt",
    ])  # fmt: skip


def test_files_without_a_block_to_drain_get_no_drain(synthesized):
    for stem in ("quickstart", "p6-b300-isolated", "hyperpod-training-plan"):
        for template in synthesized[stem].templates.values():
            assert not [name for name in template.get("Resources", {}) if name.startswith("BlockEnd")], stem


def test_groups_sharing_a_block_drain_together_at_the_longest_grace():
    config = parse({
        "name": "llm-pretrain", "region": "us-east-1", "availability_zone_id": "use1-az6",
        "orchestrator": {"type": "pcs"},
        "compute": [
            {"name": "gpu-a", "instance_type": "p5.48xlarge", "count": 2, "capacity": "capacity-block",
             "reservation_id": RID, "drain_before_end_minutes": 45},
            {"name": "gpu-b", "instance_type": "p5.48xlarge", "count": 2, "capacity": "capacity-block",
             "reservation_id": RID, "drain_before_end_minutes": 90},
            {"name": "gpu-c", "instance_type": "p5.48xlarge", "count": 2, "capacity": "capacity-block",
             "reservation_id": "cr-0fedcba9876543210", "drain_before_end_minutes": 0},
        ],
    }, source="cluster.yaml")  # fmt: skip
    assert capacity_blocks_to_drain(config) == {RID: (["gpu-a", "gpu-b"], 90)}
