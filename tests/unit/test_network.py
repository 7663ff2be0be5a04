"""TrainingNetwork, read from the session's synthesized examples (quickstart: egress nat, one AZ;
p6-b300-isolated: egress none, a secondary AZ, a /20 block) and from small apps for library-use errors."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from fmcluster.constructs import TrainingNetwork
from fmcluster.constructs.network import INTERFACE_ENDPOINTS
from fmcluster.endpoints import INTERFACE_ENDPOINT_SERVICES, endpoint_keys, endpoint_services
from tests.support import properties_of as resources

pytestmark = pytest.mark.synth


@pytest.fixture(scope="module")
def nat(synthesized) -> dict:
    return synthesized["quickstart"].templates["quickstart-network"]


@pytest.fixture(scope="module")
def isolated(synthesized) -> dict:
    return synthesized["p6-b300-isolated"].templates["b300-isolated-network"]


def test_subnets_are_placed_by_az_id_never_by_name(nat, isolated):
    for template in (nat, isolated):
        for subnet in resources(template, "AWS::EC2::Subnet"):
            assert "AvailabilityZoneId" in subnet and "AvailabilityZone" not in subnet
            assert subnet["MapPublicIpOnLaunch"] is False


def test_nat_egress_has_a_public_subnet_and_one_nat_gateway(nat):
    subnets = {s["CidrBlock"]: s["AvailabilityZoneId"] for s in resources(nat, "AWS::EC2::Subnet")}
    assert subnets == {"10.0.0.0/17": "use1-az6", "10.0.192.0/20": "use1-az6"}
    assert len(resources(nat, "AWS::EC2::NatGateway")) == 1
    routes = resources(nat, "AWS::EC2::Route")
    assert sorted("NatGatewayId" in r for r in routes) == [False, True]
    assert resources(nat, "AWS::EC2::VPCEndpoint")[0]["VpcEndpointType"] == "Gateway"


def test_no_egress_means_no_internet_path_and_interface_endpoints(isolated):
    for kind in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::EIP"):
        assert resources(isolated, kind) == []
    assert all("DestinationCidrBlock" not in r for r in resources(isolated, "AWS::EC2::Route"))
    endpoints = resources(isolated, "AWS::EC2::VPCEndpoint")
    interface = [e for e in endpoints if e.get("VpcEndpointType") == "Interface"]
    # this example runs on PCS with Managed Prometheus: every cluster's 8, AWS PCS's and aps-workspaces (no SageMaker
    # API: only HyperPod's agents call it)
    assert len(interface) == len(endpoint_keys(("Pcs",), managed_prometheus=True)) == 10
    assert all(e["PrivateDnsEnabled"] is True for e in interface)
    assert len(endpoints) - len(interface) == 1  # the S3 gateway endpoint


def test_pcs_nodes_without_internet_reach_pcs_through_its_endpoint(isolated):
    # AWS PCS user guide, "Access AWS PCS using an interface endpoint": com.amazonaws.<region>.pcs, or nodes in a
    # VPC without internet cannot call RegisterComputeNodeGroupInstance.
    names = [e["ServiceName"] for e in resources(isolated, "AWS::EC2::VPCEndpoint")]
    assert "com.amazonaws.us-west-2.pcs" in names


def test_the_endpoints_validate_live_looks_for_are_the_ones_fmcluster_creates(isolated):
    """fmcluster.endpoints names them for `validate --live` without CDK: the same as the synthesized ServiceNames."""
    for key, attribute in INTERFACE_ENDPOINTS.items():
        assert getattr(ec2.InterfaceVpcEndpointAwsService, attribute).short_name == INTERFACE_ENDPOINT_SERVICES[key]
    names = {str(e["ServiceName"]) for e in resources(isolated, "AWS::EC2::VPCEndpoint")}
    created = {name if name.startswith("com.") else "" for name in names}  # the S3 gateway's name is an Fn::Join
    keys = endpoint_keys(("Pcs",), managed_prometheus=True)
    assert set(endpoint_services("us-west-2", keys)) - {"com.amazonaws.us-west-2.s3"} == created - {""}


def test_the_endpoints_follow_the_orchestrator_and_managed_prometheus():
    """A PCS cluster without Managed Prometheus gets neither the SageMaker API's endpoint (only HyperPod's agents call
    it) nor aps-workspaces' (nothing remote-writes)."""
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    keys = endpoint_keys(("Pcs",), managed_prometheus=False)
    TrainingNetwork(stack, "N", availability_zone_id="use1-az6", egress="none", interface_endpoints=keys)
    names = {str(e["ServiceName"]) for e in resources(Template.from_stack(stack).to_json(), "AWS::EC2::VPCEndpoint")}
    called = ("ecr.api", "ecr.dkr", "ssm", "ssmmessages", "ec2messages", "logs", "monitoring", "sts", "pcs")
    services = {f"com.amazonaws.us-east-1.{name}" for name in called}
    assert {name for name in names if name.startswith("com.")} == services


def test_hyperpod_networks_have_no_pcs_endpoint():
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    TrainingNetwork(stack, "N", availability_zone_id="use1-az6", egress="none")
    names = [e["ServiceName"] for e in resources(Template.from_stack(stack).to_json(), "AWS::EC2::VPCEndpoint")]
    assert len(names) == len(INTERFACE_ENDPOINTS) + 1 and not any(str(name).endswith(".pcs") for name in names)


