"""Shared fixtures: every example cluster file synthesized once per test session.

`cdk synth` pays a jsii round trip to node per construct call, so each example's app is built and
synthesized a single time here and every gate (cfn-lint, cdk-nag, snapshots, unit assertions) reads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fmcluster.config import ClusterConfig, load
from tests.scanners import FAIL_SYNTH_ON_VALIDATION_ERRORS, guard_findings, guard_validator

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
CDK_JSON_CONTEXT = json.loads((REPO / "cdk.json").read_text())["context"]
"""The feature flags `cdk synth` runs with, so the tested templates are the ones users deploy."""


@dataclass
class SynthesizedExample:
    """One example file, built into a CDK app and synthesized."""

    path: Path
    outdir: Path
    nag_findings: list[str] = field(default_factory=list)
    guard_findings: list[str] = field(default_factory=list)
    """Control Tower proactive-control findings left after CDK's acknowledgments (tests/scanners.py)."""
    templates: dict[str, dict] = field(default_factory=dict)
    """Template of each stack, by stack name."""

    def template_file(self, stack_name: str) -> Path:
        return self.outdir / f"{stack_name}.template.json"


def synthesize(path: Path, outdir: Path, config: ClusterConfig | None = None) -> SynthesizedExample:
    """Build `config` (default: the file at `path`) into an app and synthesize it into `outdir`."""
    import aws_cdk as cdk
    from cdk_nag import AwsSolutionsChecks

    from fmcluster.stacks import build

    # The validation report is read below instead of failing synth on the first Control Tower finding.
    app = cdk.App(outdir=str(outdir), context={**CDK_JSON_CONTEXT, FAIL_SYNTH_ON_VALIDATION_ERRORS: False})
    stacks = build(app, config or load(path))
    cdk.Validations.of(app).add_plugins(guard_validator())
    report = AwsSolutionsChecks().validate_scope(app)
    findings = [
        f"{violation.rule_name} {resource.construct_path}: {violation.description}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]
    result = SynthesizedExample(path=path, outdir=outdir, nag_findings=findings)
    if findings:
        return result  # synth would fail on the same findings; the nag gate reports them
    app.synth()
    result.guard_findings = guard_findings(outdir)
    for stack in stacks.all():
        result.templates[stack.stack_name] = json.loads(result.template_file(stack.stack_name).read_text())
    return result


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> dict[str, SynthesizedExample]:
    """Every example in examples/, by file stem, synthesized once for the whole session."""
    return {path.stem: synthesize(path, tmp_path_factory.mktemp(path.stem)) for path in EXAMPLES}
