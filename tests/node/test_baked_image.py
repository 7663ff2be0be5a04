"""A baked node image (`orchestrator.node_image: baked`): the image build and the boot of its nodes, on the image
profiles, through the same runner and scripts a node of the plain image runs (`run-step.sh bake` is what EC2 Image
Builder's component runs: fmcluster.constructs.node_image).

What stays emulated, and why: Image Builder itself (its instance, the AMI it takes) and the reboot between the build
and a node's boot, which here is /run emptied and the stub log cleared; the package installs and pyxis's build are the
stubs of test_profiles.py (the real packages are not here).
"""

from __future__ import annotations

import pytest

from fmcluster import node_files, node_scripts
from tests.node import ami
from tests.node.test_profiles import ENROOT_KEYS, INSTALL_STUBS, MIRROR, PYXIS_KEY, pcs_machine, pinned_node_dir
from tests.node.test_scripts import BUNDLE_URI, STUBS, TOOLS, Node, bundle, serve
from tests.stub_node import stub_env

NEEDRESTART_LINE = "$nrconf{override_rc}{qr(^slurmd)} = 0;"
"""One key of needrestart's table (awsome-distributed-ai PR 1165, with PR 1236's review: assigning the whole table
drops Ubuntu's 43 shipped exclusions)."""
UNATTENDED_LINE = 'APT::Periodic::Unattended-Upgrade "0";'
"""What turns apt-daily-upgrade's unattended upgrade off (aws-parallelcluster issue 3269: ParallelCluster 3 turns
Ubuntu's unattended upgrades off by default)."""
BUILD = ["--region", "us-west-2", "--slurm-version", "25.11", "--mirror", MIRROR]


def lines(node: Node, path: str) -> list[str]:
    return [line for line in node.path(path).read_text().splitlines() if not line.startswith(("#", "//"))]


@pytest.mark.parametrize("name", ami.PROFILES)
def test_package_updates_keep_needrestart_off_slurmd_and_unattended_upgrades_off(tmp_path, name):
    node = Node(**stub_env(tmp_path, tools=TOOLS, stubs={**STUBS, **INSTALL_STUBS}, python=True))
    ami.build(node, ami.load(name))
    assert node.run("package-updates.sh").returncode == 0
    assert lines(node, "/etc/needrestart/conf.d/90-fmcluster-slurmd.conf") == [NEEDRESTART_LINE]
    # read after Ubuntu's 20auto-upgrades: apt reads apt.conf.d in name order and a later value wins
    assert lines(node, "/etc/apt/apt.conf.d/99-fmcluster-no-unattended-upgrades") == [UNATTENDED_LINE]
    again = node.run("package-updates.sh")
    assert again.returncode == 0 and "unattended-upgrades: off" not in again.stderr  # idempotent: nothing rewritten


def test_package_updates_change_nothing_off_ubuntu(tmp_path):
    node = Node(**stub_env(tmp_path, tools=TOOLS, stubs={**STUBS, **INSTALL_STUBS}, python=True))
    ami.build(node, ami.custom(ami.load("pcs-ready-dlami-ubuntu2404"), "al2023",
                               os_release={"ID": "amzn", "VERSION_ID": "2023"}))  # fmt: skip
    result = node.run("package-updates.sh")
    assert result.returncode == 0
    assert "not Ubuntu or Debian: no needrestart or unattended-upgrades to hold back; nothing changed" in result.stderr
    assert not node.path("/etc/needrestart").exists()


IMAGE_BUNDLE_URI = "s3://cdk-hnb659fds-assets-123456789012-us-west-2/" + "cd" * 32 + ".zip"
LDD = """#!/usr/bin/env bash
if [[ -f "$STUB_STATE/ldd-missing" ]]; then echo "	libslurm.so.42 => not found"; fi
echo "	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0000000000)"
"""
"""ldd's output form (glibc's ldd: `name => path (address)`, `name => not found` for a library it cannot find)."""


