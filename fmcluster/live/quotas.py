"""Service Quotas the deploy needs headroom in, each named in its message as Service Quotas shows it.

Quotas are found by code where the code is known, else by exact name (ListServiceQuotas, then
ListAWSDefaultServiceQuotas for quotas never changed: the first lists only applied values), so a message carries
the name and code a user searches the console for. Names are never matched by words: a service has look-alike
quotas (HyperPod's Spot total next to its On-Demand total; FSx's Intelligent-Tiering read cache next to its
Persistent_2 storage) and the listing's order is not documented.
Sources: EC2 user guide, "On-Demand Instance quotas" (vCPU quotas per instance family); Amazon VPC user guide,
"Amazon VPC quotas" (VPCs per Region, NAT gateways per Availability Zone); EC2 user guide, "Elastic IP address
quota" (EC2-VPC Elastic IPs); SageMaker HyperPod prerequisites, "Quotas" (per-type "for cluster usage" quotas and
"Maximum number instances allowed per SageMaker HyperPod cluster", "Total number of instances allowed across
SageMaker HyperPod clusters"); FSx quota "Lustre Persistent_2 storage
capacity" L-8F1B9C74 as ListServiceQuotas names it in public account listings (unconfirmed in AWS's FSx guide). A
quota not found is "not checked", never an error and never ready.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from functools import partial
from typing import Any

from fmcluster.config import ClusterConfig, Problem, orchestrators
from fmcluster.config.orchestrators import resolve
from fmcluster.config.orchestrators.pcs import head_group as pcs_head_group
from fmcluster.live.aws import Aws
from fmcluster.live.instances import InstanceTypes
from fmcluster.live.runner import Check, unchecked

ON_DEMAND_QUOTAS = {
    "p": "Running On-Demand P instances",
    "g": "Running On-Demand G and VT instances",
    "vt": "Running On-Demand G and VT instances",
    "trn": "Running On-Demand Trn instances",
    **{letter: "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" for letter in "acdhimrtz"},
}
"""The letters that start an instance family -> its EC2 On-Demand vCPU quota (EC2 user guide, On-Demand quotas)."""

VPCS = "VPCs per Region"
NAT_GATEWAYS = "NAT gateways per Availability Zone"
ELASTIC_IPS = "EC2-VPC Elastic IPs"
HYPERPOD_TYPE = "{ml_type} for cluster usage"
HYPERPOD_PER_CLUSTER = "Maximum number instances allowed per SageMaker HyperPod cluster"
HYPERPOD_TOTAL = "Total number of instances allowed across SageMaker HyperPod clusters"
LUSTRE_STORAGE = "Lustre Persistent_2 storage capacity"
"""fmcluster's file system is PERSISTENT_2 SSD; the quota is the Region's total across such file systems."""
CODES = {
    ON_DEMAND_QUOTAS["p"]: "L-417A185B",
    ON_DEMAND_QUOTAS["g"]: "L-DB2E81BA",
    ON_DEMAND_QUOTAS["trn"]: "L-2C3B7624",
    ON_DEMAND_QUOTAS["m"]: "L-1216C47A",
    VPCS: "L-F678F1CE",
    NAT_GATEWAYS: "L-FE5A380F",
    ELASTIC_IPS: "L-0263D0A3",
    HYPERPOD_PER_CLUSTER: "L-2CE978FC",
    HYPERPOD_TOTAL: "L-3308CCC7",
    LUSTRE_STORAGE: "L-8F1B9C74",
}
"""Quota codes (stable where names get reworded), as the Service Quotas console and ListServiceQuotas show them."""


class ServiceQuotas:
    """Quota listings per service code, read once each (thread-safe)."""

    def __init__(self, aws: Aws):
        self._aws = aws
        self._lock = threading.Lock()
        self._lists: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def named(self, service_code: str, name: str) -> dict[str, Any] | None:
        """The quota whose code is `CODES[name]`, or (no known code) whose name is `name`; applied value first."""
        code = CODES.get(name)
        for operation in ("ListServiceQuotas", "ListAWSDefaultServiceQuotas"):
            for quota in self._list(service_code, operation):
                if quota.get("QuotaCode") == code if code else quota.get("QuotaName", "").lower() == name.lower():
                    return quota
        return None

    def _list(self, service_code: str, operation: str) -> list[dict[str, Any]]:
        with self._lock:
            key = (service_code, operation)
            if key not in self._lists:
                self._lists[key] = list(
                    self._aws.pages("service-quotas", operation, "Quotas", ServiceCode=service_code)
                )
            return self._lists[key]


def quota_checks(config: ClusterConfig, aws: Aws, types: InstanceTypes) -> list[Check]:
    quotas = ServiceQuotas(aws)
    instances = resolve(orchestrators.of(config.orchestrator.type).INSTANCE_QUOTA_CHECKS)
    checks: list[Check] = instances(config, quotas, types)
    if config.storage.creates_file_system:  # an existing file system, or none, draws on no new storage
        checks.append(
            Check(
                f"quota '{LUSTRE_STORAGE}'", "storage.lustre.capacity_gib", lambda: check_lustre_storage(quotas, config)
            )
        )
    if config.network.vpc_id is not None:
        return checks  # a VPC of your own: fmcluster creates no VPC, NAT gateway or Elastic IP
    checks.append(Check(f"quota '{VPCS}'", "network", lambda: check_vpcs(quotas, aws)))
    if config.network.egress == "nat":
        checks.append(
            Check(
                f"quota '{NAT_GATEWAYS}'",
                "network.egress",
                lambda: check_nat_gateways(quotas, aws, config.availability_zone_id),
            )
        )
        checks.append(Check(f"quota '{ELASTIC_IPS}'", "network.egress", lambda: check_elastic_ips(quotas, aws)))
    return checks


def on_demand_checks(config: ClusterConfig, quotas: ServiceQuotas, types: InstanceTypes) -> list[Check]:
    """The EC2 On-Demand vCPU quotas the file's groups draw on (AWS PCS launches EC2 instances)."""
    return [
        Check(f"quota '{name}'", members[0][0], partial(check_vcpus, quotas, types, name, members))
        for name, members in _on_demand_groups(config).items()
    ]


