"""slurm-accounting.sh against a real slurmdbd: the cluster file's users as associations, made once, never removed.

The real test runs the script inside the slurmdbd chroots of tests/node/real_slurmdbd.py (Slurm 24.11.5 and 26.05.5,
PCS's oldest and newest, with Debian's slurmdbd; what stays emulated there is said in that module), so the commands
it sends are judged by slurmdbd itself: `sacctmgr show association` and `sshare` must list what it made, and a second
run must leave slurmdbd's transaction log (`sacctmgr show transactions`, every add or modify slurmdbd accepted) as it
was. A second real test runs slurmctld with the AccountingStorageEnforce fmcluster sets on PCS: a user's job is
refused until the script has made their association, accepted after, and sprio shows its fair-share factor. The
other tests run the script on a pretend node (tests/stub_node.py) for what no slurmdbd is needed to see: an
image without sacctmgr, a slurmdbd that never answers, the timer `install` writes, and a login shell's Slurm
environment.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from fmcluster.config import parse
from fmcluster.config.models import rendered_users
from fmcluster.config.orchestrators import pcs as pcs_rules
from tests.node import ami
from tests.node.real_slurm import RealSlurm
from tests.node.real_slurmdbd import CLUSTER, VERSIONS, real_slurmdbd
from tests.node.test_scripts import NODE_DIR, TOOLS
from tests.stub_node import StubNode, stub_env

SCRIPT = NODE_DIR / "slurm-accounting.sh"
ACCOUNT = "team"
USERS = {"alice": 2001, "bob": 2002}
ASSOCIATION_FORMAT = "format=Cluster,Account,User,Fairshare,QOS,DefaultQOS,ParentName"


def users_file(path: Path, users: dict[str, int]) -> Path:
    """The users as the nodes receive them (the SSM parameter's text, from the cluster file's own renderer)."""
    data = {
        "name": ACCOUNT,
        "region": "us-east-1",
        "availability_zone_id": "use1-az6",
        "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
        "users": [{"name": name, "uid": uid} for name, uid in users.items()],
    }
    path.write_text(rendered_users(parse(data, source="team.yaml").users))
    return path


def parsable(result: subprocess.CompletedProcess) -> list[list[str]]:
    return [line.split("|") for line in result.stdout.splitlines() if line]


@pytest.mark.real_tools
@pytest.mark.parametrize("version", VERSIONS)
def test_associations_are_made_once_kept_for_removed_users_and_left_as_set_by_hand(
    tmp_path: Path, version: str
) -> None:
    node_root = tmp_path / "node"  # the script's state and log (FMCLUSTER_ROOT), not the shared chroot's /var
    node_root.mkdir()
    with real_slurmdbd(tmp_path, version) as dbd:
        env = {"FMCLUSTER_ROOT": str(node_root)}

        def run(*args: str) -> subprocess.CompletedProcess:
            return dbd.command("bash", str(SCRIPT), *args, check=False, env=env)

        def associations() -> list[list[str]]:
            shown = dbd.command("sacctmgr", "--noheader", "--parsable2", "show", "association", ASSOCIATION_FORMAT)
            return sorted(parsable(shown))

        def transactions() -> list[list[str]]:
            return parsable(dbd.command("sacctmgr", "--noheader", "--parsable2", "show", "transactions"))

        qos = dbd.command("sacctmgr", "--noheader", "--parsable2", "show", "qos", "format=Name")
        assert qos.stdout.split() == ["normal"]  # slurmdbd's own, in a new database: the script only names it
        started = time.monotonic()
        first = run("apply", str(users_file(tmp_path / "users", USERS)), ACCOUNT)
        assert first.returncode == 0, first.stderr + dbd.logs()
        made = associations()
        # sacctmgr(1): an account's own association has no user; each user's sits under its account
        assert [CLUSTER, ACCOUNT, "", "1", "normal", "", "root"] in made
        for name in USERS:
            assert [CLUSTER, ACCOUNT, name, "1", "normal", "normal", ""] in made, made
        shares = parsable(dbd.command("sshare", "--noheader", "--parsable2", "--all", "--accounts", ACCOUNT,
                                      "--format=Account,User,RawShares"))  # fmt: skip
        # sshare(1) indents an account by its depth in the tree (" team" under root)
        users = sorted([account.strip(), user, raw] for account, user, raw in shares if user)
        assert users == [[ACCOUNT, name, "1"] for name in sorted(USERS)]

        # docs/operations.md's commands for looking at it run as written (but `sreport -T gres/gpu`: "Invalid TRES
        # given" where AccountingStorageTRES does not track gres/gpu, as here; the docs say so)
        for command in (
            ("sshare", "-a", "-l"),
            ("sacctmgr", "show", "assoc", "format=Cluster,Account,User,Fairshare,QOS,DefaultQOS"),
            ("sacctmgr", "show", "qos", "format=Name,Priority,MaxTRESPU,MaxWall"),
            ("sprio", "-l"),
            ("sacct", "-X", "-S", "now-1days", "-o", "JobID,User,Account,Partition,AllocTRES%40,Elapsed,State"),
            ("sreport", "cluster", "AccountUtilizationByUser", "start=2026-01-01", "-t", "Hours"),
        ):
            done = dbd.command(*command, check=False)
            assert (done.returncode, done.stderr) == (0, ""), command

        logged = transactions()
        second = run("apply", str(tmp_path / "users"), ACCOUNT)
        assert second.returncode == 0, second.stderr
        assert "added" not in second.stderr
        assert transactions() == logged  # slurmdbd was asked to change nothing
        assert associations() == made

        only_alice = run("apply", str(users_file(tmp_path / "users", {"alice": 2001})), ACCOUNT)
        assert only_alice.returncode == 0, only_alice.stderr
        assert associations() == made  # bob's association (and job history) stays
        assert (
            f"bob is no longer in the cluster file: its association in {ACCOUNT} and its job history are kept "
            f"(remove it with: sacctmgr delete user bob account={ACCOUNT})"
        ) in only_alice.stderr
        assert transactions() == logged

        # a share an administrator changed stays as they set it
        dbd.command("sacctmgr", "--immediate", "modify", "user", "where", "name=alice", f"account={ACCOUNT}", "set",
                    "Fairshare=5")  # fmt: skip
        again = run("apply", str(tmp_path / "users"), ACCOUNT)
        assert again.returncode == 0, again.stderr
        assert "bob" not in again.stderr  # the kept association is said once, at the first sync without bob
        shown = dbd.command("sacctmgr", "--noheader", "--parsable2", "show", "association", "where", "user=alice",
                            "format=User,Fairshare")  # fmt: skip
        assert parsable(shown) == [["alice", "5"]]
        assert time.monotonic() - started < 30  # four runs against slurmdbd, each a handful of sacctmgr calls


REFUSED = "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n"
"""What sbatch says of a job outside any association (docs/operations.md quotes it)."""


def submit(dbd: RealSlurm, user: str) -> subprocess.CompletedProcess:
    """`sbatch --uid USER` as root (sbatch(1): root may submit as another user): slurmctld judges the job as USER's."""
    return dbd.command("sbatch", "--parsable", f"--uid={user}", "--wrap=true", check=False)


