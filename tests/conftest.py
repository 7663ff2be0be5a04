"""Shared fixtures: every example cluster file synthesized once per test session.

`cdk synth` pays a jsii round trip to node per construct call, so each example's app is built and
synthesized a single time here and every gate (cfn-lint, cdk-nag, snapshots, unit assertions) reads it.
Construct tests read these examples (their stacks are kept, to find a construct's resources) and build only the
library-user variants they need, with the harness in tests/support.py.
"""

from __future__ import annotations

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


def synthesize(path: Path, outdir: Path, config: ClusterConfig | None = None) -> SynthesizedExample:
    """Build `config` (default: the file at `path`) into an app and synthesize it into `outdir`."""
    from fmcluster.stacks import build

    config = config or load(path)
    # The validation report is read below instead of failing synth on the first Control Tower finding.
    cdk_app = app(outdir, {**CDK_JSON_CONTEXT, FAIL_SYNTH_ON_VALIDATION_ERRORS: False})
    stacks = build(cdk_app, config)
    cdk.Validations.of(cdk_app).add_plugins(guard_validator())
    result = support.synthesize(cdk_app, stacks.all())
    guard = guard_findings(outdir) if result.templates else []
    return SynthesizedExample(**vars(result), path=path, config=config, built=stacks, guard_findings=guard)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> dict[str, SynthesizedExample]:
    """Every example in examples/, by file stem, synthesized once for the whole session."""
    return {path.stem: synthesize(path, tmp_path_factory.mktemp(path.stem)) for path in EXAMPLES}