def hyperpod_instance_checks(config: ClusterConfig, quotas: ServiceQuotas, types: InstanceTypes) -> list[Check]:
    """SageMaker's per-type and per-cluster HyperPod instance quotas (SageMaker launches HyperPod's instances)."""
    checks = [
        Check(
            f"quota '{HYPERPOD_TYPE.format(ml_type=ml_type)}'",
            members[0][0],
            partial(check_hyperpod_type, quotas, ml_type, members),
        )
        for ml_type, members in _hyperpod_instances(config).items()
    ]
    for name in (HYPERPOD_PER_CLUSTER, HYPERPOD_TOTAL):
        checks.append(Check(f"quota '{name}'", "compute", partial(check_hyperpod_instances, quotas, config, name)))
    return checks


Members = list[tuple[str, str, int]]
"""(key path, instance type, instance count) of what draws on one quota."""


def _on_demand_groups(config: ClusterConfig) -> dict[str, Members]:
    """On-Demand vCPU quota name -> what uses it: on-demand and ODCR groups (ODCR instances are On-Demand
    instances) and the head node (the login node, or the head group metrics need). Capacity blocks are left out:
    whether they count is (unconfirmed)."""
    found: dict[str, Members] = defaultdict(list)
    for index, group in enumerate(config.compute):
        if group.capacity in ("on-demand", "odcr") and group.count:
            found[on_demand_quota(group.instance_type)].append(
                (f"compute[{index}].count", group.instance_type, group.count)
            )
    head = pcs_head_group(config.orchestrator, config.observability)
    if head is not None:
        key, _, instance_type = head
        found[on_demand_quota(instance_type)].append((key, instance_type, 1))
    return dict(found)


