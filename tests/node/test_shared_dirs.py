"""shared-dirs.sh on the image profiles' model: the directories of the shared file system every user writes in.

The machine is built from each profile (tests/node/ami.py) under FMCLUSTER_ROOT; the script runs the real `mkdir`,
`stat` and `chmod` on it, so the modes checked below are what those tools set (S_ISVTX included). What stays
emulated, and why: `mountpoint` answers from the profile's mounts plus /fsx (mounted by mount-lustre.sh on PCS, by
HyperPod itself), since nothing is mounted here; the file system is a local directory, where mkdir is atomic as it is
on Lustre (POSIX mkdir(2): EEXIST for all but one of concurrent callers).
"""

from __future__ import annotations

import re
import stat
import subprocess
from pathlib import Path

import pytest

from fmcluster.names import CHECKPOINTS_PATH, DATASETS_PATH, JOBS_PATH, LUSTRE_MOUNT_PATH, SHARED_DIRECTORIES
from tests.node import ami
from tests.node.test_scripts import NODE_DIR, TOOLS
from tests.node.test_users import MOUNTED
from tests.stub_node import StubNode, stub_env

REPO = Path(__file__).parents[2]
SHARED = [f"{LUSTRE_MOUNT_PATH}/{name}" for name, _ in SHARED_DIRECTORIES]


