"""users.sh on the image profiles' model: the cluster file's users made with the real shadow tools.

The machine is built from each profile (tests/node/ami.py: the image's own accounts in /etc/passwd, group, shadow,
gshadow, its sudoers.d and /etc/skel) under FMCLUSTER_ROOT, and users.sh runs Debian's real `useradd`, `groupadd` and
`usermod` on it through their `--prefix` option (shadow 4.6+; Ubuntu 22.04 ships 4.8.1, 24.04 4.13, this machine
4.13), so the passwd, group and shadow lines checked below are what those tools write, not what the script hopes for.

The users' Slurm associations are slurm-accounting.sh's, tested against a real slurmdbd in
tests/node/test_slurm_accounting.py. What stays emulated, and why: `visudo` is not installed here: the sudoers file
is checked against sudoers(5)'s user specification form instead.
`mountpoint` answers from the profile's mounts plus /fsx (mounted by mount-lustre.sh on PCS, by HyperPod itself).
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from fmcluster.config import parse
from fmcluster.config.models import rendered_users
from fmcluster.config.users import NO_USERS
from fmcluster.node_scripts import pcs_steps
from tests.node import ami
from tests.node.test_scripts import NODE_DIR, TOOLS
from tests.stub_node import StubNode, stub_env

SHADOW_TOOLS = ("useradd", "groupadd", "usermod")
USER_TOOLS = (*TOOLS, "awk", "cut", "chown", "tr", "flock")
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILhNKVh6gtWI4uhWApsWulxJTq/vvu90WGGDXD+zeqUn alice@laptop"
FILE = {
    "name": "team",
    "region": "us-east-1",
    "availability_zone_id": "use1-az6",
    "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
    "users": [
        {"name": "alice", "uid": 2001, "admin": True, "ssh_key": ED25519},
        {"name": "bob", "uid": 2002},
    ],
}
MOUNTED = """while IFS= read -r mounted; do [[ "$mounted" == "${!#}" ]] && exit 0; done <"$STUB_STATE/mounted"
exit 1"""


def requires_root() -> None:
    if shutil.which("useradd", path="/usr/sbin:/sbin") is None:
        pytest.skip("the shadow tools (useradd) are not installed")
    if subprocess.run(["id", "-u"], capture_output=True, text=True, check=True).stdout.strip() != "0":
        pytest.skip("useradd --prefix writes as root only; run the tests as root")


class UsersNode(StubNode):
    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = {**self.env, "AWS_DEFAULT_REGION": "us-east-1"}
        command = ["bash", str(NODE_DIR / "users.sh"), *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, check=False)

    def lines(self, name: str) -> list[list[str]]:
        return [line.split(":") for line in self.path(f"/etc/{name}").read_text().splitlines()]

    def line(self, name: str, key: str) -> list[str]:
        return next(fields for fields in self.lines(name) if fields[0] == key)

    def users_file(self, data: dict) -> Path:
        path = self.state / "users"
        path.write_text(rendered_users(parse(data, source="team.yaml").users))
        return path


def make_node(tmp_path: Path, profile_name: str, *, fsx: bool = True) -> UsersNode:
    requires_root()
    node = UsersNode(**stub_env(tmp_path, tools=USER_TOOLS, stubs={}))
    for tool in SHADOW_TOOLS:
        (node.bin / tool).symlink_to(shutil.which(tool, path="/usr/sbin:/sbin"))
    profile = ami.load(profile_name)
    ami.build(node, profile)
    mounted = node.path("/proc/mounts")  # not read by users.sh; mountpoint's answers come from STUB_STATE/mounted
    mounted.parent.mkdir(parents=True, exist_ok=True)
    points = [*profile["mounts"], *(["/fsx"] if fsx else [])]
    node.set("mounted", "".join(f"{node.path(point)}\n" for point in points))
    node.add_stub("mountpoint", MOUNTED)
    for point in points:
        node.path(point).mkdir(parents=True, exist_ok=True)
    return node


@pytest.mark.parametrize("profile", ami.PROFILES)
def test_users_get_their_uid_gid_home_key_and_sudo(tmp_path: Path, profile: str) -> None:
    node = make_node(tmp_path, profile)
    result = node.run("apply", str(node.users_file(FILE)))
    assert result.returncode == 0, result.stderr
    assert node.line("passwd", "alice") == ["alice", "x", "2001", "2001", "", "/fsx/home/alice", "/bin/bash"]
    assert node.line("passwd", "bob") == ["bob", "x", "2002", "2002", "", "/fsx/home/bob", "/bin/bash"]
    assert node.line("group", "alice")[:3] == ["alice", "x", "2001"]
    assert node.line("group", "bob")[:3] == ["bob", "x", "2002"]
    assert node.line("shadow", "alice")[1] == "!"  # useradd's locked password: keys and SSM only, no password login
    assert node.line("passwd", "ubuntu")[2] == "1000"  # the image's own account untouched
    for name, uid in (("alice", 2001), ("bob", 2002)):
        home = node.path(f"/fsx/home/{name}")
        assert (home.stat().st_uid, home.stat().st_gid, home.stat().st_mode & 0o777) == (uid, uid, 0o700)
        assert (home / ".bashrc").stat().st_uid == uid
    key = node.path("/etc/fmcluster/authorized_keys/alice").read_text()
    assert key == " ".join(ED25519.split()[:2]) + "\n"  # the key's comment stays out
    assert not node.path("/etc/fmcluster/authorized_keys/bob").exists()
    assert (
        "AuthorizedKeysFile .ssh/authorized_keys /etc/fmcluster/authorized_keys/%u"
        in node.path("/etc/ssh/sshd_config.d/60-fmcluster-users.conf").read_text().splitlines()
    )
    sudoers = node.path("/etc/sudoers.d/90-fmcluster-users")
    specs = [line for line in sudoers.read_text().splitlines() if not line.startswith("#")]
    assert specs == ["alice ALL=(ALL) NOPASSWD:ALL"]
    # sudoers(5): User_List Host_List = (Runas_List) Tag_Spec: Cmnd_List; files in sudoers.d 0440
    assert all(re.fullmatch(r"[a-z_][a-z0-9_-]* ALL=\(ALL\) NOPASSWD:ALL", spec) for spec in specs)
    assert sudoers.stat().st_mode & 0o777 == 0o440


@pytest.mark.parametrize("profile", ami.PROFILES)
def test_second_run_changes_nothing_and_a_removed_user_is_locked(tmp_path: Path, profile: str) -> None:
    node = make_node(tmp_path, profile)
    users = node.users_file(FILE)
    assert node.run("apply", str(users)).returncode == 0
    before = {name: node.path(f"/etc/{name}").read_text() for name in ("passwd", "group", "shadow", "gshadow")}
    result = node.run("apply", str(users))
    assert result.returncode == 0, result.stderr
    assert {name: node.path(f"/etc/{name}").read_text() for name in before} == before
    assert " added" not in result.stderr
    without_alice = {**FILE, "users": FILE["users"][1:]}
    result = node.run("apply", str(node.users_file(without_alice)))
    assert result.returncode == 0, result.stderr
    assert "user alice locked: no longer in the cluster file (home kept)" in result.stderr
    assert node.line("shadow", "alice")[7] == "1"  # expired (shadow(5): days since 1970)
    assert node.line("passwd", "alice")[6] == "/usr/sbin/nologin"
    assert not node.path("/etc/sudoers.d/90-fmcluster-users").exists()
    assert not node.path("/etc/fmcluster/authorized_keys/alice").exists()
    assert node.path("/fsx/home/alice").is_dir()
    result = node.run("apply", str(node.users_file(FILE)))  # listed again: unlocked
    assert "user alice unlocked (listed again)" in result.stderr
    assert node.line("shadow", "alice")[7] == ""
    assert node.line("passwd", "alice")[6] == "/bin/bash"


def test_a_uid_the_image_holds_fails_that_user_in_one_line(tmp_path: Path) -> None:
    """A custom image with an account of its own at uid 2002 (stated by the test): bob fails, alice is made."""
    node = make_node(tmp_path, "pcs-ready-dlami-ubuntu2404")
    with node.path("/etc/passwd").open("a") as passwd:
        passwd.write("svc:x:2002:2002::/home/svc:/bin/bash\n")
    with node.path("/etc/group").open("a") as group:
        group.write("svc:x:2002:\n")
    result = node.run("apply", str(node.users_file(FILE)))
    assert result.returncode == 1
    assert "ERROR: user bob: gid 2002 belongs to group svc on this image" in result.stderr
    assert node.line("passwd", "alice")[2] == "2001"


def test_without_a_shared_file_system_homes_are_local_with_a_warning(tmp_path: Path) -> None:
    node = make_node(tmp_path, "pcs-ready-dlami-ubuntu2404", fsx=False)
    result = node.run("apply", str(node.users_file(FILE)))
    assert result.returncode == 0, result.stderr
    assert (
        "WARN: no shared file system at /fsx: homes are under /home, local to this node (files written on one node "
        "are not seen on another)"
    ) in result.stderr
    assert node.line("passwd", "alice")[5] == "/home/alice"
    assert node.path("/home/alice").stat().st_uid == 2001


def test_sync_reads_the_users_from_ssm(tmp_path: Path) -> None:
    node = make_node(tmp_path, "hyperpod-dlami-ubuntu2204")
    node.set("users", rendered_users(parse(FILE, source="team.yaml").users))
    node.add_stub("aws", 'cat "$STUB_STATE/users"')
    result = node.run("sync", "/fmcluster/team/users")
    assert result.returncode == 0, result.stderr
    assert node.calls("aws")[0][:6] == ["aws", "ssm", "get-parameter", "--region", "us-east-1", "--name"]
    assert node.line("passwd", "alice")[2] == "2001"


def test_the_parameter_without_users_makes_nobody_and_succeeds(tmp_path: Path) -> None:
    """The users step runs on every node from the first deploy; before any user is listed the parameter holds only
    `NO_USERS` (an SSM parameter cannot be empty), which must be nothing to do, not a user named '#'."""
    node = make_node(tmp_path, "pcs-ready-dlami-ubuntu2404")
    node.set("users", NO_USERS)
    node.add_stub("aws", 'cat "$STUB_STATE/users"')
    before = (node.lines("passwd"), node.lines("group"))
    result = node.run("sync", "/fmcluster/team/users")
    assert result.returncode == 0, result.stderr
    assert "INFO: users: none; admins: none" in result.stderr
    assert (node.lines("passwd"), node.lines("group")) == before


PARAMETER = "/fmcluster/team/users"
WITH_CAROL = {**FILE, "users": [FILE["users"][0], {"name": "carol", "uid": 2003}]}


def users_step(*, lustre: bool) -> list[str]:
    """users.sh's arguments in a PCS node's users step (node_scripts.pcs_steps), with Lustre or without."""
    shared = {"lustre_dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "lustre_mount_name": "abcdefgh"}
    steps = pcs_steps(bundle_s3_uri="s3://bucket/bundle.zip", users_parameter=PARAMETER, **(shared if lustre else {}))
    (arguments,) = [arguments for step, arguments in steps if step is not None and step.name == "users"]
    return arguments


def timer_node(tmp_path: Path, profile: str, *, lustre: bool = True) -> tuple[UsersNode, list[str]]:
    """A node after `users.sh install` as its boot step runs it, and the command its timer's service runs.

    SSM stays emulated, as in the sync tests above: the `aws` stub prints STUB_STATE/users, the parameter's value
    (`aws ssm get-parameter ... --query Parameter.Value --output text` prints the value alone); systemctl is a stub
    (no systemd here) that records its calls."""
    node = make_node(tmp_path, profile)
    node.add_stub("systemctl")
    node.add_stub("aws", 'cat "$STUB_STATE/users"')
    node.set("users", rendered_users(parse(FILE, source="team.yaml").users))
    result = node.run(*users_step(lustre=lustre))
    assert result.returncode == 0, result.stderr
    service = node.path("/etc/systemd/system/fmcluster-users.service").read_text().splitlines()
    (exec_start,) = [line.removeprefix("ExecStart=") for line in service if line.startswith("ExecStart=")]
    command = shlex.split(exec_start)
    assert command[:3] == ["/usr/bin/env", "bash", "/opt/fmcluster/node/users.sh"]  # node_files: /opt/fmcluster/node
    return node, command[3:]


def verify_units(directory: Path, *units: str) -> None:
    """The real `systemd-analyze verify` on the units written: it prints each setting it cannot parse (and ignores
    it: a misspelled OnUnitActiveSec would leave a timer that never fires) while still exiting 0."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    result = subprocess.run([analyze, "verify", *(str(directory / unit) for unit in units)], capture_output=True,
                            text=True, check=False, timeout=60)  # fmt: skip
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@pytest.mark.parametrize("profile", ami.PROFILES)
def test_the_timer_applies_the_users_only_when_the_parameter_changed(tmp_path: Path, profile: str) -> None:
    node, timer_command = timer_node(tmp_path, profile)
    assert timer_command == ["sync", PARAMETER, "--home-base", "/fsx/home"]
    timer = node.path("/etc/systemd/system/fmcluster-users.timer").read_text().splitlines()
    # systemd.timer(5): RandomizedDelaySec as long as the interval spreads the nodes' SSM reads over all of it, and
    # FixedRandomDelay=yes (systemd 247; Ubuntu 22.04 has 249, 24.04 255) keeps each node's offset, so no two reads
    # of one node come closer than the interval
    assert {"OnUnitActiveSec=10min", "RandomizedDelaySec=10min", "FixedRandomDelay=yes"} <= set(timer)
    assert "WantedBy=timers.target" in timer
    assert ["systemctl", "enable", "--now", "fmcluster-users.timer"] in node.calls("systemctl")
    assert node.line("passwd", "bob")[2] == "2002"  # the install's own sync
    verify_units(node.path("/etc/systemd/system"), "fmcluster-users.timer", "fmcluster-users.service")

    accounts = {name: node.path(f"/etc/{name}").read_text() for name in ("passwd", "group", "shadow", "gshadow")}
    result = node.run(*timer_command)  # the timer fires; the parameter is as it was
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert {name: node.path(f"/etc/{name}").read_text() for name in accounts} == accounts

    node.set("users", rendered_users(parse(WITH_CAROL, source="team.yaml").users))  # deployed: carol in, bob out
    result = node.run(*timer_command)
    assert result.returncode == 0, result.stderr
    assert re.search(rf"INFO: users of {PARAMETER} changed \(sha256 [0-9a-f]{{12}}, was [0-9a-f]{{12}}\): applying",
                     result.stderr)  # fmt: skip
    assert node.line("passwd", "carol") == ["carol", "x", "2003", "2003", "", "/fsx/home/carol", "/bin/bash"]
    assert node.path("/fsx/home/carol").stat().st_uid == 2003
    assert "user bob locked: no longer in the cluster file (home kept)" in result.stderr
    assert node.line("passwd", "bob")[6] == "/usr/sbin/nologin"
    assert node.path("/fsx/home/bob").is_dir()
    assert node.run(*timer_command).stderr == ""  # changed once, applied once


