"""AMI profiles: what a node looks like when fmcluster's scripts run on it, one data file per supported image.

Each file in `profiles/` holds every fact the node scripts depend on (OS, kernel, init, the instance-store disks'
state, mounts, installed software, Slurm's paths and unit names, files the orchestrator provides), each with its
source (`"source"`; "(unconfirmed)" where no source confirms it, and the scripts then take the fail-safe path). See
profiles/README.md. `build(node, profile)` turns a StubNode (tests/stub_node.py) into that machine: files under
FMCLUSTER_ROOT, and stub commands that answer as that image does. A new profile is a new data file; every test
parametrized with `PROFILES` then runs on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.stub_node import RECORD, StubNode

PROFILES_DIR = Path(__file__).parent / "profiles"
FACTS = (
    "orchestrator", "os_release", "kernel", "init", "nvme", "mounts", "fsx_mounted_by_orchestrator", "software",
    "slurm", "files", "environment", "lustre_efa_client", "accounts",
)  # fmt: skip
"""Every profile states each of these, with a source."""


@dataclass(frozen=True)
class Profile:
    name: str
    facts: dict
    sources: dict[str, str]

    def __getitem__(self, fact: str):
        return self.facts[fact]

    @property
    def slurm(self) -> dict:
        return self.facts["slurm"]

    @property
    def software(self) -> dict:
        return self.facts["software"]

    @property
    def dlami(self) -> bool:
        return self.facts["nvme"].get("assembled_by") == "dlami-nvme"


def load(name: str) -> Profile:
    data = json.loads((PROFILES_DIR / f"{name}.json").read_text())
    facts = {key: data[key]["value"] for key in FACTS}
    sources = {key: data[key]["source"] for key in FACTS}
    return Profile(data["name"], facts, sources)


def custom(profile: Profile, name: str, **facts) -> Profile:
    """`profile` with some facts replaced: a custom image built on it (`orchestrator.ami_id`), as a test states it.
    The replaced facts are the test's own assumptions, not an image's documented state."""
    sources = {key: f"(custom image {name}: stated by the test)" for key in facts}
    return Profile(name, {**profile.facts, **facts}, {**profile.sources, **sources})


PROFILES = tuple(sorted(path.stem for path in PROFILES_DIR.glob("*.json")))
PCS_PROFILES = tuple(name for name in PROFILES if load(name)["orchestrator"] == "pcs")
HYPERPOD_PROFILES = tuple(name for name in PROFILES if load(name)["orchestrator"] == "hyperpod")


def _os_release(values: dict) -> str:
    return "".join(f'{key}="{value}"\n' for key, value in values.items())


def build(node: StubNode, profile: Profile, *, installed: tuple[str, ...] = ()) -> None:
    """Make `node` the machine `profile` describes; `installed` names software to treat as present anyway
    ("enroot", "pyxis", "lustre_client"), as on a custom image built on top of this one."""
    software = {**profile.software, **dict.fromkeys(installed, True)}
    node.path("/etc").mkdir(parents=True, exist_ok=True)
    node.path("/etc/os-release").write_text(_os_release(profile["os_release"]))
    slurm = profile.slurm
    for version in slurm.get("versions", [slurm["version"]]):  # an image may hold several Slurm versions (PCS)
        prefix = slurm["prefix"].replace(slurm["version"], version)
        for directory in ("bin", "include/slurm", "lib/slurm"):
            node.path(f"{prefix}/{directory}").mkdir(parents=True, exist_ok=True)
        for command in ("sinfo", "squeue", "srun", "scontrol"):
            tool = node.path(f"{prefix}/bin/{command}")
            tool.write_text("#!/bin/sh\nexit 0\n")
            tool.chmod(0o755)
        node.path(f"{prefix}/include/slurm/spank.h").write_text("/* Slurm's SPANK header */\n")
        node.path(slurm["etc"].replace(slurm["version"], version)).mkdir(parents=True, exist_ok=True)
    if profile["orchestrator"] == "hyperpod":
        node.path(f"{slurm['etc']}/slurm.conf").write_text("ClusterName=hyperpod\nSlurmctldHost=ip-10-1-0-5\n")
    if software.get("pyxis"):
        node.path(f"{slurm['plugin_dir']}/spank_pyxis.so").write_text("")
    if software.get("enroot"):
        node.add_stub("enroot", "exit 0")
    if software.get("nvidia_container_cli"):  # the NVIDIA container toolkit (libnvidia-container-tools)
        node.add_stub("nvidia-container-cli", "exit 0")
    if software.get("nccl_tests"):  # nccl-tests' all_reduce_perf where the image keeps it: prints STUB_STATE/all-reduce
        _executable_stub(
            node, software["nccl_tests"], '[[ -f "$STUB_STATE/all-reduce" ]] && cat "$STUB_STATE/all-reduce"'
        )
    for path, kind in profile["files"].items():
        if kind == "resource_config":
            continue  # the lifecycle tests write their own cluster's
        node.path(path).parent.mkdir(parents=True, exist_ok=True)
        if kind == "ami_hook":  # a Slurm prolog/epilog script the image ships (its content is the image's)
            node.path(path).write_text("#!/bin/bash\nexit 0\n")
            node.path(path).chmod(0o755)
    _accounts(node, profile["accounts"])
    node.set("kernel", profile["kernel"] + "\n")
    node.set("slurmd-unit", slurm["slurmd_unit"] + "\n")
    node.set("efa-driver", software["efa_driver"] + "\n")
    if software.get("lustre_client"):  # FSx's client: the lustre module (modinfo stub) and its mount helper
        node.add_stub("mount.lustre", "exit 0")
    else:
        node.set("no-lustre", "")
    if software.get("gnu_parallel_in_epel"):
        node.set("parallel-in-epel", "")
    mounted = list(profile["mounts"])
    nvme = profile["nvme"]
    if profile.dlami:
        mounted.append(nvme["mount_point"])
        node.set("lvm-group", nvme["volume_group"] + "\n")
    for point in mounted:
        node.path(point).mkdir(parents=True, exist_ok=True)
    node.set("mounted", "".join(f"{node.path(point)}\n" for point in mounted))
    for name, body in PROFILE_STUBS.items():
        node.add_stub(name, body)


def _executable_stub(node: StubNode, path: str, body: str) -> None:
    """A recording stub at `path` under FMCLUSTER_ROOT (a program the scripts run by its full path)."""
    stub = node.path(path)
    stub.parent.mkdir(parents=True, exist_ok=True)
    stub.write_text(RECORD + body + "\n")
    stub.chmod(0o755)


def _accounts(node: StubNode, accounts: dict) -> None:
    """The image's own accounts as /etc/passwd, group, shadow and gshadow (the formats of passwd(5), group(5),
    shadow(5), gshadow(5): no password, '*'), its sudoers.d files and an /etc/skel with Ubuntu's dot files."""
    etc = node.path("/etc")
    passwd = "".join(f"{name}:x:{uid}:{gid}::{home}:{shell}\n" for name, uid, gid, home, shell in accounts["passwd"])
    shadow = "".join(f"{name}:*:20000:0:99999:7:::\n" for name, *_ in accounts["passwd"])
    group = "".join(f"{name}:x:{gid}:{','.join(members)}\n" for name, gid, members in accounts["groups"])
    gshadow = "".join(f"{name}:*::{','.join(members)}\n" for name, _, members in accounts["groups"])
    for name, text, mode in (("passwd", passwd, 0o644), ("group", group, 0o644), ("shadow", shadow, 0o640),
                             ("gshadow", gshadow, 0o640)):  # fmt: skip
        (etc / name).write_text(text)
        (etc / name).chmod(mode)
    (etc / "sudoers.d").mkdir(exist_ok=True)
    for name, text in accounts["sudoers_d"].items():
        (etc / "sudoers.d" / name).write_text(text + "\n")
    (etc / "skel").mkdir(exist_ok=True)
    for dot in (".bashrc", ".profile", ".bash_logout"):
        (etc / "skel" / dot).write_text(f"# Ubuntu's /etc/skel/{dot}\n")


