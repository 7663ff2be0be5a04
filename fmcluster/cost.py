"""What a cluster file costs to run, estimated from a price table: every billed part, per hour and per month.

The table ships with the package (`prices.yaml`, with its date and a source per figure; `tools/prices.py` refreshes
it from the AWS Price List API) or is read live (`fmcluster plan --live`). A month is 730 hours, the AWS Pricing
Calculator's convention. Capacity blocks and training plans are paid up front and shown as prepaid; usage-billed
parts (Managed Prometheus samples, NAT and endpoint data processing) are named, not estimated. Every figure is an
estimate: list prices before taxes, credits, Savings Plans and discounts.

>>> from fmcluster.config import load
>>> lines = estimate(load("examples/quickstart.yaml"), PriceTable.load())
>>> [line.part for line in lines][:2]
['compute gpu (2 x ml.p5.48xlarge, on-demand)', 'controller (ml.m5.4xlarge)']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources

import yaml

from fmcluster import deploy_time
from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.config.orchestrators import hyperpod as hyperpod_rules
from fmcluster.config.orchestrators import pcs
from fmcluster.endpoints import cluster_endpoint_keys

HOURS_PER_MONTH = 730
"""The AWS Pricing Calculator's hours in a month (8,760 / 12)."""
PREPAID = {
    "capacity-block": "prepaid: a capacity block's fee is charged when it is bought (EC2 Capacity Blocks pricing)",
    "training-plan": "prepaid: a training plan is paid up front when it is bought (SageMaker training plans)",
}
ODCR_NOTE = "an ODCR bills its reserved instances at the On-Demand rate whether they run or not"
SCALING_NOTE = "scales between min_count and count: at least its min_count nodes run, at most its count"
PCS_ACCOUNTING_NOTE = (
    "orchestrator.accounting: billed beside the cluster fee (PCS user guide, 'Slurm accounting in AWS PCS': "
    "enabling it incurs additional charges), per hour by cluster size (unconfirmed: the PCS pricing page was not read)"
)


@dataclass(frozen=True)
class Price:
    """One figure of the table: USD per `unit` (hour, GB-month, user-month, minute), where it came from."""

    usd: float
    unit: str
    source: str
    confirmed: bool


@dataclass(frozen=True)
class PriceTable:
    """Prices by region and key (`ec2:p5.48xlarge`, `fsx:lustre-persistent2-ssd-250`, ...), with the table's date."""

    date: str
    source: str
    prices: dict[str, dict[str, Price]] = field(default_factory=dict)

    @classmethod
    def load(cls, text: str | None = None) -> PriceTable:
        """The table shipped with the package, or the YAML `text` of one."""
        data = yaml.safe_load(
            text if text is not None else resources.files("fmcluster").joinpath("prices.yaml").read_text()
        )
        prices = {
            region: {key: Price(**entry) for key, entry in entries.items()}
            for region, entries in (data.get("prices") or {}).items()
        }
        return cls(date=str(data["date"]), source=data["source"], prices=prices)

    def get(self, region: str, key: str) -> Price | None:
        return self.prices.get(region, {}).get(key)


Lookup = Callable[[str, str], "Price | None"]
"""(region, key) -> Price or None: the table's `get`, or the Price List API's (`fmcluster.live.prices`)."""


@dataclass(frozen=True)
class Line:
    """One billed part: what and how many, its price key, how it is billed and what the estimate leaves out."""

    part: str
    key: str | None
    quantity: float
    """Units of the price's unit that run at once: instances for an hourly price, GB for a GB-month price. For a group
    that scales, the most that run (`count`)."""
    price: Price | None = None
    note: str = ""
    prepaid: bool = False
    recurring: bool = True
    """False for a one-off charge (an image build): shown, not added to the hourly total."""
    least: float | None = None
    """For a group that scales (`min_count` below `count`), the fewest that run (`min_count`); None: `quantity`."""

    @property
    def hourly(self) -> float | None:
        """Per hour with `quantity` running: for a group that scales, the most it costs."""
        return self._per_hour(self.quantity)

    @property
    def hourly_least(self) -> float | None:
        """Per hour with the fewest running (`least`): what a group that scales costs when it has scaled down."""
        return self._per_hour(self.quantity if self.least is None else self.least)

    @property
    def scales(self) -> bool:
        return self.least is not None and self.least != self.quantity

    def _per_hour(self, quantity: float) -> float | None:
        if self.price is None or self.prepaid or not self.recurring:
            return None
        per_hour = {"hour": 1.0, "GB-month": 1 / HOURS_PER_MONTH, "user-month": 1 / HOURS_PER_MONTH}
        factor = per_hour.get(self.price.unit)
        return None if factor is None else quantity * self.price.usd * factor

    @property
    def one_off(self) -> float | None:
        if self.price is None or self.recurring:
            return None
        return self.quantity * self.price.usd


