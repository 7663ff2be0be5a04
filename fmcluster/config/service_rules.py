"""The cluster-file rules that AWS's own models decide (see service_models): every name and instance type that
reaches AWS PCS or SageMaker HyperPod, whether typed by the user or derived by fmcluster, and whether the region
offers the services the file asks for.

`api_values` lists what the cluster stacks send, so the constructs and this rule cannot drift apart:
tests/gates/test_service_truth.py walks every synthesized example's PCS and SageMaker resources against the same
shapes.
"""

from __future__ import annotations

from collections.abc import Iterator

from fmcluster.config.errors import Problem
from fmcluster.config.models import LOGIN_GROUP, ComputeGroup, Observability, Orchestrator, pcs_head_group
from fmcluster.config.service_models import (
    ApiValue,
    first_per_path,
    instance_type_problem,
    region_problem,
)

HYPERPOD_CONTROLLER_GROUP = "controller"


def hyperpod_type(instance_type: str) -> str:
    """HyperPod's name of an EC2 instance type: 'p5.48xlarge' -> 'ml.p5.48xlarge'."""
    return f"ml.{instance_type}"


def api_values(
    name: str | None,
    orchestrator: Orchestrator,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[ApiValue]:
    """Every name and instance type the cluster stack sends to the orchestrator's API, with its key path."""
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
    for path, group_name, instance_type in controller + login:
        yield ApiValue(path, "sagemaker", "ClusterInstanceGroupName", group_name)
        yield ApiValue(path, "sagemaker", "ClusterInstanceType", hyperpod_type(instance_type))
    for index, group in groups:
        yield ApiValue(f"compute[{index}].name", "sagemaker", "ClusterInstanceGroupName", group.name)
        yield ApiValue(f"compute[{index}].name", "sagemaker", "ClusterPartitionName", group.name)
        yield ApiValue(
            f"compute[{index}].instance_type", "sagemaker", "ClusterInstanceType", hyperpod_type(group.instance_type)
        )


def types_by_region_list(
    orchestrator: Orchestrator,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[tuple[str, str, str]]:
    """(key path, list kind, instance type) of every type the region must offer: HyperPod's for each HyperPod group,
    EC2's for each PCS launch template (compute groups and the head node's)."""
    if orchestrator.type == "pcs":
        for index, group in groups:
            yield f"compute[{index}].instance_type", "ec2", group.instance_type
        head = pcs_head_group(orchestrator, observability)
        if head is not None:
            yield head[0], "ec2", head[2]
        return
    yield "orchestrator.controller_instance_type", "hyperpod", hyperpod_type(orchestrator.controller_instance_type)
    if orchestrator.login_instance_type:
        yield "orchestrator.login_instance_type", "hyperpod", hyperpod_type(orchestrator.login_instance_type)
    for index, group in groups:
        yield f"compute[{index}].instance_type", "hyperpod", hyperpod_type(group.instance_type)


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
        for path, resource_type in services_in_region(orchestrator, observability):
            message = region_problem(region, resource_type)
            if message is not None:
                found.append((path, message))
        if not any(path == "orchestrator.type" for path, _ in found):
            for path, kind, instance_type in types_by_region_list(orchestrator, groups, observability):
                message = instance_type_problem(kind, region, instance_type)  # type: ignore[arg-type]
                if message is not None:
                    found.append((path, message))
    for path, message in first_per_path(iter(found)):
        yield Problem(path, message)
