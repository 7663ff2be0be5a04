"""fabric-check.sh on every image profile: EFA devices, GPUs and a one-node all_reduce, and the drain that follows a
failure; then the drain itself on a real one-node Slurm (tests/node/real_slurm.py).

Where the sample output comes from:
- sysfs: /sys/class/infiniband/<dev>/device/driver linking to the efa driver, as lnet-efa.sh reads it and as
  awslabs/awsome-distributed-ai 2.gpu-cluster-healthcheck/checks/2-efa-enumeration.sh (2b0416e) counts EFA devices
  (`tests.node.test_scripts.efa_devices` builds it); device names rdmap<bus>s0 as on p5 (FSx guide's lnetctl example).
- `nvidia-smi -L`: one line `GPU <n>: <name> (UUID: GPU-<uuid>)` per GPU, the layout of the sample in RedHatInsights'
  insights-core `insights/parsers/nvidia.py` (NvidiaSmiL); the name "NVIDIA H100 80GB HBM3" as CUDA's deviceQuery
  prints it on an 8x H100 SXM host (thamada/nvidia-smi nvsim/H100SXMx8_deviceQuery.py). UUIDs are made up.
- all_reduce_perf: the column header lines of AWS's published p5 table (tests/lambdas/fixtures/real/
  awsome-distributed-training_all_reduce_p5_2n_srun-l.log, without srun's `0: ` labels) and one 256 MiB row in that
  layout whose bus bandwidth and #wrong the test sets (there is no public one-node p5 log with provenance).
Emulated, and why: no EFA device, GPU or nccl-tests run here (stubs answer as above); scontrol is a stub in the
profile tests and the real one in the real-Slurm test.
"""

from __future__ import annotations

import shutil

import pytest

from tests.node import ami
from tests.node.real_slurm import SLURMS, real_slurm
from tests.node.test_block_end_drain import pcs_root
from tests.node.test_profiles import pcs_machine
from tests.node.test_scripts import NODE_DIR, efa_devices
from tests.stub_node import RECORD

HOST = "ip-10-1-0-6"
H100 = "NVIDIA H100 80GB HBM3"
TABLE_HEAD = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
    "#wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
)


def table(busbw: float, wrong: int = 0) -> str:
    row = (f"   268435456      67108864     float     sum      -1    700.0  383.48  {busbw:6.2f}      {wrong}    "
           f"701.0  382.94  {busbw:6.2f}      0\n")  # fmt: skip
    return "# nThread 1 nGpus 8 minBytes 268435456 maxBytes 268435456 step: 1048576(bytes)\n" + TABLE_HEAD + row


def gpu_lines(count: int) -> str:
    return "".join(f"GPU {n}: {H100} (UUID: GPU-{n:08x}-1111-2222-3333-444455556666)\n" for n in range(count))


# scontrol: `show node NAME` prints STUB_STATE/node-line when NAME is the host's and the file exists; `update` records
# (RECORD) and keeps the reason in node-line, as slurmctld would
SCONTROL = r"""if [[ "$1 $2" == "show node" ]]; then
  [[ -f "$STUB_STATE/node-line" && ( "${3:-}" == "ip-10-1-0-6" || "${3:-}" == --oneliner ) ]] || exit 1
  cat "$STUB_STATE/node-line"; exit 0
fi
if [[ "$1" == update ]]; then
  reason=""; for arg in "$@"; do [[ "$arg" == Reason=* ]] && reason="${arg#Reason=}"; done
  if [[ " $* " == *" State=RESUME "* ]]; then
    echo "NodeName=ip-10-1-0-6 Arch=x86_64 State=IDLE" >"$STUB_STATE/node-line"
  else
    echo "NodeName=ip-10-1-0-6 Arch=x86_64 State=IDLE+DRAIN Reason=$reason [root@2026-12-02T03:00:00]" \
      >"$STUB_STATE/node-line"
  fi
fi
exit 0"""


def machine(tmp_path, name: str, *, efa: int, gpus: int, slurm: bool = True):
    node = pcs_machine(tmp_path, name)
    profile = ami.load(name)
    for tool in ("awk", "grep", "tail", "tr", "timeout"):
        (node.bin / tool).unlink(missing_ok=True)
        (node.bin / tool).symlink_to(shutil.which(tool, path="/usr/bin:/bin"))
    node.add_stub("hostname", f'[[ "${{1:-}}" == -I ]] && echo "10.1.0.6 " || echo {HOST}')
    node.add_stub("nvidia-smi", '[[ -f "$STUB_STATE/gpus" ]] && cat "$STUB_STATE/gpus"')
    node.set("gpus", gpu_lines(gpus))
    efa_devices(node, [f"rdmap{79 + n}s0" for n in range(efa)])
    scontrol = node.path(f"{profile.slurm['bin']}/scontrol")
    scontrol.write_text(RECORD + SCONTROL + "\n")
    node.path(f"{profile.slurm['bin']}/squeue").write_text(RECORD + "exit 0\n")
    if slurm:
        node.set("node-line", f"NodeName={HOST} Arch=x86_64 State=IDLE\n")
    return node, profile


