"""Reserved capacity: EC2 capacity blocks and On-Demand Capacity Reservations, and SageMaker training plans.

Each reservation or plan named in the file is read once; the groups that use it are checked against it together
(their counts add up). Sources: EC2 API reference (DescribeCapacityReservations, CapacityReservation: states,
ReservationType, AvailableInstanceCount, CapacityBlockId; DescribeCapacityBlockStatus), EC2 user guide "Launch
instances using Capacity Blocks" (same AZ, same platform, termination starts 30 minutes before the end) and "View
Capacity Blocks" (states; before a block starts its available count is 0 and its size is in a tag), SageMaker API
reference (DescribeTrainingPlan, ReservedCapacitySummary).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import partial

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig, ComputeGroup
from fmcluster.config.models import CLUSTER_TAG
from fmcluster.live.aws import Aws, Denied, Throttled, error_code, sagemaker_not_found
from fmcluster.live.runner import Check, stopped_reason, unchecked
from fmcluster.problems import Problem, note, warning

ENDING_SOON = timedelta(days=1)
LINUX = "Linux/UNIX"
NOT_STARTED = ("scheduled", "payment-pending")
BLOCK_SIZE_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"
"""EC2 user guide, "View Capacity Blocks": before a block begins its available capacity appears as zero; this tag
holds how many instances it will have."""
NOT_FOUND_CODES = ("InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed")
"""EC2 API reference, "Error codes for the Amazon EC2 API"."""

Groups = list[tuple[int, ComputeGroup]]


def reservation_checks(config: ClusterConfig, aws: Aws, now: datetime) -> list[Check]:
    return [
        Check(
            f"capacity reservation {rid}",
            f"compute[{groups[0][0]}].reservation_id",
            partial(check_reservation, config, aws, rid, groups, now),
        )
        for rid, groups in _by(config.compute, "reservation_id").items()
    ]


def training_plan_checks(config: ClusterConfig, aws: Aws, now: datetime) -> list[Check]:
    return [
        Check(
            f"training plan {arn.rsplit('/', 1)[-1]}",
            f"compute[{groups[0][0]}].training_plan_arn",
            partial(check_training_plan, config, aws, arn, groups, now),
        )
        for arn, groups in _by(config.compute, "training_plan_arn").items()
    ]


def check_reservation(config: ClusterConfig, aws: Aws, rid: str, groups: Groups, now: datetime) -> list[Problem]:
    """Problems of reservation `rid` for `groups` (index, group), all of which name it."""
    first, group = groups[0]
    at = f"compute[{first}]"
    try:
        found = aws.call("ec2", "DescribeCapacityReservations", CapacityReservationIds=[rid])["CapacityReservations"]
    except ClientError as error:
        if error_code(error) not in NOT_FOUND_CODES:
            raise
        found = []
    if not found:
        return [
            Problem(
                f"{at}.reservation_id",
                f"{rid} not found in {config.region} for this account "
                "(aws ec2 describe-capacity-reservations lists yours)",
            )
        ]
    reservation = found[0]
    is_block = reservation.get("ReservationType") == "capacity-block"
    kind = "capacity block" if is_block else "capacity reservation"
    problems: list[Problem] = []
    if is_block != (group.capacity == "capacity-block"):
        wanted = "capacity-block" if is_block else "odcr"
        what = "a capacity block" if is_block else "an On-Demand Capacity Reservation"
        problems.append(Problem(f"{at}.capacity", f"{rid} is {what}; set capacity: {wanted}"))
    problems += _state(f"{at}.reservation_id", f"{kind} {rid}", reservation, is_block, now)
    held = reservation.get("InstanceType")
    for index, member in groups:
        if held and member.instance_type != held:
            problems.append(
                Problem(
                    f"compute[{index}].instance_type",
                    f"{rid} holds {held}, not {member.instance_type}; set instance_type: {held} or "
                    f"use a reservation for {member.instance_type}",
                )
            )
    if not is_block:  # a block is placed in its UltraCluster already, and takes no placement group (the model)
        problems += _placement_group(rid, reservation, groups)
    az_id = reservation.get("AvailabilityZoneId")
    if az_id and az_id != config.availability_zone_id:
        problems.append(
            Problem(
                "availability_zone_id",
                f"{kind} {rid} is in {az_id} ({reservation.get('AvailabilityZone', '?')}), not "
                f"{config.availability_zone_id}; instances launch into it only from a subnet in its "
                f"zone: set availability_zone_id: {az_id}",
            )
        )
    needed = sum(member.count for _, member in groups)
    status: dict | None = None
    health: list[Problem] = []
    if is_block and reservation.get("State") in ("active", *NOT_STARTED):
        status, health = _block_status(aws, f"{at}.reservation_id", rid, reservation)
    problems += health
    if is_block and reservation.get("State") in NOT_STARTED:
        problems += _future_block_size(f"{at}.count", rid, reservation, status, groups, needed)
    elif (
        status
        and status.get("TotalUnavailableCapacity")
        and needed > status["TotalCapacity"] - status.get("TotalUnavailableCapacity", 0)
    ):
        problems.append(
            Problem(
                f"{at}.count",
                f"{_who(groups)} {needed} instance(s), but capacity block {rid} holds {status['TotalCapacity']}, "
                f"{status.get('TotalUnavailableCapacity', 0)} of them unavailable (a failed system status check)",
            )
        )
    elif needed > reservation.get("AvailableInstanceCount", 0):
        problems += _count(config, aws, f"{at}.count", f"{kind} {rid}", reservation, groups, needed)
    platform = reservation.get("InstancePlatform")
    if platform and platform != LINUX:
        problems.append(
            Problem(
                f"{at}.reservation_id",
                f"{rid} is for {platform}; fmcluster's nodes run {LINUX}, and EC2 launches only "
                "instances of the reservation's platform into it",
            )
        )
    return problems


def _placement_group(rid: str, reservation: dict, groups: Groups) -> list[Problem]:
    """An ODCR made in a cluster placement group serves the instances launched into that group (EC2 user guide, "Use
    Capacity Reservations with cluster placement groups"): a group that names none cannot use it. Whether EC2 then
    fails the launch or runs the instances outside the reservation is (unconfirmed); either way the reserved capacity,
    billed whether it runs or not, goes unused, so it is an error. A group that names another placement group is
    judged by `fmcluster.live.placement`."""
    made_in = reservation.get("PlacementGroupArn")
    if not made_in:
        return []
    name = made_in.rsplit("/", 1)[-1]  # arn:aws:ec2:<region>:<account>:placement-group/<name>
    return [
        Problem(
            f"compute[{index}].placement_group",
            f"{rid} was made in placement group {name} and serves only instances launched into it; set "
            f"placement_group: {name}",
        )
        for index, member in groups
        if member.existing_placement_group is None
    ]


def _count(
    config: ClusterConfig, aws: Aws, at: str, what: str, reservation: dict, groups: Groups, needed: int
) -> list[Problem]:
    """The groups' count against a reservation with fewer free instances than they need. A deployed cluster's own
    running instances use the reservation up (EC2 user guide, "Capacity Reservations": launching into it "reduces
    the available capacity"), so they count as the cluster's: found by DescribeInstances filtered by
    `capacity-reservation-id` and the cluster's tag (filter names from botocore's ec2 model; launch templates give
    instances the tag). HyperPod's instances run in SageMaker's account and are not found so (unconfirmed whether a
    HyperPod group launches into an EC2 reservation at all)."""
    rid = reservation["CapacityReservationId"]
    try:
        own = sum(
            len(row.get("Instances", []))
            for row in aws.pages(
                "ec2",
                "DescribeInstances",
                "Reservations",
                Filters=[
                    {"Name": "capacity-reservation-id", "Values": [rid]},
                    {"Name": f"tag:{CLUSTER_TAG}", "Values": [config.name]},
                    {"Name": "instance-state-name", "Values": ["pending", "running"]},
                ],
            )
        )
    except (Denied, Throttled) as error:
        return [
            unchecked(
                at,
                f"the count against {what}",
                f"{reservation.get('AvailableInstanceCount', 0)} are free and the cluster's own instances in it "
                f"could not be counted: {stopped_reason(error)}",
            )
        ]
    available = reservation.get("AvailableInstanceCount", 0)
    if needed <= available + own:
        return []
    mine = f" + {own} running for this cluster" if own else ""
    return [
        Problem(
            at,
            f"{_who(groups)} {needed} instance(s), but {what} has {available}{mine} of "
            f"{reservation.get('TotalInstanceCount', 0)} available",
        )
    ]


def check_training_plan(config: ClusterConfig, aws: Aws, arn: str, groups: Groups, now: datetime) -> list[Problem]:
    """Problems of the SageMaker training plan `arn` for `groups` (index, group), all of which name it."""
    first, _ = groups[0]
    at = f"compute[{first}].training_plan_arn"
    name = arn.rsplit("/", 1)[-1]
    try:
        plan = aws.call("sagemaker", "DescribeTrainingPlan", TrainingPlanName=name)
    except ClientError as error:
        if not sagemaker_not_found(error):
            raise
        return [
            Problem(
                at, f"training plan {name} not found in {config.region} (aws sagemaker list-training-plans lists yours)"
            )
        ]
    if plan.get("TrainingPlanArn", arn) != arn:
        return [Problem(at, f"this account's training plan {name} is {plan['TrainingPlanArn']}, not {arn}")]
    problems = _plan_state(at, f"training plan {name}", plan, now)
    targets = plan.get("TargetResources", [])
    if targets and "hyperpod-cluster" not in targets:
        problems.append(
            Problem(
                at,
                f"training plan {name} reserves capacity for {', '.join(targets)}, "
                "not hyperpod-cluster; HyperPod cannot use it",
            )
        )
    summaries = [s for s in plan.get("ReservedCapacitySummaries", []) if s.get("Status") in ("Active", "Scheduled")]
    zones = sorted({s["AvailabilityZoneId"] for s in summaries if s.get("AvailabilityZoneId")})
    if zones and config.availability_zone_id not in zones:
        problems.append(
            Problem(
                "availability_zone_id",
                f"training plan {name} reserves capacity in {', '.join(zones)}, not "
                f"{config.availability_zone_id}; set availability_zone_id: {zones[0]}",
            )
        )
    reserved: dict[str, int] = defaultdict(int)
    for summary in summaries:
        reserved[summary.get("InstanceType", "")] += summary.get("TotalInstanceCount", 0)
    for instance_type, members in _by_type(groups).items():
        ml_type = f"ml.{instance_type}"
        index = members[0][0]
        if ml_type not in reserved:
            held = ", ".join(f"{t} x {n}" for t, n in sorted(reserved.items())) or "nothing active or scheduled"
            problems.append(
                Problem(f"compute[{index}].instance_type", f"training plan {name} reserves {held}, not {ml_type}")
            )
            continue
        needed = sum(group.count for _, group in members)
        if needed > reserved[ml_type]:
            problems.append(
                Problem(
                    f"compute[{index}].count",
                    f"{_who(members)} {needed} x {ml_type}, but training plan {name} reserves {reserved[ml_type]}",
                )
            )
    return problems


def block_status(aws: Aws, block_id: str, rid: str) -> tuple[dict | None, dict | None]:
    """EC2 DescribeCapacityBlockStatus of capacity block `block_id`: (the block's row, with InterconnectStatus; the
    capacity of reservation `rid` in it: its CapacityReservationStatuses row when it has one with TotalCapacity, else
    the block's), (None, None) when EC2 returned no status for it. Denied and Throttled pass through."""
    rows = aws.call("ec2", "DescribeCapacityBlockStatus", CapacityBlockIds=[block_id])["CapacityBlockStatuses"]
    row = next((row for row in rows if row.get("CapacityBlockId") == block_id), None)
    if row is None or "TotalCapacity" not in row:
        return None, None
    mine = next((r for r in row.get("CapacityReservationStatuses", []) if r.get("CapacityReservationId") == rid), row)
    return row, mine if "TotalCapacity" in mine else row


def _block_status(aws: Aws, at: str, rid: str, reservation: dict) -> tuple[dict | None, list[Problem]]:
    """The capacity of block reservation `rid` as EC2 DescribeCapacityBlockStatus reports it (TotalCapacity,
    TotalAvailableCapacity, TotalUnavailableCapacity: "unavailable for use due to a system status check failure"),
    with the problems of its block's accelerator interconnect (InterconnectStatus ok | impaired | insufficient-data)
    and of its unavailable capacity; (None, ...) when the block's status could not be read. The reservation names its
    block (CapacityReservation.CapacityBlockId); a block of several reservations reports each
    (CapacityReservationStatuses), and `rid`'s row is used when there is one. Shapes and docs: botocore's ec2
    model."""
    block_id = reservation.get("CapacityBlockId")
    if not block_id:
        return None, []
    what = f"the capacity and interconnect of capacity block {block_id}"
    try:
        row, mine = block_status(aws, block_id, rid)
    except (Denied, Throttled) as error:
        return None, [unchecked(at, what, stopped_reason(error))]
    if row is None or mine is None:
        return None, [unchecked(at, what, "EC2 DescribeCapacityBlockStatus returned no status for it")]
    problems = []
    interconnect = row.get("InterconnectStatus")
    if interconnect == "impaired":
        problems.append(
            warning(
                at,
                f"capacity block {block_id} ({rid}) reports its accelerator interconnect impaired (EC2 "
                "DescribeCapacityBlockStatus): jobs spanning its instances may run slowly or fail",
            )
        )
    elif interconnect == "insufficient-data":
        problems.append(
            note(at, f"EC2 has insufficient data on the accelerator interconnect of capacity block {block_id}")
        )
    unavailable = mine.get("TotalUnavailableCapacity", 0)
    if unavailable:
        problems.append(
            warning(
                at,
                f"{unavailable} of {mine['TotalCapacity']} instance(s) of capacity block {rid} are "
                f"unavailable (a failed system status check); {mine.get('TotalAvailableCapacity', 0)} can launch",
            )
        )
    return mine, problems


def _future_block_size(
    at: str, rid: str, reservation: dict, status: dict | None, groups: Groups, needed: int
) -> list[Problem]:
    """A block that has not started shows 0 available; its size is its status's TotalCapacity when EC2 reports one
    (unconfirmed whether it does before the start), else a tag (EC2 user guide, View Capacity Blocks)."""
    tags = {tag.get("Key"): tag.get("Value") for tag in reservation.get("Tags", [])}
    size = str(status["TotalCapacity"]) if status and status["TotalCapacity"] > 0 else tags.get(BLOCK_SIZE_TAG, "")
    if not size.isdigit():
        return [
            unchecked(
                at, f"the count against capacity block {rid}", f"it has not started and has no {BLOCK_SIZE_TAG} tag"
            )
        ]
    if needed > int(size):
        return [
            Problem(
                at, f"{_who(groups)} {needed} instance(s), but capacity block {rid} will hold {size} when it starts"
            )
        ]
    return []


def _state(at: str, what: str, reservation: dict, is_block: bool, now: datetime) -> list[Problem]:
    state = reservation.get("State", "")
    start, end = reservation.get("StartDate"), reservation.get("EndDate")
    window = window_text(start, end, now)
    if state == "scheduled":
        return [warning(at, f"{what} is scheduled: {window}; nodes cannot launch before it starts")]
    if state == "payment-pending":
        return [
            warning(
                at,
                f"{what} is payment-pending: its upfront payment is not processed yet ({window}); EC2 "
                "releases the block if payment fails within 12 hours",
            )
        ]
    if state != "active":
        return [Problem(at, f"{what} is {state}, not active or scheduled ({window})")]
    problems = []
    if is_block:
        problems.append(note(at, f"{what} is active: {window}"))
    if end is not None and end - now < ENDING_SOON:
        problems.append(
            warning(
                at,
                f"{what} ends {_when(end, now)}; EC2 begins terminating its instances 30 minutes before the end",
            )
        )
    return problems


def _plan_state(at: str, what: str, plan: dict, now: datetime) -> list[Problem]:
    status = plan.get("Status", "")
    window = window_text(plan.get("StartTime"), plan.get("EndTime"), now)
    if status == "Scheduled":
        return [warning(at, f"{what} is scheduled: {window}; HyperPod cannot create its nodes before it starts")]
    if status != "Active":
        reason = f": {plan['StatusMessage']}" if plan.get("StatusMessage") else ""
        return [Problem(at, f"{what} is {status}{reason}, not Active or Scheduled ({window})")]
    end = plan.get("EndTime")
    if end is not None and end - now < ENDING_SOON:
        return [warning(at, f"{what} ends {_when(end, now)}")]
    return []


def window_text(start: datetime | None, end: datetime | None, now: datetime) -> str:
    begins = f"starts {_when(start, now)}" if start and start > now else f"started {_stamp(start)}" if start else ""
    ends = f"ends {_when(end, now)}" if end and end > now else f"ended {_stamp(end)}" if end else "no end date"
    return ", ".join(part for part in (begins, ends) if part)


def _when(moment: datetime, now: datetime) -> str:
    """'2026-12-01 09:30 UTC (in 1 day 2 h)'."""
    left = moment - now
    hours = int(left.total_seconds() // 3600)
    days, hours = divmod(hours, 24)
    minutes = int(left.total_seconds() % 3600 // 60)
    span = f"{days} day{'s' if days != 1 else ''} {hours} h" if days else f"{hours} h {minutes} min"
    return f"{_stamp(moment)} (in {span})"


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _who(groups: Groups) -> str:
    if len(groups) == 1:
        return f"group {groups[0][1].name} needs"
    return f"groups {', '.join(group.name for _, group in groups)} need"


def _by(compute: Iterable[ComputeGroup], key: str) -> dict[str, Groups]:
    found: dict[str, Groups] = defaultdict(list)
    for index, group in enumerate(compute):
        value = getattr(group, key)
        if value:
            found[value].append((index, group))
    return dict(found)


def _by_type(groups: Groups) -> dict[str, Groups]:
    found: dict[str, Groups] = defaultdict(list)
    for index, group in groups:
        found[group.instance_type].append((index, group))
    return dict(found)
