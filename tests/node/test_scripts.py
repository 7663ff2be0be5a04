"""fmcluster's node scripts (fmcluster/node/*.sh): shellcheck, and their logic run against stubbed commands.

There is no NVMe instance store, mdadm, XFS, Lustre, EFA, SSM or instance metadata service on a test machine, and
the scripts must never touch the real /etc or /dev here. So each test runs a script with:

* a PATH holding only stub commands (`lsblk`, `nvme`, `mdadm`, `blkid`, `mkfs.xfs`, `mount`, `mountpoint`,
  `lnetctl`, `modprobe`, `modinfo`, `ip`, `aws`, `curl`, `systemctl`, `sleep`, ...) written into tmp_path, each of
  which records its arguments and answers from a small state directory the test prepares (the disks lsblk
  reports, what is mounted, what `aws ssm get-parameter` returns, the objects `aws s3 cp` copies from a pretend S3,
  how many calls fail first), plus links to the few harmless tools the scripts use (bash, coreutils, python3,
  tar); no real system command is reachable;
* FMCLUSTER_ROOT=tmp_path/root, which the scripts put in front of every file they read or write, so /etc/fstab,
  mdadm.conf, /etc/systemd, /etc/profile.d, /sys/class/infiniband, /scratch, /fsx, /opt/fmcluster and
  /var/log/fmcluster all land in the test's own directory.

The node bundle the S3 stub serves is the real one (`node_scripts.bundle_archive()`); the PCS agent that runs the
lifecycle actions is emulated (`agent`). Where a test checks how the observability action hands over to
observability.sh, the bundle's observability.sh is replaced by a recorder, since the real one (tested in
tests/observability/) would install exporters.

The tests then check the commands the scripts ran and the files they wrote.
"""

from __future__ import annotations

import io
import re
import shlex
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fmcluster import node_files, node_scripts
from tests.node import ami
from tests.stub_node import RECORD, StubNode, fail_first, stub_env

NODE_DIR = Path(__file__).resolve().parents[2] / "fmcluster" / "node"
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
INSTANCE_STORE = "Amazon EC2 NVMe Instance Storage"
EBS = "Amazon Elastic Block Store"
DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"

TOOLS = (
    "bash", "env", "cat", "date", "mkdir", "mktemp", "chmod", "mv", "rm", "basename", "dirname", "sort",
    "readlink", "id", "uname", "tar", "gzip", "base64", "cp", "nproc", "ln", "sha256sum",
)  # fmt: skip
"""Real commands the scripts may use: they only read, or write inside FMCLUSTER_ROOT."""

RECORD_ONLY = (
    "sleep", "systemctl", "udevadm", "update-initramfs", "modprobe", "gpg", "rpm", "apt-get", "amazon-linux-extras",
    "lctl",
)  # fmt: skip
"""Stubs that only record their arguments and succeed."""
STUBS = {
    "lsblk": '[[ -f "$STUB_STATE/lsblk" ]] && cat "$STUB_STATE/lsblk"\nexit 0',
    "nvme": 'cat "$STUB_STATE/nvme-list"',
    "mdadm": """case "$1" in
  --create) : >"$STUB_STATE/md-scratch" ;;
  --detail)
    if [[ "$2" == --brief ]]; then
      echo "ARRAY /dev/md/scratch metadata=1.2 name=node:scratch UUID=0a1b2c3d:4e5f6a7b:8c9d0e1f:2a3b4c5d"
    else
      [[ -f "$STUB_STATE/md-scratch" ]]
    fi ;;
esac""",
    "blkid": """device="${!#}"
if [[ -f "$STUB_STATE/fs-${device##*/}" ]]; then
  if [[ "$4" == TYPE ]]; then cat "$STUB_STATE/fs-${device##*/}"; else echo "uuid-${device##*/}"; fi
else
  exit 2
fi""",
    "mkfs.xfs": 'device="${!#}"; echo xfs >"$STUB_STATE/fs-${device##*/}"',
    "mount": fail_first() + 'echo "${!#}" >>"$STUB_STATE/mounted"',
    "mountpoint": """[[ -f "$STUB_STATE/mounted" ]] || exit 1
while IFS= read -r mounted; do [[ "$mounted" == "${!#}" ]] && exit 0; done <"$STUB_STATE/mounted"
exit 1""",
    # the image's FSx Lustre client: its kernel module (modinfo) and mount helper, unless a test takes them away
    "modinfo": '[[ ! -f "$STUB_STATE/no-lustre" ]]',
    "mount.lustre": "exit 0",
    "lnetctl": """if [[ "$1 $2" == "net show" ]]; then
  [[ -f "$STUB_STATE/lnet-efa" ]] && cat "$STUB_STATE/lnet-efa" && exit 0
  exit 1
fi""",
    "ip": 'echo "default via 10.0.0.1 dev enp39s0 proto dhcp src 10.0.12.7 metric 512"',
    # aws s3 cp ... s3://BUCKET/KEY DEST copies $STUB_STATE/s3/BUCKET/KEY; any other call prints the SSM value
    "aws": fail_first()
    + 'if [[ "$1 $2" == "s3 cp" ]]; then args=("$@"); cp "$STUB_STATE/s3/${args[-2]#s3://}" "${args[-1]}"; exit; fi\n'
    + 'cat "$STUB_STATE/ssm-value"',
    "curl": """case "$*" in
  *api/token*) echo stub-token ;;
  *meta-data/instance-type*) cat "$STUB_STATE/instance-type" ;;
  *meta-data/placement/region*) echo us-west-2 ;;
  *) exit 22 ;;
esac""",
    **dict.fromkeys(RECORD_ONLY, "exit 0"),
}
"""Stub commands: each records its arguments to STUB_LOG, then behaves as below (state under STUB_STATE)."""


