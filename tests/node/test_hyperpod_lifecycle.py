"""HyperPod lifecycle scripts (fmcluster/node/hyperpod/*.sh): shellcheck, and their logic against stubbed commands.

A test machine is no HyperPod node: it has no /opt/ml/config/resource_config.json, no NVMe instance store, no FSx
mount, no enroot, pyxis or Slurm, no SSM parameters, no ECR, and the scripts must never touch its real /etc. So
each test runs the scripts as HyperPod would (`on_create.sh` from a directory holding exactly what the
HyperPodSlurmCluster construct deploys: on_create.sh beside the one node-file tree of fmcluster.node_files, as
`lifecycle_files()` gives it, and the fmcluster.env it writes) with:

* a PATH holding only stub commands written into tmp_path, each recording its arguments and answering from a small
  state directory the test prepares: `hostname` (the node's addresses, so the script finds its instance group),
  `aws` (SSM parameter values by name, ParameterNotFound for the others, an ECR password; N failures first when
  asked), `enroot` (records the import and writes the squashfs file; keeps a copy of the registry credentials it
  was given), `mountpoint` (what is mounted), `lsblk`/`blkid` (the instance-store disks nvme-raid.sh looks for) and
  `sleep`/`systemctl` (record only, so backoff costs no time); plus links to the harmless tools the scripts use
  (bash, coreutils, python3); no real system command is reachable;
* FMCLUSTER_ROOT=tmp_path/root, which the scripts put in front of every path they read or write, so HyperPod's
  resource config, /opt/slurm, /etc/enroot, /scratch, /fsx, /opt/fmcluster and /var/log/fmcluster all live in the
  test's own directory; TMPDIR inside tmp_path too, for the private credentials directory.

The tests then check the commands the scripts ran and the files they left. Where a test checks the arguments the
observability step gives observability.sh, the deployed observability.sh is a recorder (the real one, tested in
tests/observability/, would install exporters); one test runs the real one to see its failure reported.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from fmcluster.constructs.hyperpod import LIFECYCLE_ENV, lifecycle_files, lifecycle_settings
from fmcluster.node_files import NODE_FILES
from tests.stub_node import RECORD, StubNode, fail_first, stub_env

HYPERPOD_DIR = Path(__file__).resolve().parents[2] / "fmcluster" / "node" / "hyperpod"
SCRIPTS = ("on_create.sh", "import-image.sh")
SOURCED = ("ssm.sh",)
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
CLUSTER = "quickstart"
REGION = "us-east-1"
IMAGE = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/team/train:v3"
REGISTRY = f"123456789012.dkr.ecr.{REGION}.amazonaws.com"
FAILED_LINE = re.compile(r"ERROR: fmcluster lifecycle FAILED at (steps?) (.+): (.+) \(log: (\S+)\)$")

TOOLS = (
    "bash", "env", "cat", "date", "mkdir", "mktemp", "chmod", "mv", "rm", "basename", "dirname", "sort", "readlink",
    "id", "uname", "tee", "stat", "ln", "cp",
)  # fmt: skip
"""Real commands the scripts may use: they only read, or write inside FMCLUSTER_ROOT and TMPDIR."""

STUBS = {
    "hostname": """if [[ "${1:-}" == -I ]]; then cat "$STUB_STATE/addresses"; else echo ip-10-1-0-5; fi""",
    "aws": """case "$1 $2" in
  "ssm get-parameter")
    while (($#)); do [[ "$1" == --name ]] && name="$2"; shift; done
    value="$STUB_STATE/ssm${name}"
    if [[ -f "$value" ]]; then cat "$value"; exit 0; fi
    echo "An error occurred (ParameterNotFound) when calling the GetParameter operation: " >&2
    exit 254 ;;
  "ecr get-login-password") echo stub-ecr-password ;;
  *) exit 2 ;;
esac""",
    "enroot": """if [[ "${1:-}" == import ]]; then
  cp "$ENROOT_CONFIG_PATH/.credentials" "$STUB_STATE/enroot-credentials"
  echo "$ENROOT_CONFIG_PATH" >"$STUB_STATE/enroot-config-path"
  [[ -e "$3" ]] && { echo "enroot: $3 exists" >&2; exit 1; }
  echo "squashfs of $4" >"$3"
fi""",
    "mountpoint": """[[ -f "$STUB_STATE/mounted" ]] || exit 1
while IFS= read -r mounted; do [[ "$mounted" == "${!#}" ]] && exit 0; done <"$STUB_STATE/mounted"
exit 1""",
    "lsblk": '[[ -f "$STUB_STATE/lsblk" ]] && cat "$STUB_STATE/lsblk"\nexit 0',
    "blkid": """device="${!#}"
