"""`fmcluster healthcheck`: HyperPod's StartClusterHealthCheck and ListClusterNodes against botocore's Stubber (every
request and response checked against the sagemaker model, tests/live/conftest.py); PCS refused: no operation of
botocore's pcs model starts a health check (test_pcs_has_no_on_demand_health_check_operation). One
line and exit 2 without credentials, as `info` does: tests/live/test_info.py."""

from __future__ import annotations

import pytest

from fmcluster import cli
from fmcluster.live.healthcheck import HealthCheckError, healthcheck
from tests.live.conftest import PCS_BLOCK, QUICKSTART, config_of
from tests.live.responses import CLUSTER_ARN, cluster_nodes

NODES = cluster_nodes(
    ("controller", "i-0aaaaaaaaaaaaaaa0", "Running", ""),
    ("gpu", "i-0bbbbbbbbbbbbbbb1", "DeepHealthCheckInProgress", ""),
    ("gpu", "i-0bbbbbbbbbbbbbbb0", "Running", ""),
)


def test_every_check_the_group_can_take_starts_and_each_node_is_reported(stubs):
    stub = stubs()
    stub.ok("sagemaker", "StartClusterHealthCheck", {"ClusterArn": CLUSTER_ARN}, {
        "ClusterName": "quickstart",
        "DeepHealthCheckConfigurations": [
            {"InstanceGroupName": "gpu", "DeepHealthChecks": ["InstanceStress", "InstanceConnectivity"]}
        ],
    })  # fmt: skip
    stub.ok("sagemaker", "ListClusterNodes", NODES, {"ClusterName": "quickstart"})
    nodes = healthcheck(config_of(QUICKSTART), stub.aws())
    assert [node.line() for node in nodes] == [
        "gpu i-0bbbbbbbbbbbbbbb0 Running",
        "gpu i-0bbbbbbbbbbbbbbb1 DeepHealthCheckInProgress",
    ]


def test_status_only_lists_the_nodes(stubs):
    stub = stubs()
    stub.ok("sagemaker", "ListClusterNodes", NODES, {"ClusterName": "quickstart"})
    assert len(healthcheck(config_of(QUICKSTART), stub.aws(), start=False)) == 2


@pytest.mark.parametrize(
    ("text", "groups", "checks", "message"),
    [
        (PCS_BLOCK, (), (), "AWS PCS has no on-demand health check (no operation of botocore's pcs model starts "
         "one); its instance health checks run by themselves once turned on with compute[].health_checks (Slurm "
         "26.05)"),
        (QUICKSTART, ("cpu",), (), "no compute group cpu in the file (groups: gpu)"),
        (QUICKSTART.replace("count: 2", "count: 1"), (), ("InstanceConnectivity",),
         "group gpu cannot take InstanceConnectivity (it can take InstanceStress: InstanceConnectivity needs 2 or "
         "more nodes with EFA)"),
    ],
)  # fmt: skip
def test_what_cannot_run_is_one_line_and_calls_nothing(stubs, text, groups, checks, message):
    with pytest.raises(HealthCheckError) as raised:
        healthcheck(config_of(text), stubs().aws(), groups=groups, checks=checks)
    assert str(raised.value) == message


def test_cli_starts_and_reports(stubs, tmp_path, monkeypatch, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text(QUICKSTART)
    stub = stubs()
    stub.ok("sagemaker", "StartClusterHealthCheck", {"ClusterArn": CLUSTER_ARN}, {
        "ClusterName": "quickstart",
        "DeepHealthCheckConfigurations": [{"InstanceGroupName": "gpu", "DeepHealthChecks": ["InstanceStress"]}],
    })  # fmt: skip
    stub.ok("sagemaker", "ListClusterNodes", NODES, {"ClusterName": "quickstart"})
    monkeypatch.setattr("fmcluster.live.Aws", lambda region: stub.aws())
    assert cli.main(["healthcheck", str(path), "--group", "gpu", "--level", "InstanceStress"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "quickstart: deep health checks started; HyperPod reboots or replaces the nodes that fail them; "
        f"`fmcluster healthcheck {path} --status` shows their progress",
        "gpu i-0bbbbbbbbbbbbbbb0 Running",
        "gpu i-0bbbbbbbbbbbbbbb1 DeepHealthCheckInProgress",
    ]


def test_pcs_has_no_on_demand_health_check_operation():
    """The refusal's claim, from botocore's pcs model: no operation starts or runs a health check; the checks are
    settings of a node group (UpdateComputeNodeGroup instanceHealthChecks)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("pcs")
    assert not [name for name in model.operation_names if "Health" in name]
    assert "instanceHealthChecks" in model.operation_model("UpdateComputeNodeGroup").input_shape.members
