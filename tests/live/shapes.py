"""Check a stubbed response against botocore's service model, more strictly than Stubber does.

botocore's Stubber validates responses with its parameter validator (types, unknown keys); this walker also
refuses enum values the model does not list and timestamps without a time zone, so a fixture cannot hold a
state or status AWS never returns.
"""

from __future__ import annotations

from datetime import datetime

import botocore.session
from botocore.model import Shape

_SESSION = botocore.session.get_session()


def output_shape(service: str, operation: str) -> Shape:
    return _SESSION.get_service_model(service).operation_model(operation).output_shape


def declared_errors(service: str, operation: str) -> list[str]:
    """Error codes the operation's model declares (EC2 and S3 HEAD declare none; their codes are documented)."""
    model = _SESSION.get_service_model(service).operation_model(operation)
    return [shape.error_code or shape.name for shape in model.error_shapes]


def shape_problems(shape: Shape | None, value: object, path: str = "") -> list[str]:
    """Every way `value` differs from `shape`; empty when it fits."""
    if shape is None:
        return [] if value in ({}, None) else [f"{path or '<root>'}: the operation returns no body"]
    kind = shape.type_name
    where = path or "<root>"
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{where}: expected a structure, got {type(value).__name__}"]
        problems = [
            f"{where}: unknown member {key!r}"
            for key in value
            if key not in shape.members and key != "ResponseMetadata"
        ]
        for key, member in shape.members.items():
            if key in value:
                problems += shape_problems(member, value[key], f"{path}.{key}" if path else key)
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        return [p for index, item in enumerate(value) for p in shape_problems(shape.member, item, f"{where}[{index}]")]
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{where}: expected a map"]
        return [p for key, item in value.items() for p in shape_problems(shape.value, item, f"{where}.{key}")]
    if kind == "string":
        if not isinstance(value, str):
            return [f"{where}: expected a string"]
        if shape.enum and value not in shape.enum:
            return [f"{where}: {value!r} is not one of the model's values {shape.enum}"]
        return []
    if kind in ("integer", "long"):
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{where}: expected an integer"]
    if kind in ("double", "float"):
        return [] if isinstance(value, int | float) and not isinstance(value, bool) else [f"{where}: expected a number"]
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{where}: expected true or false"]
    if kind == "timestamp":
        if not isinstance(value, datetime) or value.tzinfo is None:
            return [f"{where}: expected a time-zone-aware datetime"]
        return []
    if kind == "blob":
        return [] if isinstance(value, bytes | bytearray) else [f"{where}: expected bytes"]
    return [f"{where}: shape type {kind} not handled"]