[[ -f "$STUB_STATE/fs-${device##*/}" ]] || exit 2
if [[ "$4" == TYPE ]]; then cat "$STUB_STATE/fs-${device##*/}"; else echo "uuid-${device##*/}"; fi""",
    "sleep": "exit 0",
    "systemctl": "exit 0",
    "curl": "exit 7",  # no path to the internet
    "dpkg": "echo amd64",
    "apt-get": "exit 0",
    # the HyperPod DLAMI builds the NVIDIA driver with DKMS, so it carries gcc and make (unconfirmed:
    # docs/node-images.md); enroot-pyxis.sh only checks they are on PATH, it installs no build tools
    "gcc": "exit 0",
    "make": "exit 0",
}
"""Stub commands: each records its arguments to STUB_LOG (after failing as often as <name>-failures says)."""


@dataclass
class Node(StubNode):
    """A pretend HyperPod node: the stub node plus the lifecycle directory the construct deploys."""

    lifecycle: Path

    def run(self, *args: str, script: Path | None = None, env: dict[str, str] | None = None):
        return subprocess.run(
            ["bash", str(script or self.lifecycle / "on_create.sh"), *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def parameter(self, name: str, value: str) -> None:
        self.set(f"ssm{name}", value + "\n")

    def mount(self, *points: str) -> None:
        existing = (self.state / "mounted").read_text() if (self.state / "mounted").exists() else ""
        self.set("mounted", existing + "".join(f"{self.path(point)}\n" for point in points))

    def drop(self, command: str) -> None:
        (self.bin / command).unlink()


def resource_config() -> dict:
    """HyperPod's /opt/ml/config/resource_config.json for a controller and two GPU nodes."""

    def group(name: str, *addresses: str) -> dict:
        instances = [
            {"InstanceName": f"{name}-{i}", "AgentIpAddress": f"172.16.0.{i}", "CustomerIpAddress": address}
            for i, address in enumerate(addresses, start=1)
        ]
        return {"Name": name, "InstanceType": "ml.x", "Instances": instances}

    return {"InstanceGroups": [group("controller", "10.1.0.5"), group("gpu", "10.1.0.6", "10.1.0.7")]}


def cluster_env(**extra: str) -> str:
    """fmcluster.env as the construct writes it for this test cluster, with `extra` settings."""
    return lifecycle_settings(
        cluster_name=CLUSTER,
        region=REGION,
        nccl_parameter_prefix=f"/fmcluster/{CLUSTER}",
        image_parameter_name=f"/fmcluster/{CLUSTER}/image-uri",
        mount_path="/fsx",
        **extra,
    )


@pytest.fixture
def node(tmp_path: Path) -> Node:
    fields = stub_env(tmp_path, tools=TOOLS, stubs={name: fail_first() + body for name, body in STUBS.items()},
                      python=True)  # fmt: skip
    root, state = fields["root"], fields["state"]
    lifecycle, scratch = tmp_path / "lifecycle", tmp_path / "tmp"
    for directory in (lifecycle, scratch):
        directory.mkdir()
    # What the construct deploys: on_create.sh, the node-file tree and fmcluster.env (S3 keeps no mode: 0644 here)
    for name, (data, _) in lifecycle_files().items():
        (lifecycle / name).parent.mkdir(parents=True, exist_ok=True)
        (lifecycle / name).write_bytes(data)
    (lifecycle / LIFECYCLE_ENV).write_text(cluster_env())
    config = root / "opt/ml/config/resource_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(resource_config()))
    (root / "opt/slurm/etc").mkdir(parents=True)
    (root / "opt/slurm/lib/slurm").mkdir(parents=True)
    (root / "opt/slurm/lib/slurm/spank_pyxis.so").write_bytes(b"")
    (root / "opt/slurm/include/slurm").mkdir(parents=True)
    (root / "opt/slurm/include/slurm/spank.h").write_text("")
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text('ID=ubuntu\nVERSION_ID="22.04"\n')
    (state / "addresses").write_text("10.1.0.6 172.16.0.2\n")  # a GPU node
    fields["env"]["TMPDIR"] = str(scratch)
    return Node(**fields, lifecycle=lifecycle)


def controller(node: Node) -> None:
    node.set("addresses", "10.1.0.5\n")


def failure_line(result: subprocess.CompletedProcess) -> tuple[str, str, str, str]:
    match = FAILED_LINE.search(result.stderr.rstrip().splitlines()[-1])
    assert match, result.stderr
    return match.groups()


