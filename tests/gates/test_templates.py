"""Quality gates over the real synthesized templates of every example: cdk-nag, cfn-lint, the Control Tower proactive
controls, checkov, snapshots."""

from __future__ import annotations

import json
import re

import pytest
from cfnlint.api import ManualArgs, lint_file
from syrupy.extensions.json import JSONSnapshotExtension

from fmcluster.config import load
from tests.conftest import EXAMPLES
from tests.scanners import checkov_findings

EXAMPLE_IDS = [path.stem for path in EXAMPLES]
ASSET_HASH = re.compile(r"[0-9a-f]{64}")


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_cdk_nag_finds_nothing_unacknowledged(synthesized, example):
    assert synthesized[example].nag_findings == []


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_control_tower_rules_find_nothing_unacknowledged(synthesized, example):
    assert synthesized[example].templates, "nothing synthesized"
    assert synthesized[example].guard_findings == []


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_checkov_finds_nothing_unskipped(synthesized, example):
    result = synthesized[example]
    assert result.templates, "nothing synthesized"
    failed, passed = checkov_findings([result.template_file(name) for name in result.templates])
    assert passed > 0
    assert failed == []


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_cfn_lint_reports_no_error_and_no_warning(synthesized, example):
    result = synthesized[example]
    assert result.templates, "nothing synthesized"
    region = load(result.path).region
    for stack_name in result.templates:
        matches = lint_file(result.template_file(stack_name), ManualArgs(regions=[region]))
        assert [f"{m.rule.id} {m.message} ({m.path})" for m in matches] == [], stack_name


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_templates_match_snapshot(synthesized, example, snapshot):
    templates = synthesized[example].templates
    masked = json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(templates, sort_keys=True)))
    assert masked == snapshot(extension_class=JSONSnapshotExtension)
