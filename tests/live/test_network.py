"""A VPC and subnet of one's own (`network.vpc_id`/`subnet_id`), against stubbed EC2 responses.

Every response is checked against botocore's ec2 output shapes (DescribeSubnets, DescribeRouteTables,
DescribeVpcEndpoints) by the `stubs` fixture before it is queued.
"""

from __future__ import annotations

from fmcluster.live.network import check_endpoint_groups, check_subnet, check_vpc, network_checks
from fmcluster.live.preflight import checks
from tests.live.conftest import QUICKSTART, config_of

VPC = "vpc-0a1b2c3d4e5f60718"
SUBNET = "subnet-0a1b2c3d4e5f60718"
TABLE = "rtb-0123456789abcdef0"
OWN_VPC = {"vpc_id": VPC, "subnet_id": SUBNET}
BY_SUBNET = [{"Name": "association.subnet-id", "Values": [SUBNET]}]
MAIN_TABLE = [{"Name": "vpc-id", "Values": [VPC]}, {"Name": "association.main", "Values": ["true"]}]


def subnet(zone="use1-az6", free=250, vpc=VPC, block="10.0.4.0/22"):
    found = {"SubnetId": SUBNET, "VpcId": vpc, "AvailabilityZoneId": zone, "AvailableIpAddressCount": free}
    return {"Subnets": [{**found, "CidrBlock": block} if block else {**found, "Ipv6Native": True}]}


def table(*routes):
    local = {"DestinationCidrBlock": "10.0.0.0/16", "GatewayId": "local", "State": "active"}
    return {"RouteTables": [{"RouteTableId": TABLE, "VpcId": VPC, "Routes": [local, *routes]}]}


NAT_ROUTE = {"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": "nat-0123456789abcdef0", "State": "active"}


def endpoint(name, kind="Interface", dns=True, tables=()):
    return {
        "VpcEndpointId": "vpce-0123456789abcdef0",
        "VpcEndpointType": kind,
        "VpcId": VPC,
        "ServiceName": f"com.amazonaws.us-east-1.{name}",
        "State": "Available",  # botocore's ec2 model spells the enum so
        "PrivateDnsEnabled": dns,
        "RouteTableIds": list(tables),
    }


def messages(stubs, responses, **network):
    config = config_of(QUICKSTART, network={**OWN_VPC, **network})
    stub = stubs()
    stub.ok("ec2", "DescribeSubnets", responses.pop(0), {"SubnetIds": [SUBNET]})
    for operation, response, params in responses:
        stub.ok("ec2", operation, response, params)
    return [problem.render("cluster.yaml") for problem in check_subnet(config, stub.aws())]


def test_without_a_vpc_of_ones_own_nothing_is_checked():
    assert network_checks(config_of(QUICKSTART), None) == []


def test_a_vpc_of_ones_own_skips_the_vpc_nat_and_address_quotas():
    labels = [check.label for check in checks(config_of(QUICKSTART, network=OWN_VPC), None, "123456789012", None)]
    assert f"subnet {SUBNET}" in labels
    assert not any(label.startswith(("quota 'VPCs", "quota 'NAT", "quota 'EC2-VPC Elastic")) for label in labels)


def test_a_subnet_in_the_zone_with_room_and_a_nat_route_passes(stubs):
    assert messages(stubs, [subnet(), ("DescribeRouteTables", table(NAT_ROUTE), {"Filters": BY_SUBNET})]) == []


def test_a_subnet_in_another_zone_with_too_few_addresses(stubs):
    # the quickstart: 2 compute nodes and the HyperPod controller
    assert messages(
        stubs, [subnet("use1-az4", 2), ("DescribeRouteTables", table(NAT_ROUTE), {"Filters": BY_SUBNET})]
    ) == [
        f"cluster.yaml: network.subnet_id: subnet {SUBNET} is in use1-az4, not in availability_zone_id use1-az6 "
        "(where the capacity is); give a subnet of that zone",
        f"cluster.yaml: network.subnet_id: subnet {SUBNET} has 2 free addresses; the cluster's 3 instances take one "
        "each (EFA interfaces are efa-only and take none), plus the file system's (FSx does not document how many, "
        "unconfirmed)",
    ]