# -- shellcheck and the deployment -----------------------------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS + SOURCED)
def test_shellcheck_is_clean(script):
    result = subprocess.run(
        [SHELLCHECK, "-x", script], cwd=HYPERPOD_DIR, capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_are_ascii_strict_and_executable(script):
    path = HYPERPOD_DIR / script
    text = path.read_text(encoding="ascii")
    assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
    assert path.stat().st_mode & stat.S_IXUSR


def test_sourced_helpers_are_ascii_bash():
    for name in SOURCED:
        text = (HYPERPOD_DIR / name).read_text(encoding="ascii")
        assert text.startswith("#!/usr/bin/env bash\n# shellcheck shell=bash"), name


def test_every_script_on_create_runs_is_in_the_one_list():
    """on_create.sh runs its steps through run-step.sh, whose scripts are all node files (fmcluster.node_files)."""
    from fmcluster.node_files import STEPS

    files = {entry.path for entry in NODE_FILES}
    assert {f"node/{entry.script}" for entry in STEPS} <= files
    assert "node/run-step.sh" in files and "node/lib.sh" in files


# -- a GPU node ------------------------------------------------------------------------------------------------


def test_compute_node_gets_scratch_nccl_enroot_and_pyxis_but_no_image(node):
    node.mount("/scratch")
    node.parameter(f"/fmcluster/{CLUSTER}/gpu/nccl-env", '{"NCCL_DEBUG": "WARN"}')
    result = node.run()
    assert result.returncode == 0, result.stderr

    installed = node.path("/opt/fmcluster")
    shipped = {str(p.relative_to(installed)) for p in installed.rglob("*") if p.is_file()} - {"node.env"}
    assert shipped == set(lifecycle_files()) - {"on_create.sh", LIFECYCLE_ENV}  # the tree a PCS node gets too
    installed = installed / "node"
    for entry in NODE_FILES:  # each with its mode of the one list, though S3 kept none
        assert stat.S_IMODE(node.path(f"/opt/fmcluster/{entry.path}").stat().st_mode) == entry.mode, entry
    assert stat.S_IMODE((installed / "nvme-raid.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((installed / "lib.sh").stat().st_mode) == 0o644
    assert "already mounted" in node.script_log("nvme-raid")

    read = ["aws", "ssm", "get-parameter", "--region", REGION, "--name", f"/fmcluster/{CLUSTER}/gpu/nccl-env",
            "--query", "Parameter.Value", "--output", "text"]  # fmt: skip
    assert node.calls("aws") == [read, read]  # on_create.sh checks it exists, nccl-env.sh reads it
    assert "NCCL_DEBUG=WARN" in node.path("/etc/fmcluster/nccl.env").read_text()

    conf = node.path("/etc/enroot/enroot.conf").read_text()
    assert "ENROOT_CACHE_PATH /scratch/enroot/cache/group-$(id -g)\n" in conf
    assert "ENROOT_DATA_PATH /scratch/enroot/data/user-$(id -u)\n" in conf
    assert "ENROOT_TEMP_PATH /scratch/enroot/tmp\n" in conf
    for directory in ("cache", "data", "tmp"):
        assert stat.S_IMODE(node.path(f"/scratch/enroot/{directory}").stat().st_mode) == 0o1777
    assert node.path("/opt/slurm/etc/plugstack.conf.d/pyxis.conf").read_text() == (
        "required /opt/slurm/lib/slurm/spank_pyxis.so\n"
    )
    # configless Slurm expands no wildcard in an include (AWS's base-config/utils/slurm_fix_plugstackconf.sh)
    assert node.path("/opt/slurm/etc/plugstack.conf").read_text() == (
        "include /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n"
    )
    assert node.path("/etc/enroot/enroot.conf").read_text().count("ENROOT_RESTRICT_DEV no\n") == 1

    assert node.calls("enroot") == []  # only the controller imports the image
    log = node.script_log("lifecycle")
    assert "cluster quickstart, instance group gpu" in log
    for step in ("install", "scratch", "nccl", "enroot"):
        assert f"step {step}: done" in log
    assert "step image" not in log
    assert "NCCL environment from SSM parameter" in log  # each step's own output lands in lifecycle.log too
    assert log.rstrip().endswith("fmcluster lifecycle finished")


def test_running_again_changes_nothing(node):
    node.mount("/scratch")
    assert node.run().returncode == 0
    files = {p: p.read_bytes() for p in node.root.rglob("*") if p.is_file() and "var/log" not in str(p)}
    assert node.run().returncode == 0
    assert {p: p.read_bytes() for p in node.root.rglob("*") if p.is_file() and "var/log" not in str(p)} == files


def test_a_failed_step_does_not_stop_the_others_and_is_named_last(node):
    node.set("lsblk", 'NAME="/dev/nvme1n1" MODEL="Amazon EC2 NVMe Instance Storage" TYPE="disk"\n')
    node.set("fs-nvme1n1", "ext4")  # nvme-raid.sh refuses to format it
    result = node.run()
    assert result.returncode == 1
    assert failure_line(result) == (
        "step", "scratch", "see the lines of each step above", "/var/log/fmcluster/lifecycle.log"
    )  # fmt: skip
    log = node.script_log("lifecycle")
    assert "refusing to format it" in log  # the step's reason, from its own output
    assert "step nccl: done" in log and "step enroot: done" in log


def test_a_failed_install_fails_every_step_that_runs_from_opt_fmcluster(node):
    """One layout: every step runs from /opt/fmcluster (no probing for the lifecycle directory's copies), so without
    the files the required steps fail, each named, and the node stays drained."""
    node.path("/opt/fmcluster").write_text("not a directory")
    result = node.run()
    assert result.returncode == 1
    kind, steps, _, _ = failure_line(result)
    assert kind == "steps" and {"install", "scratch", "nccl", "enroot"} <= set(steps.split(", "))
    log = node.script_log("lifecycle")
    assert "fmcluster step install FAILED; the node cannot train without its files" in log
    assert "holds no node files; run the install step first" in log


def test_pyxis_already_in_the_plugin_stack_is_left_alone(node):
    stack = node.path("/opt/slurm/etc/plugstack.conf")
    stack.write_text("# optional /x/spank_pyxis.so\nrequired /usr/local/lib/slurm/spank_pyxis.so\n")
    assert node.run().returncode == 0
    assert stack.read_text() == "# optional /x/spank_pyxis.so\nrequired /usr/local/lib/slurm/spank_pyxis.so\n"
    assert not node.path("/opt/slurm/etc/plugstack.conf.d/pyxis.conf").exists()
    assert "loads pyxis already" in node.script_log("enroot-pyxis")


def test_an_existing_plugin_stack_keeps_its_lines(node):
    stack = node.path("/opt/slurm/etc/plugstack.conf")
    stack.write_text("optional /opt/other/spank_other.so\n")
    assert node.run().returncode == 0
    assert stack.read_text() == (
        "optional /opt/other/spank_other.so\ninclude /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n"
    )


def test_without_scratch_enroot_uses_tmp_and_says_so(node):
    assert node.run().returncode == 0
    assert "ENROOT_TEMP_PATH /tmp/enroot/tmp\n" in node.path("/etc/enroot/enroot.conf").read_text()
    assert "enroot keeps its caches under /tmp" in node.script_log("enroot-pyxis")


@pytest.mark.parametrize(
    ("missing", "reason"),
    [
        # the shipped artifact list pins neither (their digests are unconfirmed): the step fails, saying what to do
        (
            "enroot",
            "enroot 4.1.2 or its dependencies (jq, parallel, squashfs-tools) could not be installed from the mirror "
            "and the package repositories; see the mirror job's log",
        ),
        ("pyxis", "pyxis 0.24.0 could not be built against /opt/slurm; see the mirror job's log"),
    ],
)
def test_missing_enroot_or_pyxis_warns_in_the_enroot_step_and_says_why(node, missing, reason):
    """enroot is warn-only until the mirror pins enroot and pyxis (fmcluster.node_files.STEPS): a node without them
    joins without containers, one WARNING line naming the step, rather than failing the cluster's creation."""
    if missing == "enroot":
        node.drop("enroot")
    else:
        node.path("/opt/slurm/lib/slurm/spank_pyxis.so").unlink()
    result = node.run()
    assert result.returncode == 0, result.stderr
    log = node.script_log("lifecycle")
    assert reason in log
    assert "fmcluster WARNING: step enroot failed; jobs cannot use --container-image" in result.stderr + log


# -- the controller and the training image ---------------------------------------------------------------------


def test_controller_imports_the_training_image_once_into_the_file_system(node):
    controller(node)
    node.mount("/fsx", "/opt/sagemaker")
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE)
    result = node.run()
    assert result.returncode == 0, result.stderr

    images = node.path("/fsx/enroot/images")
    target = images / "team+train+v3.sqsh"
    ((_, _, _, partial, source),) = node.calls("enroot")
    assert source == f"docker://{REGISTRY}#team/train:v3"
    assert re.fullmatch(rf"{re.escape(str(target))}\.partial\.ip-10-1-0-5\.[0-9]+", partial)  # this importer's own
    assert target.read_text() == f"squashfs of docker://{REGISTRY}#team/train:v3\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert os.readlink(images / "training-image.sqsh") == "team+train+v3.sqsh"
    assert (images / "training-image.uri").read_text() == IMAGE + "\n"
    assert not (images / "team+train+v3.sqsh.lock").exists()
    assert not list(images.glob("*.partial*")) and not list(images.glob(".training-image*"))
    # ECR credentials reached enroot in a private directory that is gone afterwards
    credentials = (node.state / "enroot-credentials").read_text()
    assert credentials == f"machine {REGISTRY} login AWS password stub-ecr-password\n"
    assert not Path((node.state / "enroot-config-path").read_text().strip()).exists()
    assert ["aws", "ecr", "get-login-password", "--region", REGION] in node.calls("aws")
    # the controller has no NVMe: enroot's caches go to HyperPod's extra EBS volume
    assert "ENROOT_TEMP_PATH /opt/sagemaker/enroot/tmp\n" in node.path("/etc/enroot/enroot.conf").read_text()
    assert "step image: done" in node.script_log("lifecycle")

    assert node.run().returncode == 0  # again: the image is there already
    assert len(node.calls("enroot")) == 1
    assert "is imported already" in node.script_log("import-image")


def test_no_image_parameter_means_nothing_to_import(node):
    controller(node)
    node.mount("/fsx")
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert node.calls("enroot") == []
    names = [call[call.index("--name") + 1] for call in node.calls("aws")]
    assert names == [f"/fmcluster/{CLUSTER}/controller/nccl-env", f"/fmcluster/{CLUSTER}/image-uri"]
    assert (
        f"there is no SSM parameter /fmcluster/{CLUSTER}/controller/nccl-env: the NCCL defaults apply"
        in node.script_log("lifecycle")
    )
    assert (
        f"SSM parameter /fmcluster/{CLUSTER}/image-uri does not exist: no training image to import; skipping"
        in node.script_log("lifecycle")
    )


def test_a_node_holding_the_lock_is_left_to_import(node):
    controller(node)
    node.mount("/fsx")
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE)
    lock = node.path("/fsx/enroot/images/team+train+v3.sqsh.lock")
    lock.mkdir(parents=True)
    (lock / "owner").write_text("ip-10-1-0-9 since 2026-11-29T10:00:00Z\n")
    assert node.run().returncode == 0
    assert node.calls("enroot") == []
    assert lock.is_dir()  # not ours to remove
    assert "is held by ip-10-1-0-9 since 2026-11-29T10:00:00Z" in node.script_log("import-image")


def test_a_stale_lock_is_taken_over(node):
    controller(node)
    node.mount("/fsx")
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE)
    lock = node.path("/fsx/enroot/images/team+train+v3.sqsh.lock")
    lock.mkdir(parents=True)
    hours_ago = time.time() - 3 * 3600
    os.utime(lock, (hours_ago, hours_ago))
    assert node.run().returncode == 0
    assert len(node.calls("enroot")) == 1
    assert not lock.exists()
    assert "past 7200s: taking the import over" in node.script_log("import-image")


