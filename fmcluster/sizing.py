"""Checkpoint and throughput arithmetic behind `fmcluster plan` and the checkpoint-time warning.

Sources: mixed-precision Adam checkpoints hold about 14 bytes per parameter (fp16/bf16 weights, fp32 master
weights and two fp32 moments: 2 + 4 + 4 + 4; Rajbhandari et al., "ZeRO", 2020, section 3.1); FSx for Lustre
throughput is capacity in TiB times the per-TiB tier (FSx for Lustre user guide, "Performance"); a Lustre
client moves at most ~100 Gbps over ENA and ~700 Gbps over EFA (unconfirmed). Units are decimal, as AWS quotes
them: MB/s = 10^6 bytes/s, TB = 10^12 bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fmcluster.config.models import LUSTRE_EFA_CAPACITY_STEP_GIB, ClusterConfig, ComputeGroup, next_lustre_capacity
from fmcluster.problems import Problem, warning

CHECKPOINT_BYTES_PER_PARAMETER = 14
ENA_CLIENT_GBPS = 100
EFA_CLIENT_GBPS = 700
MBPS_PER_GBPS = 125
THROUGHPUT_TIERS = (125, 250, 500, 1000)


def filesystem_mbps(capacity_gib: int, throughput_per_tib: int) -> float:
    """Aggregate FSx for Lustre throughput in MB/s."""
    return capacity_gib / 1024 * throughput_per_tib


def checkpoint_writers(config: ClusterConfig) -> list[ComputeGroup]:
    """The groups that hold a model's training state and write its checkpoints: the accelerated ones (a general-purpose
    group, outside the catalog, prepares data or evaluates; its bandwidth is not known either)."""
    return [group for group in config.compute if group.instance.is_accelerated and group.count > 0]


def clients_mbps(config: ClusterConfig) -> float:
    """What all accelerated compute nodes can push to Lustre together, in MB/s."""
    lustre_efa = config.storage.lustre is not None and config.storage.lustre.efa
    total = 0.0
    for group in checkpoint_writers(config):
        over_efa = lustre_efa and group.efa and group.instance.lustre_efa_client
        per_node_gbps = min(EFA_CLIENT_GBPS if over_efa else ENA_CLIENT_GBPS, group.instance.network_gbps)
        total += group.count * per_node_gbps * MBPS_PER_GBPS
    return total


@dataclass(frozen=True)
class CheckpointEstimate:
    size_bytes: float
    filesystem_mbps: float
    clients_mbps: float
    target_seconds: int

    @property
    def effective_mbps(self) -> float:
        return min(self.filesystem_mbps, self.clients_mbps)

    @property
    def seconds(self) -> float:
        return self.size_bytes / (self.effective_mbps * 1e6)

    @property
    def limited_by(self) -> str:
        return "the file system" if self.filesystem_mbps <= self.clients_mbps else "the nodes' network"

    @property
    def required_mbps(self) -> float:
        return self.size_bytes / self.target_seconds / 1e6

    @property
    def meets_target(self) -> bool:
        return self.seconds <= self.target_seconds


def checkpoint_estimate(config: ClusterConfig) -> CheckpointEstimate | None:
    """Size and write time of one full checkpoint, or None without `training`, without accelerated nodes, or on an
    existing file system (`storage.lustre.file_system_id`), whose size and throughput are not in the file, or without a
    file system (`storage.lustre: none`)."""
    lustre = config.storage.lustre
    if config.training is None or not checkpoint_writers(config) or lustre is None or lustre.existing:
        return None
    return CheckpointEstimate(
        size_bytes=config.training.model_parameters * CHECKPOINT_BYTES_PER_PARAMETER,
        filesystem_mbps=filesystem_mbps(lustre.capacity_gib, lustre.throughput_per_tib),
        clients_mbps=clients_mbps(config),
        target_seconds=config.training.checkpoint_write_seconds,
    )


def capacity_for(required_mbps: float, throughput_per_tib: int, *, efa: bool) -> int:
    """The smallest valid capacity (GiB) that reaches `required_mbps` at `throughput_per_tib`."""
    minimum = math.ceil(required_mbps / throughput_per_tib * 1024)
    step = LUSTRE_EFA_CAPACITY_STEP_GIB[throughput_per_tib] if efa else None
    if step:
        return max(step, -(-minimum // step) * step)
    if minimum <= 1200:
        return 1200
    return minimum if minimum % 2400 == 0 else next_lustre_capacity(minimum)


def checkpoint_warnings(config: ClusterConfig) -> list[Problem]:
    """A warning when one full checkpoint cannot be written within `training.checkpoint_write_seconds`."""
    estimate = checkpoint_estimate(config)
    lustre = config.storage.lustre
    if estimate is None or estimate.meets_target or config.training is None or lustre is None:
        return []
    said = (
        f"one checkpoint of {format_parameters(config.training.model_parameters)} parameters "
        f"(~{estimate.size_bytes / 1e12:.2f} TB) takes ~{estimate.seconds:.0f} s "
        f"at {estimate.effective_mbps:,.0f} MB/s, "
        f"over the {estimate.target_seconds} s target; needs {estimate.required_mbps:,.0f} MB/s"
    )
    if estimate.clients_mbps < estimate.required_mbps:
        fix = (
            f"the nodes' network reaches only {estimate.clients_mbps:,.0f} MB/s: raise checkpoint_write_seconds "
            f"to {math.ceil(estimate.size_bytes / (estimate.clients_mbps * 1e6))} or add nodes"
        )
    else:
        capacity = capacity_for(estimate.required_mbps, lustre.throughput_per_tib, efa=lustre.efa)
        options = [f"storage.lustre.capacity_gib: {capacity}"]
        for tier in THROUGHPUT_TIERS:
            if (
                tier > lustre.throughput_per_tib
                and filesystem_mbps(lustre.capacity_gib, tier) >= estimate.required_mbps
            ):
                step = LUSTRE_EFA_CAPACITY_STEP_GIB[tier]
                if not lustre.efa or lustre.capacity_gib % step == 0:
                    options.append(f"storage.lustre.throughput_per_tib: {tier}")
                break
        fix = "use " + " or ".join(options)
    return [warning("training.checkpoint_write_seconds", f"{said}; {fix}")]


def format_parameters(count: float) -> str:
    """7e10 -> '70B', 1.5e12 -> '1.5T'."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= scale:
            return f"{count / scale:g}{suffix}"
    return f"{count:g}"
