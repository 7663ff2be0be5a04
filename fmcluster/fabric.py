"""What a node's fabric self-check (node/fabric-check.sh) expects of an instance type: EFA devices, GPUs, NVLink.

The figures come from the instance catalog (`fmcluster.catalog`): as many EFA devices as the launch template wires
(one per EFA card, `max_efa_interfaces`; none when the group turns EFA off) and as many GPUs as the type carries
(NVIDIA types only: Trainium has no nvidia-smi). The NVLink floor is the one-node all_reduce bus bandwidth below which
the node is drained; see `NVLINK_FLOORS_GBPS` for where it comes from.

Example::

    >>> fabric_expectation("p5.48xlarge", efa=True).arguments()
    ['--efa', '32', '--gpus', '8', '--nvlink-floor', '250']
    >>> fabric_expectation("m5.2xlarge", efa=False) is None
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from fmcluster.catalog import lookup

NVLINK_FLOORS_GBPS: Mapping[str, int] = MappingProxyType(
    {
        "p4d.24xlarge": 100,
        "p4de.24xlarge": 100,
        "p5.48xlarge": 250,
        "p5e.48xlarge": 250,
        "p5en.48xlarge": 250,
        "p6-b200.48xlarge": 300,
    }
)
"""One-node all_reduce_perf bus bandwidth floors (GB/s, 256 MiB, 8 GPUs in one process, NVLink only) below which the
fabric check drains a node: half of AWS's own NVLink-only expectations (awslabs/awsome-distributed-ai
4.validation_and_observability/2.gpu-cluster-healthcheck/checks/5-nccl-allreduce.sh at 2b0416e: p4d 200, p5, p5e and
p5en 500, p6-b200 600 GB/s). That script only warns below its figure, and AWS's published 2x p5 table reaches 342.81
GB/s at 256 MiB across two nodes (micro-benchmarks/nccl-tests/README.md), so a healthy node may sit near or below
AWS's figure: halving it keeps healthy nodes in service while a node whose NVLink fell back to PCIe lands far below
(how far below is unconfirmed on a real node). p4de shares p4d's NVLink 3 (AWS's script lists only p4d). Types without
a figure here (p6-b300, p6e-gb200, g5) get no floor: the all_reduce must only complete with no wrong results."""


@dataclass(frozen=True)
class FabricExpectation:
    """What fabric-check.sh checks on one node of a group: `efa` EFA devices, `gpus` GPUs, and a one-node all_reduce of
    at least `nvlink_floor_gbps` GB/s bus bandwidth (0: no floor) where the image has nccl-tests."""

    efa: int
    gpus: int
    nvlink_floor_gbps: int = 0

    def arguments(self) -> list[str]:
        """fabric-check.sh's arguments."""
        arguments = ["--efa", str(self.efa), "--gpus", str(self.gpus)]
        if self.nvlink_floor_gbps:
            arguments += ["--nvlink-floor", str(self.nvlink_floor_gbps)]
        return arguments

    def setting(self, group: str) -> str:
        """The group's word in HyperPod's FMCLUSTER_FABRIC setting: `GROUP=EFA,GPUS,FLOOR` (on_create.sh)."""
        return f"{group}={self.efa},{self.gpus},{self.nvlink_floor_gbps}"


def fabric_expectation(instance_type: str, *, efa: bool) -> FabricExpectation | None:
    """What the fabric check expects of a node of `instance_type` (EC2 name) whose group wires EFA (`efa`), or None
    when there is nothing to check (no EFA wired and no NVIDIA GPUs)."""
    row = lookup(instance_type)
    devices = row.max_efa_interfaces if efa else 0
    gpus = row.accelerator_count if row.accelerator.startswith("NVIDIA") else 0
    if not devices and not gpus:
        return None
    return FabricExpectation(devices, gpus, NVLINK_FLOORS_GBPS.get(row.name, 0) if gpus > 1 else 0)
