"""Node scripts with the real tools that run on this kind of machine (as root): loop devices, LVM metadata, XFS,
mount, blkid, systemd-tmpfiles, and enroot's own hook and configuration code.

What runs for real (FACTS.md, Toolchain: measured on the CI kind of machine):
* losetup loop devices stand in for the instance-store NVMe disks (sparse files, 320 MB: mkfs.xfs wants 300 MB);
* HyperPod's DLAMI case: `pvcreate` + `vgcreate vg.01` put the "disks" into LVM as dlami-nvme does, so `pvs` and
  `blkid` (LVM2_member) report them as on the real image; nvme-raid.sh runs the real `pvs`, `mount --bind`,
  `mountpoint`; a rerun and a reboot (every mount undone, the volume mounted again, the boot unit's command run);
* the PCS case (raw disk): the real `mkfs.xfs`, `blkid`, `mount`; rerun and reboot (no second format);
* enroot: the configuration parser of enroot's `enroot.in` and its `10-devices.sh` hook (NVIDIA/enroot v4.1.2,
  vendored in fixtures/enroot-v4.1.2/ with its provenance) read the enroot.conf enroot-pyxis.sh writes;
* `systemd-tmpfiles --create --root` reads the tmpfiles.d file enroot-pyxis.sh writes, as at every boot.
What stays emulated, and why: the kernel here has no device-mapper and no md, so dlami-nvme's logical volume
(`lvcreate`, vg.01/lv_ephemeral) is a loop device with XFS mounted at /opt/dlami/nvme, and `mdadm --create` is not
used (the multi-disk RAID stays in the stub tests of test_scripts.py); `lsblk` is a stub reporting the loop devices
with the instance-store model (a loop device has no model); `systemctl` is a stub (no systemd here).
Each test skips, saying why, where it cannot run (not root, a tool missing).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node import ami
from tests.node.test_scripts import DNS, STUBS, efa_devices
from tests.node.test_scripts import TOOLS as SCRIPT_TOOLS
from tests.node.test_scripts import Node as ScriptNode
from tests.stub_node import StubNode, stub_env

pytestmark = pytest.mark.real_tools

NODE_DIR = Path(__file__).resolve().parents[2] / "fmcluster" / "node"
FIXTURES = Path(__file__).parent / "fixtures" / "enroot-v4.1.2"
INSTANCE_STORE = "Amazon EC2 NVMe Instance Storage"
TOOLS = (
    "bash", "env", "cat", "date", "mkdir", "mktemp", "chmod", "mv", "rm", "basename", "dirname", "sort", "readlink",
    "id", "nproc", "ln",
)  # fmt: skip
REAL = ("mount", "umount", "mountpoint", "blkid", "mkfs.xfs", "pvs")
"""Real system tools put on the scripts' PATH."""
DISK_MB = 320
LVM_ENV = {"LVM_SUPPRESS_FD_WARNINGS": "1"}


def _tool(name: str) -> str | None:
    return shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def _skip_without(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("loop devices, LVM and mounts need root; run the tests as root")
    missing = [tool for tool in tools if not _tool(tool)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (`make test` installs lvm2 and xfsprogs)")


def _run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True, env={**os.environ, **LVM_ENV},
                          timeout=60).stdout  # fmt: skip


@contextlib.contextmanager
def loop_devices(directory: Path, count: int) -> Iterator[list[str]]:
    devices: list[str] = []
    try:
        for index in range(count):
            backing = directory / f"disk{index}.img"
            with backing.open("wb") as file:
                file.truncate(DISK_MB * 1024 * 1024)
            devices.append(_run(_tool("losetup"), "--find", "--show", str(backing)).strip())
        yield devices
    finally:
        for device in devices:
            subprocess.run([_tool("losetup"), "-d", device], check=False, capture_output=True)


def unmount_below(root: Path) -> None:
    """Undo every mount under `root`, deepest first (as a shutdown does)."""
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(str(root))), key=len, reverse=True):
        subprocess.run([_tool("umount"), point], check=False, capture_output=True)