def test_a_listed_user_who_fails_this_time_is_kept_not_locked_as_removed(tmp_path: Path) -> None:
    """A sync where an existing user's apply fails (here the chown of bob's home, refused as coreutils' chown refuses:
    "changing ownership of '...': Operation not permitted", exit 1) fails that user and the sync, but bob is still in
    the file: he keeps his shell and key and stays in the state file, so the next sync retries him; locking is only for
    users the file no longer lists."""
    node, timer_command = timer_node(tmp_path, "pcs-ready-dlami-ubuntu2404")
    node.add_stub(
        "chown",
        'case "$*" in *fsx/home/bob*) echo "chown: changing ownership of \'${*: -1}\': Operation not permitted" >&2; '
        'exit 1;; esac; exec /usr/bin/chown "$@"',
    )
    grown = {**FILE, "users": [*FILE["users"], {"name": "carol", "uid": 2003}]}  # a change, so the sync applies
    node.set("users", rendered_users(parse(grown, source="team.yaml").users))
    result = node.run(*timer_command)
    assert result.returncode == 1
    assert "ERROR: user bob: not applied (exit status 1); the next sync tries again" in result.stderr
    assert "locked" not in result.stderr
    assert node.line("passwd", "bob")[6] == "/bin/bash"
    assert "bob" in node.path("/var/lib/fmcluster/users").read_text().split()
    assert node.line("passwd", "carol")[2] == "2003"


