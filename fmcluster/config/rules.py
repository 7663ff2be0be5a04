"""Rules that span sections of a cluster file. Each yields Problems.

Rules read `Sections`: each section validated on its own, None where that section is invalid, so a file with a
bad `name` still gets its capacity/orchestrator mismatch reported in the same run. A rule skips what it
cannot judge (a None section, or a None compute group).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from fmcluster.addressing import plan_subnets
from fmcluster.catalog import CATALOG
from fmcluster.config.checks import (
    S3_URI_PATTERN,
    cluster_name_problem,
    grafana_without_source,
    hyperpod_root_volume_problem,
    mixed_architectures_problem,
    pcs_capacity_problem,
    pcs_controller_type_problem,
    pcs_deep_health_checks_problem,
    pcs_node_limit_problem,
    pcs_size_problem,
    repeated_group_name,
    repeated_names,
    sample_image_problem,
    training_plan_elsewhere,
)
from fmcluster.config.errors import Problem
from fmcluster.config.models import (
    ClusterConfig,
    ComputeGroup,
    Lustre,
    Network,
    Observability,
    Orchestrator,
    Repository,
    pcs_head_group,
    pcs_nodes,
)
from fmcluster.config.regions import REGIONS
from fmcluster.config.service_rules import service_problems

SectionModel = TypeVar("SectionModel", bound=BaseModel)


@dataclass(frozen=True)
class Sections:
    """The parts of a cluster file the rules read; None where that part is itself invalid."""

    name: str | None
    region: str | None
    account: str | None
    network: Network | None
    orchestrator: Orchestrator | None
    compute: tuple[ComputeGroup | None, ...]
    capacities: tuple[object, ...]
    """Each group's `capacity` as written, so a group with another bad key still gets the orchestrator check."""
    lustre: Lustre | None
    repositories: tuple[Repository | None, ...]
    observability: Observability | None

    @classmethod
    def of(cls, config: ClusterConfig) -> Sections:
        return cls(
            name=config.name,
            region=config.region,
            account=config.account,
            network=config.network,
            orchestrator=config.orchestrator,
            compute=config.compute,
            capacities=tuple(group.capacity for group in config.compute),
            lustre=config.storage.lustre,
            repositories=config.storage.lustre.repositories,
            observability=config.observability,
        )

    @classmethod
    def of_data(cls, data: dict) -> Sections:
        """Each section of raw cluster-file data validated on its own."""
        account = data.get("account")
        groups = _list(data.get("compute"))
        storage = data.get("storage") if isinstance(data.get("storage"), dict) else {}
        lustre = storage.get("lustre") if isinstance(storage.get("lustre"), dict) else {}
        return cls(
            name=data.get("name") if cluster_name_problem(data.get("name")) is None else None,
            region=data.get("region") if data.get("region") in REGIONS else None,
            account=account if isinstance(account, str) and account.isdigit() and len(account) == 12 else None,
            network=_valid(Network, data.get("network") or {}),
            orchestrator=_valid(Orchestrator, data.get("orchestrator") or {}),
            compute=tuple(_valid(ComputeGroup, group) for group in groups),
            capacities=tuple(
                (group.get("capacity") or "on-demand") if isinstance(group, dict) else None for group in groups
            ),
            lustre=_valid(Lustre, lustre),
            repositories=tuple(_valid(Repository, item) for item in _list(lustre.get("repositories"))),
            observability=_valid(Observability, data.get("observability") or {}),
        )

    def groups(self) -> Iterator[tuple[int, ComputeGroup]]:
        """(index, group) of every valid compute group."""
        return ((index, group) for index, group in enumerate(self.compute) if group is not None)


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def _valid(model: type[SectionModel], data: object) -> SectionModel | None:
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


Rule = Callable[[Sections], Iterator[Problem]]