@pytest.mark.real_tools
@pytest.mark.parametrize("version", VERSIONS)
def test_with_fmclusters_enforcement_only_users_with_an_association_can_submit(tmp_path: Path, version: str) -> None:
    """AccountingStorageEnforce as fmcluster sets it on PCS with orchestrator.accounting_enforce: true
    (fmcluster.config.orchestrators.pcs.ACCOUNTING_ENFORCE), judged by a real slurmctld and slurmdbd: before
    slurm-accounting.sh has run a user's job is refused, after it accepted, with the fair-share factor
    PriorityWeightFairshare gives it (the weight fmcluster cannot set: it is here to show what the docs' advice to set
    it yourself does).

    Emulated: the users are the chroot's own `daemon` and `bin` (slurmctld resolves a job's uid in its own
    /etc/passwd, which has no user of the cluster file's uid range, so the users file names them directly rather
    than through the cluster file's renderer). Here slurmctld knows the users; on PCS, whose slurmctld runs on AWS's
    side, that is unconfirmed, which is why enforcement is opt-in. No slurmd runs, so an accepted job stays pending,
    which is all submission (and sprio, which shows pending jobs) needs."""
    node_root = tmp_path / "node"
    node_root.mkdir()
    with real_slurmdbd(tmp_path, version, AccountingStorageEnforce=pcs_rules.ACCOUNTING_ENFORCE) as dbd:
        shown = dbd.command("scontrol", "show", "config").stdout
        assert re.search(r"^AccountingStorageEnforce\s*=\s*associations,limits,qos$", shown, re.M), shown
        refused = submit(dbd, "daemon")
        assert refused.returncode == 1
        assert refused.stderr == REFUSED, refused.stderr
        users = tmp_path / "users"
        users.write_text("daemon 1 false\n")  # NAME UID ADMIN, as users.py renders them; only NAME is read
        made = dbd.command("bash", str(SCRIPT), "apply", str(users), ACCOUNT, check=False,
                           env={"FMCLUSTER_ROOT": str(node_root)})  # fmt: skip
        assert made.returncode == 0, made.stderr + dbd.logs()
        # slurmctld computes a new association's fair-share factor at its next PriorityCalcPeriod (5 minutes by
        # default; measured here: FairShare 0.000000 in sshare 8 s after the add); a reconfigure computes it now
        dbd.command("scontrol", "reconfigure")
        accepted = submit(dbd, "daemon")
        assert accepted.returncode == 0, accepted.stderr
        job = accepted.stdout.strip()
        shown = dbd.command("scontrol", "show", "job", job, "--oneliner").stdout
        assert f"Account={ACCOUNT} " in shown and " QOS=normal " in shown, shown
        still_refused = submit(dbd, "bin")  # in no association
        assert still_refused.stderr == REFUSED
        root = submit(dbd, "root")  # slurmdbd's own root association: administrators keep running jobs
        assert root.returncode == 0, root.stderr
        factors = dbd.command("sprio", "--noheader", "-j", job, "-o", "%u %F", check=False)
        assert factors.stdout.split()[0] == "daemon", factors.stdout + factors.stderr
        assert int(factors.stdout.split()[1]) > 0  # PriorityWeightFairshare times the job's fair-share factor