def test_while_the_file_system_is_not_mounted_the_timer_moves_no_home(tmp_path: Path) -> None:
    node, timer_command = timer_node(tmp_path, "hyperpod-dlami-ubuntu2204")
    node.set("mounted", "")  # /fsx gone for a moment (a client eviction, an admin's umount)
    node.set("users", rendered_users(parse(WITH_CAROL, source="team.yaml").users))
    result = node.run(*timer_command)
    assert result.returncode == 1
    assert (
        "ERROR: the homes are under /fsx/home, but nothing is mounted at /fsx now: users not synced (the next sync "
        "tries again)"
    ) in result.stderr
    assert not [fields for fields in node.lines("passwd") if fields[0] == "carol"]
    assert node.line("passwd", "alice")[5] == "/fsx/home/alice"
    node.set("mounted", f"{node.path('/fsx')}\n")  # back: the next sync applies what it missed
    result = node.run(*timer_command)
    assert result.returncode == 0, result.stderr
    assert node.line("passwd", "carol")[5] == "/fsx/home/carol"


def test_a_failed_sync_is_tried_again_even_when_nothing_changed(tmp_path: Path) -> None:
    """A user the image blocks (a custom image's uid 2003: stated by the test) fails; after the image is fixed, the
    next timer run applies the same parameter again instead of calling it unchanged."""
    node, timer_command = timer_node(tmp_path, "pcs-ready-dlami-ubuntu2404")
    with node.path("/etc/passwd").open("a") as passwd:
        passwd.write("svc:x:2003:2003::/home/svc:/bin/bash\n")
    node.set("users", rendered_users(parse(WITH_CAROL, source="team.yaml").users))
    assert node.run(*timer_command).returncode == 1
    lines = node.path("/etc/passwd").read_text().splitlines()
    node.path("/etc/passwd").write_text("".join(f"{line}\n" for line in lines if not line.startswith("svc:")))
    result = node.run(*timer_command)
    assert result.returncode == 0, result.stderr
    assert node.line("passwd", "carol")[2] == "2003"


