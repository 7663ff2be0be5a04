"""Instance facts fmcluster builds on, and the EFA network-interface layout derived from them.

The catalog holds the accelerated types fmcluster knows the EFA layout, GPUs, NVMe and bandwidth of. Any other type
EC2 offers (whether it does is `fmcluster.config.value_rules.unknown_instance_type`, from botocore's EC2 model) is a
general-purpose type (`general_purpose`): no accelerators, no EFA (its EFA layout is not known here, so none is wired),
one network interface; its bandwidth and local disks are not known, and nothing here pretends they are.

Every row names its source. Figures marked "(unconfirmed)" in a row's source come from a single source and
are used as given; the node scripts detect NVMe disks and EFA devices at run time, so an error there costs a
misleading `fmcluster plan`, never a broken node.

The layout follows AWS's current guidance (EC2 user guide, "Maximize network bandwidth on Amazon EC2
instances with multiple network cards"): network card 0 / device 0 is the one ENA interface (`interface`);
where card 0 carries EFA an `efa-only` interface sits at card 0 / device 1; every other EFA card gets one
`efa-only` interface at device 0. `efa-only` interfaces take no IP address, so a node uses one IP.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

InterfaceKind = Literal["interface", "efa-only"]

EC2_EFA_DOC = "EC2 user guide, EFA-enabled instance types; DescribeInstanceTypes network cards"
G5_EFA = "; EFA from g5.8xlarge up, none below (eksctl's table generated from DescribeInstanceTypes, EFASupported)"


@dataclass(frozen=True)
class InstanceType:
    """One EC2 instance type as fmcluster needs to know it."""

    name: str
    accelerator: str
    accelerator_count: int
    network_cards: int
    efa_cards: tuple[int, ...]
    """Indices of the network cards that carry EFA (their count is MaximumEfaInterfaces)."""
    network_gbps: int
    nvme_disks: int
    nvme_disk_gb: int
    lustre_efa_client: bool
    """Can mount an EFA-enabled FSx for Lustre file system over EFA (Nitro v4+ with EFA, not trn2)."""
    source: str
    architecture: Literal["x86_64", "arm64"] = "x86_64"
    """CPU architecture: picks the node image (GB200's Grace CPUs are arm64)."""
    cataloged: bool = True
    """False for a general-purpose row (`general_purpose`): network_gbps and the NVMe figures are then unknown (0)."""

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def max_efa_interfaces(self) -> int:
        return len(self.efa_cards)

    @property
    def supports_efa(self) -> bool:
        return bool(self.efa_cards)

    @property
    def efa_gbps(self) -> int:
        """Bandwidth the EFA devices reach together (0 without EFA)."""
        return self.network_gbps if self.supports_efa else 0

    @property
    def nvme_total_gb(self) -> int:
        return self.nvme_disks * self.nvme_disk_gb

    @property
    def is_accelerated(self) -> bool:
        return self.accelerator_count > 0


@dataclass(frozen=True)
class NetworkInterface:
    """One launch-template network interface: where it sits and what it is."""

    network_card_index: int
    device_index: int
    interface_type: InterfaceKind


def _all(cards: int) -> tuple[int, ...]:
    return tuple(range(cards))


_ROWS = (
    InstanceType("p4d.24xlarge", "NVIDIA A100 40GB", 8, 4, _all(4), 400, 8, 1000, False, EC2_EFA_DOC),
    InstanceType("p4de.24xlarge", "NVIDIA A100 80GB", 8, 4, _all(4), 400, 8, 1000, False, EC2_EFA_DOC),
    InstanceType("p5.48xlarge", "NVIDIA H100 80GB", 8, 32, _all(32), 3200, 8, 3840, True, EC2_EFA_DOC),
    InstanceType("p5e.48xlarge", "NVIDIA H200 141GB", 8, 32, _all(32), 3200, 8, 3840, True, EC2_EFA_DOC),
    InstanceType("p5en.48xlarge", "NVIDIA H200 141GB", 8, 16, _all(16), 3200, 8, 3840, True, EC2_EFA_DOC),
    InstanceType("p6-b200.48xlarge", "NVIDIA B200", 8, 8, _all(8), 3200, 8, 3840, True, EC2_EFA_DOC),
    InstanceType(
        "p6-b300.48xlarge",
        "NVIDIA B300",
        8,
        17,
        tuple(range(1, 17)),
        6400,
        8,
        3840,
        True,
        EC2_EFA_DOC + "; card 0 is ENA only (aws-parallelcluster issue 7143)",
    ),
    InstanceType(
        "p6e-gb200.36xlarge",
        "NVIDIA B200 (GB200)",
        4,
        17,
        tuple(range(1, 16, 2)),
        1600,
        0,
        0,
        True,
        "AWS P6e-GB200 launch post: card 0 ENA only, odd cards 1-15 EFA-only, each odd/even pair one "
        "physical NIC; Grace CPUs (arm64); EFA count and local NVMe (unconfirmed)",
        architecture="arm64",
    ),
    InstanceType(
        "trn1.32xlarge",
        "AWS Trainium",
        16,
        8,
        _all(8),
        800,
        4,
        1900,
        True,
        EC2_EFA_DOC + "; NVMe 4x1900 GB (unconfirmed)",
    ),
    InstanceType(
        "trn2.48xlarge",
        "AWS Trainium2",
        16,
        16,
        _all(16),
        3200,
        4,
        1920,
        False,
        EC2_EFA_DOC + "; NVMe 4x1920 GB (unconfirmed); FSx EFA clients exclude trn2",
    ),
    InstanceType("g5.48xlarge", "NVIDIA A10G 24GB", 8, 1, _all(1), 100, 2, 3800, False, EC2_EFA_DOC),
    InstanceType("g5.12xlarge", "NVIDIA A10G 24GB", 4, 1, _all(1), 40, 1, 3800, False, EC2_EFA_DOC + G5_EFA),
    InstanceType(
        "g5.4xlarge",
        "NVIDIA A10G 24GB",
        1,
        1,
        (),
        25,
        1,
        600,
        False,
        "EC2 accelerated-computing instance specifications (up to 25 Gbps, 1x600 GB NVMe)" + G5_EFA,
    ),
)

CATALOG: Mapping[str, InstanceType] = MappingProxyType({row.name: row for row in _ROWS})
"""Every instance type a compute group may use, by EC2 name."""


GENERAL_PURPOSE_SOURCE = (
    "not in fmcluster's catalog: run as a general-purpose type (no accelerators, no EFA, one network interface; "
    "bandwidth and local NVMe not known)"
)


def general_purpose(name: str) -> InstanceType:
    """The row of a type outside the catalog: nothing accelerated, no EFA, one network card, figures unknown.

    >>> row = general_purpose("c6i.4xlarge")
    >>> row.is_accelerated, row.supports_efa, row.network_cards, row.architecture
    (False, False, 1, 'x86_64')
    """
    return InstanceType(
        name=name,
        accelerator="",
        accelerator_count=0,
        network_cards=1,
        efa_cards=(),
        network_gbps=0,
        nvme_disks=0,
        nvme_disk_gb=0,
        lustre_efa_client=False,
        source=GENERAL_PURPOSE_SOURCE,
        architecture=instance_architecture(name),
        cataloged=False,
    )


def lookup(name: str) -> InstanceType:
    """The catalog row for an EC2 instance type name, or its general-purpose row (`general_purpose`).

    Whether EC2 offers `name` at all is the cluster file's rule (`config.value_rules.unknown_instance_type`).

    >>> lookup("p5.48xlarge").max_efa_interfaces, lookup("m5.2xlarge").cataloged
    (32, False)
    """
    return CATALOG.get(name) or general_purpose(name)


def instance_architecture(name: str) -> Literal["x86_64", "arm64"]:
    """CPU architecture of any EC2 type: the catalog's, else Graviton's 'g' after the generation (m7g, c7gn, im4gn),
    or the A1 family, the first Graviton instances, which name their processor by the family letter instead (EC2
    instance types guide, "Amazon EC2 instance type naming conventions": processor option g = AWS Graviton; "General
    purpose instances": A1, AWS Graviton). The package's EC2 data (service_data.json.gz) holds type names only, no
    ProcessorInfo, so the name is all there is offline.

    >>> instance_architecture("a1.xlarge"), instance_architecture("c7gn.16xlarge"), instance_architecture("m5.large")
    ('arm64', 'arm64', 'x86_64')
    """
    if name in CATALOG:
        return CATALOG[name].architecture
    return "arm64" if re.match(r"^([a-z]+\d+g[a-z]*|a1)\.", name) else "x86_64"


def network_interfaces(instance: InstanceType, *, efa: bool = True) -> tuple[NetworkInterface, ...]:
    """The launch-template network interfaces that wire up every EFA device of `instance`.

    >>> [(i.network_card_index, i.device_index, i.interface_type)
    ...  for i in network_interfaces(lookup("p6-b200.48xlarge"))][:3]
    [(0, 0, 'interface'), (0, 1, 'efa-only'), (1, 0, 'efa-only')]
    """
    layout = [NetworkInterface(0, 0, "interface")]
    if not efa:
        return tuple(layout)
    for card in instance.efa_cards:
        layout.append(NetworkInterface(card, 1 if card == 0 else 0, "efa-only"))
    return tuple(layout)
