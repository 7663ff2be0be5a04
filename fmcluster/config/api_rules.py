"""The cluster-file rules that AWS's own models decide (see service_models): every name and instance type that
reaches AWS PCS or SageMaker HyperPod, whether typed by the user or derived by fmcluster, and whether the region
offers the services the file asks for.

Each orchestrator's `api_values` (`fmcluster.config.orchestrators`) lists what its cluster stack sends, so the
constructs and this rule cannot drift apart:
tests/gates/test_service_truth.py walks every synthesized example's PCS and SageMaker resources against the same
shapes.
"""

from __future__ import annotations

from collections.abc import Iterator

from fmcluster.config import orchestrators
from fmcluster.config.models import ComputeGroup, Observability, Orchestrator
from fmcluster.config.service_models import region_problem
from fmcluster.config.value_rules import ApiValue
from fmcluster.problems import Problem


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
    return orchestrators.of(orchestrator.type).api_values(name, orchestrator, groups, observability)


def services_in_region(
    orchestrator: Orchestrator, observability: Observability | None, *, file_system: bool = True
) -> Iterator[tuple[str, str]]:
    """(key path, CloudFormation type) of each regional service the file asks for (FSx only with a file system)."""
    yield "orchestrator.type", orchestrators.of(orchestrator.type).CLUSTER_RESOURCE
    if file_system:
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
    *,
    file_system: bool = True,
) -> Iterator[Problem]:
    """Every problem AWS's models find with the file: names, instance types, regional services."""
    if orchestrator is None:
        return
    rules = orchestrators.of(orchestrator.type)
    values = api_values(name, orchestrator, groups, observability)
    found = [(value.path, message) for value in values if (message := value.problem()) is not None]
    if region is not None:
        found += [
            (path, message)
            for path, resource_type in services_in_region(orchestrator, observability, file_system=file_system)
            if (message := region_problem(region, resource_type))
        ]
    offered = region if not any(path == "orchestrator.type" for path, _ in found) else None
    for path, instance_type in rules.instance_types(orchestrator, groups, observability):
        if (message := rules.instance_type_problem(instance_type, offered)) is not None:
            found.append((path, message))
    for path, message in first_per_path(iter(found)):
        yield Problem(path, message)
