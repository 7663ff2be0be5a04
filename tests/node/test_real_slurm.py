"""fmcluster's Slurm pieces on a real one-node Slurm (tests/node/real_slurm.py), every test on each of SLURMS: Debian's
slurm-wlm 22.05 on this machine, and 24.11 (trixie) and 26.05 (forky) in chroots, the oldest and newest Slurm PCS runs.

What runs for real: slurmctld, slurmd, sbatch, srun, scontrol reconfigure, Slurm's TaskProlog, Prolog and Epilog
handling (their environment: SLURM_JOB_GPUS from GRES, SLURM_SCRIPT_CONTEXT), and fmcluster's scripts
(slurm/task-prolog.sh, slurm/gpu-job-map.sh, slurm-hooks.sh) as Slurm runs them. What is stand-in: the 4 GPUs are
GRES backed by character devices that act as /dev/null (no job touches a GPU); slurm.conf is a minimal one, not
HyperPod's or PCS's.

Slurm runs a Prolog or Epilog with an environment of its own making, so FMCLUSTER_ROOT (which keeps the scripts off
this machine's /run) reaches gpu-job-map.sh through a two-line wrapper; the wrapper is test scaffolding, the script
is the shipped one. What stays emulated (GPUs, EFA, Lustre, systemd) and why: real_slurm.py's docstring.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.node.real_slurm import CHROOTS, SLURMS, real_slurm

pytestmark = pytest.mark.real_tools

NODE_DIR = Path(__file__).resolve().parents[2] / "fmcluster" / "node"
TASK_PROLOG = NODE_DIR / "slurm" / "task-prolog.sh"
GPU_JOB_MAP = NODE_DIR / "slurm" / "gpu-job-map.sh"
SLURM_HOLD = NODE_DIR / "hyperpod" / "slurm-hold.sh"
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


@pytest.mark.parametrize("version", SLURMS)
def test_task_prolog_puts_the_node_nccl_environment_into_batch_scripts_and_steps(tmp_path, version):
    root = node_root(tmp_path)
    with real_slurm(tmp_path, version, TaskProlog=str(TASK_PROLOG)) as slurm:
        # the submitter's environment: a stale value, as from a login node of another instance type
        job = slurm.run_batch(
            "#!/bin/bash\necho batch $NCCL_SOCKET_IFNAME $FI_EFA_USE_HUGE_PAGE\n"
            "srun bash -c 'echo step $NCCL_SOCKET_IFNAME $FI_EFA_USE_HUGE_PAGE'\n",
            env={"FMCLUSTER_ROOT": str(root), "NCCL_SOCKET_IFNAME": "eth0"},
        )
    assert job.state == "COMPLETED", job.output
    assert job.output.splitlines() == ["batch ^docker,lo,veth 0", "step ^docker,lo,veth 0"]


@pytest.mark.parametrize("version", SLURMS)
def test_a_job_keeps_the_values_it_names_in_fmcluster_nccl_keep(tmp_path, version):
    root = node_root(tmp_path)
    with real_slurm(tmp_path, version, TaskProlog=str(TASK_PROLOG)) as slurm:
        job = slurm.run_batch(
            "#!/bin/bash\necho $NCCL_SOCKET_IFNAME $FI_EFA_USE_HUGE_PAGE\n",
            env={
                "FMCLUSTER_ROOT": str(root),
                "NCCL_SOCKET_IFNAME": "eth0",
                "FMCLUSTER_NCCL_KEEP": "NCCL_SOCKET_IFNAME",
            },
        )
    assert job.output.splitlines() == ["eth0 0"]


@pytest.mark.parametrize("version", SLURMS)
def test_without_the_task_prolog_a_batch_job_gets_only_the_submitters_environment(tmp_path, version):
    """The defect the TaskProlog fixes: nothing of the node's NCCL environment reaches a batch job."""
    root = node_root(tmp_path)
    with real_slurm(tmp_path, version) as slurm:
        job = slurm.run_batch('#!/bin/bash\necho "[$NCCL_SOCKET_IFNAME]"\n', env={"FMCLUSTER_ROOT": str(root)})
    assert job.output.splitlines() == ["[]"]