class AccountingNode(StubNode):
    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = {**self.env, "AWS_DEFAULT_REGION": "us-east-1"}
        return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, check=False)


def pretend_node(tmp_path: Path, sacctmgr: str | None) -> AccountingNode:
    stubs = {"systemctl": "exit 0", "sleep": "exit 0", **({"sacctmgr": sacctmgr} if sacctmgr is not None else {})}
    return AccountingNode(**stub_env(tmp_path, tools=(*TOOLS, "awk"), stubs=stubs))


def test_an_image_without_sacctmgr_fails_in_one_line(tmp_path: Path) -> None:
    node = pretend_node(tmp_path, sacctmgr=None)
    result = node.run("apply", str(users_file(tmp_path / "users", USERS)), ACCOUNT)
    assert result.returncode == 1
    assert "ERROR: no sacctmgr in this image's Slurm (/usr/bin)" in result.stderr


def test_a_slurmdbd_that_never_answers_fails_after_the_wait_and_adds_nothing(tmp_path: Path) -> None:
    node = pretend_node(tmp_path, sacctmgr='echo "sacctmgr: error: Problem talking to the database" >&2; exit 1')
    result = node.run("apply", str(users_file(tmp_path / "users", USERS)), ACCOUNT, "--wait", "10")
    assert result.returncode == 1
    assert "ERROR: slurmdbd did not answer (sacctmgr show cluster) within 10s; no association made" in result.stderr
    assert len(node.calls("sacctmgr")) == 3  # at once, then after 5 and 10 s
    assert node.calls("sleep") == [["sleep", "5"], ["sleep", "5"]]


def test_install_writes_a_timer_that_syncs_every_ten_minutes(tmp_path: Path) -> None:
    node = pretend_node(tmp_path, sacctmgr="exit 0")
    result = node.run("install", "/fmcluster/team/users", ACCOUNT)
    assert result.returncode == 0, result.stderr
    service = node.path("/etc/systemd/system/fmcluster-slurm-accounting.service").read_text()
    assert "ExecStart=/usr/bin/env bash /opt/fmcluster/node/slurm-accounting.sh sync /fmcluster/team/users team" in (
        service.splitlines()
    )
    timer = node.path("/etc/systemd/system/fmcluster-slurm-accounting.timer").read_text().splitlines()
    assert {"OnBootSec=3min", "OnUnitActiveSec=10min", "WantedBy=timers.target"} <= set(timer)
    assert ["systemctl", "enable", "--now", "fmcluster-slurm-accounting.timer"] in node.calls("systemctl")
    assert node.calls("sacctmgr") == []  # without --now, the timer makes the first associations


