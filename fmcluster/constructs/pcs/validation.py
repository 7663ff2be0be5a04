"""PcsSlurmCluster's props checked before anything is built, with the cluster file's own rules and messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import aws_ec2 as ec2

from fmcluster.config.checks import (
    PCS_SIZES,
    api_name_problem,
    is_token,
    mixed_architectures_problem,
    node_image_problem,
    pcs_capacity_problem,
    pcs_deep_health_checks_problem,
    pcs_node_limit_problem,
    pcs_size_problem,
    repeated_group_name,
    repeated_names,
)
from fmcluster.config.models import ComputeGroup, Observability, Orchestrator, pcs_head_group, pcs_nodes
from fmcluster.constructs.lustre import LustreFileSystem, file_system_problems
from fmcluster.constructs.props import compute_group_models, node_settings_problems, prop_problems

DEFAULT_EXPECTED_NODES = 32
"""Nodes a cluster built without `compute_groups` is sized for (its node groups come from `add_node_group`)."""


def group_name_problem(name: str, *, queue: bool) -> str | None:
    """A node group (and, with `queue`, queue) name AWS PCS would refuse (botocore pcs shapes)."""
    for shape in ("ComputeNodeGroupName", "QueueName") if queue else ("ComputeNodeGroupName",):
        if problem := api_name_problem("pcs", shape, name):
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
    prometheus: str,
    grafana: str,
    observability_mirror: str | None,
    ami_id: str | None,
    image_refresh: str | None,
    slurm_version: str,
    expected_nodes: int | None,
    size: str | None,
) -> tuple[tuple[ComputeGroup, ...], Orchestrator, Observability, int]:
    """The compute groups and the orchestrator and observability settings as the cluster file's models, and the
    nodes the size is chosen for; or ValueError naming every problem, one line each."""
    problems: list[str] = []
    if problem := api_name_problem("pcs", "ClusterName", cluster_name):
        problems.append(f"cluster_name: {problem}")
    if not security_groups:
        problems.append("security_groups: needs at least one group (the EFA group)")
    given_size = size.lower() if isinstance(size, str) and not is_token(size) else None
    if given_size is not None and given_size not in PCS_SIZES:
        problems.append(f"size: must be SMALL, MEDIUM or LARGE; got {size!r}")
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
        observability_mirror=observability_mirror,
        nccl_parameter_prefix=nccl_parameter_prefix,
    )
    problems += file_system_problems(file_system)
    groups = _compute_groups(compute_groups, problems)
    by_name = {group.name: group for group in groups}
    for name in placement_groups:
        if name not in by_name:
            problems.append(
                f"placement_groups: {name!r} is not a compute group ({', '.join(sorted(by_name)) or 'none'})"
            )
        elif not by_name[name].placement_group:
            problems.append(
                f"placement_groups: {name!r} has placement_group false (capacity {by_name[name].capacity!r}: a "
                "capacity block is placed by EC2, a reservation serves only the group it was made in); leave it out"
            )
    if problems:
        raise ValueError("\n".join(f"PcsSlurmCluster: {problem}" for problem in problems))

    orchestrator = Orchestrator.model_validate({key: value for key, value in settings.items() if not is_token(value)})
    observability = Observability(prometheus=prometheus, grafana=grafana)
    nodes = expected_nodes
    if nodes is None:
        nodes = (
            pcs_nodes(orchestrator, observability, sum(group.count for group in groups))
            if groups
            else DEFAULT_EXPECTED_NODES
        )
    if problem := pcs_node_limit_problem(nodes):
        problems.append(f"{'expected_nodes' if expected_nodes is not None else 'compute_groups'}: {problem}")
    if problem := pcs_size_problem(given_size, nodes):
        problems.append(f"size: {problem}")
    head = pcs_head_group(orchestrator, observability)
    node_image_problems = [node_image_problem(group.instance_type) for group in groups] if ami_id is None else []
    problems += [f"ami_id: {problem}" for problem in dict.fromkeys(filter(None, node_image_problems))][:1]
    if ami_id is not None and not is_token(ami_id):
        types = [group.instance_type for group in groups] + ([head[2]] if head else [])
        if problem := mixed_architectures_problem(types):
            problems.append(f"ami_id: {problem}")
    if head is not None and (problem := group_name_problem(head[1], queue=False)):
        problems.append(f"login_instance_type: {problem}")
    if problems:
        raise ValueError("\n".join(f"PcsSlurmCluster: {problem}" for problem in problems))
    return groups, orchestrator, observability, nodes


def _compute_groups(
    given: Sequence[ComputeGroup | Mapping[str, object]], problems: list[str]
) -> tuple[ComputeGroup, ...]:
    """`compute_groups` as models, adding a line to `problems` for every one AWS PCS or the file's rules refuse."""
    groups, group_problems = compute_group_models(given)
    problems += group_problems
    for index, group in groups:
        where = f"compute_groups[{index}]"
        if problem := pcs_capacity_problem(group.capacity):
            problems.append(f"{where}.capacity: {problem}")
        if problem := pcs_deep_health_checks_problem(group.deep_health_checks):
            problems.append(f"{where}.deep_health_checks: {problem}")
        if problem := group_name_problem(group.name, queue=True):
            problems.append(f"{where}.name: {problem}")
    for index, name, first in repeated_names((index, group.name) for index, group in groups):
        problems.append(f"compute_groups[{index}].name: {repeated_group_name(name, f'compute_groups[{first}]')}")
    return tuple(group for _, group in groups)