def test_a_stale_lock_another_node_took_over_first_is_given_back_not_removed(node):
    """Two nodes find the same stale lock. The other one takes it over between this node's look at the lock and its
    own takeover (the `stat` below does that, as that node would): this node must not remove the other's fresh lock
    and import beside it."""
    controller(node)
    node.mount("/fsx")
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE)
    lock = node.path("/fsx/enroot/images/team+train+v3.sqsh.lock")
    lock.mkdir(parents=True)
    (lock / "owner").write_text("ip-10-1-0-9 pid 7 since 2026-11-29T10:00:00Z\n")
    node.add_stub(
        "stat",
        f"""echo $(( $(date +%s) - 3 * 3600 ))
rm -rf {lock}; mkdir {lock}; echo "ip-10-1-0-8 pid 9 since now" >{lock}/owner""",
    )
    assert node.run().returncode == 0
    assert node.calls("enroot") == []
    assert (lock / "owner").read_text() == "ip-10-1-0-8 pid 9 since now\n"  # the other node's lock, back in place
    assert "was taken over by another node first; nothing to do here" in node.script_log("import-image")
    assert not list(lock.parent.glob("*.stale.*"))


def test_another_importers_partial_file_is_never_touched(node):
    controller(node)
    node.mount("/fsx")
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE)
    images = node.path("/fsx/enroot/images")
    images.mkdir(parents=True)
    theirs = images / "team+train+v3.sqsh.partial"  # what a node importing with the former name is writing
    theirs.write_text("half an image\n")
    assert node.run().returncode == 0
    assert theirs.read_text() == "half an image\n"
    assert (images / "team+train+v3.sqsh").read_text().startswith("squashfs of ")


