"""`fmcluster info FILE`: the stacks' outputs and the head node, from stubbed DescribeStacks, ListClusterNodes and
DescribeInstances (every response checked against botocore's model by the `stubs` fixture). The output keys are the
ones the templates carry (tests/gates/test_outputs.py holds the templates to fmcluster.outputs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster import cli
from fmcluster.live.info import cluster_info
from fmcluster.live.windows import capacity_windows
from tests.live.conftest import PCS_BLOCK, QUICKSTART, config_of
from tests.live.responses import (
    BLOCK,
    CLUSTER_ARN,
    HEAD_GROUP_ID,
    HYPERPOD_CLUSTER_OUTPUTS,
    NOW,
    PCS_CLUSTER_OUTPUTS,
    RESERVATION,
    capacity_block_status,
    capacity_reservation,
    cluster_nodes,
    instances,
    stack_with_outputs,
    training_plan,
)

REPO = Path(__file__).resolve().parents[2]
HYPERPOD_ID = CLUSTER_ARN.rsplit("/", 1)[1]
STORAGE = {
    "DataBucket": "quickstart-storage-bucketsdatabucket5b4e2a1c-0a1b2c3d4e5f",
    "CheckpointsBucket": "quickstart-storage-bucketscheckpointsbucket9f8e7d6c-1a2b3c4d5e6f",
    "FileSystemId": "fs-0123456789abcdef0",
    "FileSystemDnsName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    "FileSystemMountName": "abcdef12",
}


def missing(stub, name: str) -> None:
    stub.no_stack("DescribeStacks", name)


def deployed(stub, part: str, outputs: dict[str, str]) -> None:
    response = stack_with_outputs("quickstart", part, outputs)
    stub.ok("cloudformation", "DescribeStacks", response, {"StackName": f"quickstart-{part}"})


def queue_quickstart(stub, *, cluster: bool = True, nodes: tuple = ()) -> None:
    """The quickstart's stacks: network and storage deployed, data links and image not yet, then the cluster."""
    deployed(stub, "network", {"VpcId": "vpc-0a1b2c3d4e5f60718"})
    deployed(stub, "storage", STORAGE)
    missing(stub, "quickstart-data-links")
    missing(stub, "quickstart-image")
    if cluster:
        deployed(stub, "cluster", HYPERPOD_CLUSTER_OUTPUTS)
        stub.ok("sagemaker", "ListClusterNodes", cluster_nodes(*nodes), {"ClusterName": "quickstart"})
    else:
        missing(stub, "quickstart-cluster")
    missing(stub, "quickstart-observability")


def quickstart():
    return config_of(QUICKSTART, storage={"lustre": {"capacity_gib": 1200, "repositories": [{"path": "/datasets"}]}})


def test_hyperpod_outputs_in_order_and_the_controller_found_by_list_cluster_nodes(stubs):
    stub = stubs()
    queue_quickstart(
        stub,
        nodes=(
            ("gpu", "i-0bbbbbbbbbbbbbbb0", "Running", ""),
            ("controller", "i-0aaaaaaaaaaaaaaa0", "Running", ""),
        ),
    )
    info = cluster_info(quickstart(), stub.aws())
    assert info.head.target == f"sagemaker-cluster:{HYPERPOD_ID}_controller-i-0aaaaaaaaaaaaaaa0"
    assert info.report("cluster.yaml").splitlines() == [
        "quickstart: hyperpod-slurm in us-east-1 (use1-az6)",
        "network: stack quickstart-network CREATE_COMPLETE",
        "  VpcId  vpc-0a1b2c3d4e5f60718",
        "storage: stack quickstart-storage CREATE_COMPLETE",
        f"  DataBucket           {STORAGE['DataBucket']}",
        f"  CheckpointsBucket    {STORAGE['CheckpointsBucket']}",
        "  FileSystemId         fs-0123456789abcdef0",
        "  FileSystemDnsName    fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        "  FileSystemMountName  abcdef12",
        "data-links: stack quickstart-data-links is not deployed",
        "image: stack quickstart-image is not deployed",
        "cluster: stack quickstart-cluster CREATE_COMPLETE",
        "  Orchestrator   hyperpod-slurm",
        "  ClusterName    quickstart",
        f"  ClusterId      {HYPERPOD_ID}",
        f"  ClusterArn     {CLUSTER_ARN}",
        "  HeadNodeGroup  controller",
        "observability: stack quickstart-observability is not deployed",
        "head node: controller i-0aaaaaaaaaaaaaaa0 (sagemaker ListClusterNodes ClusterName=quickstart)",
        f"  SSM target  sagemaker-cluster:{HYPERPOD_ID}_controller-i-0aaaaaaaaaaaaaaa0",
        "  connect     fmcluster connect cluster.yaml",
    ]


