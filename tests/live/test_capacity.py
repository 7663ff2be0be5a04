"""Capacity blocks, ODCRs and training plans against stubbed EC2 and SageMaker responses (responses.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fmcluster.live.capacity import check_reservation, check_training_plan
from tests.live.conftest import PCS_BLOCK, config_of
from tests.live.responses import (
    BLOCK,
    NOW,
    PLAN_ARN,
    RESERVATION,
    capacity_block_status,
    capacity_reservation,
    instances,
    own_instances_query,
    training_plan,
)

ASK = {"CapacityReservationIds": [RESERVATION]}
BLOCK_ASK = {"CapacityBlockIds": [BLOCK]}


def reservation_messages(stubs, response=None, *, error=None, text=PCS_BLOCK, own=None, status=None, **changes):
    """`own`: the cluster's own instance ids in the reservation, when the check is expected to count them;
    `status`: the block's DescribeCapacityBlockStatus answer (default: all of its instances available, interconnect
    ok), asked for a block that is active or not started yet; "denied" when the caller may not call it."""
    config = config_of(text, **changes)
    stub = stubs()
    if error:
        stub.error(
            "ec2", "DescribeCapacityReservations", error, "The capacity reservation ID does not exist", params=ASK
        )
    else:
        stub.ok("ec2", "DescribeCapacityReservations", response, ASK)
        row = response["CapacityReservations"][0]
        if "CapacityBlockId" in row and row["State"] in ("active", "scheduled", "payment-pending"):
            if status == "denied":
                stub.error("ec2", "DescribeCapacityBlockStatus", "UnauthorizedOperation", "not authorized",
                           status=403, params=BLOCK_ASK)  # fmt: skip
            else:
                stub.ok("ec2", "DescribeCapacityBlockStatus", status or capacity_block_status(total=row[
                    "TotalInstanceCount"]), BLOCK_ASK)  # fmt: skip
    if own is not None:
        tags = {"fmcluster:cluster": config.name}
        stub.ok("ec2", "DescribeInstances", instances(*own, reservation=RESERVATION, tags=tags),
                own_instances_query(RESERVATION, config.name))  # fmt: skip
    groups = [(i, g) for i, g in enumerate(config.compute) if g.reservation_id == RESERVATION]
    return [p.render("cluster.yaml") for p in check_reservation(config, stub.aws(), RESERVATION, groups, NOW)]


def test_an_active_block_that_fits_gets_only_its_window(stubs):
    assert reservation_messages(stubs, capacity_reservation()) == [
        "cluster.yaml: compute[0].reservation_id: note: capacity block cr-0123456789abcdef0 is active: started "
        "2026-11-30 08:00 UTC, ends 2026-12-14 10:00 UTC (in 14 days 0 h)"
    ]


def test_a_reservation_in_another_zone_too_small_and_of_another_type_gets_all_three(stubs):
    response = capacity_reservation(
        instance_type="p5e.48xlarge", az_id="use1-az4", az="us-east-1d", total=8, available=8
    )
    assert reservation_messages(stubs, response, own=())[1:] == [
        "cluster.yaml: compute[0].instance_type: cr-0123456789abcdef0 holds p5e.48xlarge, not p5.48xlarge; set "
        "instance_type: p5e.48xlarge or use a reservation for p5.48xlarge",
        "cluster.yaml: availability_zone_id: capacity block cr-0123456789abcdef0 is in use1-az4 (us-east-1d), not "
        "use1-az6; instances launch into it only from a subnet in its zone: set availability_zone_id: use1-az4",
        "cluster.yaml: compute[0].count: group gpu needs 16 instance(s), but capacity block cr-0123456789abcdef0 "
        "has 8 of 8 available",
    ]


def test_a_missing_reservation(stubs):
    assert reservation_messages(stubs, error="InvalidCapacityReservationId.NotFound") == [
        "cluster.yaml: compute[0].reservation_id: cr-0123456789abcdef0 not found in us-east-1 for this account "
        "(aws ec2 describe-capacity-reservations lists yours)"
    ]


SIZE_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"
"""EC2 user guide, "View Capacity Blocks": "Before a Capacity Block reservation begins, the available capacity
appears as zero. You can see how many instances will be available in your Capacity Block by the tag value for the
tag key aws:ec2capacityreservation:incrementalRequestedQuantity"."""
LATER = {"start": NOW + timedelta(days=1, hours=2), "end": NOW + timedelta(days=15, hours=2)}


