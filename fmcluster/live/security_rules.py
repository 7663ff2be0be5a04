"""What a security group's rules admit, read from EC2's answers (botocore ec2 `IpPermission`: IpProtocol `tcp`, `6` or
`-1` for all, FromPort/ToPort, IpRanges[].CidrIp).

>>> admits([{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "IpRanges": [{"CidrIp": "10.0.0.0/16"}]}],
...        (443, 443), ipaddress.IPv4Network("10.0.4.0/22"))
True
"""

from __future__ import annotations

import ipaddress
from typing import Any


def admits(permissions: list[dict[str, Any]], ports: tuple[int, int], block: ipaddress.IPv4Network) -> bool:
    """Some permission allows TCP `ports` (all of them) for an IPv4 range holding `block`."""
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
                return True
    return False
