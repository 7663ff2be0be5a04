"""A real one-node Slurm for testing fmcluster's Slurm pieces, in one of three versions (`SLURMS`):

* "22.05": Debian bookworm's slurm-wlm on this machine itself;
* "24.11": Debian trixie's (24.11.5, PCS's oldest version) and "26.05": Debian forky's (26.05.5, PCS's newest), each in
  a debootstrap chroot that `make test` builds once under /var/cache/fmcluster-test/ (tools/slurm-chroot.sh; FACTS.md,
  "Machine"). A test asking for a chroot that is not there skips, saying how to build it.

`real_slurm(tmp_path, version, **slurm_conf)` starts munged, slurmctld and slurmd in the foreground of their own
processes, without systemd, with every file under `tmp_path` and a slurm.conf holding the given extra settings
(Prolog=..., TaskProlog=...), and stops them by PID afterwards. In a chroot, /proc is mounted and `tmp_path` and this
checkout are bind-mounted at their own paths, so the same paths work inside and out (fmcluster's scripts run from the
checkout, as Slurm runs them); a test unmounts its `tmp_path`, and the last test using a chroot unmounts its /proc
and checkout (`_shared_mount`: tests in parallel share those mount points). The daemons and every command then run
with the chroot's own bash, coreutils and /run. The node offers 4 GPUs as GRES backed by character devices that act
as /dev/null, so Slurm hands jobs GPU indexes (SLURM_JOB_GPUS) as it does on a GPU node; no job touches a GPU.

What stays emulated, and why: GPUs (no GPU here: GRES over /dev/null stand-ins, so Slurm's GPU bookkeeping is real but
nothing runs on a GPU), EFA and Lustre (no EFA device or FSx file system reaches this machine; tests/node/ami.py's
profiles and stubs stand in), and systemd (daemons run in the foreground, as `slurmd -D`).

What needs root (munged --force, SlurmUser=root, SlurmdUser=root, chroot and mount) skips the test with the reason
when not root, as does a machine without slurm-wlm (`make test` installs it). Settings from FACTS.md (Toolchain,
measured on this kind of machine): ProctrackType=proctrack/linuxproc and TaskPlugin=task/none, since there are no
cgroups to manage here.

Example::

    @pytest.mark.parametrize("version", SLURMS)
    def test_something(tmp_path, version):
        with real_slurm(tmp_path, version, TaskProlog="/path/task-prolog.sh") as slurm:
            job = slurm.run_batch("#!/bin/bash\\nenv\\n")
            assert job.state == "COMPLETED"
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
GPUS = 4
START_TIMEOUT = 30
CHECKOUT = Path(__file__).resolve().parents[2]
CHROOT_CACHE = Path("/var/cache/fmcluster-test")
CHROOTS = {"24.11": "trixie", "26.05": "forky"}
"""Slurm version -> the Debian release whose slurm-wlm has it (FACTS.md, "Machine": trixie 24.11.5, forky 26.05.5)."""
SLURMS = ("22.05", *CHROOTS)
"""Every Slurm a test can run against: the host's, then the chroots'."""
SEARCH_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def chroot_dir(version: str) -> Path | None:
    """The chroot holding Slurm `version`, or None for the host's own Slurm."""
    return CHROOT_CACHE / f"slurm-{CHROOTS[version]}" if version in CHROOTS else None


def skip_reason(version: str = "22.05") -> str | None:
    """Why the real Slurm `version` cannot run here, or None."""
    if os.geteuid() != 0:
        return "the real one-node Slurm needs root (munged --force, SlurmUser=root, chroot); run the tests as root"
    root = chroot_dir(version)
    if root is not None and not (root / "usr/sbin/slurmctld").exists():
        return f"no Slurm {version} chroot at {root}; `make test` builds it (tools/slurm-chroot.sh {CHROOTS[version]})"
    missing = [tool for tool in (*DAEMONS, "sbatch", "scontrol", "sacct", "munge") if not _which(tool, root)]
    if missing:
        return f"Debian's slurm-wlm and munge are not installed ({', '.join(missing)}); `make test` installs them"
    return None


