"""Reading a cluster file from disk into plain data, with every failure as a Problem."""

from __future__ import annotations

from pathlib import Path

import yaml

from fmcluster.config.errors import ConfigError, Problem


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (YAML would silently keep the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges; keys given next to it override the merged ones on purpose
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, list | dict):
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be a plain value, not a list or mapping", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | Path) -> dict:
    """The top-level mapping of the YAML file at `path`; ConfigError for anything that is not one."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, [Problem("", "file not found")]) from None
    except IsADirectoryError:
        raise ConfigError(source, [Problem("", "is a directory, not a cluster file")]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(source, [Problem("", f"cannot read the file: {error}")]) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(source, [Problem("", f"{where}YAML syntax error: {error.problem or error}")]) from None
    except yaml.YAMLError as error:
        raise ConfigError(source, [Problem("", f"YAML syntax error: {error}")]) from None
    if data is None:
        raise ConfigError(source, [Problem("", "the file is empty; expected a mapping of keys (name, region, ...)")])
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else "a single value"
        raise ConfigError(
            source, [Problem("", f"the top level is {kind}; expected a mapping of keys (name, region, ...)")]
        )
    return data