class SharedNode(StubNode):
    def start(self, *args: str) -> subprocess.Popen:
        command = ["bash", str(NODE_DIR / "shared-dirs.sh"), *args]
        return subprocess.Popen(command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        command = ["bash", str(NODE_DIR / "shared-dirs.sh"), *args]
        return subprocess.run(command, env=self.env, capture_output=True, text=True, check=False)

    def mode(self, path: str) -> int:
        return stat.S_IMODE(self.path(path).stat().st_mode)


def make_node(tmp_path: Path, profile_name: str = "pcs-ready-dlami-ubuntu2404", *, fsx: bool = True) -> SharedNode:
    node = SharedNode(**stub_env(tmp_path, tools=(*TOOLS, "stat"), stubs={}))
    profile = ami.load(profile_name)
    ami.build(node, profile)
    points = [*profile["mounts"], *([LUSTRE_MOUNT_PATH] if fsx else [])]
    node.set("mounted", "".join(f"{node.path(point)}\n" for point in points))
    node.add_stub("mountpoint", MOUNTED)
    for point in points:
        node.path(point).mkdir(parents=True, exist_ok=True)
    return node


def test_the_directories_are_the_first_jobs():
    """One name source: train.py's defaults and the first-job guide use the directories fmcluster.names makes."""
    train = (REPO / "examples/jobs/train.py").read_text()
    assert f'default="{DATASETS_PATH}"' in train
    assert f'default=f"{CHECKPOINTS_PATH}/{{job_user(os.environ)}}/{{job}}"' in train
    guide = (REPO / "docs/first-job.md").read_text()
    assert f"{JOBS_PATH}/$USER/first-job" in guide  # copied and submitted by one user, in a directory of theirs
    assert "install -d -m 1777" not in guide  # nothing left for an administrator to do by hand
    assert sorted(SHARED) == sorted((CHECKPOINTS_PATH, DATASETS_PATH, JOBS_PATH))


@pytest.mark.parametrize("profile", ami.PROFILES)
def test_every_shared_directory_is_made_sticky_and_world_writable_once(tmp_path: Path, profile: str) -> None:
    node = make_node(tmp_path, profile)
    result = node.run(LUSTRE_MOUNT_PATH)
    assert result.returncode == 0, result.stderr
    for path in SHARED:
        assert node.mode(path) == 0o1777, path  # chmod(2): S_ISVTX | rwx for all
        assert node.path(path).stat().st_uid == 0
        assert f"INFO: made {path} (mode 1777)" in result.stderr
    again = node.run()  # the default mount point is names.LUSTRE_MOUNT_PATH, rendered into lib.sh
    assert again.returncode == 0, again.stderr
    assert "INFO" not in again.stderr
    assert [node.mode(path) for path in SHARED] == [0o1777] * len(SHARED)


def test_a_linked_directory_is_given_its_mode_and_an_administrators_choice_is_kept(tmp_path: Path) -> None:
    """/fsx/datasets as a data repository link leaves it (0755, root's: unconfirmed), /fsx/jobs as an admin set it."""
    node = make_node(tmp_path)
    node.path(DATASETS_PATH).mkdir(mode=0o755)
    node.path(DATASETS_PATH).chmod(0o755)
    node.path(JOBS_PATH).mkdir()
    node.path(JOBS_PATH).chmod(0o2770)
    result = node.run(LUSTRE_MOUNT_PATH)
    assert result.returncode == 0, result.stderr
    assert node.mode(DATASETS_PATH) == 0o1777
    assert f"INFO: {DATASETS_PATH}: mode 1777 (it was 0755, root's)" in result.stderr
    assert node.mode(JOBS_PATH) == 0o2770
    assert f"INFO: {JOBS_PATH} keeps mode 2770 (uid 0), chosen after it was made (fmcluster's is 1777)" in (
        result.stderr
    )


def test_a_chmod_that_fails_fails_the_step_and_says_why(tmp_path: Path) -> None:
    """A chmod the file system refuses (emulated: a root-squashed or read-only export here is not; the stub fails as
    coreutils' chmod does, exit 1 and "chmod: changing permissions of 'FILE': Operation not permitted", chmod.c's
    `error (0, errno, _("changing permissions of %s"), ...)`): the step fails, naming the directory and the reason,
    and never says the mode was set."""
    node = make_node(tmp_path)
    node.path(DATASETS_PATH).mkdir(mode=0o755)
    node.path(DATASETS_PATH).chmod(0o755)
    node.add_stub("chmod", """echo "chmod: changing permissions of '${!#}': Operation not permitted" >&2; exit 1""")
    result = node.run(LUSTRE_MOUNT_PATH)
    assert result.returncode == 1
    assert (
        f"ERROR: {DATASETS_PATH}: mode 1777 not set (it stays 0755, root's): changing permissions of "
        f"'{node.path(DATASETS_PATH)}': Operation not permitted"
    ) in result.stderr
    assert "mode 1777 (it was" not in result.stderr
    assert node.mode(DATASETS_PATH) == 0o755
    assert node.mode(CHECKPOINTS_PATH) == 0o1777  # the others are still made


def test_a_file_in_the_way_fails_in_one_line_and_the_others_are_made(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    node.path(JOBS_PATH).write_text("not a directory\n")
    result = node.run(LUSTRE_MOUNT_PATH)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1
    assert errors[0].endswith(
        f"ERROR: {JOBS_PATH} exists and is not a directory; users cannot write there until it is one (mode 1777)"
    )
    assert node.mode(CHECKPOINTS_PATH) == node.mode(DATASETS_PATH) == 0o1777


def test_a_directory_that_cannot_be_made_says_why(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    node.path(LUSTRE_MOUNT_PATH).rmdir()  # mounted, says mountpoint, yet not there: mkdir's own reason is the line
    result = node.run(LUSTRE_MOUNT_PATH)
    assert result.returncode == 1
    assert (
        f"ERROR: could not make {CHECKPOINTS_PATH}: cannot create directory '{node.path(CHECKPOINTS_PATH)}': No such "
        "file or directory"
    ) in result.stderr


def test_without_a_shared_file_system_nothing_is_made_with_a_warning(tmp_path: Path) -> None:
    """storage.lustre: none: no local /fsx, which train.sbatch would take for a shared directory."""
    node = make_node(tmp_path, fsx=False)
    result = node.run(LUSTRE_MOUNT_PATH)
    assert result.returncode == 0, result.stderr
    assert (
        f"WARN: no shared file system at {LUSTRE_MOUNT_PATH}: no shared directories made (without one, give jobs a "
        "directory every node shares: FMCLUSTER_SHARED_DIR, docs/first-job.md)"
    ) in result.stderr
    assert not node.path(LUSTRE_MOUNT_PATH).exists()


def test_nodes_booting_together_make_each_directory_once(tmp_path: Path) -> None:
    """Four nodes on one file system at the same moment: each directory is made by one of them, none fails."""
    node = make_node(tmp_path)
    runs = [node.start(LUSTRE_MOUNT_PATH) for _ in range(4)]
    outputs = [(run.wait(), run.communicate()[1]) for run in runs]
    assert [status for status, _ in outputs] == [0] * 4, outputs
    made = [line for _, err in outputs for line in err.splitlines() if re.search(r"INFO: made /fsx/\w+ ", line)]
    assert sorted(line.split("made ")[1].split()[0] for line in made) == sorted(SHARED)
    assert [node.mode(path) for path in SHARED] == [0o1777] * len(SHARED)


def test_a_bad_mount_point_is_refused(tmp_path: Path) -> None:
    result = make_node(tmp_path).run("fsx")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: ")
