"""An AWS PCS cluster's state: the cluster, each node group with the errors PCS reports, and its nodes' boot.

PCS shows nothing for a node that boots but never joins Slurm. fmcluster's user data runs bootstrap.sh, whose log
lines also go to stderr, which cloud-init copies to the instance's console; EC2 keeps the console output
(GetConsoleOutput, the last 64 KB). So for every running node the diagnosis reads the console and, where
bootstrap.sh ended with `bootstrap finished with failures: <steps>`, shows that line and the tail. Instances are
found by the tag PCS puts on them, `aws:pcs:compute-node-group-id` (unconfirmed: when none is found the report
says so and names the tag). A group with fewer running instances than its minimum is a problem too.
Sources: AWS PCS API reference (GetCluster, ListComputeNodeGroups, GetComputeNodeGroup: status values, errorInfo,
scalingConfiguration); EC2 API reference (DescribeInstances, GetConsoleOutput). fmcluster names the PCS cluster
after the file's `name`, each compute node group after its compute group, the head group `login` or
`fmcluster_head`.
"""

from __future__ import annotations

import re

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws, error_code
from fmcluster.live.findings import Collected, Finding, problem
from fmcluster.live.runner import Check

FAILED = ("CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED")
GROUP_TAG = "aws:pcs:compute-node-group-id"
BOOTSTRAP_FAILED = re.compile(r"bootstrap finished with failures: .*")
CONSOLES = 8
"""Consoles read per node group: enough to see a pattern, few enough to stay quick on a 100-node group."""
TAIL = 15


def pcs_checks(config: ClusterConfig, aws: Aws, kept: Collected) -> list[Check]:
    if config.orchestrator.type != "pcs":
        return []
    return [Check(f"PCS cluster {config.name}", "compute", lambda: check_pcs(config, aws, kept))]


def check_pcs(config: ClusterConfig, aws: Aws, kept: Collected) -> list[Finding]:
    subject = f"PCS cluster {config.name}"
    try:
        cluster = aws.call("pcs", "GetCluster", clusterIdentifier=config.name)["cluster"]
    except ClientError as error:
        if error_code(error) != "ResourceNotFoundException":
            raise
        return [Finding("warning", subject, "not found (the cluster stack has not created it)")]
    kept.keep("pcs/cluster", cluster)
    findings = [_state(subject, cluster, "orchestrator")]
    keys = {group.name: f"compute[{index}]" for index, group in enumerate(config.compute)}
    keys.update(login="orchestrator.login_instance_type", fmcluster_head="observability")
    for summary in aws.pages("pcs", "ListComputeNodeGroups", "computeNodeGroups", clusterIdentifier=config.name):
        group = aws.call(
            "pcs", "GetComputeNodeGroup", clusterIdentifier=config.name, computeNodeGroupIdentifier=summary["id"]
        )["computeNodeGroup"]
        kept.keep(f"pcs/node-groups/{summary['name']}", group)
        key = keys.get(summary["name"], "")
        findings.append(_state(f"PCS node group {summary['name']}", group, key))
        if group.get("status") == "ACTIVE":
            findings += node_boots(aws, group, key, kept)
    return findings


def node_boots(aws: Aws, group: dict, key: str, kept: Collected) -> list[Finding]:
    """A group short of its minimum, and each node whose bootstrap failed (console output)."""
    instances = [
        instance
        for reservation in aws.pages(
            "ec2",
            "DescribeInstances",
            "Reservations",
            Filters=[
                {"Name": f"tag:{GROUP_TAG}", "Values": [group["id"]]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ],
        )
        for instance in reservation.get("Instances", [])
    ]
    subject = f"PCS node group {group['name']}"
    minimum = group.get("scalingConfiguration", {}).get("minInstanceCount", 0)
    findings = []
    if len(instances) < minimum:
        found = f"{len(instances)} of its {minimum} static instances are running"
        if not instances:
            found += f" (none found by tag {GROUP_TAG}={group['id']})"
        findings.append(problem(subject, found + "; PCS replaces nodes that fail to launch or register", key=key))
    for instance in sorted(instances, key=lambda i: i["InstanceId"])[:CONSOLES]:
        # botocore decodes the API's base64 Output itself (its decode_console_output handler).
        output = aws.call("ec2", "GetConsoleOutput", InstanceId=instance["InstanceId"], Latest=True).get("Output")
        lines = output.splitlines() if output else []
        kept.keep(f"pcs/console/{group['name']}/{instance['InstanceId']}", lines[-200:])
        failure = next((m[0] for line in reversed(lines) if (m := BOOTSTRAP_FAILED.search(line))), "")
        if failure:
            findings.append(
                problem(
                    f"PCS node {instance['InstanceId']} ({group['name']})",
                    f"{failure}: the node may never have joined Slurm (console output; on the node: "
                    "/var/log/fmcluster/bootstrap.log)",
                    key=key,
                    details=tuple(lines[-TAIL:]),
                )
            )
    return findings


def _state(subject: str, resource: dict, key: str) -> Finding:
    status = resource.get("status", "")
    errors = "; ".join(f"{e.get('code', '')}: {e.get('message', '')}" for e in resource.get("errorInfo", []))
    if status in FAILED:
        return problem(subject, f"{status}: {errors or 'PCS gave no reason'}", key=key, text=errors)
    if status == "ACTIVE":
        return Finding("ok", subject, "ACTIVE" + (f" (last errors: {errors})" if errors else ""))
    return Finding("warning", subject, status + (f": {errors}" if errors else ""))
