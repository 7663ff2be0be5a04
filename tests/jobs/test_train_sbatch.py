"""examples/jobs/train.sbatch: shellcheck, and the job on a real one-node Slurm (tests/node/real_slurm.py: Debian's
slurm-wlm 22.05 and munge).

What runs for real: sbatch parsing the script's #SBATCH directives (`--test-only`), the batch script under slurmctld
and slurmd, `srun` starting one task per "GPU" with SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, train.py in each task
(two gloo ranks on CPU over loopback) finding each other at MASTER_ADDR:MASTER_PORT, and Slurm delivering
`scancel --signal=USR1` to the job step's tasks, which checkpoint and stop (exit 3), and the resubmitted job resuming.
What stays emulated, and why: pyxis (no SPANK plugin here: a `srun` shim on PATH records the --container-* options and
drops them, so train.py runs on the host's Python instead of in the image), GPUs and EFA (gloo on CPU), /fsx (a
temporary directory), the node's NCCL file (written here as nccl-env.sh writes it), and the two-node layout (one node;
`--nodes=1` overrides the script's 2).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.node.real_slurm import SLURMS, real_slurm

pytestmark = pytest.mark.real_tools  # a real Slurm runs the job

JOBS = Path(__file__).resolve().parents[2] / "examples" / "jobs"
SBATCH = JOBS / "train.sbatch"
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
IMAGE = "/fsx/enroot/images/training-image.sqsh"
SRUN_SHIM = """#!/usr/bin/env bash
# pyxis stand-in: record the container options, drop them, run the real srun.
args=()
for arg in "$@"; do
  case "$arg" in
    --container-*) printf '%s\\n' "$arg" >>"$CONTAINER_LOG" ;;
    *) args+=("$arg") ;;
  esac
