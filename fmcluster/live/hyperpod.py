"""A HyperPod cluster's state: the cluster, every node, and for a failed node the tail of its lifecycle log.

HyperPod writes each node's lifecycle-script output to CloudWatch Logs, group
`/aws/sagemaker/Clusters/<cluster name>/<cluster id>`, stream `LifecycleConfig/<instance group>/<instance id>`
(SageMaker HyperPod developer guide, "Amazon CloudWatch Logs for HyperPod"; the id is the last part of the
cluster ARN). fmcluster's on_create.sh ends a failed run with one line, `fmcluster lifecycle FAILED at <steps>:
<reason> (log: /var/log/fmcluster/lifecycle.log)`, which the diagnosis shows first.
Sources: SageMaker API reference (DescribeCluster ClusterStatus, ListClusterNodes InstanceStatus).
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws, error_code
from fmcluster.live.findings import Collected, Finding, problem
from fmcluster.live.runner import Check

TAIL = 40
FAILED_LINE = re.compile(r"fmcluster lifecycle FAILED at .*")
BAD_NODE = ("Failure", "NotFound")


def hyperpod_checks(config: ClusterConfig, aws: Aws, kept: Collected) -> list[Check]:
    if config.orchestrator.type != "hyperpod-slurm":
        return []
    return [Check(f"HyperPod cluster {config.name}", "compute", lambda: check_cluster(config, aws, kept))]


def log_group(cluster_arn: str, name: str) -> str:
    return f"/aws/sagemaker/Clusters/{name}/{cluster_arn.rsplit('/', 1)[-1]}"


def check_cluster(config: ClusterConfig, aws: Aws, kept: Collected) -> list[Finding]:
    name = config.name
    subject = f"HyperPod cluster {name}"
    try:
        cluster = aws.call("sagemaker", "DescribeCluster", ClusterName=name)
    except ClientError as error:
        if error_code(error) != "ResourceNotFound":
            raise
        return [Finding("warning", subject, "not found (the cluster stack has not created it)")]
    kept.keep("hyperpod/cluster", cluster)
    status = cluster.get("ClusterStatus", "")
    findings = []
    groups = ", ".join(
        f"{g['InstanceGroupName']} {g.get('CurrentCount', 0)}/{g.get('TargetCount', 0)}"
        for g in cluster.get("InstanceGroups", [])
    )
    if status == "InService":
        findings.append(Finding("ok", subject, f"InService; nodes {groups}"))
    elif status == "Failed" or status == "RollingBack":
        failure = cluster.get("FailureMessage", "")
        findings.append(problem(subject, f"{status}: {failure}", key="compute", text=failure))
    else:
        findings.append(Finding("warning", subject, f"{status}; nodes {groups}"))
    nodes = list(aws.pages("sagemaker", "ListClusterNodes", "ClusterNodeSummaries", ClusterName=name))
    kept.keep("hyperpod/nodes", nodes)
    group_keys = {group.name: f"compute[{index}]" for index, group in enumerate(config.compute)}
    group_keys.update(controller="orchestrator.controller_instance_type", login="orchestrator.login_instance_type")
    for node in nodes:
        state = node.get("InstanceStatus", {})
        if state.get("Status") not in BAD_NODE:
            continue
        findings.append(failed_node(aws, cluster, node, group_keys.get(node["InstanceGroupName"], ""), kept))
    return findings


def failed_node(aws: Aws, cluster: dict[str, Any], node: dict[str, Any], key: str, kept: Collected) -> Finding:
    group, instance = node["InstanceGroupName"], node["InstanceId"]
    state = node.get("InstanceStatus", {})
    group_name = log_group(cluster["ClusterArn"], cluster["ClusterName"])
    stream = f"LifecycleConfig/{group}/{instance}"
    try:
        events = aws.call(
            "logs", "GetLogEvents", logGroupName=group_name, logStreamName=stream, limit=TAIL, startFromHead=False
        ).get("events", [])
        lines = [event["message"].rstrip() for event in events]
    except ClientError as error:
        if error_code(error) != "ResourceNotFoundException":
            raise
        lines = [f"(no lifecycle log: {group_name} {stream} does not exist; the node failed before its scripts ran)"]
    kept.keep(f"hyperpod/lifecycle/{group}/{instance}", lines)
    step = next((match[0] for line in reversed(lines) if (match := FAILED_LINE.search(line))), "")
    message = f"{state.get('Status')}: {state.get('Message', '')}".rstrip(": ")
    if step:
        message += f"; {step}"
    where = f"log: {group_name} stream {stream}"
    return problem(
        f"HyperPod node {instance} ({group})",
        f"{message} ({where})",
        key=key,
        text=state.get("Message", ""),
        details=tuple(lines[-15:]),
    )
