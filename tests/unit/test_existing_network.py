"""ExistingNetwork: a VPC and subnet of one's own (examples/pcs-own-vpc.yaml), and its props checks."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from fmcluster.constructs import ExistingNetwork

pytestmark = pytest.mark.synth

VPC = "vpc-0a1b2c3d4e5f60718"
SUBNET = "subnet-0a1b2c3d4e5f60718"
NETWORK_TYPES = (
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    "AWS::EC2::NatGateway",
    "AWS::EC2::VPCEndpoint",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::RouteTable",
    "AWS::EC2::Route",
    "AWS::EC2::EIP",
    "AWS::EC2::FlowLog",
)


@pytest.fixture(scope="module")
def own_vpc(synthesized):
    return synthesized["pcs-own-vpc"]


def test_nothing_of_the_network_is_created_in_any_stack(own_vpc):
    made = {resource["Type"] for template in own_vpc.templates.values() for resource in template["Resources"].values()}
    assert made.isdisjoint(NETWORK_TYPES), sorted(made & set(NETWORK_TYPES))


def test_the_nodes_security_group_is_made_in_the_vpc_of_the_file(own_vpc):
    network = own_vpc.templates["pcs-own-vpc-network"]
    groups = [r["Properties"] for r in network["Resources"].values() if r["Type"] == "AWS::EC2::SecurityGroup"]
    assert [group["VpcId"] for group in groups] == [VPC]
    egress = {(rule["IpProtocol"], rule.get("FromPort")) for rule in groups[0]["SecurityGroupEgress"]}
    assert egress == {("tcp", 443), ("tcp", 80)}  # egress: nat; the self rules are resources of their own


def test_nodes_and_file_system_use_the_subnet_of_the_file(own_vpc):
    text = "".join(str(template) for template in own_vpc.templates.values())
    storage = own_vpc.templates["pcs-own-vpc-storage"]
    (file_system,) = [r for r in storage["Resources"].values() if r["Type"] == "AWS::FSx::FileSystem"]
    assert file_system["Properties"]["SubnetIds"] == [SUBNET]
    groups = [r for r in own_vpc.templates["pcs-own-vpc-cluster"]["Resources"].values()
              if r["Type"] == "AWS::PCS::ComputeNodeGroup"]  # fmt: skip
    assert groups and all(group["Properties"]["SubnetIds"] == [SUBNET] for group in groups)
    assert "use1-az6" not in text  # the AZ ID stands in for CDK's zone names and is never written out


def test_outputs_name_the_vpc_and_subnet_of_the_file(own_vpc):
    outputs = own_vpc.templates["pcs-own-vpc-network"]["Outputs"]
    values = {str(output["Value"]) for output in outputs.values()}
    assert {VPC, SUBNET} <= values


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (
            {"vpc_id": "vpc-12", "subnet_id": SUBNET, "availability_zone_id": "use1-az6"},
            "ExistingNetwork: vpc_id: must be a VPC id like vpc-0123456789abcdef0; got 'vpc-12'",
        ),
        (
            {"vpc_id": VPC, "subnet_id": "subnet-xyz", "availability_zone_id": "use1-az6"},
            "ExistingNetwork: subnet_id: must be a subnet id like subnet-0123456789abcdef0; got 'subnet-xyz'",
        ),
        (
            {"vpc_id": VPC, "subnet_id": SUBNET, "availability_zone_id": "us-east-1a"},
            "ExistingNetwork: availability_zone_id: must be an AZ ID like use1-az6; got 'us-east-1a'",
        ),
    ],
)
def test_bad_props_are_refused_before_anything_is_built(props, expected):
    stack = cdk.Stack(cdk.App(), "Test")
    with pytest.raises(ValueError) as caught:
        ExistingNetwork(stack, "Network", **props)
    assert str(caught.value) == expected
    assert stack.node.try_find_child("Network") is None


def test_token_ids_are_passed_through():
    stack = cdk.Stack(cdk.App(), "Test")
    vpc_id = cdk.CfnParameter(stack, "VpcId").value_as_string
    network = ExistingNetwork(stack, "Network", vpc_id=vpc_id, subnet_id=SUBNET, availability_zone_id="use1-az6")
    assert network.compute_subnet.subnet_id == SUBNET
