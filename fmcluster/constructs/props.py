"""Validation of construct props for library users, with the cluster file's own rules and messages."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from fmcluster.config.checks import is_token
from fmcluster.config.errors import problems_from_validation_error


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
