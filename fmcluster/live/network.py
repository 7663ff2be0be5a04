"""A VPC and subnet of your own (`network.vpc_id`, `network.subnet_id`): the subnet is in the VPC and in
`availability_zone_id`, has free addresses for the nodes, and a way out: a default route (`egress: nat`) or the VPC
endpoints fmcluster would create in its own VPC (`egress: none`); and every interface endpoint of a service the nodes
call that has private DNS on (whatever `egress` says, it then takes the VPC's calls to that service) admits the
nodes' subnet on TCP 443.

Sources: EC2 API reference, DescribeSubnets (VpcId, AvailabilityZoneId, AvailableIpAddressCount), DescribeRouteTables
(`association.subnet-id`, `association.main` filters; a subnet without an explicit association uses its VPC's main
route table: VPC user guide, "Subnet route tables"; Route State active|blackhole), DescribeVpcEndpoints (ServiceName,
VpcEndpointType Interface|Gateway, State, RouteTableIds, PrivateDnsEnabled, Groups), DescribeSecurityGroups
(IpPermissions); `HTTPS` below for the endpoints' security groups; EC2 user guide, EFA: `efa-only`
interfaces take no IP address, so a node takes one address of its subnet (FACTS.md).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.endpoints import GATEWAY_ENDPOINTS, cluster_endpoint_keys, endpoint_services
from fmcluster.live.aws import Aws
from fmcluster.live.runner import Check
from fmcluster.live.security_rules import ipv4_block, ipv6_only, judge
from fmcluster.problems import Problem, warning

ROUTE_TARGETS = ("NatGatewayId", "TransitGatewayId", "NetworkInterfaceId", "InstanceId", "CoreNetworkArn")
"""Targets of a default route that can carry the nodes' traffic out (botocore ec2 `Route`): a NAT gateway, a transit
gateway, an appliance (instance or its interface, e.g. a firewall or NAT instance) or a Cloud WAN core network. Whether
the network beyond a transit gateway or core network reaches the internet is not visible from this VPC."""
NOT_A_WAY_OUT = {
    "igw-": "an internet gateway carries only traffic of instances with a public IP address, and the nodes have none "
    "(fmcluster's launch templates set AssociatePublicIpAddress false, HyperPod gives its instances none); route "
    '0.0.0.0/0 to a NAT gateway instead (VPC user guide, "Enable internet access for a VPC using an internet '
    'gateway")',
    "pcx-": "a VPC peering connection carries no traffic on to the internet or a NAT gateway of the peer VPC (VPC "
    'peering guide, "VPC peering limitations": no edge to edge routing)',
}
"""Default-route targets that look like a way out but are not one for the nodes, keyed by id prefix, with why."""
HTTPS = (443, 443)
"""What the nodes' AWS SDKs call an AWS service's interface endpoint on: HTTPS. The endpoint's network interfaces take
the security groups given to it, which must admit its clients (AWS knowledge center, "How do I configure security
groups and network ACLs when I create an Amazon VPC interface endpoint"; the PrivateLink guide's exact wording on 443
unconfirmed here)."""
USABLE_ENDPOINT_STATES = ("available", "pending", "pendingacceptance")
"""Endpoint states that carry (or will carry) traffic, compared without case: botocore's ec2 model spells the State
enum `Available`, `Pending`, `PendingAcceptance`; the CLI's answers show `available` (unconfirmed which one the API
sends)."""


def network_checks(config: ClusterConfig, aws: Aws) -> list[Check]:
    if config.network.vpc_id is None:
        return []
    return [
        Check(f"vpc {config.network.vpc_id}", "network.vpc_id", partial(check_vpc, config, aws)),
        Check(f"subnet {config.network.subnet_id}", "network.subnet_id", partial(check_subnet, config, aws)),
        Check(
            f"endpoint security groups in {config.network.vpc_id}",
            "network.vpc_id",
            partial(check_endpoint_groups, config, aws),
        ),
    ]


DNS_ATTRIBUTES = {"enableDnsSupport": "EnableDnsSupport", "enableDnsHostnames": "EnableDnsHostnames"}
"""DescribeVpcAttribute's Attribute -> its answer's member (botocore ec2 VpcAttributeName, DescribeVpcAttributeResult).
Both must be on: "The VPC must have a DNS hostname and DNS resolution support. Otherwise, nodes can't register"
(AWS PCS user guide, "AWS PCS VPC and subnet requirements and considerations"; the same page: "AWS PCS doesn't
support a VPC with dedicated instance tenancy"), and an interface endpoint's
private DNS, which the nodes need with `egress: none`, works only with both on (PrivateLink guide, "DNS hostnames":
enableDnsHostnames and enableDnsSupport)."""


def check_vpc(config: ClusterConfig, aws: Aws) -> list[Problem]:
    """The VPC exists, resolves DNS and gives its instances DNS hostnames, and does not force dedicated tenancy."""
    path, vpc_id = "network.vpc_id", config.network.vpc_id
    vpcs = aws.call("ec2", "DescribeVpcs", Filters=[{"Name": "vpc-id", "Values": [vpc_id]}]).get("Vpcs", [])
    if not vpcs:
        return [Problem(path, f"{vpc_id} does not exist in {config.region}")]
    problems = []
    off = [
        attribute
        for attribute, member in DNS_ATTRIBUTES.items()
        if not aws.call("ec2", "DescribeVpcAttribute", VpcId=vpc_id, Attribute=attribute).get(member, {}).get("Value")
    ]
    if off:
        problems.append(
            Problem(
                path,
                f"{vpc_id} has {' and '.join(off)} off: the nodes need DNS resolution and DNS hostnames (PCS nodes "
                "cannot register without them, and interface endpoints' private DNS needs both); turn them on "
                "(aws ec2 modify-vpc-attribute)",
            )
        )
    tenancy = vpcs[0].get("InstanceTenancy")
    if tenancy == "dedicated":
        level, consequence = orchestrators.of(config.orchestrator.type).DEDICATED_TENANCY
        problems.append(
            (Problem if level == "error" else warning)(
                path,
                f"{vpc_id} has instance tenancy dedicated: every instance launched in it is a Dedicated Instance; "
                + consequence,
            )
        )
    return problems


def nodes_in_subnet(config: ClusterConfig) -> int:
    """Instances that take an address in the subnet: compute nodes, and the controller (HyperPod) or head node
    (PCS), and a login node. One each: a node's EFA interfaces are `efa-only` (no address)."""
    rules = orchestrators.of(config.orchestrator.type)
    return int(rules.nodes(config.orchestrator, config.observability, config.total_nodes))


def check_subnet(config: ClusterConfig, aws: Aws) -> list[Problem]:
    path, subnet_id, vpc_id = "network.subnet_id", config.network.subnet_id, config.network.vpc_id
    subnets = aws.call("ec2", "DescribeSubnets", SubnetIds=[subnet_id]).get("Subnets", [])
    if not subnets:
        return [Problem(path, f"subnet {subnet_id} does not exist in {config.region}")]
    subnet = subnets[0]
    problems = []
    if subnet.get("VpcId") != vpc_id:
        return [Problem(path, f"subnet {subnet_id} is in {subnet.get('VpcId')}, not in network.vpc_id {vpc_id}")]
    if ipv4_block(subnet) is None:
        problems.append(Problem(path, ipv6_only(str(subnet_id))))
    zone = subnet.get("AvailabilityZoneId")
    if zone != config.availability_zone_id:
        problems.append(
            Problem(
                path,
                f"subnet {subnet_id} is in {zone}, not in availability_zone_id {config.availability_zone_id} "
                "(where the capacity is); give a subnet of that zone",
            )
        )
    free, needed = subnet.get("AvailableIpAddressCount", 0), nodes_in_subnet(config)
    if free < needed:
        problems.append(
            Problem(
                path,
                f"subnet {subnet_id} has {free} free addresses; the cluster's {needed} instances take one each "
                "(EFA interfaces are efa-only and take none), plus the file system's (FSx does not document how "
                "many, unconfirmed)",
            )
        )
    assert subnet_id is not None and vpc_id is not None  # network_checks runs only with both
    routes = _route_table(aws, subnet_id, vpc_id)
    if config.network.egress == "nat":
        problems += _route_out(subnet_id, routes)
    else:
        problems += _endpoints(config, aws, routes)
    return problems


def _route_table(aws: Aws, subnet_id: str, vpc_id: str) -> dict[str, Any] | None:
    """The subnet's route table: its own association, else its VPC's main table."""
    for filters in (
        [{"Name": "association.subnet-id", "Values": [subnet_id]}],
        [{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "association.main", "Values": ["true"]}],
    ):
        tables = list(aws.pages("ec2", "DescribeRouteTables", "RouteTables", Filters=filters))
        if tables:
            return tables[0]
    return None


def _route_out(subnet_id: str, table: dict[str, Any] | None) -> list[Problem]:
    path = "network.egress"
    where = f"route table {table['RouteTableId']}" if table else "no route table"
    defaults = [route for route in (table or {}).get("Routes", []) if route.get("DestinationCidrBlock") == "0.0.0.0/0"]
    ways_out = [route for route in defaults if any(route.get(target) for target in ROUTE_TARGETS)]
    if not ways_out:
        target = next((_target(route) for route in defaults if _target(route)[:4] in NOT_A_WAY_OUT), "")
        reason = f": its route to 0.0.0.0/0 goes to {target}, and {NOT_A_WAY_OUT[target[:4]]}" if target else ""
        return [
            Problem(
                path,
                f"subnet {subnet_id} has no route to 0.0.0.0/0 that the nodes can use ({where}){reason}; with "
                "egress: nat nodes need one (a NAT gateway, transit gateway or firewall), or set egress: none with the "
                "VPC endpoints the nodes call",
            )
        ]
    if all(route.get("State") == "blackhole" for route in ways_out):
        return [Problem(path, f"subnet {subnet_id}'s route to 0.0.0.0/0 ({where}) is a blackhole: its target is gone")]
    return []


def _target(route: dict[str, Any]) -> str:
    """The id a route sends its traffic to (an internet or virtual private gateway's, a peering connection's)."""
    return str(route.get("GatewayId") or route.get("VpcPeeringConnectionId") or "")


def _endpoints(config: ClusterConfig, aws: Aws, table: dict[str, Any] | None) -> list[Problem]:
    path = "network.egress"
    found = _usable_endpoints(config, aws)
    problems = []
    missing = []
    for service in endpoint_services(config.region, cluster_endpoint_keys(config)):
        gateway = service.rsplit(".", 1)[-1] in GATEWAY_ENDPOINTS
        endpoint = found.get((service, "Gateway" if gateway else "Interface"))
        if endpoint is None:
            missing.append(service)
        elif gateway:
            if table is None or table["RouteTableId"] not in endpoint.get("RouteTableIds", []):
                problems.append(
                    Problem(
                        path,
                        f"the {service} gateway endpoint is not in the subnet's route table "
                        f"({table['RouteTableId'] if table else 'none'}); add it, or S3 is out of reach",
                    )
                )
        elif not endpoint.get("PrivateDnsEnabled"):
            problems.append(
                warning(
                    path,
                    f"the {service} endpoint has private DNS off: the AWS SDKs on the nodes resolve the public "
                    "name and, with egress: none, cannot reach it",
                )
            )
    if missing:
        problems.insert(
            0,
            Problem(
                path,
                f"with egress: none the nodes reach AWS through VPC endpoints only; {config.network.vpc_id} has "
                f"none for {', '.join(missing)}",
            ),
        )
    return problems


def _usable_endpoints(config: ClusterConfig, aws: Aws) -> dict[tuple[str, str], dict[str, Any]]:
    """The VPC's endpoints that carry (or will carry) traffic, by service name and type (`Interface`, `Gateway`: S3
    has both kinds, under one service name)."""
    return {
        (endpoint["ServiceName"], endpoint.get("VpcEndpointType", "")): endpoint
        for endpoint in aws.pages(
            "ec2",
            "DescribeVpcEndpoints",
            "VpcEndpoints",
            Filters=[{"Name": "vpc-id", "Values": [config.network.vpc_id]}],
        )
        if str(endpoint.get("State", "")).lower() in USABLE_ENDPOINT_STATES
    }


def check_endpoint_groups(config: ClusterConfig, aws: Aws) -> list[Problem]:
    """Every interface endpoint of a service the nodes call, with private DNS on, admits the nodes' subnet on 443:
    whatever `network.egress` says, such an endpoint takes the VPC's calls to its service's public name."""
    path, subnet_id = "network.vpc_id", config.network.subnet_id
    services = endpoint_services(config.region, cluster_endpoint_keys(config))
    endpoints = [
        (service, endpoint)
        for (service, kind), endpoint in sorted(_usable_endpoints(config, aws).items())
        if service in services and kind == "Interface" and endpoint.get("PrivateDnsEnabled")
    ]
    if not endpoints:
        return []
    subnets = aws.call("ec2", "DescribeSubnets", SubnetIds=[subnet_id]).get("Subnets", [])
    if not subnets:
        return []  # the subnet check says it does not exist
    block = ipv4_block(subnets[0])
    if block is None:
        return []  # the subnet check says it is IPv6-only
    group_ids = sorted({group["GroupId"] for _, endpoint in endpoints for group in endpoint.get("Groups", [])})
    described = aws.call("ec2", "DescribeSecurityGroups", GroupIds=group_ids)["SecurityGroups"] if group_ids else []
    groups = {group["GroupId"]: group for group in described}
    problems = []
    for service, endpoint in endpoints:
        ids = [group["GroupId"] for group in endpoint.get("Groups", [])]
        rules = [rule for group_id in ids for rule in groups.get(group_id, {}).get("IpPermissions", [])]
        verdict = judge(rules, HTTPS, block, not_theirs=ids)  # the nodes do not carry the endpoint's own groups
        if verdict.admitted:
            continue
        where = f"the {service} endpoint {endpoint.get('VpcEndpointId')}"
        if verdict.unchecked:
            problems.append(
                warning(
                    path,
                    f"{where} admits HTTPS (TCP 443) from the nodes' subnet {block} only through "
                    f"{', '.join(verdict.unchecked)}, unchecked: a security group admits the nodes only if they carry "
                    "it (their own group is made by the deploy), and a prefix list's entries are not read",
                )
            )
            continue
        problems.append(
            Problem(
                path,
                f"{where} admits no HTTPS (TCP 443) from the nodes' "
                f"subnet {block} (security groups {', '.join(ids) or 'none'}): with its private DNS on, the nodes' "
                "calls to that service go to it and time out; add an inbound rule for that block (the nodes' own "
                "group is made by the deploy, so no rule can name it before)",
            )
        )
    return problems