def test_an_ipv6_only_subnet_is_a_finding_not_a_crash(stubs):
    """An IPv6-only subnet has no CidrBlock (botocore ec2 Subnet: CidrBlock, Ipv6Native)."""
    assert messages(stubs, [subnet(block=None), ("DescribeRouteTables", table(NAT_ROUTE), {"Filters": BY_SUBNET})]) == [
        f"cluster.yaml: network.subnet_id: subnet {SUBNET} is IPv6-only (no IPv4 CidrBlock): the checks of the "
        "security groups that must admit the nodes judge IPv4 rules and cannot judge it, and whether HyperPod and PCS "
        "nodes run in an IPv6-only subnet is unconfirmed; give a subnet with an IPv4 block"
    ]
    stub = stubs().ok("ec2", "DescribeVpcEndpoints", {"VpcEndpoints": [guarded("ssm", "sg-0aaaaaaaaaaaaaaa1")]},
                      VPC_FILTER)  # fmt: skip
    stub.ok("ec2", "DescribeSubnets", subnet(block=None), {"SubnetIds": [SUBNET]})
    assert check_endpoint_groups(config_of(QUICKSTART, network=OWN_VPC), stub.aws()) == []


def test_a_subnet_of_another_vpc(stubs):
    other = "vpc-0fedcba9876543210"
    assert messages(stubs, [subnet(vpc=other)]) == [
        f"cluster.yaml: network.subnet_id: subnet {SUBNET} is in {other}, not in network.vpc_id {VPC}"
    ]


def test_a_missing_subnet(stubs):
    assert messages(stubs, [{"Subnets": []}]) == [
        f"cluster.yaml: network.subnet_id: subnet {SUBNET} does not exist in us-east-1"
    ]


def test_the_main_route_table_without_a_way_out(stubs):
    responses = [
        subnet(),
        ("DescribeRouteTables", {"RouteTables": []}, {"Filters": BY_SUBNET}),
        ("DescribeRouteTables", table(), {"Filters": MAIN_TABLE}),
    ]
    assert messages(stubs, responses) == [
        f"cluster.yaml: network.egress: subnet {SUBNET} has no route to 0.0.0.0/0 that the nodes can use (route "
        f"table {TABLE}); with egress: nat nodes need one (a NAT gateway, transit gateway or firewall), or set "
        "egress: none with the VPC endpoints the nodes call"
    ]


def test_an_internet_gateway_or_peering_route_is_no_way_out(stubs):
    """The nodes have no public address (AssociatePublicIpAddress false; HyperPod gives none), so an internet gateway
    does not carry their traffic; a peering connection carries none on to the peer's gateways (VPC peering guide,
    "VPC peering limitations": no edge to edge routing)."""
    igw = {"DestinationCidrBlock": "0.0.0.0/0", "GatewayId": "igw-0123456789abcdef0", "State": "active"}
    pcx = {"DestinationCidrBlock": "0.0.0.0/0", "VpcPeeringConnectionId": "pcx-0123456789abcdef0", "State": "active"}
    found = [
        messages(stubs, [subnet(), ("DescribeRouteTables", table(route), {"Filters": BY_SUBNET})])
        for route in (igw, pcx)
    ]
    start = f"cluster.yaml: network.egress: subnet {SUBNET} has no route to 0.0.0.0/0 that the nodes can use (route "
    end = (
        "; with egress: nat nodes need one (a NAT gateway, transit gateway or firewall), or set egress: none with the "
        "VPC endpoints the nodes call"
    )
    assert found == [
        [
            start + f"table {TABLE}): its route to 0.0.0.0/0 goes to igw-0123456789abcdef0, and an internet gateway "
            "carries only traffic of instances with a public IP address, and the nodes have none (fmcluster's launch "
            "templates set AssociatePublicIpAddress false, HyperPod gives its instances none); route 0.0.0.0/0 to a "
            'NAT gateway instead (VPC user guide, "Enable internet access for a VPC using an internet gateway")' + end
        ],
        [
            start + f"table {TABLE}): its route to 0.0.0.0/0 goes to pcx-0123456789abcdef0, and a VPC peering "
            "connection carries no traffic on to the internet or a NAT gateway of the peer VPC (VPC peering guide, "
            '"VPC peering limitations": no edge to edge routing)' + end
        ],
    ]


def test_a_transit_gateway_or_firewall_route_is_a_way_out(stubs):
    for route in (
        {"DestinationCidrBlock": "0.0.0.0/0", "TransitGatewayId": "tgw-0123456789abcdef0", "State": "active"},
        {"DestinationCidrBlock": "0.0.0.0/0", "NetworkInterfaceId": "eni-0123456789abcdef0", "State": "active"},
    ):
        assert messages(stubs, [subnet(), ("DescribeRouteTables", table(route), {"Filters": BY_SUBNET})]) == []


