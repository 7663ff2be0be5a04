#!/usr/bin/env python3
"""train.py: fmcluster's first training job: a small decoder-only transformer, data parallel (PyTorch DDP).

Runs the same on a cluster's GPUs (NCCL over EFA, one process per GPU, started by `srun` in train.sbatch) and on a
laptop's CPU (gloo), e.g. two processes through torchrun:

    torchrun --nproc-per-node 2 train.py --checkpoint-dir /tmp/first-job --steps 200

Data: every regular file under --data (default /fsx/datasets, the file system's S3 link), read as bytes (a byte-level
vocabulary of 256, so any text corpus works as it is); when there is none, a generated corpus (runs of counting
bytes: easy to learn, so the loss visibly falls). Batches are drawn from a generator seeded by (seed, step, rank), so
a resumed run sees exactly the batches the interrupted one would have.

Checkpoints: rank 0 writes `step-<N>.pt` (model, optimizer, step) into --checkpoint-dir (default
/fsx/checkpoints/<user>/<job name>: each user's own) every --checkpoint-every steps and when the job is asked to stop.
Each is written to a temporary file in the same directory, flushed to disk and renamed into place, and then `latest` is
replaced the same way: a crash at any moment leaves the previous checkpoint whole and `latest` naming a complete file
(a temporary file a killed writer left behind is removed by the next save). The newest --keep checkpoints are kept. On
start every rank loads the newest readable checkpoint and continues from its step.

Stopping: SIGUSR1 (Slurm's `--signal=USR1@SECONDS` before the time limit) or SIGTERM (scancel, preemption, torchrun
passing on its own SIGTERM) on any rank makes every rank stop after the same step (the ranks agree through an
all-reduce every step), rank 0 checkpoints, and the job exits with status 3 (EXIT_INTERRUPTED); submitting it again
resumes. A finished run exits 0; one asked for a GPU (--device cuda, FMCLUSTER_DEVICE=cuda) that PyTorch does not
see exits 1 with one line saying so, before it trains.

Log: one JSON object per line on rank 0's stdout: {"event": "step", "step", "loss", "lr", "tokens_per_second"},
and "start", "resume", "checkpoint", "stop", "done" events.
"""

from __future__ import annotations

import argparse
import getpass
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

VOCAB = 256
"""Byte-level tokens: any file is a token stream as it is."""
EXIT_INTERRUPTED = 3
"""Exit status after a stop request was honoured with a checkpoint (not finished: submit again to resume)."""
LATEST = "latest"
"""The file naming the newest complete checkpoint."""
MAX_DATA_BYTES = 256 * 1024 * 1024
"""At most this much of --data is read (the first files in sorted order): a first job, not a data pipeline."""
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


