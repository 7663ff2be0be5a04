"""What a security group's rules admit, read from EC2's answers (botocore ec2 `IpPermission`: IpProtocol `tcp`, `6` or
`-1` for all, FromPort/ToPort, IpRanges[].CidrIp, UserIdGroupPairs[].GroupId, PrefixListIds[].PrefixListId).

A rule by address admits the nodes when its block holds their subnet's. A rule naming a security group admits them
only if they carry that group: the nodes' own group is made by the deploy, so before it no rule can name it, and a
group the caller knows the nodes do not carry (`not_theirs`, e.g. the file system's own groups) admits nothing. Any
other named group, and a prefix list (whose entries this does not read), is reported as unchecked, never as closed.

>>> judge([{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "IpRanges": [{"CidrIp": "10.0.0.0/16"}]}],
...       (443, 443), ipaddress.IPv4Network("10.0.4.0/22"))
Verdict(admitted=True, unchecked=())
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from typing import Any, NamedTuple


class Verdict(NamedTuple):
    admitted: bool
    """Some rule admits the block by address."""
    unchecked: tuple[str, ...]
    """Otherwise, the groups and prefix lists of rules on those ports that might admit the nodes (sorted)."""


def judge(
    permissions: list[dict[str, Any]],
    ports: tuple[int, int],
    block: ipaddress.IPv4Network,
    not_theirs: Collection[str] = (),
) -> Verdict:
    """Whether some permission allows TCP `ports` (all of them) for an IPv4 range holding `block`, and if none does,
    the sources that may still admit the nodes but cannot be checked here."""
    unchecked: set[str] = set()
    for permission in permissions:
        protocol = permission.get("IpProtocol")
        if protocol not in ("tcp", "-1", "6"):
            continue
        if protocol != "-1" and not (
            permission.get("FromPort", 0) <= ports[0] and ports[1] <= permission.get("ToPort", -1)
        ):
            continue
        for address in permission.get("IpRanges", []):
            cidr = ipaddress.IPv4Network(address.get("CidrIp", "255.255.255.255/32"), strict=False)
            if block.subnet_of(cidr):
                return Verdict(True, ())
        pairs = permission.get("UserIdGroupPairs", [])
        unchecked.update(pair.get("GroupId") or "" for pair in pairs if pair.get("GroupId") not in not_theirs)
        unchecked.update(entry.get("PrefixListId") or "" for entry in permission.get("PrefixListIds", []))
    unchecked.discard("")
    return Verdict(False, tuple(sorted(unchecked)))


def ipv4_block(subnet: dict[str, Any]) -> ipaddress.IPv4Network | None:
    """A subnet's IPv4 range (DescribeSubnets CidrBlock, botocore ec2); None for an IPv6-only subnet, which has none."""
    block = subnet.get("CidrBlock")
    return ipaddress.IPv4Network(block) if block else None


def ipv6_only(subnet_id: str) -> str:
    """What `validate --live` says of an IPv6-only subnet."""
    return (
        f"subnet {subnet_id} is IPv6-only (no IPv4 CidrBlock): the checks of the security groups that must admit the "
        "nodes judge IPv4 rules and cannot judge it, and whether HyperPod and PCS nodes run in an IPv6-only subnet is "
        "unconfirmed; give a subnet with an IPv4 block"
    )
