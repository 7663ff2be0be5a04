"""Validation of construct props for library users, with the cluster file's own rules and messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ValidationError

from fmcluster.config.checks import S3_URI_PATTERN, SSM_PATH_PATTERN, grafana_without_source, is_token
from fmcluster.config.errors import problems_from_validation_error
from fmcluster.config.models import ComputeGroup, Observability


def prop_problems(model: type[BaseModel], **props: object) -> list[str]:
    """`prop: message` for every prop that breaks `model`'s rules (empty when they are fine).

    Props that are unresolved CDK tokens are skipped: their values are known only at deploy time.
    """
    known = {key: value for key, value in props.items() if not is_token(value)}
    try:
        model.model_validate(known)
    except ValidationError as error:
        return [f"{p.path}: {p.message}" for p in problems_from_validation_error(error, {})]
    return []


def check_props(model: type[BaseModel], construct: str, **props: object) -> None:
    """Raise ValueError naming every prop of `construct` that breaks `model`'s rules (see `prop_problems`)."""
    problems = prop_problems(model, **props)
    if problems:
        raise ValueError("\n".join(f"{construct}: {problem}" for problem in problems))


def compute_group_models(
    given: Sequence[ComputeGroup | Mapping[str, object]], prop: str = "compute_groups"
) -> tuple[list[tuple[int, ComputeGroup]], list[str]]:
    """(index, group) for each entry of a `compute_groups` prop that passes the cluster file's `compute[]` rules, and
    `prop[i].key: message` for each that does not. Entries are `ComputeGroup`s or mappings of the file's keys."""
    groups: list[tuple[int, ComputeGroup]] = []
    problems: list[str] = []
    for index, entry in enumerate(given):
        where = f"{prop}[{index}]"
        try:
            data = entry.model_dump(exclude_none=True) if isinstance(entry, ComputeGroup) else dict(entry)
            groups.append((index, ComputeGroup.model_validate(data)))
        except ValidationError as error:
            problems.extend(f"{where}.{p.path}: {p.message}" for p in problems_from_validation_error(error, {}))
        except (TypeError, ValueError):
            problems.append(f"{where}: must be a ComputeGroup or a mapping of its keys; got {entry!r}")
    return groups, problems


def node_settings_problems(
    *, prometheus: str, grafana: str, observability_mirror: str | None, nccl_parameter_prefix: str | None
) -> list[str]:
    """`prop: message` for the node settings both cluster constructs take: metrics, their mirror, the NCCL prefix."""
    problems = prop_problems(Observability, prometheus=prometheus, grafana=grafana)
    if problem := grafana_without_source(grafana, prometheus):
        problems.append(f"grafana: {problem}")
    mirror = observability_mirror
    if mirror is not None and not is_token(mirror) and not S3_URI_PATTERN.match(mirror):
        problems.append(f"observability_mirror: must be an S3 prefix like s3://bucket/fmcluster-mirror; got {mirror!r}")
    prefix = nccl_parameter_prefix
    if prefix is not None and not is_token(prefix) and not SSM_PATH_PATTERN.match(prefix):
        problems.append(f"nccl_parameter_prefix: must be an SSM path like /fmcluster/llm; got {prefix!r}")
    return problems