def test_the_image_link_is_replaced_atomically_and_only_when_it_changes(node):
    controller(node)
    node.mount("/fsx")
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE)
    assert node.run().returncode == 0
    link = node.path("/fsx/enroot/images/training-image.sqsh")
    before = os.lstat(link)
    assert node.run().returncode == 0  # again, as image-watch.sh does every 2 minutes: the link is left as it is
    assert os.lstat(link).st_ino == before.st_ino and os.lstat(link).st_mtime_ns == before.st_mtime_ns
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE.replace(":v3", ":v4"))
    assert node.run().returncode == 0
    assert os.readlink(link) == "team+train+v4.sqsh"
    assert not list(link.parent.glob(".training-image*"))  # the temporary link was renamed over the old one


def test_ssm_and_enroot_failures_are_retried_with_backoff(node):
    controller(node)
    node.mount("/fsx")
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE)
    node.set("enroot-failures", "1")
    node.set("aws-failures", "2")  # the NCCL parameter's first two reads
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert [call[1] for call in node.calls("enroot")] == ["import", "import"]
    assert node.calls("sleep") == [["sleep", "1"], ["sleep", "2"], ["sleep", "1"]]
    assert "attempt 1 of 5 failed: import_once" in node.script_log("import-image")


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        ("nvcr.io/nvidia/pytorch:25.01-py3", "is not a private ECR image with a tag"),
        (f"{REGISTRY}/train@sha256:" + "0" * 64, "is not a private ECR image with a tag"),
        (IMAGE.replace(REGION, "us-west-2"), "the image is in us-west-2, the cluster in us-east-1"),
    ],
    ids=["public-registry", "digest", "other-region"],
)
def test_images_fmcluster_cannot_import_only_warn(node, image, reason):
    """Jobs still pull the image from ECR (nccl-tests.sbatch gives enroot credentials), so HyperPod must not fail
    the cluster for it: one WARNING line names the step, what follows and the log."""
    controller(node)
    node.mount("/fsx")
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", image)
    result = node.run()
    assert result.returncode == 0
    log = node.script_log("lifecycle")
    assert reason in log
    assert (
        "WARN: fmcluster WARNING: step image failed; jobs pull the training image from ECR "
        "(log: /var/log/fmcluster/import-image.log)"
    ) in log
    assert node.calls("enroot") == []


def test_without_the_file_system_mounted_the_import_fails(node):
    controller(node)
    node.parameter(f"/fmcluster/{CLUSTER}/image-uri", IMAGE)
    result = node.run(env={"FMCLUSTER_RETRY_ATTEMPTS": "2"})
    assert result.returncode == 0  # a warning, as above
    assert "/fsx is not mounted; the image is kept on the shared file system" in node.script_log("lifecycle")


def test_controller_without_enroot_warns_and_skips_image(node):
    controller(node)
    node.drop("enroot")
    result = node.run()
    assert result.returncode == 0, result.stderr
    log = node.script_log("lifecycle")
    for step in ("image", "image-watch"):
        assert f"step {step}: skipped, since it needs step enroot, which did not succeed" in log


def test_a_cluster_without_a_file_system_skips_the_image(node):
    controller(node)
    settings = node.lifecycle / LIFECYCLE_ENV
    settings.write_text(settings.read_text().replace("FMCLUSTER_FSX_MOUNT=/fsx", "FMCLUSTER_FSX_MOUNT="))
    assert node.run().returncode == 0
    assert "step image: skipped, since the cluster has no shared file system" in node.script_log("lifecycle")
    assert "step shared-dirs: skipped, since the cluster has no shared file system" in node.script_log("lifecycle")


def test_the_shared_directories_are_made_on_the_file_system_hyperpod_mounted(node):
    node.mount("/fsx")
    node.path("/fsx").mkdir()
    assert node.run().returncode == 0, node.script_log("lifecycle")
    for name in ("checkpoints", "datasets", "jobs"):  # names.SHARED_DIRECTORIES (test_shared_dirs.py)
        assert stat.S_IMODE(node.path(f"/fsx/{name}").stat().st_mode) == 0o1777, name


# -- what stops the lifecycle before any step ------------------------------------------------------------------


def test_a_node_missing_from_the_resource_config_stops_with_one_clear_line(node):
    node.set("addresses", "192.168.9.9\n")
    result = node.run()
    assert result.returncode == 1
    steps, step, reason, log = failure_line(result)
    assert (steps, step, log) == ("step", "group", "/var/log/fmcluster/lifecycle.log")
    assert reason.startswith("none of the addresses of this node (192.168.9.9) is an instance in ")
    assert node.calls("lsblk") == [] and node.calls("aws") == []


