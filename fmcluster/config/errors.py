"""A cluster file's problems (`fmcluster.problems.Problem`), and how pydantic's errors become fmcluster's messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from pydantic import ValidationError

from fmcluster.problems import Problem, Problems


class ConfigError(Problems):
    """A cluster file that fmcluster cannot build; `problems` lists every one found, `lines()` prints them."""


def key_path(loc: Iterable[str | int]) -> str:
    """('compute', 0, 'reservation_id') -> 'compute[0].reservation_id'."""
    path = ""
    parts = list(loc)
    for index, part in enumerate(parts):
        if part == "[key]":
            continue
        is_dict_key = index + 1 < len(parts) and parts[index + 1] == "[key]"
        if isinstance(part, int) and not is_dict_key:
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _shown(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return repr(value)


_TYPE_NAMES = {
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "bool_type": "true or false",
    "string_type": "a string (quote it)",
    "float_type": "a number",
    "list_type": "a list",
    "dict_type": "a mapping of keys",
    "model_type": "a mapping of keys",
    "tuple_type": "a list",
}


def problems_from_validation_error(error: ValidationError, allowed_keys: dict[str, list[str]]) -> list[Problem]:
    """Translate pydantic's errors into one Problem each, in fmcluster's words.

    `allowed_keys` maps a key path with list indices removed ('compute.name' style parent path, '' for the
    root) to the keys allowed there, for "did you mean" hints on unknown keys.
    """
    problems = []
    for detail in error.errors(include_url=False):
        loc = detail["loc"]
        kind = detail["type"]
        value = detail.get("input")
        ctx = detail.get("ctx") or {}
        if kind == "missing":
            message = "required"
        elif kind == "extra_forbidden":
            parent = ".".join(str(p) for p in loc[:-1] if not isinstance(p, int))
            message = _unknown_key_message(str(loc[-1]), allowed_keys.get(parent, []))
        elif kind == "literal_error":
            message = f"must be {ctx['expected']}; got {_shown(value)}"
        elif kind in _TYPE_NAMES:
            message = f"must be {_TYPE_NAMES[kind]}; got {_shown(value)}"
        elif kind == "greater_than_equal":
            message = f"must be at least {ctx['ge']}; got {_shown(value)}"
        elif kind == "greater_than":
            message = f"must be more than {ctx['gt']}; got {_shown(value)}"
        elif kind == "less_than_equal":
            message = f"must be at most {ctx['le']}; got {_shown(value)}"
        elif kind == "too_short":
            if isinstance(value, list | tuple) and len(value) >= ctx["min_length"]:
                continue  # pydantic counts only the valid items; the invalid ones are reported on their own
            message = f"must have at least {_entries(ctx['min_length'])}; got {len(value or ())}"
        elif kind == "too_long":
            message = f"must have at most {_entries(ctx['max_length'])}; got {ctx['actual_length']}"
        elif kind == "value_error":
            message = str(ctx.get("error", detail["msg"]))
        else:
            message = detail["msg"]
        problems.append(Problem(key_path(loc), message))
    return problems


def _entries(count: int) -> str:
    return f"{count} entry" if count == 1 else f"{count} entries"


def _unknown_key_message(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean '{close[0]}'?"
    if allowed:
        return f"unknown key; allowed here: {', '.join(allowed)}"
    return "unknown key"
