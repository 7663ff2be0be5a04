"""The docs agree with the code: the cluster-file key reference with the models, and every link with its target.

The key reference (docs/cluster-file.md) is written by hand, for readers; the models (fmcluster.config.models) are
what `fmcluster validate` applies. These tests fail when a key is added to one and not the other, when a key is
required in one and optional in the other, or when a literal default in the table differs from the model's.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from fmcluster.config.models import ClusterConfig

REPO = Path(__file__).resolve().parents[2]
KEY_REFERENCE = REPO / "docs" / "cluster-file.md"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "CHANGELOG.md"]

ROW = re.compile(r"^\| `(?P<key>[^`]+)` \| (?P<default>.*?) \| (?P<rule>.*) \|$")
LITERAL_DEFAULT = re.compile(r"^`(?P<literal>[^`]+)`(?::.*)?$")
"""A default cell that states one value: `512`, or `[]`: none. Cells with conditions (`true` where ...) are prose."""


def key_table() -> dict[str, str]:
    """Key -> default cell of every row of the key reference's table."""
    rows = {}
    for line in KEY_REFERENCE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            assert match["key"] not in rows, f"{match['key']} twice in the key table"
            rows[match["key"]] = match["default"]
    return rows


def _nested_model(annotation: object) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (itself or in a tuple, through Optional and Annotated), and whether it is a list."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _nested_model(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                model, is_list = _nested_model(arg)
                if model:
                    return model, is_list
        return None, False
    if origin is tuple:
        model, _ = _nested_model(typing.get_args(annotation)[0])
        return model, model is not None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def model_keys(model: type[BaseModel] = ClusterConfig, prefix: str = "") -> dict[str, tuple[FieldInfo, bool]]:
    """Every key path of the cluster file -> (its field, whether the table must list it).

    A section (`storage.lustre`) need not be listed, its keys must; a list of entries (`compute`) is listed, and its
    entries' keys as `compute[].name`.
    """
    keys: dict[str, tuple[FieldInfo, bool]] = {}
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        nested, is_list = _nested_model(info.annotation)
        keys[path] = (info, nested is None or is_list)
        if nested:
            keys.update(model_keys(nested, path + ("[]." if is_list else ".")))
    return keys


def test_every_key_of_the_models_is_in_the_table():
    table = key_table()
    missing = [path for path, (_, listed) in model_keys().items() if listed and path not in table]
    assert missing == [], f"keys the models accept that {KEY_REFERENCE.name} does not list"


def test_every_key_of_the_table_is_in_the_models():
    unknown = sorted(set(key_table()) - set(model_keys()))
    assert unknown == [], f"keys {KEY_REFERENCE.name} lists that the models refuse"


def test_required_keys_agree():
    keys = model_keys()
    disagree = {
        key: default
        for key, default in key_table().items()
        if key in keys and default.startswith("required") != keys[key][0].is_required()
    }
    assert disagree == {}, "'required' in the table where the model has a default, or the other way round"


def _as_yaml(value: object) -> object:
    """A model default as YAML would read it from the file (tuples as lists, models as their fields)."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True)
    if isinstance(value, tuple):
        return [_as_yaml(item) for item in value]
    return value


@pytest.mark.parametrize(
    ("key", "default"),
    [(key, default) for key, default in key_table().items() if LITERAL_DEFAULT.match(default)],
)
def test_literal_defaults_agree(key, default):
    literal = yaml.safe_load(LITERAL_DEFAULT.match(default)["literal"])
    info, _ = model_keys()[key]
    assert _as_yaml(info.get_default(call_default_factory=True)) == literal


def test_the_table_states_literal_defaults():
    """The literal-default test above checks something: most optional keys state their default as a value."""
    literal = [key for key, default in key_table().items() if LITERAL_DEFAULT.match(default)]
    assert len(literal) >= 20


LINK = re.compile(r"\]\((?!https?://|mailto:)(?P<target>[^)#\s]*)(?:#(?P<anchor>[^)\s]+))?\)")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lowercased, punctuation but '-' and '_' dropped, spaces as '-'."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", markdown, flags=re.S), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("document", DOCS, ids=lambda path: str(path.relative_to(REPO)))
def test_links_reach_their_files_and_headings(document):
    broken = []
    for match in LINK.finditer(document.read_text()):
        target = (document.parent / match["target"]).resolve() if match["target"] else document
        if not target.exists() or (match["anchor"] and match["anchor"] not in _anchors(target.read_text())):
            broken.append(match[0])
    assert broken == []