def capacity_matches_orchestrator(config: Sections) -> Iterator[Problem]:
    if config.orchestrator is None:
        return
    orchestrator = config.orchestrator.type
    for index, capacity in enumerate(config.capacities):
        if orchestrator == "pcs" and (problem := pcs_capacity_problem(capacity)):
            yield Problem(f"compute[{index}].capacity", problem)
        if capacity in ("capacity-block", "odcr") and orchestrator != "pcs":
            yield Problem(
                f"compute[{index}].capacity",
                f"{capacity!r} needs orchestrator.type: pcs (EC2 reservations are consumed through launch "
                "templates); HyperPod takes reserved capacity as capacity: training-plan with training_plan_arn",
            )


def deep_health_checks_need_hyperpod(config: Sections) -> Iterator[Problem]:
    if config.orchestrator is None or config.orchestrator.type == "hyperpod-slurm":
        return
    for index, group in config.groups():
        if problem := pcs_deep_health_checks_problem(group.deep_health_checks):
            yield Problem(f"compute[{index}].deep_health_checks", problem)


def root_volume_needs_pcs(config: Sections) -> Iterator[Problem]:
    if config.orchestrator is None or config.orchestrator.type != "hyperpod-slurm":
        return
    for index, group in config.groups():
        if problem := hyperpod_root_volume_problem(group.model_fields_set):
            yield Problem(f"compute[{index}].root_volume_gib", problem)


def controller_type_needs_hyperpod(config: Sections) -> Iterator[Problem]:
    if config.orchestrator is None or config.orchestrator.type != "pcs":
        return
    if problem := pcs_controller_type_problem(config.orchestrator.model_fields_set):
        yield Problem("orchestrator.controller_instance_type", problem)


def training_plan_in_cluster_region(config: Sections) -> Iterator[Problem]:
    for index, group in config.groups():
        for message in training_plan_elsewhere(group.training_plan_arn, config.region, config.account):
            yield Problem(f"compute[{index}].training_plan_arn", message)


def group_names_unique(config: Sections) -> Iterator[Problem]:
    for index, name, first in repeated_names((index, group.name) for index, group in config.groups()):
        yield Problem(f"compute[{index}].name", repeated_group_name(name, f"compute[{first}]"))


def reservation_holds_one_type(config: Sections) -> Iterator[Problem]:
    seen: dict[str, tuple[int, str]] = {}
    for index, group in config.groups():
        if group.reservation_id is None:
            continue
        earlier = seen.setdefault(group.reservation_id, (index, group.instance_type))
        if earlier[1] != group.instance_type:
            yield Problem(
                f"compute[{index}].reservation_id",
                f"{group.reservation_id} also serves compute[{earlier[0]}] ({earlier[1]}); a reservation holds one "
                f"instance type, so it cannot also serve {group.instance_type}",
            )


def nodes_fit_compute_subnet(config: Sections) -> Iterator[Problem]:
    if config.network is None or None in config.compute:
        return
    plan = plan_subnets(config.network.vpc_cidr)
    total_nodes = sum(group.count for _, group in config.groups())
    if total_nodes > plan.node_capacity:
        yield Problem(
            "compute",
            f"{total_nodes} nodes do not fit the compute subnet {plan.compute} of network.vpc_cidr "
            f"{config.network.vpc_cidr}, which holds {plan.node_capacity}; use a larger block (a /16 holds "
            f"{plan_subnets('10.0.0.0/16').node_capacity}) or fewer nodes",
        )


def lustre_efa_has_clients(config: Sections) -> Iterator[Problem]:
    if config.lustre is None or not config.lustre.efa or None in config.compute:
        return
    if not any(group.efa and group.instance.lustre_efa_client for _, group in config.groups()):
        clients = ", ".join(name for name, row in CATALOG.items() if row.lustre_efa_client)
        yield Problem(
            "storage.lustre.efa",
            "an EFA-enabled file system needs a compute group with efa: true on a type that can mount it over "
            f"EFA ({clients}); none has one, so set efa: false",
        )


