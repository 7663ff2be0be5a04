"""fmcluster's Slurm pieces on a real one-node Slurm (tests/node/real_slurm.py: Debian's slurm-wlm 22.05 and munge).

What runs for real: slurmctld, slurmd, sbatch, srun, scontrol reconfigure, Slurm's TaskProlog, Prolog and Epilog
handling (their environment: SLURM_JOB_GPUS from GRES, SLURM_SCRIPT_CONTEXT), and fmcluster's scripts
(slurm/task-prolog.sh, slurm/gpu-job-map.sh, slurm-hooks.sh) as Slurm runs them. What is stand-in: the 4 GPUs are
GRES backed by character devices that act as /dev/null (no job touches a GPU); slurm.conf is a minimal one, not
HyperPod's or PCS's.

Slurm runs a Prolog or Epilog with an environment of its own making, so FMCLUSTER_ROOT (which keeps the scripts off
this machine's /run) reaches gpu-job-map.sh through a two-line wrapper; the wrapper is test scaffolding, the script
is the shipped one. The behaviour shown holds from Slurm 22.05 on; HyperPod and PCS run newer Slurm (24.11, 25.x):
TaskProlog's `export NAME=value` and Prolog's SLURM_JOB_GPUS are documented there alike (slurm.conf(5),
prolog_epilog.html).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.node.real_slurm import real_slurm

pytestmark = pytest.mark.real_tools

NODE_DIR = Path(__file__).resolve().parents[2] / "fmcluster" / "node"
TASK_PROLOG = NODE_DIR / "slurm" / "task-prolog.sh"
GPU_JOB_MAP = NODE_DIR / "slurm" / "gpu-job-map.sh"
NODE_ENV = "# Written by fmcluster nccl-env.sh\nNCCL_SOCKET_IFNAME=^docker,lo,veth\nFI_EFA_USE_HUGE_PAGE=0\n"


def node_root(tmp_path: Path) -> Path:
    """FMCLUSTER_ROOT with the node's NCCL environment, as nccl-env.sh writes it."""
    root = tmp_path / "root"
    (root / "etc/fmcluster").mkdir(parents=True)
    (root / "etc/fmcluster/nccl.env").write_text(NODE_ENV)
    root.chmod(0o755)
    return root


def wrapper(tmp_path: Path, root: Path) -> Path:
    path = tmp_path / "gpu-job-map-wrapper.sh"
    path.write_text(f'#!/bin/bash\nexport FMCLUSTER_ROOT={root}\nexec {GPU_JOB_MAP} "$@"\n')
    path.chmod(0o755)
    return path


def test_task_prolog_puts_the_node_nccl_environment_into_batch_scripts_and_steps(tmp_path):
    root = node_root(tmp_path)
    with real_slurm(tmp_path, TaskProlog=str(TASK_PROLOG)) as slurm:
        # the submitter's environment: a stale value, as from a login node of another instance type
        job = slurm.run_batch(
            "#!/bin/bash\necho batch $NCCL_SOCKET_IFNAME $FI_EFA_USE_HUGE_PAGE\n"
            "srun bash -c 'echo step $NCCL_SOCKET_IFNAME $FI_EFA_USE_HUGE_PAGE'\n",
            env={"FMCLUSTER_ROOT": str(root), "NCCL_SOCKET_IFNAME": "eth0"},
        )
    assert job.state == "COMPLETED", job.output
    assert job.output.splitlines() == ["batch ^docker,lo,veth 0", "step ^docker,lo,veth 0"]


def test_a_job_keeps_the_values_it_names_in_fmcluster_nccl_keep(tmp_path):
    root = node_root(tmp_path)
    with real_slurm(tmp_path, TaskProlog=str(TASK_PROLOG)) as slurm:
        job = slurm.run_batch(
            "#!/bin/bash\necho $NCCL_SOCKET_IFNAME $FI_EFA_USE_HUGE_PAGE\n",
            env={
                "FMCLUSTER_ROOT": str(root),
                "NCCL_SOCKET_IFNAME": "eth0",
                "FMCLUSTER_NCCL_KEEP": "NCCL_SOCKET_IFNAME",
            },
        )
    assert job.output.splitlines() == ["eth0 0"]


def test_without_the_task_prolog_a_batch_job_gets_only_the_submitters_environment(tmp_path):
    """The defect the TaskProlog fixes: nothing of the node's NCCL environment reaches a batch job."""
    root = node_root(tmp_path)
    with real_slurm(tmp_path) as slurm:
        job = slurm.run_batch('#!/bin/bash\necho "[$NCCL_SOCKET_IFNAME]"\n', env={"FMCLUSTER_ROOT": str(root)})
    assert job.output.splitlines() == ["[]"]


