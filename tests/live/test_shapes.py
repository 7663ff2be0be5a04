"""Every stubbed response fits botocore's service model, and every call the checks make has a sample here."""

from __future__ import annotations

import pytest

from fmcluster.live.aws import ACTIONS
from tests.live import responses
from tests.live.shapes import output_shape, shape_problems


@pytest.mark.parametrize(("service", "operation"), sorted(responses.SAMPLES))
def test_sample_fits_the_model(service, operation):
    assert shape_problems(output_shape(service, operation), responses.SAMPLES[(service, operation)]) == []


def test_every_operation_called_has_a_sample():
    assert set(responses.SAMPLES) == set(ACTIONS)


def test_every_builder_variant_fits_the_model():
    variants = {
        ("ec2", "DescribeCapacityReservations"): [
            responses.capacity_reservation(state=state, block=block)
            for state in ("active", "scheduled", "expired", "cancelled", "payment-failed")
            for block in (True, False)
        ],
        ("sagemaker", "DescribeTrainingPlan"): [
            responses.training_plan(status=status, targets=("training-job",))
            for status in ("Pending", "Active", "Scheduled", "Expired", "Failed")
        ],
        ("cloudformation", "DescribeStacks"): [responses.bootstrap_stack("ROLLBACK_COMPLETE", "5")],
        ("ec2", "DescribeImages"): [responses.image("ami-0123456789abcdef0", "arm64", "deregistered")],
    }
    for (service, operation), samples in variants.items():
        for sample in samples:
            assert shape_problems(output_shape(service, operation), sample) == []


def test_the_walker_refuses_what_aws_never_returns():
    shape = output_shape("ec2", "DescribeCapacityReservations")
    bad = responses.capacity_reservation()
    bad["CapacityReservations"][0]["State"] = "Active"  # the API's states are lowercase
    bad["CapacityReservations"][0]["AvailableCount"] = 3  # no such member
    assert shape_problems(shape, bad) == [
        "CapacityReservations[0]: unknown member 'AvailableCount'",
        f"CapacityReservations[0].State: 'Active' is not one of the model's values "
        f"{shape.members['CapacityReservations'].member.members['State'].enum}",
    ]