def estimate(config: ClusterConfig, prices: PriceTable | Lookup) -> list[Line]:
    """Every billed part of `config`, priced by `prices` (a table or a (region, key) lookup)."""
    lookup = prices.get if isinstance(prices, PriceTable) else prices
    lines = [*_instances(config), *_storage(config), *_network(config), *_observability(config), _image_build()]
    return [
        line if line.key is None or line.price is not None else _priced(line, lookup(config.region, line.key))
        for line in lines
    ]


def _priced(line: Line, price: Price | None) -> Line:
    return replace(line, price=price)


def _instance_key(config: ClusterConfig, instance_type: str) -> str:
    """The price key of an instance of `instance_type` in `config`'s cluster: `ec2:p5.48xlarge` on PCS,
    `sagemaker:ml.p5.48xlarge` on HyperPod (the orchestrator's `PRICE_SERVICE` and `billed_instance_type`)."""
    rules = orchestrators.of(config.orchestrator.type)
    return f"{rules.PRICE_SERVICE}:{rules.billed_instance_type(instance_type)}"


def _instances(config: ClusterConfig) -> list[Line]:
    """The compute groups' instances, then the orchestrator's own billed parts (its `COST_LINES`)."""
    rules = orchestrators.of(config.orchestrator.type)
    lines = []
    for group in config.compute:
        shown = rules.billed_instance_type(group.instance_type)
        scales = group.scales  # PCS on-demand groups only (the model refuses the rest)
        nodes = f"{group.min_count}-{group.count}" if scales else str(group.count)
        part = f"compute {group.name} ({nodes} x {shown}, {group.capacity})"
        key = _instance_key(config, group.instance_type)
        if group.capacity in PREPAID:
            lines.append(Line(part, None, group.count, note=PREPAID[group.capacity], prepaid=True))
        else:
            note = ODCR_NOTE if group.capacity == "odcr" else SCALING_NOTE if scales else ""
            lines.append(Line(part, key, group.count, note=note, least=group.min_count if scales else None))
    return lines + orchestrators.resolve(rules.COST_LINES)(config)


def hyperpod_lines(config: ClusterConfig) -> list[Line]:
    """HyperPod's billed parts beside the compute groups: the controller, its volume, the login node."""
    orchestrator = config.orchestrator
    lines = [
        Line(
            f"controller (ml.{orchestrator.controller_instance_type})",
            _instance_key(config, orchestrator.controller_instance_type),
            1,
        ),
        Line(
            f"controller volume ({hyperpod_rules.CONTROLLER_VOLUME_GIB:,} GiB EBS)",
            None,
            hyperpod_rules.CONTROLLER_VOLUME_GIB,
            note="not estimated: HyperPod bills its instances' EBS volumes as SageMaker ML storage (unconfirmed), "
            "which the price table does not hold",
        ),
    ]
    if orchestrator.login_instance_type:
        lines.append(Line(f"login (ml.{orchestrator.login_instance_type})",
                          _instance_key(config, orchestrator.login_instance_type), 1))  # fmt: skip
    return lines