def on_demand_quota(instance_type: str) -> str:
    """'p5.48xlarge' -> 'Running On-Demand P instances'; '' for a family without a known quota.

    >>> on_demand_quota("trn1.32xlarge"), on_demand_quota("m5.4xlarge")[:26]
    ('Running On-Demand Trn instances', 'Running On-Demand Standard')
    """
    letters = re.match(r"[a-z]+", instance_type)
    return ON_DEMAND_QUOTAS.get(letters[0] if letters else "", "")


def check_vcpus(quotas: ServiceQuotas, types: InstanceTypes, name: str, members: Members) -> list[Problem]:
    path = members[0][0]
    if not name:
        kinds = ", ".join(sorted({t for _, t, _ in members}))
        return [unchecked(path, f"the On-Demand vCPU quota of {kinds}", "fmcluster knows no quota for the family")]
    parts, needed = [], 0
    for _, instance_type, count in members:
        vcpus = types.vcpus(instance_type)
        if vcpus is None:
            return [unchecked(path, f"quota '{name}'", f"EC2 does not describe {instance_type}")]
        needed += vcpus * count
        parts.append(f"{count} x {instance_type} x {vcpus}")
    quota = quotas.named("ec2", name)
    if quota is None:
        return [unchecked(path, f"quota '{name}'", "Service Quotas lists no EC2 quota of that name or code")]
    if needed > quota["Value"]:
        return [
            Problem(
                path,
                f"needs {needed:,} vCPUs ({' + '.join(parts)}), but the quota '{name}' "
                f"({quota['QuotaCode']}) is {quota['Value']:,.0f} vCPUs; request an increase in Service Quotas "
                "(running instances count too)",
            )
        ]
    return []


def _hyperpod_instances(config: ClusterConfig) -> dict[str, Members]:
    """ml. type -> what HyperPod launches of it: controller, login and compute groups. Groups on a training plan
    are left out: the plan's own reservation is checked instead (unconfirmed whether they count)."""
    found: dict[str, Members] = defaultdict(list)
    orchestrator = config.orchestrator
    found[f"ml.{orchestrator.controller_instance_type}"].append(
        ("orchestrator.controller_instance_type", orchestrator.controller_instance_type, 1)
    )
    if orchestrator.login_instance_type:
        found[f"ml.{orchestrator.login_instance_type}"].append(
            ("orchestrator.login_instance_type", orchestrator.login_instance_type, 1)
        )
    for index, group in enumerate(config.compute):
        if group.capacity != "training-plan" and group.count:
            found[f"ml.{group.instance_type}"].append((f"compute[{index}].count", group.instance_type, group.count))
    return dict(found)


def check_hyperpod_type(quotas: ServiceQuotas, ml_type: str, members: Members) -> list[Problem]:
    name = HYPERPOD_TYPE.format(ml_type=ml_type)
    quota = quotas.named("sagemaker", name)
    path = members[0][0]
    if quota is None:
        return [unchecked(path, f"quota '{name}'", "Service Quotas lists no SageMaker quota of that name")]
    needed = sum(count for _, _, count in members)
    if needed > quota["Value"]:
        return [
            Problem(
                path,
                f"needs {needed} x {ml_type}, but the quota '{name}' ({quota['QuotaCode']}) is "
                f"{quota['Value']:,.0f}; request an increase in Service Quotas (other HyperPod clusters' "
                "instances count too)",
            )
        ]
    return []


