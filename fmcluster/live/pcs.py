"""An AWS PCS cluster's state: the cluster, each node group with the errors PCS reports, and every node's boot.

PCS shows nothing for a node whose set-up went wrong. A node sets itself up in PCS node lifecycle actions, each running
fmcluster/node/run-step.sh, whose output the PCS agent keeps on the node only (/var/log/amazon/pcs/lifecycle/actions/,
aws-hpc-recipes recipes/pcs-scripts); so run-step.sh also writes a step's one FAILED or WARNING line to the instance's
console, and EC2 keeps the console output (GetConsoleOutput, the last 64 KB). The diagnosis reads the console of every
running node of every group (at a pace under EC2's rate limit, `aws.RATE_LIMITS`, `workers` at a time) and shows
each such line with the console's tail: a FAILED step (a required one: PCS terminates the node, onError TERMINATE) is
a problem, a WARNING (the node runs without what the step gives, e.g. containers) a warning. Each group states how
many consoles it read ("consoles read: 100 of 100"); a console that could not be read is counted and its reason given,
never taken as a good boot. That the console EC2 records is the one run-step.sh writes to on the PCS-Ready DLAMI is
(unconfirmed; run-step.sh's header).
Instances are found by the tag PCS puts on them, `aws:pcs:compute-node-group-id` (unconfirmed: when none is found
the report says so and names the tag). A group with fewer running instances than its minimum is a problem, and so is
an ACTIVE group (or cluster) that reports errorInfo: PCS keeps a group ACTIVE while it fails to launch nodes.
Sources: AWS PCS API reference (GetCluster, ListComputeNodeGroups, GetComputeNodeGroup: status values, errorInfo,
scalingConfiguration); EC2 API reference (DescribeInstances, GetConsoleOutput). fmcluster names the PCS cluster
after the file's `name`, each compute node group after its compute group, the head node's group `login` (with a
login node) or `head` (`fmcluster.config.orchestrators.pcs.head_group`).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.config.orchestrators.pcs import head_group as pcs_head_group
from fmcluster.live.aws import Aws, error_code
from fmcluster.live.findings import Collected, Finding, finding, ok, problem, unknown, warning
from fmcluster.live.runner import STOPPED, Check, stopped_reason

FAILED = ("CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED")
GROUP_TAG = "aws:pcs:compute-node-group-id"
STEP_LINE = re.compile(r"fmcluster (?:step \S+ (?P<failed>FAILED) with exit status \d+|WARNING: step \S+ failed); .*")
"""run-step.sh's `finish` lines (fmcluster/node/run-step.sh), as it writes them to the console."""
TAIL = 15


def pcs_checks(config: ClusterConfig, aws: Aws, kept: Collected, workers: int = 8) -> list[Check]:
    return [Check(f"PCS cluster {config.name}", "compute", lambda: check_pcs(config, aws, kept, workers))]


def group_keys(config: ClusterConfig) -> dict[str, tuple[str, str | None]]:
    """PCS node group name -> (cluster-file key, capacity type) of what made it."""
    keys: dict[str, tuple[str, str | None]] = {
        group.name: (f"compute[{index}]", group.capacity) for index, group in enumerate(config.compute)
    }
    head = pcs_head_group(config.orchestrator, config.observability)
    if head is not None:
        keys[head[1]] = (head[0], None)
    return keys


def check_pcs(config: ClusterConfig, aws: Aws, kept: Collected, workers: int = 8) -> list[Finding]:
    subject = f"PCS cluster {config.name}"
    try:
        cluster = aws.call("pcs", "GetCluster", clusterIdentifier=config.name)["cluster"]
    except ClientError as error:
        if error_code(error) != "ResourceNotFoundException":
            raise
        return [warning(subject, "not found (the cluster stack has not created it)")]
    kept.keep("pcs/cluster", cluster)
    findings = [_state(subject, cluster, "orchestrator", None)]
    keys = group_keys(config)
    for summary in aws.pages("pcs", "ListComputeNodeGroups", "computeNodeGroups", clusterIdentifier=config.name):
        name = summary["name"]
        key, capacity = keys.get(name, ("", None))
        try:
            group = aws.call(
                "pcs", "GetComputeNodeGroup", clusterIdentifier=config.name, computeNodeGroupIdentifier=summary["id"]
            )["computeNodeGroup"]
        except STOPPED as error:
            findings.append(unknown(f"PCS node group {name}", "its state", stopped_reason(error), key=key))
            continue
        kept.keep(f"pcs/node-groups/{name}", group)
        findings.append(_state(f"PCS node group {name}", group, key, capacity))
        if group.get("status") == "ACTIVE":
            findings += node_boots(aws, group, key, kept, workers)
    return findings


