"""`pip install fmcluster` must ship what the constructs read at synth time (node scripts, Lambda code, dashboards),
declare its dependencies as a library does (ranges, not pins), and carry its license and type information.
Builds the real wheel and sdist once (setuptools from the dev extra, no network) and reads them."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.conftest import REPO

pytestmark = pytest.mark.real_tools  # setuptools builds the wheel and the sdist

PACKAGE_DATA_DIRS = ("node", "lambdas", "dashboards", "image")
LOCK = REPO / "requirements.lock"
EXACT_DEV_PINS = {"torch"}
"""Test-only dependencies pinned exactly, with why: torch 2.13.0 is the CPU build that lies on these machines' disk;
plain `torch` or any range that admits a newer release pulls a CUDA build of several GB (FACTS.md, PyTorch)."""


def build(kind: str, outdir: Path) -> Path:
    """`kind` ("wheel" or "sdist") of this checkout, built without isolation by the dev extra's setuptools."""
    code = f"from setuptools import build_meta as b; import sys; b.build_{kind}(sys.argv[1])"
    subprocess.run([sys.executable, "-c", code, str(outdir)], cwd=REPO, check=True, capture_output=True, timeout=300)
    (built,) = outdir.glob("fmcluster-*.whl" if kind == "wheel" else "fmcluster-*.tar.gz")
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    return zipfile.ZipFile(build("wheel", tmp_path_factory.mktemp("wheel")))


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> tarfile.TarFile:
    return tarfile.open(build("sdist", tmp_path_factory.mktemp("sdist")))


def wheel_metadata(wheel: zipfile.ZipFile):
    (name,) = [name for name in wheel.namelist() if name.endswith(".dist-info/METADATA")]
    return Parser().parsestr(wheel.read(name).decode())


def sdist_metadata(sdist: tarfile.TarFile):
    (member,) = [
        member for member in sdist.getmembers() if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO")
    ]
    extracted = sdist.extractfile(member)
    assert extracted is not None
    return Parser().parsestr(extracted.read().decode())


def locked() -> dict[str, Version]:
    """requirements.lock as name -> version (names normalized as pip compares them)."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (specifier,) = requirement.specifier
            assert specifier.operator == "==", line
            pins[requirement.name.lower().replace("_", "-").replace(".", "-")] = Version(specifier.version)
    return pins


def test_wheel_ships_every_package_data_file(wheel):
    shipped = set(wheel.namelist())
    expected = {
        path.relative_to(REPO).as_posix()
        for folder in PACKAGE_DATA_DIRS
        for path in (REPO / "fmcluster" / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert expected, "no package data found"
    assert expected <= shipped, sorted(expected - shipped)
    assert "fmcluster/cli.py" in shipped


def test_wheel_is_typed_and_licensed(wheel):
    shipped = set(wheel.namelist())
    assert "fmcluster/py.typed" in shipped  # PEP 561: type checkers read the package's own annotations
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in shipped)
    assert wheel_metadata(wheel)["License-Expression"] == "Apache-2.0"


@pytest.mark.parametrize("metadata_of", [wheel_metadata, sdist_metadata], ids=["wheel", "sdist"])
def test_every_dependency_is_a_range_from_the_tested_version_to_the_next_major(metadata_of, request):
    archive = request.getfixturevalue("wheel" if metadata_of is wheel_metadata else "sdist")
    requirements = [Requirement(text) for text in metadata_of(archive).get_all("Requires-Dist")]
    runtime = [requirement for requirement in requirements if requirement.marker is None]
    assert {requirement.name for requirement in runtime} >= {"aws-cdk-lib", "constructs", "pydantic", "boto3"}
    tested = locked()
    for requirement in requirements:
        operators = {specifier.operator: Version(specifier.version) for specifier in requirement.specifier}
        if requirement.name in EXACT_DEV_PINS:
            assert operators == {"==": tested[requirement.name]}, f"{requirement}: pinned as the lock says"
            continue
        assert "==" not in operators, f"{requirement}: a library pins nothing exactly (the lock does)"
        assert ">=" in operators, f"{requirement}: no lower bound"
        name = requirement.name.lower().replace("_", "-").replace(".", "-")
        assert operators[">="] == tested[name], f"{requirement}: the lower bound is not the tested {tested[name]}"
        if requirement.marker is None:  # the library's own dependencies: a major release may break them
            assert "<" in operators, f"{requirement}: no upper bound"
            assert operators["<"] <= Version(f"{operators['>='].major + 1}"), f"{requirement}: admits a new major"


def test_the_lock_satisfies_every_range_and_covers_every_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [Requirement(text) for text in project["dependencies"] + project["optional-dependencies"]["dev"]]
    tested = locked()
    for requirement in declared:
        name = requirement.name.lower().replace("_", "-").replace(".", "-")
        assert name in tested, f"{requirement.name} is not in requirements.lock"
        assert requirement.specifier.contains(tested[name]), f"locked {name}=={tested[name]} is outside {requirement}"


def test_make_installs_the_lock():
    makefile = (REPO / "Makefile").read_text()
    assert "--constraint requirements.lock --editable '.[dev]'" in makefile
    assert "$(STAMP)/python: pyproject.toml requirements.lock" in makefile