def test_the_slurm_environment_of_login_shells_is_used(tmp_path: Path) -> None:
    """PCS puts Slurm on PATH for login shells only, in /etc/profile.d/slurm.sh (FACTS.md, node images): the timer's
    service is no login shell, so the script reads that file itself."""
    node = pretend_node(tmp_path, sacctmgr=None)
    pcs_bin = tmp_path / "pcs-slurm-bin"
    pcs_bin.mkdir()
    node.add_stub("sacctmgr", 'echo "$SLURM_CONF" >"$STUB_STATE/slurm-conf"; [[ "$*" != *show* || "$*" == *cluster* ]]')
    (node.bin / "sacctmgr").rename(pcs_bin / "sacctmgr")
    profile = node.path("/etc/profile.d/slurm.sh")
    profile.parent.mkdir(parents=True)
    profile.write_text(f'PATH="{pcs_bin}:$PATH"\nexport SLURM_CONF=/etc/aws/pcs/slurm.conf\n[ -n "$UNSET_HERE" ]\n')
    result = node.run("apply", str(users_file(tmp_path / "users", USERS)), ACCOUNT)
    assert result.returncode == 0, result.stderr
    assert (node.state / "slurm-conf").read_text() == "/etc/aws/pcs/slurm.conf\n"
    assert "alice added to account team (fair share 1, QoS normal)" in result.stderr


def test_the_timers_sync_uses_the_clusters_slurm_of_several(tmp_path: Path) -> None:
    """The PCS-Ready DLAMI holds several Slurm versions (tests/node/profiles: 25.05 and 25.11) and slurmdbd refuses
    clients newer than itself (Slurm's upgrade guide; aws-hpc-recipes dlami_for_pcs_imagebuilder README: "older clients
    can communicate with newer slurmctld servers, but not vice versa"). The timer's service runs the script with
    systemd's environment, none of node.env's settings in it: the command it states, run that way on a 25.05 cluster,
    calls 25.05's sacctmgr, not the newest. SSM stays emulated (the `aws` stub prints the parameter's value)."""
    node = pretend_node(tmp_path, sacctmgr=None)
    profile = ami.load("pcs-ready-dlami-ubuntu2404")
    ami.build(node, profile)
    assert profile.slurm["versions"] == ["25.05", "25.11"]
    for version in profile.slurm["versions"]:
        sacctmgr = node.path(f"/opt/aws/pcs/scheduler/slurm-{version}/bin/sacctmgr")
        sacctmgr.write_text(f'#!/bin/sh\necho {version} >>"$STUB_STATE/sacctmgr-versions"\n'
                            '[ "$3" != show ] || [ "$4" = cluster ] && echo team\n')  # fmt: skip
        sacctmgr.chmod(0o755)
    node.path("/opt/fmcluster").mkdir(parents=True)
    node.path("/opt/fmcluster/node.env").write_text("AWS_DEFAULT_REGION=us-east-1\nFMCLUSTER_SLURM_VERSION=25.05\n")
    node.set("users", "alice 2001 1\n")
    node.add_stub("aws", 'cat "$STUB_STATE/users"')
    assert node.run("install", "/fmcluster/team/users", ACCOUNT).returncode == 0
    service = node.path("/etc/systemd/system/fmcluster-slurm-accounting.service").read_text().splitlines()
    (exec_start,) = [line.removeprefix("ExecStart=") for line in service if line.startswith("ExecStart=")]
    command = shlex.split(exec_start)
    assert command[:3] == ["/usr/bin/env", "bash", "/opt/fmcluster/node/slurm-accounting.sh"]
    env = {key: value for key, value in node.env.items() if not key.startswith("FMCLUSTER_SLURM")}
    result = subprocess.run(["bash", str(SCRIPT), *command[3:]], env={**env, "AWS_DEFAULT_REGION": "us-east-1"},
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert set((node.state / "sacctmgr-versions").read_text().split()) == {"25.05"}
