"""A placement group of one's own (`compute[].placement_group: <name>`), against stubbed EC2 responses.

Shapes: botocore's ec2 model (DescribePlacementGroups, DescribeInstances, DescribeCapacityReservations), checked by
the `stubs` fixture; InvalidPlacementGroup.Unknown is EC2's documented error code for a group that does not exist
(EC2 API reference, error codes; tests/live/responses.py)."""

from __future__ import annotations

import pytest

from fmcluster.live.placement import OCCUPYING_STATES, check_placement_group, placement_checks
from fmcluster.live.preflight import checks
from tests.live import responses
from tests.live.conftest import QUICKSTART, config_of

NAME = "p5-odcr-cluster"
ARN = f"arn:aws:ec2:us-east-1:{responses.ACCOUNT}:placement-group/{NAME}"
ODCR_GROUP = {
    "name": "gpu",
    "instance_type": "p5.48xlarge",
    "count": 2,
    "capacity": "odcr",
    "reservation_id": responses.RESERVATION,
    "placement_group": NAME,
}
CPU_GROUP = {"name": "cpu", "instance_type": "c6i.4xlarge", "count": 2, "placement_group": NAME}
IN_GROUP = [
    {"Name": "placement-group-name", "Values": [NAME]},
    {"Name": "instance-state-name", "Values": list(OCCUPYING_STATES)},
]


def config(group=ODCR_GROUP):
    return config_of(QUICKSTART, orchestrator={"type": "pcs"}, compute=[group])


def placement_group(state="available", strategy="cluster"):
    return {
        "PlacementGroups": [
            {
                "GroupName": NAME,
                "State": state,
                "Strategy": strategy,
                "GroupId": "pg-0123456789abcdef0",
                "GroupArn": ARN,
            }
        ]
    }


def instances(*zones):
    return {"Reservations": [{"Instances": [{"Placement": {"AvailabilityZoneId": zone}} for zone in zones]}]}


def reservation(placement_arn=ARN):
    found = responses.capacity_reservation(block=False)
    if placement_arn is not None:
        found["CapacityReservations"][0]["PlacementGroupArn"] = placement_arn
    return found


def messages(stubs, group_response, zones=("use1-az6",), made_in=ARN, group=ODCR_GROUP):
    stub = stubs().ok("ec2", "DescribePlacementGroups", group_response, {"GroupNames": [NAME]})
    stub.ok("ec2", "DescribeInstances", instances(*zones), {"Filters": IN_GROUP})
    if group.get("capacity") == "odcr":
        stub.ok("ec2", "DescribeCapacityReservations", reservation(made_in),
                {"CapacityReservationIds": [responses.RESERVATION]})  # fmt: skip
    return [problem.render("cluster.yaml") for problem in check_placement_group(config(group), stub.aws(), 0)]


def test_only_a_named_placement_group_is_checked():
    assert placement_checks(config_of(QUICKSTART), None) == []
    assert [check.label for check in checks(config(), None, responses.ACCOUNT, None)].count(
        f"placement group {NAME}"
    ) == 1


def test_the_group_the_reservation_was_made_in_passes(stubs):
    assert messages(stubs, placement_group()) == []
    assert messages(stubs, placement_group(), zones=()) == []  # empty: its zone is its first instance's


def test_a_group_that_does_not_exist_is_named(stubs):
    stub = stubs().error(
        "ec2", "DescribePlacementGroups", "InvalidPlacementGroup.Unknown", params={"GroupNames": [NAME]}
    )
    assert [p.render("cluster.yaml") for p in check_placement_group(config(), stub.aws(), 0)] == [
        f"cluster.yaml: compute[0].placement_group: placement group {NAME} does not exist in us-east-1 (or is not "
        "this account's own: EC2 finds a shared group by id only); create it with strategy cluster, or give the group "
        "your reservation was made in"
    ]


@pytest.mark.parametrize(
    ("state", "strategy", "expected"),
    [
        ("pending", "cluster", f"warning: placement group {NAME} is still pending; instances launch once available"),
        ("deleting", "cluster", f"placement group {NAME} is deleting, not available"),
        (
            "available",
            "spread",
            f"placement group {NAME} has strategy spread, not cluster: its instances are not "
            "packed close together for EFA",
        ),
    ],
)
def test_a_group_that_is_not_an_available_cluster_group(stubs, state, strategy, expected):
    assert messages(stubs, placement_group(state, strategy)) == [
        f"cluster.yaml: compute[0].placement_group: {expected}"
    ]


def test_a_spread_group_is_only_a_warning_for_a_group_without_efa(stubs):
    assert messages(stubs, placement_group(strategy="partition"), group=CPU_GROUP) == [
        f"cluster.yaml: compute[0].placement_group: warning: placement group {NAME} has strategy partition, not "
        "cluster: its instances are not packed close together for EFA (this group has no EFA)"
    ]


def test_a_group_whose_instances_are_in_another_zone(stubs):
    assert messages(stubs, placement_group(), zones=("use1-az4",)) == [
        f"cluster.yaml: compute[0].placement_group: placement group {NAME} holds instances in use1-az4; a cluster "
        "placement group lives in one zone, so the nodes cannot launch into it in availability_zone_id use1-az6"
    ]


def test_a_reservation_made_elsewhere_or_nowhere(stubs):
    other = ARN.replace(NAME, "other-pg")
    assert messages(stubs, placement_group(), made_in=other) == [
        f"cluster.yaml: compute[0].placement_group: reservation {responses.RESERVATION} was made in placement group "
        f"other-pg, not in {NAME}: it serves only instances of that group; name that group"
    ]
    assert messages(stubs, placement_group(), made_in=None) == [
        f"cluster.yaml: compute[0].placement_group: warning: reservation {responses.RESERVATION} was not made in a "
        f"placement group, so instances launched into {NAME} may not use it (unconfirmed); give placement_group: "
        "false, or make the reservation in the group"
    ]