def image_bundle(tmp_path, node: Node, pinned: bool = True) -> bytes:
    """The image bundle (`node_files.image_tree()`, what the build installs), of a release whose artifact list pins
    enroot and pyxis (test_profiles.pinned_node_dir) unless `pinned` is False."""
    files = node_files.image_tree()
    if pinned:
        files["node/mirror.sh"] = ((pinned_node_dir(tmp_path, node) / "mirror.sh").read_bytes(), node_files.SOURCED)
    return node_scripts.zip_archive(files)


def stub(node: Node, name: str, text: str) -> None:
    (node.bin / name).write_text(text)
    (node.bin / name).chmod(0o755)


def reboot(node: Node) -> None:
    """The image taken and a node launched from it: /run is a tmpfs again, the stub log starts afresh, and enroot's
    binary, which the apt-get stub does not lay down as the real package does, is on PATH."""
    assert any("enroot.deb" in arg for call in node.calls("apt-get") for arg in call)  # the build installed it
    for state in node.path("/run/fmcluster/steps").iterdir():
        state.unlink()
    node.log.unlink()
    stub(node, "enroot", "#!/bin/sh\nexit 0\n")


def test_an_image_build_bakes_the_image_steps_and_its_nodes_then_only_configure(tmp_path):
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    serve(node, IMAGE_BUNDLE_URI, image_bundle(tmp_path, node))
    serve(node, BUNDLE_URI, bundle())
    built = node.run("run-step.sh", "bake", IMAGE_BUNDLE_URI, *BUILD)
    assert built.returncode == 0, built.stderr
    baked = [entry.name for entry in node_files.baked_steps()]
    assert baked == ["updates", "enroot"]
    for name in baked:
        assert node.path(f"/run/fmcluster/steps/{name}").read_text() == "done\n"
    downloads = [call[-2] for call in node.calls("aws") if call[1:3] == ["s3", "cp"]]
    assert downloads == [IMAGE_BUNDLE_URI, *(f"{MIRROR}/{key}" for key in (*ENROOT_KEYS, PYXIS_KEY))]  # mirror only
    assert len(node.calls("make")) == 1  # pyxis, against the cluster's Slurm 25.11
    assert node.path("/opt/fmcluster/node.env").read_text().splitlines()[-1] == "FMCLUSTER_NODE_IMAGE=baked"
    again = node.run("run-step.sh", "bake", IMAGE_BUNDLE_URI, *BUILD)  # idempotent: a baked parent bakes again
    assert again.returncode == 0, again.stderr
    assert node.path("/opt/fmcluster/node.env").read_text().count("FMCLUSTER_NODE_IMAGE=baked") == 1

    reboot(node)
    node.path("/etc/needrestart/conf.d/90-fmcluster-slurmd.conf").unlink()  # shows the step does not run again
    cluster = ["--region", "eu-west-1", "--slurm-version", "25.11", "--mirror", MIRROR]
    assert node.run("run-step.sh", "install", BUNDLE_URI, *cluster).returncode == 0
    assert node.path("/opt/fmcluster/node.env").read_text() == (
        f"AWS_DEFAULT_REGION=eu-west-1\nFMCLUSTER_SLURM_VERSION=25.11\nFMCLUSTER_ARTIFACT_MIRROR={MIRROR}\n"
        "FMCLUSTER_NODE_IMAGE=baked\n"
    )  # the cluster's settings, and the image's mark kept
    skipped = node.run("run-step.sh", "updates")
    assert skipped.returncode == 0
    assert "step updates: skipped, since this node's image was baked with it (FMCLUSTER_NODE_IMAGE=baked)" in (
        skipped.stderr
    )
    assert not node.path("/etc/needrestart/conf.d/90-fmcluster-slurmd.conf").exists()
    assert node.path("/run/fmcluster/steps/updates").read_text() == "done\n"  # for steps that need it
    enroot = node.run("run-step.sh", "enroot")
    assert enroot.returncode == 0, enroot.stderr
    # at boot it only configures: no package, no download but the bundle's, no build
    assert [call[-2] for call in node.calls("aws") if call[1:3] == ["s3", "cp"]] == [BUNDLE_URI]
    assert node.calls("make") == []
    assert not [arg for call in node.calls("apt-get") for arg in call if arg.endswith(".deb")]
    assert "ENROOT_RESTRICT_DEV no" in node.path("/etc/enroot/enroot.conf").read_text()