def pcs_lines(config: ClusterConfig) -> list[Line]:
    """AWS PCS's billed parts beside the compute groups: the head node, the cluster fee, managed accounting, the
    nodes' root volumes."""
    orchestrator = config.orchestrator
    lines = []
    head = pcs.head_group(orchestrator, config.observability)
    if head is not None:
        lines.append(Line(f"{head[1]} node ({head[2]})", _instance_key(config, head[2]), 1))
    lines.append(
        Line(
            f"AWS PCS cluster ({config.pcs_size})",
            f"pcs:cluster-{config.pcs_size}",
            1,
            note="PCS bills each cluster by its size per hour (AWS PCS pricing)",
        )
    )
    if orchestrator.accounting:
        lines.append(
            Line(
                f"AWS PCS managed accounting ({config.pcs_size})",
                f"pcs:accounting-{config.pcs_size}",
                1,
                note=PCS_ACCOUNTING_NOTE,
            )
        )
    # the head (or login) node's volume, and each compute node's (a node's goes with it: the launch templates set
    # DeleteOnTermination, constructs/efa.py)
    head_volume = pcs.LOGIN_ROOT_VOLUME_GIB if head is not None else 0
    volumes = head_volume + sum(group.count * group.root_volume_gib for group in config.compute)
    fewest = head_volume + sum(group.min_count * group.root_volume_gib for group in config.compute)
    lines.append(
        Line(
            f"root volumes (gp3, {volumes:,} GiB)",
            "ebs:gp3",
            volumes,
            note="GiB billed as GB (estimate)" + ("; with the nodes of groups that scale" if fewest < volumes else ""),
            least=fewest if fewest < volumes else None,
        )
    )
    return lines


def _storage(config: ClusterConfig) -> list[Line]:
    lustre = config.storage.lustre
    if lustre is None or lustre.existing:
        return []  # no file system, or an existing one: its owner's bill
    note = "the file system's SSD storage and its throughput tier, billed together per GB-month"
    if lustre.metadata_iops is not None:
        note += f"; {lustre.metadata_iops:,} provisioned metadata IOPS are billed apart and not in the table"
    return [
        Line(
            f"FSx for Lustre ({lustre.capacity_gib:,} GiB, {lustre.throughput_per_tib} MB/s/TiB)",
            f"fsx:lustre-persistent2-ssd-{lustre.throughput_per_tib}",
            lustre.capacity_gib,
            note=note,
        )
    ]


def _network(config: ClusterConfig) -> list[Line]:
    if config.network.vpc_id is not None:
        return []  # a VPC of your own: its NAT gateways and endpoints are its owner's bill
    if config.network.egress == "nat":
        return [Line("NAT gateway", "vpc:nat-gateway", 1, note="plus data processing per GB, not estimated")]
    count = len(cluster_endpoint_keys(config))
    zones = 2 if config.secondary_availability_zone_id else 1
    return [
        Line(
            f"interface endpoints ({count} x {zones} AZ)",
            "vpc:interface-endpoint",
            count * zones,
            note="plus data processing per GB, not estimated; the S3 gateway endpoint is free",
        )
    ]


def _observability(config: ClusterConfig) -> list[Line]:
    lines = []
    if config.observability.prometheus == "managed":
        lines.append(
            Line(
                "Amazon Managed Prometheus",
                None,
                0,
                note="usage-based (samples ingested, stored, queried): not estimated",
            )
        )
    if config.observability.grafana == "managed":
        lines.append(Line("Amazon Managed Grafana (1 editor)", "grafana:editor", 1, note="per active user per month"))
    return lines


def _image_build() -> Line:
    minutes = round(deploy_time.Weights.load().types["Custom::TrainingImage"])
    return Line(f"training image build (~{minutes} min on X_LARGE)", "codebuild:x-large", minutes, recurring=False,
                note="per build: on deploy and when the image's versions change")  # fmt: skip


@dataclass(frozen=True)
class Total:
    hourly: float
    """Per hour with every group that scales at its count: the most the priced parts cost."""
    missing: list[str]
    unconfirmed: bool
    hourly_least: float | None = None
    """Per hour with every group that scales at its min_count; None: the same as `hourly`."""

    @property
    def monthly(self) -> float:
        return self.hourly * HOURS_PER_MONTH

    @property
    def least(self) -> float:
        """The fewest dollars per hour: `hourly_least`, or `hourly` when nothing scales."""
        return self.hourly if self.hourly_least is None else self.hourly_least

    @property
    def scales(self) -> bool:
        return self.least != self.hourly


def total(lines: list[Line]) -> Total:
    """The recurring, priced parts per hour, at most and at least; the parts that should be billed but have no
    price."""
    priced = [line for line in lines if line.hourly is not None]
    missing = [line.part for line in lines if line.key is not None and line.price is None]
    hourly = sum(line.hourly or 0.0 for line in priced)
    least = sum(line.hourly_least or 0.0 for line in priced)
    return Total(
        hourly=hourly,
        missing=missing,
        unconfirmed=any(not line.price.confirmed for line in priced if line.price is not None),
        hourly_least=least if any(line.scales for line in priced) else None,
    )