def test_a_scheduled_block_states_when_it_starts(stubs):
    response = capacity_reservation(state="scheduled", total=0, available=0, tags={SIZE_TAG: "16"}, **LATER)
    assert reservation_messages(stubs, response) == [
        "cluster.yaml: compute[0].reservation_id: warning: capacity block cr-0123456789abcdef0 is scheduled: starts "
        "2026-12-01 12:00 UTC (in 1 day 2 h), ends 2026-12-15 12:00 UTC (in 15 days 2 h); nodes cannot launch "
        "before it starts"
    ]


def test_a_scheduled_block_too_small_is_judged_by_its_size_tag(stubs):
    response = capacity_reservation(state="scheduled", total=0, available=0, tags={SIZE_TAG: "8"}, **LATER)
    assert reservation_messages(stubs, response)[1:] == [
        "cluster.yaml: compute[0].count: group gpu needs 16 instance(s), but capacity block cr-0123456789abcdef0 "
        "will hold 8 when it starts"
    ]


def test_a_scheduled_block_without_its_size_tag_is_not_judged_by_its_zero_count(stubs):
    response = capacity_reservation(state="scheduled", total=0, available=0, **LATER)
    assert reservation_messages(stubs, response)[1:] == [
        "cluster.yaml: compute[0].count: not checked: the count against capacity block cr-0123456789abcdef0: it has "
        f"not started and has no {SIZE_TAG} tag"
    ]


def test_a_block_whose_payment_is_pending_is_a_warning(stubs):
    # EC2 user guide, "View Capacity Blocks": payment-pending, "the upfront payment hasn't been processed yet";
    # payment-failed after 12 hours releases the block. Nothing in the file is wrong yet.
    response = capacity_reservation(state="payment-pending", total=0, available=0, tags={SIZE_TAG: "16"}, **LATER)
    assert reservation_messages(stubs, response) == [
        "cluster.yaml: compute[0].reservation_id: warning: capacity block cr-0123456789abcdef0 is payment-pending: "
        "its upfront payment is not processed yet (starts 2026-12-01 12:00 UTC (in 1 day 2 h), ends 2026-12-15 "
        "12:00 UTC (in 15 days 2 h)); EC2 releases the block if payment fails within 12 hours"
    ]


def test_a_block_ending_within_a_day_warns(stubs):
    response = capacity_reservation(end=NOW + timedelta(hours=5, minutes=30))
    assert reservation_messages(stubs, response)[1:] == [
        "cluster.yaml: compute[0].reservation_id: warning: capacity block cr-0123456789abcdef0 ends 2026-11-30 "
        "15:30 UTC (in 5 h 30 min); EC2 begins terminating its instances 30 minutes before the end"
    ]


def test_an_expired_block_is_an_error(stubs):
    response = capacity_reservation(state="expired", start=NOW - timedelta(days=14), end=NOW - timedelta(hours=1))
    assert reservation_messages(stubs, response) == [
        "cluster.yaml: compute[0].reservation_id: capacity block cr-0123456789abcdef0 is expired, not active or "
        "scheduled (started 2026-11-16 10:00 UTC, ended 2026-11-30 09:00 UTC)"
    ]


