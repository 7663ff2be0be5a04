"""Values that must not drift once a cluster is deployed, kept where CDK keeps its own: the app's `cdk.context.json`.

CDK writes what its context lookups return into `cdk.context.json` so that every later synth builds the same template
("the CDK records your account's available AMIs in your project's cdk.context.json file, and uses the stored value
for future synthesis operations": CDK developer guide, "Context values and the AWS CDK"); the CDK CLI hands that file
to the app as context on every command. fmcluster records an AWS PCS cluster's size the same way: the size is
create-only (cfn-lint's schema of AWS::PCS::Cluster), so a size that changes replaces the cluster with every node
group, queue and running job, and a plain `cdk deploy` would do it with no `fmcluster plan` in between.

- The first synth of a PCS file through the app (`cdk synth|diff|deploy`, `python app.py`) records the size it builds
  under `pcs_size_key(config)`.
- Later synths build that size while the file's nodes fit it, also when the default would pick another size for the
  new node count; a file that asks for another size, or outgrows the recorded one, fails at synth (exit 2) with the
  way to migrate. `cdk context --reset KEY` forgets the record (for a cluster that was never deployed at that size).

Commit `cdk.context.json` with your cluster files, as CDK advises for its lookups (this repository's own .gitignore
lists it only because its tests synthesize the examples).

>>> pcs_size_key(load("examples/p5-capacity-block.yaml"))
'fmcluster:pcs-size:region=us-east-1:cluster=llm-pretrain'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from fmcluster.config import ClusterConfig, ConfigError, Problem, load, orchestrators  # noqa: F401  (load: the doctest)
from fmcluster.config.orchestrators.pcs import SIZES as PCS_SIZES
from fmcluster.config.orchestrators.pcs import nodes as pcs_nodes
from fmcluster.config.orchestrators.pcs import size_problem as pcs_size_problem

CONTEXT_FILE = "cdk.context.json"


def pcs_size_key(config: ClusterConfig) -> str:
    """The context key of `config`'s recorded PCS size: one per cluster name and region (the stacks' identity)."""
    return f"fmcluster:pcs-size:region={config.region}:cluster={config.name}"


def pinned(config: ClusterConfig, context: Mapping[str, object], source: str) -> ClusterConfig:
    """`config` with `orchestrator.size` set to the size recorded in `context` (PCS files with a record only).

    Raises:
        ConfigError: `source`: orchestrator.size: ... when the file asks for another size or outgrows the record.
    """
    if not orchestrators.of(config.orchestrator.type).RECORDS_SIZE:
        return config
    key = pcs_size_key(config)
    recorded = context.get(key)
    if recorded is None:
        return config
    size = str(recorded).lower()
    forget = f"`cdk context --reset {key}` forgets the record if the cluster was never deployed at that size"
    asked = config.orchestrator.size
    nodes = pcs_nodes(config.orchestrator, config.observability, config.total_nodes)
    if size not in PCS_SIZES:
        problem = f"{CONTEXT_FILE} records {key}: {recorded!r}, which is no AWS PCS size (small, medium, large)"
    elif asked is not None and asked != size:
        problem = (
            f"{asked!r} differs from {size!r}, the size {CONTEXT_FILE} records for this cluster ({key}); the size of a "
            "running cluster cannot change (it replaces the cluster with every node group and queue): keep "
            f"orchestrator.size: {size}, or deploy the file under a new name with the new size, move the work, then "
            "delete the old cluster"
        )
    elif too_small := pcs_size_problem(size, nodes):
        problem = f"this cluster was built with size {size} ({CONTEXT_FILE}, {key}): {too_small}"
    else:
        return config.model_copy(update={"orchestrator": config.orchestrator.model_copy(update={"size": size})})
    raise ConfigError(source, [Problem("orchestrator.size", f"{problem}; {forget}")])


def record(config: ClusterConfig, directory: Path) -> bool:
    """Write `config`'s PCS size into `directory`/cdk.context.json unless a size is recorded already; True if written.
    Other keys of the file (CDK's own lookups) are kept as they are."""
    if not orchestrators.of(config.orchestrator.type).RECORDS_SIZE:
        return False
    path = directory / CONTEXT_FILE
    context = json.loads(path.read_text()) if path.is_file() else {}
    key = pcs_size_key(config)
    if key in context:
        return False
    context[key] = config.pcs_size.upper()
    path.write_text(json.dumps(context, indent=2, sort_keys=True) + "\n")
    return True
