"""Custom resource: AWS PCS instance health checks of one compute node group (`compute[].health_checks`).

PCS's instance health checks (health monitoring with a repair action, DCGM deep checks as each instance starts) are in
the PCS API (botocore pcs CreateComputeNodeGroup / UpdateComputeNodeGroup `instanceHealthChecks`) but not in
CloudFormation: cfn-lint's AWS::PCS::ComputeNodeGroup schema has no such property. This resource is there until
CloudFormation has it; then the node group's own property replaces it.

- Create, or Update with other settings: wait (while the Lambda has time) until the node group is ACTIVE, then
  UpdateComputeNodeGroup(clusterIdentifier, computeNodeGroupIdentifier, instanceHealthChecks). PCS then "drains and
  replaces the instances in the compute node group" (botocore pcs). A node group in a *_FAILED state fails the
  resource with PCS's errorInfo.
- Update with the same settings (a new Lambda, a new ServiceToken): no call, so no instance is replaced needlessly.
- Delete: nothing. CloudFormation deletes this resource before the node group it depends on, and an update then
  would leave the group UPDATING as it is deleted; a group that stays keeps its checks ("If you omit this member, the
  current settings don't change"): to turn them off, set monitoring and deep_check to none, deploy, then remove the
  key.
CloudFormation's own later updates of the node group leave the checks as they are: they omit `instanceHealthChecks`.
Called at deploy time only, never at synth.
"""

from __future__ import annotations

import json
import logging
import time

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

SETTLED = "ACTIVE"
BUSY = ("CREATING", "UPDATING", "RESUMING", "SUSPENDING")
POLL_SECONDS = 15
SPARE_MILLISECONDS = 60_000
"""Stop waiting this long before the Lambda's own timeout, to fail with a message rather than time out."""


def physical_id(properties: dict) -> str:
    """The resource's id: the node group and what it holds.

    >>> physical_id({"ClusterId": "pcs_abc", "ComputeNodeGroupId": "pcs_def"})
    'pcs_abc/pcs_def/instance-health-checks'
    """
    return f"{properties['ClusterId']}/{properties['ComputeNodeGroupId']}/instance-health-checks"


def wait_until_active(pcs, cluster: str, group: str, remaining_ms) -> None:
    """Return once the node group is ACTIVE; raise when it failed or the time is up."""
    while True:
        shown = pcs.get_compute_node_group(clusterIdentifier=cluster, computeNodeGroupIdentifier=group)
        node_group = shown["computeNodeGroup"]
        status = node_group["status"]
        if status == SETTLED:
            return
        if status not in BUSY:
            errors = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in node_group.get("errorInfo", []))
            raise RuntimeError(f"compute node group {group} is {status}{f' ({errors})' if errors else ''}")
        if remaining_ms() < SPARE_MILLISECONDS + POLL_SECONDS * 1000:
            raise TimeoutError(f"compute node group {group} is still {status}; deploy again once it is ACTIVE")
        time.sleep(POLL_SECONDS)


def on_event(event: dict, context: object, pcs=None) -> dict:
    """CDK Provider framework entry point (see the module docstring)."""
    request = event.get("RequestType")
    if request not in ("Create", "Update", "Delete"):
        raise ValueError(f"RequestType must be Create, Update or Delete; got {request!r}")
    properties = event.get("ResourceProperties") or {}
    if request == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", "none")}
    checks = properties.get("InstanceHealthChecks")
    if not isinstance(checks, dict) or not checks:
        raise ValueError(
            "InstanceHealthChecks must be a non-empty object (botocore pcs UpdateInstanceHealthChecksRequest)"
        )
    resource = physical_id(properties)
    old = event.get("OldResourceProperties") or {}
    if request == "Update" and {k: old.get(k) for k in properties if k != "ServiceToken"} == {
        k: v for k, v in properties.items() if k != "ServiceToken"
    }:
        LOG.info(json.dumps({"event": "unchanged", "resource": resource}))
        return {"PhysicalResourceId": resource}
    pcs = pcs or boto3.client("pcs")
    remaining = getattr(context, "get_remaining_time_in_millis", lambda: 900_000)
    cluster, group = properties["ClusterId"], properties["ComputeNodeGroupId"]
    wait_until_active(pcs, cluster, group, remaining)
    pcs.update_compute_node_group(
        clusterIdentifier=cluster, computeNodeGroupIdentifier=group, instanceHealthChecks=checks
    )
    LOG.info(json.dumps({"event": "applied", "resource": resource, "instanceHealthChecks": checks}))
    return {"PhysicalResourceId": resource}
