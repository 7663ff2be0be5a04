"""HyperPod's own record of what happened to a cluster: its events, with the failure messages only they carry.

A node that HyperPod could not provision leaves its reason in the cluster's events: `ListClusterEvents` gives one
summary per event (`EventLevel` Info, Warn or Error; `ResourceType` Cluster, InstanceGroup or Instance; the instance
group, the instance, a `Description`), and `DescribeClusterEvent` the event's `EventDetails.EventMetadata`, whose
`Cluster`, `InstanceGroup`, `InstanceGroupScaling`, `Instance` or `DatabaseConfiguration` member holds the
`FailureMessage` (botocore sagemaker: ClusterEventSummary, ClusterEventDetail, EventMetadata). HyperPod keeps events
only for clusters whose `NodeProvisioningMode` is `Continuous` ("This functionality is only supported when the
NodeProvisioningMode is set to Continuous", SageMaker API reference for both operations), so other clusters are not
asked. The newest `EVENT_PAGE` events are read (one page, newest first); the Error and Warn ones are grouped by level,
resource, instance group and description, and each group is described once (its newest event), so 100 nodes failing
the same way are one finding naming a few of them. The operations in progress (ListClusterOperations,
DescribeClusterOperation: scaling and deep health checks) are shown too, so that a short group is seen to be worked on.
IAM actions `sagemaker:ListClusterEvents`, `sagemaker:DescribeClusterEvent`, `sagemaker:ListClusterOperations` and
`sagemaker:DescribeClusterOperation` (named after the operations, as SageMaker's are; unconfirmed against the Service
Authorization Reference).

>>> failure_message({"EventDetails": {"EventMetadata": {"Instance": {"FailureMessage": "no capacity"}}}})
'no capacity'
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from fmcluster.live.aws import Aws
from fmcluster.live.findings import Collected, Finding, ok, problem, unknown, warning
from fmcluster.live.runner import STOPPED, stopped_reason

EVENT_PAGE = 100
"""ListClusterEvents' MaxResults maximum (botocore sagemaker: 1-100)."""
SHOWN_NODES = 5
CONTINUOUS = "Continuous"
"""ClusterNodeProvisioningMode's one value (botocore sagemaker)."""
BAD_LEVELS = {"Error": "problem", "Warn": "warning"}
"""ClusterEventLevel's values that are findings (Info events are not)."""

Keys = dict[str, tuple[str, str | None]]


def failure_message(detail: dict[str, Any]) -> str:
    """The FailureMessage of whichever EventMetadata member an event (a ClusterEventDetail) carries ("" when none
    does: EventMetadata is a union, and SlurmHealth has none)."""
    metadata = detail.get("EventDetails", {}).get("EventMetadata", {})
    return next((part["FailureMessage"] for part in metadata.values() if part.get("FailureMessage")), "")


def _listed(
    aws: Aws,
    cluster: dict[str, Any],
    kept: Collected,
    subject: str,
    what: str,
    name: str,
    operation: str,
    result: str,
    **params: Any,
) -> tuple[list[dict[str, Any]] | None, list[Finding]]:
    """(the first page of `operation`'s `result`, kept as hyperpod/`name`, []) for a Continuous cluster; (None, []) for
    another cluster, which keeps none; (None, [why it could not be read]) when the call stopped."""
    if cluster.get("NodeProvisioningMode") != CONTINUOUS:
        return None, []
    try:
        items = aws.call("sagemaker", operation, ClusterName=cluster["ClusterName"], MaxResults=EVENT_PAGE, **params)
    except STOPPED as error:
        return None, [unknown(subject, what, stopped_reason(error), key="compute")]
    kept.keep(f"hyperpod/{name}", items.get(result, []))
    return items.get(result, []), []


def cluster_events(aws: Aws, cluster: dict[str, Any], keys: Keys, kept: Collected) -> list[Finding]:
    """One finding per kind of Error or Warn event among the cluster's newest events (none for a cluster that keeps
    no events), or one saying there are none, or why they could not be read."""
    name = cluster["ClusterName"]
    subject = f"HyperPod events of {name}"
    events, stopped = _listed(aws, cluster, kept, subject, "the newest events", "events", "ListClusterEvents",
                              "Events", SortBy="EventTime", SortOrder="Descending")  # fmt: skip
    if events is None:
        return stopped
    kinds: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for event in events:
        if event.get("EventLevel") in BAD_LEVELS:
            kind = (event["EventLevel"], event["ResourceType"], event.get("InstanceGroupName", ""),
                    event.get("Description", ""))  # fmt: skip
            kinds.setdefault(kind, []).append(event)
    if not kinds:
        return [ok(subject, f"no errors or warnings among the newest {len(events)} events")]
    return [finding for (level, _, group, _), same in kinds.items()
            for finding in _kind(aws, name, level, group, same, len(events), keys, kept)]  # fmt: skip