class Node(StubNode):
    """A pretend node running fmcluster/node/*.sh."""

    def run(self, script: str | Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        path = script if isinstance(script, Path) else NODE_DIR / script
        return subprocess.run(
            ["bash", str(path), *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def commands(self) -> list[str]:
        return [call[0] for call in self.calls()]

    def disks(self, *disks: tuple[str, str], ordered: bool = True) -> None:
        """What lsblk reports: (device, model) pairs, `TYPE=disk`."""
        lines = [f'NAME="{device}" MODEL="{model}" TYPE="disk"' for device, model in disks]
        self.set("lsblk", "\n".join(lines if ordered else reversed(lines)) + "\n")


@pytest.fixture
def node(tmp_path: Path) -> Node:
    """A PCS node on a custom Amazon Linux 2023 image (`orchestrator.ami_id`) with enroot, pyxis and the Lustre client
    and its instance-store disks left raw (no dlami-nvme); tests/node/test_profiles.py runs the scripts on every
    supported image's profile as it is."""
    built = Node(**stub_env(tmp_path, tools=TOOLS, stubs=STUBS, python=True))
    pcs = ami.load("pcs-ready-dlami-ubuntu2404")
    image = ami.custom(
        pcs,
        "al2023",
        os_release={"ID": "amzn", "VERSION_ID": "2023"},
        nvme={"assembled_by": None},
        slurm={**pcs.slurm, "versions": [pcs.slurm["version"]]},
    )
    ami.build(built, image, installed=("enroot", "pyxis", "lustre_client"))
    return built


def store_disks(count: int) -> list[tuple[str, str]]:
    return [(f"/dev/nvme{i}n1", INSTANCE_STORE) for i in range(1, count + 1)]


# -- shellcheck -----------------------------------------------------------------------------------------------


SCRIPTS = tuple(entry.path.removeprefix("node/") for entry in node_files.NODE_FILES if entry.path.endswith(".sh"))
"""Every node script of the one list (fmcluster.node_files.NODE_FILES), under fmcluster/node/."""


@pytest.mark.parametrize("script", SCRIPTS)
def test_shellcheck_is_clean(script):
    path = NODE_DIR / script
    result = subprocess.run(
        [SHELLCHECK, "-x", path.name], cwd=path.parent, capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_shipped_scripts_are_ascii_with_strict_mode_and_the_mode_of_the_one_list():
    for entry in node_files.NODE_FILES:
        if not entry.path.endswith(".sh"):
            continue
        path = NODE_DIR / entry.path.removeprefix("node/")
        text = path.read_text(encoding="ascii")
        assert text.startswith("#!/usr/bin/env bash\n"), entry
        if entry.mode == node_files.EXECUTABLE and not entry.path.startswith("node/slurm/"):  # hooks exit 0 always
            assert "\nset -euo pipefail\n" in text, entry
            assert path.stat().st_mode & stat.S_IXUSR, f"{entry.path} is not executable"


def test_every_script_of_fmcluster_node_is_in_the_one_list():
    """A script added under fmcluster/node/ but not to node_files.NODE_FILES would never reach a node."""
    listed = {entry.package_path for entry in node_files.NODE_FILES} | {"node/hyperpod/on_create.sh"}
    found = {
        f"node/{p.relative_to(NODE_DIR)}" for p in NODE_DIR.rglob("*") if p.is_file() and p.suffix in (".sh", ".sbatch")
    }
    assert found == listed


# -- nvme-raid.sh ---------------------------------------------------------------------------------------------


def test_eight_instance_store_disks_become_one_raid0_array_at_scratch(node):
    node.disks(("/dev/nvme0n1", EBS), *store_disks(8), ordered=False)
    result = node.run("nvme-raid.sh")
    assert result.returncode == 0, result.stderr

    (create,) = [call for call in node.calls("mdadm") if call[1] == "--create"]
    assert create[:7] == ["mdadm", "--create", "/dev/md/scratch", "--run", "--level=0", "--name=scratch",
                          "--raid-devices=8"]  # fmt: skip
    assert create[7:] == [f"/dev/nvme{i}n1" for i in range(1, 9)]  # the EBS root volume is never a member
    assert node.calls("mkfs.xfs") == [["mkfs.xfs", "-f", "-K", "-L", "scratch", "/dev/md/scratch"]]
    assert node.calls("mount") == [
        ["mount", "-t", "xfs", "-o", "defaults,noatime", "/dev/md/scratch", str(node.path("/scratch"))]
    ]
    assert node.path("/etc/fstab").read_text() == (
        "UUID=uuid-scratch /scratch xfs defaults,noatime,nofail,x-systemd.device-timeout=5s 0 0\n"
    )
    assert node.path("/etc/mdadm.conf").read_text().startswith("ARRAY /dev/md/scratch metadata=1.2 ")
    assert stat.S_IMODE(node.path("/scratch").stat().st_mode) == 0o1777
    unit = node.path("/etc/systemd/system/fmcluster-scratch.service").read_text()
    assert f"ExecStart={NODE_DIR}/nvme-raid.sh" in unit
    assert ["systemctl", "enable", "fmcluster-scratch.service"] in node.calls("systemctl")
    assert "mounted /dev/md/scratch at /scratch" in node.script_log("nvme-raid")


def test_debian_layout_keeps_mdadm_conf_under_etc_mdadm_and_rebuilds_the_initramfs(node):
    node.disks(*store_disks(2))
    node.path("/etc/mdadm").mkdir(parents=True)
    assert node.run("nvme-raid.sh").returncode == 0
    assert "ARRAY /dev/md/scratch" in node.path("/etc/mdadm/mdadm.conf").read_text()
    assert node.calls("update-initramfs") == [["update-initramfs", "-u"]]


def test_one_disk_is_used_directly_without_mdadm(node):
    node.disks(("/dev/nvme0n1", EBS), ("/dev/nvme1n1", INSTANCE_STORE + "         "))  # lsblk may pad the model
    result = node.run("nvme-raid.sh")
    assert result.returncode == 0, result.stderr
    assert node.calls("mdadm") == []
    assert node.calls("mkfs.xfs") == [["mkfs.xfs", "-f", "-K", "-L", "scratch", "/dev/nvme1n1"]]
    assert "UUID=uuid-nvme1n1 /scratch xfs " in node.path("/etc/fstab").read_text()
    assert not node.path("/etc/mdadm.conf").exists()


def test_no_instance_store_means_exit_0_and_nothing_done(node):
    node.disks(("/dev/nvme0n1", EBS), ("/dev/nvme1n1", EBS))
    result = node.run("nvme-raid.sh")
    assert result.returncode == 0, result.stderr
    assert node.commands() == ["mountpoint", "lsblk"]
    assert not node.path("/etc/fstab").exists() and not node.path("/scratch").exists()
    assert "no NVMe instance-store disks" in node.script_log("nvme-raid")


def test_second_run_does_nothing(node):
    node.disks(*store_disks(8))
    assert node.run("nvme-raid.sh").returncode == 0
    fstab = node.path("/etc/fstab").read_text()
    first = len(node.calls())

    result = node.run("nvme-raid.sh")
    assert result.returncode == 0, result.stderr
    assert node.commands()[first:] == ["mountpoint"]
    assert node.path("/etc/fstab").read_text() == fstab
    assert "already mounted; nothing to do" in node.script_log("nvme-raid")


def test_after_a_stop_start_the_array_is_rebuilt_and_the_stale_fstab_line_replaced(node):
    """Instance store comes back blank after a stop/start; fstab still names the old file system."""
    node.disks(*store_disks(4))
    node.path("/etc/fstab").write_text(
        "# /etc/fstab\nLABEL=cloudimg-rootfs / ext4 defaults 0 1\n"
        "UUID=old-uuid /scratch xfs defaults,noatime,nofail 0 0\n"
    )
    assert node.run("nvme-raid.sh").returncode == 0
    assert node.path("/etc/fstab").read_text() == (
        "# /etc/fstab\nLABEL=cloudimg-rootfs / ext4 defaults 0 1\n"
        "UUID=uuid-scratch /scratch xfs defaults,noatime,nofail,x-systemd.device-timeout=5s 0 0\n"
    )


def test_an_existing_array_is_mounted_without_being_created_or_formatted_again(node):
    node.disks(*store_disks(2))
    node.set("md-scratch", "")
    node.set("fs-scratch", "xfs")
    assert node.run("nvme-raid.sh").returncode == 0
    assert [call[1] for call in node.calls("mdadm")] == ["--detail", "--detail"]  # exists?, then --brief
    assert node.calls("mkfs.xfs") == []
    assert len(node.calls("mount")) == 1


def test_a_foreign_file_system_is_never_formatted(node):
    node.disks(*store_disks(1))
    node.set("fs-nvme1n1", "ext4")
    result = node.run("nvme-raid.sh")
    assert result.returncode == 1
    assert node.calls("mkfs.xfs") == [] and node.calls("mount") == []
    assert "holds a ext4 file system; refusing to format it" in node.script_log("nvme-raid")


def test_nvme_list_is_used_when_lsblk_is_missing(node):
    (node.bin / "lsblk").unlink()
    node.set(
        "nvme-list",
        "Node             SN                   Model                                    Namespace\n"
        "---------------- -------------------- ---------------------------------------- ---------\n"
        f"/dev/nvme0n1     vol0123456789abcdef0 {EBS:<40} 1\n"
        f"/dev/nvme1n1     AWS1A2B3C4D5E6F7G8H9 {INSTANCE_STORE:<40} 1\n"
        f"/dev/nvme2n1     AWS9H8G7F6E5D4C3B2A1 {INSTANCE_STORE:<40} 1\n",
    )
    assert node.run("nvme-raid.sh").returncode == 0
    (create,) = [call for call in node.calls("mdadm") if call[1] == "--create"]
    assert create[-2:] == ["/dev/nvme1n1", "/dev/nvme2n1"]


# -- mount-lustre.sh ------------------------------------------------------------------------------------------


def efa_devices(node: Node, names: list[str], other: tuple[str, ...] = ()) -> None:
    """Pretend sysfs: /sys/class/infiniband/<name>/device/driver -> .../drivers/efa (others: another driver)."""
    drivers = node.path("/sys/bus/pci/drivers")
    for driver in ("efa", "mlx5_core"):
        (drivers / driver).mkdir(parents=True, exist_ok=True)
    for name, driver in [(n, "efa") for n in names] + [(n, "mlx5_core") for n in other]:
        device = node.path(f"/sys/class/infiniband/{name}/device")
        device.mkdir(parents=True)
        (device / "driver").symlink_to(drivers / driver)


def test_lustre_mounts_over_tcp_with_an_fstab_entry(node):
    result = node.run("mount-lustre.sh", DNS, "abcdef12")
    assert result.returncode == 0, result.stderr
    assert node.path("/etc/fstab").read_text() == (
        f"{DNS}@tcp:/abcdef12 /fsx lustre defaults,_netdev,noatime,flock 0 0\n"
    )
    assert node.calls("mount") == [
        ["mount", "-t", "lustre", "-o", "noatime,flock", f"{DNS}@tcp:/abcdef12", str(node.path("/fsx"))]
    ]
    assert node.calls("lnetctl") == [] and node.calls("dnf") == []


def test_lustre_mount_is_retried_with_exponential_backoff(node):
    node.set("mount-failures", "2")
    result = node.run("mount-lustre.sh", DNS, "abcdef12", "/data")
    assert result.returncode == 0, result.stderr
    assert len(node.calls("mount")) == 3
    assert node.calls("sleep") == [["sleep", "1"], ["sleep", "2"]]
    assert node.calls("mount")[-1][-1] == str(node.path("/data"))


def test_lustre_already_mounted_does_nothing(node):
    node.set("mounted", f"{node.path('/fsx')}\n")
    assert node.run("mount-lustre.sh", DNS, "abcdef12").returncode == 0
    assert node.commands() == ["mountpoint"]
    assert not node.path("/etc/fstab").exists()


@pytest.mark.parametrize(
    ("module", "helper", "missing"),
    [
        (False, True, "the lustre kernel module for kernel 6.1.0-test (modinfo lustre)"),
        (True, False, "the mount helper mount.lustre"),
        (False, False, "the lustre kernel module for kernel 6.1.0-test (modinfo lustre) and the mount helper "
                       "mount.lustre"),
    ],
    ids=["no-module", "no-helper", "neither"],
)  # fmt: skip
def test_an_image_without_the_lustre_client_fails_naming_what_is_missing_and_installs_nothing(
    node, module, helper, missing
):
    """The client's packages are kernel-specific and come from a public host: no node installs them at boot."""
    node.add_stub("uname", '[[ "${1:-}" == -r ]] && echo 6.1.0-test || echo Linux')
    if not module:
        node.set("no-lustre", "")
    if not helper:
        (node.bin / "mount.lustre").unlink()
    result = node.run("mount-lustre.sh", DNS, "abcdef12")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(
        f"ERROR: this image has no FSx Lustre client: {missing} missing; fmcluster installs none at boot: use an image "
        "that carries it (docs/node-images.md)"
    )
    assert {"apt-get", "dnf", "yum", "amazon-linux-extras", "curl", "mount"}.isdisjoint(node.commands())
    assert not node.path("/etc/fstab").exists()


def test_lustre_efa_sets_up_lnet_over_efa_as_the_fsx_guide_describes(node):
    """p5.48xlarge: 32 EFA devices, the guide's table says 8 for LNet, one in every four (one per PCIe switch)."""
    numbers = list(range(8, 40))  # rdmap8s0 .. rdmap39s0: natural order, not text order
    efa_devices(node, [f"rdmap{n}s0" for n in numbers], other=("mlx5_0",))
    node.set("instance-type", "p5.48xlarge")
    result = node.run("mount-lustre.sh", DNS, "abcdef12", "--efa")
    assert result.returncode == 0, result.stderr

    assert ["modprobe", "kefalnd", "ipif_name=enp39s0"] in node.calls("modprobe")
    lnet = [call[1:] for call in node.calls("lnetctl")]
    assert lnet[:4] == [
        ["net", "show", "--net", "efa"],
        ["lnet", "configure"],
        ["net", "del", "--net", "tcp"],
        ["net", "add", "--net", "tcp", "--if", "enp39s0"],
    ]
    assert lnet[4:12] == [
        ["net", "add", "--net", "efa", "--if", f"rdmap{n}s0", "--peer-credits", "32"] for n in numbers[::4]
    ]
    assert lnet[12:] == [["set", "discovery", "1"], ["udsp", "add", "--src", "efa", "--priority", "0"]]
    assert node.calls("modprobe")[-1] == ["modprobe", "lustre"]
    unit = node.path("/etc/systemd/system/fmcluster-lnet-efa.service").read_text()
    assert f"ExecStart={NODE_DIR}/lnet-efa.sh --boot" in unit and "Before=remote-fs-pre.target" in unit
    assert node.path("/etc/modprobe.d/fmcluster-lustre.conf").read_text().splitlines()[1:] == [
        "options ksocklnd credits=2560",  # AWS's configure-efa-fsx-lustre-client (FACTS.md, FSx EFA clients)
        "options ptlrpc ptlrpcd_per_cpt_max=32",
    ]
    assert node.path("/etc/fstab").read_text() == (
        f"{DNS}@tcp:/abcdef12 /fsx lustre "
        "defaults,_netdev,noatime,flock,x-systemd.after=fmcluster-lnet-efa.service 0 0\n"
    )
    assert len(node.calls("mount")) == 1


LUSTRE_TUNABLES = [
    "ldlm.namespaces.*.lru_max_age=600000",
    "ldlm.namespaces.*.lru_size=19200",  # 100 x 192 CPUs
    "osc.*OST*.max_rpcs_in_flight=32",
    "mdc.*.max_rpcs_in_flight=64",
    "mdc.*.max_mod_rpcs_in_flight=50",
]
"""The FSx for Lustre user guide's post-mount client tuning ("Performance tips"): lru_* for clients with more than
64 GiB of memory, the RPC settings for clients with 64 or more vCPUs."""


def test_a_large_client_gets_the_fsx_guides_post_mount_tunables_now_and_at_every_boot(node):
    node.add_stub("nproc", "echo 192")  # p5.48xlarge: 192 vCPUs, 2 TiB of memory
    node.path("/proc").mkdir()
    node.path("/proc/meminfo").write_text("MemTotal:       2097152000 kB\nMemFree:        2000000000 kB\n")
    assert node.run("mount-lustre.sh", DNS, "abcdef12").returncode == 0
    assert [call[2] for call in node.calls("lctl")] == LUSTRE_TUNABLES
    unit = node.path("/etc/systemd/system/fmcluster-lustre-tunables.service").read_text()
    assert "After=remote-fs.target\n" in unit  # lctl set_param does not survive a reboot (the guide)
    assert f"ExecStart={NODE_DIR}/mount-lustre.sh --tunables\n" in unit
    node.log.unlink()
    assert node.run("mount-lustre.sh", "--tunables").returncode == 0  # what the unit runs at boot
    assert [call[2] for call in node.calls("lctl")] == LUSTRE_TUNABLES


def test_a_small_client_gets_no_post_mount_tunables_and_a_failing_one_only_warns(node):
    node.add_stub("nproc", "echo 8")
    node.path("/proc").mkdir()
    node.path("/proc/meminfo").write_text("MemTotal:       32000000 kB\n")
    assert node.run("mount-lustre.sh", DNS, "abcdef12").returncode == 0
    assert node.calls("lctl") == []
    node.add_stub("nproc", "echo 64")
    node.add_stub("lctl", "exit 1")
    result = node.run("mount-lustre.sh", "--tunables")
    assert result.returncode == 0
    assert "lctl set_param osc.*OST*.max_rpcs_in_flight=32 failed; Lustre works without it" in result.stderr


def test_lnet_efa_boot_mode_is_what_the_boot_unit_runs(node):
    efa_devices(node, ["rdmap0s0", "rdmap1s0", "rdmap2s0", "rdmap3s0"])
    result = node.run("lnet-efa.sh", "--boot", env={"FMCLUSTER_INSTANCE_TYPE": "p4d.24xlarge"})
    assert result.returncode == 0, result.stderr
    efa = [call[6] for call in node.calls("lnetctl") if call[1:5] == ["net", "add", "--net", "efa"]]
    assert efa == ["rdmap0s0", "rdmap2s0"]  # other multi-card types: 2 interfaces
    assert node.calls("mount") == [] and node.calls("systemctl") == []


def test_lnet_already_on_efa_is_left_alone(node):
    efa_devices(node, ["rdmap0s0"])
    node.set("lnet-efa", "net:\n    - net type: efa\n      local NI(s):\n        - nid: 10.0.12.7@efa\n")
    result = node.run("mount-lustre.sh", DNS, "abcdef12", "--efa", env={"FMCLUSTER_INSTANCE_TYPE": "g5.48xlarge"})
    assert result.returncode == 0, result.stderr
    assert [call[1:3] for call in node.calls("lnetctl")] == [["net", "show"]]


def test_trn2_is_no_fsx_efa_client_and_keeps_tcp(node):
    efa_devices(node, [f"rdmap{n}s0" for n in range(16)])
    node.set("instance-type", "trn2.48xlarge")
    assert node.run("mount-lustre.sh", DNS, "abcdef12", "--efa").returncode == 0
    assert node.calls("lnetctl") == []
    assert "cannot be an FSx EFA client; using TCP" in node.script_log("lnet-efa")
    assert len(node.calls("mount")) == 1


def test_mount_lustre_takes_a_mount_name_with_a_dash(node):
    # botocore fsx LustreFileSystemMountName: ^([A-Za-z0-9_-]{1,8})$
    result = node.run("mount-lustre.sh", DNS, "ab-cd_12")
    assert "MOUNT_NAME must be" not in result.stderr


@pytest.mark.parametrize("name", node_scripts.RULES_FILES)
def test_the_scripts_carry_the_rules_python_validates_with(name):
    """The rules block of lib.sh and the TaskProlog is rendered from `node_scripts.NODE_RULES` (the cluster file's own
    patterns): after a rule changes, `python -c "import fmcluster.node_scripts as n; n.write_rendered_scripts()"`
    rewrites it."""
    text = (NODE_DIR / name).read_text(encoding="ascii")
    assert node_scripts.rendered_rules(text, node_scripts.RULES_FILES[name]) == text
    assert "NCCL_ENV_KEY_PATTERN='^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$'" in text


def test_lib_sh_carries_the_mount_name_rule():
    assert "LUSTRE_MOUNT_NAME_PATTERN='^[A-Za-z0-9_-]{1,8}$'" in (NODE_DIR / "lib.sh").read_text(encoding="ascii")


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        ((), 2, "usage: "),
        ((DNS,), 2, "usage: "),
        ((DNS, "abcdef12", "--weird"), 2, "usage: "),
        (("fs-1;reboot", "abcdef12"), 1, "DNS_NAME must be an FSx DNS name like fs-0123456789abcdef0.fsx"),
        # the cluster file's rule (botocore fsx DNSName), rendered into lib.sh
        (("nfs.example.com", "abcdef12"), 1, "DNS_NAME must be an FSx DNS name like fs-0123456789abcdef0.fsx"),
        ((DNS, "abc def"), 1, "MOUNT_NAME must be the file system's mount name, 1-8 letters, digits, '_' or '-'"),
        # botocore fsx LustreFileSystemMountName: 1-8 characters (the script once allowed 16, and refused '-')
        ((DNS, "abcdefghi"), 1, "(e.g. abcdef12); got 'abcdefghi'"),
        ((DNS, "abcdef12", "fsx"), 1, "MOUNT_POINT must be an absolute directory like /fsx; got 'fsx'"),
    ],
    ids=["nothing", "no-mount-name", "unknown-option", "dns-name", "dns-name-not-fsx", "mount-name", "mount-name-9",
         "mount-point"],
)  # fmt: skip
def test_mount_lustre_rejects_bad_arguments(node, args, status, message):
    result = node.run("mount-lustre.sh", *args)
    assert result.returncode == status
    assert message in result.stderr
    assert node.calls("mount") == []


# -- nccl-env.sh ----------------------------------------------------------------------------------------------


def test_nccl_env_from_the_ssm_parameter_json(node):
    node.set("ssm-value", '{"NCCL_DEBUG": "WARN", "FI_EFA_USE_HUGE_PAGE": 0, "NCCL_SOCKET_IFNAME": "^docker,lo"}')
    result = node.run("nccl-env.sh", "/fmcluster/nccl", env={"AWS_REGION": "us-east-1"})
    assert result.returncode == 0, result.stderr
    assert node.calls("aws") == [
        ["aws", "ssm", "get-parameter", "--region", "us-east-1", "--name", "/fmcluster/nccl", "--query",
         "Parameter.Value", "--output", "text"]
    ]  # fmt: skip
    header = "# Written by fmcluster nccl-env.sh from SSM parameter /fmcluster/nccl; re-run it rather than editing"
    assert node.path("/etc/fmcluster/nccl.env").read_text() == (
        f"{header} this file.\nFI_EFA_USE_HUGE_PAGE=0\nNCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME=^docker,lo\n"
    )
    assert node.path("/etc/profile.d/fmcluster-nccl.sh").read_text() == (
        f"{header} this file.\nexport FI_EFA_USE_HUGE_PAGE='0'\nexport NCCL_DEBUG='WARN'\n"
        "export NCCL_SOCKET_IFNAME='^docker,lo'\n"
    )


def test_nccl_env_falls_back_to_the_defaults_when_ssm_is_unreachable(node):
    node.set("aws-failures", "99")
    result = node.run(
        "nccl-env.sh", "/fmcluster/nccl", env={"AWS_REGION": "us-east-1", "FMCLUSTER_RETRY_ATTEMPTS": "3"}
    )
    assert result.returncode == 0, result.stderr
    assert len(node.calls("aws")) == 3
    assert node.path("/etc/fmcluster/nccl.env").read_text().splitlines()[1:] == ["NCCL_SOCKET_IFNAME=^docker,lo,veth"]
    assert "from fmcluster defaults" in node.path("/etc/profile.d/fmcluster-nccl.sh").read_text()
    assert "SSM parameter /fmcluster/nccl could not be read; using the defaults" in node.script_log("nccl-env")


def test_nccl_env_without_a_parameter_writes_only_what_the_plugin_does_not_set(node):
    assert node.run("nccl-env.sh").returncode == 0
    assert node.calls() == []
    assert node.path("/etc/profile.d/fmcluster-nccl.sh").read_text().splitlines()[1:] == [
        "export NCCL_SOCKET_IFNAME='^docker,lo,veth'"
    ]


def test_aws_failing_twice_then_succeeding_exercises_the_retry(node):
    node.set("aws-failures", "2")
    node.set("ssm-value", '{"NCCL_DEBUG": "INFO"}')
    result = node.run("nccl-env.sh", "nccl-tuning", env={"AWS_DEFAULT_REGION": "eu-west-1"})
    assert result.returncode == 0, result.stderr
    assert len(node.calls("aws")) == 3
    assert node.calls("sleep") == [["sleep", "1"], ["sleep", "2"]]  # backoff doubles
    assert "NCCL_DEBUG=INFO" in node.path("/etc/fmcluster/nccl.env").read_text()
    log = node.script_log("nccl-env")
    assert "attempt 1 of 5 failed" in log and "attempt 2 of 5 failed" in log and "retrying in 2s" in log


def test_nccl_env_reads_the_region_from_imds_when_none_is_set(node):
    node.set("ssm-value", "{}")
    assert node.run("nccl-env.sh", "/p").returncode == 0
    assert [call[-1] for call in node.calls("curl")][-1].endswith("meta-data/placement/region")
    assert node.calls("aws")[0][3:5] == ["--region", "us-west-2"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("not json", "not JSON: Expecting value: line 1 column 1 (char 0)"),
        ('["NCCL_DEBUG"]', "expected a JSON object of variables, got list"),
        ('{"LD_PRELOAD": "/tmp/x.so"}', "'LD_PRELOAD' is not an NCCL, libfabric or aws-ofi-nccl variable"),
        ('{"NCCL_DEBUG": true}', "NCCL_DEBUG: value must be a string or a whole number, got true"),
        ('{"NCCL_DEBUG": "a\\nb"}', "NCCL_DEBUG: value must be one line"),
    ],
    ids=["not-json", "list", "foreign-variable", "boolean", "newline"],
)
def test_a_malformed_parameter_is_logged_and_the_defaults_written(node, value, reason):
    node.set("ssm-value", value)
    assert node.run("nccl-env.sh", "/p", env={"AWS_REGION": "us-east-1"}).returncode == 0
    assert f"SSM parameter /p: {reason}; using the defaults" in node.script_log("nccl-env")
    assert node.path("/etc/fmcluster/nccl.env").read_text().splitlines()[1:] == ["NCCL_SOCKET_IFNAME=^docker,lo,veth"]


def test_profile_values_are_quoted_for_the_shell(node):
    node.set("ssm-value", """{"NCCL_TOPO_FILE": "/opt/it's here/topo.xml"}""")
    assert node.run("nccl-env.sh", "/p", env={"AWS_REGION": "us-east-1"}).returncode == 0
    profile = node.path("/etc/profile.d/fmcluster-nccl.sh")
    shown = subprocess.run(
        ["bash", "-c", f'. {shlex.quote(str(profile))} && printf %s "$NCCL_TOPO_FILE"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == "/opt/it's here/topo.xml"


# -- the PCS node lifecycle actions: run-step.sh install and every step ------------------------------------------

BUNDLE_URI = "s3://cdk-hnb659fds-assets-123456789012-us-west-2/" + "ab" * 32 + ".zip"
PARAMETER = "/fmcluster/llm-pretrain/observability/prometheus-endpoint"
OBSERVABILITY = node_scripts.NodeObservability(
    cluster_name="llm-pretrain", endpoint_parameter=PARAMETER, head_node=True, grafana=True,
)  # fmt: skip
OBSERVABILITY_ARGS = OBSERVABILITY.arguments("us-west-2")
RECORDER = """#!/usr/bin/env bash
{ printf '%s' "$0"; for arg in "$@"; do printf ' %q' "$arg"; done; printf '\\n'; } >>"$STUB_STATE/observability-calls"
printf '%s\\n' "${PATH%%:*}" >"$STUB_STATE/observability-path"
"""
"""Stands in for the bundle's observability.sh: records where it ran from, its arguments and PATH's first entry."""
UNZIP = """[[ "$1 $3" == "-q -d" ]] || exit 2
exec python3 -m zipfile -e "$2" "$4"
"""
"""A stub unzip (records its call, then unpacks as `unzip -q ZIP -d DIR` would) for the path that prefers unzip."""


def bundle(replace: dict[str, str] | None = None) -> bytes:
    """The real node bundle, with the files of `replace` (path -> text) replaced."""
    replace = replace or {}
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(node_scripts.bundle_archive())) as real, zipfile.ZipFile(buffer, "w") as fake:
        for info in real.infolist():
            fake.writestr(info, replace.get(info.filename) or real.read(info))
    return buffer.getvalue()


def serve(node: Node, uri: str, data: bytes) -> None:
    """Put `data` where the aws stub's `s3 cp` finds `uri`."""
    target = node.state / "s3" / uri.removeprefix("s3://")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def observability_calls(node: Node) -> list[list[str]]:
    calls = node.state / "observability-calls"
    return [shlex.split(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def agent(node: Node, tmp_path: Path, **settings) -> list[tuple[str, int]]:
    """The PCS agent, emulated: each lifecycle action `node_scripts.node_lifecycle_actions` would configure, in
    order, runs the runner as the agent downloaded it (a copy outside /opt/fmcluster) with the action's arguments;
    an action whose onError is TERMINATE and which exits non-zero ends the sequence (botocore pcs OnError:
    "Terminates the compute node"). What stays emulated: the agent itself (not public), its download and checksum
    check (the synthesized checksum is tested in tests/unit/test_pcs.py). Returns (action, exit status) pairs."""
    cache = tmp_path / "pcs-agent-cache" / "run-step.sh"
    cache.parent.mkdir(exist_ok=True)
    shutil.copy(NODE_DIR / "run-step.sh", cache)
    ran = []
    for entry, arguments in node_scripts.pcs_steps(bundle_s3_uri=BUNDLE_URI, region="us-west-2", **settings):
        name = entry.name if entry is not None else "install"
        result = node.run(cache, *(arguments if entry is None else [name, *arguments]))
        ran.append((name, result.returncode))
        node.last = result
        required = entry is None or entry.required
        if result.returncode != 0 and node_scripts.ON_ERROR[required] == "TERMINATE":
            break
    return ran


def test_the_lifecycle_actions_install_the_bundle_then_run_scratch_lustre_and_nccl_in_order(node, tmp_path):
    """No unzip on the node: python3 -m zipfile unpacks it; every file lands with its mode, the temp dir is gone."""
    serve(node, BUNDLE_URI, bundle())
    node.disks(*store_disks(2))
    node.set("ssm-value", '{"NCCL_DEBUG": "WARN"}')
    ran = agent(node, tmp_path, lustre_dns_name=DNS, lustre_mount_name="abcdef12", nccl_parameter_name="/x/nccl",
                slurm_version="25.11")  # fmt: skip
    steps = ("install", "updates", "scratch", "lustre", "shared-dirs", "nccl", "enroot", "slurm-hooks")
    assert ran == [(name, 0) for name in steps]
    (download,) = [call for call in node.calls("aws") if call[1:3] == ["s3", "cp"]]
    assert download[3:7] == ["--only-show-errors", "--region", "us-west-2", BUNDLE_URI]
    installed = node.path(node_scripts.NODE_ROOT)
    found = {str(p.relative_to(installed)): p for p in installed.rglob("*") if p.is_file()}
    expected = node_scripts.bundle_files()
    assert set(found) - {"node.env"} == set(expected)
    for name, (data, mode) in expected.items():
        assert found[name].read_bytes() == data, name
        assert stat.S_IMODE(found[name].stat().st_mode) == mode, name
    assert (installed / "node.env").read_text() == "AWS_DEFAULT_REGION=us-west-2\nFMCLUSTER_SLURM_VERSION=25.11\n"
    assert not [p for p in installed.iterdir() if p.name.startswith(".install.")]
    order = [c for c in node.commands() if c in ("lsblk", "mdadm", "mount")]
    assert order == ["lsblk", "mdadm", "mdadm", "mdadm", "mount", "mount"]
    assert "NCCL_DEBUG=WARN" in node.path("/etc/fmcluster/nccl.env").read_text()
    log = node.script_log("run-step")
    assert f"node files from {BUNDLE_URI} installed in /opt/fmcluster" in log
    assert log.index("step scratch: done") < log.index("step lustre: done") < log.index("step nccl: done")
    assert (
        f"ExecStart={installed}/node/nvme-raid.sh"
        in node.path("/etc/systemd/system/fmcluster-scratch.service").read_text()
    )


def test_a_failing_required_step_terminates_the_node_in_one_line(node, tmp_path):
    """nvme-raid.sh refuses a foreign file system: the scratch action exits 1, which its TERMINATE ends the node
    on; nothing after it runs (the node never reaches slurmd)."""
    serve(node, BUNDLE_URI, bundle())
    node.disks(*store_disks(1))
    node.set("fs-nvme1n1", "ext4")
    ran = agent(node, tmp_path, lustre_dns_name=DNS, lustre_mount_name="abcdef12")
    assert ran == [("install", 0), ("updates", 0), ("scratch", 1)]
    assert node.last.stderr.splitlines()[-1].endswith(
        "ERROR: fmcluster step scratch FAILED with exit status 1; the node cannot train without it "
        "(log: /var/log/fmcluster/nvme-raid.log)"
    )
    assert node.calls("mount") == []
    assert (node.path("/run/fmcluster/steps/scratch")).read_text() == "failed\n"


def test_the_runner_prefers_unzip_where_the_node_has_it(node, tmp_path):
    (node.bin / "unzip").write_text(RECORD + UNZIP)
    (node.bin / "unzip").chmod(0o755)
    serve(node, BUNDLE_URI, bundle())
    assert node.run("run-step.sh", "install", BUNDLE_URI).returncode == 0
    ((_, quiet, archive, to, target),) = node.calls("unzip")
    assert (quiet, to) == ("-q", "-d") and archive.endswith("/bundle.zip") and target.endswith("/files")
    assert node.path("/opt/fmcluster/dashboards/agent.yml").read_bytes() == node_files.dashboard_files()["agent.yml"]


def test_bundle_download_is_retried_with_backoff(node):
    serve(node, BUNDLE_URI, bundle())
    node.set("aws-failures", "2")
    result = node.run("run-step.sh", "install", BUNDLE_URI, "--region", "us-west-2")
    assert result.returncode == 0, result.stderr
    assert len([call for call in node.calls("aws") if call[1:3] == ["s3", "cp"]]) == 3
    assert node.calls("sleep") == [["sleep", "1"], ["sleep", "2"]]
    assert node.path("/opt/fmcluster/node/observability.sh").exists()


def test_a_bundle_that_cannot_be_fetched_terminates_the_node(node, tmp_path):
    node.set("aws-failures", "99")
    ran = agent(node, tmp_path, observability=OBSERVABILITY)
    assert ran == [("install", 1)]
    assert "fmcluster step install FAILED; the node cannot train without its files" in node.last.stderr
    assert not [p for p in node.path("/opt/fmcluster").iterdir() if p.name.startswith(".install.")]


def test_a_zip_that_is_no_node_bundle_is_refused(node):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as other:
        other.writestr("node/evil.sh", "#!/bin/sh\n")
    serve(node, BUNDLE_URI, buffer.getvalue())
    result = node.run("run-step.sh", "install", BUNDLE_URI)
    assert result.returncode == 1
    assert f"{BUNDLE_URI} holds no fmcluster node files (no manifest and node/lib.sh at its top)" in result.stderr
    assert not node.path("/opt/fmcluster/node/evil.sh").exists()


def test_a_manifest_naming_a_file_the_bundle_lacks_is_refused(node):
    serve(node, BUNDLE_URI, bundle({"manifest": "0755 node/lib.sh\n0755 node/missing.sh\n"}))
    result = node.run("run-step.sh", "install", BUNDLE_URI)
    assert result.returncode == 1
    assert "the manifest names 'node/missing.sh' (mode '0755'), which is not in it as a file" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [((), "usage: "), (("install",), "usage: "), (("reboot",), "usage: "), (("scratch",), "holds no node files")],
    ids=["nothing", "install-without-source", "unknown-step", "before-install"],
)
def test_the_runner_rejects_bad_arguments(node, args, message):
    result = node.run("run-step.sh", *args)
    assert result.returncode in (1, 2)
    assert message in result.stderr
    assert node.calls() == []


def test_every_argument_of_the_observability_action_reaches_observability_sh(node, tmp_path):
    serve(node, BUNDLE_URI, bundle({"node/observability.sh": RECORDER}))
    ran = agent(node, tmp_path, nccl_parameter_name="/x/nccl", observability=OBSERVABILITY, slurm_version="25.11")
    assert ran[-1] == ("observability", 0) and all(status == 0 for _, status in ran)
    assert observability_calls(node) == [[str(node.path("/opt/fmcluster/node/observability.sh")), *OBSERVABILITY_ARGS]]
    # PCS keeps sinfo in /opt/aws/pcs/scheduler/slurm-<version>/bin (profile pcs-ready-dlami-ubuntu2404)
    assert (node.state / "observability-path").read_text() == (
        f"{node.path('/opt/aws/pcs/scheduler/slurm-25.11/bin')}\n"
    )


def test_a_failing_observability_sh_is_only_a_warning(node, tmp_path):
    """The bundle's observability.sh replaced by one that fails: the action exits 0 after one WARNING line."""
    serve(node, BUNDLE_URI, bundle({"node/observability.sh": "#!/bin/sh\nexit 3\n"}))
    ran = agent(node, tmp_path, observability=OBSERVABILITY)
    assert ran[-1] == ("observability", 0)
    assert (
        "WARN: fmcluster WARNING: step observability failed; the node runs without metrics "
        "(log: /var/log/fmcluster/observability.log)"
    ) in node.script_log("run-step")
    assert node.path("/run/fmcluster/steps/observability").read_text() == "warned\n"


def test_the_runners_step_table_is_rendered_from_the_one_list():
    """run-step.sh's table is node_files.STEPS (`node_scripts.write_rendered_scripts()` rewrites it)."""
    text = (NODE_DIR / "run-step.sh").read_text()
    assert node_scripts.rendered_runner(text) == text
    for entry in node_files.STEPS:
        assert f"[{entry.name}]='{entry.script}'" in text


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"lustre_dns_name": DNS},
            "node_lifecycle_actions: lustre_dns_name and lustre_mount_name go together: give both to mount a file "
            "system, or neither",
        ),
        (
            {"lustre_efa": True},
            "node_lifecycle_actions: lustre_efa: needs a file system (lustre_dns_name and lustre_mount_name)",
        ),
        (
            {"lustre_dns_name": "fs-1 && reboot", "lustre_mount_name": "abcdef12"},
            "node_lifecycle_actions: lustre_dns_name: must be an FSx DNS name like "
            "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; got 'fs-1 && reboot'",
        ),
        (
            {"lustre_dns_name": DNS, "lustre_mount_name": "abcdef12", "lustre_mount_point": "fsx"},
            "node_lifecycle_actions: lustre_mount_point: must be an absolute directory like /fsx; got 'fsx'",
        ),
        (
            {"nccl_parameter_name": "nccl tuning"},
            "node_lifecycle_actions: nccl_parameter_name: must be an SSM parameter name like /fmcluster/nccl; "
            "got 'nccl tuning'",
        ),
        (
            {"bundle_s3_uri": "/tmp/bundle.zip"},
            "node_lifecycle_actions: bundle_s3_uri: must be an S3 URI like s3://bucket/bundle.zip; got "
            "'/tmp/bundle.zip'",
        ),
        (
            {
                "observability": node_scripts.NodeObservability(
                    cluster_name="llm pretrain", endpoint_parameter="prom endpoint"
                ),
                "mirror": "bucket/mirror",
            },
            "node_lifecycle_actions: mirror: must be an S3 prefix like s3://my-bucket/fmcluster-mirror; "
            "got 'bucket/mirror'\n"
            "node_lifecycle_actions: observability.cluster_name: must be a cluster name like llm-pretrain; got "
            "'llm pretrain'\nnode_lifecycle_actions: observability.endpoint_parameter: must be an SSM parameter "
            "name like /fmcluster/llm/observability/prometheus-endpoint; got 'prom endpoint'",
        ),
    ],
    ids=["half-lustre", "efa-without-lustre", "dns-name", "mount-point", "parameter", "bundle-not-s3",
         "bad-observability"],
)  # fmt: skip
def test_lifecycle_actions_reject_bad_arguments(props, message):
    with pytest.raises(ValueError) as error:
        node_scripts.node_lifecycle_actions(**{"runner_s3_uri": "s3://b/run-step.sh", "bundle_s3_uri": BUNDLE_URI,
                                               **props})  # fmt: skip
    assert str(error.value) == message


def test_node_bundle_is_reproducible_and_written_once_per_content():
    first = node_scripts.bundle_archive()
    assert first == node_scripts.bundle_archive()
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == sorted(node_scripts.bundle_files())
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
    assert {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in infos} == {
        name: mode for name, (_, mode) in node_scripts.bundle_files().items()
    }
    path = Path(node_scripts.bundle_path())
    assert path.read_bytes() == first and re.fullmatch(r"fmcluster-node-bundle-[0-9a-f]{16}\.zip", path.name)
    assert node_scripts.bundle_path() == str(path)
