"""The orchestrator seam: what differs between the Slurm services fmcluster builds on, one module per orchestrator.

`of(type)` is the one place an orchestrator is chosen from the cluster file's `orchestrator.type`. The file's rules
(`config.file_rules`), the names and types the file sends to AWS (`config.api_rules`) and each cluster construct's
props checks (`constructs/pcs`, `constructs/hyperpod`) call the same functions of its module, so a rule is written
once and the cluster file and the construct give the same words. A third orchestrator (HyperPod on EKS is next) is
a new module here with the same functions, and one entry in `ORCHESTRATORS`:

- `CLUSTER_RESOURCE`: its CloudFormation cluster type, which the region must offer;
- `capacity_problem(capacity)`: a compute group's `capacity` it cannot consume;
- `deep_health_checks_problem(checks)`: on-start deep health checks it cannot run;
- `group_problems(group, slurm_version)`: (key, message) for a group's scaling or placement it cannot do;
- `api_values(name, orchestrator, groups, observability)`: every name the cluster stack sends to its API;
- `instance_types(orchestrator, groups, observability)`: every instance type the cluster stack asks for;
- `instance_type_problem(instance_type, region)`: a type it does not run (in the region, when known);
- `file_problems(orchestrator, observability, groups, complete)`: its rules across sections of the file;
- `key_problems(orchestrator, groups)`: keys of the file it does not take;
- `setting_problem(key, value, earlier)` and `DEFAULT_SLURM_VERSION`: what it refuses of an `orchestrator` key's
  value (the `Orchestrator` model calls it once per key, before the key's shared form is checked), and the Slurm
  version a file that names none gets;
- `head_instance_types(orchestrator, observability)`: the EC2 types of its head nodes (controller, login);
- `CLUSTER_STACK` (with `CLUSTER_STACK_DESCRIPTION`), `DIAGNOSE_CHECKS`, `INSTANCE_QUOTA_CHECKS`,
  `NODE_IMAGE_DRIFT_CHECKS`: its cluster stack class, its `diagnose` checks and `validate --live`'s checks of its
  instance quotas and of its nodes' default image, as `module:name` references that `resolve` imports only where
  aws_cdk or boto3 are loaded;
- `ENDPOINTS`, `NETWORK_PLACEMENT_GROUPS`: what the network stack adds for it (its interface endpoints with
  `egress: none`, its placement groups);
- `DEDICATED_TENANCY`: what `validate --live` says of a VPC with dedicated instance tenancy;
- `RUNS_DEEP_HEALTH_CHECKS`, `UNOFFERED_TYPE`: what `plan` shows and what `validate --live` says of a type EC2 does
  not offer in the zone;
- `NO_HEALTH_CHECKS`: why `fmcluster healthcheck` has nothing to start (None where the service has checks).
- `FAIR_SHARE_WEIGHT`, `ENFORCEMENT` (and `enforcement_note(orchestrator)`, its text for the file's
  `orchestrator.accounting_enforce`), `associations_problem(orchestrator, observability)`: why the users' equal shares
  may not order jobs there, what becomes of jobs outside an association, and why no node makes their Slurm
  associations (None where one does), for `advice.accounting_notes`;
- `SESSION_NODE` (a `module:name` reference) and `placeholder_target(group, node)`: the node `connect` and `info`
  go to, and the form of its Session Manager target;
- `RECORDS_SIZE`: whether `cdk.context.json` records its create-only cluster size (`fmcluster.recorded_context`);
- `CLUSTER_STATUS_EVENTS`: whether the observability construct routes its cluster's EventBridge status changes.
- `PRICE_SERVICE`, `billed_instance_type(instance_type)`, `COST_LINES` (a `module:name` reference): the price
  table's service and name of its instances, and `fmcluster.cost`'s lines of what it bills beside the compute groups.

tests/unit/test_orchestrator_seam.py checks that every registered module has all of them.

Shared rules that do not depend on the orchestrator stay in `config.value_rules` (one value) and
`config.file_rules` (across sections).

>>> of("pcs").CLUSTER_RESOURCE, of("hyperpod-slurm").CLUSTER_RESOURCE
('AWS::PCS::Cluster', 'AWS::SageMaker::Cluster')
"""

from __future__ import annotations

from pkgutil import resolve_name
from types import ModuleType
from typing import Any

from fmcluster.config.orchestrators import hyperpod, pcs

ORCHESTRATORS: dict[str, ModuleType] = {"hyperpod-slurm": hyperpod, "pcs": pcs}
"""`orchestrator.type` -> the module of its rules."""


def of(orchestrator_type: str) -> ModuleType:
    """The rules of `orchestrator_type` ('hyperpod-slurm', 'pcs')."""
    return ORCHESTRATORS[orchestrator_type]


def resolve(reference: str) -> Any:
    """The object a `module:name` reference names (`CLUSTER_STACK`, `DIAGNOSE_CHECKS`), imported now."""
    return resolve_name(reference)
