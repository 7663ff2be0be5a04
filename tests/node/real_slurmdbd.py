"""A real Slurm accounting database for one test: MariaDB, slurmdbd and a slurmctld that registers its cluster there.

Slurm runs in a Debian chroot that `make test` builds with Debian's slurmdbd (tools/slurm-chroot.sh RELEASE DIR
slurmdbd): /var/cache/fmcluster-test/slurmdbd-trixie (Slurm 24.11.5: PCS's oldest version, and one of the two the
HyperPod AMI carries) and slurmdbd-forky (26.05.5: PCS's newest). MariaDB runs in a bookworm chroot of its own
(/var/cache/fmcluster-test/mariadb-bookworm: MariaDB 10.11; slurmdbd 24.11.5 and 26.05.5 exit at start against
trixie's and forky's MariaDB 11.8.9, error 5027 in `_check_mysql_concat_is_sane`, measured 2026-12-02). Each is
mounted and started as tests/node/real_slurm.py does for slurmctld and slurmd: in the foreground of their own
processes, without systemd, every file under the test's directory, stopped by PID at the end. A machine without
those chroots, or a user other than root, skips the test.

What stays emulated, and why: MariaDB runs on a free port of 127.0.0.1 with `--skip-grant-tables` (no database users
to set up; what is under test is what sacctmgr asks of slurmdbd, not MariaDB's security), and its version is not one
AWS names (HyperPod's controller runs its AMI's MariaDB; PCS's database is AWS's own); no slurmd runs (sacctmgr and
sshare talk to slurmdbd and slurmctld only); slurmctld uses multifactor priority with a fair-share weight
(`PriorityWeightFairshare=10000`), the setting neither AWS service lets fmcluster make (docs/operations.md, "Fair-share
and QoS"), so that `sshare` has factors to show.

Example::

    with real_slurmdbd(tmp_path, "26.05") as dbd:
        print(dbd.command("sacctmgr", "--parsable2", "show", "qos").stdout)
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node.real_slurm import (
    CHROOT_CACHE,
    SEARCH_PATH,
    RealSlurm,
    _free_port,
    _mounted,
    _slurm_conf,
    munge_files,
    stop,
)

CHROOTS = {"24.11": CHROOT_CACHE / "slurmdbd-trixie", "26.05": CHROOT_CACHE / "slurmdbd-forky"}
"""Slurm version -> the chroot of its slurmdbd (FACTS.md, "Machine": trixie 24.11.5, forky 26.05.5)."""
VERSIONS = tuple(CHROOTS)
MARIADB_CHROOT = CHROOT_CACHE / "mariadb-bookworm"
START_TIMEOUT = 40
CLUSTER = "fmtest"


def skip_reason(version: str) -> str | None:
    """Why the real slurmdbd of Slurm `version` cannot run here, or None."""
    if os.geteuid() != 0:
        return "the real slurmdbd needs root (chroot, mount, MariaDB and Slurm as root); run the tests as root"
    for root, daemon in ((CHROOTS[version], "slurmdbd"), (MARIADB_CHROOT, "mariadbd")):
        if not (root / "usr/sbin" / daemon).exists():
            return f"no {daemon} chroot at {root}; `make {root}` builds it (tools/slurm-chroot.sh)"
    return None


def _wait(predicate, what: str, logs) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what} did not happen within {START_TIMEOUT}s\n{logs()}")


@contextlib.contextmanager
def real_slurmdbd(tmp_path: Path, version: str = "24.11", **extra: str) -> Iterator[RealSlurm]:
    """MariaDB, munged, slurmdbd and slurmctld (Slurm `version`, one of VERSIONS) for one test; a `RealSlurm` whose
    `command` runs sacctmgr, sshare, ... against them. `extra`: more slurm.conf settings for slurmctld (e.g.
    AccountingStorageEnforce=...)."""
    reason = skip_reason(version)
    if reason:
        pytest.skip(reason)
    with _mounted(CHROOTS[version], tmp_path), _mounted(MARIADB_CHROOT, tmp_path):
        yield from _run(tmp_path, version, extra)


def _run(tmp_path: Path, version: str, extra: dict[str, str]) -> Iterator[RealSlurm]:
    directory = tmp_path / "dbd"
    for sub in ("state", "spool", "munge", "mysql"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    node = socket.gethostname().split(".")[0]
    munge_dir, key, munge_socket = munge_files(directory)
    mysql_port, dbd_port = _free_port(), _free_port()
    (directory / "plugstack.conf").write_text("")
    (directory / "cgroup.conf").write_text("CgroupPlugin=disabled\n")
    dbd_conf = directory / "slurmdbd.conf"
    dbd_conf.write_text(
        "\n".join(
            (
                "AuthType=auth/munge",
                f"AuthInfo=socket={munge_socket}",
                "DbdHost=localhost",
                "DbdAddr=127.0.0.1",
                f"DbdPort={dbd_port}",
                "SlurmUser=root",
                f"LogFile={directory / 'slurmdbd.log'}",
                f"PidFile={directory / 'slurmdbd.pid'}",
                "StorageType=accounting_storage/mysql",
                "StorageHost=127.0.0.1",
                f"StoragePort={mysql_port}",
                "StorageUser=root",
                "StorageLoc=slurm_acct_db",
                "",
            )
        )
    )
    dbd_conf.chmod(0o600)  # slurmdbd refuses a configuration others can read
    conf = directory / "slurm.conf"
    conf.write_text(
        _slurm_conf(
            directory,
            node,
            munge_socket,
            {
                "ClusterName": CLUSTER,
                "AccountingStorageType": "accounting_storage/slurmdbd",
                "AccountingStorageHost": "127.0.0.1",
                "AccountingStoragePort": str(dbd_port),
                "AccountingStoragePass": str(munge_socket),  # slurm.conf(5): with munge, the socket for slurmdbd
                "PriorityType": "priority/multifactor",
                "PriorityWeightFairshare": "10000",
                **extra,
            },
        )
    )
    env = {"PATH": SEARCH_PATH, "SLURM_CONF": str(conf), "LANG": "C"}
    slurm = RealSlurm(directory, node, env, version, CHROOTS[version])
    mariadb = RealSlurm(directory, node, env, version, MARIADB_CHROOT)  # only its argv: MariaDB's own chroot
    processes: list[subprocess.Popen] = []

    def logs() -> str:
        return "\n".join(
            f"--- {path.name} ---\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(directory.glob("*.log"))
        )

    def start(*argv: str, log: str) -> None:
        output = (directory / log).open("w")
        processes.append(subprocess.Popen(list(argv), env=env, stdout=output, stderr=subprocess.STDOUT))

    try:
        mysql = directory / "mysql"
        subprocess.run(
            [*mariadb.argv("mariadb-install-db"), "--no-defaults", f"--datadir={mysql}", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db", "--force"],
            env=env, capture_output=True, check=True, timeout=60,
        )  # fmt: skip
        start(
            *mariadb.argv("mariadbd"), "--no-defaults", f"--datadir={mysql}", "--user=root", "--skip-grant-tables",
            f"--port={mysql_port}", "--bind-address=127.0.0.1", f"--socket={directory / 'mysql.sock'}",
            f"--pid-file={directory / 'mariadbd.pid'}", log="mariadbd.log",
        )  # fmt: skip
        start(
            *slurm.argv("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={munge_socket}",
            f"--pid-file={munge_dir / 'munged.pid'}", f"--log-file={directory / 'munged.log'}",
            f"--seed-file={munge_dir / 'munged.seed'}", log="munged.out",
        )  # fmt: skip
        _wait(munge_socket.exists, "munged's socket", logs)
        mariadb_log = directory / "mariadbd.log"  # its port opens before it takes logins: wait for it to say so
        _wait(lambda: "ready for connections" in mariadb_log.read_text(errors="replace"), "MariaDB ready", logs)
        start(*slurm.argv("slurmdbd", "-D"), log="slurmdbd.out")
        _wait(lambda: _listening(dbd_port), "slurmdbd listening", logs)
        start(*slurm.argv("slurmctld", "-D", "-f", str(conf)), log="slurmctld.out")

        def registered() -> bool:
            shown = slurm.command("sacctmgr", "--noheader", "--parsable2", "show", "cluster", "format=cluster",
                                  check=False).stdout  # fmt: skip
            return CLUSTER in shown.split()

        _wait(registered, f"cluster {CLUSTER} registered by slurmctld", logs)
        yield slurm
    finally:
        stop(processes)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0
