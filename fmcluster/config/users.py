"""The cluster file's `users`: the rules of one user's values and the text every node receives.

Each node creates the same accounts from one SSM parameter (`fmcluster.names.users_parameter_name`), written by the
cluster stack as `rendered(users)`: one line per user, `NAME UID ADMIN [KEY_TYPE KEY_BASE64]` (ADMIN 1 or 0), read by
`fmcluster/node/users.sh`. Group policy: every user has a group of its own name whose gid is the user's uid (Ubuntu's
user private groups, `USERGROUPS_ENAB yes` in login.defs): uids are unique, so gids are too, and the file needs no gid
key that could collide with one.

>>> key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILhNKVh6gtWI4uhWApsWulxJTq/vvu90WGGDXD+zeqUn alice@laptop"
>>> ssh_key_problem(key) is None
True
>>> rendered([("alice", 2001, True, key), ("bob", 2002, False, None)])
'alice 2001 1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILhNKVh6gtWI4uhWApsWulxJTq/vvu90WGGDXD+zeqUn\\nbob 2002 0\\n'
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Iterable

USER_NAME_PATTERN = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
"""A portable Linux user name: useradd's default NAME_REGEX on Debian and Ubuntu (`^[a-z][-a-z0-9_]*\\$?$`, adduser.conf
and useradd(8)) without the trailing '$' of machine accounts, which Slurm and sudoers handle badly, plus a leading '_'
as POSIX's portable filename set allows; at most 32 characters (useradd(8): "Usernames may only be up to 32
characters long")."""
MIN_UID = 2000
"""The lowest uid a cluster user may take. Below 1000 are system accounts (login.defs SYS_UID_MAX 999; slurm and munge
are system users); 1000 is the image's own login user (`ubuntu` on the PCS-Ready DLAMI and on HyperPod's DLAMI-based
AMI, both Ubuntu cloud images); the SSM agent creates `ssm-user` at the first Session Manager session (Session Manager
guide), with the next free uid from 1000 on (useradd's default; unconfirmed), so on a node where someone connected
before the users were made, 1001 and up may be taken. fmcluster keeps 1000-1999 for the images and the agent."""
MAX_UID = 60000
"""login.defs UID_MAX on Debian and Ubuntu: above it Debian reserves ranges (60001-64999 dynamic, 65534 nobody)."""
BASE_PASSWD_NAMES = (
    # Debian base-passwd's /etc/passwd (every Debian and Ubuntu image), read from the forky chroot the node tests
    # use, /var/cache/fmcluster-test/slurm-forky/etc/passwd, which tests/unit/test_users_rules.py checks against
    "root",
    "daemon",
    "bin",
    "sys",
    "sync",
    "games",
    "man",
    "lp",
    "mail",
    "news",
    "uucp",
    "proxy",
    "www-data",
    "backup",
    "list",
    "irc",
    "_apt",
    "nobody",
    "systemd-network",
    # ... and its /etc/group (the same chroot's /etc/group)
    "adm",
    "tty",
    "disk",
    "kmem",
    "dialout",
    "fax",
    "voice",
    "cdrom",
    "floppy",
    "tape",
    "sudo",
    "audio",
    "dip",
    "operator",
    "src",
    "shadow",
    "utmp",
    "video",
    "sasl",
    "plugdev",
    "staff",
    "users",
    "nogroup",
    "lpadmin",
    "systemd-journal",
)
"""Every user and group of Debian's base-passwd, which Ubuntu images share."""
IMAGE_NAMES = (
    # the images' login users and cloud-init's default-user groups (cloud-init config/cloud.cfg.tmpl: ubuntu
    # in adm, cdrom, dip, lxd, sudo; ec2-user, Amazon Linux's), Ubuntu's old sudo group admin, SSM's ssm-user
    "ubuntu",
    "ec2-user",
    "admin",
    "lxd",
    "ssm-user",
    # Slurm's and MUNGE's service users (the chroot's Debian packages; the DLAMI-based images use the same names)
    "slurm",
    "munge",
    # system users and groups the packages of an Ubuntu 24.04 server image create (unconfirmed name by name:
    # a name here that an image lacks is only refused, never broken)
    "systemd-timesync",
    "systemd-resolve",
    "systemd-oom",
    "messagebus",
    "syslog",
    "_chrony",
    "chrony",
    "sshd",
    "_ssh",
    "polkitd",
    "tss",
    "uuidd",
    "tcpdump",
    "landscape",
    "fwupd-refresh",
    "usbmux",
    "dnsmasq",
    "pollinate",
    "dhcpcd",
    "netdev",
    "crontab",
    "rdma",
    "kvm",
    "render",
    "sgx",
    "input",
    "clock",
    "_runit-log",
    # the DLAMI's tools: Docker's group, NVIDIA's persistence daemon, the CloudWatch agent (unconfirmed name
    # by name)
    "docker",
    "nvidia-persistenced",
    "cwagent",
)
"""Names of the node images' own accounts and groups beyond base-passwd."""
RESERVED_NAMES = frozenset(BASE_PASSWD_NAMES + IMAGE_NAMES)
"""A cluster user's name is also its group's name (the user private groups above), so it must be neither a user nor
a group of the images: users.sh refuses a group that exists with another gid, which fails the node's users step."""
SSH_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
"""Public key types OpenSSH 9 accepts by default in authorized_keys (sshd_config(5) PubkeyAcceptedAlgorithms; ssh-dss is
off since OpenSSH 7.0 and removed in 9.8)."""
USERS_PARAMETER_LIMIT = 4096
"""Bytes of one standard-tier SSM parameter (botocore ssm PutParameter `Value`: "Standard parameters have a value
limit of 4 KB"). The standard tier is free; an advanced one costs money and can never return to standard
(PutParameter `Tier`), so fmcluster stays within the standard limit."""


