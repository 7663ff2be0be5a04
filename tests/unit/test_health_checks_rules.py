"""`compute[].health_checks`: AWS PCS instance health checks (botocore pcs InstanceHealthChecks), each rule with the bad
value and its exact message, and the request the key becomes (checked against botocore's pcs model)."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.validate import validate_parameters

from fmcluster.config.models import HealthChecks
from tests.unit.test_config_rules import PCS, lines_for, rendered, valid

PCS_2605 = {**PCS, "orchestrator.slurm_version": "26.05"}
PCS_MODEL = botocore.session.get_session().get_service_model("pcs")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"compute[0].health_checks": {"monitoring": "standard"}},
         "compute[0].health_checks: are AWS PCS instance health checks: only for orchestrator.type: pcs; HyperPod's "
         "are compute[].deep_health_checks (before a node joins) and its health monitoring agent (always on)"),
        ({**PCS, "orchestrator.slurm_version": "25.11", "compute[0].health_checks": {}},
         "compute[0].health_checks: PCS instance health checks need Slurm 26.05 or later (botocore pcs "
         "UpdateComputeNodeGroup instanceHealthChecks); orchestrator.slurm_version is 25.11: remove them or use 26.05"),
        ({**PCS_2605, "compute[0].health_checks": {"monitoring": "none", "monitoring_repair": "replace"}},
         "compute[0].health_checks.monitoring_repair: only with monitoring: standard (botocore pcs HealthMonitoring: "
         "no repairAction with NONE)"),
        ({**PCS_2605, "compute[0].health_checks": {"deep_check_repair": "isolate"}},
         "compute[0].health_checks.deep_check_repair: only with a deep_check other than none (botocore pcs "
         "DeepHealthCheckOnStart: no repairAction with profile NONE)"),
        ({**PCS_2605, "compute[0].instance_type": "m5.2xlarge", "compute[0].health_checks": {"deep_check": "quick"}},
         "compute[0].health_checks: deep_check 'quick' runs NVIDIA DCGM diagnostics: it needs a type with NVIDIA GPUs "
         "(botocore pcs DeepHealthCheckOnStart); m5.2xlarge has none: use deep_check: none"),
        ({**PCS_2605, "compute[0].health_checks": {"deep_check": "full"}},
         "compute[0].health_checks.deep_check: must be 'none', 'quick', 'medium' or 'long'; got 'full'"),
        ({**PCS_2605, "compute[0].health_checks": {"repair": "auto"}},
         "compute[0].health_checks.repair: unknown key; allowed here: monitoring, monitoring_repair, deep_check, "
         "deep_check_repair"),
    ],
    ids=["hyperpod", "slurm-25.11", "monitoring-repair-with-none", "deep-repair-with-none", "deep-check-no-gpu",
         "deep-check-enum", "unknown-key"],
)  # fmt: skip
def test_bad_health_checks_are_one_line_each(changes, expected):
    assert lines_for(changes) == rendered([expected])


def test_defaults_are_monitoring_on_deep_checks_off_and_pcss_own_repair_actions():
    """Omitted repair actions are left out of the request, so PCS uses AUTO (botocore pcs: "If you don't specify this
    value ... PCS uses AUTO"); the key omitted means no custom resource at all."""
    config = valid({**PCS_2605, "compute[0].health_checks": {}})
    assert config.compute[0].health_checks == HealthChecks()
    assert config.compute[0].health_checks.request() == {
        "healthMonitoring": {"mode": "STANDARD"},
        "deepHealthChecks": {"onStart": {"profile": "NONE"}},
    }
    assert valid(PCS_2605).compute[0].health_checks is None


@pytest.mark.parametrize(
    "checks",
    [
        HealthChecks(),
        HealthChecks(monitoring="none"),
        HealthChecks(monitoring_repair="isolate", deep_check="long", deep_check_repair="replace"),
    ],
)
def test_the_request_is_what_botocores_pcs_model_takes(checks):
    shape = PCS_MODEL.operation_model("UpdateComputeNodeGroup").input_shape
    validate_parameters(
        {"clusterIdentifier": "pcs_abcdef0123", "computeNodeGroupIdentifier": "pcs_0123456789",
         "instanceHealthChecks": checks.request()},
        shape,
    )  # fmt: skip
    enums = {
        "mode": PCS_MODEL.shape_for("HealthMonitoringMode").enum,
        "profile": PCS_MODEL.shape_for("DeepHealthCheckOnStartProfile").enum,
        "repairAction": PCS_MODEL.shape_for("HealthMonitoringRepairAction").enum,
    }
    request = checks.request()
    for part in (request["healthMonitoring"], request["deepHealthChecks"]["onStart"]):
        for key, value in part.items():
            assert value in enums[key]
