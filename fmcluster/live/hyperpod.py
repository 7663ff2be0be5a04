"""A HyperPod cluster's state: the cluster, every node, and for a failed node the tail of its lifecycle log.

HyperPod writes each node's lifecycle-script output to CloudWatch Logs, group
`/aws/sagemaker/Clusters/<cluster name>/<cluster id>`, stream `LifecycleConfig/<instance group>/<instance id>`
(SageMaker HyperPod developer guide, "Amazon CloudWatch Logs for HyperPod"; the id is the last part of the
cluster ARN). fmcluster's on_create.sh ends a failed run with one line, `fmcluster lifecycle FAILED at <steps>:
<reason> (log: /var/log/fmcluster/lifecycle.log)`, which the diagnosis shows first. A cluster InService with an
instance group below its target count is a problem (HyperPod keeps the cluster InService while nodes fail); nodes are
listed across every page (ListClusterNodes' paginator), and each failed node's log is read on its own, so one that
cannot be read leaves the others' and says why. A cluster in NodeProvisioningMode Continuous also has HyperPod's own
events, with the failure messages only they carry (`fmcluster.live.hyperpod_events`).
Sources: SageMaker API reference (DescribeCluster ClusterStatus, InstanceGroups CurrentCount/TargetCount,
ListClusterNodes InstanceStatus).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws, sagemaker_not_found
from fmcluster.live.findings import Collected, Finding, ok, problem, unknown, warning
from fmcluster.live.hyperpod_events import cluster_events, operations
from fmcluster.live.logs import log_tail
from fmcluster.live.runner import STOPPED, Check, stopped_reason

TAIL = 40
FAILED_LINE = re.compile(r"fmcluster lifecycle FAILED at .*")
BAD_NODE = ("Failure", "NotFound")


def hyperpod_checks(config: ClusterConfig, aws: Aws, kept: Collected, workers: int = 8) -> list[Check]:
    return [Check(f"HyperPod cluster {config.name}", "compute", lambda: check_cluster(config, aws, kept, workers))]


def log_group(cluster_arn: str, name: str) -> str:
    return f"/aws/sagemaker/Clusters/{name}/{cluster_arn.rsplit('/', 1)[-1]}"


def group_keys(config: ClusterConfig) -> dict[str, tuple[str, str | None]]:
    """HyperPod instance group name -> (cluster-file key, capacity type) of what made it."""
    keys: dict[str, tuple[str, str | None]] = {
        group.name: (f"compute[{index}]", group.capacity) for index, group in enumerate(config.compute)
    }
    keys.update(controller=("orchestrator.controller_instance_type", None),
                login=("orchestrator.login_instance_type", None))  # fmt: skip
    return keys


def check_cluster(config: ClusterConfig, aws: Aws, kept: Collected, workers: int = 8) -> list[Finding]:
    name = config.name
    subject = f"HyperPod cluster {name}"
    try:
        cluster = aws.call("sagemaker", "DescribeCluster", ClusterName=name)
    except ClientError as error:
        if not sagemaker_not_found(error):
            raise
        return [warning(subject, "not found (the cluster stack has not created it)")]
    kept.keep("hyperpod/cluster", cluster)
    status = cluster.get("ClusterStatus", "")
    keys = group_keys(config)
    capacities = {group.capacity for group in config.compute}
    capacity = capacities.pop() if len(capacities) == 1 else None
    groups = cluster.get("InstanceGroups", [])
    shown = ", ".join(f"{g['InstanceGroupName']} {g.get('CurrentCount', 0)}/{g.get('TargetCount', 0)}" for g in groups)
    short = [g for g in groups if g.get("CurrentCount", 0) < g.get("TargetCount", 0)]
    findings = []
    if status in ("Failed", "RollingBack"):
        failure = cluster.get("FailureMessage", "")
        findings.append(problem(subject, f"{status}: {failure}", key="compute", text=failure, capacity=capacity))
    elif status == "InService" and short:
        for group in short:
            key, group_capacity = keys.get(group["InstanceGroupName"], ("compute", None))
            findings.append(
                problem(
                    f"HyperPod instance group {group['InstanceGroupName']}",
                    f"InService, but {group.get('CurrentCount', 0)} of its {group.get('TargetCount', 0)} nodes are "
                    f"running; HyperPod replaces nodes that fail (nodes {shown})",
                    key=key,
                    capacity=group_capacity,
                )
            )
    elif status == "InService":
        findings.append(ok(subject, f"InService; nodes {shown}"))
    else:
        findings.append(warning(subject, f"{status}; nodes {shown}"))
    findings += cluster_events(aws, cluster, keys, kept) + operations(aws, cluster, keys, kept)
    try:
        nodes = list(aws.pages("sagemaker", "ListClusterNodes", "ClusterNodeSummaries", ClusterName=name))
    except STOPPED as error:
        return [*findings, unknown(f"HyperPod nodes of {name}", "their states", stopped_reason(error), key="compute")]
    kept.keep("hyperpod/nodes", nodes)
    failed = [node for node in nodes if node.get("InstanceStatus", {}).get("Status") in BAD_NODE]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for found in pool.map(lambda node: failed_node(aws, cluster, node, keys, kept), failed):
            findings += found
    return findings


def failed_node(
    aws: Aws, cluster: dict[str, Any], node: dict[str, Any], keys: dict[str, tuple[str, str | None]], kept: Collected
) -> list[Finding]:
    """The failed node (its status is the failure record), with its lifecycle log's tail, or why it was not read."""
    group, instance = node["InstanceGroupName"], node["InstanceId"]
    key, capacity = keys.get(group, ("", None))
    state = node.get("InstanceStatus", {})
    group_name = log_group(cluster["ClusterArn"], cluster["ClusterName"])
    stream = f"LifecycleConfig/{group}/{instance}"
    subject = f"HyperPod node {instance} ({group})"
    message = f"{state.get('Status')}: {state.get('Message', '')}".rstrip(": ")
    where = f"log: {group_name} stream {stream}"
    try:
        lines = log_tail(aws, group_name, stream, TAIL)
    except STOPPED as error:
        # The node failed either way: its own status is the record; only the log is unknown.
        return [
            problem(subject, f"{message} ({where})", key=key, text=state.get("Message", ""), capacity=capacity),
            unknown(subject, "its lifecycle log", stopped_reason(error), key=key),
        ]
    if lines is None:
        lines = [f"(no lifecycle log: {group_name} {stream} does not exist; the node failed before its scripts ran)"]
    kept.keep(f"hyperpod/lifecycle/{group}/{instance}", lines)
    step = next((match[0] for line in reversed(lines) if (match := FAILED_LINE.search(line))), "")
    if step:
        message += f"; {step}"
    return [
        problem(
            subject,
            f"{message} ({where})",
            key=key,
            text=state.get("Message", "") or step,
            details=tuple(lines[-15:]),
            capacity=capacity,
        )
    ]
