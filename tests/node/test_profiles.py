"""Every node script on every AMI profile it can meet (tests/node/profiles/*.json; a new profile is a new data file).

The machine is built from the profile (tests/node/ami.py): os-release, kernel, Slurm's prefix, configuration
directory and slurmd unit, what is installed, what is mounted, the DLAMI's LVM volume group. The stub commands of
test_scripts.py stand in for what cannot run here (mdadm, lnetctl, modprobe, the network); test_real_tools.py runs
the same scripts with the real tools that do run here.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from fmcluster import nccl, node_scripts
from tests.node import ami
from tests.node.test_scripts import (
    BUNDLE_URI,
    DNS,
    NODE_DIR,
    STUBS,
    TOOLS,
    Node,
    bundle,
    efa_devices,
    serve,
    store_disks,
)
from tests.observability.conftest import DASHBOARDS
from tests.observability.test_node_script import RELEASES, tarball
from tests.stub_node import stub_env

MIRROR = "s3://quickstart-data-0123456789ab/fmcluster-mirror"
"""The project's mirror as the cluster stacks give it to the nodes (FMCLUSTER_ARTIFACT_MIRROR)."""
ENROOT_KEYS = ("enroot/4.1.2/enroot_4.1.2-1_amd64.deb", "enroot/4.1.2/enroot+caps_4.1.2-1_amd64.deb")
"""enroot's doc/installation.md at v4.1.2 names its release packages (enroot_4.1.2-1_<arch>.deb, and +caps); the
mirror keeps them under <name>/<version>/ (fmcluster/mirror/artifacts.json)."""
PYXIS_KEY = "pyxis/0.24.0/v0.24.0.tar.gz"
"""GitHub's source archive of the pyxis tag v0.24.0 (its top directory is pyxis-0.24.0), as the mirror keeps it."""

ENROOT_FIXTURES = Path(__file__).parent / "fixtures" / "enroot-v4.1.2"
# what enroot's packages install besides the binaries: its extra hooks under /usr/share/enroot/hooks.d (enroot's
# Makefile at v4.1.2, `install -m 755 $(HOOKS_EXTRA) $(DATADIR)/hooks.d`; fixtures/enroot-v4.1.2/README.md)
ENROOT_PACKAGE = f"""if [[ "$*" == *enroot* ]]; then
  mkdir -p "$FMCLUSTER_ROOT/usr/share/enroot/hooks.d"
  cp {ENROOT_FIXTURES}/50-slurm-pmi.sh {ENROOT_FIXTURES}/50-slurm-pytorch.sh "$FMCLUSTER_ROOT/usr/share/enroot/hooks.d/"
fi
"""

INSTALL_STUBS = {
    # curl reaches IMDS only: no node script downloads with curl (test_mirror: no node file names an internet host)
    "apt-get": ENROOT_PACKAGE + "exit 0",
    # yum install ... enroot.rpm: resolves enroot's Requires, GNU parallel among them, unless only EPEL has it
    "yum": """if [[ "$*" == *.rpm* && -f "$STUB_STATE/parallel-in-epel" ]]; then
  echo "Error: Package: enroot-4.1.2-1.el8.x86_64 Requires: parallel" >&2
  exit 1
fi
"""
    + ENROOT_PACKAGE,
    "dpkg": "echo amd64",
    "gcc": "exit 0",
    # make -C DIR CPPFLAGS=... prefix=PREFIX install: what pyxis's Makefile installs, under FMCLUSTER_ROOT
    "make": """echo "CPPFLAGS=${CPPFLAGS:-}" >"$STUB_STATE/make-env"
for arg; do [[ "$arg" == prefix=* ]] && prefix="${arg#prefix=}"; done
mkdir -p "$FMCLUSTER_ROOT$prefix/lib/slurm" && : >"$FMCLUSTER_ROOT$prefix/lib/slurm/spank_pyxis.so\"""",
}


