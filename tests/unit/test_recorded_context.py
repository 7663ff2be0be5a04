"""The PCS size recorded in cdk.context.json: held while the nodes fit it, growth past it refused at synth.

Why a record: the size is create-only (cfn-lint's schema of AWS::PCS::Cluster lists /properties/Size), and the CDK
CLI passes cdk.context.json to the app as context on every command (CDK developer guide, "Context values"), as it does
for the values its lookups recorded. The real CLI run at the end checks that hand-over."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fmcluster.config import ConfigError, parse
from fmcluster.recorded_context import CONTEXT_FILE, pcs_size_key, pinned, record
from tests.conftest import REPO
from tests.gates.test_cdk_cli import CDK, offline_env

PCS_FILE = {
    "name": "llm",
    "region": "us-east-1",
    "availability_zone_id": "use1-az6",
    "orchestrator": {"type": "pcs"},
    "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 20}],
}
KEY = "fmcluster:pcs-size:region=us-east-1:cluster=llm"


def pcs_file(count: int, **orchestrator: str):
    return parse({**PCS_FILE, "orchestrator": {"type": "pcs", **orchestrator},
                  "compute": [{**PCS_FILE["compute"][0], "count": count}]})  # fmt: skip


def test_the_first_synth_records_the_size_and_keeps_other_keys(tmp_path):
    (tmp_path / CONTEXT_FILE).write_text(json.dumps({"availability-zones:account=1:region=us-east-1": ["a"]}))
    config = pcs_file(20)  # 20 nodes: the default (room to double) is medium
    assert pcs_size_key(config) == KEY
    assert record(config, tmp_path) is True
    assert json.loads((tmp_path / CONTEXT_FILE).read_text()) == {
        "availability-zones:account=1:region=us-east-1": ["a"],
        KEY: "MEDIUM",
    }
    assert record(pcs_file(300), tmp_path) is False  # a record is never overwritten
    assert json.loads((tmp_path / CONTEXT_FILE).read_text())[KEY] == "MEDIUM"
    hyperpod = parse({**PCS_FILE, "orchestrator": {"type": "hyperpod-slurm"}})
    assert record(hyperpod, tmp_path / "none") is False  # HyperPod has no size


@pytest.mark.parametrize(
    ("count", "orchestrator", "recorded", "size"),
    [
        (20, {}, None, None),  # nothing recorded: the file's own choice
        (10, {}, "MEDIUM", "medium"),  # the default would be small: the recorded size is kept (no replacement)
        (300, {}, "MEDIUM", "medium"),  # still fits medium's 512 instances, although the default would be large
        (20, {"size": "medium"}, "MEDIUM", "medium"),
    ],
)
def test_the_recorded_size_is_held_while_the_nodes_fit(count, orchestrator, recorded, size):
    context = {KEY: recorded} if recorded else {}
    assert pinned(pcs_file(count, **orchestrator), context, "f.yaml").orchestrator.size == size


@pytest.mark.parametrize(
    ("count", "orchestrator", "message"),
    [
        (
            600,  # with the head node that PCS runs for the metrics (models.pcs_head_group): 601
            {},
            "this cluster was built with size medium (cdk.context.json, " + KEY + "): 'medium' manages 512 instances, "
            "fewer than these 601 nodes (with the head node); the size of a running cluster cannot change (it replaces "
            "the cluster with every node group and queue): to grow past it, deploy the file under a new name with a "
            "larger size, move the work, then delete the old cluster",
        ),
        (
            20,
            {"size": "large"},
            "'large' differs from 'medium', the size cdk.context.json records for this cluster (" + KEY + "); the "
            "size of a running cluster cannot change (it replaces the cluster with every node group and queue): keep "
            "orchestrator.size: medium, or deploy the file under a new name with the new size, move the work, then "
            "delete the old cluster",
        ),
    ],
)
def test_growth_past_the_record_is_refused_with_the_migration(count, orchestrator, message):
    with pytest.raises(ConfigError) as error:
        pinned(pcs_file(count, **orchestrator), {KEY: "MEDIUM"}, "f.yaml")
    assert error.value.lines() == [
        f"f.yaml: orchestrator.size: {message}; `cdk context --reset {KEY}` forgets the record if the cluster was "
        "never deployed at that size"
    ]


@pytest.mark.real_tools  # the CDK CLI
def test_plain_cdk_synth_fails_on_growth_past_the_recorded_size(tmp_path):
    """The real CDK CLI, offline, in a project folder whose cdk.context.json holds the record: the app exits 2 before
    building anything. (The first synth that writes the record is `record`, above; app.py calls it after synth.)"""
    assert CDK.exists(), "the pinned CDK CLI is missing: run `make setup`"
    grown = tmp_path / "llm.yaml"
    grown.write_text(json.dumps({**PCS_FILE, "compute": [{**PCS_FILE["compute"][0], "count": 600}]}))
    (tmp_path / "cdk.json").write_text(json.dumps({"app": f"{sys.executable} {REPO / 'app.py'}"}))
    (tmp_path / CONTEXT_FILE).write_text(json.dumps({KEY: "MEDIUM"}))
    env = offline_env() | {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [str(CDK), "synth", "--quiet", "--no-notices", "-c", f"config={grown}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert f"{grown}: orchestrator.size: this cluster was built with size medium (cdk.context.json, {KEY})" in (
        result.stderr
    )
    assert json.loads((tmp_path / CONTEXT_FILE).read_text()) == {KEY: "MEDIUM"}  # the record stays as it was


@pytest.mark.real_tools  # the CDK CLI, synthesizing a cluster twice
def test_the_first_plain_cdk_synth_records_the_size_and_the_cli_keeps_it(tmp_path):
    """The real CDK CLI, offline, in a project folder with no cdk.context.json (a fresh clone): the app writes the
    record after synth, and the CLI does not write the file back over it (it saves context only after a lookup:
    aws-cdk CLI, lib/cxapp/cloud-executable.js). The next synth reads the record as context."""
    assert CDK.exists(), "the pinned CDK CLI is missing: run `make setup`"
    cluster = tmp_path / "llm.yaml"
    cluster.write_text(json.dumps(PCS_FILE))
    (tmp_path / "cdk.json").write_text(json.dumps({"app": f"{sys.executable} {REPO / 'app.py'}"}))
    env = offline_env() | {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [str(CDK), "synth", "--quiet", "--no-notices", "-c", f"config={cluster}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    recorded = json.loads((tmp_path / CONTEXT_FILE).read_text())
    assert list(recorded) == [KEY] and recorded[KEY] in ("SMALL", "MEDIUM", "LARGE")