def test_interface_endpoints_sit_in_both_azs_when_there_is_a_secondary_subnet(isolated):
    private = {
        logical_id for logical_id, r in isolated["Resources"].items()
        if r["Type"] == "AWS::EC2::Subnet" and r["Properties"]["CidrBlock"] in ("172.16.0.0/21", "172.16.8.0/22")
    }  # fmt: skip
    interface = [e for e in resources(isolated, "AWS::EC2::VPCEndpoint") if e.get("VpcEndpointType") == "Interface"]
    assert interface and all({ref["Ref"] for ref in e["SubnetIds"]} == private for e in interface)
    stack = cdk.Stack(cdk.App(), "One", env=cdk.Environment(region="us-east-1"))
    TrainingNetwork(stack, "N", availability_zone_id="use1-az6", egress="none")
    single = [e for e in resources(Template.from_stack(stack).to_json(), "AWS::EC2::VPCEndpoint")
              if e.get("VpcEndpointType") == "Interface"]  # fmt: skip
    assert {len(e["SubnetIds"]) for e in single} == {1}


def test_secondary_az_gets_its_own_private_subnet(isolated):
    subnets = {s["CidrBlock"]: s["AvailabilityZoneId"] for s in resources(isolated, "AWS::EC2::Subnet")}
    assert subnets == {"172.16.0.0/21": "usw2-az2", "172.16.8.0/22": "usw2-az1"}


def test_efa_security_group_allows_all_traffic_to_and_from_itself(nat):
    template = Template.from_json(nat)
    self_ref = {"Fn::GetAtt": [Match.string_like_regexp("EfaSecurityGroup"), "GroupId"]}
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress", {"IpProtocol": "-1", "SourceSecurityGroupId": self_ref}
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress", {"IpProtocol": "-1", "DestinationSecurityGroupId": self_ref}
    )


def test_nothing_is_open_to_the_internet_inbound(nat, isolated):
    for template in (nat, isolated):
        for group in resources(template, "AWS::EC2::SecurityGroup"):
            for rule in group.get("SecurityGroupIngress", []):
                assert rule.get("CidrIp") not in ("0.0.0.0/0",) and rule.get("CidrIpv6") != "::/0"
        for rule in resources(template, "AWS::EC2::SecurityGroupIngress"):
            assert rule.get("CidrIp") != "0.0.0.0/0"


def test_endpoint_security_group_admits_https_from_the_vpc_only(isolated):
    groups = [g for g in resources(isolated, "AWS::EC2::SecurityGroup") if "endpoints" in g["GroupDescription"]]
    assert groups[0]["SecurityGroupIngress"] == [
        {
            "CidrIp": "172.16.0.0/20",
            "Description": "HTTPS from the VPC",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]


def test_flow_logs_capture_all_traffic_and_are_retained_by_default(nat, isolated):
    assert resources(nat, "AWS::EC2::FlowLog")[0]["TrafficType"] == "ALL"
    groups = {
        name: next(r for r in t["Resources"].values() if r["Type"] == "AWS::Logs::LogGroup")
        for name, t in (("nat", nat), ("isolated", isolated))
    }
    assert groups["nat"]["DeletionPolicy"] == "Retain"
    assert groups["isolated"]["DeletionPolicy"] == "Delete"  # that example sets retain_on_delete: false
    assert groups["nat"]["Properties"]["RetentionInDays"] == 365


def test_library_users_get_an_ivpc_and_a_subnet_selection():
    stack = cdk.Stack(cdk.App(), "Lib")
    network = TrainingNetwork(stack, "Net", availability_zone_id="use1-az4")
    ec2.SecurityGroup(stack, "Mine", vpc=network.vpc)
    assert network.compute_subnets.subnets == [network.compute_subnet]
    Template.from_stack(stack).resource_count_is("AWS::EC2::SecurityGroup", 2)


def test_unresolved_tokens_are_not_validated():
    stack = cdk.Stack(cdk.App(), "Tokens")
    az = cdk.CfnParameter(stack, "Az").value_as_string
    TrainingNetwork(stack, "Net", availability_zone_id=az)
    Template.from_stack(stack).has_resource_properties("AWS::EC2::Subnet", {"AvailabilityZoneId": {"Ref": "Az"}})


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"availability_zone_id": "us-east-1a"},
            "TrainingNetwork: availability_zone_id: must be an AZ ID like use1-az6; got 'us-east-1a'",
        ),
        (
            {"availability_zone_id": "use1-az1", "secondary_availability_zone_id": "b"},
            "TrainingNetwork: secondary_availability_zone_id: must be an AZ ID like use1-az6; got 'b'",
        ),
        (
            {"availability_zone_id": "use1-az1", "vpc_cidr": "10.0.0.0/8"},
            "TrainingNetwork: vpc_cidr: must be a /16 to /20 block; got /8",
        ),
        (
            {"availability_zone_id": "use1-az1", "egress": "igw"},
            "TrainingNetwork: egress: must be 'nat' or 'none'; got 'igw'",
        ),
        # Every interface endpoint gets the compute and the secondary subnet; EC2 refuses two endpoint subnets in one
        # AZ (CreateVpcEndpoint error DuplicateSubnetsInSameZone: "Found another VPC endpoint subnet in the
        # availability zone of subnet-..."), so the construct refuses it as the cluster file's rule does.
        (
            {"availability_zone_id": "use1-az1", "secondary_availability_zone_id": "use1-az1"},
            "TrainingNetwork: secondary_availability_zone_id: must differ from availability_zone_id; both are "
            "'use1-az1'",
        ),
    ],
    ids=["az-name", "secondary", "cidr-size", "egress", "secondary-same-az"],
)
def test_construct_rejects_bad_props(props, message):
    with pytest.raises(ValueError) as error:
        TrainingNetwork(cdk.Stack(cdk.App(), "Bad"), "Net", **props)
    assert str(error.value) == message