class Node(StubNode):
    def run(self, script: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(NODE_DIR / script), *args], env={**self.env, **LVM_ENV},
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip

    def disks(self, *devices: str) -> None:
        self.set("lsblk", "".join(f'NAME="{d}" MODEL="{INSTANCE_STORE}" TYPE="disk"\n' for d in devices))


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    _skip_without("losetup", *REAL)
    stubs = {
        "lsblk": '[[ -f "$STUB_STATE/lsblk" ]] && cat "$STUB_STATE/lsblk"\nexit 0',
        "systemctl": "exit 0",
        "sleep": "exit 0",
        "udevadm": "exit 0",
        "mdadm": 'echo "mdadm is not available here (no md in this kernel)" >&2; exit 1',
    }
    built = Node(**stub_env(tmp_path, tools=TOOLS, stubs=stubs))
    for tool in REAL:
        (built.bin / tool).symlink_to(_tool(tool))
    (built.bin / "python3").symlink_to(_tool("python3"))
    built.path("/etc").mkdir(parents=True)
    try:
        yield built
    finally:
        unmount_below(built.root)


def is_mount(path: Path) -> bool:
    return subprocess.run([_tool("mountpoint"), "-q", str(path)], check=False).returncode == 0


def test_dlami_disks_in_lvm_are_left_alone_and_scratch_is_the_dlami_volume(node, tmp_path):
    """HyperPod's DLAMI: the disks are in vg.01 and its volume is mounted at /opt/dlami/nvme before the lifecycle
    runs (profile hyperpod-dlami-ubuntu2204). Before the fix, nvme-raid.sh ran `mdadm --create` on them and failed."""
    _skip_without("pvcreate", "vgcreate", "vgremove", "pvremove")
    nvme = ami.load("hyperpod-dlami-ubuntu2204")["nvme"]
    group = nvme["volume_group"]
    with loop_devices(tmp_path, 3) as (disk1, disk2, volume):
        try:
            _run(_tool("pvcreate"), "-q", disk1, disk2)
            _run(_tool("vgcreate"), "-q", group, disk1, disk2)
            # dlami-nvme's lv_ephemeral cannot be created here (no device-mapper): a loop device with XFS stands in
            _run(_tool("mkfs.xfs"), "-q", "-f", volume)
            dlami = node.path(nvme["mount_point"])
            dlami.mkdir(parents=True)
            _run(_tool("mount"), volume, str(dlami))
            node.disks(disk1, disk2)

            result = node.run("nvme-raid.sh")
            assert result.returncode == 0, result.stderr
            scratch = node.path("/scratch")
            assert is_mount(scratch)
            assert stat.S_IMODE(scratch.stat().st_mode) == 0o1777
            assert node.path("/etc/fstab").read_text() == (
                "/opt/dlami/nvme/scratch /scratch none bind,nofail,x-systemd.requires-mounts-for=/opt/dlami/nvme 0 0\n"
            )
            (scratch / "cached-layer").write_text("kept")
            assert (dlami / "scratch" / "cached-layer").read_text() == "kept"  # it is the DLAMI volume
            assert node.calls("mdadm") == []
            listed = _run(_tool("pvs"), "--noheadings", "-o", "pv_name,vg_name").split()
            assert [disk1, group, disk2, group] == [w for w in listed if w in (disk1, disk2, group)]
            assert _run(_tool("blkid"), "-o", "value", "-s", "TYPE", disk1).strip() == "LVM2_member"

            again = node.run("nvme-raid.sh")  # rerun
            assert again.returncode == 0 and "already mounted; nothing to do" in again.stderr

            unmount_below(node.root)  # reboot: everything unmounted ...
            assert not is_mount(scratch)
            _run(_tool("mount"), volume, str(dlami))  # ... dlami-nvme mounts its volume again ...
            booted = node.run("nvme-raid.sh")  # ... and fmcluster-scratch.service runs this
            assert booted.returncode == 0, booted.stderr
            assert is_mount(scratch) and (scratch / "cached-layer").read_text() == "kept"

            unmount_below(node.root)  # stop/start: blank disks, so dlami-nvme makes a fresh volume
            _run(_tool("mkfs.xfs"), "-q", "-f", volume)
            _run(_tool("mount"), volume, str(dlami))
            started = node.run("nvme-raid.sh")
            assert started.returncode == 0, started.stderr
            assert is_mount(scratch) and not (scratch / "cached-layer").exists()
            assert stat.S_IMODE(scratch.stat().st_mode) == 0o1777
        finally:
            unmount_below(node.root)
            subprocess.run([_tool("vgremove"), "-q", "-f", group], check=False, capture_output=True, env=LVM_ENV)
            subprocess.run([_tool("pvremove"), "-q", disk1, disk2], check=False, capture_output=True, env=LVM_ENV)