def check_hyperpod_instances(quotas: ServiceQuotas, config: ClusterConfig, name: str) -> list[Problem]:
    """The cluster's instances (compute, controller, login) against a HyperPod instance-count quota `name`."""
    quota = quotas.named("sagemaker", name)
    if quota is None:
        return [unchecked("compute", f"quota '{name}'", "Service Quotas lists no SageMaker quota of that name or code")]
    login = 1 if config.orchestrator.login_instance_type else 0
    needed = config.total_nodes + 1 + login
    parts = f"{config.total_nodes} compute, 1 controller" + (", 1 login" if login else "")
    if needed > quota["Value"]:
        return [
            Problem(
                "compute",
                f"the cluster has {needed} instances ({parts}), but the quota "
                f"'{quota['QuotaName']}' ({quota['QuotaCode']}) is {quota['Value']:,.0f}; request an increase",
            )
        ]
    return []


def check_lustre_storage(quotas: ServiceQuotas, config: ClusterConfig) -> list[Problem]:
    quota = quotas.named("fsx", LUSTRE_STORAGE)
    path = "storage.lustre.capacity_gib"
    if quota is None:
        return [unchecked(path, f"quota '{LUSTRE_STORAGE}'", "Service Quotas lists no FSx quota of that name or code")]
    lustre = config.storage.lustre
    assert lustre is not None  # quota_checks runs this only when fmcluster creates the file system
    capacity = lustre.capacity_gib
    if capacity > quota["Value"]:
        unit = quota.get("Unit", "")
        shown = "" if unit in ("", "None") else f" {unit}"
        return [
            Problem(
                path,
                f"{capacity:,} GiB exceeds the quota '{quota['QuotaName']}' ({quota['QuotaCode']}) of "
                f"{quota['Value']:,.0f}{shown}; request an increase (other file systems count too)",
            )
        ]
    return []


def check_vpcs(quotas: ServiceQuotas, aws: Aws) -> list[Problem]:
    used = len(list(aws.pages("ec2", "DescribeVpcs", "Vpcs")))
    return _headroom(quotas, "vpc", VPCS, used, "network", "the network stack creates 1 VPC")


def check_nat_gateways(quotas: ServiceQuotas, aws: Aws, zone: str) -> list[Problem]:
    gateways = list(
        aws.pages(
            "ec2", "DescribeNatGateways", "NatGateways", Filter=[{"Name": "state", "Values": ["pending", "available"]}]
        )
    )
    subnets = sorted({gateway["SubnetId"] for gateway in gateways if gateway.get("SubnetId")})
    in_zone = 0
    if subnets:
        zones = {
            row["SubnetId"]: row.get("AvailabilityZoneId")
            for row in aws.pages("ec2", "DescribeSubnets", "Subnets", SubnetIds=subnets)
        }
        in_zone = sum(1 for gateway in gateways if zones.get(gateway.get("SubnetId")) == zone)
    return _headroom(
        quotas,
        "vpc",
        NAT_GATEWAYS,
        in_zone,
        "network.egress",
        f"egress: nat creates 1 NAT gateway in {zone}",
        fix="or set egress: none",
    )


def check_elastic_ips(quotas: ServiceQuotas, aws: Aws) -> list[Problem]:
    used = len(aws.call("ec2", "DescribeAddresses").get("Addresses", []))
    return _headroom(
        quotas,
        "ec2",
        ELASTIC_IPS,
        used,
        "network.egress",
        "egress: nat allocates 1 Elastic IP for its NAT gateway",
        fix="or set egress: none",
    )


def _headroom(
    quotas: ServiceQuotas, service_code: str, name: str, used: int, path: str, why: str, fix: str = ""
) -> list[Problem]:
    quota = quotas.named(service_code, name)
    if quota is None:
        return [unchecked(path, f"quota '{name}'", "Service Quotas lists no quota of that name or code")]
    if used + 1 > quota["Value"]:
        return [
            Problem(
                path,
                f"{why}, but {used} of the quota '{name}' ({quota['QuotaCode']}) of "
                f"{quota['Value']:,.0f} are in use; free one or request an increase{' ' + fix if fix else ''}",
            )
        ]
    return []
