"""Before a capacity block ends: drain its Slurm nodes, signal the jobs on them to checkpoint, tell the operators once.

Invoked two ways (constructs/block_end.py makes both rules):
* every 5 minutes by an EventBridge schedule: each capacity block of the cluster file (BLOCKS) is read with EC2
  DescribeCapacityReservations, and a block that is active and within its `drain_before_end_minutes` of its EndDate
  is due (an extended block's new EndDate is read each time, so an extension moves the drain with it);
* by EC2's own warning, 40 minutes before a block ends (EC2 user guide, "Monitor Capacity Blocks using EventBridge":
  source aws.ec2, detail-type "Capacity Block Expiration Warning" on that page, "Capacity Block Reservation
  Expiration Warning" on its other language versions, so the rule matches both; detail "capacity-reservation-id" and
  "end-date"): the block it names is due at once, whatever its grace. Its end is still read from
  DescribeCapacityReservations: the format of the event's "end-date" is not documented (unconfirmed).

For a due block, one running instance of the cluster that SSM lists as Online (EC2 DescribeInstances by the cluster's
tag, SSM DescribeInstanceInformation; one outside the block when there is one, such as the head node, since it
outlives the block) runs fmcluster/node/block-end-drain.sh
through SSM Run Command (AWS-RunShellScript, as root): it drains the block's partitions and sends SIGUSR1 to the job
steps on the nodes it drained, and prints "drained N node(s): ...; signalled M job(s): ...". When it drained any node,
or failed, the operators get one message for the block on the alarm topic (SNS Publish); a block that fails (EC2 does
not know it, SendCommand refuses) does not stop the others. All commands are sent first, then polled together within
the function's time; a later run that drains
nothing new (the block's nodes are already drained) sends nothing.

Environment: CLUSTER_NAME, TOPIC_ARN, BLOCKS (JSON: reservation id -> {"partitions": [...], "minutes": N}),
DRAIN_SCRIPT (default /opt/fmcluster/node/block-end-drain.sh), CLUSTER_TAG (default fmcluster:cluster).
Shapes of every call: botocore's ec2, ssm and sns models.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.exceptions import ClientError

WARNING_TYPES = ("Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning")
"""EC2 user guide, "Monitor Capacity Blocks using EventBridge" (both spellings appear in AWS's versions of the page)."""
DEFAULT_SCRIPT = "/opt/fmcluster/node/block-end-drain.sh"
DONE = ("Success", "Cancelled", "TimedOut", "Failed")
"""botocore ssm CommandInvocationStatus values after which the invocation changes no more (Cancelling, Pending,
InProgress and Delayed still may)."""
DELIVERY_TIMEOUT_SECONDS = 120
"""SendCommand TimeoutSeconds (botocore ssm: "If this time is reached and the command hasn't already started running,
it won't run"): how long delivery may take, not how long the script may run."""
EXECUTION_TIMEOUT_SECONDS = 120
"""AWS-RunShellScript's executionTimeout parameter: how long the script may run (it runs a few Slurm commands)."""
WAIT_SECONDS = 150
"""The longest the function polls for the results of all of a run's commands together (sent first, then polled)."""
SPARE_SECONDS = 30
"""Left of the function's own time (constructs/block_end.py: 5 minutes) after the poll, to publish and return."""
NOT_FOUND_CODES = ("InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed")
"""EC2 API reference, "Error codes for the Amazon EC2 API" (as fmcluster/live/capacity.py; the asset holds only this
file)."""
RESULT = re.compile(
    r"^drained (?P<drained>\d+) node\(s\): (?P<nodes>\S+); signalled (?P<count>\d+) job\(s\): (?P<jobs>\S+)$"
)


@dataclass(frozen=True)
class Sent:
    """A drain command sent for a due block, to poll for."""

    rid: str
    stamp: str
    partitions: list[str]
    instance: str
    command_id: str


def on_event(
    event: dict,
    context: object = None,
    *,
    ec2: Any = None,
    ssm: Any = None,
    sns: Any = None,
    now: datetime | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Drain every due block; returns what was done per block, one line each (also logged). A block whose reading,
    instance or command fails is reported (and its operators told) without stopping the others."""
    ec2 = ec2 or boto3.client("ec2")
    ssm = ssm or boto3.client("ssm")
    sns = sns or boto3.client("sns")
    now = now or datetime.now(UTC)
    blocks: dict[str, dict] = json.loads(os.environ["BLOCKS"])
    warned = _warned_block(event, blocks)
    reservations, done = _reservations(ec2, [warned] if warned else sorted(blocks))
    sent: list[Sent] = []
    for reservation in reservations:
        rid = reservation["CapacityReservationId"]
        end = reservation.get("EndDate")
        if end is None or reservation.get("State") != "active" or now >= end:
            continue
        if rid != warned and end - now > timedelta(minutes=blocks[rid]["minutes"]):
            continue
        stamp = end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        result = _send(ec2, ssm, sns, rid, stamp, blocks[rid]["partitions"])
        if isinstance(result, Sent):
            sent.append(result)
        else:
            done.append(_log(rid, stamp, result))
    remaining = getattr(context, "get_remaining_time_in_millis", lambda: 300_000)() / 1000
    results = _wait(ssm, sent, sleep, min(WAIT_SECONDS, remaining - SPARE_SECONDS))
    for command in sent:
        done.append(_log(command.rid, command.stamp, _report(sns, command, *results[command.command_id])))
    return done


def _warned_block(event: dict, blocks: dict) -> str | None:
    """The reservation EC2's expiration warning names, when the event is one for a block of this cluster."""
    if event.get("source") != "aws.ec2" or event.get("detail-type") not in WARNING_TYPES:
        return None
    rid = (event.get("detail") or {}).get("capacity-reservation-id")
    return rid if rid in blocks else None


def _log(rid: str, stamp: str, line: str) -> str:
    print(json.dumps({"block": rid, "end": stamp, "result": line}))
    return line


def _reservations(ec2, asked: list[str]) -> tuple[list[dict], list[str]]:
    """The blocks EC2 knows, and one line per block id it does not (EC2 refuses the whole call for one unknown id)."""
    try:
        return ec2.describe_capacity_reservations(CapacityReservationIds=asked)["CapacityReservations"], []
    except ClientError as error:
        if len(asked) == 1 or _code(error) not in NOT_FOUND_CODES:
            if _code(error) in NOT_FOUND_CODES:
                return [], [f"capacity block {asked[0]}: EC2 does not know it ({_code(error)}); skipped"]
            raise
    found, lines = [], []
    for rid in asked:
        more, missing = _reservations(ec2, [rid])
        found += more
        lines += missing
    return found, lines


def _code(error: ClientError) -> str:
    return error.response.get("Error", {}).get("Code", "")


def _subject(rid: str, stamp: str) -> str:
    return f"fmcluster {os.environ['CLUSTER_NAME']}: capacity block {rid} ends {stamp}"[:100]


def _failed(sns, rid: str, stamp: str, where: str, status: str, detail: str) -> str:
    """Tell the operators, once for this block in this run, that its drain did not happen."""
    message = (
        f"Capacity block {rid} of cluster {os.environ['CLUSTER_NAME']} ends {stamp}, and draining its nodes on "
        f"{where} did not succeed ({status}): {detail.strip()[-500:] or 'no output'}. Its jobs were not asked to "
        "checkpoint; EC2 begins terminating the block's instances 30 minutes before the end."
    )
    sns.publish(TopicArn=os.environ["TOPIC_ARN"], Subject=_subject(rid, stamp), Message=message)
    return f"capacity block {rid}: drain failed on {where}: {status}"


def _send(ec2, ssm, sns, rid: str, stamp: str, partitions: list[str]) -> Sent | str:
    instance = _runner(ec2, ssm, rid)
    if instance is None:
        return (
            f"capacity block {rid}: no running instance of the cluster online in SSM to drain it from; nothing to drain"
        )
    command = " ".join([os.environ.get("DRAIN_SCRIPT", DEFAULT_SCRIPT), rid, stamp, *partitions])
    try:
        sent = ssm.send_command(
            InstanceIds=[instance],
            DocumentName="AWS-RunShellScript",
            Parameters={"commands": [command], "executionTimeout": [str(EXECUTION_TIMEOUT_SECONDS)]},
            TimeoutSeconds=DELIVERY_TIMEOUT_SECONDS,
            Comment=f"fmcluster: drain capacity block {rid} before it ends"[:100],
        )
    except ClientError as error:
        return _failed(sns, rid, stamp, instance, _code(error), str(error))
    return Sent(rid, stamp, partitions, instance, sent["Command"]["CommandId"])


def _report(sns, command: Sent, status: str, output: str, error: str) -> str:
    rid, stamp, instance = command.rid, command.stamp, command.instance
    found = RESULT.match(output.strip().splitlines()[-1]) if status == "Success" and output.strip() else None
    if found is None:
        return _failed(sns, rid, stamp, instance, status, error or output)
    if found["drained"] == "0":
        return f"capacity block {rid}: its nodes were drained already"
    message = (
        f"Capacity block {rid} of cluster {os.environ['CLUSTER_NAME']} ends {stamp}; EC2 begins terminating its "
        f"instances 30 minutes before that. Drained {found['drained']} Slurm node(s) in partition(s) "
        f"{', '.join(command.partitions)} ({found['nodes']}): no new job starts there. Asked {found['count']} running "
        f"job(s) ({found['jobs']}) to checkpoint (SIGUSR1 to their job steps)."
    )
    sns.publish(TopicArn=os.environ["TOPIC_ARN"], Subject=_subject(rid, stamp), Message=message)
    return f"capacity block {rid}: {output.strip().splitlines()[-1]}"


def _runner(ec2, ssm, rid: str) -> str | None:
    """A running instance of the cluster that SSM lists as Online, to run the drain on; outside the block when there is
    one (botocore ssm DescribeInstanceInformation: filter keys InstanceIds, at most 100 values, and PingStatus)."""
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {
                "Name": f"tag:{os.environ.get('CLUSTER_TAG', 'fmcluster:cluster')}",
                "Values": [os.environ["CLUSTER_NAME"]],
            },
            {"Name": "instance-state-name", "Values": ["running"]},
        ]
    )
    instances = [i for page in pages for row in page.get("Reservations", []) for i in row.get("Instances", [])]
    ids = sorted(i["InstanceId"] for i in instances)
    online: set[str] = set()
    for first in range(0, len(ids), 100):
        found = ssm.get_paginator("describe_instance_information").paginate(
            Filters=[
                {"Key": "InstanceIds", "Values": ids[first : first + 100]},
                {"Key": "PingStatus", "Values": ["Online"]},
            ]
        )
        online |= {row["InstanceId"] for page in found for row in page.get("InstanceInformationList", [])}
    usable = [i for i in instances if i["InstanceId"] in online]
    outside = [i for i in usable if i.get("CapacityReservationId") != rid]
    chosen = sorted(outside or usable, key=lambda i: i["InstanceId"])
    return chosen[0]["InstanceId"] if chosen else None


def _wait(ssm, sent: list[Sent], sleep, budget: float) -> dict[str, tuple[str, str, str]]:
    """(status, stdout, stderr) per command id once done, or its status when `budget` seconds of polling are up."""
    results = {command.command_id: ("Pending", "", "") for command in sent}
    pending = list(sent)
    waited = 0.0
    while pending and waited < budget:
        sleep(2.0)
        waited += 2.0
        for command in list(pending):
            try:
                found = ssm.get_command_invocation(CommandId=command.command_id, InstanceId=command.instance)
            except ClientError as error:
                # a declared error of GetCommandInvocation (botocore ssm); right after SendCommand (unconfirmed)
                if _code(error) == "InvocationDoesNotExist":
                    continue
                raise
            status = found.get("Status", "")
            results[command.command_id] = (status, "", "")
            if status in DONE:
                results[command.command_id] = (
                    status, found.get("StandardOutputContent", ""), found.get("StandardErrorContent", "")
                )  # fmt: skip
                pending.remove(command)
    for command in pending:
        status = results[command.command_id][0]
        results[command.command_id] = (status, "", f"still {status} after {waited:.0f} s")
    return results