def test_a_blackhole_route_out(stubs):
    dead = {**NAT_ROUTE, "State": "blackhole"}
    assert messages(stubs, [subnet(), ("DescribeRouteTables", table(dead), {"Filters": BY_SUBNET})]) == [
        f"cluster.yaml: network.egress: subnet {SUBNET}'s route to 0.0.0.0/0 (route table {TABLE}) is a blackhole: "
        "its target is gone"
    ]


ALL_INTERFACES = ("ecr.api", "ecr.dkr", "ssm", "ssmmessages", "ec2messages", "logs", "monitoring", "sts",
                  "sagemaker.api", "aps-workspaces")  # fmt: skip
VPC_FILTER = {"Filters": [{"Name": "vpc-id", "Values": [VPC]}]}


def test_no_egress_with_every_endpoint_passes(stubs):
    endpoints = [endpoint("s3", "Gateway", dns=False, tables=[TABLE]), *map(endpoint, ALL_INTERFACES)]
    responses = [
        subnet(),
        ("DescribeRouteTables", table(), {"Filters": BY_SUBNET}),
        ("DescribeVpcEndpoints", {"VpcEndpoints": endpoints}, VPC_FILTER),
    ]
    assert messages(stubs, responses, egress="none") == []


def test_an_s3_interface_endpoint_beside_the_gateway_does_not_hide_it(stubs):
    """S3 has a gateway and an interface endpoint under one ServiceName (botocore ec2 VpcEndpoint VpcEndpointType):
    the interface one, listed last, must not stand in for the gateway the route table needs."""
    endpoints = [
        endpoint("s3", "Gateway", dns=False, tables=[TABLE]),
        endpoint("s3", "Interface", dns=False),
        *map(endpoint, ALL_INTERFACES),
    ]
    responses = [
        subnet(),
        ("DescribeRouteTables", table(), {"Filters": BY_SUBNET}),
        ("DescribeVpcEndpoints", {"VpcEndpoints": endpoints}, VPC_FILTER),
    ]
    assert messages(stubs, responses, egress="none") == []


def test_no_egress_with_endpoints_missing_or_unusable(stubs):
    endpoints = [
        endpoint("s3", "Gateway", dns=False, tables=["rtb-0fedcba9876543210"]),
        endpoint("ssm", dns=False),
        *map(endpoint, ALL_INTERFACES[3:]),
    ]
    responses = [
        subnet(),
        ("DescribeRouteTables", table(), {"Filters": BY_SUBNET}),
        ("DescribeVpcEndpoints", {"VpcEndpoints": endpoints}, VPC_FILTER),
    ]
    assert messages(stubs, responses, egress="none") == [
        "cluster.yaml: network.egress: with egress: none the nodes reach AWS through VPC endpoints only; "
        f"{VPC} has none for com.amazonaws.us-east-1.ecr.api, com.amazonaws.us-east-1.ecr.dkr",
        "cluster.yaml: network.egress: the com.amazonaws.us-east-1.s3 gateway endpoint is not in the subnet's route "
        f"table ({TABLE}); add it, or S3 is out of reach",
        "cluster.yaml: network.egress: warning: the com.amazonaws.us-east-1.ssm endpoint has private DNS off: the AWS "
        "SDKs on the nodes resolve the public name and, with egress: none, cannot reach it",
    ]


def group(group_id, *blocks, protocol="tcp", ports=(443, 443)):
    permission = {"IpProtocol": protocol, "IpRanges": [{"CidrIp": block} for block in blocks]}
    if protocol != "-1":
        permission |= {"FromPort": ports[0], "ToPort": ports[1]}
    return {"GroupId": group_id, "GroupName": group_id, "VpcId": VPC, "IpPermissions": [permission]}


def guarded(name, *group_ids, dns=True):
    found = endpoint(name, dns=dns)
    suffix = name.replace(".", "").replace("-", "")[:8].ljust(8, "0")
    return {**found, "VpcEndpointId": f"vpce-0{suffix}abcdef", "Groups": [{"GroupId": g} for g in group_ids]}