def pinned_node_dir(tmp_path: Path, node: Node, artifacts: dict[str, bytes] | None = None) -> Path:
    """The tests' model of a release whose artifact list pins `artifacts` (default: enroot's and pyxis's files): a copy
    of fmcluster/node whose mirror.sh also pins the files this test puts in the mirror (stand-ins: the real packages
    are not here). The shipped list does not pin enroot (its digests are unconfirmed), which
    test_with_the_shipped_list_enroot_is_refused_without_a_download shows."""
    copy = tmp_path / "node-pinned"
    shutil.copytree(NODE_DIR, copy)
    pins = ""
    if artifacts is None:
        artifacts = {key: f"stand-in for {key}".encode() for key in ENROOT_KEYS} | {PYXIS_KEY: pyxis_archive()}
    for key, data in artifacts.items():
        node.set(f"s3/{MIRROR.removeprefix('s3://')}/{key}", data)
        pins += f"MIRROR_SHA256['{key}']={hashlib.sha256(data).hexdigest()}\n"
    helper = copy / "mirror.sh"
    end = "# --- end of pinned digests ---\n"
    helper.write_text(helper.read_text().replace(end, pins + end))
    return copy


def pyxis_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("pyxis-0.24.0/Makefile")
        archive.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()


@pytest.fixture(params=ami.PROFILES)
def machine(request, tmp_path) -> tuple[Node, ami.Profile]:
    profile = ami.load(request.param)
    node = Node(**stub_env(tmp_path, tools=TOOLS, stubs={**STUBS, **INSTALL_STUBS}, python=True))
    ami.build(node, profile)
    return node, profile


def pcs_machine(tmp_path, name: str) -> Node:
    node = Node(**stub_env(tmp_path, tools=TOOLS, stubs={**STUBS, **INSTALL_STUBS}, python=True))
    ami.build(node, ami.load(name))
    return node


def without_lustre_client(node: Node) -> Node:
    """`node` on an image without the FSx Lustre client (no lustre module for its kernel, no mount.lustre)."""
    node.set("no-lustre", "")
    (node.bin / "mount.lustre").unlink(missing_ok=True)
    return node


# -- the profiles themselves -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ami.PROFILES)
def test_every_profile_states_every_fact_with_a_source(name):
    profile = ami.load(name)
    for fact in ami.FACTS:
        assert profile.sources[fact].strip(), f"{name}: {fact} has no source"
    assert ami.PCS_PROFILES == ("pcs-ready-dlami-ubuntu2404",)
    assert ami.HYPERPOD_PROFILES == ("hyperpod-dlami-ubuntu2204",)
    readme = (ami.PROFILES_DIR / "README.md").read_text()
    assert f"`{name}`" in readme


# -- nvme-raid.sh ----------------------------------------------------------------------------------------------


def test_nvme_raid_uses_what_the_image_made_of_the_disks(machine):
    """DLAMI: the disks are in vg.01 and mounted at /opt/dlami/nvme: never mdadm (before the fix: `mdadm --create` on
    busy disks, the lifecycle exits 1 and HyperPod fails the cluster). PCS: a RAID 0 of the raw disks."""
    node, profile = machine
    node.disks(*store_disks(4))
    result = node.run("nvme-raid.sh")
    assert result.returncode == 0, result.stderr
    if profile.dlami:
        assert node.calls("mdadm") == [] and node.calls("mkfs.xfs") == []
        assert node.calls("mount") == [
            ["mount", "--bind", str(node.path("/opt/dlami/nvme/scratch")), str(node.path("/scratch"))]
        ]
        assert "bind,nofail,x-systemd.requires-mounts-for=/opt/dlami/nvme" in node.path("/etc/fstab").read_text()
        assert stat.S_IMODE(node.path("/opt/dlami/nvme/scratch").stat().st_mode) == 0o1777
        unit = node.path("/etc/systemd/system/fmcluster-scratch.service").read_text()
        assert "After=local-fs.target dlami-nvme.service\n" in unit  # a stop/start's fresh volume gets scratch/ too
    else:
        assert [call[1] for call in node.calls("mdadm")][:2] == ["--detail", "--create"]
        unit = node.path("/etc/systemd/system/fmcluster-scratch.service").read_text()
        assert f"Before={profile.slurm['slurmd_unit']}\n" in unit  # the image's own slurmd unit, asked of systemd


# -- enroot-pyxis.sh -------------------------------------------------------------------------------------------


