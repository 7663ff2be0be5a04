"""The `users` rules and `orchestrator.accounting`, each with the bad value and the exact line `fmcluster validate`
prints (one change to the minimal valid file of test_config_rules per case).

Sources of the expected values: useradd(8) (32-character names, NAME_REGEX), login.defs (UID_MAX 60000), OpenSSH
sshd_config(5) (accepted key types) and RFC 4253 section 6.6 (a key blob starts with its type), botocore ssm
PutParameter (4 KB standard parameters), the SageMaker HyperPod guide "Using an external accounting database"
(accounting always on: MariaDB on the controller). The keys below were made with ssh-keygen 9 on this machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster.config.models import rendered_users
from fmcluster.config.users import RESERVED_NAMES
from tests.unit.test_config_rules import PCS, lines_for, rendered, valid

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILhNKVh6gtWI4uhWApsWulxJTq/vvu90WGGDXD+zeqUn alice@laptop"
ECDSA = (
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBITg9Jf/GkGL6VbnXdfzxJyYPRAC4UtVGV8WR86"
    "NRrUfpH99CRcB2/Q4QZ5IHPvOLxD1L7aKmYqqvZYGxm+5AVY= x"
)
RESERVED = "is a user or group of the node images or of Slurm; choose another name"
"""The cases: base-passwd's groups users, staff, video, operator, backup; the DLAMI's docker; cloud-init's lxd."""
NAME_RULE = "must be a lowercase letter or '_', then lowercase letters, digits, '_' or '-'; got "
LOW_UID = (
    "must be 2000 or more: lower uids belong to the images' system accounts, their login user (ubuntu, 1000) and the "
    "SSM agent's ssm-user (1001 and up); got "
)


def users(*entries: dict) -> dict[str, object]:
    return {"users": list(entries)}


