"""The `fmcluster` command (validate, plan) run in-process, and the sizing arithmetic behind `plan`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster import cli, deploy_time, sizing
from fmcluster.config import ClusterConfig, parse

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"

HEAD = """\
name: llm-pretrain
region: us-east-1
availability_zone_id: use1-az6
"""
P5_PAIR = "compute:\n  - {name: gpu, instance_type: p5.48xlarge, count: 2}\n"

BAD = (
    HEAD.replace("use1-az6", "usw2-az1")
    + """\
compute:
  - name: gpu
    instance_type: p5.48xlarge
    count: 16
    capacity: capacity-block
orchestrator:
  type: pcs
storage:
  lustre:
    capacity_gib: 1000
tags:
  aws:team: ml
"""
)
BAD_LINES = [
    "availability_zone_id: 'usw2-az1' is in us-west-2, not in region us-east-1 (its AZ IDs start with use1-)",
    "compute[0].reservation_id: required when capacity is 'capacity-block'",
    "storage.lustre.capacity_gib: must be 1200, 2400 or a multiple of 2400 GiB; got 1000 (nearest: 1200)",
    "tags.aws:team: 'aws:team': tag keys starting with 'aws:' are reserved by AWS",
]

SLOW_CHECKPOINT = (
    HEAD
    + P5_PAIR
    + """\
storage:
  lustre:
    capacity_gib: 1200
training:
  model_parameters: 70B
"""
)
SLOW_CHECKPOINT_WARNING = (
    "training.checkpoint_write_seconds: warning: one checkpoint of 70B parameters (~0.98 TB) takes ~3345 s "
    "at "
    "293 MB/s, over the 120 s target; needs 8,167 MB/s; use storage.lustre.capacity_gib: 33600"
)


@pytest.fixture(autouse=True)
def _plain_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """No colour codes in the captured tables, whatever the environment asks for."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)


