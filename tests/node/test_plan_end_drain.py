"""plan-end-drain.sh: the HyperPod controller's timer that drains a training plan's partitions before the plan ends.

SageMaker is the aws CLI stub answering `describe-training-plan --query [Status,EndTime] --output text` as the CLI
prints a DescribeTrainingPlan answer (botocore sagemaker: Status one of Pending|Active|Scheduled|Expired|Failed,
EndTime a timestamp; the CLI's text output of a timestamp is ISO 8601 with its offset, aws-cli v2's default
`cli_timestamp_format = iso8601`, unconfirmed for this exact query); the clock is FMCLUSTER_NOW. The drain itself is
block-end-drain.sh, here on the HyperPod profile's stub Slurm and then on a real one-node Slurm
(tests/node/real_slurm.py), laid out as HyperPod keeps Slurm (/opt/slurm/bin).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

import pytest

from tests.node.real_slurm import SLURMS, real_slurm
from tests.node.test_profiles import pcs_machine
from tests.node.test_scripts import NODE_DIR

ARN = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/llm-pretrain-2026q4"
END = datetime(2026, 12, 14, 10, 0, tzinfo=UTC)
END_TEXT = "2026-12-14T10:00:00+00:00"
AWS = (
    'if [[ " $* " == *" describe-training-plan "* ]]; then\n'
    '  cat "$STUB_STATE/plan"; exit "$(cat "$STUB_STATE/plan-status" 2>/dev/null || echo 0)"\nfi'
)


def epoch(moment: datetime) -> str:
    return str(int(moment.timestamp()))


def machine(tmp_path, status: str = "Active"):
    node = pcs_machine(tmp_path, "hyperpod-dlami-ubuntu2204")
    (node.bin / "date").unlink(missing_ok=True)
    (node.bin / "date").symlink_to(shutil.which("date"))
    node.add_stub("aws", AWS)
    node.set("plan", f"{status}\t{END_TEXT}\n")
    return node


@pytest.mark.parametrize(
    ("minutes_left", "status", "drains"),
    [
        (40, "Active", True),
        (59, "Active", True),
        (90, "Active", False),
        (40, "Expired", False),
        (40, "Scheduled", False),
    ],
)
def test_an_active_plan_within_its_grace_is_drained(tmp_path, minutes_left, status, drains):
    node = machine(tmp_path, status)
    now = {"FMCLUSTER_NOW": epoch(END - timedelta(minutes=minutes_left))}
    result = node.run("plan-end-drain.sh", "check", "us-west-2", f"{ARN}=60=gpu,big", env=now)
    assert result.returncode == 0, result.stderr
    (describe,) = node.calls("aws")
    assert describe[1:] == ["sagemaker", "describe-training-plan", "--region", "us-west-2", "--training-plan-name",
                            ARN, "--query", "[Status,EndTime]", "--output", "text"]  # fmt: skip
    log = node.script_log("plan-end-drain")
    if drains:
        assert f"training plan {ARN} ends {END_TEXT}, within 60 minutes: draining gpu big" in log
        # the profile's sinfo stub lists no node: block-end-drain.sh says so in its one line
        assert result.stdout == "drained 0 node(s): -; signalled 0 job(s): -\n"
    else:
        assert "draining" not in log and result.stdout == ""


def test_a_plan_that_cannot_be_read_is_retried_at_the_next_check(tmp_path):
    node = machine(tmp_path)
    node.set("plan", "An error occurred (AccessDeniedException) when calling the DescribeTrainingPlan operation\n")
    node.set("plan-status", "254")
    result = node.run("plan-end-drain.sh", "check", "us-west-2", f"{ARN}=60=gpu")
    assert result.returncode == 1
    assert "could not be read: An error occurred (AccessDeniedException)" in node.script_log("plan-end-drain")


def test_install_writes_a_timer_every_5_minutes(tmp_path):
    node = machine(tmp_path)
    result = node.run("plan-end-drain.sh", "install", "us-west-2", f"{ARN}=60=gpu")
    assert result.returncode == 0, result.stderr
    service = node.path("/etc/systemd/system/fmcluster-plan-end-drain.service").read_text()
    timer = node.path("/etc/systemd/system/fmcluster-plan-end-drain.timer").read_text()
    assert (
        f"ExecStart=/usr/bin/env bash /opt/fmcluster/node/plan-end-drain.sh check us-west-2 {ARN}=60=gpu\n" in service
    )
    assert "After=network-online.target\n" in service  # it calls the SageMaker API
    assert "OnUnitActiveSec=5min" in timer and "WantedBy=timers.target" in timer
    assert ["systemctl", "enable", "--now", "fmcluster-plan-end-drain.timer"] in node.calls("systemctl")


@pytest.mark.parametrize("word", [f"{ARN}=60", f"{ARN}=sixty=gpu", "cr-0123456789abcdef0=60=gpu", f"{ARN}=60=GPU"])
def test_bad_plans_exit_2(tmp_path, word):
    result = machine(tmp_path).run("plan-end-drain.sh", "check", "us-west-2", word)
    assert result.returncode == 2 and result.stderr.startswith("usage: ")


@pytest.mark.real_tools
@pytest.mark.parametrize("version", SLURMS)
def test_a_due_plan_drains_its_partition_in_a_real_slurm(tmp_path, version):
    root = tmp_path / "root"
    bin_dir = root / "opt/slurm/bin"
    bin_dir.mkdir(parents=True)
    for tool in ("sinfo", "scontrol", "squeue", "scancel"):
        (bin_dir / tool).symlink_to(f"/usr/bin/{tool}")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "aws").write_text(f"#!/bin/bash\nprintf 'Active\\t{END_TEXT}\\n'\n")
    (stubs / "aws").chmod(0o755)
    env = {"FMCLUSTER_ROOT": str(root), "PATH": f"{stubs}:/usr/sbin:/usr/bin:/sbin:/bin",
           "FMCLUSTER_NOW": epoch(END - timedelta(minutes=45))}  # fmt: skip
    script = str(NODE_DIR / "plan-end-drain.sh")
    with real_slurm(tmp_path, version) as slurm:
        first = slurm.command("bash", script, "check", "us-west-2", f"{ARN}=60=debug", check=False, env=env)
        shown = slurm.command("scontrol", "show", "node", slurm.node, "--oneliner").stdout
        again = slurm.command("bash", script, "check", "us-west-2", f"{ARN}=60=debug", check=False, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"drained 1 node(s): {slurm.node}; signalled 0 job(s): -\n"
    assert f"Reason=fmcluster: training plan llm-pretrain-2026q4 ends {END_TEXT} [root@" in shown and "DRAIN" in shown
    assert again.stdout == "drained 0 node(s): -; signalled 0 job(s): -\n"  # idempotent