def test_enroot_and_pyxis_are_installed_where_missing_and_configured_for_efa(machine):
    node, profile = machine
    # on PCS the construct passes the cluster's version (run-step.sh install --slurm-version); HyperPod: /opt/slurm
    cluster = {"FMCLUSTER_SLURM_VERSION": profile.slurm["version"]} if profile["orchestrator"] == "pcs" else {}
    nodes = pinned_node_dir(node.root.parent, node)
    result = node.run(nodes / "enroot-pyxis.sh", env={**cluster, "FMCLUSTER_ARTIFACT_MIRROR": MIRROR})
    assert result.returncode == 0, result.stderr
    slurm = profile.slurm
    ubuntu = profile["os_release"]["ID"] == "ubuntu"
    installer = "apt-get" if ubuntu else "yum"
    packages = [arg for call in node.calls(installer) for arg in call if arg.endswith((".deb", ".rpm"))]
    assert [p.rsplit("/", 1)[-1] for p in packages] == (["enroot.deb", "enroot+caps.deb"] if ubuntu else
                                                       ["enroot.rpm", "enroot+caps.rpm"])  # fmt: skip
    # from the mirror only, over S3 (the gateway endpoint), nothing from any other host
    downloads = [call[-2] for call in node.calls("aws") if call[1:3] == ["s3", "cp"]]
    assert downloads == [f"{MIRROR}/{key}" for key in (*ENROOT_KEYS, PYXIS_KEY)]
    assert not [call for call in node.calls("curl") if "169.254.169.254" not in call[-1]]
    ((make,),) = [[call] for call in node.calls("make")]
    assert f"prefix={slurm['prefix']}" in make  # built against this image's Slurm, into its plugin directory
    # in the environment: pyxis's Makefile appends it to its own CPPFLAGS (a command-line one would replace them)
    assert (node.state / "make-env").read_text() == f"CPPFLAGS=-I{slurm['include']}\n"

    conf = node.path("/etc/enroot/enroot.conf").read_text()
    assert "ENROOT_RESTRICT_DEV no\n" in conf and "ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)\n" in conf
    base = "/opt/dlami/nvme" if profile.dlami else "/tmp"  # no /scratch yet in this test
    assert f"ENROOT_CACHE_PATH {base}/enroot/cache/group-$(id -g)\n" in conf
    assert node.path("/etc/tmpfiles.d/fmcluster-enroot.conf").read_text().splitlines()[2:] == [
        "d /run/enroot 1777 root root -",
        "d /run/pyxis 0755 root root -",  # as pyxis makes it (pyxis_slurmd.c, v0.24.0: mkdir(runtime_path, 0755))
        f"d {base}/enroot/cache 1777 root root -",
        f"d {base}/enroot/data 1777 root root -",
        f"d {base}/enroot/tmp 1777 root root -",
    ]
    assert stat.S_IMODE(node.path("/run/enroot").stat().st_mode) == 0o1777
    assert stat.S_IMODE(node.path("/run/pyxis").stat().st_mode) == 0o755
    # enroot's extra Slurm hooks, linked where enroot runs hooks (they come in /usr/share/enroot/hooks.d)
    for hook in ("50-slurm-pmi.sh", "50-slurm-pytorch.sh"):
        assert os.readlink(node.path(f"/etc/enroot/hooks.d/{hook}")) == f"/usr/share/enroot/hooks.d/{hook}"
    # the PMI hook runs scontrol: Slurm's bin on the image's slurmd unit's PATH
    drop_in = node.path(f"/etc/systemd/system/{slurm['slurmd_unit']}.d/fmcluster-path.conf").read_text()
    assert f"Environment=PATH={slurm['prefix']}/bin:/usr/local/sbin:" in drop_in
    plugin = f"required {slurm['plugin_dir']}/spank_pyxis.so\n"
    assert node.path(f"{slurm['plugstack_dir']}/pyxis.conf").read_text() == plugin
    stack = node.path(f"{slurm['etc']}/plugstack.conf")
    if profile["orchestrator"] == "pcs":  # PCS reads its SPANK directory itself ("Configure SPANK plugins")
        assert not stack.exists()
    else:
        assert stack.read_text() == f"include {slurm['plugstack_dir']}/pyxis.conf\n"


# -- observability.sh -------------------------------------------------------------------------------------------