@pytest.fixture
def no_synth(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's tables only: its deploy time from a one-stack assembly instead of synthesizing the file's app
    (test_plan_ends_with_the_deploys_critical_path_from_the_synthesized_app covers that)."""
    stack = deploy_time.StackEstimate(name="stack", minutes=1.0, chain=[])
    monkeypatch.setattr(
        cli, "_assembly_estimate", lambda *_: deploy_time.DeployEstimate({"stack": stack}, deploy_time.Weights.load())
    )


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def table_row(out: str, first_cell: str) -> dict[str, str]:
    """The row of the rich table in `out` whose first cell is `first_cell`, by column header."""
    lines = out.splitlines()
    for index, line in enumerate(lines):
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0] == first_cell:
            header = next(h for h in reversed(lines[:index]) if "┃" in h and h.strip().startswith("┃"))
            names = [name.strip() for name in header.split("┃")[1:-1]]
            return dict(zip(names, cells, strict=True))
    raise AssertionError(f"no row {first_cell!r} in:\n{out}")


# --- validate -------------------------------------------------------------------------------------------


def test_validate_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", str(QUICKSTART))
    assert code == 0
    assert out == f"{QUICKSTART}: valid: 1 compute group(s), 2 node(s)\n"
    assert err == ""


def test_validate_defaults_to_the_quickstart(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    code, out, err = run(capsys, "validate")
    assert (code, out, err) == (0, "examples/quickstart.yaml: valid: 1 compute group(s), 2 node(s)\n", "")


def test_validate_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BAD)
    code, out, err = run(capsys, "validate", str(path))
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"{path}: {line}" for line in BAD_LINES]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(None, "file not found", id="missing"),
        pytest.param("", "the file is empty; expected a mapping of keys (name, region, ...)", id="empty"),
        pytest.param("- a\n", "the top level is a list; expected a mapping of keys (name, region, ...)", id="list"),
        pytest.param(
            "name: [\n",
            "line 2, column 1: YAML syntax error: expected the node content, but found '<stream end>'",
            id="syntax",
        ),
    ],
)
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_unreadable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, text: str | None, expected: str
) -> None:
    path = tmp_path / "cluster.yaml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, command, str(path))
    assert (code, out, err) == (2, "", f"{path}: {expected}\n")


def test_checkpoint_warning_is_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, SLOW_CHECKPOINT)
    code, out, err = run(capsys, "validate", str(path))
    assert code == 0
    assert out == f"{path}: valid: 1 compute group(s), 2 node(s)\n"
    assert err == f"{path}: {SLOW_CHECKPOINT_WARNING}\n"


def test_infinite_model_parameters_do_not_crash_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, HEAD + P5_PAIR + "training:\n  model_parameters: .inf\n")
    code, _, err = run(capsys, "validate", str(path))
    assert code == 2
    assert err.startswith(f"{path}: training.model_parameters: ")
    assert "Traceback" not in err


def test_validate_as_a_subprocess(tmp_path: Path) -> None:
    path = write(tmp_path, BAD)
    result = subprocess.run(
        [sys.executable, "-m", "fmcluster", "validate", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [f"{path}: {line}" for line in BAD_LINES]
    assert result.stdout == ""


# --- plan -----------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_synth")
def test_plan_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", str(QUICKSTART))
    assert (code, err) == (0, "")
    assert "quickstart: compute (hyperpod-slurm, us-east-1 use1-az6)" in out
    assert table_row(out, "gpu") == {
        "group": "gpu",
        "instance type": "p5.48xlarge",
        "capacity": "on-demand",
        "nodes": "2",
        "accelerators": "16 x H100 80GB",
        "EFA/node": "32",
        "EFA Gbps/node": "3,200",
        "EFA Gbps total": "6,400",
        "NVMe/node": "30.72 TB",
    }
    assert "storage: FSx for Lustre (PERSISTENT_2, SSD)" in out
    assert table_row(out, "capacity")["value"] == "1,200 GiB"
    assert table_row(out, "throughput")["value"] == "250 MB/s/TiB = 293 MB/s"
    assert table_row(out, "EFA")["value"] == "no"
    assert table_row(out, "S3 links")["value"] == "2"  # /datasets in, /checkpoints out
    assert table_row(out, "checkpoint size")["value"] == "0.11 TB (8B parameters)"
    assert table_row(out, "checkpoint write time")["value"] == "382 s (target 600 s, limited by the file system)"


def test_plan_ends_with_the_deploys_critical_path_from_the_synthesized_app(
    synthesized, capsys: pytest.CaptureFixture[str]
) -> None:
    """Synthesized on the fly (with cdk.json's flags) or read from an assembly: the same estimate."""
    code, out, err = run(capsys, "plan", str(QUICKSTART))
    assert (code, err) == (0, "")
    expected = deploy_time.estimate_assembly(synthesized["quickstart"].outdir)
    first, container = expected.first_job, expected.first_container_job
    assert out.splitlines()[-3:] == [
        expected.summary(),
        f"first job ~{first:.0f} min after `cdk deploy --all --concurrency 8` starts; container jobs ~{container:.0f} "
        "min (image built and imported into /fsx)",
        f"without --concurrency (one stack at a time): ~{expected.sequential:.0f} min",
    ]
    assert (
        "deep health checks of gpu: none (InstanceStress + InstanceConnectivity would add ~120 min to every new "
        "node)" in out
    )
    code, again, _ = run(capsys, "plan", str(QUICKSTART), "--assembly", str(synthesized["quickstart"].outdir))
    assert (code, again) == (0, out)


def test_plan_of_a_pcs_file_prints_time_to_first_job_for_both_node_images(
    synthesized, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/pcs-own-vpc.yaml is baked: the plan names it, and gives the boot alternative beside it, with each
    one's per-node boot (fmcluster/deploy_times.yaml node_boot: AWS's PCS reference, 8-12 and ~3 minutes)."""
    built = synthesized["pcs-own-vpc"]
    code, out, err = run(capsys, "plan", str(ROOT / "examples" / "pcs-own-vpc.yaml"), "--assembly", str(built.outdir))
    assert (code, err) == (0, "")
    expected = deploy_time.estimate_assembly(built.outdir)
    boot, baked = expected.first_job_with("boot"), expected.first_job_with("baked")
    assert baked == expected.first_job and boot < baked  # the first deploy waits for the image build
    assert out.splitlines()[-2] == (
        f"time to first job by orchestrator.node_image (this file: baked): boot ~{boot:.0f} min, each node ~10 min "
        "from launch to its first job (enroot and pyxis installed at first boot; AWS's PCS reference: 8-12 min); "
        f"baked ~{baked:.0f} min, the image build ~40 min (estimate) beside the storage stack and before the cluster "
        "stack, then each node ~3 min (AWS's PCS reference: ~3 min); every replacement, scale-up and capacity-block "
        "start pays a node's boot again"
    )
    # critical path: the build waits for the mirror, not for storage, which runs beside it
    assert re.search(r"mirror \d+ > node-image \d+ > cluster \d+", expected.summary())
    assert re.search(r"; .*storage \d+.* in parallel$", expected.summary())


def test_plan_says_when_the_app_does_not_synthesize(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*_: object) -> None:
        raise RuntimeError("ValidationFailed: ERROR InstanceGroups.InstanceType: 'ml.x' is not valid\nmore")

    monkeypatch.setattr(cli, "_assembly_estimate", refuse)
    code, _, err = run(capsys, "plan", str(QUICKSTART))
    assert (code, err) == (
        2,
        f"{QUICKSTART}: deploy time: cannot synthesize the app or read its assembly: ValidationFailed: ERROR "
        "InstanceGroups.InstanceType: 'ml.x' is not valid\n",
    )


@pytest.mark.usefixtures("no_synth")
def test_plan_without_training_has_no_checkpoint_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, HEAD + P5_PAIR)
    code, out, err = run(capsys, "plan", str(path))
    assert (code, err) == (0, "")
    assert table_row(out, "capacity")["value"] == "4,800 GiB"
    assert "checkpoint" not in out


@pytest.mark.usefixtures("no_synth")
def test_plan_names_each_capacity_block_and_its_drain(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "examples/p5-capacity-block.yaml")
    assert code == 0
    assert (
        "capacity block cr-0123456789abcdef0 (gpu): start and end known live only (`fmcluster info`); its nodes "
        "drain 60 min before its end" in out.splitlines()
    )
    code, out, _ = run(capsys, "plan", "examples/hyperpod-training-plan.yaml")
    assert code == 0
    assert (
        "training plan llm-pretrain-2026q4 (gpu): start and end known live only (`fmcluster info`); its nodes drain "
        "60 min before its end" in out.splitlines()
    )


@pytest.mark.usefixtures("no_synth")
def test_plan_groups_with_and_without_efa(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        # us-west-2: where HyperPod offers ml.p6-b200.48xlarge (its regional instance-type list)
        HEAD.replace("us-east-1", "us-west-2").replace("use1-az6", "usw2-az4")
        + """\
compute:
  - {name: h100, instance_type: p5.48xlarge, count: 4, efa: false}
  - {name: b200, instance_type: p6-b200.48xlarge, count: 2}
  - {name: a10g, instance_type: g5.4xlarge, count: 1}
""",
    )
    code, out, _ = run(capsys, "plan", str(path))
    assert code == 0
    assert (table_row(out, "h100")["EFA/node"], table_row(out, "h100")["EFA Gbps total"]) == ("0", "0")
    assert (table_row(out, "b200")["EFA/node"], table_row(out, "b200")["EFA Gbps total"]) == ("8", "6,400")
    assert table_row(out, "a10g")["EFA/node"] == "0"


@pytest.mark.usefixtures("no_synth")
def test_plan_shows_a_cpu_group_as_general_purpose_and_a_scaling_group_as_min_to_max(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A type outside the catalog: no accelerators, NVMe not known (never a guessed 0 TB); min_count below count."""
    path = write(
        tmp_path,
        HEAD
        + """orchestrator: {type: pcs}
compute:
  - {name: gpu, instance_type: p5.48xlarge, count: 4, min_count: 0}
  - {name: cpu, instance_type: c6i.4xlarge, count: 8, min_count: 2, scale_down_idle_minutes: 20}
training: {model_parameters: 8B}
""",
    )
    code, out, _ = run(capsys, "plan", str(path))
    assert code == 0
    cpu, gpu = table_row(out, "cpu"), table_row(out, "gpu")
    assert (cpu["nodes"], cpu["accelerators"], cpu["EFA/node"], cpu["NVMe/node"]) == (
        "2-8",
        "none (general purpose)",
        "0",
        "not known",
    )
    assert (gpu["nodes"], gpu["accelerators"], gpu["EFA/node"]) == ("0-4", "up to 32 x H100 80GB", "32")
    code, out, _ = run(capsys, "validate", str(path))
    assert (code, out.strip()) == (0, f"{path}: valid: 2 compute group(s), 2-12 node(s)")


@pytest.mark.usefixtures("no_synth")
def test_plan_shows_the_checkpoint_time_and_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, SLOW_CHECKPOINT)
    code, out, err = run(capsys, "plan", str(path))
    assert code == 0
    assert err == f"{path}: {SLOW_CHECKPOINT_WARNING}\n"
    assert table_row(out, "checkpoint size")["value"] == "0.98 TB (70B parameters)"
    assert table_row(out, "checkpoint write time")["value"] == "3,345 s (target 120 s, limited by the file system)"


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main([])
    assert caught.value.code == 2
    assert "usage: fmcluster" in capsys.readouterr().err


# --- sizing arithmetic ----------------------------------------------------------------------------------


def config(text: str) -> ClusterConfig:
    import yaml

    return parse(yaml.safe_load(text), source="cluster.yaml")


def test_checkpoint_of_70b_is_0_98_tb() -> None:
    estimate = sizing.checkpoint_estimate(config(SLOW_CHECKPOINT))
    assert estimate is not None
    assert estimate.size_bytes == pytest.approx(0.98e12)
    assert f"{estimate.size_bytes / 1e12:.2f}" == "0.98"
    assert estimate.required_mbps == pytest.approx(0.98e12 / 120 / 1e6)
    assert estimate.limited_by == "the file system"
    assert not estimate.meets_target


@pytest.mark.parametrize(
    ("capacity_gib", "tier", "expected"),
    [
        pytest.param(1200, 250, 292.97, id="1200-at-250"),
        pytest.param(1200, 125, 146.48, id="1200-at-125"),
        pytest.param(2400, 1000, 2343.75, id="2400-at-1000"),
        pytest.param(4800, 500, 2343.75, id="4800-at-500"),
        pytest.param(102400, 1000, 100000.0, id="100-tib-at-1000"),
    ],
)
def test_filesystem_mbps(capacity_gib: int, tier: int, expected: float) -> None:
    assert round(sizing.filesystem_mbps(capacity_gib, tier), 2) == expected


@pytest.mark.parametrize(
    ("required_mbps", "tier", "efa", "expected"),
    [
        pytest.param(1, 250, False, 1200, id="tiny-is-1200"),
        pytest.param(292.96875, 250, False, 1200, id="exactly-1200"),
        pytest.param(293, 250, False, 2400, id="just-over-1200"),
        pytest.param(500, 250, False, 2400, id="2048-rounds-to-2400"),
        pytest.param(585.9375, 250, False, 2400, id="exactly-2400"),
        pytest.param(1000, 250, False, 4800, id="4096-rounds-to-4800"),
        pytest.param(1171.875, 250, False, 4800, id="exactly-4800"),
        pytest.param(8166.67, 250, False, 33600, id="70b-in-120s"),
        pytest.param(1000, 1000, False, 1200, id="1000-at-1000"),
        pytest.param(1, 1000, True, 4800, id="efa-1000-minimum"),
        pytest.param(5000, 1000, True, 9600, id="efa-1000-steps"),
        pytest.param(1, 500, True, 9600, id="efa-500-minimum"),
        pytest.param(1, 250, True, 19200, id="efa-250-minimum"),
        pytest.param(47250, 250, True, 211200, id="efa-250-steps"),
        pytest.param(1, 125, True, 38400, id="efa-125-minimum"),
    ],
)
def test_capacity_for(required_mbps: float, tier: int, efa: bool, expected: int) -> None:
    capacity = sizing.capacity_for(required_mbps, tier, efa=efa)
    assert capacity == expected
    assert sizing.filesystem_mbps(capacity, tier) >= required_mbps


def test_clients_mbps_ena_and_efa() -> None:
    ena = config(HEAD + P5_PAIR)
    assert sizing.clients_mbps(ena) == 2 * 100 * 125
    efa = config(HEAD + P5_PAIR + "storage:\n  lustre: {efa: true, throughput_per_tib: 1000, capacity_gib: 4800}\n")
    assert sizing.clients_mbps(efa) == 2 * 700 * 125
    slow_nic = config(HEAD + "compute:\n  - {name: a, instance_type: g5.12xlarge, count: 3}\n")
    assert sizing.clients_mbps(slow_nic) == 3 * 40 * 125


def test_no_estimate_without_training_or_nodes() -> None:
    assert sizing.checkpoint_estimate(config(HEAD + P5_PAIR)) is None
    empty = (
        HEAD
        + "compute:\n  - {name: gpu, instance_type: p5.48xlarge, count: 0}\n"
        + "training: {model_parameters: 7B}\n"
    )
    assert sizing.checkpoint_estimate(config(empty)) is None
    assert sizing.checkpoint_warnings(config(empty)) == []


def test_no_warning_when_the_target_is_met() -> None:
    assert sizing.checkpoint_warnings(config(QUICKSTART.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            SLOW_CHECKPOINT,
            SLOW_CHECKPOINT_WARNING,
            id="file-system-capacity",
        ),
        pytest.param(
            HEAD + P5_PAIR + "storage:\n  lustre: {capacity_gib: 1200, throughput_per_tib: 125}\n"
            "training: {model_parameters: 8B, checkpoint_write_seconds: 600}\n",
            "training.checkpoint_write_seconds: warning: one checkpoint of 8B parameters (~0.11 TB) takes "
            "~765 s "
            "at 146 MB/s, over the 600 s target; needs 187 MB/s; use storage.lustre.capacity_gib: 2400 or "
            "storage.lustre.throughput_per_tib: 250",
            id="capacity-or-tier",
        ),
        pytest.param(
            HEAD + "compute:\n  - {name: a, instance_type: g5.12xlarge, count: 1}\n"
            "storage:\n  lustre: {capacity_gib: 96000, throughput_per_tib: 1000}\n"
            "training: {model_parameters: 70B}\n",
            "training.checkpoint_write_seconds: warning: one checkpoint of 70B parameters (~0.98 TB) takes "
            "~196 s "
            "at 5,000 MB/s, over the 120 s target; needs 8,167 MB/s; the nodes' network reaches only 5,000 "
            "MB/s: "
            "raise checkpoint_write_seconds to 196 or add nodes",
            id="nodes-network",
        ),
        pytest.param(
            HEAD + P5_PAIR + "storage:\n  lustre: {capacity_gib: 19200, efa: true}\n"
            "training: {model_parameters: 405B}\n",
            "training.checkpoint_write_seconds: warning: one checkpoint of 405B parameters (~5.67 TB) takes "
            "~1210 s at 4,688 MB/s, over the 120 s target; needs 47,250 MB/s; "
            "use storage.lustre.capacity_gib: 211200",
            id="efa-capacity-step",
        ),
    ],
)
def test_checkpoint_warnings(text: str, expected: str) -> None:
    assert [problem.render("cluster.yaml") for problem in sizing.checkpoint_warnings(config(text))] == [
        f"cluster.yaml: {expected}"
    ]


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (7e10, "70B"),
        (8e9, "8B"),
        (4.05e11, "405B"),
        (1.5e12, "1.5T"),
        (1.25e8, "125M"),
        (5e3, "5K"),
        (500, "500"),
    ],
)
def test_format_parameters(count: float, expected: str) -> None:
    assert sizing.format_parameters(count) == expected


@pytest.mark.usefixtures("no_synth")  # the line comes from the file, not the app: the fast tier synthesizes nothing
def test_plan_says_pcs_instance_health_checks_replace_the_groups_instances_once_on_the_first_deploy(capsys):
    """botocore pcs UpdateComputeNodeGroup `instanceHealthChecks`: "When you change these settings, PCS drains and
    replaces the instances"; fmcluster applies them right after the node group is created."""
    code, out, _ = run(capsys, "plan", str(ROOT / "examples" / "pcs-cpu-and-gpu.yaml"))
    assert code == 0
    assert (
        "PCS instance health checks of gpu: applied right after its node group is created, so PCS drains and "
        "replaces its 4 instance(s) once on the first deploy, and again on every change (botocore pcs "
        "UpdateComputeNodeGroup)"
    ) in out
    assert "PCS instance health checks of cpu" not in out