def test_a_controller_that_is_not_running_yet_is_a_note(stubs):
    stub = stubs()
    queue_quickstart(stub, nodes=(("controller", "i-0aaaaaaaaaaaaaaa0", "Pending", ""),))
    info = cluster_info(quickstart(), stub.aws())
    assert info.head is None
    assert info.report("cluster.yaml").splitlines()[-1] == (
        "head node: controller: no running node to connect to in controller: i-0aaaaaaaaaaaaaaa0 Pending"
    )


def test_pcs_login_node_found_by_its_node_group_tag(stubs):
    stub = stubs()
    config = config_of(PCS_BLOCK, orchestrator={"type": "pcs", "login_instance_type": "m5.4xlarge"})
    for part in ("network", "storage", "image"):
        missing(stub, f"llm-pretrain-{part}")
    outputs = PCS_CLUSTER_OUTPUTS
    stub.ok(
        "cloudformation",
        "DescribeStacks",
        stack_with_outputs("llm-pretrain", "cluster", outputs),
        {"StackName": "llm-pretrain-cluster"},
    )
    missing(stub, "llm-pretrain-observability")
    block = capacity_reservation()
    stub.ok("ec2", "DescribeCapacityReservations", block, {"CapacityReservationIds": [RESERVATION]})
    stub.ok("ec2", "DescribeCapacityBlockStatus", capacity_block_status(), {"CapacityBlockIds": [BLOCK]})
    stub.ok(
        "ec2",
        "DescribeInstances",
        instances("i-0ccccccccccccccc0"),
        {
            "Filters": [
                {"Name": "instance-state-name", "Values": ["running"]},
                {"Name": "tag:aws:pcs:compute-node-group-id", "Values": [HEAD_GROUP_ID]},
            ]
        },
    )
    info = cluster_info(config, stub.aws())
    info.now = NOW
    assert (info.head.group, info.head.target) == ("login", "i-0ccccccccccccccc0")
    assert info.as_json() == {
        "cluster": outputs,
        "head_node": {"group": "login", "instance_id": "i-0ccccccccccccccc0", "ssm_target": "i-0ccccccccccccccc0"},
        "capacity_windows": [
            {"kind": "capacity block", "id": RESERVATION, "groups": ["gpu"], "state": "active",
             "start": "2026-11-30T08:00:00+00:00", "end": "2026-12-14T10:00:00+00:00", "drain_before_end_minutes": 60,
             "interconnect": "ok", "total_capacity": 16, "unavailable_capacity": 0}
        ],
    }  # fmt: skip
    assert info.report("cluster.yaml").splitlines()[-1] == (
        f"capacity block {RESERVATION} (gpu): active, started 2026-11-30 08:00 UTC, ends 2026-12-14 10:00 UTC (in 14 "
        "days 0 h); interconnect ok, 16 of 16 instances available; its nodes drain 60 min before its end"
    )