def endpoint_messages(stubs, endpoints, groups, group_ids):
    stub = stubs().ok("ec2", "DescribeVpcEndpoints", {"VpcEndpoints": endpoints}, VPC_FILTER)
    stub.ok("ec2", "DescribeSubnets", {"Subnets": [{"SubnetId": SUBNET, "CidrBlock": "10.0.4.0/22"}]},
            {"SubnetIds": [SUBNET]})  # fmt: skip
    if group_ids:
        stub.ok("ec2", "DescribeSecurityGroups", {"SecurityGroups": groups}, {"GroupIds": group_ids})
    config = config_of(QUICKSTART, network=OWN_VPC)
    return [problem.render("cluster.yaml") for problem in check_endpoint_groups(config, stub.aws())]


def test_interface_endpoints_must_admit_the_nodes_subnet_on_https(stubs):
    """Only interface endpoints of services the nodes call, with private DNS on (those take the calls), are judged;
    a rule for a block holding the subnet's, or all traffic, admits; another block or port does not."""
    endpoints = [
        endpoint("s3", "Gateway", dns=False, tables=[TABLE]),
        guarded("ssm", "sg-0aaaaaaaaaaaaaaa1"),  # admits 10.0.0.0/16 on 443
        guarded("logs", "sg-0bbbbbbbbbbbbbbb2"),  # admits another block only
        guarded("sts", "sg-0ccccccccccccccc3"),  # port 80 only
        guarded("ecr.api", "sg-0bbbbbbbbbbbbbbb2", "sg-0ddddddddddddddd4"),  # the second group admits all traffic
        guarded("monitoring", "sg-0bbbbbbbbbbbbbbb2", dns=False),  # private DNS off: not used (the egress check)
        guarded("kms", "sg-0bbbbbbbbbbbbbbb2"),  # a service the nodes do not call
    ]
    groups = [
        group("sg-0aaaaaaaaaaaaaaa1", "10.0.0.0/16"),
        group("sg-0bbbbbbbbbbbbbbb2", "10.1.0.0/16"),
        group("sg-0ccccccccccccccc3", "10.0.0.0/16", ports=(80, 80)),
        group("sg-0ddddddddddddddd4", "10.0.4.0/22", protocol="-1"),
    ]
    ids = ["sg-0aaaaaaaaaaaaaaa1", "sg-0bbbbbbbbbbbbbbb2", "sg-0ccccccccccccccc3", "sg-0ddddddddddddddd4"]
    closed = (
        "admits no HTTPS (TCP 443) from the nodes' subnet 10.0.4.0/22 (security groups {group}): with its private "
        "DNS on, the nodes' calls to that service go to it and time out; add an inbound rule for that block (the "
        "nodes' own group is made by the deploy, so no rule can name it before)"
    )
    assert endpoint_messages(stubs, endpoints, groups, ids) == [
        "cluster.yaml: network.vpc_id: the com.amazonaws.us-east-1.logs endpoint vpce-0logs0000abcdef "
        + closed.format(group="sg-0bbbbbbbbbbbbbbb2"),
        "cluster.yaml: network.vpc_id: the com.amazonaws.us-east-1.sts endpoint vpce-0sts00000abcdef "
        + closed.format(group="sg-0ccccccccccccccc3"),
    ]


def test_without_interface_endpoints_there_is_nothing_to_admit(stubs):
    stub = stubs().ok("ec2", "DescribeVpcEndpoints", {"VpcEndpoints": []}, VPC_FILTER)
    assert check_endpoint_groups(config_of(QUICKSTART, network=OWN_VPC), stub.aws()) == []
    labels = [check.label for check in network_checks(config_of(QUICKSTART, network=OWN_VPC), None)]
    assert labels == [f"vpc {VPC}", f"subnet {SUBNET}", f"endpoint security groups in {VPC}"]


VPC_ID_FILTER = {"Filters": [{"Name": "vpc-id", "Values": [VPC]}]}


def vpc_messages(stubs, tenancy="default", support=True, hostnames=True, orchestrator=None, found=True):
    """DescribeVpcs (InstanceTenancy default|dedicated|host) and DescribeVpcAttribute (EnableDnsSupport,
    EnableDnsHostnames: AttributeBooleanValue), botocore ec2."""
    vpc = {"VpcId": VPC, "State": "available", "CidrBlock": "10.0.0.0/16", "InstanceTenancy": tenancy}
    stub = stubs().ok("ec2", "DescribeVpcs", {"Vpcs": [vpc] if found else []}, VPC_ID_FILTER)
    if found:
        for attribute, member, value in (
            ("enableDnsSupport", "EnableDnsSupport", support),
            ("enableDnsHostnames", "EnableDnsHostnames", hostnames),
        ):
            stub.ok("ec2", "DescribeVpcAttribute", {"VpcId": VPC, member: {"Value": value}},
                    {"VpcId": VPC, "Attribute": attribute})  # fmt: skip
    extra = {"orchestrator": orchestrator} if orchestrator else {}
    config = config_of(QUICKSTART, network=OWN_VPC, **extra)
    return [problem.render("cluster.yaml") for problem in check_vpc(config, stub.aws())]


