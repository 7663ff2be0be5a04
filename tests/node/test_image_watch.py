"""The training image reaching booted nodes: image-watch.sh (the head node's timer), training-image.sh (jobs) and
nccl-tests.sbatch, against the stub node of tests/stub_node.py.

Emulated, and why: there is no SSM, ECR, enroot, systemd or Slurm here. `aws` answers `ssm get-parameter` from files
the test writes (ParameterNotFound otherwise, as the AWS CLI prints it) and `ecr get-login-password` with a fixed
string; `enroot import` writes the squashfs file it is asked for (recording the call); `mountpoint` says /fsx is
mounted; `systemctl` and `srun` only record. The scripts run in the package layout the PCS node bundle unpacks
(node/image-watch.sh beside node/hyperpod/import-image.sh), with FMCLUSTER_ROOT standing in for /. The image-build
parameter has the shape the image-build handler writes (tests/lambdas/test_image_build_handler.py checks that side).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.stub_node import StubNode, stub_env

NODE_DIR = Path(__file__).resolve().parents[2] / "fmcluster" / "node"
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
REGION = "us-east-1"
PARAMETER = "/fmcluster/quickstart/image-uri"
REGISTRY = f"123456789012.dkr.ecr.{REGION}.amazonaws.com"
IMAGE_V1 = f"{REGISTRY}/quickstart-image:0123456789abcdef@sha256:{'a' * 64}"
IMAGE_V2 = f"{REGISTRY}/quickstart-image:fedcba9876543210@sha256:{'b' * 64}"
LOGS = "CloudWatch Logs group /aws/codebuild/build stream 1234"
TOOLS = (
    "bash", "env", "cat", "date", "mkdir", "mktemp", "chmod", "mv", "rm", "basename", "dirname", "id", "tee", "stat",
    "ln", "cp", "wc",
)  # fmt: skip
STUBS = {
    "aws": """case "$1 $2" in
  "ssm get-parameter")
    while (($#)); do [[ "$1" == --name ]] && name="$2"; shift; done
    [[ -f "$STUB_STATE/ssm$name" ]] && { cat "$STUB_STATE/ssm$name"; exit 0; }
    echo "An error occurred (ParameterNotFound) when calling the GetParameter operation: " >&2; exit 254 ;;
  "ecr get-login-password") echo stub-password ;;
  "s3 cp") cp "$6" "$STUB_STATE/uploaded.log" ;;
  *) exit 2 ;;
