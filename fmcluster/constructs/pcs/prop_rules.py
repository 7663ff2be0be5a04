"""PcsSlurmCluster's props checked before anything is built, with the cluster file's own rules and messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import aws_ec2 as ec2

from fmcluster.config.models import ComputeGroup, Observability, Orchestrator
from fmcluster.config.orchestrators import pcs
from fmcluster.config.value_rules import api_name_problem
from fmcluster.constructs.lustre import LustreFileSystem, file_system_problems
from fmcluster.constructs.observability import GrafanaMode, PrometheusMode
from fmcluster.constructs.props import (
    compute_group_models,
    node_settings_problems,
    orchestrator_group_problems,
    prop_problems,
    repeated_group_problems,
)
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token

DEFAULT_EXPECTED_NODES = 32
"""Nodes a cluster built without `compute_groups` is sized for (its node groups come from `add_node_group`)."""


def group_name_problem(name: str, *, queue: bool) -> str | None:
    """A node group (and, with `queue`, queue) name AWS PCS would refuse (botocore pcs shapes)."""
    for shape in ("ComputeNodeGroupName", "QueueName") if queue else ("ComputeNodeGroupName",):
        if not is_token(name) and (problem := api_name_problem("pcs", shape, name)):
            return problem
    return None


def validated(
    *,
    cluster_name: str,
    security_groups: Sequence[ec2.ISecurityGroup],
    compute_groups: Sequence[ComputeGroup | Mapping[str, object]],
    placement_groups: Mapping[str, object],
    login_instance_type: str | None,
    file_system: LustreFileSystem | None,
    nccl_parameter_prefix: str | None,
    prometheus: PrometheusMode,
    grafana: GrafanaMode,
    ami_id: str | None,
    image_refresh: str | None,
    slurm_version: str,
    expected_nodes: int | None,
    size: str | None,
) -> tuple[tuple[ComputeGroup, ...], Orchestrator, Observability, int]:
    """The compute groups and the orchestrator and observability settings as the cluster file's models, and the
    nodes the size is chosen for; or `InvalidProps` naming every problem."""
    problems: list[Problem] = []
    if not is_token(cluster_name) and (problem := api_name_problem("pcs", "ClusterName", cluster_name)):
        problems.append(Problem("cluster_name", problem))
    if not security_groups:
        problems.append(Problem("security_groups", "needs at least one group (the EFA group)"))
    given_size = size.lower() if isinstance(size, str) and not is_token(size) else None
    if given_size is not None and given_size not in pcs.SIZES:
        problems.append(Problem("size", f"must be SMALL, MEDIUM or LARGE; got {size!r}"))
        given_size = None
    settings = {
        "type": "pcs",
        "login_instance_type": login_instance_type,
        "slurm_version": slurm_version,
        "ami_id": ami_id,
        "image_refresh": image_refresh,
    }
    problems += prop_problems(Orchestrator, **settings)
    problems += node_settings_problems(
        prometheus=prometheus,
        grafana=grafana,
        nccl_parameter_prefix=nccl_parameter_prefix,
    )
    problems += file_system_problems(file_system)
    groups = _compute_groups(compute_groups, problems, slurm_version if not is_token(slurm_version) else None)
    by_name = {group.name: group for group in groups}
    for name in placement_groups:
        if name not in by_name:
            problems.append(
                Problem("placement_groups", f"{name!r} is not a compute group ({', '.join(sorted(by_name)) or 'none'})")
            )
        elif by_name[name].existing_placement_group is not None:
            problems.append(
                Problem(
                    "placement_groups",
                    f"{name!r} names its own placement group {by_name[name].existing_placement_group!r}, used as it "
                    "is; leave it out",
                )
            )
        elif not by_name[name].placement_group:
            problems.append(
                Problem(
                    "placement_groups",
                    f"{name!r} has placement_group false (capacity {by_name[name].capacity!r}: a capacity block is "
                    "placed by EC2, a reservation serves only the group it was made in); leave it out",
                )
            )
    raise_if_any("PcsSlurmCluster", problems)

    orchestrator = Orchestrator.model_validate({key: value for key, value in settings.items() if not is_token(value)})
    observability = Observability(prometheus=prometheus, grafana=grafana)
    nodes = expected_nodes
    if nodes is None:
        nodes = (
            pcs.nodes(orchestrator, observability, sum(group.count for group in groups))
            if groups
            else DEFAULT_EXPECTED_NODES
        )
    if problem := pcs.node_limit_problem(nodes):
        problems.append(Problem("expected_nodes" if expected_nodes is not None else "compute_groups", problem))
    if problem := pcs.size_problem(given_size, nodes):
        problems.append(Problem("size", problem))
    head = pcs.head_group(orchestrator, observability)
    node_image_problems = [pcs.node_image_problem(group.instance_type) for group in groups] if ami_id is None else []
    problems += [Problem("ami_id", problem) for problem in dict.fromkeys(filter(None, node_image_problems))][:1]
    if ami_id is not None and not is_token(ami_id):
        types = [group.instance_type for group in groups] + ([head[2]] if head else [])
        if problem := pcs.mixed_architectures_problem(types):
            problems.append(Problem("ami_id", problem))
    if head is not None and (problem := group_name_problem(head[1], queue=False)):
        problems.append(Problem("login_instance_type", problem))
    raise_if_any("PcsSlurmCluster", problems)
    return groups, orchestrator, observability, nodes


def _compute_groups(
    given: Sequence[ComputeGroup | Mapping[str, object]], problems: list[Problem], slurm_version: str | None
) -> tuple[ComputeGroup, ...]:
    """`compute_groups` as models, adding to `problems` every problem AWS PCS or the file's rules find with them."""
    groups, group_problems = compute_group_models(given)
    problems += group_problems
    for index, group in groups:
        where = f"compute_groups[{index}]"
        problems += orchestrator_group_problems(pcs, where, group, slurm_version)
        if problem := group_name_problem(group.name, queue=True):
            problems.append(Problem(f"{where}.name", problem))
    problems += repeated_group_problems(groups)
    return tuple(group for _, group in groups)