def test_missing_resource_config_is_named(node):
    node.path("/opt/ml/config/resource_config.json").unlink()
    result = node.run()
    assert failure_line(result)[1:3] == (
        "group", "/opt/ml/config/resource_config.json is missing (SAGEMAKER_RESOURCE_CONFIG_PATH or the default); "
        "is this a SageMaker HyperPod node?"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        (None, "fmcluster.env is missing; deploy the scripts with fmcluster's HyperPodSlurmCluster"),
        ("FMCLUSTER_CLUSTER=x\n", "fmcluster.env sets no FMCLUSTER_REGION"),
    ],
    ids=["missing", "incomplete"],
)
def test_missing_settings_stop_the_lifecycle(node, settings, reason):
    path = node.lifecycle / LIFECYCLE_ENV
    if settings is None:
        path.unlink()
    else:
        path.write_text(settings)
    result = node.run()
    assert result.returncode == 1
    assert failure_line(result)[1] == "settings"
    assert failure_line(result)[2].endswith(reason)
    assert [call[0] for call in node.calls()] == ["hostname"]  # only the start line's host name


def test_unknown_settings_are_ignored_with_a_warning(node):
    settings = node.lifecycle / LIFECYCLE_ENV
    settings.write_text(settings.read_text() + "# a comment\n\nPATH=/evil\n")
    assert node.run().returncode == 0
    assert "ignoring unknown setting 'PATH'" in node.script_log("lifecycle")


def test_arguments_are_a_usage_error(node):
    result = node.run("--now")
    assert result.returncode == 2
    assert "usage: " in result.stderr


def test_scripts_also_run_from_the_package_layout(node):
    """import-image.sh straight from fmcluster/node/hyperpod/, sourcing ../lib.sh as it does before deployment."""
    result = node.run(
        f"/fmcluster/{CLUSTER}/image-uri", "/fsx", script=HYPERPOD_DIR / "import-image.sh", env={"AWS_REGION": REGION}
    )
    assert result.returncode == 0, result.stderr
    assert "does not exist: no training image to import" in node.script_log("import-image")


def test_the_resource_config_path_hyperpod_gives_is_used(node):
    """HyperPod names its resource configuration in SAGEMAKER_RESOURCE_CONFIG_PATH (AWS's base-config/on_create.sh)."""
    moved = node.path("/opt/ml/elsewhere/resource_config.json")
    moved.parent.mkdir(parents=True)
    node.path("/opt/ml/config/resource_config.json").rename(moved)
    result = node.run(env={"SAGEMAKER_RESOURCE_CONFIG_PATH": "/opt/ml/elsewhere/resource_config.json"})
    assert result.returncode == 0, result.stderr
    assert "instance group gpu" in node.script_log("lifecycle")


def test_enroot_pyxis_from_the_package_layout(node):
    result = node.run(script=HYPERPOD_DIR.parent / "enroot-pyxis.sh")
    assert result.returncode == 0, result.stderr
    assert node.path("/etc/enroot/enroot.conf").exists()


# -- observability, the dashboards and the nccl-tests job ------------------------------------------------------

PARAMETER = f"/fmcluster/{CLUSTER}/observability/prometheus-endpoint"
MIRROR = "s3://quickstart-data-0123456789ab/fmcluster-mirror"
RECORDER = """#!/usr/bin/env bash
{ printf '%s' "$0"; for arg in "$@"; do printf ' %q' "$arg"; done; printf '\\n'; } >>"$STUB_STATE/observability-calls"
printf '%s\\n' "${PATH%%:*}" >"$STUB_STATE/observability-path"
"""
"""Stands in for the deployed observability.sh: records where it ran from, its arguments and PATH's first entry."""


def observe(node: Node, *, prometheus: str = "managed", grafana: str = "self-hosted", mirror: str = "",
            recorder: bool = True) -> None:  # fmt: skip
    """Rewrite fmcluster.env as the construct does for these observability settings; stand in for observability.sh."""
    (node.lifecycle / LIFECYCLE_ENV).write_text(
        cluster_env(
            prometheus=prometheus,
            grafana=grafana,
            endpoint_parameter_name=PARAMETER if prometheus == "managed" else "",
            artifact_mirror=mirror,
        )
    )
    if recorder:
        (node.lifecycle / "node/observability.sh").write_text(RECORDER)


