"""Which node a session goes to, and its Session Manager target: the head node by default, or a named group or node.

- SageMaker HyperPod: a node is reached as `sagemaker-cluster:<cluster-id>_<instance-group-name>-<instance-id>`,
  the cluster id being the last part of the cluster ARN (SageMaker developer guide, "Accessing your SageMaker HyperPod
  cluster nodes"); the nodes and their groups come from ListClusterNodes. CloudFormation does not know the nodes, so
  the controller's instance id is looked up here, not read from a stack output.
- AWS PCS: a node is an EC2 instance, its target the instance id. PCS tags each instance of a node group
  `aws:pcs:compute-node-group-id=<node group id>` (AWS PCS user guide, "Finding compute node group instances"), so
  DescribeInstances by that tag finds the login (head) node from the stack output HeadNodeGroupId, or any group by
  the id GetComputeNodeGroup gives for its name.
Sources for the response fields: botocore's sagemaker (ListClusterNodes, ClusterNodeSummary), pcs (GetComputeNodeGroup)
and ec2 (DescribeInstances) models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws, error_code

if TYPE_CHECKING:
    from fmcluster.live.info import StackOutputs

PCS_GROUP_TAG = "aws:pcs:compute-node-group-id"
RUNNING = "Running"
"""A HyperPod node that takes sessions (botocore sagemaker ClusterInstanceStatus)."""


class NodeNotFound(Exception):
    """No node to open a session to; the message says which and why, in one line."""


@dataclass(frozen=True)
class Node:
    group: str
    instance_id: str
    target: str
    """The Session Manager target (`aws ssm start-session --target ...`)."""
    found_by: str
    """How it was found, for the report (the API call and filter)."""


def hyperpod_target(cluster_id: str, group: str, instance_id: str) -> str:
    """>>> hyperpod_target("aa11bbbbb222", "controller", "i-111222333444555aa")
    'sagemaker-cluster:aa11bbbbb222_controller-i-111222333444555aa'
    """
    return f"sagemaker-cluster:{cluster_id}_{group}-{instance_id}"


def hyperpod_node(config: ClusterConfig, aws: Aws, cluster_id: str, *, group: str, node: str | None = None) -> Node:
    """The node `node` (an instance id) of the HyperPod cluster, or the first running node of `group`."""
    nodes = list(aws.pages("sagemaker", "ListClusterNodes", "ClusterNodeSummaries", ClusterName=config.name))
    if node is not None:
        found = [item for item in nodes if item["InstanceId"] == node]
        if not found:
            raise NodeNotFound(f"HyperPod cluster {config.name} has no node {node} (ListClusterNodes)")
    else:
        found = [item for item in nodes if item["InstanceGroupName"] == group]
        if not found:
            groups = ", ".join(sorted({item["InstanceGroupName"] for item in nodes})) or "none"
            raise NodeNotFound(f"HyperPod cluster {config.name} has no node in group {group} (groups: {groups})")
    running = [item for item in found if item.get("InstanceStatus", {}).get("Status") == RUNNING]
    if not running:
        states = ", ".join(f"{item['InstanceId']} {item.get('InstanceStatus', {}).get('Status')}" for item in found)
        raise NodeNotFound(f"no running node to connect to in {group if node is None else node}: {states}")
    chosen = sorted(running, key=lambda item: item["InstanceId"])[0]
    return Node(
        chosen["InstanceGroupName"],
        chosen["InstanceId"],
        hyperpod_target(cluster_id, chosen["InstanceGroupName"], chosen["InstanceId"]),
        f"sagemaker ListClusterNodes ClusterName={config.name}",
    )


def hyperpod_session_node(
    config: ClusterConfig, aws: Aws, stack: StackOutputs, *, group: str | None = None, node: str | None = None
) -> Node:
    """The node a session goes to on HyperPod (the seam's SESSION_NODE): `node` (an instance id), else the first running
    node of `group`, else of the head node group the cluster `stack` names."""
    chosen = group or stack.outputs.get("HeadNodeGroup")
    if chosen is None and node is None:
        raise NodeNotFound(f"stack {stack.name} names no head node group (deployed by an older fmcluster?): "
                           "pass --group or --node")  # fmt: skip
    return hyperpod_node(config, aws, stack.outputs.get("ClusterId", ""), group=chosen or "", node=node)


def pcs_session_node(
    config: ClusterConfig, aws: Aws, stack: StackOutputs, *, group: str | None = None, node: str | None = None
) -> Node:
    """The node a session goes to on AWS PCS (the seam's SESSION_NODE): `node` (an instance id), else the first running
    instance of `group`, else of the login or head node group the cluster `stack` names."""
    if node is not None:
        return pcs_node(aws, group=group or "", node=node)
    if group is not None:
        return pcs_node(aws, group=group, group_id=pcs_group_id(config, aws, group))
    head = stack.outputs.get("HeadNodeGroup")
    if head is None:
        raise NodeNotFound("this PCS cluster has no login or head node: pass --group GROUP (a compute group) or --node")
    return pcs_node(aws, group=head, group_id=stack.outputs.get("HeadNodeGroupId"))


def pcs_group_id(config: ClusterConfig, aws: Aws, group: str) -> str:
    """The id of the PCS node group named `group` (GetComputeNodeGroup takes a name or an id)."""
    try:
        response = aws.call(
            "pcs", "GetComputeNodeGroup", clusterIdentifier=config.name, computeNodeGroupIdentifier=group
        )
    except ClientError as error:
        if error_code(error) != "ResourceNotFoundException":
            raise
        raise NodeNotFound(f"PCS cluster {config.name} has no node group {group}") from None
    return response["computeNodeGroup"]["id"]


def pcs_node(aws: Aws, *, group: str, group_id: str | None = None, node: str | None = None) -> Node:
    """The running instance `node`, or the first running instance of the node group `group_id` (by PCS's tag)."""
    filters = [{"Name": "instance-state-name", "Values": ["running"]}]
    if node is not None:
        parameters: dict = {"InstanceIds": [node], "Filters": filters}
        found_by = f"ec2 DescribeInstances InstanceIds={node}"
    else:
        assert group_id is not None  # the caller gives a node or its group
        filters.append({"Name": f"tag:{PCS_GROUP_TAG}", "Values": [group_id]})
        parameters = {"Filters": filters}
        found_by = f"ec2 DescribeInstances tag:{PCS_GROUP_TAG}={group_id}"
    try:
        instances = [
            instance
            for reservation in aws.pages("ec2", "DescribeInstances", "Reservations", **parameters)
            for instance in reservation.get("Instances", [])
        ]
    except ClientError as error:
        if error_code(error) != "InvalidInstanceID.NotFound":
            raise
        instances = []
    if not instances:
        what = f"instance {node}" if node is not None else f"instance of node group {group} ({group_id})"
        raise NodeNotFound(f"no running {what} (found by {found_by})")
    chosen = sorted(instances, key=lambda instance: instance["InstanceId"])[0]
    tags = {tag["Key"]: tag["Value"] for tag in chosen.get("Tags", [])}
    return Node(tags.get(PCS_GROUP_TAG, group) if node is not None else group, chosen["InstanceId"],
                chosen["InstanceId"], found_by)  # fmt: skip