PROFILE_STUBS = {
    "uname": 'if [[ "${1:-}" == -r ]]; then cat "$STUB_STATE/kernel"; elif [[ "${1:-}" == -m ]]; then echo x86_64;'
    " else echo Linux; fi",
    "systemctl": """case "${1:-}" in
  list-unit-files) printf '%s enabled enabled\\n' "$(cat "$STUB_STATE/slurmd-unit")" ;;
  is-active) [[ -f "$STUB_STATE/active-${!#}" ]] ;;
esac""",
    # modinfo: the Lustre modules once a client is installed (dnf, amazon-linux-extras or apt clear no-lustre); efa
    "modinfo": """module="${!#}"
case "$module" in
  efa) [[ "$*" == *-F\\ version* ]] && cat "$STUB_STATE/efa-driver"; exit 0 ;;
  *) [[ ! -f "$STUB_STATE/no-lustre" ]] ;;
esac""",
    # pvs: the instance-store disks as LVM physical volumes of the profile's volume group (HyperPod's dlami-nvme)
    "pvs": """[[ -f "$STUB_STATE/lvm-group" && -f "$STUB_STATE/lsblk" ]] || exit 0
vg="$(cat "$STUB_STATE/lvm-group")"
while IFS= read -r line; do
  [[ "$line" =~ NAME=\\"([^\\"]+)\\".*Instance\\ Storage ]] && printf '  %s %s\\n' "${BASH_REMATCH[1]}" "$vg"
done <"$STUB_STATE/lsblk"
exit 0""",
    # amazon-linux-extras install -y TOPIC: lustre brings the client, epel the repository with GNU parallel
    "amazon-linux-extras": """case "${!#}" in
  lustre) rm -f "$STUB_STATE/no-lustre" ;;
  epel) rm -f "$STUB_STATE/parallel-in-epel" ;;
esac""",
}
"""Stubs that answer as the profile's image does, from the state `build` wrote."""