def job_user(environ: Mapping[str, str]) -> str:
    """Who runs the job: Slurm's SLURM_JOB_USER, else the login name (getpass: LOGNAME, USER, ..., the password
    database), else the uid: each user's checkpoints go under a directory of their own.

    >>> job_user({"SLURM_JOB_USER": "alice"})
    'alice'
    """
    if environ.get("SLURM_JOB_USER"):
        return environ["SLURM_JOB_USER"]
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name variable and a uid the container's password database lacks
        return f"uid-{os.getuid()}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    job = os.environ.get("SLURM_JOB_NAME", "first-job")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", default="/fsx/datasets", help="files to train on; none: a generated corpus")
    parser.add_argument("--checkpoint-dir", default=f"/fsx/checkpoints/{job_user(os.environ)}/{job}",
                        help="where checkpoints go (default: /fsx/checkpoints/<user>/<job name>)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps in all")
    parser.add_argument("--checkpoint-every", type=int, default=200, help="steps between checkpoints")
    parser.add_argument("--keep", type=int, default=3, help="checkpoints kept (the newest)")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per rank and step")
    parser.add_argument("--seq-len", type=int, default=256, help="tokens per sequence")
    parser.add_argument("--d-model", type=int, default=256, help="model width")
    parser.add_argument("--layers", type=int, default=4, help="transformer blocks")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument("--lr", type=float, default=3e-4, help="peak learning rate (AdamW)")
    parser.add_argument("--warmup", type=int, default=100, help="steps of linear warm-up before cosine decay")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default=os.environ.get("FMCLUSTER_DEVICE", "auto"),
                        help="cuda: fail unless PyTorch sees a GPU (train.sbatch sets FMCLUSTER_DEVICE=cuda on GPU "
                        "nodes); auto: a GPU when there is one, else the CPU")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1234, help="seeds the model and the batches")
    parser.add_argument("--log-every", type=int, default=10, help="steps between log lines")
    args = parser.parse_args(argv)
    for name in ("steps", "checkpoint_every", "keep", "batch_size", "seq_len", "d_model", "layers", "heads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.d_model % args.heads:
        parser.error("--d-model must be a multiple of --heads")
    return args


# -- where this process sits ---------------------------------------------------------------------------------------


def distributed_env(environ: Mapping[str, str]) -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's variables, else Slurm's (one task per GPU under srun).

    >>> distributed_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    (3, 8, 1)
    >>> distributed_env({"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1"})
    (9, 16, 1)
    >>> distributed_env({})
    (0, 1, 0)
    """
    if "RANK" in environ:
        return int(environ["RANK"]), int(environ["WORLD_SIZE"]), int(environ.get("LOCAL_RANK", "0"))
    if "SLURM_PROCID" in environ:
        return int(environ["SLURM_PROCID"]), int(environ["SLURM_NTASKS"]), int(environ.get("SLURM_LOCALID", "0"))
    return 0, 1, 0


# -- data ----------------------------------------------------------------------------------------------------------


def load_tokens(data_dir: str, seed: int) -> tuple[torch.Tensor, str]:
    """The token stream (uint8) and where it came from: the files under `data_dir`, or a generated corpus."""
    chunks: list[bytes] = []
    size = 0
    for path in data_files(Path(data_dir)):
        with open(path, "rb") as file:
            chunk = file.read(MAX_DATA_BYTES - size)  # at most what is still wanted, however large the file
        chunks.append(chunk)
        size += len(chunk)
        if size >= MAX_DATA_BYTES:
            break  # data_files is a generator: the rest of the tree is never listed
    data = b"".join(chunks)
    if len(data) > 2 * 1024:
        return torch.frombuffer(bytearray(data), dtype=torch.uint8), f"{size:,} bytes of {data_dir}"
    return generated_corpus(seed), "generated corpus (no data under --data)"


def data_files(directory: Path) -> Iterator[Path]:
    """The regular files not named .* under `directory` in sorted order (depth first, each directory's entries sorted;
    symbolic links to directories not followed), listed one directory at a time as they are consumed: a reader that
    stops early lists no further."""
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from data_files(Path(entry.path))
        elif entry.is_file() and not entry.name.startswith("."):
            yield Path(entry.path)


def generated_corpus(seed: int, length: int = 1 << 20) -> torch.Tensor:
    """Runs of counting bytes (k, k+1, k+2, ... mod 256) of random start and length: learnable, deterministic."""
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, VOCAB, (length // 16,), generator=generator)
    run_lengths = torch.randint(8, 64, (length // 16,), generator=generator)
    pieces, total = [], 0
    for start, run in zip(starts.tolist(), run_lengths.tolist(), strict=True):
        pieces.append((torch.arange(run) + start) % VOCAB)
        total += run
        if total >= length:
            break
    return torch.cat(pieces)[:length].to(torch.uint8)


def batch(tokens: torch.Tensor, *, step: int, rank: int, world: int, seed: int, size: int, seq_len: int):
    """Inputs and targets of one rank at one step: the same on every run, so a resumed run continues exactly."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step * world + rank)
    starts = torch.randint(0, len(tokens) - seq_len - 1, (size,), generator=generator)
    rows = torch.stack([tokens[s : s + seq_len + 1] for s in starts.tolist()]).long()
    return rows[:, :-1], rows[:, 1:]


# -- model ---------------------------------------------------------------------------------------------------------


class Decoder(nn.Module):
    """A GPT-style decoder: token and position embeddings, pre-norm causal self-attention blocks, tied output."""

    def __init__(self, *, d_model: int, layers: int, heads: int, seq_len: int):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, d_model)
        self.positions = nn.Embedding(seq_len, d_model)
        block = nn.TransformerEncoderLayer(
            d_model, heads, dim_feedforward=4 * d_model, dropout=0.0, activation="gelu", batch_first=True,
            norm_first=True,
        )  # fmt: skip
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)
        for embedding in (self.tokens, self.positions):
            nn.init.normal_(embedding.weight, std=0.02)  # GPT-2's scale: the tied output starts near uniform

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        length = inputs.shape[1]
        hidden = self.tokens(inputs) + self.positions(torch.arange(length, device=inputs.device))
        hidden = self.blocks(hidden, mask=self.causal[:length, :length], is_causal=True)
        return self.norm(hidden) @ self.tokens.weight.T


