"""Rules that span sections of a cluster file. Each yields Problems; all of them run on every valid model."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fmcluster.addressing import plan_subnets
from fmcluster.catalog import CATALOG
from fmcluster.config.errors import Problem
from fmcluster.config.models import S3_URI_PATTERN, TRAINING_PLAN_ARN_PATTERN, ClusterConfig

Rule = Callable[[ClusterConfig], Iterator[Problem]]


def capacity_matches_orchestrator(config: ClusterConfig) -> Iterator[Problem]:
    orchestrator = config.orchestrator.type
    for index, group in enumerate(config.compute):
        if group.capacity == "training-plan" and orchestrator != "hyperpod-slurm":
            yield Problem(
                f"compute[{index}].capacity",
                "'training-plan' needs orchestrator.type: hyperpod-slurm (training plans reserve SageMaker "
                "capacity); with pcs use 'capacity-block' or 'odcr'",
            )
        if group.capacity in ("capacity-block", "odcr") and orchestrator != "pcs":
            yield Problem(
                f"compute[{index}].capacity",
                f"{group.capacity!r} needs orchestrator.type: pcs (EC2 reservations are consumed through launch "
                "templates); HyperPod takes reserved capacity as capacity: training-plan with training_plan_arn",
            )


def training_plan_in_cluster_region(config: ClusterConfig) -> Iterator[Problem]:
    for index, group in enumerate(config.compute):
        match = TRAINING_PLAN_ARN_PATTERN.match(group.training_plan_arn or "")
        if match and match["region"] != config.region:
            yield Problem(
                f"compute[{index}].training_plan_arn",
                f"the training plan is in {match['region']}, the cluster in {config.region}; "
                "a plan serves only its own region",
            )
        if match and config.account and match["account"] != config.account:
            yield Problem(
                f"compute[{index}].training_plan_arn",
                f"the training plan belongs to account {match['account']}, the cluster to {config.account}",
            )


def group_names_unique(config: ClusterConfig) -> Iterator[Problem]:
    first_index: dict[str, int] = {}
    for index, group in enumerate(config.compute):
        if group.name in first_index:
            yield Problem(
                f"compute[{index}].name",
                f"{group.name!r} is already the name of compute[{first_index[group.name]}]; group names must be unique",
            )
        first_index.setdefault(group.name, index)


def reservation_holds_one_type(config: ClusterConfig) -> Iterator[Problem]:
    seen: dict[str, tuple[int, str]] = {}
    for index, group in enumerate(config.compute):
        if group.reservation_id is None:
            continue
        earlier = seen.setdefault(group.reservation_id, (index, group.instance_type))
        if earlier[1] != group.instance_type:
            yield Problem(
                f"compute[{index}].reservation_id",
                f"{group.reservation_id} also serves compute[{earlier[0]}] ({earlier[1]}); a reservation holds one "
                f"instance type, so it cannot also serve {group.instance_type}",
            )


def nodes_fit_compute_subnet(config: ClusterConfig) -> Iterator[Problem]:
    plan = plan_subnets(config.network.vpc_cidr)
    if config.total_nodes > plan.node_capacity:
        yield Problem(
            "compute",
            f"{config.total_nodes} nodes do not fit the compute subnet {plan.compute} of network.vpc_cidr "
            f"{config.network.vpc_cidr}, which holds {plan.node_capacity}; use a larger block (a /16 holds "
            f"{plan_subnets('10.0.0.0/16').node_capacity}) or fewer nodes",
        )


def lustre_efa_has_clients(config: ClusterConfig) -> Iterator[Problem]:
    if not config.storage.lustre.efa:
        return
    if not any(group.efa and group.instance.lustre_efa_client for group in config.compute):
        clients = ", ".join(name for name, row in CATALOG.items() if row.lustre_efa_client)
        yield Problem(
            "storage.lustre.efa",
            "an EFA-enabled file system needs a compute group with efa: true on a type that can mount it over "
            f"EFA ({clients}); none has one, so set efa: false",
        )


def repositories_do_not_overlap(config: ClusterConfig) -> Iterator[Problem]:
    repositories = config.storage.lustre.repositories
    for index, repository in enumerate(repositories):
        for earlier_index, earlier in enumerate(repositories[:index]):
            where = f"storage.lustre.repositories[{index}].path"
            if repository.path == earlier.path:
                yield Problem(where, f"{repository.path!r} repeats repositories[{earlier_index}].path")
            elif _nested(repository.path, earlier.path):
                yield Problem(
                    where,
                    f"{repository.path!r} and repositories[{earlier_index}].path {earlier.path!r} nest; "
                    "one path may not lie inside another",
                )
            if (
                repository.s3_uri
                and earlier.s3_uri
                and _nested(_s3_key(repository.s3_uri), _s3_key(earlier.s3_uri))
            ):
                yield Problem(
                    f"storage.lustre.repositories[{index}].s3_uri",
                    f"{repository.s3_uri!r} overlaps repositories[{earlier_index}].s3_uri {earlier.s3_uri!r}; "
                    "FSx links each S3 prefix to one path only",
                )


def grafana_has_a_source(config: ClusterConfig) -> Iterator[Problem]:
    if config.observability.grafana != "none" and config.observability.prometheus == "none":
        yield Problem(
            "observability.grafana",
            f"{config.observability.grafana!r} needs prometheus: managed as its data source; "
            "set grafana: none or prometheus: managed",
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
    training_plan_in_cluster_region,
    group_names_unique,
    reservation_holds_one_type,
    nodes_fit_compute_subnet,
    lustre_efa_has_clients,
    repositories_do_not_overlap,
    grafana_has_a_source,
)


def cross_section_problems(config: ClusterConfig) -> list[Problem]:
    return [problem for rule in RULES for problem in rule(config)]
