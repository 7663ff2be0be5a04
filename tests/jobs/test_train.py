"""examples/jobs/train.py for real on CPU: PyTorch's CPU build (torch==2.13.0, the dev extra), gloo, two processes
started by torchrun (gloo on the loopback interface), killed and resumed from their checkpoints.

What runs for real: torchrun (torch.distributed.run), two DDP ranks over gloo on loopback, the model, AdamW, the
checkpoint files on this machine's disk, and the signals: SIGKILL of everything (a node lost), SIGUSR1 to the worker
processes (what Slurm's `--signal=USR1@T` sends to every task of a job step), SIGTERM to torchrun (which passes it to
its workers). The proof of a resume is the loss: with deterministic kernels on CPU and batches that depend on the step
alone, a run killed and resumed logs, step for step, the losses of a run never interrupted. What stays emulated: GPUs
and NCCL over EFA (gloo on CPU instead), pyxis and Slurm (tests/jobs/test_train_sbatch.py runs the batch script on a
real Slurm), /fsx (a temporary directory).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "train.py"
TINY = ["--d-model", "64", "--layers", "2", "--heads", "4", "--seq-len", "64", "--batch-size", "8"]
"""Small enough for CPU, large enough that a step takes ~0.2 s here: a signal lands mid-run, not after the end."""
STEPS = 40
RUN_TIMEOUT = 240


def load_train():
    spec = importlib.util.spec_from_file_location("first_job_train", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = load_train()


# -- one process: checkpoints, data, schedule ------------------------------------------------------------------


def state(step: int) -> dict:
    return {"step": step, "model": {"weight": torch.full((2, 2), float(step))}}


def test_checkpoints_are_written_whole_then_named_by_latest_and_only_the_newest_kept(tmp_path):
    (tmp_path / ".step-00000005.pt.tmp-4242").write_bytes(b"left by a writer killed mid-way")
    for step in (10, 20, 30, 40):
        path = train.save_checkpoint(tmp_path, state(step), keep=2)
    assert path == tmp_path / "step-00000040.pt"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-00000030.pt", "step-00000040.pt"]
    assert (tmp_path / "latest").read_text() == "step-00000040.pt\n"
    loaded, skipped = train.load_checkpoint(tmp_path)
    assert loaded["step"] == 40 and skipped == []


def test_a_write_that_fails_midway_leaves_the_previous_checkpoint_and_no_temporary_file(tmp_path):
    train.save_checkpoint(tmp_path, state(10), keep=3)

    def broken(file):
        file.write(b"half a checkpoint")
        raise OSError("No space left on device")

    with pytest.raises(OSError, match="No space left"):
        train._write_atomically(tmp_path / "step-00000020.pt", broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-00000010.pt"]
    assert train.load_checkpoint(tmp_path)[0]["step"] == 10


def test_a_truncated_newest_checkpoint_is_skipped_with_a_note_and_the_one_before_loads(tmp_path):
    train.save_checkpoint(tmp_path, state(10), keep=3)
    good = (tmp_path / "step-00000010.pt").read_bytes()
    (tmp_path / "step-00000020.pt").write_bytes(good[: len(good) // 2])  # e.g. copied back from S3 half-way
    (tmp_path / "latest").write_text("step-00000020.pt\n")
    loaded, skipped = train.load_checkpoint(tmp_path)
    assert loaded["step"] == 10
    assert len(skipped) == 1 and skipped[0].startswith("step-00000020.pt: ")


def test_latest_naming_a_missing_file_falls_back_to_the_newest_on_disk(tmp_path):
    train.save_checkpoint(tmp_path, state(10), keep=3)
    (tmp_path / "latest").write_text("step-00000099.pt\n")
    loaded, skipped = train.load_checkpoint(tmp_path)
    assert loaded["step"] == 10 and skipped == []


def test_no_checkpoint_directory_means_a_fresh_start(tmp_path):
    assert train.load_checkpoint(tmp_path / "none") == (None, [])


def test_batches_depend_on_step_and_rank_only(tmp_path):
    tokens = train.generated_corpus(seed=1)
    first = train.batch(tokens, step=7, rank=1, world=2, seed=1, size=4, seq_len=16)
    again = train.batch(tokens, step=7, rank=1, world=2, seed=1, size=4, seq_len=16)
    other = train.batch(tokens, step=7, rank=0, world=2, seed=1, size=4, seq_len=16)
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])
    assert torch.equal(first[0][:, 1:], first[1][:, :-1])  # targets are the inputs shifted by one token


def test_files_under_data_are_the_corpus_and_an_empty_directory_falls_back_to_the_generated_one(tmp_path):
    (tmp_path / "shard-0.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 100)
    tokens, source = train.load_tokens(str(tmp_path), seed=1)
    assert bytes(tokens[:9].tolist()) == b"the quick" and source.startswith("4,400 bytes of ")
    tokens, source = train.load_tokens(str(tmp_path / "empty"), seed=1)
    assert source.startswith("generated corpus") and len(tokens) == 1 << 20


def test_bad_arguments_exit_2_with_the_reason(capsys):
    with pytest.raises(SystemExit) as exited:
        train.parse_args(["--d-model", "30", "--heads", "4"])
    assert exited.value.code == 2
    assert "--d-model must be a multiple of --heads" in capsys.readouterr().err


def test_the_doctests_hold():
    import doctest

    assert doctest.testmod(train).failed == 0


# -- two ranks through torchrun ----------------------------------------------------------------------------------


class Run:
    """One torchrun of train.py with two ranks; its JSON log lines as they come, its stderr in a file (a pipe nobody
    reads would stall it)."""

    def __init__(self, checkpoints: Path, *extra: str):
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(TRAIN),
            "--checkpoint-dir", str(checkpoints), "--data", str(checkpoints / "no-data"), "--steps", str(STEPS),
            "--checkpoint-every", "8", "--log-every", "1", "--warmup", "5", "--lr", "3e-3", *TINY, *extra,
        ]  # fmt: skip
        checkpoints.mkdir(parents=True, exist_ok=True)
        self.stderr_file = (checkpoints.parent / f"torchrun-{time.monotonic_ns()}.err").open("w+")
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "GLOO_SOCKET_IFNAME": "lo"},
        )
        self.events: list[dict] = []

    def read_until(self, predicate) -> dict | None:
        """Events until one satisfies `predicate` (returned) or the output ends (None)."""
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))
                if predicate(self.events[-1]):
                    return self.events[-1]
        return None

    def at_step(self, step: int) -> None:
        found = self.read_until(lambda event: event["event"] == "step" and event["step"] >= step)
        assert found is not None, self.stderr()

    def finish(self) -> int:
        # a rank stuck in a collective keeps stdout open: the watchdog bounds the read too, so a hang fails the test
        watchdog = threading.Timer(RUN_TIMEOUT, self.signal_all, args=(signal.SIGKILL,))
        watchdog.start()
        try:
            self.read_until(lambda event: False)
            return self.process.wait(timeout=RUN_TIMEOUT)
        finally:
            watchdog.cancel()
            self.signal_all(signal.SIGKILL)

    def stderr(self) -> str:
        self.stderr_file.seek(0)
        return self.stderr_file.read()[-4000:]

    def workers(self) -> list[int]:
        """The training processes: torchrun's children (found in /proc by their parent)."""
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == self.process.pid:
                    children.append(int(stat.parent.name))
        return children

    def signal_all(self, signum: int) -> None:
        """`signum` to torchrun and its workers at once (each worker runs in a session of its own: torch's
        SubprocessHandler starts them with start_new_session=True, so a process-group signal would miss them)."""
        for pid in [*self.workers(), self.process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def event(self, name: str) -> dict:
        found = [item for item in self.events if item["event"] == name]
        assert found, f"no {name} event in {self.events}\n{self.stderr()}"
        return found[-1]

    def losses(self) -> dict[int, float]:
        return {event["step"]: event["loss"] for event in self.events if event["event"] == "step"}


def assert_same_losses(run: Run, reference: dict[int, float], first: int) -> None:
    losses = run.losses()
    assert min(losses) == first, f"resumed at step {min(losses) - 1}, not {first - 1}"
    for step, loss in losses.items():
        assert loss == pytest.approx(reference[step], abs=1e-5), f"step {step}: {loss} vs {reference[step]}"


def latest_step(checkpoints: Path) -> int:
    return int((checkpoints / "latest").read_text().removeprefix("step-").removesuffix(".pt\n"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[int, float]:
    """Losses of a run that is never interrupted."""
    run = Run(tmp_path_factory.mktemp("reference") / "checkpoints")
    assert run.finish() == 0, run.stderr()
    assert run.event("start")["world_size"] == 2 and run.event("done")["step"] == STEPS
    losses = run.losses()
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert losses[STEPS] < losses[1] - 1.0, f"the generated corpus is learnable: the loss must fall; {losses}"
    return losses


@pytest.mark.real_tools  # two torchrun runs of real DDP training (about 2 minutes of CPU)
def test_killed_warned_terminated_and_resumed_the_run_continues_its_losses_step_for_step(tmp_path, reference):
    checkpoints = tmp_path / "checkpoints"

    # A node lost: every process killed at once, after the first checkpoint.
    lost = Run(checkpoints)
    lost.at_step(10)
    lost.signal_all(signal.SIGKILL)
    lost.finish()
    saved = latest_step(checkpoints)
    assert saved in (8, 16, 24, 32), saved

    # Resumed from that checkpoint, then Slurm's time-limit warning: SIGUSR1 to every worker, as srun's tasks get it.
    warned = Run(checkpoints)
    assert warned.read_until(lambda e: e["event"] == "resume")["step"] == saved
    warned.at_step(saved + 3)
    for pid in warned.workers():
        os.kill(pid, signal.SIGUSR1)
    assert warned.finish() != 0  # torchrun reports its workers' exit status 3 as a failure
    stopped = warned.event("stop")
    assert (stopped["signal"], stopped["exit_status"]) == ("SIGUSR1", train.EXIT_INTERRUPTED)
    assert warned.event("checkpoint") == {
        "event": "checkpoint",
        "step": stopped["step"],
        "path": str(checkpoints / train.checkpoint_name(stopped["step"])),
        "reason": "SIGUSR1",
    }
    assert latest_step(checkpoints) == stopped["step"]
    assert_same_losses(warned, reference, first=saved + 1)

    # Resumed again, then scancel or preemption: SIGTERM to torchrun, which passes it on to its workers.
    terminated = Run(checkpoints)
    terminated.at_step(stopped["step"] + 3)
    os.kill(terminated.process.pid, signal.SIGTERM)
    assert terminated.finish() != 0
    assert terminated.event("stop")["signal"] == "SIGTERM"
    assert_same_losses(terminated, reference, first=stopped["step"] + 1)
    again = latest_step(checkpoints)
    assert again == terminated.event("stop")["step"]

    # And once more, to the end.
    final = Run(checkpoints)
    assert final.finish() == 0, final.stderr()
    assert final.event("resume")["step"] == again and final.event("done")["step"] == STEPS
    assert_same_losses(final, reference, first=again + 1)
    names = sorted(path.name for path in checkpoints.iterdir())
    assert names[0] == "latest" and len(names) == 4 and names[-1] == train.checkpoint_name(STEPS), names


def test_a_job_that_asked_for_gpus_fails_with_one_line_when_pytorch_sees_none(monkeypatch, capsys):
    """train.sbatch sets FMCLUSTER_DEVICE=cuda on GPU nodes: no GPU then is a broken step, not a CPU run."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("FMCLUSTER_DEVICE", "cuda")
    assert train.main(["--checkpoint-dir", "/nonexistent/never-written", *TINY]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing trained, nothing logged
    [line] = captured.err.splitlines()
    assert line.startswith("train.py: rank 0: --device cuda (FMCLUSTER_DEVICE) but PyTorch sees no GPU")
    monkeypatch.delenv("FMCLUSTER_DEVICE")
    assert train.parse_args([]).device == "auto"


def test_data_is_read_only_up_to_the_cap_and_the_tree_is_listed_only_until_it_is_reached(tmp_path, monkeypatch):
    """A file far larger than memory (sparse: 64 GiB of holes) gives only the capped bytes, and the directories after
    the one that filled the cap are never listed (a dataset tree on Lustre can hold millions of files)."""
    monkeypatch.setattr(train, "MAX_DATA_BYTES", 8192)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".hidden").write_bytes(b"x" * 4096)
    (tmp_path / "a" / "shard-0").write_bytes(b"y" * 4096)
    with open(tmp_path / "a" / "shard-1", "wb") as file:
        file.truncate(64 << 30)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "shard-2").write_bytes(b"z" * 4096)
    listed = []
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: listed.append(Path(path).name) or scandir(path))
    tokens, source = train.load_tokens(str(tmp_path), seed=1)
    assert source.startswith("8,192 bytes of ") and len(tokens) == 8192
    assert bytes(tokens[:4096].tolist()) == b"y" * 4096 and not any(tokens[4096:].tolist())  # the holes read as 0
    assert listed == [tmp_path.name, "a"]  # b was never listed


def test_the_default_checkpoint_directory_is_the_users_own(monkeypatch):
    """Users share /fsx: one user's first-job must not resume from, or prune, another's checkpoints."""
    monkeypatch.setenv("SLURM_JOB_NAME", "first-job")
    monkeypatch.setenv("SLURM_JOB_USER", "alice")
    assert train.parse_args([]).checkpoint_dir == "/fsx/checkpoints/alice/first-job"
    monkeypatch.setenv("SLURM_JOB_USER", "bob")
    assert train.parse_args([]).checkpoint_dir == "/fsx/checkpoints/bob/first-job"
    monkeypatch.delenv("SLURM_JOB_USER")
    monkeypatch.setenv("LOGNAME", "carol")  # getpass.getuser() reads LOGNAME first
    assert train.parse_args([]).checkpoint_dir == "/fsx/checkpoints/carol/first-job"
