"""Shared fixtures: every example cluster file synthesized once per test session.

`cdk synth` pays a jsii round trip to node per construct call, so each example's app is built and
synthesized a single time here and every gate (cfn-lint, cdk-nag, snapshots, unit assertions) reads it.
Construct tests read these examples (their stacks are kept, to find a construct's resources) and build only the
library-user variants they need, with the harness in tests/support.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from fmcluster.config import ClusterConfig, load
from tests import support
from tests.support import REPO, Synthesized, app

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@dataclass
class SynthesizedExample(Synthesized):
    """One example file, built into a CDK app (its stacks by role in `built`) and synthesized."""

    path: Path | None = None
    config: ClusterConfig | None = None
    built: object = None
    """The `fmcluster.stacks.ClusterStacks` of the example."""


def synthesize(path: Path, outdir: Path, config: ClusterConfig | None = None) -> SynthesizedExample:
    """Build `config` (default: the file at `path`) into an app and synthesize it into `outdir`."""
    from fmcluster.stacks import build

    config = config or load(path)
    cdk_app = app(outdir)
    stacks = build(cdk_app, config)
    result = support.synthesize(cdk_app, stacks.all())
    return SynthesizedExample(**vars(result), path=path, config=config, built=stacks)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> dict[str, SynthesizedExample]:
    """Every example in examples/, by file stem, synthesized once for the whole session."""
    return {path.stem: synthesize(path, tmp_path_factory.mktemp(path.stem)) for path in EXAMPLES}