esac""",
    "enroot": '[[ "$1" == import ]] && echo "squashfs of $4" >"$3"\nexit 0',
    "mountpoint": "exit 0",
    "hostname": "echo ip-10-1-0-5",
    "systemctl": "exit 0",
    "sleep": "exit 0",
    "srun": 'echo "$*" >"$STUB_STATE/srun.args"',
}


@pytest.fixture
def node(tmp_path: Path) -> StubNode:
    fields = stub_env(tmp_path, tools=TOOLS, stubs=STUBS, python=True)
    env_file = tmp_path / "nccl.env"
    env_file.write_text("NCCL_DEBUG=WARN\n")
    (tmp_path / "home").mkdir()
    fields["env"].update(
        TMPDIR=str(tmp_path),
        HOME=str(tmp_path / "home"),  # read by every node here: this fixture's srun runs all it is given
        FMCLUSTER_IMAGE_STATUS=str(fields["root"] / "fsx/enroot/images/training-image.status"),
        FMCLUSTER_IMAGE_HELPER=str(NODE_DIR / "training-image.sh"),
        FMCLUSTER_NCCL_ENV_FILE=str(env_file),
        SLURM_JOB_ID="7",
        SLURM_JOB_NUM_NODES="2",
        AWS_REGION=REGION,
    )
    return StubNode(**fields)


def run(node: StubNode, script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(NODE_DIR / script), *args], env=node.env, capture_output=True, text=True, timeout=60, check=False
    )


def check(node: StubNode) -> subprocess.CompletedProcess:
    result = run(node, "image-watch.sh", "check", REGION, PARAMETER, "/fsx")
    assert result.returncode == 0, result.stderr
    return result


def build(node: StubNode, *, state: str, started: int) -> None:
    """The image-build parameter as the image-build handler writes it."""
    status = {"state": state, "build": "b:1", "started": started, "expectedMinutes": 38, "logs": LOGS}
    node.set(f"ssm{PARAMETER.rsplit('/', 1)[0]}/image-build", json.dumps(status))


def nccl_tests(node: StubNode) -> subprocess.CompletedProcess:
    return run(node, "nccl-tests.sbatch", "--bucket", "ckpt", "--cluster", "quickstart", "--instance-type",
               "p5.48xlarge", "--gpus-per-node", "8")  # fmt: skip


@pytest.mark.parametrize("script", ["image-watch.sh", "training-image.sh"])
def test_shellcheck_is_clean(script):
    result = subprocess.run([SHELLCHECK, "-x", script], cwd=NODE_DIR, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_install_runs_the_check_from_a_timer_and_says_so_at_login(node):
    result = run(node, "image-watch.sh", "install", REGION, PARAMETER, "/fsx")
    assert result.returncode == 0, result.stderr
    service = node.path("/etc/systemd/system/fmcluster-image-watch.service").read_text()
    command = f"/usr/bin/env bash /opt/fmcluster/node/image-watch.sh check {REGION} {PARAMETER} /fsx"
    assert f"ExecStart={command}\n" in service
    timer = node.path("/etc/systemd/system/fmcluster-image-watch.timer").read_text()
    assert "OnBootSec=1min\nOnUnitActiveSec=2min\n" in timer
    assert node.calls("systemctl") == [["systemctl", "daemon-reload"],
                                       ["systemctl", "enable", "--now", "fmcluster-image-watch.timer"]]  # fmt: skip
    login = node.path("/etc/profile.d/fmcluster-image.sh").read_text()
    assert "FMCLUSTER_IMAGE_STATUS=/fsx/enroot/images/training-image.status" in login
    assert node.calls("aws") == []  # the timer's first run checks, right after install


def test_the_image_arrives_after_boot_and_jobs_then_find_it(node):
    # boot: the image stack has not even started its build
    check(node)
    waiting = run(node, "training-image.sh")
    assert waiting.returncode == 3
    assert waiting.stderr.startswith("the training image build has not started yet")

    # the build runs (started 10 minutes ago, 38 expected, 10 more for the import): jobs are told when and where
    started = int(time.time()) - 600
    build(node, state="building", started=started)
    check(node)
    building = run(node, "training-image.sh")
    assert (building.returncode, building.stdout) == (3, "")
    assert building.stderr == f"the training image is still building; ready in about 38 min; see {LOGS}\n"
    job = nccl_tests(node)
    assert job.returncode == 0, job.stderr  # nothing fails
    assert "the training image is still building; ready in about 38 min" in job.stderr
    assert "nccl-tests: not run: no training image yet" in job.stderr
    assert not (node.state / "srun.args").exists() and node.calls("enroot") == []

    # published: the next check imports it into /fsx, and jobs run it from there
    node.set(f"ssm{PARAMETER}", IMAGE_V1 + "\n")
    check(node)
    images = node.path("/fsx/enroot/images")
    ((_, _, _, partial, source),) = node.calls("enroot")  # each importer writes its own partial file
    assert partial.startswith(f"{images}/quickstart-image+0123456789abcdef.sqsh.partial.")
    assert source == f"docker://{REGISTRY}#quickstart-image:0123456789abcdef"
    ready = run(node, "training-image.sh")
    assert (ready.returncode, ready.stdout, ready.stderr) == (0, "/fsx/enroot/images/training-image.sqsh\n", "")
    assert os.readlink(images / "training-image.sqsh") == "quickstart-image+0123456789abcdef.sqsh"
    job = nccl_tests(node)
    assert job.returncode == 0, job.stderr
    assert "--container-image=/fsx/enroot/images/training-image.sqsh " in (node.state / "srun.args").read_text()

    check(node)  # nothing new: nothing imported again
    assert len(node.calls("enroot")) == 1


def test_a_rebuild_reaches_the_running_nodes(node):
    node.set(f"ssm{PARAMETER}", IMAGE_V1 + "\n")
    check(node)
    node.set(f"ssm{PARAMETER}", IMAGE_V2 + "\n")  # a version bump in the cluster file, deployed
    check(node)
    images = node.path("/fsx/enroot/images")
    assert os.readlink(images / "training-image.sqsh") == "quickstart-image+fedcba9876543210.sqsh"
    assert (images / "training-image.uri").read_text() == IMAGE_V2 + "\n"
    assert "uri=" + IMAGE_V2 in (images / "training-image.status").read_text()


def test_a_failed_build_is_named_with_its_logs(node):
    build(node, state="failed", started=0)
    check(node)
    failed = run(node, "training-image.sh")
    assert failed.returncode == 3
    assert failed.stderr == f"the training image build failed; fix it and deploy again; see {LOGS}\n"


def test_without_enroot_nodes_pull_the_published_image_themselves(node):
    (node.bin / "enroot").unlink()
    node.set(f"ssm{PARAMETER}", IMAGE_V1 + "\n")
    check(node)
    assert run(node, "training-image.sh").stdout == IMAGE_V1 + "\n"


def test_waiting_polls_until_the_image_is_ready(node):
    """--wait checks again every FMCLUSTER_IMAGE_POLL_SECONDS; here the status turns ready between two polls."""
    check(node)
    status = Path(node.env["FMCLUSTER_IMAGE_STATUS"])
    node.add_stub("sleep", f"printf 'state=ready\\nimage=/fsx/x.sqsh\\n' >{status}")
    waited = run(node, "training-image.sh", "--wait", "5")
    assert (waited.returncode, waited.stdout) == (0, "/fsx/x.sqsh\n")
    assert waited.stderr.startswith("the training image build has not started yet")


def test_a_node_without_status_says_so_and_the_job_falls_back_to_the_parameter(node):
    missing = run(node, "training-image.sh")
    assert missing.returncode == 1
    assert "no training image status at" in missing.stderr
    node.set(f"ssm{PARAMETER}", IMAGE_V1 + "\n")
    job = nccl_tests(node)
    assert job.returncode == 0, job.stderr
    assert f"--container-image={REGISTRY}#quickstart-image:0123456789abcdef " in (node.state / "srun.args").read_text()


# -- ECR credentials for a multi-node pull (nccl-tests.sbatch) ---------------------------------------------------


SHARED_ONLY_SRUN = """if [[ "$*" == *"test -r "* ]]; then
  [[ "${!#}" == "$STUB_STATE/shared/"* ]]; exit
