"""From a file (or plain data) to a validated ClusterConfig, or a ConfigError listing every problem."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ValidationError

from fmcluster.config.errors import ConfigError, problems_from_validation_error
from fmcluster.config.file_rules import Sections, cross_section_problems
from fmcluster.config.models import ClusterConfig
from fmcluster.config.source import read_yaml


def load(path: str | Path) -> ClusterConfig:
    """Read and validate the cluster file at `path`.

    >>> load("examples/quickstart.yaml").orchestrator.type
    'hyperpod-slurm'
    """
    return parse(read_yaml(path), source=str(path))


def parse(data: dict, *, source: str = "<config>") -> ClusterConfig:
    """Validate plain data (as read from YAML) against the cluster-file contract."""
    try:
        config = ClusterConfig.model_validate(data)
    except ValidationError as error:
        problems = problems_from_validation_error(error, _allowed_keys(ClusterConfig))
        raise ConfigError(source, problems + cross_section_problems(Sections.of_data(data))) from None
    problems = cross_section_problems(Sections.of(config))
    if problems:
        raise ConfigError(source, problems)
    return config


def _allowed_keys(model: type[BaseModel], prefix: str = "") -> dict[str, list[str]]:
    """Allowed keys per parent path ('' is the root; list indices dropped), for "did you mean" hints."""
    allowed = {prefix: [field.alias or name for name, field in model.model_fields.items()]}
    for name, field in model.model_fields.items():
        for nested in _models_in(field.annotation):
            allowed.update(_allowed_keys(nested, f"{prefix}.{field.alias or name}".lstrip(".")))
    return allowed


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in getattr(annotation, "__args__", ()) for model in _models_in(arg)]