def test_a_boot_image_runs_the_updates_step(tmp_path):
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    serve(node, BUNDLE_URI, bundle())
    assert node.run("run-step.sh", "install", BUNDLE_URI, *BUILD).returncode == 0
    assert node.run("run-step.sh", "updates").returncode == 0
    assert lines(node, "/etc/needrestart/conf.d/90-fmcluster-slurmd.conf") == [NEEDRESTART_LINE]


def test_a_step_that_fails_fails_the_build_and_leaves_no_baked_image(tmp_path):
    """With the shipped artifact list (enroot's digests unconfirmed) the enroot step fails: warn-only on a node, but an
    image without enroot is no baked image, so the build fails in one line naming the step."""
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    serve(node, IMAGE_BUNDLE_URI, image_bundle(tmp_path, node, pinned=False))
    result = node.run("run-step.sh", "bake", IMAGE_BUNDLE_URI, *BUILD)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(
        "ERROR: fmcluster step enroot FAILED with exit status 1; the node cannot train without it "
        "(log: /var/log/fmcluster/enroot-pyxis.log)"
    )
    assert "FMCLUSTER_NODE_IMAGE" not in node.path("/opt/fmcluster/node.env").read_text()


def baked_machine(tmp_path) -> Node:
    node = pcs_machine(tmp_path, "pcs-ready-dlami-ubuntu2404")
    serve(node, IMAGE_BUNDLE_URI, image_bundle(tmp_path, node))
    assert node.run("run-step.sh", "bake", IMAGE_BUNDLE_URI, *BUILD).returncode == 0
    stub(node, "enroot", "#!/bin/sh\nexit 0\n")
    stub(node, "ldd", LDD)
    return node


def test_the_image_check_passes_on_a_baked_image_and_says_what_it_did_not_check(tmp_path):
    """On the build's instance types (no GPU, no EFA): the image's software is checked, the driver and EFA are not,
    and the check says so rather than passing them."""
    node = baked_machine(tmp_path)
    result = node.run("image-check.sh", "--slurm-version", "25.11")
    assert result.returncode == 0, result.stderr
    for name in ("baked", "updates", "enroot", "pyxis"):
        assert f"image check {name}: ok" in result.stderr
    assert "image check gpu: not checked, this instance has no NVIDIA GPU" in result.stderr
    assert "image check efa: not checked, this instance has no EFA device" in result.stderr


@pytest.mark.parametrize(
    ("breakage", "failed"),
    [("pyxis-missing", "pyxis"), ("library-missing", "pyxis"), ("gpu-without-container-cli", "gpu"),
     ("not-baked", "baked")],
)  # fmt: skip
def test_the_image_check_fails_naming_what_is_missing(tmp_path, breakage, failed):
    node = baked_machine(tmp_path)
    if breakage == "pyxis-missing":
        node.path("/opt/aws/pcs/scheduler/slurm-25.11/lib/slurm/spank_pyxis.so").unlink()
    elif breakage == "library-missing":
        node.set("ldd-missing", "")
    elif breakage == "gpu-without-container-cli":
        stub(node, "nvidia-smi", "#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3'\n")
        stub(node, "nvidia-container-cli", "#!/bin/sh\nexit 1\n")
    else:
        node.path("/opt/fmcluster/node.env").write_text("AWS_DEFAULT_REGION=us-west-2\n")
    result = node.run("image-check.sh", "--slurm-version", "25.11")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(
        f"ERROR: the baked image failed its checks: {failed} (log: /var/log/fmcluster/image-check.log)"
    )