def test_a_sync_waits_for_another_run_and_gives_up_in_one_line(tmp_path: Path) -> None:
    """The timer's sync, the boot step and an administrator's run take one lock (util-linux flock(1), real here): while
    another holds it, a sync changes nothing and says so once its wait is over."""
    node, timer_command = timer_node(tmp_path, "pcs-ready-dlami-ubuntu2404")
    node.set("users", rendered_users(parse(WITH_CAROL, source="team.yaml").users))
    lock = node.path("/run/lock/fmcluster-users.lock")
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        node.env["FMCLUSTER_USERS_LOCK_WAIT"] = "1"
        result = node.run(*timer_command)
    assert result.returncode == 1
    assert f"ERROR: another users.sh still runs after 1s (lock {lock})" in result.stderr
    assert not [fields for fields in node.lines("passwd") if fields[0] == "carol"]
    assert node.run(*timer_command).returncode == 0  # released: the next sync applies it
    assert node.line("passwd", "carol")[2] == "2003"


@pytest.mark.real_tools  # shadow-utils waits out a held lock, 15 s per lock file, before it gives up
@pytest.mark.parametrize(("lock", "tool", "status"), [("group", "groupadd", 10), ("passwd", "useradd", 1)])
def test_a_shadow_tool_that_fails_fails_the_user_and_the_next_sync_tries_again(
    tmp_path: Path, lock: str, tool: str, status: int
) -> None:
    """The real groupadd and useradd, refused the lock another process holds (shadow-utils' commonio_lock: a lock file
    /etc/group.lock or /etc/passwd.lock that is not theirs; groupadd(8) exit 10 "can't update group file", useradd(8)
    exit 1 "can't update password file", both saying "cannot lock ...; try again later."). The user fails, nothing
    says it was added, the sync fails and records no SHA-256, and the next sync makes the user."""
    node, timer_command = timer_node(tmp_path, "pcs-ready-dlami-ubuntu2404")
    held = node.path(f"/etc/{lock}.lock")
    held.write_text(f"{os.getpid()}")  # a live process's lock, as an admin's vipw or a package's postinst holds it
    node.set("users", rendered_users(parse(WITH_CAROL, source="team.yaml").users))
    result = node.run(*timer_command)
    assert result.returncode == 1
    assert re.search(rf"^{tool}: cannot lock \S+/etc/{lock}; try again later\.$", result.stderr, re.MULTILINE)
    assert re.search(rf"ERROR: line \d+: '{tool} .*' failed with exit status {status}$", result.stderr, re.MULTILINE)
    assert f"ERROR: user carol: not applied (exit status {status}); the next sync tries again" in result.stderr
    assert ("group carol (gid 2003) added" in result.stderr) == (tool == "useradd")  # groupadd ran before it
    assert "user carol (uid" not in result.stderr
    assert not [fields for fields in node.lines("passwd") if fields[0] == "carol"]
    assert node.path("/var/lib/fmcluster/users.sha256").read_text() == "- /fsx/home\n"
    held.unlink()
    result = node.run(*timer_command)
    assert result.returncode == 0, result.stderr
    assert node.line("passwd", "carol") == ["carol", "x", "2003", "2003", "", "/fsx/home/carol", "/bin/bash"]


