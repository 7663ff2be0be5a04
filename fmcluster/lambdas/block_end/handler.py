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

For a due block, one running instance of the cluster (EC2 DescribeInstances by the cluster's tag; one outside the
block when there is one, such as the head node, since it outlives the block) runs fmcluster/node/block-end-drain.sh
through SSM Run Command (AWS-RunShellScript, as root): it drains the block's partitions and sends SIGUSR1 to the job
steps on the nodes it drained, and prints "drained N node(s): ...; signalled M job(s): ...". When it drained any node,
or failed, the operators get one message for the block on the alarm topic (SNS Publish); a later run that drains
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
COMMAND_TIMEOUT_SECONDS = 120
"""SendCommand TimeoutSeconds (botocore ssm: 30 to 2592000): the script runs a few Slurm commands."""
WAIT_SECONDS = 150
RESULT = re.compile(
    r"^drained (?P<drained>\d+) node\(s\): (?P<nodes>\S+); signalled (?P<count>\d+) job\(s\): (?P<jobs>\S+)$"
)


def on_event(
    event: dict,
    _context: object = None,
    *,
    ec2: Any = None,
    ssm: Any = None,
    sns: Any = None,
    now: datetime | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Drain every due block; returns what was done per block, one line each (also logged)."""
    ec2 = ec2 or boto3.client("ec2")
    ssm = ssm or boto3.client("ssm")
    sns = sns or boto3.client("sns")
    now = now or datetime.now(UTC)
    blocks: dict[str, dict] = json.loads(os.environ["BLOCKS"])
    warned = _warned_block(event, blocks)
    asked = [warned] if warned else sorted(blocks)
    reservations = ec2.describe_capacity_reservations(CapacityReservationIds=asked)["CapacityReservations"]
    done = []
    for reservation in reservations:
        rid = reservation["CapacityReservationId"]
        end = reservation.get("EndDate")
        if end is None or reservation.get("State") != "active" or now >= end:
            continue
        if rid != warned and end - now > timedelta(minutes=blocks[rid]["minutes"]):
            continue
        line = _drain(ec2, ssm, sns, rid, end, blocks[rid]["partitions"], sleep)
        print(json.dumps({"block": rid, "end": end.isoformat(), "result": line}))
        done.append(line)
    return done


def _warned_block(event: dict, blocks: dict) -> str | None:
    """The reservation EC2's expiration warning names, when the event is one for a block of this cluster."""
    if event.get("source") != "aws.ec2" or event.get("detail-type") not in WARNING_TYPES:
        return None
    rid = (event.get("detail") or {}).get("capacity-reservation-id")
    return rid if rid in blocks else None


def _drain(ec2, ssm, sns, rid: str, end: datetime, partitions: list[str], sleep) -> str:
    stamp = end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    instance = _runner(ec2, rid)
    if instance is None:
        return f"capacity block {rid}: no running instance of the cluster to drain it from; nothing to drain"
    command = " ".join([os.environ.get("DRAIN_SCRIPT", DEFAULT_SCRIPT), rid, stamp, *partitions])
    sent = ssm.send_command(
        InstanceIds=[instance],
        DocumentName="AWS-RunShellScript",
        Parameters={"commands": [command]},
        TimeoutSeconds=COMMAND_TIMEOUT_SECONDS,
        Comment=f"fmcluster: drain capacity block {rid} before it ends"[:100],
    )
    status, output, error = _wait(ssm, sent["Command"]["CommandId"], instance, sleep)
    cluster = os.environ["CLUSTER_NAME"]
    subject = f"fmcluster {cluster}: capacity block {rid} ends {stamp}"[:100]
    found = RESULT.match(output.strip().splitlines()[-1]) if status == "Success" and output.strip() else None
    if found is None:
        message = (
            f"Capacity block {rid} of cluster {cluster} ends {stamp}, and draining its nodes on {instance} did not "
            f"succeed ({status}): {(error or output).strip()[-500:] or 'no output'}. Its jobs were not asked to "
            "checkpoint; EC2 begins terminating the block's instances 30 minutes before the end."
        )
        sns.publish(TopicArn=os.environ["TOPIC_ARN"], Subject=subject, Message=message)
        return f"capacity block {rid}: drain failed on {instance}: {status}"
    if found["drained"] == "0":
        return f"capacity block {rid}: its nodes were drained already"
    message = (
        f"Capacity block {rid} of cluster {cluster} ends {stamp}; EC2 begins terminating its instances 30 minutes "
        f"before that. Drained {found['drained']} Slurm node(s) in partition(s) {', '.join(partitions)} "
        f"({found['nodes']}): no new job starts there. Asked {found['count']} running job(s) ({found['jobs']}) to "
        "checkpoint (SIGUSR1 to their job steps)."
    )
    sns.publish(TopicArn=os.environ["TOPIC_ARN"], Subject=subject, Message=message)
    return f"capacity block {rid}: {output.strip().splitlines()[-1]}"


def _runner(ec2, rid: str) -> str | None:
    """A running instance of the cluster to run the drain on, outside the block when there is one."""
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
    outside = [i for i in instances if i.get("CapacityReservationId") != rid]
    chosen = sorted(outside or instances, key=lambda i: i["InstanceId"])
    return chosen[0]["InstanceId"] if chosen else None


def _wait(ssm, command_id: str, instance: str, sleep) -> tuple[str, str, str]:
    """(status, stdout, stderr) of the command on `instance` once it is done, or its status at the deadline."""
    waited, status = 0.0, "Pending"
    while waited <= WAIT_SECONDS:
        sleep(2.0)
        waited += 2.0
        try:
            found = ssm.get_command_invocation(CommandId=command_id, InstanceId=instance)
        except ClientError as error:
            # a declared error of GetCommandInvocation (botocore ssm); right after SendCommand (unconfirmed)
            if error.response.get("Error", {}).get("Code") == "InvocationDoesNotExist":
                continue
            raise
        status = found.get("Status", "")
        if status in DONE:
            return status, found.get("StandardOutputContent", ""), found.get("StandardErrorContent", "")
    return status, "", f"still {status} after {WAIT_SECONDS} s"