def test_observability_installs_from_the_mirror_only(machine):
    """On each image: node_exporter and the Prometheus agent from the mirror (stand-ins pinned in a copy of the node
    files), over `aws s3 cp` only; no other host is contacted (curl only reaches IMDS, which lib.sh asks)."""
    node, _ = machine
    mirrored = {RELEASES[c].key: tarball(RELEASES[c]) for c in ("node_exporter", "prometheus")}
    nodes = pinned_node_dir(node.root.parent, node, mirrored)
    node.path("/var/tmp").mkdir(parents=True, exist_ok=True)
    node.add_stub("hostname", "echo ip-10-0-0-1")
    endpoint = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef/"
    result = node.run(
        nodes / "observability.sh", "--cluster", "llm", "--region", "us-west-2", "--prometheus-endpoint", endpoint,
        "--config-dir", str(DASHBOARDS), env={"FMCLUSTER_ARTIFACT_MIRROR": MIRROR},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    downloads = [call[-2] for call in node.calls("aws") if call[1:3] == ["s3", "cp"]]
    assert downloads == [f"{MIRROR}/{key}" for key in mirrored]
    assert not [call for call in node.calls("curl") if "169.254.169.254" not in call[-1]]
    assert node.path("/opt/fmcluster/observability/prometheus-3.8.1/prometheus").exists()
    assert node.path("/etc/systemd/system/fmcluster-prometheus-agent.service").exists()
    assert [call for call in node.calls("docker") if call[1] == "pull"] == []


def test_with_the_shipped_list_enroot_is_refused_without_a_download(machine):
    """enroot's digests are unconfirmed (fmcluster/mirror/artifacts.json): the node refuses the packages, naming them,
    copies nothing and contacts no other host; the step fails (fail safe)."""
    node, _ = machine
    result = node.run("enroot-pyxis.sh", env={"FMCLUSTER_ARTIFACT_MIRROR": MIRROR})
    assert result.returncode == 1
    assert (
        "ERROR: enroot/4.1.2/enroot_4.1.2-1_amd64.deb has no pinned SHA-256 in fmcluster's artifact list (its digest "
        "is unconfirmed): not installing it; see fmcluster/mirror/README.md (pinning an artifact)" in result.stderr
    )
    assert result.stderr.splitlines()[-1].endswith(
        "ERROR: enroot 4.1.2 or its dependencies (jq, parallel, squashfs-tools) could not be installed from the mirror "
        "and the package repositories; see the mirror job's log (fmcluster/mirror/README.md: a digest not pinned is "
        "never mirrored), or use an image with enroot and pyxis installed"
    )
    assert [call for call in node.calls("aws") if call[1:3] == ["s3", "cp"]] == []
    assert not node.path("/etc/enroot/enroot.conf").exists()


def test_a_mirror_file_that_does_not_match_its_pin_is_removed_and_refused(tmp_path):
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    nodes = pinned_node_dir(tmp_path, node)
    node.set(f"s3/{MIRROR.removeprefix('s3://')}/{ENROOT_KEYS[0]}", b"tampered")
    result = node.run(nodes / "enroot-pyxis.sh", env={"FMCLUSTER_ARTIFACT_MIRROR": MIRROR,
                                                      "FMCLUSTER_SLURM_VERSION": "25.11"})  # fmt: skip
    assert result.returncode == 1
    assert f"ERROR: checksum mismatch for {ENROOT_KEYS[0]} from the mirror: expected " in result.stderr
    assert f"(pinned), got {hashlib.sha256(b'tampered').hexdigest()}" in result.stderr
    assert [arg for call in node.calls("apt-get") for arg in call if arg.endswith(".deb")] == []


# -- nccl-env.sh -----------------------------------------------------------------------------------------------


def run_enroot_hook(node: Node, hook: Path, job_env: dict[str, str]) -> list[str]:
    """`hook` as enroot runs it (src/runtime.sh, v4.1.2): with the job step's environment and ENROOT_ENVIRON, the
    file that becomes the container's environment (here holding what the image's /etc/environment gave)."""
    environ = node.root / "container-environment"
    environ.write_text("PATH=/usr/local/bin:/usr/bin\n")
    env = {"PATH": "/usr/bin:/bin", "FMCLUSTER_ROOT": str(node.root), "ENROOT_ENVIRON": str(environ), **job_env}
    subprocess.run(["bash", str(hook)], env=env, check=True, timeout=30)
    return environ.read_text().splitlines()


def test_the_nccl_environment_reaches_containers_and_a_users_own_value_wins(machine):
    node, _ = machine
    node.set("ssm-value", '{"NCCL_DEBUG": "WARN"}')
    node.path("/etc/enroot/environ.d").mkdir(parents=True)
    old = node.path("/etc/enroot/environ.d/50-fmcluster-nccl.env")  # what fmcluster wrote before
    old.write_text("NCCL_DEBUG=WARN\n")
    assert node.run("nccl-env.sh", "/fmcluster/x/gpu/nccl-env", env={"AWS_REGION": "us-east-1"}).returncode == 0
    hook = node.path("/etc/enroot/hooks.d/50-fmcluster-nccl.sh")
    assert stat.S_IMODE(hook.stat().st_mode) == 0o755
    assert not old.exists()  # enroot put environ.d over the job's own values, through pyxis
    assert run_enroot_hook(node, hook, {}) == [
        "PATH=/usr/local/bin:/usr/bin", "NCCL_DEBUG=WARN", "NCCL_SOCKET_IFNAME=^docker,lo,veth",
    ]  # fmt: skip
    # a job with its own NCCL_DEBUG: the container gets the node's other values, and no NCCL_DEBUG over the job's
    # (pyxis keeps a job variable the container does not set; spank_import_container_env, v0.24.0)
    assert run_enroot_hook(node, hook, {"NCCL_DEBUG": "INFO"}) == [
        "PATH=/usr/local/bin:/usr/bin", "NCCL_SOCKET_IFNAME=^docker,lo,veth",
    ]  # fmt: skip


def test_an_efa_group_environment_makes_nccl_fail_rather_than_use_sockets_in_containers(machine):
    """The SSM value NcclTuning writes for a p5 group (nccl.nccl_environment at the image's default versions) carries
    NCCL_NET=Libfabric (NCCL then initializes only the aws-ofi-nccl plugin and fails without it: NVIDIA/nccl
    src/plugin/net.cc ncclNetInit, v2.30.7-1); it reaches login shells, env files and every container, and a job that
    names another network keeps its own."""
    node, _ = machine
    value = nccl.nccl_environment(
        "p5.48xlarge", nccl_version=nccl.DEFAULT_NCCL_VERSION, ofi_nccl_version=nccl.DEFAULT_OFI_NCCL_VERSION,
        efa_installer_version=nccl.DEFAULT_EFA_INSTALLER_VERSION,
    )  # fmt: skip
    node.set("ssm-value", json.dumps(value))
    assert node.run("nccl-env.sh", "/fmcluster/x/gpu/nccl-env", env={"AWS_REGION": "us-east-1"}).returncode == 0
    assert "NCCL_NET=Libfabric" in node.path("/etc/fmcluster/nccl.env").read_text().splitlines()
    assert "export NCCL_NET='Libfabric'" in node.path("/etc/profile.d/fmcluster-nccl.sh").read_text()
    hook = node.path("/etc/enroot/hooks.d/50-fmcluster-nccl.sh")
    assert "NCCL_NET=Libfabric" in run_enroot_hook(node, hook, {})
    assert not any(line.startswith("NCCL_NET=") for line in run_enroot_hook(node, hook, {"NCCL_NET": "Socket"}))


# -- slurm-hooks.sh --------------------------------------------------------------------------------------------


def test_slurm_hooks_never_write_hyperpods_slurm_conf_and_are_named_for_pcs(machine):
    node, profile = machine
    node.set(f"active-{profile.slurm['slurmd_unit']}", "")
    conf = node.path(f"{profile.slurm['etc']}/slurm.conf")
    before = conf.read_bytes() if conf.exists() else None
    result = node.run("slurm-hooks.sh")
    assert result.returncode == 0, result.stderr
    assert not [call for call in node.calls("systemctl") if call[1] == "restart"]  # nothing for a daemon to re-read
    if profile["orchestrator"] == "pcs":
        # TaskProlog is no cluster-level Slurm custom setting of AWS PCS (PCS API reference, SlurmCustomSetting)
        assert "AWS PCS runs Slurm configless and takes no TaskProlog" in result.stderr
    else:
        # HyperPod's cluster agent rewrites slurm.conf (FACTS.md, "Node images"): it is never written; the AMI's own
        # GPU job map (prolog.d/700_dcgm_job_map_register.sh) serves dcgm-exporter
        assert conf.read_bytes() == before
        assert "HyperPod's AMI maps jobs to GPUs itself" in result.stderr
        assert not node.path(f"{profile.slurm['etc']}/prolog.d/710-fmcluster-gpu-job-map.sh").exists()


@pytest.mark.parametrize("runs_prolog_d", [True, False])
def test_without_the_amis_job_map_hyperpod_gets_fmclusters_in_prolog_d_never_in_slurm_conf(tmp_path, runs_prolog_d):
    node = pcs_machine(tmp_path, "hyperpod-dlami-ubuntu2204")
    for hook in ("prolog.d/700_dcgm_job_map_register.sh", "epilog.d/700_dcgm_job_map_cleanup.sh"):
        node.path(f"/opt/slurm/etc/{hook}").unlink()  # an AMI from before the job map
    conf = node.path("/opt/slurm/etc/slurm.conf")
    if runs_prolog_d:  # (unconfirmed) that HyperPod's slurm.conf names the directories so; the script reads it
        conf.write_text(conf.read_text() + "Prolog=/opt/slurm/etc/prolog.d/*\nEpilog=/opt/slurm/etc/epilog.d/*\n")
    before = conf.read_bytes()
    result = node.run("slurm-hooks.sh")
    assert result.returncode == 0, result.stderr
    assert conf.read_bytes() == before
    for kind in ("prolog", "epilog"):
        hook = node.path(f"/opt/slurm/etc/{kind}.d/710-fmcluster-gpu-job-map.sh")
        assert (os.readlink(hook) if runs_prolog_d else hook.exists()) == (
            str(NODE_DIR / "slurm/gpu-job-map.sh") if runs_prolog_d else False)  # fmt: skip
    if not runs_prolog_d:
        assert "GPU metrics carry no hpc_job label (slurm.conf is HyperPod's and is not changed)" in result.stderr


# -- mount-lustre.sh and lnet-efa.sh (PCS nodes; HyperPod mounts /fsx itself) ------------------------------------


@pytest.mark.parametrize("name", ami.PCS_PROFILES)
def test_lustre_goes_over_efa_where_the_image_is_an_fsx_efa_client_else_tcp(tmp_path, name):
    node = pcs_machine(tmp_path, name)
    efa_devices(node, [f"rdmap{n}s0" for n in range(8, 40)])
    node.set("instance-type", "p5.48xlarge")
    result = node.run("mount-lustre.sh", DNS, "abcdef12", "--efa")
    assert result.returncode == 0, result.stderr
    fstab = node.path("/etc/fstab").read_text()
    assert len(node.calls("mount")) == 1  # /fsx mounts in every case
    if ami.load(name)["lustre_efa_client"]:
        assert "x-systemd.after=fmcluster-lnet-efa.service" in fstab
        assert any(call[1:4] == ["net", "add", "--net"] and call[4] == "efa" for call in node.calls("lnetctl"))
    else:
        assert "fmcluster-lnet-efa" not in fstab and node.calls("lnetctl") == []
        assert "LNet over EFA is not possible here: Amazon Linux 2 is no FSx EFA client OS; using TCP" in (
            node.script_log("lnet-efa")
        )


def test_a_failing_lnet_set_up_falls_back_to_tcp_and_still_mounts(tmp_path):
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    efa_devices(node, ["rdmap0s0"])
    # lnetctl fails to add the efa network (and shows none)
    node.add_stub("lnetctl", '[[ "$1 $2" == "net show" || "$1 $2 ${4:-}" == "net add efa" ]] && exit 1\nexit 0')
    result = node.run("mount-lustre.sh", DNS, "abcdef12", "--efa", env={"FMCLUSTER_INSTANCE_TYPE": "g5.48xlarge"})
    assert result.returncode == 0, result.stderr
    assert "LNet over EFA could not be set up (see the lines above); using TCP" in node.script_log("lnet-efa")
    assert ["lnetctl", "net", "del", "--net", "efa"] in node.calls("lnetctl")
    assert "fmcluster-lnet-efa" not in node.path("/etc/fstab").read_text() and len(node.calls("mount")) == 1


def test_an_efa_driver_older_than_fsx_needs_means_tcp(tmp_path):
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    efa_devices(node, ["rdmap0s0"])
    node.set("efa-driver", "2.10.0\n")
    result = node.run("mount-lustre.sh", DNS, "abcdef12", "--efa", env={"FMCLUSTER_INSTANCE_TYPE": "g5.48xlarge"})
    assert result.returncode == 0, result.stderr
    assert "EFA driver 2.10.0 is older than 2.12.1; using TCP" in node.script_log("lnet-efa")
    assert node.calls("lnetctl") == []


def test_an_image_without_the_lustre_client_terminates_the_node_naming_what_is_missing(tmp_path):
    """A custom image built from the PCS-Ready DLAMI without FSx's client: nothing is installed at boot (its packages
    are kernel-specific, from a public host outside the S3 gateway endpoint); the required lustre step fails, so PCS
    ends the node (onError TERMINATE) with one line saying why."""
    node = without_lustre_client(pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404"))
    kernel = ami.load("pcs-ready-dlami-ubuntu2404")["kernel"]
    result = node.run("mount-lustre.sh", DNS, "abcdef12")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(
        f"ERROR: this image has no FSx Lustre client: the lustre kernel module for kernel {kernel} (modinfo lustre) "
        "and the mount helper mount.lustre missing; fmcluster installs none at boot: use an image that carries it "
        "(docs/node-images.md)"
    )
    assert {"apt-get", "curl", "gpg", "mount"}.isdisjoint(node.commands())


def test_lustre_mount_failing_terminates_the_node_in_one_line(tmp_path):
    """On the PCS image's profile: the bundle installed, the lustre action (onError TERMINATE, node_scripts) exits 1
    with one line naming the step and its log, so the PCS agent ends the node before slurmd starts."""
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    serve(node, BUNDLE_URI, bundle())
    steps = dict(
        (entry.name if entry else "install", arguments)
        for entry, arguments in node_scripts.pcs_steps(bundle_s3_uri=BUNDLE_URI, region="us-west-2",
                                                       lustre_dns_name=DNS, lustre_mount_name="abcdef12")
    )  # fmt: skip
    actions = node_scripts.node_lifecycle_actions(runner_s3_uri="s3://b/run-step.sh", bundle_s3_uri=BUNDLE_URI,
                                                  lustre_dns_name=DNS, lustre_mount_name="abcdef12")  # fmt: skip
    on_error = {script.name: script.on_error for script in actions.stages.node_bootstrapped}
    assert on_error["lustre"] == "TERMINATE"
    assert node.run("run-step.sh", *steps["install"]).returncode == 0
    node.set("mount-failures", "99")
    result = node.run("run-step.sh", "lustre", *steps["lustre"], env={"FMCLUSTER_RETRY_ATTEMPTS": "2"})
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(
        "ERROR: fmcluster step lustre FAILED with exit status 1; the node cannot train without it "
        "(log: /var/log/fmcluster/mount-lustre.log)"
    )


def test_a_failed_steps_line_reaches_the_console_that_ec2_keeps(tmp_path):
    """run-step.sh writes its FAILED and WARNING lines to /dev/console too (fmcluster diagnose reads them with
    GetConsoleOutput). Here the console is a pseudo-terminal (a real character device; EC2's serial console stays
    emulated), linked at the node's /dev/console."""
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    serve(node, BUNDLE_URI, bundle())
    master, terminal = os.openpty()
    node.path("/dev").mkdir(exist_ok=True)
    node.path("/dev/console").symlink_to(os.ttyname(terminal))
    steps = dict(
        (entry.name if entry else "install", arguments)
        for entry, arguments in node_scripts.pcs_steps(bundle_s3_uri=BUNDLE_URI, region="us-west-2",
                                                       lustre_dns_name=DNS, lustre_mount_name="abcdef12")
    )  # fmt: skip
    assert node.run("run-step.sh", *steps["install"]).returncode == 0
    node.set("mount-failures", "99")
    assert node.run("run-step.sh", "lustre", *steps["lustre"], env={"FMCLUSTER_RETRY_ATTEMPTS": "2"}).returncode == 1
    assert node.run("run-step.sh", "enroot", *steps["enroot"]).returncode == 0  # refused: enroot is not pinned
    os.set_blocking(master, False)
    lines = os.read(master, 65536).decode().replace("\r\n", "\n").splitlines()
    os.close(master), os.close(terminal)
    assert [line.split(": ", 1)[1] for line in lines] == [
        "fmcluster step lustre FAILED with exit status 1; the node cannot train without it "
        "(log: /var/log/fmcluster/mount-lustre.log)",
        "fmcluster WARNING: step enroot failed; jobs cannot use --container-image (no enroot/pyxis on this node) "
        "(log: /var/log/fmcluster/enroot-pyxis.log)",
    ]
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ run-step\[\d+\]: fmcluster ", line) for line in lines)


def test_pyxis_is_built_for_the_clusters_slurm_version_not_the_newest_on_the_image(tmp_path):
    """The PCS-Ready DLAMI holds Slurm 25.05 and 25.11 (profile); a 25.05 cluster gets pyxis for 25.05 only."""
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    nodes = pinned_node_dir(tmp_path, node)
    result = node.run(nodes / "enroot-pyxis.sh", env={"FMCLUSTER_SLURM_VERSION": "25.05",
                                                      "FMCLUSTER_ARTIFACT_MIRROR": MIRROR})  # fmt: skip
    assert result.returncode == 0, result.stderr
    built = [arg for call in node.calls("make") for arg in call if arg.startswith("prefix=")]
    assert built == ["prefix=/opt/aws/pcs/scheduler/slurm-25.05"]
    conf = node.path("/etc/aws/pcs/scheduler/slurm-25.05/plugstack.conf.d/pyxis.conf")
    assert conf.read_text() == "required /opt/aws/pcs/scheduler/slurm-25.05/lib/slurm/spank_pyxis.so\n"
    assert not node.path("/etc/aws/pcs/scheduler/slurm-25.11/plugstack.conf.d/pyxis.conf").exists()


@pytest.mark.parametrize(("removed", "named"), [(("gcc",), "gcc"), (("gcc", "make"), "gcc make")])
def test_an_image_without_gcc_or_make_fails_the_enroot_step_and_installs_no_build_tools(tmp_path, removed, named):
    """pyxis is built on the node; nothing installs gcc/make (apt would need Ubuntu's archive, outside the VPC)."""
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    for tool in removed:
        (node.bin / tool).unlink()
    nodes = pinned_node_dir(tmp_path, node)
    result = node.run(nodes / "enroot-pyxis.sh", env={"FMCLUSTER_SLURM_VERSION": "25.05",
                                                      "FMCLUSTER_ARTIFACT_MIRROR": MIRROR})  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(
        f"ERROR: pyxis 0.24.0 is built on the node, but this image has no {named} on PATH (fmcluster installs no "
        "build tools: a package repository is outside the VPC's endpoints); use an image that carries gcc and make, "
        "or one with enroot and pyxis installed"
    )
    assert not [call for call in node.calls("apt-get") if "gcc" in call or "make" in call]
    assert node.calls("make") == []


def test_a_cluster_version_the_image_lacks_fails_the_enroot_step(tmp_path):
    """26.05 is a version PCS creates (botocore pcs), but the profile's image holds 25.05 and 25.11 only."""
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    result = node.run("enroot-pyxis.sh", env={"FMCLUSTER_SLURM_VERSION": "26.05"})
    assert result.returncode == 1
    assert (
        "ERROR: this image has no Slurm 26.05 (the cluster's version) under /opt/aws/pcs/scheduler; it has "
        "slurm-25.05 slurm-25.11" in result.stderr
    )
    assert result.stderr.splitlines()[-1].endswith(
        "ERROR: pyxis must be built against the cluster's Slurm 26.05, which this image lacks; use an image that "
        "carries it (the PCS-Ready DLAMI's versions: README, supported images) or another slurm_version"
    )
    assert node.calls("make") == []
