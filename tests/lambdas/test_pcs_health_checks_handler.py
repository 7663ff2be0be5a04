"""The PCS instance health checks custom resource (fmcluster/lambdas/pcs_health_checks) against botocore's Stubber:
every request is validated against the pcs model by the Stubber, and every response here is also checked by
tests/live/shapes.py (enums such as ComputeNodeGroupStatus included). moto has no PCS.

The request is `compute[].health_checks`' (`fmcluster.config.models.HealthChecks.request`); the statuses are botocore
pcs ComputeNodeGroupStatus; the ids follow the PCS user guide's examples (pcs_ + 10 characters)."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster.config.models import HealthChecks
from fmcluster.lambdas.pcs_health_checks.handler import on_event
from tests.live.shapes import output_shape, shape_problems

CLUSTER = "pcs_abc1234567"
GROUP = "pcs_def8901234"
CHECKS = HealthChecks(deep_check="quick", deep_check_repair="replace").request()
PROPERTIES = {"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:x", "ClusterId": CLUSTER,
              "ComputeNodeGroupId": GROUP, "InstanceHealthChecks": CHECKS}  # fmt: skip
IDS = {"clusterIdentifier": CLUSTER, "computeNodeGroupIdentifier": GROUP}


def node_group(status: str, errors: list[dict] | None = None) -> dict:
    """GetComputeNodeGroup's answer (only its required members, the status and errorInfo vary)."""
    group = {
        "name": "gpu", "id": GROUP, "arn": f"arn:aws:pcs:us-east-1:123456789012:computenodegroup/{GROUP}",
        "clusterId": CLUSTER, "createdAt": datetime(2026, 12, 1, tzinfo=UTC),
        "modifiedAt": datetime(2026, 12, 1, tzinfo=UTC), "status": status, "subnetIds": ["subnet-0123456789abcdef0"],
        "customLaunchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"},
        "iamInstanceProfileArn": "arn:aws:iam::123456789012:instance-profile/aws-pcs/NodeProfile",
        "scalingConfiguration": {"minInstanceCount": 2, "maxInstanceCount": 2},
        "instanceConfigs": [{"instanceType": "p5.48xlarge"}],
    }  # fmt: skip
    if errors:
        group["errorInfo"] = errors
    answer = {"computeNodeGroup": group}
    assert shape_problems(output_shape("pcs", "GetComputeNodeGroup"), answer) == []
    return answer


def stubbed(*statuses: str, update: bool = True, errors: list[dict] | None = None):
    pcs = boto3.client("pcs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(pcs)
    for status in statuses:
        stub.add_response("get_compute_node_group", node_group(status, errors), IDS)
    if update:
        updated = node_group("UPDATING")
        stub.add_response("update_compute_node_group", updated, {**IDS, "instanceHealthChecks": CHECKS})
    stub.activate()
    return pcs, stub


class Context:
    def __init__(self, remaining_ms: int = 600_000):
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_create_waits_for_an_active_group_and_applies_the_checks(monkeypatch):
    sleeps = []
    monkeypatch.setattr("time.sleep", sleeps.append)
    pcs, stub = stubbed("UPDATING", "ACTIVE")
    result = on_event({"RequestType": "Create", "ResourceProperties": PROPERTIES}, Context(), pcs=pcs)
    stub.assert_no_pending_responses()
    assert result == {"PhysicalResourceId": f"{CLUSTER}/{GROUP}/instance-health-checks"}
    assert sleeps == [15]


def test_an_update_that_changes_nothing_calls_nothing():
    pcs, stub = stubbed(update=False)
    old = {**PROPERTIES, "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:older"}
    event = {"RequestType": "Update", "ResourceProperties": PROPERTIES, "OldResourceProperties": old,
             "PhysicalResourceId": f"{CLUSTER}/{GROUP}/instance-health-checks"}  # fmt: skip
    assert on_event(event, Context(), pcs=pcs)["PhysicalResourceId"] == f"{CLUSTER}/{GROUP}/instance-health-checks"
    stub.assert_no_pending_responses()


def test_an_update_with_other_checks_applies_them():
    pcs, stub = stubbed("ACTIVE")
    old = {**PROPERTIES, "InstanceHealthChecks": HealthChecks().request()}
    event = {"RequestType": "Update", "ResourceProperties": PROPERTIES, "OldResourceProperties": old}
    on_event(event, Context(), pcs=pcs)
    stub.assert_no_pending_responses()


def test_delete_leaves_the_group_as_it_is():
    pcs, stub = stubbed(update=False)
    event = {
        "RequestType": "Delete",
        "ResourceProperties": PROPERTIES,
        "PhysicalResourceId": "x/y/instance-health-checks",
    }
    assert on_event(event, Context(), pcs=pcs) == {"PhysicalResourceId": "x/y/instance-health-checks"}
    stub.assert_no_pending_responses()


def test_a_failed_group_fails_the_resource_with_pcss_error():
    error = {"code": "InsufficientInstanceCapacity", "message": "no p5.48xlarge in use1-az6"}
    pcs, _ = stubbed("UPDATE_FAILED", update=False, errors=[error])
    with pytest.raises(RuntimeError) as raised:
        on_event({"RequestType": "Create", "ResourceProperties": PROPERTIES}, Context(), pcs=pcs)
    assert str(raised.value) == (
        f"compute node group {GROUP} is UPDATE_FAILED (InsufficientInstanceCapacity: no p5.48xlarge in use1-az6)"
    )


def test_a_group_busy_past_the_lambdas_time_fails_with_a_message():
    pcs, _ = stubbed("UPDATING", update=False)
    with pytest.raises(TimeoutError) as raised:
        on_event({"RequestType": "Create", "ResourceProperties": PROPERTIES}, Context(remaining_ms=30_000), pcs=pcs)
    assert str(raised.value) == f"compute node group {GROUP} is still UPDATING; deploy again once it is ACTIVE"


@pytest.mark.parametrize("checks", [None, {}, "STANDARD"])
def test_bad_properties_fail_before_any_call(checks):
    pcs, _ = stubbed(update=False)
    with pytest.raises(ValueError, match="InstanceHealthChecks must be a non-empty object"):
        on_event({"RequestType": "Create", "ResourceProperties": {**PROPERTIES, "InstanceHealthChecks": checks}},
                 Context(), pcs=pcs)  # fmt: skip
