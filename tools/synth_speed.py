"""Time a cluster file's synth against an empty CDK app's, side by side in one run, and print the ratio.

    make synth-speed                                  # the quickstart, 10 rounds
    python tools/synth_speed.py --rounds 6 --config examples/p5-capacity-block.yaml

Both go through the real CDK CLI offline, as `make synth` does (`cdk synth --quiet --no-notices`), from the repository
root, so the empty app (tools/empty_app.py) gets the same cdk.json flags and the same Python; each writes to its own
temporary output directory. The floor (starting Python, jsii's node kernel and the CLI) is the same for both, so the
ratio says what fmcluster itself costs. hyperfine times them: one warmup run of each, then rounds of one run each
whose order alternates (empty first, then the cluster first), so a load that drifts during the run weighs on both.
It prints both means, the ratio of the means, and the median of the ratios within a round. The 1-minute load average
before the run is printed first: other work on the machine slows both synths, by amounts that vary from run to run,
so measure when it is below 1 (during the run the synths themselves add about 1-2). Without hyperfine on PATH the
tool says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EMPTY = "empty"
"""hyperfine's name of the empty app's synth."""
GOAL = 2.0
"""Issue 15's target: the quickstart's synth at most this many times the empty app's."""


def synth_command(output: Path, *, config: str | None) -> str:
    """The shell command hyperfine times: the empty app without `config`, else the cluster file's app."""
    app = "--app 'python3 tools/empty_app.py'" if config is None else f"-c config={config}"
    return f"cdk synth --quiet --no-notices {app} -o {output}"


def round_order(index: int, names: tuple[str, str]) -> tuple[str, str]:
    """The order of the two commands in round `index`: as given in even rounds, reversed in odd ones."""
    return names if index % 2 == 0 else (names[1], names[0])


def collect(exports: Iterable[Mapping]) -> dict[str, list[float]]:
    """Every timed run's seconds by command name, from hyperfine `--export-json` documents."""
    times: dict[str, list[float]] = {}
    for export in exports:
        for result in export["results"]:
            times.setdefault(result["command"], []).extend(result["times"])
    return times


def report(times: Mapping[str, list[float]], cluster: str) -> list[str]:
    """Each command's mean (with its standard deviation), the ratio of the means (cluster over empty), and the ratio
    within each round, whose two runs met the same load: when other work comes and goes, its median is the steadier
    figure.

    >>> print(*report({"empty": [4.0, 4.2], "quickstart": [8.0, 8.6]}, "quickstart"), sep="\\n")
    empty         4.10 s +- 0.14 (2 runs)
    quickstart    8.30 s +- 0.42 (2 runs)
    ratio         2.02x (goal <= 2.0x)
    per round     median 2.02x, 2.00-2.05x
    """
    lines = []
    for name in (EMPTY, cluster):
        runs = times[name]
        spread = statistics.stdev(runs) if len(runs) > 1 else 0.0
        lines.append(f"{name:<13} {statistics.fmean(runs):.2f} s +- {spread:.2f} ({len(runs)} runs)")
    ratio = statistics.fmean(times[cluster]) / statistics.fmean(times[EMPTY])
    lines.append(f"{'ratio':<13} {ratio:.2f}x (goal <= {GOAL}x)")
    rounds = [mine / empty for empty, mine in zip(times[EMPTY], times[cluster], strict=True)]
    lines.append(f"{'per round':<13} median {statistics.median(rounds):.2f}x, {min(rounds):.2f}-{max(rounds):.2f}x")
    return lines


def hyperfine(commands: Mapping[str, str], order: tuple[str, str], export: Path, *, warmup: int) -> dict:
    arguments = ["hyperfine", "--style", "none", "--runs", "1", "--warmup", str(warmup), "--export-json", str(export)]
    for name in order:
        arguments += ["--command-name", name, commands[name]]
    # As `make synth` runs the CLI: no version check, no metadata lookup, and no telemetry sender left running
    # into the next timed run.
    quiet = {"CDK_DISABLE_VERSION_CHECK": "1", "AWS_EC2_METADATA_DISABLED": "true", "CDK_DISABLE_CLI_TELEMETRY": "1"}
    subprocess.run(arguments, cwd=REPO, check=True, env={**os.environ, **quiet})
    return json.loads(export.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="examples/quickstart.yaml", help="the cluster file (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=10, help="timed runs of each app (default: %(default)s)")
    args = parser.parse_args(argv)
    if shutil.which("hyperfine") is None:
        print("synth_speed: hyperfine is not on PATH; install it (Debian: apt-get install hyperfine)", file=sys.stderr)
        return 2
    cluster = Path(args.config).stem
    with tempfile.TemporaryDirectory(prefix="synth-speed-") as scratch:
        out = Path(scratch)
        commands = {
            EMPTY: synth_command(out / EMPTY, config=None),
            cluster: synth_command(out / cluster, config=args.config),
        }
        print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}")
        exports = [
            hyperfine(
                commands, round_order(index, (EMPTY, cluster)), out / f"round-{index}.json", warmup=int(index == 0)
            )
            for index in range(args.rounds)
        ]
    print(*report(collect(exports), cluster), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