def scontrol_updates(node) -> list[list[str]]:
    return [call for call in node.calls("scontrol") if call[1] == "update"]


@pytest.mark.parametrize("name", ami.PROFILES)
def test_a_p5_with_every_device_passes_and_is_given_back(tmp_path, name):
    node, profile = machine(tmp_path, name, efa=32, gpus=8)
    node.set("all-reduce", table(360.12))
    result = node.run("fabric-check.sh", "--hold", "--efa", "32", "--gpus", "8", "--nvlink-floor", "250")
    assert result.returncode == 0, result.stderr
    if profile.software.get("nccl_tests"):
        measured = "one-node all_reduce busbw 360.12 GB/s, floor 250"
        assert result.stdout == f"fabric: passed (32 EFA devices; 8 GPUs; {measured})\n"
        (run,) = node.calls("all_reduce_perf")
        assert run[1:] == ["-b", "256M", "-e", "256M", "-g", "8", "-c", "1"]
        # a job still configuring (prolog) or completing (epilog) holds the GPUs too, as a running one does
        (jobs,) = [call for call in node.calls("squeue") if call[0] == "squeue"]
        assert "--states=RUNNING,CONFIGURING,COMPLETING" in jobs, jobs
    else:  # the image has no nccl-tests: nothing is downloaded, the check says so
        assert (
            result.stdout
            == "fabric: passed (32 EFA devices; 8 GPUs; NVLink not measured: no nccl-tests on this image)\n"
        )
        assert "NVLink bandwidth not measured" in node.script_log("fabric-check")
    assert scontrol_updates(node) == [
        ["scontrol", "update", f"NodeName={HOST}", "State=DRAIN", "Reason=fmcluster fabric check running"],
        ["scontrol", "update", f"NodeName={HOST}", "State=RESUME"],
    ]
    assert node.calls("sleep") == []


@pytest.mark.parametrize("name", ami.PROFILES)
def test_a_node_missing_efa_devices_is_drained_with_the_reason_after_three_recounts(tmp_path, name):
    node, _ = machine(tmp_path, name, efa=30, gpus=8)
    result = node.run("fabric-check.sh", "--efa", "32", "--gpus", "8")
    assert result.returncode == 1
    assert result.stdout == "fabric: FAILED: 30 of 32 EFA devices\n"
    assert node.calls("sleep") == [["sleep", "5"]] * 3
    assert scontrol_updates(node) == [
        ["scontrol", "update", f"NodeName={HOST}", "State=DRAIN", "Reason=fmcluster fabric: 30 of 32 EFA devices"]
    ]
    assert node.calls("all_reduce_perf") == []  # a node already failing is not benchmarked


@pytest.mark.parametrize(
    ("gpus", "smi", "reason"),
    [
        (7, "ok", "nvidia-smi lists 7 of 8 GPUs"),
        (8, "fails", "nvidia-smi failed (0 of 8 GPUs)"),
    ],
)
def test_a_node_whose_gpus_are_not_all_visible_is_drained(tmp_path, gpus, smi, reason):
    node, _ = machine(tmp_path, "pcs-ready-dlami-ubuntu2404", efa=32, gpus=gpus)
    if smi == "fails":
        node.add_stub(
            "nvidia-smi", 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the driver"; exit 9'
        )
    result = node.run("fabric-check.sh", "--hold", "--efa", "32", "--gpus", "8")
    assert result.returncode == 1 and result.stdout == f"fabric: FAILED: {reason}\n"
    assert scontrol_updates(node)[-1][-1] == f"Reason=fmcluster fabric: {reason}"
    assert "State=RESUME" not in str(node.calls("scontrol"))


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        (table(120.5), "one-node all_reduce busbw 120.50 GB/s below 250"),
        (table(360.0, wrong=3), "the one-node all_reduce had 3 wrong results"),
        ("# nThread 1 nGpus 8\nTest NCCL failure common.cu:1204 'unhandled cuda error'\n",
         "the one-node all_reduce failed (/usr/local/cuda-13.2/efa/test-cuda-13.2/all_reduce_perf)"),
    ],
)  # fmt: skip
def test_a_slow_or_wrong_nvlink_all_reduce_drains_the_node(tmp_path, output, reason):
    node, _ = machine(tmp_path, "pcs-ready-dlami-ubuntu2404", efa=32, gpus=8)
    node.set("all-reduce", output)
    result = node.run("fabric-check.sh", "--hold", "--efa", "32", "--gpus", "8", "--nvlink-floor", "250")
    assert result.returncode == 1 and result.stdout == f"fabric: FAILED: {reason}\n"
    assert scontrol_updates(node)[-1] == ["scontrol", "update", f"NodeName={HOST}", "State=DRAIN",
                                          f"Reason=fmcluster fabric: {reason}"]  # fmt: skip


