"""tools/synth_speed.py: the side-by-side synth timing (issue 15's "Synth speed"). What hyperfine writes is taken
from a real run of hyperfine 1.15.0 (Debian bookworm's), kept in fixtures/hyperfine-export.json; the synths
themselves are not run here (they take minutes, and their ratio depends on the machine)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import REPO

FIXTURE = REPO / "tests" / "unit" / "fixtures" / "hyperfine-export.json"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("synth_speed_tool", REPO / "tools" / "synth_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rounds_alternate_which_app_runs_first(tool):
    assert [tool.round_order(index, ("empty", "quickstart")) for index in range(3)] == [
        ("empty", "quickstart"),
        ("quickstart", "empty"),
        ("empty", "quickstart"),
    ]


def test_runs_of_every_round_are_pooled_by_command_name(tool):
    first = json.loads(FIXTURE.read_text())  # hyperfine --command-name empty ... --command-name quickstart ...
    second = {"results": list(reversed(first["results"]))}  # the next round, in the other order
    times = tool.collect([first, second])
    assert times == {"empty": [0.012508282280000001] * 2, "quickstart": [0.021949065280000003] * 2}


def test_the_report_gives_both_means_their_ratio_and_the_median_ratio_within_a_round(tool):
    # rounds: 8.0/4.0 = 2.00, 8.6/4.2 = 2.05, 8.3/4.1 = 2.02
    lines = tool.report({"empty": [4.0, 4.2, 4.1], "quickstart": [8.0, 8.6, 8.3]}, "quickstart")
    assert lines == [
        "empty         4.10 s +- 0.10 (3 runs)",
        "quickstart    8.30 s +- 0.30 (3 runs)",
        "ratio         2.02x (goal <= 2.0x)",
        "per round     median 2.02x, 2.00-2.05x",
    ]


def test_both_apps_synthesize_through_the_cli_into_their_own_directory(tool, tmp_path):
    assert tool.synth_command(tmp_path / "empty", config=None) == (
        f"cdk synth --quiet --no-notices --app 'python3 tools/empty_app.py' -o {tmp_path / 'empty'}"
    )
    assert tool.synth_command(tmp_path / "q", config="examples/quickstart.yaml") == (
        f"cdk synth --quiet --no-notices -c config=examples/quickstart.yaml -o {tmp_path / 'q'}"
    )


def test_without_hyperfine_it_says_so_and_exits_2(tool, monkeypatch, capsys):
    monkeypatch.setenv("PATH", "")
    assert tool.main([]) == 2
    assert capsys.readouterr().err == (
        "synth_speed: hyperfine is not on PATH; install it (Debian: apt-get install hyperfine)\n"
    )
