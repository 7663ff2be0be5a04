"""`fmcluster plan NEW --previous OLD`: what deploying NEW over OLD does to every resource, and a refusal (exit 2)
when it would replace or delete the file system, a bucket, a key or the cluster itself."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from fmcluster import update_plan
from fmcluster.config import ConfigError, load

EXIT_REFUSED = 2


def add_update_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--previous", metavar="OLD", help="the cluster file the stacks were last deployed from: list what NEW changes"
    )
    command.add_argument(
        "--allow-replacement",
        action="store_true",
        help="with --previous: allow replacing or deleting the file system, buckets, keys or the cluster",
    )


def cdk_context(directory: Path | None = None) -> dict:
    """The context (feature flags) of cdk.json in `directory` (default: here), so the plan compares what
    `cdk deploy` would build."""
    path = (directory or Path.cwd()) / "cdk.json"
    return json.loads(path.read_text()).get("context", {}) if path.exists() else {}


def plan_update(new_file: str, old_file: str, *, allow_replacement: bool = False) -> int:
    """Print the update plan from `old_file` to `new_file`; 0 when safe (or allowed), 2 when refused or invalid."""
    configs = {}
    for path in (old_file, new_file):
        try:
            configs[path] = load(path)
        except ConfigError as error:
            print("\n".join(error.lines()), file=sys.stderr)
            return EXIT_REFUSED
    context = cdk_context()
    with tempfile.TemporaryDirectory(prefix="fmcluster-plan-") as work:
        old = update_plan.synthesize(configs[old_file], Path(work) / "old", context)
        new = update_plan.synthesize(configs[new_file], Path(work) / "new", context)
    changes = update_plan.compare(old, new)
    print(f"Update plan: {new_file} over {old_file}")
    for line in update_plan.render(changes, list(dict.fromkeys([*old, *new]))):
        print(line)
    for reader in update_plan.stale_readers(changes, new):
        print(reader.line())
    refused = [change for change in changes if change.fails or (change.protected and not allow_replacement)]
    if refused:
        for change in refused:
            path, message = update_plan.refusal(change, old)
            print(f"{new_file}: {path}: {message}", file=sys.stderr)
        return EXIT_REFUSED
    return 0