def observability_calls(node: Node) -> list[list[str]]:
    calls = node.state / "observability-calls"
    return [shlex.split(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def test_install_puts_the_dashboards_and_the_nccl_tests_job_in_opt_fmcluster(node):
    assert node.run().returncode == 0
    dashboards = node.path("/opt/fmcluster/dashboards")
    installed = {str(p.relative_to(dashboards)): p.read_text() for p in dashboards.rglob("*") if p.is_file()}
    files = lifecycle_files()
    assert installed == {
        name.removeprefix("dashboards/"): data.decode()
        for name, (data, _) in files.items()
        if name.startswith("dashboards/")
    }
    assert {"agent.yml", "rules/alerts.yml", "rules/recording.yml", "gpu.json"} <= set(installed)
    job = node.path("/opt/fmcluster/nccl-tests.sbatch")
    assert job.read_bytes() == files["nccl-tests.sbatch"][0]
    assert stat.S_IMODE(job.stat().st_mode) == 0o755
    assert f"node files from {node.lifecycle} installed in /opt/fmcluster" in node.script_log("lifecycle")


def test_with_prometheus_none_no_observability_step_runs(node):
    observe(node, prometheus="none", grafana="none")
    assert node.run().returncode == 0
    assert observability_calls(node) == []
    log = node.script_log("lifecycle")
    assert "step observability: skipped, since observability.prometheus is none" in log
    assert "step observability: running" not in log


def test_compute_nodes_run_observability_without_head_node_or_grafana(node):
    """observability.sh has no --mirror: it takes FMCLUSTER_ARTIFACT_MIRROR, as every step does."""
    observe(node, mirror=MIRROR)
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert observability_calls(node) == [
        [str(node.path("/opt/fmcluster/node/observability.sh")), "--cluster", CLUSTER, "--region", REGION,
         "--endpoint-parameter", PARAMETER]
    ]  # fmt: skip
    log = node.script_log("lifecycle")
    assert log.index("step enroot: done") < log.index("step observability: running")
    assert "step observability: done" in log and log.rstrip().endswith("fmcluster lifecycle finished")


@pytest.mark.parametrize(
    ("grafana", "extra"), [("self-hosted", ["--head-node", "--grafana"]), ("managed", ["--head-node"])]
)
def test_the_controller_is_the_head_node_and_runs_grafana_when_self_hosted(node, grafana, extra):
    controller(node)
    node.mount("/fsx")
    observe(node, grafana=grafana)
    result = node.run()
    assert result.returncode == 0, result.stderr
    ((_, *arguments),) = observability_calls(node)
    assert arguments[:6] == ["--cluster", CLUSTER, "--region", REGION, "--endpoint-parameter", PARAMETER]
    assert arguments[6:] == extra
    assert (node.state / "observability-path").read_text() == f"{node.path('/opt/slurm/bin')}\n"  # HyperPod's sinfo
    log = node.script_log("lifecycle")
    assert log.index("step image: done") < log.index("step observability: done")


def test_a_failing_observability_sh_is_a_warning_that_never_fails_the_lifecycle(node):
    """The real observability.sh, taking its downloads from the node's artifact mirror (FMCLUSTER_ARTIFACT_MIRROR),
    which the aws stub cannot serve."""
    observe(node, mirror=MIRROR, recorder=False)
    result = node.run(env={"FMCLUSTER_RETRY_ATTEMPTS": "2"})
    assert result.returncode == 0  # HyperPod would fail the whole cluster for a node that lacks metrics
    log = node.script_log("lifecycle")
    assert (
        "WARN: fmcluster WARNING: step observability failed; the node runs without metrics "
        "(log: /var/log/fmcluster/observability.log)"
    ) in log
    assert log.rstrip().endswith("fmcluster lifecycle finished")
    downloads = [call for call in node.calls("aws") if call[1:3] == ["s3", "cp"]]
    # each retried, then given up: node_exporter (optional, skipped), then the Prometheus agent (which stops it)
    assert len(downloads) == 4 and downloads[0] == downloads[1] and downloads[2] == downloads[3]
    assert downloads[0][3:6] == ["--only-show-errors", "--region", REGION]
    assert downloads[0][6].startswith(f"{MIRROR}/node_exporter/")
    assert downloads[2][6].startswith(f"{MIRROR}/prometheus/")
    key = "prometheus/3.8.1/prometheus-3.8.1.linux-amd64.tar.gz"
    log = node.script_log("lifecycle")  # observability.sh's own reasons, in lifecycle.log too
    assert f"ERROR: {key} could not be copied from {MIRROR}" in log
    assert f"ERROR: not installing prometheus 3.8.1: {key} is not in the mirror with its pinned SHA-256" in log
    assert "step enroot: done" in node.script_log("lifecycle")


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ("FMCLUSTER_PROMETHEUS=managed\nFMCLUSTER_ENDPOINT_PARAMETER=\n",
         "fmcluster.env sets FMCLUSTER_PROMETHEUS=managed but no FMCLUSTER_ENDPOINT_PARAMETER"),
        ("FMCLUSTER_PROMETHEUS=amp\n", "fmcluster.env sets FMCLUSTER_PROMETHEUS to 'amp'; it must be managed or none"),
    ],
    ids=["no-endpoint-parameter", "unknown-mode"],
)  # fmt: skip
def test_bad_observability_settings_stop_the_lifecycle(node, settings, reason):
    path = node.lifecycle / LIFECYCLE_ENV
    path.write_text(path.read_text() + settings)
    result = node.run()
    assert result.returncode == 1
    assert failure_line(result)[1] == "settings"
    assert failure_line(result)[2].endswith(reason)


def test_settings_files_from_before_observability_mean_none(node):
    path = node.lifecycle / LIFECYCLE_ENV
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if not line.startswith(("FMCLUSTER_PROMETHEUS", "FMCLUSTER_GRAFANA",
                                                    "FMCLUSTER_ENDPOINT_PARAMETER"))))  # fmt: skip
    assert node.run().returncode == 0
    assert "step observability: skipped" in node.script_log("lifecycle")


# -- the node is drained while the lifecycle runs (slurm-hold.sh; tests/node/test_real_slurm.py runs it on real Slurm)


SCONTROL = (
    RECORD
    + """case "$1 $2" in
  "show node") printf 'NodeName=%s Arch=x86_64 State=IDLE+DRAIN Reason=%s [root@2026-12-01T10:00:00]\\n' "$3" \\
      "$(cat "$STUB_STATE/reason" 2>/dev/null)" ;;
  "update NodeName="*)
    for arg; do [[ "$arg" == Reason=* ]] && printf '%s' "${arg#Reason=}" >"$STUB_STATE/reason"; done
    if [[ "$*" == *State=RESUME* ]]; then rm -f "$STUB_STATE/reason"; fi ;;
esac
"""
)
"""HyperPod's /opt/slurm/bin/scontrol as the lifecycle sees it once HyperPod has set up Slurm (OnInitComplete): it
knows this node; `update` keeps the drain reason as slurmctld would (real behaviour: test_real_slurm.py)."""


