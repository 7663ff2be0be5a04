"""An existing FSx for Lustre file system (`storage.lustre.file_system_id`): it is the file system the file
describes, and its security group admits and reaches the nodes' subnet on Lustre's ports.

Sources: FSx API reference, DescribeFileSystems (FileSystemType, Lifecycle, VpcId, DNSName,
LustreConfiguration.MountName and EfaEnabled, SubnetIds, NetworkInterfaceIds; error FileSystemNotFound); EC2 API
reference, DescribeNetworkInterfaces (Groups: the security groups the file system's interfaces carry),
DescribeSecurityGroups (IpPermissions, IpPermissionsEgress, IpRanges; error InvalidGroup.NotFound) and DescribeSubnets
(CidrBlock); FSx for Lustre user guide, "File system access control with Amazon VPC": inbound and outbound TCP 988 and
1018-1023 between the file system and its clients. The nodes' security group is created by the deploy, so before it a
rule can admit them only by address: the subnet's block (or a larger one) must be admitted. The rules are judged on
all the groups the file system carries together (a rule of any of them admits).

An EFA-enabled file system: the FSx guide asks its security group to allow all traffic to and from itself and the
clients' security group, and EFA's OS-bypass traffic does not cross subnets (EC2 user guide, EFA limitations). The
nodes' group cannot be named before the deploy; fmcluster does not put the file system's group on the nodes (their
interfaces carry only the group it makes, whose rules to and from the file system's group it adds), so the check warns
(decision recorded in docs/cluster-file.md, `storage.lustre.security_group_id`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.config.models import Lustre
from fmcluster.live.aws import Aws, error_code
from fmcluster.live.runner import Check
from fmcluster.live.security_rules import ipv4_block, judge
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
    system = _file_system(aws, lustre)
    if system is None:
        return [Problem(path, f"file system {lustre.file_system_id} does not exist in {config.region}")]
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
    if efa and config.network.subnet_id not in system.get("SubnetIds", []):
        problems.append(
            warning(
                "storage.lustre.efa",
                f"{lustre.file_system_id} is in {', '.join(system.get('SubnetIds', [])) or 'no subnet'}, not in "
                f"network.subnet_id {config.network.subnet_id}: EFA traffic does not cross subnets (EC2 user guide, "
                "EFA limitations), so the nodes reach it over TCP at best (unconfirmed what LNet does then)",
            )
        )
    return problems


def _file_system(aws: Aws, lustre: Lustre) -> dict[str, Any] | None:
    try:
        found = aws.call("fsx", "DescribeFileSystems", FileSystemIds=[lustre.file_system_id])["FileSystems"]
    except ClientError as error:
        if error_code(error) == "FileSystemNotFound":
            return None
        raise
    return found[0] if found else None


def check_security_group(config: ClusterConfig, aws: Aws) -> list[Problem]:
    lustre, path = _existing(config), "storage.lustre.security_group_id"
    group_id = lustre.security_group_id
    system = _file_system(aws, lustre)
    if system is None:
        return []  # the file system check says it does not exist
    interfaces = system.get("NetworkInterfaceIds", [])
    carried = sorted(
        {
            group["GroupId"]
            for interface in (
                aws.call("ec2", "DescribeNetworkInterfaces", NetworkInterfaceIds=interfaces)["NetworkInterfaces"]
                if interfaces
                else []
            )
            for group in interface.get("Groups", [])
        }
    )
    problems = []
    if group_id not in carried:
        problems.append(
            Problem(
                path,
                f"{lustre.file_system_id}'s network interfaces carry {', '.join(carried) or 'no security group'}, not "
                f"{group_id}: name one of the file system's own groups",
            )
        )
    try:
        groups = aws.call("ec2", "DescribeSecurityGroups", GroupIds=sorted({*carried, group_id}))["SecurityGroups"]
    except ClientError as error:
        if error_code(error) == "InvalidGroup.NotFound":
            return [Problem(path, f"security group {group_id} does not exist in {config.region}")]
        raise
    subnets = aws.call("ec2", "DescribeSubnets", SubnetIds=[config.network.subnet_id]).get("Subnets", [])
    if not subnets:
        return problems  # the subnet check says it does not exist
    block = ipv4_block(subnets[0])
    if block is None:
        return problems  # the subnet check says it is IPv6-only
    judged = [group for group in groups if group["GroupId"] in carried] or groups
    names = ", ".join(group["GroupId"] for group in judged)
    for direction, key in (("in from", "IpPermissions"), ("out to", "IpPermissionsEgress")):
        rules = [rule for group in judged for rule in group.get(key, [])]
        verdicts = {ports: judge(rules, ports, block, not_theirs=carried) for ports in LUSTRE_PORTS}
        closed = [_show(ports) for ports, verdict in verdicts.items() if not verdict.admitted and not verdict.unchecked]
        unchecked = sorted({source for verdict in verdicts.values() for source in verdict.unchecked})
        if closed:
            problems.append(
                Problem(
                    path,
                    f"security group {names} lets no Lustre traffic (TCP {', '.join(closed)}) {direction} the "
                    f"nodes' subnet {block}; add a rule for that block (the nodes' own group is made by the deploy, "
                    "so no rule can name it before)",
                )
            )
        elif unchecked:
            problems.append(
                warning(
                    path,
                    f"security group {names} lets Lustre traffic {direction} the nodes' subnet {block} only through "
                    f"{', '.join(unchecked)}, unchecked: a security group admits the nodes only if they carry it "
                    "(their own group is made by the deploy), and a prefix list's entries are not read",
                )
            )
    if lustre.efa:
        problems.append(
            warning(
                path,
                f"{lustre.file_system_id} is EFA-enabled: FSx asks its security group to allow all traffic to and "
                "from itself and the clients' security group; the nodes' group is made by the deploy, so after it "
                f"add all-traffic rules both ways between {group_id} and the nodes' EFA security group (fmcluster "
                "adds the nodes' side)",
            )
        )
    return problems


def _show(ports: tuple[int, int]) -> str:
    return str(ports[0]) if ports[0] == ports[1] else f"{ports[0]}-{ports[1]}"
