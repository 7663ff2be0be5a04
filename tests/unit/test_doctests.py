"""The examples in the package's docstrings hold: every module of fmcluster/ that has one runs it here.

Lambda handlers are loaded as the Lambda runtime loads them (their folder is the task root, so a handler imports its
siblings by bare name); every other module is imported by its package name.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "fmcluster"
LAMBDAS = PACKAGE / "lambdas"
RUNNABLE = re.compile(r"^\s*>>> (?!#)(?!.*doctest: \+SKIP)", re.M)
"""An example line that runs: not a comment (`>>> # call(...) -> ...`), not skipped (it needs cdk.out or AWS)."""
WITH_EXAMPLES = sorted(path for path in PACKAGE.rglob("*.py") if RUNNABLE.search(path.read_text()))


def load(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    if LAMBDAS in path.parents:
        monkeypatch.syspath_prepend(str(path.parent))  # the Lambda's task root
        name = f"fmcluster_doctest_{path.parent.name}_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    parts = path.relative_to(REPO).with_suffix("").parts
    return importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))


def test_the_modules_with_examples_are_found():
    assert len(WITH_EXAMPLES) >= 18


def _param(path: Path):
    """A module whose examples build a CDK app is a `synth` test."""
    marks = [pytest.mark.synth] if re.search(r">>> .*cdk\.App\(", path.read_text()) else []
    return pytest.param(path, marks=marks, id=str(path.relative_to(PACKAGE)))


@pytest.mark.parametrize("path", [_param(path) for path in WITH_EXAMPLES])
def test_docstring_examples_hold(path, monkeypatch):
    module = load(path, monkeypatch)
    results = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0, f"{path.name}: '>>> ' found, but no doctest ran"
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed (printed above)"