def repositories_do_not_overlap(config: Sections) -> Iterator[Problem]:
    repositories = config.repositories
    for index, repository in enumerate(repositories):
        for earlier_index, earlier in enumerate(repositories[:index]):
            if repository is None or earlier is None:
                continue
            where = f"storage.lustre.repositories[{index}].path"
            if repository.path == earlier.path:
                yield Problem(where, f"{repository.path!r} repeats repositories[{earlier_index}].path")
            elif _nested(repository.path, earlier.path):
                yield Problem(
                    where,
                    f"{repository.path!r} and repositories[{earlier_index}].path {earlier.path!r} nest; "
                    "one path may not lie inside another",
                )
            if repository.s3_uri and earlier.s3_uri and _nested(_s3_key(repository.s3_uri), _s3_key(earlier.s3_uri)):
                yield Problem(
                    f"storage.lustre.repositories[{index}].s3_uri",
                    f"{repository.s3_uri!r} overlaps repositories[{earlier_index}].s3_uri {earlier.s3_uri!r}; "
                    "FSx links each S3 prefix to one path only",
                )


def pcs_cluster_size(config: Sections) -> Iterator[Problem]:
    if config.orchestrator is None or config.orchestrator.type != "pcs" or None in config.compute:
        return
    total = pcs_nodes(config.orchestrator, config.observability, sum(group.count for _, group in config.groups()))
    if problem := pcs_node_limit_problem(total):
        yield Problem("compute", problem)
    if problem := pcs_size_problem(config.orchestrator.size, total):
        yield Problem("orchestrator.size", problem)


def one_architecture_per_image(config: Sections) -> Iterator[Problem]:
    if config.orchestrator is None or config.orchestrator.ami_id is None or None in config.compute:
        return
    types = [group.instance_type for _, group in config.groups()]
    if head := pcs_head_group(config.orchestrator, config.observability):
        types.append(head[2])  # the login node, or the head node of its own (m5.xlarge)
    if problem := mixed_architectures_problem(types):
        yield Problem("orchestrator.ami_id", problem)


def neuron_nodes_bring_their_image(config: Sections) -> Iterator[Problem]:
    if config.orchestrator is None or config.orchestrator.type != "pcs" or config.orchestrator.ami_id is not None:
        return
    for instance_type in dict.fromkeys(group.instance_type for _, group in config.groups()):
        if problem := sample_image_problem(instance_type):
            yield Problem("orchestrator.ami_id", problem)
            return


def grafana_has_a_source(config: Sections) -> Iterator[Problem]:
    if config.observability is None:
        return
    if problem := grafana_without_source(config.observability.grafana, config.observability.prometheus):
        yield Problem("observability.grafana", problem)


def services_accept(config: Sections) -> Iterator[Problem]:
    """AWS's own models: names and instance types against botocore's shapes, services and types per region."""
    yield from service_problems(
        config.name, config.region, config.orchestrator, list(config.groups()), config.observability
    )


def _nested(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _s3_key(uri: str) -> str:
    match = S3_URI_PATTERN.match(uri)
    assert match is not None  # validated by the model
    return f"{match['bucket']}{match['prefix'] or ''}"


RULES: tuple[Rule, ...] = (
    capacity_matches_orchestrator,
    deep_health_checks_need_hyperpod,
    root_volume_needs_pcs,
    controller_type_needs_hyperpod,
    training_plan_in_cluster_region,
    group_names_unique,
    reservation_holds_one_type,
    nodes_fit_compute_subnet,
    lustre_efa_has_clients,
    repositories_do_not_overlap,
    grafana_has_a_source,
    pcs_cluster_size,
    one_architecture_per_image,
    neuron_nodes_bring_their_image,
    services_accept,
)


def cross_section_problems(sections: Sections) -> list[Problem]:
    return [problem for rule in RULES for problem in rule(sections)]
