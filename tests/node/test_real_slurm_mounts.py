"""The real-Slurm harness's shared mount points (tests/node/real_slurm.py `_shared_mount`), with the real mount(8) and
umount(8) as root.

Why this is tested: every test using a Slurm chroot mounts the chroot's /proc and this checkout at the same paths, in
parallel xdist workers and parallel pytest runs. When each test mounted and unmounted them itself, one test's umount
detached the mount another was mounting over, and eleven 24.11 tests failed in CI with mount(2)'s ENOENT
(2026-12-02). Here several processes enter and leave one shared mount point as fast as they can; each must find the
source's content there every time it is inside, and nothing may stay mounted after the last one left.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.node.real_slurm import _is_mount_point, _shared_mount

pytestmark = pytest.mark.real_tools

USERS = 4
ROUNDS = 25


def _use_repeatedly(source: str, target: str, rounds: int, failures) -> None:
    for _ in range(rounds):
        try:
            with _shared_mount(Path(target), ["--bind", source]):
                for _ in range(3):  # a test uses the mount for a while: look at it three times
                    if (Path(target) / "marker").read_text() != "source":
                        failures.put("the shared mount point did not show its source")
                    time.sleep(0.01)
        except Exception as error:  # reported to the parent, which fails the test
            failures.put(repr(error))
            return


@pytest.fixture
def mount_point(tmp_path):
    """(a source directory holding a marker, a mount point for it); whatever stays mounted there is unmounted
    afterwards, so a failing test leaves nothing behind for pytest's clean-up to trip over."""
    if os.geteuid() != 0:
        pytest.skip("mount and umount need root")
    source, target = tmp_path / "source", tmp_path / "chroot" / "checkout"
    source.mkdir()
    (source / "marker").write_text("source")
    yield source, target
    while _is_mount_point(target):
        subprocess.run(["umount", str(target)], check=True)


def test_parallel_users_of_one_mount_point_always_see_it_mounted_and_the_last_one_unmounts_it(mount_point):
    source, target = mount_point
    context = multiprocessing.get_context("fork")
    failures = context.Queue()
    users = [
        context.Process(target=_use_repeatedly, args=(str(source), str(target), ROUNDS, failures)) for _ in range(USERS)
    ]
    for user in users:
        user.start()
    for user in users:
        user.join(timeout=120)
    reported = []
    while not failures.empty():
        reported.append(failures.get())
    assert reported == []
    assert [user.exitcode for user in users] == [0] * USERS
    assert not _is_mount_point(target)


def test_a_mount_point_left_mounted_by_a_crashed_test_is_reused_and_then_unmounted(mount_point):
    source, target = mount_point
    target.mkdir(parents=True)
    # a test killed before its clean-up left this:
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
    with _shared_mount(target, ["--bind", str(source)]):
        assert (target / "marker").read_text() == "source"
    assert not _is_mount_point(target)