def test_a_drain_by_someone_else_keeps_its_reason(tmp_path):
    node, _ = machine(tmp_path, "hyperpod-dlami-ubuntu2204", efa=2, gpus=8)
    node.set("node-line", f"NodeName={HOST} State=IDLE+DRAIN Reason=HyperPod health check [root@2026-12-02T03:00]\n")
    result = node.run("fabric-check.sh", "--hold", "--efa", "4", "--gpus", "8")
    assert result.returncode == 1
    assert scontrol_updates(node) == []
    assert "keeps its own drain reason 'HyperPod health check'" in node.script_log("fabric-check")


def test_a_node_slurm_does_not_know_is_checked_but_not_drained(tmp_path):
    node, _ = machine(tmp_path, "pcs-ready-dlami-ubuntu2404", efa=0, gpus=8, slurm=False)
    node.set("gpus", gpu_lines(4))
    result = node.run("fabric-check.sh", "--hold", "--gpus", "8")
    assert result.returncode == 1 and result.stdout == "fabric: FAILED: nvidia-smi lists 4 of 8 GPUs\n"
    assert scontrol_updates(node) == []
    assert "not drained: Slurm does not know this node" in node.script_log("fabric-check")


@pytest.mark.parametrize("args", [["--efa"], ["--efa", "many"], ["--gpus", "-1"], ["--what"]])
def test_bad_usage_exits_2(tmp_path, args):
    node, _ = machine(tmp_path, "pcs-ready-dlami-ubuntu2404", efa=0, gpus=0)
    result = node.run("fabric-check.sh", *args)
    assert result.returncode == 2 and result.stderr.startswith("usage: ")


@pytest.mark.real_tools
@pytest.mark.parametrize("version", SLURMS)
def test_a_failed_check_drains_the_node_in_a_real_slurm_and_a_pass_resumes_it(tmp_path, version):
    """The real scontrol, sinfo and squeue (PCS's layout under FMCLUSTER_ROOT, as the block-end test has it); the
    node's GPUs are the stub nvidia-smi's (the real Slurm's node is this host, named by its short host name)."""
    root = pcs_root(tmp_path, version)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "nvidia-smi").write_text(f"#!/bin/bash\ncat {tmp_path}/gpus\n")
    (stubs / "nvidia-smi").chmod(0o755)
    env = {"FMCLUSTER_ROOT": str(root), "PATH": f"{stubs}:/usr/sbin:/usr/bin:/sbin:/bin"}
    script = str(NODE_DIR / "fabric-check.sh")
    with real_slurm(tmp_path, version) as slurm:
        (tmp_path / "gpus").write_text(gpu_lines(3))
        failed = slurm.command("bash", script, "--hold", "--gpus", "4", check=False, env=env)
        drained = slurm.command("scontrol", "show", "node", slurm.node, "--oneliner").stdout
        (tmp_path / "gpus").write_text(gpu_lines(4))
        passed = slurm.command("bash", script, "--hold", "--gpus", "4", check=False, env=env)
        resumed = slurm.command("scontrol", "show", "node", slurm.node, "--oneliner").stdout
        slurm.command("scontrol", "update", f"NodeName={slurm.node}", "State=DRAIN", "Reason=operator maintenance")
        others = slurm.command("bash", script, "--hold", "--gpus", "4", check=False, env=env)
        kept = slurm.command("scontrol", "show", "node", slurm.node, "--oneliner").stdout
    assert failed.returncode == 1, failed.stderr
    assert failed.stdout == "fabric: FAILED: nvidia-smi lists 3 of 4 GPUs\n"
    assert "DRAIN" in drained and "Reason=fmcluster fabric: nvidia-smi lists 3 of 4 GPUs [root@" in drained
    # the check's own drain is given back by a later pass (a node rebooted after failing, the check on every boot)
    assert passed.returncode == 0 and passed.stdout == (
        "fabric: passed (4 GPUs; NVLink not measured: no nccl-tests on this image)\n"
    ), passed.stderr
    state = next(part for part in resumed.split() if part.startswith("State="))
    assert state.startswith("State=IDLE") and "DRAIN" not in state, (resumed, passed.stderr)
    # someone else's drain stays, even when the check passes
    assert others.returncode == 0 and "DRAIN" in kept and "Reason=operator maintenance" in kept, others.stderr