def test_an_odcr_named_as_a_capacity_block_and_for_windows(stubs):
    response = capacity_reservation(block=False, platform="Windows")
    assert reservation_messages(stubs, response) == [
        "cluster.yaml: compute[0].capacity: cr-0123456789abcdef0 is an On-Demand Capacity Reservation; set "
        "capacity: odcr",
        "cluster.yaml: compute[0].reservation_id: cr-0123456789abcdef0 is for Windows; fmcluster's nodes run "
        "Linux/UNIX, and EC2 launches only instances of the reservation's platform into it",
    ]


def test_groups_sharing_a_reservation_add_up(stubs):
    two = PCS_BLOCK + (
        "  - {name: gpu2, instance_type: p5.48xlarge, count: 4, capacity: capacity-block, "
        "reservation_id: cr-0123456789abcdef0}\n"
    )
    two = two.replace("orchestrator: {type: pcs}\n", "") + "orchestrator: {type: pcs}\n"
    lines = reservation_messages(stubs, capacity_reservation(total=16, available=16), text=two, own=())
    assert lines[1:] == [
        "cluster.yaml: compute[0].count: groups gpu, gpu2 need 20 instance(s), but capacity block "
        "cr-0123456789abcdef0 has 16 of 16 available"
    ]


DEPLOYED = tuple(f"i-0{index:016x}" for index in range(16))


def test_a_deployed_clusters_own_instances_count_as_its_own(stubs):
    """EC2 user guide, "Capacity Reservations": instances launched into a reservation reduce its available count, so
    the deployed cluster's 16 nodes leave 0 of 16 available; they are the file's own, found by reservation and tag."""
    response = capacity_reservation(total=16, available=0)
    assert reservation_messages(stubs, response, own=DEPLOYED)[1:] == []


def test_instances_of_others_in_the_reservation_still_count_against_the_file(stubs):
    response = capacity_reservation(total=16, available=2)
    assert reservation_messages(stubs, response, own=DEPLOYED[:10])[1:] == [
        "cluster.yaml: compute[0].count: group gpu needs 16 instance(s), but capacity block cr-0123456789abcdef0 "
        "has 2 + 10 running for this cluster of 16 available"
    ]


def test_own_instances_that_cannot_be_counted_leave_the_count_not_checked(stubs):
    config = config_of(PCS_BLOCK)
    stub = stubs()
    stub.ok("ec2", "DescribeCapacityReservations", capacity_reservation(total=16, available=0), ASK)
    stub.ok("ec2", "DescribeCapacityBlockStatus", capacity_block_status(), BLOCK_ASK)
    stub.error("ec2", "DescribeInstances", "UnauthorizedOperation", "You are not authorized to perform this "
               "operation.", status=403, params=own_instances_query(RESERVATION, "llm-pretrain"))  # fmt: skip
    groups = [(0, config.compute[0])]
    lines = [p.render("cluster.yaml") for p in check_reservation(config, stub.aws(), RESERVATION, groups, NOW)]
    assert lines[1:] == [
        "cluster.yaml: compute[0].count: not checked: the count against capacity block cr-0123456789abcdef0: 0 are "
        "free and the cluster's own instances in it could not be counted: access denied to ec2:DescribeInstances "
        "(the read-only policy in fmcluster's README grants it)"
    ]


# DescribeCapacityBlockStatus (botocore ec2 model, CapacityBlockStatus): TotalCapacity "the combined amount of
# Available and Unavailable capacity", TotalUnavailableCapacity "unavailable for use due to a system status check
# failure", InterconnectStatus "ok | impaired | insufficient-data" ("accelerator interconnect communication is
# impaired"). The reservation names its block in CapacityReservation.CapacityBlockId.


def test_a_block_with_unavailable_instances_too_few_for_the_group_is_an_error(stubs):
    status = capacity_block_status(total=16, unavailable=2)
    assert reservation_messages(stubs, capacity_reservation(available=14), status=status)[1:] == [
        "cluster.yaml: compute[0].reservation_id: warning: 2 of 16 instance(s) of capacity block "
        "cr-0123456789abcdef0 are unavailable (a failed system status check); 14 can launch",
        "cluster.yaml: compute[0].count: group gpu needs 16 instance(s), but capacity block cr-0123456789abcdef0 "
        "holds 16, 2 of them unavailable (a failed system status check)",
    ]