@pytest.mark.parametrize("version", SLURMS)
def test_prolog_and_epilog_write_dcgm_exporters_gpu_to_job_files(tmp_path, version):
    """dcgm-exporter's format (internal/pkg/transformation/hpc.go, tag 4.5.3-4.8.2): one file per GPU index, one job id
    per line. Two jobs at once, two GPUs each: while they run each job's GPUs name it; afterwards the files are gone."""
    root = node_root(tmp_path)
    hook = wrapper(tmp_path, root)
    mapping = root / "run/fmcluster/dcgm-job-mapping"
    script = (
        "#!/bin/bash\nsleep 3\necho gpus=$CUDA_VISIBLE_DEVICES\n"
        f'for f in {mapping}/[0-9]*; do echo "$(basename $f):$(paste -sd, $f)"; done\n'
    )
    with real_slurm(tmp_path, version, Prolog=str(hook), Epilog=str(hook)) as slurm:
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


@pytest.mark.parametrize("version", SLURMS)
def test_slurm_hooks_sh_adds_the_task_prolog_to_slurm_conf_keeps_a_prolog_it_finds_and_reconfigures(tmp_path, version):
    """slurm-hooks.sh on this Slurm's slurm.conf (SLURM_CONF), as on a HyperPod controller (slurmctld active):
    the image's own Prolog/Epilog are kept, TaskProlog is added, `scontrol reconfigure` (real) makes it live."""
    root = node_root(tmp_path)
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/scontrol").symlink_to("/usr/bin/scontrol")  # the distribution's, run by its full path
    hook = wrapper(tmp_path, root)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"  # slurmctld is active here; no slurmd unit
    systemctl.write_text('#!/bin/bash\n[[ "$1 ${3:-}" == "is-active slurmctld" ]]\n')
    systemctl.chmod(0o755)
    with real_slurm(tmp_path, version, Prolog=str(hook), Epilog=str(hook)) as slurm:
        before = slurm.run_batch('#!/bin/bash\necho "[$FI_EFA_USE_HUGE_PAGE]"\n', env={"FMCLUSTER_ROOT": str(root)})
        env = {**slurm.env, "PATH": f"{bin_dir}:{slurm.env['PATH']}", "FMCLUSTER_ROOT": str(root)}
        result = slurm.command("bash", str(NODE_DIR / "slurm-hooks.sh"), env=env, check=False)
        assert result.returncode == 0, result.stderr
        after = slurm.run_batch('#!/bin/bash\necho "[$FI_EFA_USE_HUGE_PAGE]"\n', env={"FMCLUSTER_ROOT": str(root)})
        again = slurm.command("bash", str(NODE_DIR / "slurm-hooks.sh"), env=env, check=False)
        conf = Path(slurm.env["SLURM_CONF"]).read_text()
    assert before.output.strip() == "[]" and after.output.strip() == "[0]"
    assert f"\nTaskProlog={TASK_PROLOG}\n" in conf and conf.count("TaskProlog=") == 1
    assert f"\nProlog={hook}\n" in conf and f"\nEpilog={hook}\n" in conf
    log = (root / "var/log/fmcluster/slurm-hooks.log").read_text()
    assert f"slurm.conf sets Prolog={hook} already; keeping it, so fmcluster's gpu-job-map.sh does not run" in log
    assert "slurmctld reconfigured" in log
    assert again.returncode == 0 and "nothing to change" in again.stderr


def hyperpod_root(tmp_path: Path) -> Path:
    """FMCLUSTER_ROOT laid out as HyperPod's image keeps Slurm (/opt/slurm/{bin,etc}), its scontrol the real one."""
    root = node_root(tmp_path)
    (root / "opt/slurm/etc").mkdir(parents=True)
    (root / "opt/slurm/bin").mkdir()
    (root / "opt/slurm/bin/scontrol").symlink_to("/usr/bin/scontrol")  # inside the chroot: that Slurm's own
    return root


def job_state(slurm, job_id: str) -> str:
    shown = slurm.command("scontrol", "show", "job", job_id, "--oneliner").stdout
    return next(part.split("=", 1)[1] for part in shown.split() if part.startswith("JobState="))