done
exec /usr/bin/srun "${args[@]}"
"""
TRAIN_ARGS = ("--steps", "30", "--checkpoint-every", "10", "--log-every", "1", "--warmup", "5", "--lr", "3e-3",
              "--d-model", "64", "--layers", "2", "--heads", "4", "--seq-len", "64", "--batch-size", "8")  # fmt: skip


def test_shellcheck_is_clean():
    result = subprocess.run([SHELLCHECK, str(SBATCH)], capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def job_environment(tmp_path: Path) -> dict[str, str]:
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "srun").write_text(SRUN_SHIM)
    (shims / "srun").chmod(0o755)
    # the image's python, here the test's (with torch); a wrapper, since a symlink outside the venv loses the venv
    (shims / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (shims / "python").chmod(0o755)
    nccl = tmp_path / "nccl.env"
    nccl.write_text("# Written by fmcluster nccl-env.sh from fmcluster defaults\nNCCL_SOCKET_IFNAME=^docker,lo,veth\n")
    (tmp_path / "fsx").mkdir()
    return {
        "PATH": f"{shims}:/usr/sbin:/usr/bin:/sbin:/bin",
        "CONTAINER_LOG": str(tmp_path / "container-options.log"),
        "FMCLUSTER_JOB_DIR": str(JOBS),
        "FMCLUSTER_GPUS_PER_NODE": "2",
        "FMCLUSTER_NCCL_ENV_FILE": str(nccl),
        "FMCLUSTER_SHARED_DIR": str(tmp_path / "fsx"),
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }


def events(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"event"')]


def test_sbatch_parses_the_directives(tmp_path):
    with real_slurm(tmp_path) as slurm:
        checked = slurm.command("sbatch", "--test-only", "--nodes=1", str(SBATCH), check=False)
    assert checked.returncode == 0, checked.stderr
    assert re.search(r"sbatch: Job \d+ to start at \S+ using \d+ processors on nodes \S+ in partition debug",
                     checked.stderr), checked.stderr  # fmt: skip


def test_the_job_trains_is_signalled_through_slurm_and_resumes_when_submitted_again(tmp_path):
    env = job_environment(tmp_path)
    checkpoints = tmp_path / "fsx" / "checkpoints" / "first-job"
    # The test node's GPUs are GRES over /dev/null stand-ins (tests/node/real_slurm.py): the script requests them for
    # the step and sets FMCLUSTER_DEVICE=cuda, and --device cpu (after it) lets train.py run on the CPU anyway.
    args = ("--image", IMAGE, "--", "--checkpoint-dir", str(checkpoints), "--data", str(tmp_path / "no-data"),
            "--device", "cpu", *TRAIN_ARGS)  # fmt: skip
    script = SBATCH.read_text()
    with real_slurm(tmp_path) as slurm:
        # Warned: the time-limit signal as Slurm sends it to the step's tasks (scancel --signal=USR1).
        path = tmp_path / "first-job.out"
        submitted = subprocess.run(
            ["/usr/bin/sbatch", "--parsable", "--nodes=1", f"--output={path}", str(SBATCH), *args],
            env={**slurm.env, **env}, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        job_id = submitted.stdout.strip().split(";")[0]

        def state() -> str:
            shown = slurm.command("scontrol", "show", "job", job_id, "--oneliner", check=False).stdout
            return next((part.split("=", 1)[1] for part in shown.split() if part.startswith("JobState=")), "")

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and '"step": 12,' not in (path.read_text() if path.exists() else ""):
            assert state() in ("PENDING", "CONFIGURING", "RUNNING"), path.read_text() if path.exists() else state()
            time.sleep(0.2)
        slurm.command("scancel", "--signal=USR1", job_id)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and state() in ("RUNNING", "COMPLETING"):
            time.sleep(0.5)
        assert state() == "FAILED", path.read_text()  # exit status 3: stopped with a checkpoint
        warned = path.read_text()
        # Submitted again: it resumes from the signal's checkpoint and finishes.
        finished = slurm.run_batch(script, "--nodes=1", env=env, timeout=300, args=args)

    said = [line for line in warned.splitlines() if " first-job: " in line]
    assert re.search(
        rf"first-job: train.py on 1 node\(s\) x 2 task\(s\), image {IMAGE}, rendezvous 127.0.0.1:\d+, NCCL "
        r"environment from the node: NCCL_SOCKET_IFNAME$",
        said[0],
    ), said
    stop = next(event for event in events(warned) if event["event"] == "stop")
    assert (stop["signal"], stop["exit_status"]) == ("SIGUSR1", 3)
    assert said[-1].endswith("train.py stopped with a checkpoint; submit the job again to resume"), said
    started = next(event for event in events(warned) if event["event"] == "start")
    assert started["world_size"] == 2 and started["device"] == "cpu"

    assert finished.state == "COMPLETED", finished.output
    resumed = events(finished.output)
    assert resumed[0] == {"event": "resume", "step": stop["step"], "world_size": 2, "saved_world_size": 2,
                          "checkpoint": str(checkpoints / f"step-{stop['step']:08d}.pt")}  # fmt: skip
    assert resumed[-1] == {"event": "done", "step": 30}
    options = Path(env["CONTAINER_LOG"]).read_text().splitlines()
    assert options[:3] == [f"--container-image={IMAGE}", f"--container-mounts={env['FMCLUSTER_SHARED_DIR']}:"
                           f"{env['FMCLUSTER_SHARED_DIR']}", f"--container-workdir={JOBS}"]  # fmt: skip


PCS_NODE = "compute-1-1"
"""A node named as AWS PCS names them, after its node group (PCS user guide, "Explore the cluster environment in AWS
PCS": `sinfo` lists `compute-1-[1-4]` while the login node's host is `ip-10-3-6-103`)."""
RECORDING_SRUN = '#!/bin/sh\nprintf "%s\\n" "$MASTER_ADDR" >"$MASTER_LOG"\n'


@pytest.mark.parametrize("version", SLURMS)
def test_the_ranks_meet_at_the_first_nodes_slurm_address_not_its_name(tmp_path, version):
    """A real Slurm whose node has a name no resolver knows and NodeAddr=127.0.0.1 (tests/node/real_slurm.py), as a
    PCS node has its node-group name and, presumably, its instance's address (unconfirmed): MASTER_ADDR comes from real
    `scontrol show node` output of each Slurm version, so it is an address the other nodes reach."""
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo(PCS_NODE, None)
    env = job_environment(tmp_path)
    (tmp_path / "shims" / "srun").write_text(RECORDING_SRUN)  # records where the ranks would meet, runs nothing
    env["MASTER_LOG"] = str(tmp_path / "master")
    with real_slurm(tmp_path, version, node_name=PCS_NODE) as slurm:
        job = slurm.run_batch(SBATCH.read_text(), "--nodes=1", env=env, args=("--image", IMAGE))
        shown = slurm.command("scontrol", "show", "node", PCS_NODE, "--oneliner").stdout
    assert f"NodeName={PCS_NODE} " in shown and " NodeAddr=127.0.0.1 " in shown
    assert job.state == "COMPLETED", job.output
    assert (tmp_path / "master").read_text() == "127.0.0.1\n"
    assert re.search(r"first-job: train.py on 1 node\(s\) x 2 task\(s\), image \S+, rendezvous 127.0.0.1:\d+,",
                     job.output), job.output  # fmt: skip


def test_without_slurm_the_script_says_how_to_submit_it():
    result = subprocess.run(["bash", str(SBATCH)], capture_output=True, text=True, timeout=30, check=False,
                            env={"PATH": os.environ["PATH"]})  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].endswith("first-job: not inside a Slurm job; submit this script with sbatch")