CASES = [
    (users({"name": "Alice", "uid": 2001}), [f"users[0].name: {NAME_RULE}'Alice'"], "name-uppercase"),
    (users({"name": "9lives", "uid": 2001}), [f"users[0].name: {NAME_RULE}'9lives'"], "name-digit-first"),
    (users({"name": "bob$", "uid": 2001}), [f"users[0].name: {NAME_RULE}'bob$'"], "name-machine-account"),
    (users({"name": "a" * 33, "uid": 2001}), ["users[0].name: at most 32 characters (useradd's limit); got 33"], "33"),
    *(
        (users({"name": name, "uid": 2001}), [f"users[0].name: {name!r} {RESERVED}"], f"name-{name}")
        for name in ("ubuntu", "slurm", "users", "staff", "video", "operator", "backup", "docker", "lxd")
    ),
    (users({"name": "alice", "uid": 1000}), [f"users[0].uid: {LOW_UID}1000"], "uid-ubuntu"),
    (users({"name": "alice", "uid": 1001}), [f"users[0].uid: {LOW_UID}1001"], "uid-ssm-user"),
    (users({"name": "alice", "uid": 998}), [f"users[0].uid: {LOW_UID}998"], "uid-system"),
    (
        users({"name": "alice", "uid": 65534}),
        ["users[0].uid: must be at most 60000 (UID_MAX of Debian and Ubuntu; higher ranges are reserved); got 65534"],
        "uid-nobody",
    ),
    (
        users({"name": "alice", "uid": 2001}, {"name": "alice", "uid": 2002}),
        ["users[1].name: 'alice' is users[0].name already; every user needs its own name"],
        "duplicate-name",
    ),
    (
        users({"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2001}),
        ["users[1].uid: 2001 is users[0].uid already; every user needs its own uid"],
        "duplicate-uid",
    ),
    (
        users({"name": "alice", "uid": 2001, "ssh_key": "ssh-dss AAAAB3NzaC1kc3M="}),
        [
            "users[0].ssh_key: key type 'ssh-dss' is not one OpenSSH accepts by default; use one of ssh-ed25519, "
            "ssh-rsa, ecdsa-sha2-nistp256, ecdsa-sha2-nistp384, ecdsa-sha2-nistp521, sk-ssh-ed25519@openssh.com, "
            "sk-ecdsa-sha2-nistp256@openssh.com"
        ],
        "key-type",
    ),
    (
        users({"name": "alice", "uid": 2001, "ssh_key": "AAAAC3NzaC1lZDI1NTE5AAAAILhNKVh6gtWI4uhWApsWulxJTq"}),
        [
            "users[0].ssh_key: must be an OpenSSH public key line: TYPE BASE64 [COMMENT], e.g. ssh-ed25519 "
            "AAAAC3Nza... alice"
        ],
        "key-no-type",
    ),
    (
        users({"name": "alice", "uid": 2001, "ssh_key": "ssh-ed25519 AAAA!!!"}),
        ["users[0].ssh_key: the ssh-ed25519 key's second field is not valid base64"],
        "key-base64",
    ),
    (
        users({"name": "alice", "uid": 2001, "ssh_key": "ssh-ed25519 AAAAC3N"}),
        ["users[0].ssh_key: the ssh-ed25519 key's second field is not valid base64"],
        "key-truncated-base64",
    ),
    (
        users({"name": "alice", "uid": 2001, "ssh_key": "ssh-ed25519 AAAAC3Nz"}),
        ["users[0].ssh_key: the ssh-ed25519 key's data is too short to be a public key"],
        "key-short",
    ),
    (
        users({"name": "alice", "uid": 2001, "ssh_key": "ssh-rsa " + ED25519.split()[1]}),
        ["users[0].ssh_key: the key's data is a 'ssh-ed25519' key, but the line says 'ssh-rsa'"],
        "key-type-mismatch",
    ),
    (
        users({"name": "alice", "uid": 2001, "ssh_key": ED25519 + "\n" + ECDSA}),
        ["users[0].ssh_key: must be one public key on one line (one key per user)"],
        "key-two-lines",
    ),
    (
        users(*({"name": f"user{i}", "uid": 3000 + i, "ssh_key": ECDSA} for i in range(24))),
        [
            "users: the users take 4190 bytes as the nodes receive them (one SSM parameter), over the 4096 of a "
            "standard parameter; list fewer users or use shorter keys (ssh-ed25519 keys take about 80 characters, "
            "RSA 4096 about 720)"
        ],
        "too-many",
    ),
    (
        {"orchestrator.accounting": False},
        [
            "orchestrator.accounting: HyperPod always runs Slurm accounting (slurmdbd with MariaDB on the controller: "
            "SageMaker HyperPod guide, 'Using an external accounting database'); remove accounting: false"
        ],
        "hyperpod-accounting-off",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), [case[:2] for case in CASES], ids=[case[2] for case in CASES])
def test_bad_users_are_one_line_each(changes: dict[str, object], expected: list[str]) -> None:
    assert lines_for(changes) == rendered(expected)


def test_good_users_render_as_the_nodes_read_them() -> None:
    config = valid(
        users(
            {"name": "alice", "uid": 2001, "admin": True, "ssh_key": ED25519},
            {"name": "_svc-ci", "uid": 60000},
            {"name": "b" * 32, "uid": 2000, "ssh_key": ECDSA},
        )
    )
    key, ecdsa = (" ".join(line.split()[:2]) for line in (ED25519, ECDSA))
    assert rendered_users(config.users) == f"alice 2001 1 {key}\n_svc-ci 60000 0\n{'b' * 32} 2000 0 {ecdsa}\n"


def test_accounting_defaults_on_and_pcs_may_turn_it_off() -> None:
    assert valid().orchestrator.accounting is True
    assert valid(PCS).orchestrator.accounting is True
    assert valid({**PCS, "orchestrator.accounting": False}).orchestrator.accounting is False


def test_twenty_three_ecdsa_users_fit_one_parameter() -> None:
    """The limit's other side: 23 users with ECDSA keys take 4,015 bytes."""
    config = valid(users(*({"name": f"user{i}", "uid": 3000 + i, "ssh_key": ECDSA} for i in range(23))))
    assert len(rendered_users(config.users).encode()) == 4015


FORKY_ETC = Path("/var/cache/fmcluster-test/slurm-forky/etc")
"""The Debian forky chroot the node tests run in: base-passwd's users and groups plus Slurm's and MUNGE's packages."""


@pytest.mark.skipif(not FORKY_ETC.is_dir(), reason="the forky chroot (make node-test-chroot) is not on this machine")
@pytest.mark.parametrize("table", ["passwd", "group"])
def test_every_name_of_a_debian_image_is_reserved(table: str) -> None:
    """A user name equal to any user or group of the image would fail users.sh's step (the group exists with
    another gid), so the rule must know every one the real chroot has."""
    names = {line.split(":")[0] for line in (FORKY_ETC / table).read_text().splitlines() if line}
    assert names - RESERVED_NAMES == set()