def test_a_first_sync_before_lustre_is_mounted_fails_and_keeps_no_home_base(tmp_path: Path) -> None:
    """With Lustre in the file, the step passes --home-base /fsx/home: a first sync while /fsx is not mounted yet
    fails and records nothing, rather than settling every home on the node's own /home for good."""
    node = make_node(tmp_path, "pcs-ready-dlami-ubuntu2404", fsx=False)
    node.add_stub("systemctl")
    node.add_stub("aws", 'cat "$STUB_STATE/users"')
    node.set("users", rendered_users(parse(FILE, source="team.yaml").users))
    result = node.run(*users_step(lustre=True))
    assert result.returncode == 1
    assert (
        "ERROR: the homes are under /fsx/home, but nothing is mounted at /fsx now: users not synced (the next sync "
        "tries again)"
    ) in result.stderr
    assert not node.path("/var/lib/fmcluster/users.sha256").exists()
    assert not [fields for fields in node.lines("passwd") if fields[0] == "alice"]
    node.path("/fsx").mkdir(parents=True, exist_ok=True)
    node.set("mounted", f"{node.path('/fsx')}\n")  # mounted now: the timer's next sync makes the homes there
    service = node.path("/etc/systemd/system/fmcluster-users.service").read_text()
    assert "users.sh sync /fmcluster/team/users --home-base /fsx/home" in service
    result = node.run("sync", PARAMETER, "--home-base", "/fsx/home")
    assert result.returncode == 0, result.stderr
    assert node.line("passwd", "alice")[5] == "/fsx/home/alice"


def test_without_lustre_the_step_puts_the_homes_on_home(tmp_path: Path) -> None:
    node, timer_command = timer_node(tmp_path, "pcs-ready-dlami-ubuntu2404", lustre=False)
    assert timer_command == ["sync", PARAMETER, "--home-base", "/home"]
    assert node.line("passwd", "alice")[5] == "/home/alice"
