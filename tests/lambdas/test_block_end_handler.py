"""The block-end Lambda's decisions (which block is due, on which instance, what the operators hear) against botocore's
Stubber, which checks every request and response against the ec2, ssm and sns models. The drain itself on a real
Slurm: tests/node/test_block_end_drain.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import ANY, Stubber

from fmcluster.lambdas.block_end.handler import on_event

RID = "cr-0123456789abcdef0"
OTHER = "cr-0fedcba9876543210"
END = datetime(2026, 12, 14, 10, 0, tzinfo=UTC)
TOPIC = "arn:aws:sns:us-east-1:123456789012:llm-pretrain-alarms"
TICK = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
COMMAND_ID = "0b1e2c3d-0000-4000-8000-000000000001"


@pytest.fixture(autouse=True)
def environment(monkeypatch):
    monkeypatch.setenv("CLUSTER_NAME", "llm-pretrain")
    monkeypatch.setenv("TOPIC_ARN", TOPIC)
    monkeypatch.setenv("BLOCKS", json.dumps({RID: {"partitions": ["gpu"], "minutes": 60}}))


def clients():
    made = {}
    for service in ("ec2", "ssm", "sns"):
        client = boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        made[service] = (client, Stubber(client))
    return made


def block(state="active", end=END):
    return {"CapacityReservations": [{"CapacityReservationId": RID, "State": state, "EndDate": end,
                                      "ReservationType": "capacity-block"}]}  # fmt: skip


def run(made, event, now):
    for _, stub in made.values():
        stub.activate()
    result = on_event(event, None, **{name: client for name, (client, _) in made.items()}, now=now,
                      sleep=lambda _: None)  # fmt: skip
    for _, stub in made.values():
        stub.assert_no_pending_responses()
    return result


def expect_instances(made, *instances, offline=()):
    """The cluster's running instances, and SSM's Online ones among them (all but `offline`)."""
    filters = [{"Name": "tag:fmcluster:cluster", "Values": ["llm-pretrain"]},
               {"Name": "instance-state-name", "Values": ["running"]}]  # fmt: skip
    made["ec2"][1].add_response("describe_instances", {"Reservations": [{"Instances": list(instances)}]},
                                {"Filters": filters})  # fmt: skip
    ids = sorted(i["InstanceId"] for i in instances)
    if ids:
        online = [{"InstanceId": i, "PingStatus": "Online"} for i in ids if i not in offline]
        filters = [{"Key": "InstanceIds", "Values": ids}, {"Key": "PingStatus", "Values": ["Online"]}]
        made["ssm"][1].add_response(
            "describe_instance_information", {"InstanceInformationList": online}, {"Filters": filters}
        )


def expect_send(made, instance, rid=RID, command_id=COMMAND_ID, partition="gpu"):
    """SendCommand: TimeoutSeconds is only the delivery timeout (botocore ssm); the script's own limit is
    AWS-RunShellScript's executionTimeout parameter."""
    made["ssm"][1].add_response("send_command", {"Command": {"CommandId": command_id}}, {
        "InstanceIds": [instance], "DocumentName": "AWS-RunShellScript",
        "Parameters": {"commands": [f"/opt/fmcluster/node/block-end-drain.sh {rid} 2026-12-14T10:00:00Z {partition}"],
                       "executionTimeout": ["120"]},
        "TimeoutSeconds": 120, "Comment": f"fmcluster: drain capacity block {rid} before it ends"})  # fmt: skip


def expect_command(made, instance, status, stdout="", stderr=""):
    ssm = made["ssm"][1]
    expect_send(made, instance)
    ssm.add_client_error("get_command_invocation", "InvocationDoesNotExist", http_status_code=400,
                         expected_params={"CommandId": COMMAND_ID, "InstanceId": instance})  # fmt: skip
    ssm.add_response("get_command_invocation", {"CommandId": COMMAND_ID, "InstanceId": instance, "Status": status,
                     "StandardOutputContent": stdout, "StandardErrorContent": stderr},
                     {"CommandId": COMMAND_ID, "InstanceId": instance})  # fmt: skip


def test_a_block_further_from_its_end_than_its_grace_is_left_alone():
    made = clients()
    made["ec2"][1].add_response("describe_capacity_reservations", block(), {"CapacityReservationIds": [RID]})
    assert run(made, TICK, END - timedelta(minutes=61)) == []


