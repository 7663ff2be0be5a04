"""Placement groups of your own (`compute[].placement_group: <name>`): the group exists in the region, is available,
has strategy cluster, holds no instances outside `availability_zone_id`, and is the group an ODCR of the group was
made in.

Sources: EC2 API reference, DescribePlacementGroups (GroupNames: "only if the placement group is owned by your
account"; PlacementGroup State pending|available|deleting|deleted, Strategy cluster|spread|partition, GroupArn; error
InvalidPlacementGroup.Unknown, EC2 API error codes), DescribeInstances (filter `placement-group-name`;
Placement.AvailabilityZoneId), DescribeCapacityReservations (PlacementGroupArn); EC2 user guide, "Placement
strategies" (a cluster placement group is in one Availability Zone) and "Use Capacity Reservations with cluster
placement groups" (a reservation is created in a placement group and cannot be moved into or out of it).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws, error_code
from fmcluster.live.runner import Check
from fmcluster.problems import Problem, warning

OCCUPYING_STATES = ("pending", "running", "shutting-down", "stopping", "stopped")
"""Instance states in which an instance still holds its place in the group (botocore ec2 InstanceStateName)."""


def placement_checks(config: ClusterConfig, aws: Aws) -> list[Check]:
    return [
        Check(
            f"placement group {group.existing_placement_group}",
            f"compute[{index}].placement_group",
            partial(check_placement_group, config, aws, index),
        )
        for index, group in enumerate(config.compute)
        if group.existing_placement_group
    ]


def check_placement_group(config: ClusterConfig, aws: Aws, index: int) -> list[Problem]:
    group = config.compute[index]
    name, path = group.existing_placement_group, f"compute[{index}].placement_group"
    try:
        found = aws.call("ec2", "DescribePlacementGroups", GroupNames=[name])["PlacementGroups"]
    except ClientError as error:
        if error_code(error) != "InvalidPlacementGroup.Unknown":
            raise
        found = []
    if not found:
        return [
            Problem(
                path,
                f"placement group {name} does not exist in {config.region} (or is not this account's own: EC2 finds "
                "a shared group by id only); create it with strategy cluster, or give the group your reservation "
                "was made in",
            )
        ]
    placement: dict[str, Any] = found[0]
    problems: list[Problem] = []
    state = placement.get("State")
    if state == "pending":
        problems.append(warning(path, f"placement group {name} is still pending; instances launch once available"))
    elif state != "available":
        problems.append(Problem(path, f"placement group {name} is {state}, not available"))
    strategy = placement.get("Strategy")
    if strategy != "cluster":
        said = (
            f"placement group {name} has strategy {strategy}, not cluster: its instances are not packed close "
            "together for EFA"
        )
        problems.append(Problem(path, said) if group.efa else warning(path, f"{said} (this group has no EFA)"))
    problems += _zone(config, aws, name, path)
    if group.capacity == "odcr" and group.reservation_id:
        problems += _reservation(aws, group.reservation_id, name, placement.get("GroupArn"), path)
    return problems


def _zone(config: ClusterConfig, aws: Aws, name: str | None, path: str) -> list[Problem]:
    """A cluster placement group is in the zone of its instances; an empty one takes the zone of its first."""
    zones = sorted(
        {
            zone
            for reservation in aws.pages(
                "ec2",
                "DescribeInstances",
                "Reservations",
                Filters=[
                    {"Name": "placement-group-name", "Values": [name]},
                    {"Name": "instance-state-name", "Values": list(OCCUPYING_STATES)},
                ],
            )
            for instance in reservation.get("Instances", [])
            if (zone := instance.get("Placement", {}).get("AvailabilityZoneId"))
        }
    )
    if zones and config.availability_zone_id not in zones:
        return [
            Problem(
                path,
                f"placement group {name} holds instances in {', '.join(zones)}; a cluster placement group lives in "
                f"one zone, so the nodes cannot launch into it in availability_zone_id {config.availability_zone_id}",
            )
        ]
    return []


def _reservation(aws: Aws, reservation_id: str, name: str | None, arn: str | None, path: str) -> list[Problem]:
    """The ODCR serves instances of the placement group it was made in, and only those."""
    found = aws.call("ec2", "DescribeCapacityReservations", CapacityReservationIds=[reservation_id])
    reservations = found.get("CapacityReservations", [])
    if not reservations:
        return []  # the reservation checks say it is missing
    made_in = reservations[0].get("PlacementGroupArn")
    if made_in is None:
        return [
            warning(
                path,
                f"reservation {reservation_id} was not made in a placement group, so instances launched into {name} "
                "may not use it (unconfirmed); give placement_group: false, or make the reservation in the group",
            )
        ]
    if made_in != arn:
        return [
            Problem(
                path,
                f"reservation {reservation_id} was made in placement group {made_in.rsplit('/', 1)[-1]}, not in "
                f"{name}: it serves only instances of that group; name that group",
            )
        ]
    return []