def learning_rate(step: int, *, peak: float, warmup: int, steps: int) -> float:
    """Linear warm-up to `peak`, then cosine decay to a tenth of it: a function of the step alone.

    >>> learning_rate(0, peak=1.0, warmup=10, steps=100), learning_rate(9, peak=1.0, warmup=10, steps=100)
    (0.1, 1.0)
    >>> round(learning_rate(100, peak=1.0, warmup=10, steps=100), 6)
    0.1
    """
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


# -- checkpoints ---------------------------------------------------------------------------------------------------


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}.pt"


def _write_atomically(path: Path, write) -> None:
    """Write through `write(file)` to a temporary file beside `path`, flush it to disk, rename it over `path`."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)


def save_checkpoint(directory: Path, state: dict, *, keep: int) -> Path:
    """`state` as step-<N>.pt, then `latest` naming it, each atomically; older checkpoints beyond `keep` removed."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / checkpoint_name(state["step"])
    _write_atomically(path, lambda file: torch.save(state, file))
    _write_atomically(directory / LATEST, lambda file: file.write(path.name.encode() + b"\n"))
    for old in sorted(directory.glob("step-*.pt"))[:-keep]:
        old.unlink(missing_ok=True)
    for stale in directory.glob(".*.tmp-*"):  # left by a process killed while writing (not this one's: renamed)
        stale.unlink(missing_ok=True)
    return path


def checkpoint_candidates(directory: Path) -> Iterator[Path]:
    """The checkpoint `latest` names, then every step-*.pt from the newest: what a resume tries, in order."""
    latest = directory / LATEST
    named = None
    if latest.is_file():
        named = directory / latest.read_text().strip()
        if named.is_file():
            yield named
    for path in sorted(directory.glob("step-*.pt"), reverse=True):
        if path != named:
            yield path


def load_checkpoint(directory: Path) -> tuple[dict | None, list[str]]:
    """The newest checkpoint that loads whole, and a note for each one skipped (unreadable or truncated)."""
    skipped = []
    for path in checkpoint_candidates(directory):
        try:
            return torch.load(path, map_location="cpu", weights_only=True), skipped
        except Exception as error:  # a truncated or foreign file: try the next one
            skipped.append(f"{path.name}: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
    return None, skipped


# -- the run -------------------------------------------------------------------------------------------------------


class StopRequest:
    """Remembers the first stop signal; `handle` is the signal handler."""

    def __init__(self) -> None:
        self.signal: int = 0

    def handle(self, signum: int, _frame: object) -> None:
        self.signal = self.signal or signum

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.handle)