def test_unavailable_instances_the_group_can_spare_are_a_warning_only(stubs):
    status = capacity_block_status(total=16, unavailable=2)
    lines = reservation_messages(
        stubs, capacity_reservation(available=14), status=status, text=PCS_BLOCK.replace("count: 16", "count: 12")
    )
    assert lines[1:] == [
        "cluster.yaml: compute[0].reservation_id: warning: 2 of 16 instance(s) of capacity block "
        "cr-0123456789abcdef0 are unavailable (a failed system status check); 14 can launch"
    ]


def test_an_impaired_interconnect_is_a_warning(stubs):
    status = capacity_block_status(interconnect="impaired")
    assert reservation_messages(stubs, capacity_reservation(), status=status)[1:] == [
        "cluster.yaml: compute[0].reservation_id: warning: capacity block cb-0123456789abcdef0 "
        "(cr-0123456789abcdef0) reports its accelerator interconnect impaired (EC2 DescribeCapacityBlockStatus): "
        "jobs spanning its instances may run slowly or fail"
    ]


def test_an_interconnect_without_data_is_a_note(stubs):
    status = capacity_block_status(interconnect="insufficient-data")
    assert reservation_messages(stubs, capacity_reservation(), status=status)[1:] == [
        "cluster.yaml: compute[0].reservation_id: note: EC2 has insufficient data on the accelerator interconnect "
        "of capacity block cb-0123456789abcdef0"
    ]


def test_a_scheduled_block_is_judged_by_its_reported_size_before_its_tag(stubs):
    response = capacity_reservation(state="scheduled", total=0, available=0, tags={SIZE_TAG: "16"}, **LATER)
    lines = reservation_messages(stubs, response, status=capacity_block_status(total=8))
    assert lines[1:] == [
        "cluster.yaml: compute[0].count: group gpu needs 16 instance(s), but capacity block cr-0123456789abcdef0 "
        "will hold 8 when it starts"
    ]


def test_a_block_status_the_caller_may_not_read_is_not_checked_and_the_rest_runs(stubs):
    assert reservation_messages(stubs, capacity_reservation(), status="denied")[1:] == [
        "cluster.yaml: compute[0].reservation_id: not checked: the capacity and interconnect of capacity block "
        "cb-0123456789abcdef0: access denied to ec2:DescribeCapacityBlockStatus (the read-only policy in "
        "fmcluster's README grants it)"
    ]


PLAN = """\
name: llm-plan
region: us-west-2
account: "123456789012"
availability_zone_id: usw2-az2
compute:
  - name: gpu
    instance_type: p5en.48xlarge
    count: 8
    capacity: training-plan
    training_plan_arn: arn:aws:sagemaker:us-west-2:123456789012:training-plan/llm-pretrain-2026q4
"""


def plan_messages(stubs, response=None, *, error=None, text=PLAN):
    config = config_of(text)
    stub = stubs("us-west-2")
    ask = {"TrainingPlanName": "llm-pretrain-2026q4"}
    if error:
        stub.error("sagemaker", "DescribeTrainingPlan", error, "Training plan not found", params=ask)
    else:
        stub.ok("sagemaker", "DescribeTrainingPlan", response, ask)
    groups = [(i, g) for i, g in enumerate(config.compute) if g.training_plan_arn == PLAN_ARN]
    return [p.render("cluster.yaml") for p in check_training_plan(config, stub.aws(), PLAN_ARN, groups, NOW)]


def test_an_active_plan_that_covers_the_group(stubs):
    assert plan_messages(stubs, training_plan()) == []