def test_disks_in_lvm_without_the_dlami_volume_fail_clearly_and_are_not_touched(node, tmp_path):
    _skip_without("pvcreate", "vgcreate", "vgremove", "pvremove")
    with loop_devices(tmp_path, 2) as (disk1, disk2):
        try:
            _run(_tool("pvcreate"), "-q", disk1, disk2)
            _run(_tool("vgcreate"), "-q", "vg.01", disk1, disk2)
            node.disks(disk1, disk2)
            result = node.run("nvme-raid.sh")
            assert result.returncode == 1
            assert (
                "the instance-store disks are in LVM (volume group vg.01, HyperPod's dlami-nvme) but /opt/dlami/nvme "
                "is not mounted after 120s; see 'systemctl status dlami-nvme'; the disks were not touched"
            ) in result.stderr
            assert _run(_tool("blkid"), "-o", "value", "-s", "TYPE", disk1).strip() == "LVM2_member"
            assert node.calls("mdadm") == [] and not node.path("/etc/fstab").exists()
        finally:
            subprocess.run([_tool("vgremove"), "-q", "-f", "vg.01"], check=False, capture_output=True, env=LVM_ENV)
            subprocess.run([_tool("pvremove"), "-q", disk1, disk2], check=False, capture_output=True, env=LVM_ENV)


def test_a_raw_disk_gets_real_xfs_mounted_at_scratch_and_survives_a_rerun_and_a_reboot(node, tmp_path):
    """A custom image that leaves the instance-store disks raw (no dlami-nvme); one disk is used as it is."""
    with loop_devices(tmp_path, 1) as (disk,):
        node.disks(disk)
        result = node.run("nvme-raid.sh")
        assert result.returncode == 0, result.stderr
        scratch = node.path("/scratch")
        assert is_mount(scratch) and stat.S_IMODE(scratch.stat().st_mode) == 0o1777
        assert _run(_tool("blkid"), "-o", "value", "-s", "TYPE", disk).strip() == "xfs"
        assert _run(_tool("blkid"), "-o", "value", "-s", "LABEL", disk).strip() == "scratch"
        uuid = _run(_tool("blkid"), "-o", "value", "-s", "UUID", disk).strip()
        assert node.path("/etc/fstab").read_text() == (
            f"UUID={uuid} /scratch xfs defaults,noatime,nofail,x-systemd.device-timeout=5s 0 0\n"
        )
        (scratch / "data").write_text("kept")
        assert node.run("nvme-raid.sh").returncode == 0
        unmount_below(node.root)  # reboot
        booted = node.run("nvme-raid.sh")
        assert booted.returncode == 0, booted.stderr
        assert (scratch / "data").read_text() == "kept"  # mounted again, not formatted again
        assert _run(_tool("blkid"), "-o", "value", "-s", "UUID", disk).strip() == uuid


# -- enroot ----------------------------------------------------------------------------------------------------


def enroot_settings(conf: Path) -> dict[str, str]:
    """ENROOT_* as enroot itself reads `conf` (config::init and config::fini of enroot.in, v4.1.2)."""
    script = f'source {FIXTURES / "config.sh"}\nconfig::init {conf}\nconfig::fini\ncompgen -e ENROOT_ | ' \
             'while read -r v; do printf "%s=%s\\n" "$v" "${!v}"; done'  # fmt: skip
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(conf.parent)}).stdout  # fmt: skip
    return dict(line.split("=", 1) for line in out.splitlines())


