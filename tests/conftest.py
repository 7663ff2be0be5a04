"""Shared fixtures: each example cluster file synthesized at most once per test session, when a test first asks.

`cdk synth` pays a jsii round trip to node per construct call, so each example's app is built and synthesized a
single time here and every gate (cfn-lint, cdk-nag, snapshots, unit assertions) reads it; an example no selected test
reads is never built (`make test-fast` builds none). Construct tests read these examples (their stacks are kept, to
find a construct's resources) and build only the library-user variants they need, with the harness in
tests/support.py. Markers (registered in pyproject.toml) say what a test costs; `examples` is set here on every test
that reads a synthesized example.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aws_cdk as cdk
import pytest

from fmcluster.config import ClusterConfig, load
from tests import support
from tests.scanners import FAIL_SYNTH_ON_VALIDATION_ERRORS, guard_findings, guard_validator
from tests.support import CDK_JSON_CONTEXT, REPO, Synthesized, app

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@dataclass
class SynthesizedExample(Synthesized):
    """One example file, built into a CDK app (its stacks by role in `built`) and synthesized."""

    path: Path | None = None
    config: ClusterConfig | None = None
    built: object = None
    """The `fmcluster.stacks.ClusterStacks` of the example."""
    guard_findings: list[str] = field(default_factory=list)
    """Control Tower proactive-control findings left after CDK's acknowledgments (tests/scanners.py)."""


def synthesize(
    path: Path, outdir: Path, config: ClusterConfig | None = None, *, guard: bool = True
) -> SynthesizedExample:
    """Build `config` (default: the file at `path`) into an app and synthesize it into `outdir`.

    `guard` False leaves out the Control Tower rules (cfn-guard), for a variant only compared with its example (the
    update-safety gates): they are most of a synthesis's time (quickstart, 2 loaded cores: 84 s with them, 10 s
    without), and tests/gates/test_templates.py runs them on every example."""
    from fmcluster.stacks import build

    config = config or load(path)
    # The validation report is read below instead of failing synth on the first Control Tower finding.
    cdk_app = app(outdir, {**CDK_JSON_CONTEXT, FAIL_SYNTH_ON_VALIDATION_ERRORS: False})
    stacks = build(cdk_app, config)
    if guard:
        cdk.Validations.of(cdk_app).add_plugins(guard_validator())
    result = support.synthesize(cdk_app, stacks.all())
    found = guard_findings(outdir) if guard and result.templates else []
    return SynthesizedExample(**vars(result), path=path, config=config, built=stacks, guard_findings=found)


class Examples(Mapping[str, SynthesizedExample]):
    """Every example in examples/, by file stem; each is synthesized the first time it is looked up."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._paths = {path.stem: path for path in EXAMPLES}
        self._tmp_path_factory = tmp_path_factory
        self._built: dict[str, SynthesizedExample] = {}

    def __getitem__(self, stem: str) -> SynthesizedExample:
        if stem not in self._built:
            path = self._paths[stem]
            self._built[stem] = synthesize(path, self._tmp_path_factory.mktemp(stem))
        return self._built[stem]

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> Examples:
    """Every example in examples/, by file stem, each synthesized once for the whole session when first read."""
    return Examples(tmp_path_factory)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that reads a synthesized example `examples`, and give every test its xdist group.

    Under `pytest -n N --dist loadgroup` (`make test`) a group runs on one worker: a test of one example (parametrized
    by `example`) joins that example's group, so each example is synthesized on one worker; any other test stays with
    its module, so a module's fixtures (apps of its own) are built once.
    """
    for item in items:
        callspec = getattr(item, "callspec", None)
        example = callspec.params.get("example") if callspec is not None else None
        if "synthesized" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.examples)
        group = f"example:{example}" if isinstance(example, str) else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
