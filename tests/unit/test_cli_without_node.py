"""The commands that synthesize nothing run without Node: each in a fresh interpreter whose PATH holds only the
virtual environment's bin (no `node`), and none imports `aws_cdk` or `jsii` (jsii starts Node when it loads).

What stays emulated: the AWS account. `validate --live` and `diagnose` run with no credentials at all (every
credential source pointed at nothing), so they stop at "no credentials" (exit 2); the point here is what they load
before that, not what the account says (tests/live covers that with botocore's Stubber).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
VENV_BIN = Path(sys.executable).parent
RUN_AND_REPORT = """
import json, sys
from fmcluster.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:  # argparse's --help
    code = stop.code
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("aws_cdk", "jsii", "constructs"))
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def without_node_env(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "none"
    return {
        "PATH": str(VENV_BIN),
        "HOME": str(tmp_path),
        "AWS_SHARED_CREDENTIALS_FILE": str(empty),
        "AWS_CONFIG_FILE": str(empty),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
        **({"SYSTEMROOT": os.environ["SYSTEMROOT"]} if "SYSTEMROOT" in os.environ else {}),
    }


def run(tmp_path: Path, *args: str) -> tuple[int, list[str], subprocess.CompletedProcess]:
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_REPORT, *args],
        cwd=ROOT,
        env=without_node_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], report["loaded"], done


def one_stack_assembly(outdir: Path) -> Path:
    """The smallest cloud assembly `plan --assembly` reads: a manifest naming one stack artifact and its template
    (the `aws:cloudformation:stack` artifact of aws-cdk's cloud-assembly-schema)."""
    outdir.mkdir()
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    (outdir / "demo.template.json").write_text(json.dumps(template))
    manifest = {
        "version": "48.0.0",
        "artifacts": {
            "demo": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "demo.template.json"}}
        },
    }
    (outdir / "manifest.json").write_text(json.dumps(manifest))
    return outdir


def test_there_is_no_node_on_that_path():
    assert not (VENV_BIN / "node").exists()


def test_the_installed_command_validates_a_file_without_node(tmp_path):
    done = subprocess.run(
        [str(VENV_BIN / "fmcluster"), "validate", str(QUICKSTART)],
        cwd=ROOT,
        env=without_node_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{QUICKSTART}: valid: 1 compute group(s), 2 node(s)\n"
    assert done.stderr == ""  # no end-of-life banner of a Node that never started


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["validate", "examples/quickstart.yaml"], 0),
        (["validate", "examples/p5-capacity-block.yaml"], 0),
        (["--help"], 0),
        (["validate", "--live", "examples/quickstart.yaml"], 2),
        (["diagnose", "examples/quickstart.yaml"], 2),
        (["validate", "examples/missing.yaml"], 2),
    ],
)
def test_commands_that_synthesize_nothing_never_load_the_cdk(tmp_path, args, code):
    got, loaded, done = run(tmp_path, *args)
    assert (got, loaded) == (code, []), done.stderr


def test_plan_from_an_assembly_never_loads_the_cdk(tmp_path):
    assembly = one_stack_assembly(tmp_path / "cdk.out")
    got, loaded, done = run(tmp_path, "plan", "examples/quickstart.yaml", "--assembly", str(assembly))
    assert (got, loaded) == (0, []), done.stderr
    assert "without --concurrency (one stack at a time)" in done.stdout
