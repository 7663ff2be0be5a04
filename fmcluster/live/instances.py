"""What EC2 says about the file's instance types, and where they are offered.

`InstanceTypes` reads DescribeInstanceTypes once for every type the file uses (vCPUs for quotas, architectures
for the AMI) and is shared by the checks that need it. `offering_checks` asks DescribeInstanceTypeOfferings by
availability-zone-id whether each compute, controller and login type is offered in `availability_zone_id`.
"""

from __future__ import annotations

import threading
from typing import Any

from fmcluster.config import ClusterConfig, Problem, orchestrators
from fmcluster.live.aws import Aws
from fmcluster.live.runner import Check


def instance_types_of(config: ClusterConfig) -> dict[str, str]:
    """Every EC2 instance type the file launches -> the key that names it first (compute, then the head nodes: for
    HyperPod the controller and login, for PCS the login node or the head node of its own group)."""
    found: dict[str, str] = {}
    for index, group in enumerate(config.compute):
        found.setdefault(group.instance_type, f"compute[{index}].instance_type")
    rules = orchestrators.of(config.orchestrator.type)
    for key, instance_type in rules.head_instance_types(config.orchestrator, config.observability):
        found.setdefault(instance_type, key)
    return found


class InstanceTypes:
    """DescribeInstanceTypes for `names`, read once on first use (thread-safe)."""

    def __init__(self, aws: Aws, names: list[str]):
        self._aws = aws
        self._names = sorted(set(names))
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] | None = None

    def rows(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            if self._rows is None:
                self._rows = {
                    row["InstanceType"]: row
                    for row in self._aws.pages(
                        "ec2", "DescribeInstanceTypes", "InstanceTypes", InstanceTypes=self._names
                    )
                }
            return self._rows

    def vcpus(self, name: str) -> int | None:
        row = self.rows().get(name)
        return row["VCpuInfo"]["DefaultVCpus"] if row and "VCpuInfo" in row else None

    def architectures(self, name: str) -> list[str]:
        row = self.rows().get(name) or {}
        return list(row.get("ProcessorInfo", {}).get("SupportedArchitectures", []))


def offering_checks(config: ClusterConfig, aws: Aws) -> list[Check]:
    return [
        Check(
            f"instance offerings in {config.availability_zone_id}",
            "availability_zone_id",
            lambda: check_offerings(config, aws),
        )
    ]


def check_offerings(config: ClusterConfig, aws: Aws) -> list[Problem]:
    """Types not offered in the AZ ID. Groups on a reservation or plan are left to the capacity checks (a reserved
    type may be bought only as capacity blocks there); for HyperPod, whose instances SageMaker launches, EC2's list
    is only a proxy and a gap is a warning (unconfirmed: no API lists HyperPod's offerings per zone)."""
    types = {
        name: key
        for name, key in instance_types_of(config).items()
        if not any(
            group.instance_type == name and (group.reservation_id or group.training_plan_arn)
            for group in config.compute
        )
    }
    if not types:
        return []
    zone = config.availability_zone_id
    offered = {
        row["InstanceType"]
        for row in aws.pages(
            "ec2",
            "DescribeInstanceTypeOfferings",
            "InstanceTypeOfferings",
            LocationType="availability-zone-id",
            Filters=[{"Name": "location", "Values": [zone]}, {"Name": "instance-type", "Values": sorted(types)}],
        )
    }
    level, advice = orchestrators.of(config.orchestrator.type).UNOFFERED_TYPE
    return [
        Problem(
            key,
            f"{name} is not offered in {zone} ({config.region}): EC2 lists no offering of it there; {advice}",
            level,
        )
        for name, key in types.items()
        if name not in offered
    ]
