"""Quality gates over the real synthesized templates of every example: cdk-nag, cfn-lint, snapshots."""

from __future__ import annotations

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from tests.conftest import EXAMPLES
from tests.support import mask_asset_hashes

EXAMPLE_IDS = [path.stem for path in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_cdk_nag_finds_nothing_unacknowledged(synthesized, example):
    assert synthesized[example].nag == []


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_cfn_lint_reports_no_error_and_no_warning(synthesized, example):
    result = synthesized[example]
    assert result.templates, "nothing synthesized"
    assert result.lint() == {name: [] for name in result.templates}


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_templates_match_snapshot(synthesized, example, snapshot):
    assert mask_asset_hashes(synthesized[example].templates) == snapshot(extension_class=JSONSnapshotExtension)