fi
echo "$*" >"$STUB_STATE/srun.args"
"""
"""srun as a cluster whose nodes share only STUB_STATE/shared (the file system): a one-task-per-node `test -r` of a
file elsewhere (a node-local home) fails on nodes 2..N, as it would there."""


def test_ecr_credentials_go_where_every_node_reads_them(node):
    node.set(f"ssm{PARAMETER}", IMAGE_V1 + "\n")
    node.add_stub("srun", SHARED_ONLY_SRUN)
    (node.state / "shared").mkdir()
    (node.state / "home").mkdir()
    node.env.update(FMCLUSTER_SHARED_DIR=str(node.state / "shared"), HOME=str(node.state / "home"))
    job = nccl_tests(node)
    assert job.returncode == 0, job.stderr
    (probe,) = [call for call in node.calls("srun") if "test" in call]
    assert probe[:5] == ["srun", "--nodes=2", "--ntasks-per-node=1", "test", "-r"]
    assert probe[5].startswith(f"{node.state}/shared/.fmcluster-enroot-7.")
    assert "read by all 2 nodes" in job.stderr
    assert not list((node.state / "shared").iterdir())  # removed at the end


def test_a_node_local_home_is_refused_for_the_ecr_credentials_of_a_multi_node_job(node):
    """The defect: with the shared directory not writable, the credentials went to $HOME, node-local on HyperPod
    without a shared home, and nodes 2..N could not pull the image."""
    node.set(f"ssm{PARAMETER}", IMAGE_V1 + "\n")
    node.add_stub("srun", SHARED_ONLY_SRUN)
    (node.state / "home").mkdir()
    node.env.update(FMCLUSTER_SHARED_DIR=str(node.state / "no-such-dir"), HOME=str(node.state / "home"))
    job = nccl_tests(node)
    assert job.returncode == 1
    assert f"not every node of the job reads {node.state}/home; ECR credentials cannot go there" in job.stderr
    assert "no directory every node of the job reads for the ECR credentials" in job.stderr
    assert not (node.state / "srun.args").exists()  # the test never ran
    assert not list((node.state / "home").iterdir())
