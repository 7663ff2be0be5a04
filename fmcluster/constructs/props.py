"""Validation of construct props for library users, with the cluster file's own rules and messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType

from pydantic import BaseModel, ValidationError

from fmcluster.config.errors import problems_from_validation_error
from fmcluster.config.models import ComputeGroup, Observability
from fmcluster.config.value_rules import (
    SSM_PATH_PATTERN,
    grafana_without_source,
    repeated_group_name,
    repeated_names,
)
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import DEFERRED, is_token


def prop_problems(model: type[BaseModel], **props: object) -> list[Problem]:
    """A problem for every prop that breaks `model`'s rules (empty when they are fine).

    Props that are unresolved CDK tokens are skipped: their values are known only at deploy time.
    """
    known = {key: value for key, value in props.items() if not is_token(value)}
    try:
        model.model_validate(known)
    except ValidationError as error:
        return problems_from_validation_error(error, {})
    return []


def check_props(model: type[BaseModel], construct: str, **props: object) -> None:
    """Raise `InvalidProps` naming every prop of `construct` that breaks `model`'s rules (see `prop_problems`)."""
    raise_if_any(construct, prop_problems(model, **props))


def compute_group_models(
    given: Sequence[ComputeGroup | Mapping[str, object]], prop: str = "compute_groups"
) -> tuple[list[tuple[int, ComputeGroup]], list[Problem]]:
    """(index, group) for each entry of a `compute_groups` prop that passes the cluster file's `compute[]` rules, and
    a problem at `prop[i].key` for each that does not. Entries are `ComputeGroup`s or mappings of the file's keys."""
    groups: list[tuple[int, ComputeGroup]] = []
    problems: list[Problem] = []
    for index, entry in enumerate(given):
        where = f"{prop}[{index}]"
        try:
            data = entry.model_dump(exclude_none=True) if isinstance(entry, ComputeGroup) else dict(entry)
            groups.append((index, ComputeGroup.model_validate(data, context=DEFERRED)))
        except ValidationError as error:
            problems.extend(problem.at(where) for problem in problems_from_validation_error(error, {}))
        except (TypeError, ValueError):
            problems.append(Problem(where, f"must be a ComputeGroup or a mapping of its keys; got {entry!r}"))
    return groups, problems


def orchestrator_group_problems(
    rules: ModuleType, where: str, group: ComputeGroup, slurm_version: str | None = None
) -> list[Problem]:
    """What the orchestrator (`rules`: a module of `fmcluster.config.orchestrators`) refuses in one compute group:
    its capacity, its deep health checks and its scaling and placement (`rules.group_problems`), at `where.<key>`."""
    problems = [Problem(f"{where}.{key}", message) for key, message in rules.group_problems(group, slurm_version)]
    if problem := rules.capacity_problem(group.capacity):
        problems.append(Problem(f"{where}.capacity", problem))
    if problem := rules.deep_health_checks_problem(group.deep_health_checks):
        problems.append(Problem(f"{where}.deep_health_checks", problem))
    return problems


def repeated_group_problems(groups: Sequence[tuple[int, ComputeGroup]], prop: str = "compute_groups") -> list[Problem]:
    """A problem at `prop[i].name` for every group named like an earlier one."""
    return [
        Problem(f"{prop}[{index}].name", repeated_group_name(name, f"{prop}[{first}]"))
        for index, name, first in repeated_names((index, group.name) for index, group in groups)
    ]


def node_settings_problems(*, prometheus: str, grafana: str, nccl_parameter_prefix: str | None) -> list[Problem]:
    """The problems of the node settings both cluster constructs take: metrics and the NCCL prefix."""
    problems = prop_problems(Observability, prometheus=prometheus, grafana=grafana)
    if problem := grafana_without_source(grafana, prometheus):
        problems.append(Problem("grafana", problem))
    prefix = nccl_parameter_prefix
    if prefix is not None and not is_token(prefix) and not SSM_PATH_PATTERN.match(prefix):
        problems.append(Problem("nccl_parameter_prefix", f"must be an SSM path like /fmcluster/llm; got {prefix!r}"))
    return problems