def user_name_problem(name: str) -> str | None:
    """What is wrong with a user name, or None."""
    if len(name) > 32:
        return f"at most 32 characters (useradd's limit); got {len(name)}"
    if not USER_NAME_PATTERN.match(name):
        return f"must be a lowercase letter or '_', then lowercase letters, digits, '_' or '-'; got {name!r}"
    if name in RESERVED_NAMES:
        return f"{name!r} is a user or group of the node images or of Slurm; choose another name"
    return None


def uid_problem(uid: int) -> str | None:
    """What is wrong with a uid, or None."""
    if uid < MIN_UID:
        return (
            f"must be {MIN_UID} or more: lower uids belong to the images' system accounts, their login user (ubuntu, "
            f"1000) and the SSM agent's ssm-user (1001 and up); got {uid}"
        )
    if uid > MAX_UID:
        return f"must be at most {MAX_UID} (UID_MAX of Debian and Ubuntu; higher ranges are reserved); got {uid}"
    return None


def ssh_key_problem(key: str) -> str | None:
    """What is wrong with an OpenSSH public key line (`TYPE BASE64 [COMMENT]`), or None.

    The base64 part is the key blob of RFC 4253 section 6.6, which begins with the key type as an SSH string; it must
    name the same type as the line (sshd refuses a key whose blob disagrees).
    """
    if "\n" in key.strip():
        return "must be one public key on one line (one key per user)"
    fields = key.split()
    if len(fields) < 2:
        return "must be an OpenSSH public key line: TYPE BASE64 [COMMENT], e.g. ssh-ed25519 AAAAC3Nza... alice"
    kind, blob = fields[0], fields[1]
    if kind not in SSH_KEY_TYPES:
        return f"key type {kind!r} is not one OpenSSH accepts by default; use one of {', '.join(SSH_KEY_TYPES)}"
    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return f"the {kind} key's second field is not valid base64"
    if len(data) < 4 or len(data) < 4 + (length := struct.unpack(">I", data[:4])[0]):
        return f"the {kind} key's data is too short to be a public key"
    named = data[4 : 4 + length].decode("ascii", errors="replace")
    if named != kind:
        return f"the key's data is a {named!r} key, but the line says {kind!r}"
    return None


NO_USERS = "# no users yet: fmcluster writes the cluster file's users here\n"
"""The users' parameter without users (an SSM parameter cannot be empty; users.sh and slurm-accounting.sh skip lines
starting with '#'). The parameter and the nodes' users steps exist from the first deploy, so adding the first users
later changes only this value, never a node group's lifecycle actions (which would replace its nodes)."""


def rendered(users: Iterable[tuple[str, int, bool, str | None]]) -> str:
    """The users as the nodes receive them: `NAME UID ADMIN [TYPE BASE64]` lines (comments of keys dropped), or
    `NO_USERS` for none.

    >>> rendered([]) == NO_USERS
    True
    """
    lines = []
    for name, uid, admin, key in users:
        line = f"{name} {uid} {int(admin)}"
        if key:
            line += " " + " ".join(key.split()[:2])
        lines.append(line + "\n")
    return "".join(lines) or NO_USERS


def size_problem(text: str) -> str | None:
    """The rendered users over one standard SSM parameter."""
    size = len(text.encode())
    if size > USERS_PARAMETER_LIMIT:
        return (
            f"the users take {size} bytes as the nodes receive them (one SSM parameter), over the "
            f"{USERS_PARAMETER_LIMIT} of a standard parameter; list fewer users or use shorter keys (ssh-ed25519 "
            "keys take about 80 characters, RSA 4096 about 720)"
        )
    return None