@pytest.mark.parametrize("state", ["scheduled", "expired"])
def test_a_block_that_is_not_active_is_left_alone(state):
    made = clients()
    made["ec2"][1].add_response("describe_capacity_reservations", block(state), {"CapacityReservationIds": [RID]})
    assert run(made, TICK, END - timedelta(minutes=30)) == []


def test_a_warning_for_another_clusters_block_is_read_as_a_tick():
    """The rule matches only this file's blocks; should another reach the function, it only does its usual check."""
    made = clients()
    made["ec2"][1].add_response("describe_capacity_reservations", block(), {"CapacityReservationIds": [RID]})
    warning = {"source": "aws.ec2", "detail-type": "Capacity Block Reservation Expiration Warning",
               "detail": {"capacity-reservation-id": OTHER, "end-date": "2026-12-14T10:00:00Z"}}  # fmt: skip
    assert run(made, warning, END - timedelta(hours=3)) == []


def test_the_drain_runs_outside_the_block_and_a_failure_reaches_the_operators():
    made = clients()
    made["ec2"][1].add_response("describe_capacity_reservations", block(), {"CapacityReservationIds": [RID]})
    expect_instances(made, {"InstanceId": "i-0bbbbbbbbbbbbbbbb", "CapacityReservationId": RID},
                     {"InstanceId": "i-0cccccccccccccccc"})  # fmt: skip
    expect_command(made, "i-0cccccccccccccccc", "Failed", stderr="sinfo: error: Unable to contact slurm controller\n")
    message = (
        f"Capacity block {RID} of cluster llm-pretrain ends 2026-12-14T10:00:00Z, and draining its nodes on "
        "i-0cccccccccccccccc did not succeed (Failed): sinfo: error: Unable to contact slurm controller. Its jobs "
        "were not asked to checkpoint; EC2 begins terminating the block's instances 30 minutes before the end."
    )
    subject = f"fmcluster llm-pretrain: capacity block {RID} ends 2026-12-14T10:00:00Z"
    made["sns"][1].add_response(
        "publish", {"MessageId": "m-1"}, {"TopicArn": TOPIC, "Message": message, "Subject": subject}
    )
    assert run(made, TICK, END - timedelta(minutes=59)) == [
        f"capacity block {RID}: drain failed on i-0cccccccccccccccc: Failed"
    ]


def test_without_a_running_instance_nothing_is_sent():
    made = clients()
    made["ec2"][1].add_response("describe_capacity_reservations", block(), {"CapacityReservationIds": [RID]})
    expect_instances(made)
    assert run(made, TICK, END - timedelta(minutes=45)) == [
        f"capacity block {RID}: no running instance of the cluster online in SSM to drain it from; nothing to drain"
    ]


def test_the_drain_runs_on_a_node_of_the_block_when_the_cluster_has_no_other():
    made = clients()
    made["ec2"][1].add_response("describe_capacity_reservations", block(), {"CapacityReservationIds": [RID]})
    expect_instances(made, {"InstanceId": "i-0bbbbbbbbbbbbbbbb", "CapacityReservationId": RID})
    expect_command(made, "i-0bbbbbbbbbbbbbbbb", "Success", "drained 2 node(s): gpu-1,gpu-2; signalled 0 job(s): -\n")
    made["sns"][1].add_response("publish", {"MessageId": "m-1"}, {"TopicArn": TOPIC, "Subject": ANY, "Message": ANY})
    assert run(made, TICK, END - timedelta(minutes=60)) == [
        f"capacity block {RID}: drained 2 node(s): gpu-1,gpu-2; signalled 0 job(s): -"
    ]


def test_an_instance_ssm_does_not_list_online_is_not_chosen():
    """i-0a... is first by id but not registered with SSM: SendCommand would refuse it (InvalidInstanceId)."""
    made = clients()
    made["ec2"][1].add_response("describe_capacity_reservations", block(), {"CapacityReservationIds": [RID]})
    expect_instances(made, {"InstanceId": "i-0aaaaaaaaaaaaaaaa"}, {"InstanceId": "i-0cccccccccccccccc"},
                     offline=["i-0aaaaaaaaaaaaaaaa"])  # fmt: skip
    expect_command(made, "i-0cccccccccccccccc", "Success", "drained 0 node(s): -; signalled 0 job(s): -\n")
    assert run(made, TICK, END - timedelta(minutes=30)) == [f"capacity block {RID}: its nodes were drained already"]