def test_a_window_that_cannot_be_read_says_why(stubs):
    stub = stubs()
    stub.denied("ec2", "DescribeCapacityReservations", {"CapacityReservationIds": [RESERVATION]})
    (window,) = capacity_windows(config_of(PCS_BLOCK), stub.aws())
    assert window.line(NOW) == (
        f"capacity block {RESERVATION} (gpu): window not read: access denied to ec2:DescribeCapacityReservations "
        "(the read-only policy in fmcluster's README grants it)"
    )


def test_cli_info_json_and_exit_1_when_nothing_is_deployed(stubs, monkeypatch, capsys, tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(QUICKSTART)
    stub = stubs()
    for part in ("network", "storage", "image", "cluster", "observability"):
        missing(stub, f"quickstart-{part}")
    monkeypatch.setattr("fmcluster.live.Aws", lambda region: stub.aws())
    assert cli.main(["info", str(path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {"head_node": None}


@pytest.mark.parametrize("command", ["info", "healthcheck"])
def test_cli_info_without_credentials_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, command):
    path = tmp_path / "cluster.yaml"
    path.write_text(QUICKSTART)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    assert cli.main([command, str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{path}: {command}: no AWS credentials found (Unable to locate credentials); set AWS_PROFILE or run "
        "`aws configure`"
    ]


def test_info_and_connect_never_load_aws_cdk():
    code = (
        "import sys; from fmcluster import cli; import fmcluster.live.info, fmcluster.live.connect; "
        "cli.main(['validate', 'examples/quickstart.yaml']); print('aws_cdk' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, cwd=REPO
    )
    assert result.stdout.splitlines()[-1] == "False"


def test_a_blocks_status_that_cannot_be_read_says_why_and_the_window_stays(stubs):
    """DescribeCapacityBlockStatus refused: the window from DescribeCapacityReservations still shows, the status says
    why it is missing (shapes from botocore's ec2 model, tests/live/responses.py)."""
    stub = stubs()
    stub.ok("ec2", "DescribeCapacityReservations", capacity_reservation(), {"CapacityReservationIds": [RESERVATION]})
    stub.denied("ec2", "DescribeCapacityBlockStatus", {"CapacityBlockIds": [BLOCK]})
    (window,) = capacity_windows(config_of(PCS_BLOCK), stub.aws())
    assert window.line(NOW) == (
        f"capacity block {RESERVATION} (gpu): active, started 2026-11-30 08:00 UTC, ends 2026-12-14 10:00 UTC (in 14 "
        "days 0 h); status not read: access denied to ec2:DescribeCapacityBlockStatus (the read-only policy in "
        "fmcluster's README grants it); its nodes drain 60 min before its end"
    )


def test_diagnose_reports_each_window_as_a_finding(stubs):
    """hyperpod-training-plan: its plan's window (SageMaker DescribeTrainingPlan, shapes from botocore) is an ok
    finding naming the drain; a window that cannot be read is unknown, so diagnose never calls it fine."""
    from fmcluster.config import load
    from fmcluster.live.findings import Collected
    from fmcluster.live.windows import window_findings

    config = load(str(REPO / "examples/hyperpod-training-plan.yaml"))
    stub = stubs("us-west-2")
    stub.ok("sagemaker", "DescribeTrainingPlan", training_plan(), {"TrainingPlanName": "llm-pretrain-2026q4"})
    (found,) = window_findings(config, stub.aws(), Collected(), NOW)
    assert found.render().splitlines()[0] == (
        "ok       training plan llm-pretrain-2026q4: Active, started 2026-11-29 10:00 UTC, ends 2026-12-13 10:00 UTC "
        "(in 13 days 0 h); its nodes drain 60 min before its end"
    )
    stub = stubs("us-west-2")
    stub.denied("sagemaker", "DescribeTrainingPlan", {"TrainingPlanName": "llm-pretrain-2026q4"})
    (found,) = window_findings(config, stub.aws(), Collected(), NOW)
    assert found.is_unchecked and "access denied to sagemaker:DescribeTrainingPlan" in found.message