def with_scontrol(node: Node) -> None:
    tool = node.path("/opt/slurm/bin/scontrol")
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.write_text(SCONTROL)
    tool.chmod(0o755)


def test_a_compute_node_is_drained_first_and_resumed_last(node):
    with_scontrol(node)
    node.mount("/scratch")
    result = node.run()
    assert result.returncode == 0, result.stderr
    updates = [call[1:] for call in node.calls("scontrol") if call[1] == "update"]
    assert updates == [
        ["update", "NodeName=ip-10-1-0-5", "State=DRAIN", "Reason=fmcluster lifecycle running"],
        ["update", "NodeName=ip-10-1-0-5", "State=RESUME"],
    ]
    log = node.script_log("lifecycle")
    # the files first (a copy of local files: slurm-hold.sh runs from /opt/fmcluster too), then the drain
    assert log.index("step install: done") < log.index("step hold: done") < log.index("step scratch: running")
    assert log.index("step release: done") > log.index("step enroot: done")


def test_a_node_whose_lifecycle_failed_stays_drained_naming_the_steps(node):
    with_scontrol(node)
    node.set("lsblk", 'NAME="/dev/nvme1n1" MODEL="Amazon EC2 NVMe Instance Storage" TYPE="disk"\n')
    node.set("fs-nvme1n1", "ext4")  # nvme-raid.sh refuses to format it
    assert node.run().returncode == 1
    updates = [call[-1] for call in node.calls("scontrol") if call[1] == "update"]
    assert updates == ["Reason=fmcluster lifecycle running", "Reason=fmcluster lifecycle failed at scratch"]


def test_the_controller_is_never_drained(node):
    with_scontrol(node)
    controller(node)
    node.mount("/scratch")
    node.run()
    assert node.calls("scontrol") == []


# -- users and their Slurm associations -------------------------------------------------------------------------

USERS_PARAMETER = f"/fmcluster/{CLUSTER}/users"
STEP_RECORDER = """#!/usr/bin/env bash
{ printf '%s' "${0##*/}"; for arg in "$@"; do printf ' %q' "$arg"; done; printf '\\n'; } >>"$STUB_STATE/steps"
"""
"""Stands in for the deployed users.sh and slurm-accounting.sh (tested on their own: tests/node/test_users.py, and
against a real slurmdbd in tests/node/test_slurm_accounting.py): records which ran, with what, in order."""


@pytest.mark.parametrize(("is_controller", "expected"), [
    (True, [f"users.sh install {USERS_PARAMETER} --home-base /fsx/home",
            f"slurm-accounting.sh install {USERS_PARAMETER} {CLUSTER} --now"]),
    (False, [f"users.sh install {USERS_PARAMETER} --home-base /fsx/home"]),
])  # fmt: skip
def test_the_users_are_made_on_every_node_and_their_associations_on_the_controller(node, is_controller, expected):
    if is_controller:
        controller(node)
    node.mount("/fsx")
    (node.lifecycle / LIFECYCLE_ENV).write_text(cluster_env(users_parameter=USERS_PARAMETER))
    for script in ("users.sh", "slurm-accounting.sh"):
        (node.lifecycle / "node" / script).write_text(STEP_RECORDER)
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert (node.state / "steps").read_text().splitlines() == expected


def test_a_compute_node_failing_its_fabric_check_stays_drained_with_the_reason_and_the_cluster_still_forms(node):
    """A gpu node without its EFA devices and GPUs (no /sys/class/infiniband, no nvidia-smi here): the fabric step
    (fmcluster.fabric's figures, through FMCLUSTER_FABRIC) drains it with the reason, `release` leaves that drain as it
    is, and the lifecycle exits 0 (HyperPod would fail the whole cluster for one node otherwise)."""
    with_scontrol(node)
    node.mount("/scratch")
    (node.bin / "grep").symlink_to(shutil.which("grep", path="/usr/bin:/bin"))
    path = node.lifecycle / LIFECYCLE_ENV
    path.write_text(path.read_text().replace("FMCLUSTER_FABRIC=\n", "FMCLUSTER_FABRIC=controller=1,1,0 gpu=4,8,0\n"))
    result = node.run()
    assert result.returncode == 0, result.stderr
    reason = "fmcluster fabric: 0 of 4 EFA devices; nvidia-smi failed (0 of 8 GPUs)"
    updates = [call[-1] for call in node.calls("scontrol") if call[1] == "update"]
    assert updates == ["Reason=fmcluster lifecycle running", f"Reason={reason}"]
    log = node.script_log("lifecycle")
    assert "step fabric: running fabric-check.sh --efa 4 --gpus 8" in log
    assert "fmcluster WARNING: step fabric failed; the node is drained in Slurm if Slurm knows it" in log
    assert f"is not drained by fmcluster's lifecycle (reason: '{reason}'); left as it is" in log


def test_the_controller_installs_the_training_plan_drain_and_compute_nodes_do_not(node):
    plan = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/llm-pretrain-2026q4=60=gpu"
    path = node.lifecycle / LIFECYCLE_ENV
    path.write_text(path.read_text().replace("FMCLUSTER_TRAINING_PLANS=\n", f"FMCLUSTER_TRAINING_PLANS={plan}\n"))
    node.mount("/scratch")
    assert node.run().returncode == 0
    assert "step plan-drain" not in node.script_log("lifecycle")
    controller(node)
    node.mount("/fsx")
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert f"step plan-drain: running plan-end-drain.sh install {REGION} {plan}" in node.script_log("lifecycle")
    timer = node.path("/etc/systemd/system/fmcluster-plan-end-drain.timer")
    assert "OnUnitActiveSec=5min" in timer.read_text()