@pytest.mark.parametrize("version", SLURMS)
def test_a_hyperpod_node_takes_no_job_until_its_lifecycle_released_it(tmp_path, version):
    """slurm-hold.sh as on_create.sh runs it: `hold` first (the node is drained, a job submitted now waits), then
    `release` at the end; `release` leaves alone a node drained for another reason (an admin's, HyperPod's)."""
    root = hyperpod_root(tmp_path)
    env = {"FMCLUSTER_ROOT": str(root)}
    with real_slurm(tmp_path, version) as slurm:
        held = slurm.command("bash", str(SLURM_HOLD), "hold", env=env, check=False)
        assert held.returncode == 0, held.stderr
        script = tmp_path / "job.sh"
        script.write_text("#!/bin/bash\necho ran\n")
        job_id = slurm.command("sbatch", "--parsable", f"--output={tmp_path}/job.out", str(script)).stdout.strip()
        time.sleep(3)
        waiting = job_state(slurm, job_id)
        node = slurm.command("scontrol", "show", "node", slurm.node, "--oneliner").stdout
        released = slurm.command("bash", str(SLURM_HOLD), "release", env=env, check=False)
        assert released.returncode == 0, released.stderr
        assert slurm.wait_for_epilog(lambda: job_state(slurm, job_id) == "COMPLETED", timeout=30), slurm.logs()
        slurm.command("scontrol", "update", f"NodeName={slurm.node}", "State=DRAIN", "Reason=admin: bad GPU")
        again = slurm.command("bash", str(SLURM_HOLD), "release", env=env, check=False)
        after = slurm.command("scontrol", "show", "node", slurm.node, "--oneliner").stdout
    assert waiting == "PENDING"
    assert "DRAIN" in node and "Reason=fmcluster lifecycle running [root@" in node
    assert again.returncode == 0 and "Reason=admin: bad GPU" in after and "DRAIN" in after
    assert "is not drained by fmcluster's lifecycle (reason: 'admin: bad GPU'); left as it is" in again.stderr


@pytest.mark.parametrize("version", CHROOTS)
def test_on_hyperpod_the_gpu_job_map_runs_from_prolog_d_beside_the_amis_hooks(tmp_path, version):
    """Without the AMI's job map, slurm-hooks.sh links gpu-job-map.sh into HyperPod's prolog.d/epilog.d; a real Slurm
    whose Prolog/Epilog name those directories (`DIR/*`, as the script requires of HyperPod's slurm.conf) runs it
    beside the other scripts there. Only in the chroots: the hook writes /run/fmcluster, the chroot's own /run."""
    root = hyperpod_root(tmp_path)
    etc = root / "opt/slurm/etc"
    prolog, epilog = f"{etc}/prolog.d/*", f"{etc}/epilog.d/*"
    conf = "ClusterName=hyperpod\nProlog=/opt/slurm/etc/prolog.d/*\nEpilog=/opt/slurm/etc/epilog.d/*\n"
    (etc / "slurm.conf").write_text(conf)
    for kind in ("prolog", "epilog"):  # another script of the directory, as HyperPod's AMI keeps its own there
        other = etc / f"{kind}.d/500_other.sh"
        other.parent.mkdir()
        other.write_text(f"#!/bin/bash\necho $SLURM_JOB_ID >>{tmp_path}/{kind}-ran\n")
        other.chmod(0o755)
    with real_slurm(tmp_path, version, Prolog=prolog, Epilog=epilog) as slurm:
        # as on HyperPod: no SLURM_CONF, Slurm under /opt/slurm (of FMCLUSTER_ROOT)
        env = {"FMCLUSTER_ROOT": str(root), "SLURM_CONF": ""}
        hooks = slurm.command("bash", str(NODE_DIR / "slurm-hooks.sh"), env=env, check=False)
        assert hooks.returncode == 0, hooks.stderr
        job = slurm.run_batch("#!/bin/bash\ncat /run/fmcluster/dcgm-job-mapping/[0-9]*\n", "--gres=gpu:2")
        mapping = slurm.host_path("/run/fmcluster/dcgm-job-mapping")
        emptied = slurm.wait_for_epilog(lambda: not list(mapping.glob("[0-9]*")))
    assert job.state == "COMPLETED", job.output
    assert job.output.splitlines() == [job.job_id, job.job_id]  # both GPUs of the job name it
    assert emptied  # the epilog took it out again
    assert (tmp_path / "prolog-ran").read_text().split() == [job.job_id]
    assert slurm.wait_for_epilog(lambda: (tmp_path / "epilog-ran").exists())
    assert (etc / "slurm.conf").read_text() == conf  # HyperPod's file, never written
