"""The cluster-file rules that AWS's own models decide (see service_models): every name and instance type that
reaches AWS PCS or SageMaker HyperPod, whether typed by the user or derived by fmcluster, and whether the region
offers the services the file asks for.

`api_values` lists what the cluster stacks send, so the constructs and this rule cannot drift apart:
tests/gates/test_service_truth.py walks every synthesized example's PCS and SageMaker resources against the same
shapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fmcluster.config.checks import api_name_problem, hyperpod_instance_type_problem
from fmcluster.config.errors import Problem
from fmcluster.config.models import LOGIN_GROUP, ComputeGroup, Observability, Orchestrator, pcs_head_group
from fmcluster.config.service_models import instance_type_problem, region_problem

HYPERPOD_CONTROLLER_GROUP = "controller"


@dataclass(frozen=True)
class ApiValue:
    """One name that reaches an AWS API: where it comes from in the cluster file, and the shape that judges it."""

    path: str
    service: str
    shape: str
    value: str

    def problem(self) -> str | None:
        """'AWS PCS takes 3-25 characters ...' when the value breaks its shape, else None."""
        return api_name_problem(self.service, self.shape, self.value)


def first_per_path(problems: Iterator[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """(path, message) pairs, keeping the first message of each path (a name often reaches several shapes)."""
    seen: set[str] = set()
    for path, message in problems:
        if path not in seen:
            seen.add(path)
            yield path, message


def api_values(
    name: str | None,
    orchestrator: Orchestrator,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[ApiValue]:
    """Every name the cluster stack sends to the orchestrator's API, with its key path."""
    if orchestrator.type == "pcs":
        if name is not None:
            yield ApiValue("name", "pcs", "ClusterName", name)
        for index, group in groups:
            for shape in ("ComputeNodeGroupName", "QueueName"):
                yield ApiValue(f"compute[{index}].name", "pcs", shape, group.name)
        head = pcs_head_group(orchestrator, observability)
        if head is not None:
            yield ApiValue(head[0], "pcs", "ComputeNodeGroupName", head[1])
        return
    if name is not None:
        yield ApiValue("name", "sagemaker", "ClusterName", name)
    controller_type = orchestrator.controller_instance_type
    controller = [("orchestrator.controller_instance_type", HYPERPOD_CONTROLLER_GROUP, controller_type)]
    login = (
        [("orchestrator.login_instance_type", LOGIN_GROUP, orchestrator.login_instance_type)]
        if orchestrator.login_instance_type
        else []
    )
    for path, group_name, _ in controller + login:
        yield ApiValue(path, "sagemaker", "ClusterInstanceGroupName", group_name)
    for index, group in groups:
        yield ApiValue(f"compute[{index}].name", "sagemaker", "ClusterInstanceGroupName", group.name)
        yield ApiValue(f"compute[{index}].name", "sagemaker", "ClusterPartitionName", group.name)


def instance_types(
    orchestrator: Orchestrator,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[tuple[str, str]]:
    """(key path, EC2 type) of every instance type the cluster stack asks for: HyperPod's controller, login and
    compute groups, or PCS's compute groups and head node (each in a launch template)."""
    if orchestrator.type == "pcs":
        for index, group in groups:
            yield f"compute[{index}].instance_type", group.instance_type
        head = pcs_head_group(orchestrator, observability)
        if head is not None:
            yield head[0], head[2]
        return
    yield "orchestrator.controller_instance_type", orchestrator.controller_instance_type
    if orchestrator.login_instance_type:
        yield "orchestrator.login_instance_type", orchestrator.login_instance_type
    for index, group in groups:
        yield f"compute[{index}].instance_type", group.instance_type


def services_in_region(orchestrator: Orchestrator, observability: Observability | None) -> Iterator[tuple[str, str]]:
    """(key path, CloudFormation type) of each regional service the file asks for."""
    yield "orchestrator.type", "AWS::PCS::Cluster" if orchestrator.type == "pcs" else "AWS::SageMaker::Cluster"
    yield "storage.lustre", "AWS::FSx::FileSystem"
    if observability is not None and observability.prometheus == "managed":
        yield "observability.prometheus", "AWS::APS::Workspace"
    if observability is not None and observability.grafana == "managed":
        yield "observability.grafana", "AWS::Grafana::Workspace"


def service_problems(
    name: str | None,
    region: str | None,
    orchestrator: Orchestrator | None,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[Problem]:
    """Every problem AWS's models find with the file: names, instance types, regional services."""
    if orchestrator is None:
        return
    values = ((value.path, value.problem()) for value in api_values(name, orchestrator, groups, observability))
    found = [(path, message) for path, message in values if message is not None]
    if region is not None:
        found += [
            (path, message)
            for path, resource_type in services_in_region(orchestrator, observability)
            if (message := region_problem(region, resource_type))
        ]
    offered = region if not any(path == "orchestrator.type" for path, _ in found) else None
    for path, instance_type in instance_types(orchestrator, groups, observability):
        if orchestrator.type == "hyperpod-slurm":
            message = hyperpod_instance_type_problem(instance_type, offered)
        else:
            message = instance_type_problem("ec2", offered, instance_type) if offered else None
        if message is not None:
            found.append((path, message))
    for path, message in first_per_path(iter(found)):
        yield Problem(path, message)