def operations(aws: Aws, cluster: dict[str, Any], keys: Keys, kept: Collected) -> list[Finding]:
    """The cluster's operations in progress (ListClusterOperations Status InProgress: scaling and deep health checks,
    botocore sagemaker ClusterOperationSummary), one warning each with what DescribeClusterOperation says it changes:
    a group short of its target while one runs is being worked on. Asked of Continuous clusters only, as the events
    are (unconfirmed whether other clusters have operations: not asking them fails safe)."""
    name = cluster["ClusterName"]
    subject = f"HyperPod operations of {name}"
    running, stopped = _listed(aws, cluster, kept, subject, "the operations in progress", "operations",
                               "ListClusterOperations", "ClusterOperationSummaries", Status="InProgress")  # fmt: skip
    if running is None:
        return stopped
    findings = []
    for summary in running:
        what = f"HyperPod {summary['Type']} operation {summary['OperationId']}"
        since = f"in progress since {summary['CreationTime'].astimezone(UTC):%Y-%m-%d %H:%M UTC}"
        try:
            detail = aws.call("sagemaker", "DescribeClusterOperation", ClusterName=name,
                              OperationId=summary["OperationId"])  # fmt: skip
        except STOPPED as error:
            findings.append(unknown(what, "what it changes", stopped_reason(error), key="compute"))
            continue
        kept.keep(f"hyperpod/operations/{summary['OperationId']}", detail)
        changes = [
            f"{step['InstanceGroupName']} {step.get('Original', {}).get('CurrentCount', '?')} -> "
            f"{step.get('Desired', {}).get('TargetCount', '?')} nodes"
            for step in detail.get("ScalingDetails", [])
        ] + [
            f"{check['InstanceGroupName']} {'/'.join(check.get('DeepHealthChecks', []))} on "
            f"{len(check.get('InstanceIds', []))} node(s)"
            for check in detail.get("DeepHealthCheckDetails", [])
        ]
        groups = [step["InstanceGroupName"] for step in (*detail.get("ScalingDetails", []),
                                                          *detail.get("DeepHealthCheckDetails", []))]  # fmt: skip
        key = keys[groups[0]][0] if len(set(groups)) == 1 and groups[0] in keys else "compute"
        findings.append(warning(what, f"{since}" + (f": {'; '.join(changes)}" if changes else ""), key=key))
    return findings


def _kind(
    aws: Aws, name: str, level: str, group: str, same: list[dict[str, Any]], read: int, keys: Keys, kept: Collected
) -> list[Finding]:
    newest = same[0]
    key, capacity = keys.get(group, ("compute", None)) if group else ("compute", None)
    subject = f"HyperPod event on {f'instance group {group}' if group else f'cluster {name}'}"
    nodes = sorted({event["InstanceId"] for event in same if event.get("InstanceId")})
    found = [f"{level} at {newest['EventTime'].astimezone(UTC):%Y-%m-%d %H:%M UTC}: {newest.get('Description', '')}"]
    unread: Finding | None
    try:
        detail = aws.call("sagemaker", "DescribeClusterEvent", ClusterName=name, EventId=newest["EventId"])
    except STOPPED as error:
        detail, unread = {}, unknown(subject, "the event's failure message", stopped_reason(error), key=key)
    else:
        unread = None
        kept.keep(f"hyperpod/events/{newest['EventId']}", detail)
    failure = failure_message(detail.get("EventDetails", {}))
    if failure and failure not in found[0]:
        found.append(failure)
    if len(same) > 1 or nodes:
        shown = ", ".join(nodes[:SHOWN_NODES]) + (", ..." if len(nodes) > SHOWN_NODES else "")
        found.append(f"{len(same)} such event(s) among the newest {read}" + (f"; nodes {shown}" if nodes else ""))
    message = "; ".join(found)
    if BAD_LEVELS[level] == "problem":
        finding = problem(subject, message, key=key, text=failure or newest.get("Description", ""), capacity=capacity)
    else:
        finding = warning(subject, message, key=key)
    return [finding] if unread is None else [finding, unread]