def test_without_a_shared_directory_the_job_says_which_to_set(tmp_path):
    """A cluster with `storage.lustre: none` has no /fsx: the job stops before pyxis fails on the container mount."""
    env = {**job_environment(tmp_path), "FMCLUSTER_SHARED_DIR": str(tmp_path / "none"), "SLURM_JOB_ID": "7"}
    result = subprocess.run(["bash", str(SBATCH), "--image", IMAGE], capture_output=True, text=True, timeout=30,
                            check=False, env=env)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].endswith(
        f"first-job: no directory {tmp_path / 'none'} to mount into the container (a cluster with storage.lustre: "
        "none has no /fsx): set FMCLUSTER_SHARED_DIR to a directory every node of the job shares"
    )


def test_the_job_may_requeue_itself_and_keeps_its_output_across_restarts():
    """The script runs `scontrol requeue` after a checkpointed stop: sbatch(1) --requeue makes the job requeueable
    where slurm.conf says JobRequeue=0, and --open-mode=append keeps the first run's output where JobFileAppend=0
    (slurm.conf(5)) would truncate it at the restart."""
    directives = [line.split()[1] for line in SBATCH.read_text().splitlines() if line.startswith("#SBATCH ")]
    assert {"--requeue", "--open-mode=append"} <= set(directives)


def run_with_recording_srun(tmp_path: Path, *, gpus: int, options: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """The script run outside Slurm's daemons with SLURM_JOB_ID set and an srun that only records what it was given."""
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "srun").write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" >"$SRUN_LOG"\necho "$FMCLUSTER_DEVICE" >"$DEVICE_LOG"\n'
    )
    (shims / "srun").chmod(0o755)
    if gpus:  # nvidia-smi -L's line format: "GPU <index>: <name> (UUID: GPU-...)"
        lines = "".join(f'echo "GPU {index}: NVIDIA H100 80GB HBM3 (UUID: GPU-{index})"\n' for index in range(gpus))
        (shims / "nvidia-smi").write_text(f"#!/bin/sh\n{lines}")
        (shims / "nvidia-smi").chmod(0o755)
    env = {"PATH": f"{shims}:/usr/bin:/bin", "SLURM_JOB_ID": "42", "SLURM_JOB_NUM_NODES": "1",
           "FMCLUSTER_JOB_DIR": str(JOBS), "FMCLUSTER_MASTER_ADDR": "127.0.0.1", "SRUN_LOG": str(tmp_path / "srun"),
           "DEVICE_LOG": str(tmp_path / "device"), "FMCLUSTER_NCCL_ENV_FILE": str(tmp_path / "none"),
           "FMCLUSTER_SHARED_DIR": str(tmp_path)}  # fmt: skip
    result = subprocess.run(["bash", str(SBATCH), "--image", IMAGE, *options], env=env, capture_output=True, text=True,
                            timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return (tmp_path / "srun").read_text().splitlines(), (tmp_path / "device").read_text().strip()


def test_on_gpu_nodes_the_step_requests_its_gpus_and_train_py_must_see_them(tmp_path):
    """srun(1), --gres: a step is allocated the job's GRES "except those implicitly requested when a job is
    exclusive" (Slurm 26.05), and the job is --exclusive without a GPU request: the step must ask for them."""
    args, device = run_with_recording_srun(tmp_path, gpus=8)
    assert "--ntasks-per-node=8" in args and "--gpus-per-node=8" in args
    assert device == "cuda"


def test_on_a_node_without_gpus_the_step_requests_none_and_train_py_may_use_the_cpu(tmp_path):
    directives = [line.split()[1] for line in SBATCH.read_text().splitlines() if line.startswith("#SBATCH ")]
    assert "--exclusive" in directives  # the reason the GPU case above needs its explicit request
    args, device = run_with_recording_srun(tmp_path, gpus=0, options=("--gpus-per-node", "2"))
    assert "--ntasks-per-node=2" in args and not [arg for arg in args if arg.startswith(("--gpus", "--gres"))]
    assert device == ""
