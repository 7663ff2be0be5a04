"""Rules that span sections of a cluster file (rules of one value: `value_rules`). Each yields Problems.

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
from fmcluster.config import orchestrators
from fmcluster.config.api_rules import service_problems
from fmcluster.config.models import (
    NO_FILE_SYSTEM,
    ClusterConfig,
    ComputeGroup,
    Image,
    Lustre,
    Network,
    Observability,
    Orchestrator,
    Repository,
)
from fmcluster.config.node_images import DEFAULT_NODE_IMAGES, cuda_driver_problem
from fmcluster.config.regions import REGIONS
from fmcluster.config.value_rules import (
    S3_URI_PATTERN,
    cluster_name_problem,
    grafana_without_source,
    repeated_group_name,
    repeated_names,
    training_plan_elsewhere,
)
from fmcluster.problems import Problem

SectionModel = TypeVar("SectionModel", bound=BaseModel)


@dataclass(frozen=True)
class Sections:
    """The parts of a cluster file the rules read; None where that part is itself invalid."""

    name: str | None
    region: str | None
    account: str | None
    secondary_availability_zone_id: object
    network: Network | None
    orchestrator: Orchestrator | None
    compute: tuple[ComputeGroup | None, ...]
    capacities: tuple[object, ...]
    """Each group's `capacity` as written, so a group with another bad key still gets the orchestrator check."""
    lustre: Lustre | None
    """The file system's settings; None where they are invalid or there is none (`no_file_system`)."""
    no_file_system: bool
    """`storage.lustre: none`."""
    repositories: tuple[Repository | None, ...]
    observability: Observability | None
    image: Image | None
    has_users: bool = False
    """The file lists `users` (valid or not: whether any is listed is what `orchestrator.accounting_enforce` needs)."""

    @classmethod
    def of(cls, config: ClusterConfig) -> Sections:
        return cls(
            name=config.name,
            region=config.region,
            account=config.account,
            secondary_availability_zone_id=config.secondary_availability_zone_id,
            network=config.network,
            orchestrator=config.orchestrator,
            compute=config.compute,
            capacities=tuple(group.capacity for group in config.compute),
            lustre=config.storage.lustre,
            no_file_system=config.storage.lustre is None,
            repositories=config.storage.repositories,
            observability=config.observability,
            image=config.image,
            has_users=bool(config.users),
        )

    @classmethod
    def of_data(cls, data: dict) -> Sections:
        """Each section of raw cluster-file data validated on its own."""
        account = data.get("account")
        groups = _list(data.get("compute"))
        storage: dict = data["storage"] if isinstance(data.get("storage"), dict) else {}
        lustre: dict = storage["lustre"] if isinstance(storage.get("lustre"), dict) else {}
        no_file_system = storage.get("lustre") == NO_FILE_SYSTEM
        return cls(
            name=data.get("name") if cluster_name_problem(data.get("name")) is None else None,
            region=data.get("region") if data.get("region") in REGIONS else None,
            account=account if isinstance(account, str) and account.isdigit() and len(account) == 12 else None,
            secondary_availability_zone_id=data.get("secondary_availability_zone_id"),
            network=_valid(Network, data.get("network") or {}),
            orchestrator=_valid(Orchestrator, data.get("orchestrator") or {}),
            compute=tuple(_valid(ComputeGroup, group) for group in groups),
            capacities=tuple(
                (group.get("capacity") or "on-demand") if isinstance(group, dict) else None for group in groups
            ),
            lustre=None if no_file_system else _valid(Lustre, lustre),
            no_file_system=no_file_system,
            repositories=tuple(_valid(Repository, item) for item in _list(lustre.get("repositories"))),
            observability=_valid(Observability, data.get("observability") or {}),
            image=_valid(Image, data.get("image") or {}),
            has_users=bool(data.get("users")),
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


def orchestrator_takes_groups(config: Sections) -> Iterator[Problem]:
    """Each group's capacity and deep health checks, by the orchestrator's own rules."""
    if config.orchestrator is None:
        return
    rules = orchestrators.of(config.orchestrator.type)
    for index, capacity in enumerate(config.capacities):
        if problem := rules.capacity_problem(capacity):
            yield Problem(f"compute[{index}].capacity", problem)
    for index, group in config.groups():
        if problem := rules.deep_health_checks_problem(group.deep_health_checks):
            yield Problem(f"compute[{index}].deep_health_checks", problem)
        for key, message in rules.group_problems(group, config.orchestrator.slurm_version):
            yield Problem(f"compute[{index}].{key}", message)


def orchestrator_takes_keys(config: Sections) -> Iterator[Problem]:
    """Keys the orchestrator does not take (HyperPod: root_volume_gib; AWS PCS: controller_instance_type)."""
    if config.orchestrator is None:
        return
    yield from orchestrators.of(config.orchestrator.type).key_problems(config.orchestrator, list(config.groups()))


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
    """The subnet fmcluster plans; a subnet of your own (`network.subnet_id`) is counted by `validate --live`."""
    if config.network is None or config.network.vpc_id is not None or None in config.compute:
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


def secondary_zone_needs_own_network(config: Sections) -> Iterator[Problem]:
    """A second AZ places a second subnet fmcluster creates, which it does not do in a VPC of yours."""
    if config.network is not None and config.network.vpc_id is not None and config.secondary_availability_zone_id:
        yield Problem(
            "secondary_availability_zone_id",
            "only without network.vpc_id: it places a second subnet (for the interface endpoints) in the VPC "
            "fmcluster creates; in a VPC of your own the endpoints are yours",
        )


def existing_file_system_needs_its_vpc(config: Sections) -> Iterator[Problem]:
    if config.lustre is None or not config.lustre.existing or config.network is None:
        return
    if config.network.vpc_id is None:
        yield Problem(
            "storage.lustre.file_system_id",
            "needs network.vpc_id and network.subnet_id: an existing file system lives in a VPC of its own, and the "
            "VPC fmcluster would create has no route to it",
        )


def lustre_efa_has_clients(config: Sections) -> Iterator[Problem]:
    if config.lustre is None or not config.lustre.efa or config.lustre.existing or None in config.compute:
        return  # an existing file system's efa says what it is (validate --live); non-EFA nodes mount it over TCP
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


def orchestrator_rules(config: Sections) -> Iterator[Problem]:
    """The orchestrator's own rules across sections (AWS PCS: its size, the image of its nodes)."""
    if config.orchestrator is None:
        return
    rules = orchestrators.of(config.orchestrator.type)
    groups = list(config.groups())
    yield from rules.file_problems(config.orchestrator, config.observability, groups, None not in config.compute)
    if config.orchestrator.accounting_enforce and (
        problem := rules.enforcement_problem(config.orchestrator, config.observability, config.has_users)
    ):
        yield Problem("orchestrator.accounting_enforce", problem)


def training_image_runs_on_the_node_driver(config: Sections) -> Iterator[Problem]:
    """The training image's CUDA against the NVIDIA driver of the default node image (config/node_images.py)."""
    if config.image is None or config.orchestrator is None or config.orchestrator.ami_id is not None:
        return
    if problem := cuda_driver_problem(config.image.cuda, DEFAULT_NODE_IMAGES[config.orchestrator.type]):
        yield Problem("image.cuda", problem)


def grafana_has_a_source(config: Sections) -> Iterator[Problem]:
    if config.observability is None:
        return
    if problem := grafana_without_source(config.observability.grafana, config.observability.prometheus):
        yield Problem("observability.grafana", problem)


def services_accept(config: Sections) -> Iterator[Problem]:
    """AWS's own models: names and instance types against botocore's shapes, services and types per region."""
    yield from service_problems(
        config.name,
        config.region,
        config.orchestrator,
        list(config.groups()),
        config.observability,
        file_system=not config.no_file_system,
    )


def _nested(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _s3_key(uri: str) -> str:
    match = S3_URI_PATTERN.match(uri)
    assert match is not None  # validated by the model
    return f"{match['bucket']}{match['prefix'] or ''}"


RULES: tuple[Rule, ...] = (
    orchestrator_takes_groups,
    orchestrator_takes_keys,
    training_plan_in_cluster_region,
    group_names_unique,
    reservation_holds_one_type,
    nodes_fit_compute_subnet,
    secondary_zone_needs_own_network,
    existing_file_system_needs_its_vpc,
    lustre_efa_has_clients,
    repositories_do_not_overlap,
    grafana_has_a_source,
    orchestrator_rules,
    training_image_runs_on_the_node_driver,
    services_accept,
)


def cross_section_problems(sections: Sections) -> list[Problem]:
    return [problem for rule in RULES for problem in rule(sections)]
