"""ExistingNetwork: a VPC and subnet of your own, used as they are; only the nodes' security group is made."""

from __future__ import annotations

from typing import Literal

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from fmcluster.config.models import Network
from fmcluster.config.regions import AZ_ID_PATTERN
from fmcluster.constructs.network import node_security_group
from fmcluster.constructs.props import prop_problems
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token

NO_ROUTE_TABLE_WARNING = "@aws-cdk/aws-ec2:noSubnetRouteTableId"
"""CDK's warning for a subnet imported without its route table id (nothing here reads the route table)."""


class ExistingNetwork(Construct):
    """A VPC and one subnet that exist already (a platform team's), by id: no VPC, subnet, route, NAT gateway,
    endpoint or flow log is created, and nothing is looked up at synth (`cdk synth` stays offline).

    The nodes' own security group (`efa_security_group`, the rules of `TrainingNetwork`'s) is created in the VPC.
    What the VPC must already have is the user's: `fmcluster validate --live` checks that the subnet lies in
    `availability_zone_id`, has a route out (`egress="nat"`) or the VPC endpoints the nodes call (`egress="none"`),
    and enough free addresses for the nodes.

    Example::

        network = ExistingNetwork(
            stack, "Network", vpc_id="vpc-0123456789abcdef0", subnet_id="subnet-0123456789abcdef0",
            availability_zone_id="use1-az6",
        )
        network.vpc, network.compute_subnet, network.efa_security_group  # as TrainingNetwork's

    Args:
        vpc_id: the VPC's id.
        subnet_id: the subnet of `vpc_id` the nodes (and a file system fmcluster creates) go in.
        availability_zone_id: the subnet's AZ ID, e.g. "use1-az6" (the capacity's; not checked at synth).
        egress: "nat" (default: the subnet routes out; nodes may also use HTTP) or "none" (endpoints only).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc_id: str,
        subnet_id: str,
        availability_zone_id: str,
        egress: Literal["nat", "none"] = "nat",
    ) -> None:
        _validated(vpc_id, subnet_id, availability_zone_id, egress)
        super().__init__(scope, construct_id)
        self.egress = egress
        # CDK takes zone names here only to group subnets it is given; none is, so the AZ ID stands in and is
        # never written into a template.
        self.vpc: ec2.IVpc = ec2.Vpc.from_vpc_attributes(
            self, "Vpc", vpc_id=vpc_id, availability_zones=[availability_zone_id]
        )
        """The VPC as an `ec2.IVpc` (no subnets: take `compute_subnet`)."""
        self.compute_subnet: ec2.ISubnet = ec2.Subnet.from_subnet_attributes(self, "ComputeSubnet", subnet_id=subnet_id)
        """The subnet the nodes go in."""
        cdk.Annotations.of(self.compute_subnet).acknowledge_warning(
            NO_ROUTE_TABLE_WARNING, "the subnet's routes are its owner's; validate --live reads them"
        )
        self.secondary_subnet: ec2.ISubnet | None = None
        """Always None: a second subnet is fmcluster's own VPC's (`TrainingNetwork`)."""
        self.efa_security_group = node_security_group(self, self.vpc, egress)
        """All traffic to and from itself (EFA needs both directions), HTTPS out; nothing in from outside."""

    @property
    def compute_subnets(self) -> ec2.SubnetSelection:
        """`SubnetSelection` of the compute subnet, for L2 constructs that take one."""
        return ec2.SubnetSelection(subnets=[self.compute_subnet])


def _validated(vpc_id: str, subnet_id: str, availability_zone_id: str, egress: str) -> None:
    """Nothing; or ValueError naming every problem with the props, one line each."""
    ids = {} if is_token(vpc_id) or is_token(subnet_id) else {"vpc_id": vpc_id, "subnet_id": subnet_id}
    problems = prop_problems(Network, egress=egress, **ids)
    if not is_token(availability_zone_id) and not AZ_ID_PATTERN.match(availability_zone_id):
        problems.append(
            Problem("availability_zone_id", f"must be an AZ ID like use1-az6; got {availability_zone_id!r}")
        )
    raise_if_any("ExistingNetwork", problems)
