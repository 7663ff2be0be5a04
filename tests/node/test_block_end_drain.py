"""From EC2's capacity block warning to the drain and the checkpoint signal, on a real one-node Slurm.

The block-end Lambda (fmcluster/lambdas/block_end) gets EC2's "Capacity Block Expiration Warning" event (EC2 user
guide, "Monitor Capacity Blocks using EventBridge": source aws.ec2, detail capacity-reservation-id and end-date),
reads the block (EC2 DescribeCapacityReservations, botocore's Stubber), picks the instance to run on (DescribeInstances)
and sends block-end-drain.sh through SSM Run Command; the script then runs against a real Slurm (tests/node/
real_slurm.py: 22.05 here, 24.11 and 26.05 in chroots) where a job's step is running.

What stays emulated, and why: SSM's agent (no instance here). `AgentSsm` takes the SendCommand request (checked
against botocore's ssm model), runs its one command as AWS-RunShellScript would, as root in a shell, with the node's
/opt/fmcluster/node being this checkout's fmcluster/node and FMCLUSTER_ROOT a PCS-like image (Slurm's commands under
/opt/aws/pcs/scheduler/slurm-<version>/bin, PCS user guide), and answers GetCommandInvocation with its output (checked
against the model's output shape). SNS is a recorder checked against botocore's sns model.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber
from botocore.validate import validate_parameters

from fmcluster.lambdas.block_end.handler import on_event
from tests.live.shapes import output_shape, shape_problems
from tests.node.real_slurm import SLURMS, real_slurm

pytestmark = pytest.mark.real_tools

CHECKOUT = Path(__file__).resolve().parents[2]
NODE_DIR = CHECKOUT / "fmcluster" / "node"
RID = "cr-0123456789abcdef0"
END = datetime(2026, 12, 14, 10, 0, tzinfo=UTC)
NOW = END - timedelta(minutes=40)
TOPIC = "arn:aws:sns:us-east-1:123456789012:llm-pretrain-alarms"
HEAD = "i-0aaaaaaaaaaaaaaaa"
WARNING = {
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "Capacity Block Expiration Warning",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "2026-12-14T09:20:00Z",
    "region": "us-east-1",
    "resources": [f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{RID}"],
    "detail": {"capacity-reservation-id": RID, "end-date": "2026-12-14T10:00:00Z"},
}
"""The event as the EC2 user guide's example has it (its placeholders filled in)."""
STEP = "trap 'echo step got USR1; exit 3' USR1; echo step started; while :; do sleep 0.2; done"
JOB = f'#!/bin/bash\nsrun --ntasks=1 bash -c "{STEP}"\necho "batch: the step ended with $?"\n'
"""A job in the real Slurm's one partition (debug, standing for the block's group's) whose step checkpoints (here:
says so) and exits 3 on SIGUSR1, as examples/jobs/train.py does; its batch shell would die of a SIGUSR1 of its own
(bash's default), so the job ends COMPLETED only if the shell was spared."""
_MODELS = botocore.session.get_session()


class AgentSsm:
    """DescribeInstanceInformation, SendCommand and GetCommandInvocation, the command run on the real Slurm as SSM's
    agent would run it."""

    def __init__(self, slurm, root: Path):
        self.slurm, self.root, self.commands, self.results = slurm, root, [], {}

    def send_command(self, **params):
        _check_input("ssm", "SendCommand", params)
        assert params["DocumentName"] == "AWS-RunShellScript" and params["InstanceIds"] == [HEAD]
        (command,) = params["Parameters"]["commands"]
        self.commands.append(command)
        ran = self.slurm.command(
            "bash", "-c", command.replace("/opt/fmcluster/node/", f"{NODE_DIR}/"), check=False,
            env={"FMCLUSTER_ROOT": str(self.root)},
        )  # fmt: skip
        command_id = f"0b1e2c3d-0000-4000-8000-{len(self.commands):012d}"
        self.results[command_id] = {
            "CommandId": command_id,
            "InstanceId": HEAD,
            "DocumentName": "AWS-RunShellScript",
            "PluginName": "aws:runShellScript",
            "ResponseCode": ran.returncode,
            "Status": "Success" if ran.returncode == 0 else "Failed",
            "StatusDetails": "Success" if ran.returncode == 0 else "Failed",
            "StandardOutputContent": ran.stdout,
            "StandardErrorContent": ran.stderr,
        }
        return {"Command": {"CommandId": command_id, "DocumentName": "AWS-RunShellScript", "Status": "Pending"}}

    def get_paginator(self, operation: str):
        """DescribeInstanceInformation's pages: every instance asked about has its agent registered and Online."""
        assert operation == "describe_instance_information"
        return self

    def paginate(self, **params):
        _check_input("ssm", "DescribeInstanceInformation", params)
        (ids,) = [f["Values"] for f in params["Filters"] if f["Key"] == "InstanceIds"]
        page = {"InstanceInformationList": [{"InstanceId": i, "PingStatus": "Online"} for i in ids]}
        assert shape_problems(output_shape("ssm", "DescribeInstanceInformation"), page) == []
        return [page]

    def get_command_invocation(self, **params):
        _check_input("ssm", "GetCommandInvocation", params)
        answer = self.results[params["CommandId"]]
        assert shape_problems(output_shape("ssm", "GetCommandInvocation"), answer) == []
        return answer


