"""How fmcluster splits the VPC block into subnets, and how many nodes the compute subnet holds.

Fixed offsets keep every subnet's CIDR (a creation-only property) unchanged when other settings change:
  first half            compute subnet, primary AZ (nodes, FSx, interface endpoints, controller)
  next quarter          secondary private subnet, secondary AZ (only with secondary_availability_zone_id)
  next sixteenth        public subnet, primary AZ (NAT gateway; only with egress: nat)
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

AWS_RESERVED_PER_SUBNET = 5
"""AWS keeps the first four and the last address of every subnet."""
SERVICE_ADDRESSES = 256
"""Addresses kept free in the compute subnet for FSx, interface endpoints, controller and login nodes."""


@dataclass(frozen=True)
class SubnetPlan:
    compute: str
    secondary: str
    public: str

    @property
    def node_capacity(self) -> int:
        """Nodes that fit the compute subnet: one address each (EFA interfaces are `efa-only`, without IPs)."""
        size = ipaddress.IPv4Network(self.compute).num_addresses
        return size - AWS_RESERVED_PER_SUBNET - SERVICE_ADDRESSES


def plan_subnets(vpc_cidr: str) -> SubnetPlan:
    """The subnets of `vpc_cidr` (a /16 to /20 block)."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    halves = list(vpc.subnets(prefixlen_diff=1))
    quarters = list(halves[1].subnets(prefixlen_diff=1))
    sixteenths = list(quarters[1].subnets(prefixlen_diff=2))
    return SubnetPlan(compute=str(halves[0]), secondary=str(quarters[0]), public=str(sixteenths[0]))
