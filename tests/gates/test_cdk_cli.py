"""The app as users run it: the real CDK CLI, offline, with no AWS credentials."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.real_tools

CDK = REPO / "node_modules" / ".bin" / "cdk"


def offline_env() -> dict[str, str]:
    """The environment without any AWS credential or profile, with the pinned Node first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        PATH=f"{REPO / 'node_modules' / '.bin'}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}{env['PATH']}",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        CDK_DISABLE_VERSION_CHECK="1",
        JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1",
    )
    return env


def test_cdk_synth_of_the_quickstart_needs_no_credentials(tmp_path):
    assert CDK.exists(), "the pinned CDK CLI is missing: run `make setup`"
    result = subprocess.run(
        [str(CDK), "synth", "--quiet", "--no-notices", "-o", str(tmp_path), "-c", "config=examples/quickstart.yaml"],
        cwd=REPO,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "feature flags" not in result.stderr  # cdk.json carries the recommended flags
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert "quickstart-network" in manifest["artifacts"]
    assert not (REPO / "cdk.context.json").exists()  # no context lookups were made


def test_app_with_a_bad_file_exits_2_with_one_line_per_problem_and_no_traceback(tmp_path):
    bad = tmp_path / "cluster.yaml"
    bad.write_text("name: X\nregion: us-east-1\navailability_zone_id: use1-az6\ncompute: []\n")
    env = offline_env() | {"CDK_CONTEXT_JSON": json.dumps({"config": str(bad)}), "CDK_OUTDIR": str(tmp_path / "out")}
    result = subprocess.run([sys.executable, "app.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{bad}: name: must be 2-24 characters of lowercase letters, digits and '-', starting with a letter and "
        "ending with a letter or digit; got 'X'",
        f"{bad}: compute: must have at least 1 entry; got 0",
    ]
    assert list((tmp_path / "out").glob("*")) == []  # nothing half-written (the CLI makes the folder itself)
