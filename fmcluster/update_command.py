"""`fmcluster plan NEW --previous OLD`: what deploying NEW over OLD does to every resource, and a refusal (exit 2)
when CloudFormation or the service would fail it, when it would strand a running cluster (a replaced resource that
other stacks read), or when it would replace, delete or stop retaining data or the cluster (docs/updates.md)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from fmcluster import recorded_context, update_plan
from fmcluster.config import ClusterConfig, ConfigError, load

EXIT_REFUSED = 2


def add_update_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--previous", metavar="OLD", help="the cluster file the stacks were last deployed from: list what NEW changes"
    )
    command.add_argument(
        "--allow-replacement",
        action="store_true",
        help="with --previous: allow replacing, deleting or no longer retaining data or the cluster (not what AWS "
        "would refuse, nor a replaced resource other stacks read)",
    )


def cdk_context(directory: Path | None = None) -> dict:
    """The context of `directory` (default: here) as the CDK CLI gives it to the app: cdk.json's (feature flags) and
    cdk.context.json's (recorded values, `recorded_context`), so the plan compares what `cdk deploy` would build."""
    folder = directory or Path.cwd()
    settings = folder / "cdk.json"
    context = json.loads(settings.read_text()).get("context", {}) if settings.exists() else {}
    recorded = folder / recorded_context.CONTEXT_FILE
    return {**context, **(json.loads(recorded.read_text()) if recorded.is_file() else {})}


def plan_update(new_file: str, old_file: str, *, allow_replacement: bool = False) -> int:
    """Print the update plan from `old_file` to `new_file`; 0 when safe (or allowed), 2 when refused or invalid."""
    configs = {}
    context = cdk_context()
    for path in (old_file, new_file):
        try:
            configs[path] = recorded_context.pinned(load(path), context, path)
        except ConfigError as error:
            print("\n".join(error.lines()), file=sys.stderr)
            return EXIT_REFUSED
    old_config, new_config = configs[old_file], configs[new_file]
    beside = _another_cluster(old_config, new_config)
    with tempfile.TemporaryDirectory(prefix="fmcluster-plan-") as work:
        old = {} if beside else update_plan.synthesize(old_config, Path(work) / "old", context)
        new = update_plan.synthesize(new_config, Path(work) / "new", context)
    print(f"Update plan: {new_file} over {old_file}")
    if beside:
        print(f"{new_file} builds {beside}: `cdk deploy` creates its stacks ({', '.join(new)})")
        print("and changes nothing of the old cluster, whose stacks stay as they are;")
        print(f"`cdk destroy --all -c config={old_file}` deletes them once the work has moved")
        return 0
    account = new_config.account or old_config.account
    changes = update_plan.compare(old, new, {"AWS::AccountId": account} if account else None)
    for line in update_plan.render(changes, list(dict.fromkeys([*old, *new])), update_plan.left_alone(old, new)):
        print(line)
    for reader in update_plan.stale_readers(changes, new):
        print(reader.line())
    refused = update_plan.refusals(changes, old, new, allow_replacement=allow_replacement)
    for problem in refused:
        print(problem.render(new_file), file=sys.stderr)
    return EXIT_REFUSED if refused else 0


def _another_cluster(old: ClusterConfig, new: ClusterConfig) -> str:
    """What `new` builds when it is not an update of `old`: another name, region or account is another set of stacks
    (every stack is named after the cluster, and lives in its environment), or ''."""
    if old.name != new.name:
        return f"a new cluster {new.name!r} beside {old.name!r}"
    if old.region != new.region:
        return f"a second cluster {new.name!r} in {new.region}, beside the one in {old.region}"
    if old.account and new.account and old.account != new.account:
        return f"a second cluster {new.name!r} in account {new.account}, beside the one in {old.account}"
    return ""