def devices_hook_mounts(tmp_path: Path, settings: dict[str, str]) -> str:
    """What enroot's 10-devices.sh hook (v4.1.2) mounts in a container with these settings (its enroot-mount is a
    recorder; the hook itself is upstream's)."""
    lib = tmp_path / "enroot-lib"
    (lib / "bin").mkdir(parents=True, exist_ok=True)
    (lib / "common.sh").write_text('common::realpath() { readlink -f "$1"; }\n')
    recorder = lib / "bin" / "enroot-mount"
    recorder.write_text(f"#!/bin/bash\ncat >>{tmp_path}/mounts\n")
    recorder.chmod(0o755)
    rootfs = tmp_path / "rootfs"
    (rootfs / "dev").mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{lib / 'bin'}:/usr/bin:/bin", "ENROOT_LIBRARY_PATH": str(lib), "ENROOT_ROOTFS": str(rootfs)}
    env.update({k: v for k, v in settings.items() if k in ("ENROOT_RESTRICT_DEV", "ENROOT_UNSHARE_IPC")})
    subprocess.run(["bash", str(FIXTURES / "10-devices.sh")], env=env, check=True, capture_output=True, timeout=30,
                   stdin=subprocess.DEVNULL)  # fmt: skip
    mounts = tmp_path / "mounts"
    return mounts.read_text() if mounts.exists() else ""


MOUNTPOINT_STUB = """[[ -f "$STUB_STATE/mounted" ]] || exit 1
while IFS= read -r mounted; do [[ "$mounted" == "${!#}" ]] && exit 0; done <"$STUB_STATE/mounted"
exit 1"""


@pytest.fixture
def enroot_node(tmp_path: Path) -> Node:
    (tmp_path / "node").mkdir()
    built = Node(**stub_env(tmp_path / "node", tools=TOOLS, stubs={"mountpoint": MOUNTPOINT_STUB}))
    ami.build(built, ami.load("hyperpod-dlami-ubuntu2204"), installed=("enroot", "pyxis"))
    return built


def test_enroot_as_configured_leaves_dev_and_its_efa_devices_to_containers(enroot_node, tmp_path):
    result = enroot_node.run("enroot-pyxis.sh")
    assert result.returncode == 0, result.stderr
    settings = enroot_settings(enroot_node.path("/etc/enroot/enroot.conf"))
    assert "ENROOT_RESTRICT_DEV" not in settings  # enroot reads `no` as unset ...
    assert devices_hook_mounts(tmp_path / "ours", settings) == ""  # ... so its hook leaves the host's /dev alone


def test_enroot_restrict_dev_y_would_replace_dev_and_hide_the_efa_devices(tmp_path):
    """The defect: with `ENROOT_RESTRICT_DEV y` enroot mounts a fresh tmpfs on /dev holding only the basic devices;
    /dev/infiniband/uverbs* (EFA) is not among them."""
    conf = tmp_path / "enroot.conf"
    conf.write_text("ENROOT_RESTRICT_DEV y\n")
    settings = enroot_settings(conf)
    assert settings["ENROOT_RESTRICT_DEV"] == "y"
    mounts = devices_hook_mounts(tmp_path, settings)
    assert "tmpfs                   /dev            tmpfs" in mounts
    assert "/dev/null" in mounts and "infiniband" not in mounts


def test_run_enroot_1777_and_run_pyxis_0755_are_made_at_every_boot(enroot_node, tmp_path):
    """The real systemd-tmpfiles applies what enroot-pyxis.sh writes, as a boot does. /run/pyxis is root's 0755, as
    pyxis's slurmd part makes it (pyxis_slurmd.c at v0.24.0: mkdir(runtime_path, 0755)); 1777 would let any user
    create another user's pyxis runtime directory before them."""
    tmpfiles = _tool("systemd-tmpfiles")
    if not tmpfiles:
        pytest.skip("systemd-tmpfiles is not installed")
    assert enroot_node.run("enroot-pyxis.sh").returncode == 0
    conf = enroot_node.path("/etc/tmpfiles.d/fmcluster-enroot.conf")
    for directory in ("/run/enroot", "/run/pyxis"):
        shutil.rmtree(enroot_node.path(directory))  # a boot: /run is a fresh tmpfs
    subprocess.run([tmpfiles, "--create", f"--root={enroot_node.root}", str(conf)], check=True, capture_output=True,
                   timeout=30)  # fmt: skip
    for directory, wanted in (("/run/enroot", 0o1777), ("/run/pyxis", 0o755)):
        mode = enroot_node.path(directory).stat().st_mode
        assert stat.S_ISDIR(mode) and stat.S_IMODE(mode) == wanted, directory