def _which(tool: str, root: Path | None = None) -> str | None:
    """`tool`'s path as the (chrooted) system sees it."""
    if root is None:
        return shutil.which(tool, path=SEARCH_PATH)
    found = shutil.which(tool, path=":".join(f"{root}{part}" for part in SEARCH_PATH.split(":")))
    return found[len(str(root)) :] if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Job:
    job_id: str
    state: str
    output: str


@dataclass
class RealSlurm:
    """A running one-node Slurm; `env` is what Slurm's commands need (SLURM_CONF); `root` its chroot, if any."""

    directory: Path
    node: str
    env: dict[str, str]
    version: str = "22.05"
    root: Path | None = None

    def argv(self, *args: str) -> list[str]:
        """`args` as a command line that runs in this Slurm's system (inside its chroot, if it has one)."""
        program = _which(args[0], self.root) or args[0]
        if self.root is None:
            return [program, *args[1:]]
        return ["chroot", str(self.root), program, *args[1:]]

    def command(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(*args), env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=60,
            check=check,
        )  # fmt: skip

    def host_path(self, path: str) -> Path:
        """Where `path` of this Slurm's system is on this machine (e.g. the chroot's /run)."""
        return Path(f"{self.root or ''}{path}")

    def run_batch(
        self,
        script: str,
        *options: str,
        env: dict[str, str] | None = None,
        timeout: float = 60,
        args: tuple[str, ...] = (),
    ) -> Job:
        """Submit `script` with sbatch (`options` before it, `args` after it, for the script), wait for the job to end,
        return its state and output."""
        path = self.directory / f"job-{time.monotonic_ns()}.sh"
        path.write_text(script)
        output = self.directory / f"{path.stem}.out"
        submitted = self.command(
            "sbatch", "--parsable", f"--output={output}", f"--chdir={self.directory}", *options, str(path), *args,
            env=env,
        )  # fmt: skip
        job_id = submitted.stdout.strip().split(";")[0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.command("scontrol", "show", "job", job_id, "--oneliner", check=False).stdout
            state = next((part.split("=", 1)[1] for part in shown.split() if part.startswith("JobState=")), "")
            if state in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}:
                time.sleep(0.5)  # the epilog runs after the job's state is final
                return Job(job_id, state, output.read_text() if output.exists() else "")
            time.sleep(0.3)
        raise AssertionError(f"job {job_id} did not end within {timeout}s:\n{self.logs()}")

    def wait_for_epilog(self, predicate, timeout: float = 20) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.2)
        return predicate()

    def logs(self) -> str:
        return "\n".join(
            f"--- {name}.log ---\n{(self.directory / f'{name}.log').read_text(errors='replace')[-4000:]}"
            for name in DAEMONS
            if (self.directory / f"{name}.log").exists()
        )