def test_prolog_and_epilog_write_dcgm_exporters_gpu_to_job_files(tmp_path):
    """dcgm-exporter's format (internal/pkg/transformation/hpc.go, tag 4.5.3-4.8.2): one file per GPU index, one job id
    per line. Two jobs at once, two GPUs each: while they run each job's GPUs name it; afterwards the files are gone."""
    root = node_root(tmp_path)
    hook = wrapper(tmp_path, root)
    mapping = root / "run/fmcluster/dcgm-job-mapping"
    script = (
        "#!/bin/bash\nsleep 3\necho gpus=$CUDA_VISIBLE_DEVICES\n"
        f'for f in {mapping}/[0-9]*; do echo "$(basename $f):$(paste -sd, $f)"; done\n'
    )
    with real_slurm(tmp_path, Prolog=str(hook), Epilog=str(hook)) as slurm:
        jobs = []
        for index in range(2):
            path = tmp_path / f"job{index}.sh"
            path.write_text(script)
            submitted = slurm.command("sbatch", "--parsable", "--gres=gpu:2", f"--output={path}.out",
                                      f"--chdir={tmp_path}", str(path))  # fmt: skip
            jobs.append((submitted.stdout.strip(), Path(f"{path}.out")))
        done = slurm.wait_for_epilog(lambda: all("gpus=" in out.read_text() for _, out in jobs if out.exists())
                                     and all(out.exists() for _, out in jobs), timeout=40)  # fmt: skip
        assert done, slurm.logs()
        emptied = slurm.wait_for_epilog(lambda: not any(mapping.glob("[0-9]*")), timeout=30)
        left = sorted(p.name for p in mapping.iterdir())
    assert emptied, left
    given = []
    for job_id, out in jobs:
        gpu_line, *seen = out.read_text().splitlines()
        indexes = gpu_line.removeprefix("gpus=").split(",")
        given += indexes
        assert sorted(line for line in seen if line.endswith(f":{job_id}")) == [f"{i}:{job_id}" for i in indexes]
    assert sorted(given) == ["0", "1", "2", "3"]  # both ran at once, on different GPUs
    assert left == [".lock"]  # no half-written file is left behind


def test_slurm_hooks_sh_adds_the_task_prolog_to_slurm_conf_keeps_a_prolog_it_finds_and_reconfigures(tmp_path):
    """slurm-hooks.sh on this Slurm's slurm.conf (SLURM_CONF), as on a HyperPod controller (slurmctld active):
    the image's own Prolog/Epilog are kept, TaskProlog is added, `scontrol reconfigure` (real) makes it live."""
    root = node_root(tmp_path)
    hook = wrapper(tmp_path, root)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"  # slurmctld is active here; no slurmd unit
    systemctl.write_text('#!/bin/bash\n[[ "$1 ${3:-}" == "is-active slurmctld" ]]\n')
    systemctl.chmod(0o755)
    with real_slurm(tmp_path, Prolog=str(hook), Epilog=str(hook)) as slurm:
        before = slurm.run_batch('#!/bin/bash\necho "[$FI_EFA_USE_HUGE_PAGE]"\n', env={"FMCLUSTER_ROOT": str(root)})
        env = {**slurm.env, "PATH": f"{bin_dir}:{slurm.env['PATH']}", "FMCLUSTER_ROOT": str(root)}
        result = subprocess.run(["bash", str(NODE_DIR / "slurm-hooks.sh")], env=env, capture_output=True, text=True,
                                timeout=60, check=False)  # fmt: skip
        assert result.returncode == 0, result.stderr
        after = slurm.run_batch('#!/bin/bash\necho "[$FI_EFA_USE_HUGE_PAGE]"\n', env={"FMCLUSTER_ROOT": str(root)})
        again = subprocess.run(["bash", str(NODE_DIR / "slurm-hooks.sh")], env=env, capture_output=True, text=True,
                               timeout=60, check=False)  # fmt: skip
        conf = Path(slurm.env["SLURM_CONF"]).read_text()
    assert before.output.strip() == "[]" and after.output.strip() == "[0]"
    assert f"\nTaskProlog={TASK_PROLOG}\n" in conf and conf.count("TaskProlog=") == 1
    assert f"\nProlog={hook}\n" in conf and f"\nEpilog={hook}\n" in conf
    log = (root / "var/log/fmcluster/slurm-hooks.log").read_text()
    assert f"slurm.conf sets Prolog={hook} already; keeping it, so fmcluster's gpu-job-map.sh does not run" in log
    assert "slurmctld reconfigured" in log
    assert again.returncode == 0 and "nothing to change" in again.stderr