class Sns:
    def __init__(self):
        self.published = []

    def publish(self, **params):
        _check_input("sns", "Publish", params)
        self.published.append(params)
        return {"MessageId": f"m-{len(self.published)}"}


def _check_input(service: str, operation: str, params: dict) -> None:
    validate_parameters(params, _MODELS.get_service_model(service).operation_model(operation).input_shape)


def ec2_stub(times: int):
    """DescribeCapacityReservations (the block, active, ending at END) and DescribeInstances (the head node, outside
    the block, and a compute node in it) `times` times, as the handler calls them."""
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    block = {"CapacityReservationId": RID, "State": "active", "ReservationType": "capacity-block",
             "StartDate": END - timedelta(days=14), "EndDate": END, "InstanceType": "p5.48xlarge",
             "TotalInstanceCount": 1, "AvailableInstanceCount": 0}  # fmt: skip
    nodes = [{"InstanceId": "i-0bbbbbbbbbbbbbbbb", "CapacityReservationId": RID}, {"InstanceId": HEAD}]
    filters = [{"Name": "tag:fmcluster:cluster", "Values": ["llm-pretrain"]},
               {"Name": "instance-state-name", "Values": ["running"]}]  # fmt: skip
    for _ in range(times):
        reservations = {"CapacityReservations": [block]}
        assert shape_problems(output_shape("ec2", "DescribeCapacityReservations"), reservations) == []
        stub.add_response("describe_capacity_reservations", reservations, {"CapacityReservationIds": [RID]})
        stub.add_response("describe_instances", {"Reservations": [{"Instances": nodes}]}, {"Filters": filters})
    stub.activate()
    return ec2, stub


def pcs_root(tmp_path: Path, version: str) -> Path:
    """FMCLUSTER_ROOT laid out as a PCS image keeps Slurm, its commands the real ones (inside a chroot: its own)."""
    root = tmp_path / "root"
    bin_dir = root / f"opt/aws/pcs/scheduler/slurm-{version}/bin"
    bin_dir.mkdir(parents=True)
    for tool in ("sinfo", "scontrol", "squeue", "scancel"):
        (bin_dir / tool).symlink_to(f"/usr/bin/{tool}")
    root.chmod(0o755)
    return root


def node_line(slurm) -> str:
    return slurm.command("scontrol", "show", "node", slurm.node, "--oneliner").stdout


def wait_for(predicate, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.3)
    return False


@pytest.mark.parametrize("version", SLURMS)
def test_ec2s_warning_drains_the_blocks_node_signals_the_step_and_tells_the_operators_once(
    tmp_path, version, monkeypatch
):
    monkeypatch.setenv("CLUSTER_NAME", "llm-pretrain")
    monkeypatch.setenv("TOPIC_ARN", TOPIC)
    monkeypatch.setenv("BLOCKS", json.dumps({RID: {"partitions": ["debug"], "minutes": 60}}))
    root = pcs_root(tmp_path, version)
    with real_slurm(tmp_path, version) as slurm:
        script = tmp_path / "job.sh"
        script.write_text(JOB)
        output = tmp_path / "job.out"
        job_id = slurm.command("sbatch", "--parsable", f"--output={output}", str(script)).stdout.strip()
        assert wait_for(lambda: output.exists() and "step started" in output.read_text()), slurm.logs()
        ssm, sns = AgentSsm(slurm, root), Sns()
        ec2, stub = ec2_stub(times=2)
        first = on_event(WARNING, None, ec2=ec2, ssm=ssm, sns=sns, now=NOW, sleep=lambda _: None)
        assert wait_for(lambda: "batch: the step ended" in output.read_text()), slurm.logs()
        drained = node_line(slurm)
        tick = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        second = on_event(tick, None, ec2=ec2, ssm=ssm, sns=sns, now=NOW + timedelta(minutes=5), sleep=lambda _: None)
        stub.assert_no_pending_responses()
        assert wait_for(lambda: "JobState=COMPLETED" in slurm.command("scontrol", "show", "job", job_id).stdout)
    assert ssm.commands[0] == f"/opt/fmcluster/node/block-end-drain.sh {RID} 2026-12-14T10:00:00Z debug"
    assert first == [f"capacity block {RID}: drained 1 node(s): {slurm.node}; signalled 1 job(s): {job_id}"]
    assert "DRAIN" in drained and f"Reason=fmcluster: capacity block {RID} ends 2026-12-14T10:00:00Z [root@" in drained
    lines = output.read_text().splitlines()
    assert "step got USR1" in lines and lines[-1] == "batch: the step ended with 3"
    assert second == [f"capacity block {RID}: its nodes were drained already"]
    assert len(sns.published) == 1
    assert sns.published[0]["Subject"] == f"fmcluster llm-pretrain: capacity block {RID} ends 2026-12-14T10:00:00Z"
    assert sns.published[0]["Message"] == (
        f"Capacity block {RID} of cluster llm-pretrain ends 2026-12-14T10:00:00Z; EC2 begins terminating its "
        f"instances 30 minutes before that. Drained 1 Slurm node(s) in partition(s) debug ({slurm.node}): no new job "
        f"starts there. Asked 1 running job(s) ({job_id}) to checkpoint (SIGUSR1 to their job steps)."
    )