def test_enroot_dirs_come_back_for_every_user_after_scratch_is_rebuilt(enroot_node, tmp_path):
    """A stop/start hands the instance blank disks; fmcluster-scratch.service rebuilds /scratch empty. The unit
    enroot-pyxis.sh installs runs after it and re-creates enroot's directories (1777) with the real systemd-tmpfiles,
    so the second user's `mkdir -p .../data/user-<uid>` works as the first one's."""
    tmpfiles = _tool("systemd-tmpfiles")
    if not tmpfiles:
        pytest.skip("systemd-tmpfiles is not installed")
    enroot_node.path("/scratch").mkdir()
    (enroot_node.state / "mounted").write_text(f"{enroot_node.path('/scratch')}\n")  # nvme-raid.sh mounted it
    assert enroot_node.run("enroot-pyxis.sh").returncode == 0
    unit = enroot_node.path("/etc/systemd/system/fmcluster-enroot-dirs.service").read_text()
    assert "After=local-fs.target fmcluster-scratch.service\n" in unit
    command = unit.split("ExecStart=", 1)[1].splitlines()[0].split()
    assert command[:2] == ["/usr/bin/systemd-tmpfiles", "--create"]
    shutil.rmtree(enroot_node.path("/scratch/enroot"))  # the rebuilt, empty /scratch
    subprocess.run([tmpfiles, "--create", f"--root={enroot_node.root}", str(enroot_node.path(command[2]))],
                   check=True, capture_output=True, timeout=30)  # fmt: skip
    for directory in ("cache", "data", "tmp"):
        mode = enroot_node.path(f"/scratch/enroot/{directory}").stat().st_mode
        assert stat.S_ISDIR(mode) and stat.S_IMODE(mode) == 0o1777, directory


# -- the /fsx line at every boot (systemd's own fstab generator) -------------------------------------------------


def test_a_failed_lnet_efa_set_up_at_boot_never_stops_the_fsx_mount(tmp_path):
    """systemd's real fstab generator turns the line mount-lustre.sh --efa writes into fsx.mount. With the former
    x-systemd.requires= it carried Requires=fmcluster-lnet-efa.service, and a required unit that fails stops the mount
    (systemd.unit(5), Requires=); lnet-efa.sh --boot exits 3 whenever it falls back to TCP, so a reboot then left no
    /fsx. With x-systemd.after= the mount is only ordered after the LNet set-up."""
    generator = Path("/usr/lib/systemd/system-generators/systemd-fstab-generator")
    if not generator.exists():
        pytest.skip("systemd's fstab generator is not installed")
    (tmp_path / "node").mkdir()
    node = ScriptNode(**stub_env(tmp_path / "node", tools=SCRIPT_TOOLS, stubs=STUBS, python=True))
    pcs = ami.load("pcs-ready-dlami-ubuntu2404")  # as tests/node/test_scripts.py's node: a custom AL2023 image
    al2023 = ami.custom(pcs, "al2023", os_release={"ID": "amzn", "VERSION_ID": "2023"}, nvme={"assembled_by": None},
                        slurm={**pcs.slurm, "versions": [pcs.slurm["version"]]})  # fmt: skip
    ami.build(node, al2023, installed=("lustre_client",))
    efa_devices(node, [f"rdmap{n}s0" for n in range(8, 40)])
    node.set("instance-type", "p5.48xlarge")
    assert node.run("mount-lustre.sh", DNS, "abcdef12", "--efa").returncode == 0
    out = tmp_path / "generated"
    out.mkdir()
    subprocess.run([str(generator), str(out), str(out), str(out)], check=True, capture_output=True, timeout=30,
                   env={"SYSTEMD_FSTAB": str(node.path("/etc/fstab")), "SYSTEMD_PROC_CMDLINE": ""})  # fmt: skip
    unit = (out / "fsx.mount").read_text().splitlines()
    assert "After=fmcluster-lnet-efa.service" in unit
    assert not [line for line in unit if line.startswith(("Requires=", "BindsTo=", "Requisite="))]
    assert (out / "remote-fs.target.requires" / "fsx.mount").exists()  # and remote-fs.target still needs /fsx