@pytest.mark.parametrize("code", ["ResourceNotFound", "ValidationException"])
def test_a_missing_plan(stubs, code):
    # SageMaker's model declares ResourceNotFound; its Describe APIs are known to answer ValidationException with a
    # not-found message instead (aws/aws-sdk issue 165; unconfirmed for DescribeTrainingPlan): both are read.
    assert plan_messages(stubs, error=code) == [
        "cluster.yaml: compute[0].training_plan_arn: training plan llm-pretrain-2026q4 not found in us-west-2 "
        "(aws sagemaker list-training-plans lists yours)"
    ]


def test_a_scheduled_plan_states_when_it_starts(stubs):
    response = training_plan(status="Scheduled", start=NOW + timedelta(hours=20), end=NOW + timedelta(days=14))
    assert plan_messages(stubs, response) == [
        "cluster.yaml: compute[0].training_plan_arn: warning: training plan llm-pretrain-2026q4 is scheduled: "
        "starts 2026-12-01 06:00 UTC (in 20 h 0 min), ends 2026-12-14 10:00 UTC (in 14 days 0 h); HyperPod cannot "
        "create its nodes before it starts"
    ]


def test_an_expired_plan_is_an_error(stubs):
    response = training_plan(status="Expired", start=NOW - timedelta(days=15), end=NOW - timedelta(days=1))
    assert plan_messages(stubs, response)[0] == (
        "cluster.yaml: compute[0].training_plan_arn: training plan llm-pretrain-2026q4 is Expired, not Active or "
        "Scheduled (started 2026-11-15 10:00 UTC, ended 2026-11-29 10:00 UTC)"
    )


def test_a_plan_of_another_type_zone_and_size(stubs):
    response = training_plan(instance_type="ml.p5.48xlarge", az_id="usw2-az4", count=4)
    assert plan_messages(stubs, response) == [
        "cluster.yaml: availability_zone_id: training plan llm-pretrain-2026q4 reserves capacity in usw2-az4, not "
        "usw2-az2; set availability_zone_id: usw2-az4",
        "cluster.yaml: compute[0].instance_type: training plan llm-pretrain-2026q4 reserves ml.p5.48xlarge x 4, not "
        "ml.p5en.48xlarge",
    ]


def test_a_plan_too_small_for_the_group(stubs):
    assert plan_messages(stubs, training_plan(count=4)) == [
        "cluster.yaml: compute[0].count: group gpu needs 8 x ml.p5en.48xlarge, but training plan llm-pretrain-2026q4 "
        "reserves 4"
    ]


def test_a_plan_for_training_jobs_cannot_serve_hyperpod(stubs):
    assert plan_messages(stubs, training_plan(targets=("training-job",))) == [
        "cluster.yaml: compute[0].training_plan_arn: training plan llm-pretrain-2026q4 reserves capacity for "
        "training-job, not hyperpod-cluster; HyperPod cannot use it"
    ]


ODCR = PCS_BLOCK.replace("capacity-block", "odcr")
GROUP_ARN = "arn:aws:ec2:us-east-1:123456789012:placement-group/p5-odcr-cluster"


def test_an_odcr_made_in_a_placement_group_needs_the_group_named(stubs):
    """The reservation's PlacementGroupArn (botocore ec2 CapacityReservation); a group that names a placement group
    is checked against it by the placement check (tests/live/test_placement.py)."""
    response = capacity_reservation(block=False)
    response["CapacityReservations"][0]["PlacementGroupArn"] = GROUP_ARN
    assert reservation_messages(stubs, response, text=ODCR) == [
        "cluster.yaml: compute[0].placement_group: cr-0123456789abcdef0 was made in placement group p5-odcr-cluster "
        "and serves only instances launched into it; set placement_group: p5-odcr-cluster"
    ]
    named = ODCR.replace("reservation_id: cr-0123456789abcdef0", "reservation_id: cr-0123456789abcdef0, "
                         "placement_group: p5-odcr-cluster")  # fmt: skip
    assert reservation_messages(stubs, response, text=named) == []
