"""The orchestrator is chosen in one place (issue 21 item 2): `fmcluster.config.orchestrators.of(type)`. Every
registered module offers the whole seam, its `module:name` references resolve, and no module outside the seam
branches on `orchestrator.type`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fmcluster.config import orchestrators
from fmcluster.config.models import Orchestrator

PACKAGE = Path(__file__).resolve().parents[2] / "fmcluster"
SEAM = (
    "CLUSTER_RESOURCE",
    "CLUSTER_STACK",
    "CLUSTER_STACK_DESCRIPTION",
    "DIAGNOSE_CHECKS",
    "INSTANCE_QUOTA_CHECKS",
    "NODE_IMAGE_DRIFT_CHECKS",
    "ENDPOINTS",
    "NETWORK_PLACEMENT_GROUPS",
    "RUNS_DEEP_HEALTH_CHECKS",
    "UNOFFERED_TYPE",
    "DEDICATED_TENANCY",
    "NO_HEALTH_CHECKS",
    "FAIR_SHARE_WEIGHT",
    "ENFORCEMENT",
    "enforcement_note",
    "enforcement_problem",
    "SESSION_NODE",
    "RECORDS_SIZE",
    "CLUSTER_STATUS_EVENTS",
    "placeholder_target",
    "capacity_problem",
    "associations_problem",
    "deep_health_checks_problem",
    "api_values",
    "instance_types",
    "head_instance_types",
    "nodes",
    "instance_type_problem",
    "key_problems",
    "file_problems",
    "DEFAULT_SLURM_VERSION",
    "setting_problem",
    "PRICE_SERVICE",
    "billed_instance_type",
    "COST_LINES",
)
REFERENCES = (
    "CLUSTER_STACK",
    "DIAGNOSE_CHECKS",
    "INSTANCE_QUOTA_CHECKS",
    "NODE_IMAGE_DRIFT_CHECKS",
    "SESSION_NODE",
    "COST_LINES",
)
BRANCH = re.compile(
    r"""orchestrator(?:\.type)?\s*[!=]=\s*["']|\.get\("type"\)\s*[!=]=\s*["']|== ["'](?:pcs|hyperpod)"""
)


@pytest.mark.parametrize("orchestrator_type", sorted(orchestrators.ORCHESTRATORS))
def test_every_orchestrator_offers_the_whole_seam(orchestrator_type):
    rules = orchestrators.of(orchestrator_type)
    assert [name for name in SEAM if not hasattr(rules, name)] == []
    level, advice = rules.UNOFFERED_TYPE
    assert level in ("error", "warning") and advice


@pytest.mark.parametrize("orchestrator_type", sorted(orchestrators.ORCHESTRATORS))
@pytest.mark.parametrize("reference", REFERENCES)
def test_the_named_stack_and_checks_resolve(orchestrator_type, reference):
    assert callable(orchestrators.resolve(getattr(orchestrators.of(orchestrator_type), reference)))


def test_the_file_types_are_the_registered_ones():
    """The model's `orchestrator.type` choices are the seam's modules (a new one is registered in both)."""
    assert set(Orchestrator.model_fields["type"].annotation.__args__) == set(orchestrators.ORCHESTRATORS)


def test_no_module_outside_the_seam_branches_on_the_orchestrator():
    branching = {
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if "orchestrators" not in path.parts and BRANCH.search(path.read_text())
    }
    assert branching == set()


def test_the_scanner_sees_a_branch():
    assert BRANCH.search('if config.orchestrator.type == "pcs":')
    assert BRANCH.search("pcs = info.data.get(\"type\") == 'pcs'")
    assert not BRANCH.search("rules = orchestrators.of(config.orchestrator.type)")