def two_blocks(monkeypatch):
    monkeypatch.setenv("BLOCKS", json.dumps({RID: {"partitions": ["gpu"], "minutes": 60},
                                             OTHER: {"partitions": ["gpu2"], "minutes": 60}}))  # fmt: skip


def test_a_refused_command_is_reported_for_its_block_and_the_next_block_still_drains(monkeypatch):
    """SendCommand's InvalidInstanceId (a declared error, botocore ssm) reaches the operators for that block only."""
    two_blocks(monkeypatch)
    made = clients()
    other = {"CapacityReservationId": OTHER, "State": "active", "EndDate": END, "ReservationType": "capacity-block"}
    made["ec2"][1].add_response("describe_capacity_reservations",
                                {"CapacityReservations": [block()["CapacityReservations"][0], other]},
                                {"CapacityReservationIds": [RID, OTHER]})  # fmt: skip
    head = {"InstanceId": "i-0cccccccccccccccc"}
    expect_instances(made, head)
    made["ssm"][1].add_client_error("send_command", "InvalidInstanceId", "Instances not in a valid state",
                                    http_status_code=400)  # fmt: skip
    subject = f"fmcluster llm-pretrain: capacity block {RID} ends 2026-12-14T10:00:00Z"
    made["sns"][1].add_response("publish", {"MessageId": "m-1"}, {"TopicArn": TOPIC, "Subject": subject,
                                                                  "Message": ANY})  # fmt: skip
    expect_instances(made, head)
    second = "0b1e2c3d-0000-4000-8000-000000000002"
    expect_send(made, "i-0cccccccccccccccc", OTHER, second, "gpu2")
    made["ssm"][1].add_response("get_command_invocation", {"Status": "Success", "StandardOutputContent":
                                "drained 0 node(s): -; signalled 0 job(s): -\n"},
                                {"CommandId": second, "InstanceId": "i-0cccccccccccccccc"})  # fmt: skip
    assert run(made, TICK, END - timedelta(minutes=30)) == [
        f"capacity block {RID}: drain failed on i-0cccccccccccccccc: InvalidInstanceId",
        f"capacity block {OTHER}: its nodes were drained already",
    ]


def test_a_block_ec2_does_not_know_is_skipped_and_the_others_are_read_one_by_one(monkeypatch):
    """EC2 refuses a whole DescribeCapacityReservations for one unknown id (InvalidCapacityReservationId.NotFound,
    EC2 API reference "Error codes")."""
    two_blocks(monkeypatch)
    made = clients()
    ec2 = made["ec2"][1]
    ec2.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                         http_status_code=400, expected_params={"CapacityReservationIds": [RID, OTHER]})  # fmt: skip
    ec2.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                         http_status_code=400, expected_params={"CapacityReservationIds": [RID]})  # fmt: skip
    ec2.add_response("describe_capacity_reservations", {"CapacityReservations": []},
                     {"CapacityReservationIds": [OTHER]})  # fmt: skip
    assert run(made, TICK, END - timedelta(minutes=30)) == [
        f"capacity block {RID}: EC2 does not know it (InvalidCapacityReservationId.NotFound); skipped"
    ]


def test_polling_stops_within_the_functions_remaining_time():
    """Lambda's 5 minutes (constructs/block_end.py): with 40 s left, the poll gives up after 10 s and reports."""
    made = clients()
    made["ec2"][1].add_response("describe_capacity_reservations", block(), {"CapacityReservationIds": [RID]})
    expect_instances(made, {"InstanceId": "i-0cccccccccccccccc"})
    expect_send(made, "i-0cccccccccccccccc")
    for _ in range(5):
        made["ssm"][1].add_response("get_command_invocation", {"Status": "InProgress"},
                                    {"CommandId": COMMAND_ID, "InstanceId": "i-0cccccccccccccccc"})  # fmt: skip
    made["sns"][1].add_response("publish", {"MessageId": "m-1"}, {"TopicArn": TOPIC, "Subject": ANY, "Message": ANY})

    class Context:
        def get_remaining_time_in_millis(self):
            return 40_000

    for _, stub in made.values():
        stub.activate()
    result = on_event(TICK, Context(), **{name: client for name, (client, _) in made.items()},
                      now=END - timedelta(minutes=30), sleep=lambda _: None)  # fmt: skip
    for _, stub in made.values():
        stub.assert_no_pending_responses()
    assert result == [f"capacity block {RID}: drain failed on i-0cccccccccccccccc: InProgress"]