def test_a_vpc_with_dns_on_and_default_tenancy_passes(stubs):
    assert vpc_messages(stubs) == []


def test_a_missing_vpc(stubs):
    assert vpc_messages(stubs, found=False) == [f"cluster.yaml: network.vpc_id: {VPC} does not exist in us-east-1"]


def test_dns_off_and_dedicated_tenancy(stubs):
    dns = (
        f"cluster.yaml: network.vpc_id: {VPC} has {{off}} off: the nodes need DNS resolution and DNS hostnames (PCS "
        "nodes cannot register without them, and interface endpoints' private DNS needs both); turn them on (aws ec2 "
        "modify-vpc-attribute)"
    )
    dedicated = f"cluster.yaml: network.vpc_id: {{level}}{VPC} has instance tenancy dedicated: every instance launched "
    assert vpc_messages(stubs, tenancy="dedicated", hostnames=False) == [
        dns.format(off="enableDnsHostnames"),
        dedicated.format(level="warning: ") + "in it is a Dedicated Instance; whether HyperPod's instances run so is "
        "unconfirmed",
    ]
    assert vpc_messages(stubs, tenancy="dedicated", support=False, hostnames=False, orchestrator={"type": "pcs"}) == [
        dns.format(off="enableDnsSupport and enableDnsHostnames"),
        dedicated.format(level="") + "in it is a Dedicated Instance; AWS PCS does not support dedicated tenancy (AWS "
        "PCS user guide, VPC and subnet requirements)",
    ]


def test_rules_by_group_or_prefix_list_are_unchecked_not_closed(stubs):
    """A rule naming another security group (it may be the nodes' own, once deployed) or a prefix list (its entries
    are not read) is reported unchecked; one naming the endpoint's own group admits nothing (the nodes do not carry
    it). botocore ec2 IpPermission: UserIdGroupPairs[].GroupId, PrefixListIds[].PrefixListId."""
    own, nodes = "sg-0aaaaaaaaaaaaaaa1", "sg-0eeeeeeeeeeeeeee5"
    rule = {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443}
    groups = [
        {"GroupId": own, "IpPermissions": [{**rule, "UserIdGroupPairs": [{"GroupId": own}]}]},
        {"GroupId": "sg-0bbbbbbbbbbbbbbb2", "IpPermissions": [{**rule, "UserIdGroupPairs": [{"GroupId": nodes}]}]},
        {
            "GroupId": "sg-0ccccccccccccccc3",
            "IpPermissions": [{**rule, "PrefixListIds": [{"PrefixListId": "pl-0123"}]}],
        },
    ]
    endpoints = [guarded("ssm", own), guarded("logs", "sg-0bbbbbbbbbbbbbbb2"), guarded("sts", "sg-0ccccccccccccccc3")]
    ids = [own, "sg-0bbbbbbbbbbbbbbb2", "sg-0ccccccccccccccc3"]
    unchecked = (
        "admits HTTPS (TCP 443) from the nodes' subnet 10.0.4.0/22 only through {source}, unchecked: a security group "
        "admits the nodes only if they carry it (their own group is made by the deploy), and a prefix list's entries "
        "are not read"
    )
    assert endpoint_messages(stubs, endpoints, groups, ids) == [
        "cluster.yaml: network.vpc_id: warning: the com.amazonaws.us-east-1.logs endpoint vpce-0logs0000abcdef "
        + unchecked.format(source=nodes),
        "cluster.yaml: network.vpc_id: the com.amazonaws.us-east-1.ssm endpoint vpce-0ssm00000abcdef admits no HTTPS "
        f"(TCP 443) from the nodes' subnet 10.0.4.0/22 (security groups {own}): with its private DNS on, the nodes' "
        "calls to that service go to it and time out; add an inbound rule for that block (the nodes' own group is "
        "made by the deploy, so no rule can name it before)",
        "cluster.yaml: network.vpc_id: warning: the com.amazonaws.us-east-1.sts endpoint vpce-0sts00000abcdef "
        + unchecked.format(source="pl-0123"),
    ]