def log(rank: int, event: str, **fields: object) -> None:
    if rank == 0:
        print(json.dumps({"event": event, **fields}), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = StopRequest()
    stop.install()
    rank, world, local_rank = distributed_env(os.environ)
    cuda = torch.cuda.is_available() and args.device != "cpu"
    if args.device == "cuda" and not cuda:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        print(f"train.py: rank {rank}: --device cuda (FMCLUSTER_DEVICE) but PyTorch sees no GPU "
              f"(CUDA_VISIBLE_DEVICES={visible}): not training on the CPU instead; does the job step request its "
              "GPUs (srun --gpus-per-node)?", file=sys.stderr, flush=True)  # fmt: skip
        return 1
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.use_deterministic_algorithms(not cuda)  # bit-for-bit resumes on CPU; GPUs keep their fast kernels
    if world > 1:
        # rank and world size given: under srun they come from Slurm's variables, not torchrun's RANK/WORLD_SIZE
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world, timeout=timedelta(minutes=10))

    tokens, source = load_tokens(args.data, args.seed)
    torch.manual_seed(args.seed)
    model = Decoder(d_model=args.d_model, layers=args.layers, heads=args.heads, seq_len=args.seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, fused=False)
    directory = Path(args.checkpoint_dir)
    state, skipped = load_checkpoint(directory)
    for note in skipped:
        log(rank, "skipped-checkpoint", reason=note)
    step = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        log(rank, "resume", step=step, checkpoint=str(directory / checkpoint_name(step)), world_size=world,
            saved_world_size=state.get("world_size"))  # fmt: skip
    parameters = sum(p.numel() for p in model.parameters())
    log(rank, "start", step=step, steps=args.steps, world_size=world, device=device.type, parameters=parameters,
        data=source)  # fmt: skip
    trained = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None) if world > 1 else model

    def checkpoint(reason: str) -> None:
        if rank == 0:
            state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                     "world_size": world, "args": vars(args)}  # fmt: skip
            path = save_checkpoint(directory, state, keep=args.keep)
            log(rank, "checkpoint", step=step, path=str(path), reason=reason)
        if world > 1:
            dist.barrier()

    started, last_step = time.monotonic(), step
    while step < args.steps:
        requested = torch.tensor([stop.signal], dtype=torch.int64, device=device)
        if world > 1:
            dist.all_reduce(requested, op=dist.ReduceOp.MAX)  # every rank stops after the same step
        if requested.item():
            name = signal.Signals(int(requested.item())).name
            checkpoint(name)
            log(rank, "stop", step=step, signal=name, exit_status=EXIT_INTERRUPTED)
            # No destroy_process_group here: every rank exits right after, and a rank whose destroy ran after rank 0
            # (which hosts the rendezvous store) had exited was seen here to wait for minutes, holding the whole step
            # (srun waits for every task) past its time limit (cause unconfirmed). Exiting closes the sockets anyway.
            return EXIT_INTERRUPTED
        lr = learning_rate(step, peak=args.lr, warmup=args.warmup, steps=args.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        inputs, targets = batch(tokens, step=step, rank=rank, world=world, seed=args.seed, size=args.batch_size,
                                seq_len=args.seq_len)  # fmt: skip
        logits = trained(inputs.to(device))
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.to(device).reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        if step % args.log_every == 0 or step == args.steps:
            mean = loss.detach().clone()
            if world > 1:
                dist.all_reduce(mean, op=dist.ReduceOp.AVG if cuda else dist.ReduceOp.SUM)
                mean = mean if cuda else mean / world  # gloo has no AVG
            elapsed = time.monotonic() - started
            rate = (step - last_step) * args.batch_size * args.seq_len * world / max(elapsed, 1e-9)
            log(rank, "step", step=step, loss=round(mean.item(), 6), lr=lr, tokens_per_second=round(rate))
            started, last_step = time.monotonic(), step
        if step % args.checkpoint_every == 0 or step == args.steps:
            checkpoint("periodic" if step < args.steps else "final")
    log(rank, "done", step=step)
    # No destroy_process_group, as on the stop path above: in the suite a rank whose destroy ran after rank 0 had
    # exited was seen to wait in it until the process group's timeout (10 minutes), holding the job (cause unconfirmed);
    # every rank has passed the final checkpoint's barrier here, and exiting closes the sockets anyway.
    return 0


if __name__ == "__main__":
    sys.exit(main())
