"""Validation of construct props for library users, with the cluster file's own rules and messages."""

from __future__ import annotations

import aws_cdk as cdk
from pydantic import BaseModel, ValidationError

from fmcluster.config.errors import problems_from_validation_error


def check_props(model: type[BaseModel], construct: str, **props: object) -> None:
    """Raise ValueError naming every prop of `construct` that breaks `model`'s rules.

    Props that are unresolved CDK tokens are skipped: their values are known only at deploy time.
    """
    known = {key: value for key, value in props.items() if not _is_token(value)}
    try:
        model.model_validate(known)
    except ValidationError as error:
        problems = problems_from_validation_error(error, {})
        raise ValueError("\n".join(f"{construct}: {p.path}: {p.message}" for p in problems)) from None


def _is_token(value: object) -> bool:
    return isinstance(value, str | int | float) and cdk.Token.is_unresolved(value)
