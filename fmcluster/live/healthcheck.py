"""`fmcluster healthcheck FILE`: run the orchestrator's own deep health checks on a deployed cluster, report per node.

HyperPod: SageMaker StartClusterHealthCheck (botocore sagemaker: ClusterName, DeepHealthCheckConfigurations of
InstanceGroupName, optional InstanceIds, DeepHealthChecks InstanceStress | InstanceConnectivity; "The unhealthy nodes
will be automatically rebooted or replaced"), one configuration per group asked for, then ListClusterNodes for each
node's InstanceStatus (DeepHealthCheckInProgress while the checks run; botocore ClusterInstanceStatus). The checks run
asynchronously: `--status` lists the nodes again without starting anything.
AWS PCS: no operation of botocore's pcs model starts a health check (instance health checks are node-group settings,
`compute[].health_checks`), so `healthcheck` says so in one line and exits 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.config.value_rules import possible_deep_health_checks
from fmcluster.live.aws import Aws

CHECKS = ("InstanceStress", "InstanceConnectivity")
"""botocore sagemaker DeepHealthCheckType."""


class HealthCheckError(Exception):
    """What stops `healthcheck`, in one line."""


@dataclass
class NodeStatus:
    group: str
    instance_id: str
    status: str
    message: str = ""

    def line(self) -> str:
        return f"{self.group} {self.instance_id} {self.status}" + (f": {self.message}" if self.message else "")


def checks_for(config: ClusterConfig, group_name: str, asked: tuple[str, ...]) -> list[str]:
    """The checks to run on group `group_name`: those asked for, else every check the group can take."""
    group = next(g for g in config.compute if g.name == group_name)
    possible = possible_deep_health_checks(group.instance.is_accelerated, group.efa, group.count)
    if not asked:
        if not possible:
            raise HealthCheckError(f"group {group_name} can take no deep health check ({group.instance_type})")
        return list(possible)
    refused = [check for check in asked if check not in possible]
    if refused:
        raise HealthCheckError(
            f"group {group_name} cannot take {', '.join(refused)} (it can take {', '.join(possible) or 'none'}: "
            "InstanceConnectivity needs 2 or more nodes with EFA)"
        )
    return list(asked)


def healthcheck(
    config: ClusterConfig, aws: Aws, *, groups: tuple[str, ...] = (), checks: tuple[str, ...] = (), start: bool = True
) -> list[NodeStatus]:
    """Start the deep health checks on `groups` (default: every compute group) and return each of their nodes' state."""
    if (unavailable := orchestrators.of(config.orchestrator.type).NO_HEALTH_CHECKS) is not None:
        raise HealthCheckError(unavailable)
    names = [group.name for group in config.compute]
    unknown = [name for name in groups if name not in names]
    if unknown:
        raise HealthCheckError(f"no compute group {', '.join(unknown)} in the file (groups: {', '.join(names)})")
    chosen = list(groups) or names
    if start:
        configurations = [
            {"InstanceGroupName": name, "DeepHealthChecks": checks_for(config, name, checks)} for name in chosen
        ]
        aws.call(
            "sagemaker",
            "StartClusterHealthCheck",
            ClusterName=config.name,
            DeepHealthCheckConfigurations=configurations,
        )
    nodes = aws.pages("sagemaker", "ListClusterNodes", "ClusterNodeSummaries", ClusterName=config.name)
    return sorted(
        (
            NodeStatus(
                node["InstanceGroupName"],
                node["InstanceId"],
                node.get("InstanceStatus", {}).get("Status", ""),
                node.get("InstanceStatus", {}).get("Message", ""),
            )
            for node in nodes
            if node["InstanceGroupName"] in chosen
        ),
        key=lambda node: (node.group, node.instance_id),
    )