def node_boots(aws: Aws, group: dict, key: str, kept: Collected, workers: int = 8) -> list[Finding]:
    """A group short of its minimum, each node step that failed or warned (console output), and how many were read."""
    subject = f"PCS node group {group['name']}"
    try:
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
    except STOPPED as error:
        return [unknown(subject, "its instances and their boots", stopped_reason(error), key=key)]
    minimum = group.get("scalingConfiguration", {}).get("minInstanceCount", 0)
    findings = []
    if len(instances) < minimum:
        found = f"{len(instances)} of its {minimum} static instances are running"
        if not instances:
            found += f" (none found by tag {GROUP_TAG}={group['id']})"
        findings.append(problem(subject, found + "; PCS replaces nodes that fail to launch or register", key=key))
    ids = sorted(instance["InstanceId"] for instance in instances)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        consoles = list(pool.map(lambda instance: _console(aws, instance), ids))
    unread: dict[str, int] = {}
    failed = warned = 0
    for instance, (lines, reason) in zip(ids, consoles, strict=True):
        if reason:
            unread[reason] = unread.get(reason, 0) + 1
            continue
        kept.keep(f"pcs/console/{group['name']}/{instance}", lines[-200:])
        steps = [m for line in lines if (m := STEP_LINE.search(line))]
        failed += any(m["failed"] for m in steps)
        warned += any(not m["failed"] for m in steps)
        node = f"PCS node {instance} ({group['name']})"
        for m in steps:
            if m["failed"]:  # with the cause found in the console's tail, where there is one
                findings.append(problem(node, f"{m[0]} (console output)", key=key, text=m[0],
                                        details=tuple(lines[-TAIL:])))  # fmt: skip
            else:
                findings.append(replace(warning(node, f"{m[0]} (console output)", key=key),
                                        details=tuple(lines[-TAIL:])))  # fmt: skip
    read = len(ids) - sum(unread.values())
    if unread:
        reasons = "; ".join(f"{count} {reason}" for reason, count in unread.items())
        findings.append(unknown(subject, f"boots: consoles read {read} of {len(ids)}", reasons, key=key))
    elif ids:
        findings.append(finding("ok" if not failed + warned else "warning", subject,
                                f"consoles read: {read} of {len(ids)} ({failed} with a failed step, {warned} with a "
                                "warning)"))  # fmt: skip
    return findings


def _console(aws: Aws, instance: str) -> tuple[list[str], str]:
    """(console lines, "") or ([], why it was not read)."""
    try:
        # botocore decodes the API's base64 Output itself (its decode_console_output handler).
        output = aws.call("ec2", "GetConsoleOutput", InstanceId=instance, Latest=True).get("Output")
    except STOPPED as error:
        return [], f"not read: {stopped_reason(error)}"
    if not output:
        return [], "returned an empty console (nothing written to it yet)"
    return output.splitlines(), ""


def _state(subject: str, resource: dict, key: str, capacity: str | None) -> Finding:
    status = resource.get("status", "")
    errors = "; ".join(f"{e.get('code', '')}: {e.get('message', '')}" for e in resource.get("errorInfo", []))
    if status in FAILED:
        return problem(subject, f"{status}: {errors or 'PCS gave no reason'}", key=key, text=errors, capacity=capacity)
    if status == "ACTIVE" and errors:
        return problem(subject, f"ACTIVE but PCS reports errors: {errors}", key=key, text=errors, capacity=capacity)
    if status == "ACTIVE":
        return ok(subject, "ACTIVE")
    return warning(subject, status + (f": {errors}" if errors else ""))
