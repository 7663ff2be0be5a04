"""An existing FSx for Lustre file system (`storage.lustre.file_system_id`): it is the file system the file
describes, and its security group admits and reaches the nodes' subnet on Lustre's ports.

Sources: FSx API reference, DescribeFileSystems (FileSystemType, Lifecycle, VpcId, DNSName,
LustreConfiguration.MountName and EfaEnabled; error FileSystemNotFound); EC2 API reference, DescribeSecurityGroups
(IpPermissions, IpPermissionsEgress, IpRanges; error InvalidGroup.NotFound) and DescribeSubnets (CidrBlock);
FSx for Lustre user guide, "File system access control with Amazon VPC": inbound and outbound TCP 988 and 1018-1023
between the file system and its clients. The nodes' security group is created by the deploy, so before it a rule
can admit them only by address: the subnet's block (or a larger one) must be admitted.
"""

from __future__ import annotations

import ipaddress
from functools import partial

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.config.models import Lustre
from fmcluster.live.aws import Aws, error_code
from fmcluster.live.runner import Check
from fmcluster.live.security_rules import admits
from fmcluster.problems import Problem, warning

LUSTRE_PORTS = ((988, 988), (1018, 1023))
PASSING_STATES = ("UPDATING",)
"""Lifecycle states a mount still works in (FSx API reference, FileSystemLifecycle): a warning, not an error."""


def file_system_checks(config: ClusterConfig, aws: Aws) -> list[Check]:
    lustre = config.storage.lustre
    if lustre is None or not lustre.existing:
        return []
    return [
        Check(
            f"file system {lustre.file_system_id}",
            "storage.lustre.file_system_id",
            partial(check_file_system, config, aws),
        ),
        Check(
            f"security group {lustre.security_group_id}",
            "storage.lustre.security_group_id",
            partial(check_security_group, config, aws),
        ),
    ]


def _existing(config: ClusterConfig) -> Lustre:
    """The file's existing file system (`file_system_checks` runs the checks only with one)."""
    lustre = config.storage.lustre
    assert lustre is not None and lustre.existing
    return lustre


def check_file_system(config: ClusterConfig, aws: Aws) -> list[Problem]:
    lustre, path = _existing(config), "storage.lustre.file_system_id"
    try:
        found = aws.call("fsx", "DescribeFileSystems", FileSystemIds=[lustre.file_system_id])["FileSystems"]
    except ClientError as error:
        if error_code(error) == "FileSystemNotFound":
            found = []
        else:
            raise
    if not found:
        return [Problem(path, f"file system {lustre.file_system_id} does not exist in {config.region}")]
    system = found[0]
    if system.get("FileSystemType") != "LUSTRE":
        return [
            Problem(
                path, f"{lustre.file_system_id} is an FSx for {system.get('FileSystemType')} file system, not Lustre"
            )
        ]
    problems = []
    state = system.get("Lifecycle")
    if state != "AVAILABLE":
        level = warning if state in PASSING_STATES else Problem
        problems.append(level(path, f"{lustre.file_system_id} is {state}, not AVAILABLE"))
    if system.get("VpcId") != config.network.vpc_id:
        problems.append(
            Problem(
                path,
                f"{lustre.file_system_id} is in {system.get('VpcId')}, not in network.vpc_id {config.network.vpc_id}",
            )
        )
    configuration = system.get("LustreConfiguration", {})
    for key, given, actual in (
        ("dns_name", lustre.dns_name, system.get("DNSName")),
        ("mount_name", lustre.mount_name, configuration.get("MountName")),
    ):
        if given != actual:
            problems.append(Problem(f"storage.lustre.{key}", f"{lustre.file_system_id}'s is {actual}, not {given}"))
    efa = bool(configuration.get("EfaEnabled"))
    if efa != lustre.efa:
        problems.append(
            Problem(
                "storage.lustre.efa",
                f"{lustre.file_system_id} is {'' if efa else 'not '}EFA-enabled; set efa: {str(efa).lower()}",
            )
        )
    return problems


def check_security_group(config: ClusterConfig, aws: Aws) -> list[Problem]:
    lustre, path = _existing(config), "storage.lustre.security_group_id"
    group_id = lustre.security_group_id
    try:
        groups = aws.call("ec2", "DescribeSecurityGroups", GroupIds=[group_id])["SecurityGroups"]
    except ClientError as error:
        if error_code(error) == "InvalidGroup.NotFound":
            return [Problem(path, f"security group {group_id} does not exist in {config.region}")]
        raise
    subnets = aws.call("ec2", "DescribeSubnets", SubnetIds=[config.network.subnet_id]).get("Subnets", [])
    if not groups or not subnets:
        return [Problem(path, f"security group {group_id} or subnet {config.network.subnet_id} not found")]
    block = ipaddress.IPv4Network(subnets[0]["CidrBlock"])  # a subnet's CidrBlock is its IPv4 range (botocore ec2)
    problems = []
    for direction, key in (("in from", "IpPermissions"), ("out to", "IpPermissionsEgress")):
        closed = [_show(ports) for ports in LUSTRE_PORTS if not admits(groups[0].get(key, []), ports, block)]
        if closed:
            problems.append(
                Problem(
                    path,
                    f"security group {group_id} lets no Lustre traffic (TCP {', '.join(closed)}) {direction} the "
                    f"nodes' subnet {block}; add a rule for that block (the nodes' own group is made by the deploy, "
                    "so no rule can name it before)",
                )
            )
    return problems


def _show(ports: tuple[int, int]) -> str:
    return str(ports[0]) if ports[0] == ports[1] else f"{ports[0]}-{ports[1]}"