def _slurm_conf(
    directory: Path, node: str, munge_socket: Path, extra: dict[str, str], host: str | None = None,
    spool: Path | None = None,
) -> str:  # fmt: skip
    """slurm.conf for one node named `node` on this host (`host`, the controller's name: `node` when omitted), with
    slurmd's spool in `spool` (default: `directory`/spool)."""
    settings = {
        "ClusterName": "fmtest",
        "SlurmctldHost": f"{host or node}(127.0.0.1)",
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": f"socket={munge_socket}",
        "SlurmctldPort": str(_free_port()),
        "SlurmdPort": str(_free_port()),
        "StateSaveLocation": str(directory / "state"),
        "SlurmdSpoolDir": str(spool or directory / "spool"),
        "SlurmctldPidFile": str(directory / "slurmctld.pid"),
        "SlurmdPidFile": str(directory / "slurmd.pid"),
        "SlurmctldLogFile": str(directory / "slurmctld.log"),
        "SlurmdLogFile": str(directory / "slurmd.log"),
        "SlurmdDebug": "debug",
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "SchedulerType": "sched/builtin",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core",
        "GresTypes": "gpu",
        "ReturnToService": "2",
        "MpiDefault": "none",
        "JobCompType": "jobcomp/none",
        "AccountingStorageType": "accounting_storage/none",
        "PlugStackConfig": str(directory / "plugstack.conf"),
        **extra,
    }
    lines = [f"{key}={value}" for key, value in settings.items()]
    cpus = os.cpu_count() or 1
    lines.append(f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 Gres=gpu:{GPUS} State=UNKNOWN")
    lines.append(f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _wait(predicate, what: str, directory: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    logs = RealSlurm(directory, "", {}).logs()
    raise AssertionError(f"{what} did not happen within {START_TIMEOUT}s\n{logs}")


def _is_mount_point(target: Path) -> bool:
    """Whether something is mounted at `target` (a bind mount of the same file system included, which
    os.path.ismount misses): /proc/self/mountinfo's fifth field, with its octal escapes (\\040 for a space)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        points = {re.sub(r"\\([0-7]{3})", lambda escape: chr(int(escape[1], 8)), line.split()[4]) for line in mountinfo}
    return str(target) in points


@contextlib.contextmanager
def _shared_mount(target: Path, mount_args: list[str]) -> Iterator[None]:
    """`target` mounted (`mount MOUNT_ARGS TARGET`) while any test on this machine uses it: the first user mounts
    it, the last one unmounts it.

    A chroot's /proc and this checkout's mount point are the same path for every test that uses the chroot, in every
    xdist worker and every pytest run on the machine. Mounted and unmounted by each test, one test's umount detached
    the mount another test was in the middle of mounting over, and its mount(2) failed with ENOENT (CI, 2026-12-02:
    eleven 24.11 tests on one worker). So users hold a shared flock on a lock file beside `target` for as long as
    they use it; mounting and unmounting happen under the exclusive lock, and only a user that gets the exclusive
    lock without waiting (no one else holds it) unmounts. flock's shared/exclusive conversion is not atomic
    (flock(2)), so a user re-checks the mount once it holds the shared lock. Locks die with their process, so a
    crashed test leaves at worst a mount the next user reuses."""
    target.mkdir(parents=True, exist_ok=True)
    lock = os.open(f"{target}.mount-lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _is_mount_point(target):
                subprocess.run(["mount", *mount_args, str(target)], check=True)
            fcntl.flock(lock, fcntl.LOCK_SH)
            if _is_mount_point(target):
                break
        yield
    finally:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # another test still uses it
        else:
            if _is_mount_point(target):
                subprocess.run(["umount", str(target)], check=False)
        os.close(lock)


@contextlib.contextmanager
def _mounted(root: Path | None, tmp_path: Path) -> Iterator[None]:
    """In the chroot `root`: /proc and this checkout (shared with every other test using the chroot, see
    `_shared_mount`), and `tmp_path` (this test's own), bind-mounted at their own paths; what this test mounted is
    unmounted afterwards, whatever happened."""
    if root is None:
        yield
        return
    own = root / str(tmp_path).lstrip("/")
    with (
        _shared_mount(root / "proc", ["-t", "proc", "proc"]),
        _shared_mount(root / str(CHECKOUT).lstrip("/"), ["--bind", str(CHECKOUT)]),
    ):
        own.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(tmp_path), str(own)], check=True)
        try:
            yield
        finally:
            subprocess.run(["umount", str(own)], check=False)


@contextlib.contextmanager
def real_slurm(
    tmp_path: Path, version: str = "22.05", *, node_name: str | None = None, **extra: str
) -> Iterator[RealSlurm]:
    """Start munged, slurmctld and slurmd (Slurm `version`, one of SLURMS) for one test; stop them by PID at the end,
    and unmount what was mounted, whatever happened. The node is named after this host, or `node_name` (slurmd -N),
    as AWS PCS names its nodes after their node group; its NodeAddr is 127.0.0.1 either way."""
    reason = skip_reason(version)
    if reason:
        pytest.skip(reason)
    root = chroot_dir(version)
    with _mounted(root, tmp_path):
        yield from _run(tmp_path, version, root, extra, node_name)


def stop(processes: list[subprocess.Popen]) -> None:
    """Stop the daemons a test started, newest first, by PID: TERM, then KILL after 15 s."""
    for process in reversed(processes):
        process.terminate()
    for process in reversed(processes):
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def munge_files(directory: Path) -> tuple[Path, Path, Path]:
    """(munge directory, a fresh key, the socket path) under `directory`/munge, with the modes munged insists on."""
    munge_dir = directory / "munge"
    munge_dir.chmod(0o700)
    key = munge_dir / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    return munge_dir, key, munge_dir / "munge.socket"


def _run(
    tmp_path: Path, version: str, root: Path | None, extra: dict[str, str], node_name: str | None
) -> Iterator[RealSlurm]:
    directory = tmp_path / "slurm"
    for sub in ("state", "spool", "dev", "munge"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    host = socket.gethostname().split(".")[0]
    node = node_name or host
    munge_dir, key, munge_socket = munge_files(directory)
    for index in range(GPUS):  # Slurm wants character devices; these behave as /dev/null
        os.mknod(directory / "dev" / f"gpu{index}", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (directory / "gres.conf").write_text(f"Name=gpu File={directory / 'dev'}/gpu[0-{GPUS - 1}]\n")
    (directory / "plugstack.conf").write_text("")
    if root is not None:  # Slurm 24.11+ slurmd loads a cgroup plugin at start; no cgroup tree is mounted here
        (directory / "cgroup.conf").write_text("CgroupPlugin=disabled\n")
    # slurmstepd makes a Unix socket `<spool>/<node>_<job>.<step>` whose path must fit sun_path's 108 bytes; under a
    # long test name tmp_path does not leave room ("Unix socket path ... is too long. (110 > 108)"), so the spool
    # lives in a short directory of the system's own /tmp (the chroot's, if any).
    spool = Path(tempfile.mkdtemp(prefix="slurmd-", dir=f"{root or ''}/tmp"))
    conf = directory / "slurm.conf"
    conf.write_text(_slurm_conf(directory, node, munge_socket, extra, host, spool=Path("/tmp") / spool.name))
    env = {"PATH": SEARCH_PATH, "SLURM_CONF": str(conf), "LANG": "C"}
    slurm = RealSlurm(directory, node, env, version, root)
    processes: list[subprocess.Popen] = []
    try:
        munged = [
            *slurm.argv("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={munge_socket}",
            f"--pid-file={munge_dir / 'munged.pid'}", f"--log-file={directory / 'munged.log'}",
            f"--seed-file={munge_dir / 'munged.seed'}",
        ]  # fmt: skip
        processes.append(subprocess.Popen(munged, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait(munge_socket.exists, "munged's socket", directory)
        for daemon in ("slurmctld", "slurmd"):
            log = (directory / f"{daemon}.out").open("w")
            named = ["-N", node] if daemon == "slurmd" and node_name else []
            processes.append(subprocess.Popen(slurm.argv(daemon, "-D", "-f", str(conf), *named), env=env, stdout=log,
                                              stderr=subprocess.STDOUT))  # fmt: skip

        def node_ready() -> bool:
            shown = slurm.command("scontrol", "show", "node", node, "--oneliner", check=False).stdout
            return "State=IDLE" in shown

        _wait(node_ready, f"node {node} IDLE", directory)
        yield slurm
    finally:
        stop(processes)
        shutil.rmtree(spool, ignore_errors=True)
