"""Shared fixtures: each example cluster file synthesized when a test first asks, once per worker that reads it.

`cdk synth` pays a jsii round trip to node per construct call, so each example's app is built and synthesized a
single time here and every gate (cfn-lint, cdk-nag, snapshots, unit assertions) reads it; an example no selected test
reads is never built (`make test-fast` builds none). Construct tests read these examples (their stacks are kept, to
find a construct's resources) and build only the library-user variants they need, with the harness in
tests/support.py. Markers (registered in pyproject.toml) say what a test costs; `examples` is set here on every test
that reads a synthesized example.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aws_cdk as cdk
import botocore.loaders
import botocore.session
import pytest

from fmcluster.config import ClusterConfig, load
from tests import support
from tests.scanners import FAIL_SYNTH_ON_VALIDATION_ERRORS, guard_findings, guard_validator
from tests.support import CDK_JSON_CONTEXT, REPO, Synthesized, app

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))

# One botocore data loader for every session the tests make. moto's `mock_aws` drops boto3's default session each
# time it starts, and each new session's loader would parse the service models (JSON of up to several MB) again:
# the lambda and live tests spent most of their time there. The loader only reads botocore's own files and caches
# what it read, so sharing it changes no client's behaviour.
botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


@dataclass
class SynthesizedExample(Synthesized):
    """One example file, built into a CDK app (its stacks by role in `built`) and synthesized."""

    path: Path | None = None
    config: ClusterConfig | None = None
    built: object = None
    """The `fmcluster.stacks.ClusterStacks` of the example."""
    guarded: bool = False
    """Whether the Control Tower rules ran in this synthesis (only then do `guard_findings` say anything)."""
    guard_findings: list[str] = field(default_factory=list)
    """Control Tower proactive-control findings left after CDK's acknowledgments (tests/scanners.py)."""


def synthesize(
    path: Path, outdir: Path, config: ClusterConfig | None = None, *, guard: bool = True
) -> SynthesizedExample:
    """Build `config` (default: the file at `path`) into an app and synthesize it into `outdir`.

    `guard` False leaves out the Control Tower rules (cfn-guard), for a variant only compared with its example (the
    update-safety gates): they add about 45% to a synthesis's CPU time (quickstart, 2 loaded cores, three pairs in turn:
    16.8 s with them, 11.6 s without), and tests/gates/test_templates.py runs them on every example."""
    from fmcluster.stacks import build

    config = config or load(path)
    # The validation report is read below instead of failing synth on the first Control Tower finding.
    cdk_app = app(outdir, {**CDK_JSON_CONTEXT, FAIL_SYNTH_ON_VALIDATION_ERRORS: False})
    stacks = build(cdk_app, config)
    if guard:
        cdk.Validations.of(cdk_app).add_plugins(guard_validator())
    result = support.synthesize(cdk_app, stacks.all())
    found = guard_findings(outdir) if guard and result.templates else []
    return SynthesizedExample(
        **vars(result), path=path, config=config, built=stacks, guarded=guard, guard_findings=found
    )


class Examples(Mapping[str, SynthesizedExample]):
    """Every example in examples/, by file stem; each is synthesized the first time it is looked up.

    The Control Tower rules (cfn-guard, about a third of an example's synthesis) run only when a test of the example's
    own xdist group reads it (`xdist_group`): that group runs whole on one worker, which synthesizes the example once,
    with them. A test outside the group gets the example without them; when a test of the group then reads it on the
    same worker, it is synthesized again, with them (tests/gates/test_templates.py checks `guarded`).
    """

    reader: pytest.Item | None = None
    """The test being set up (`pytest_runtest_setup`), whose fixtures may read an example."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._paths = {path.stem: path for path in EXAMPLES}
        self._tmp_path_factory = tmp_path_factory
        self._built: dict[str, SynthesizedExample] = {}

    def __getitem__(self, stem: str) -> SynthesizedExample:
        path = self._paths[stem]
        guard = Examples.reader is not None and group_of(Examples.reader) == example_group(stem)
        built = self._built.get(stem)
        if built is None or (guard and not built.guarded):
            built = self._built[stem] = synthesize(path, self._tmp_path_factory.mktemp(stem), guard=guard)
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> Examples:
    """Every example in examples/, by file stem, each synthesized once for the whole session when first read."""
    return Examples(tmp_path_factory)


READS_BY_NAME = re.compile(r'synthesized\["([a-z0-9-]+)"\]')
"""An example read by its name in a test module's source."""


def example_group(stem: str) -> str:
    return f"example:{stem}"


def group_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    return marker.args[0] if marker is not None else None


@functools.cache
def examples_read_by_name(module: Path) -> frozenset[str]:
    return frozenset(READS_BY_NAME.findall(module.read_text()))


COSTLY = ("examples", "synth", "real_tools")
"""The markers of tests that build apps or start outside tools: they keep to their module's (or example's) worker."""


def lives_longer_than_a_test(item: pytest.Item, name: str) -> bool:
    """Whether the fixture `name` of `item` is one of this project's module- or session-scoped fixtures."""
    definitions = item._fixtureinfo.name2fixturedefs.get(name, ())  # type: ignore[attr-defined]
    return bool(definitions) and definitions[-1].scope != "function" and definitions[-1].baseid.startswith("tests")


def xdist_group(item: pytest.Item) -> str | None:
    """A gate (tests/gates) parametrized by `example` is in that example's group, and so is every test of a module
    that reads one example only, by name; a test that builds apps, starts outside tools (`COSTLY`) or shares a
    module- or session-scoped fixture of this project is in its module's group, so that a module's fixtures (apps of
    its own) are built once. Any other test (None) goes to whichever worker is free: the node-script and handler
    modules, each a whole group before, left one worker idle at the end of `make test-fast`."""
    callspec = getattr(item, "callspec", None)
    example = callspec.params.get("example") if callspec is not None else None
    if isinstance(example, str) and "gates" in item.path.parts:
        return example_group(example)
    read = examples_read_by_name(item.path)
    if len(read) == 1:
        return example_group(next(iter(read)))
    costly = any(item.get_closest_marker(marker) for marker in COSTLY)
    if costly or any(lives_longer_than_a_test(item, name) for name in getattr(item, "fixturenames", ())):
        return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before its fixtures are set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    Examples.reader = item


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A test without a `COSTLY` marker (the `make test-fast` tier) fails if it synthesizes an app: the tier is meant
    to synthesize nothing, and an unmarked synthesis costs it seconds of CPU each."""
    if any(item.get_closest_marker(marker) for marker in COSTLY):
        return (yield)

    def refuse(self: cdk.Stage, *args: object, **kwargs: object) -> None:
        raise AssertionError(f"{item.nodeid} synthesizes an app: mark it `synth` (tests/conftest.py, COSTLY)")

    synth = cdk.App.synth
    cdk.App.synth = refuse  # type: ignore[method-assign]
    try:
        return (yield)
    finally:
        cdk.App.synth = synth  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups (it runs first otherwise: groups ignored)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that reads a synthesized example `examples`, and give every test its xdist group.

    Under `pytest -n N --dist loadgroup` (`make test`) a group runs on one worker (`xdist_group`), so each example's
    gates and the modules that read only it share the worker that synthesizes it, once.
    """
    for item in items:
        if "synthesized" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.examples)
        group = xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
