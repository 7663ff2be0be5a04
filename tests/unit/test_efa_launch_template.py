"""EfaLaunchTemplate, read from one app synthesized once for this module.

The app holds a TrainingNetwork and a launch template for every catalog instance type (EFA wherever the type has
it), plus one each for a capacity block (with a KMS key, user data, AMI and instance profile), an ODCR, an L2 and
an L1 placement group, EFA turned off, deploy-time tokens, and an Amazon Linux root device with two security
groups. The same synthesized template feeds the layout checks, cdk-nag and cfn-lint. Bad props are checked in a
separate, never-synthesized stack.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from fmcluster import catalog
from fmcluster.constructs.efa import EfaLaunchTemplate
from fmcluster.constructs.network import TrainingNetwork
from tests import support

pytestmark = pytest.mark.synth

RESERVATION = "cr-0123456789abcdef0"
EFA_TYPES = ", ".join(name for name, row in catalog.CATALOG.items() if row.supports_efa)


def catalog_id(name: str) -> str:
    return "Type-" + name.replace(".", "-")


def catalog_capacity(row: catalog.InstanceType) -> dict:
    """How each catalog type's template buys capacity: P and Trn types through capacity blocks (some, like
    p5e and p6e-gb200, are sold no other way in us-east-1); g5 on demand (no capacity blocks)."""
    if row.family == "g5":
        return {}
    return {"capacity": "capacity-block", "reservation_id": RESERVATION}


@dataclass
class Synthesized:
    stack: cdk.Stack
    template: dict
    assertions: Template
    result: support.Synthesized
    constructs: dict[str, EfaLaunchTemplate]
    logical_ids: dict[str, str]

    def data(self, key: str) -> dict:
        """LaunchTemplateData of the launch template built under construct id `key`."""
        return self.resource(key)["Properties"]["LaunchTemplateData"]

    def resource(self, key: str) -> dict:
        return self.template["Resources"][self.logical_ids[key]]


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> Synthesized:
    app = support.app(tmp_path_factory.mktemp("efa"), context={})
    stack = cdk.Stack(app, "EfaTest", env=cdk.Environment(account="123456789012", region="us-east-1"))
    network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
    common = {"security_groups": [network.efa_security_group], "subnet": network.compute_subnet}
    built: dict[str, EfaLaunchTemplate] = {}
    for name, row in catalog.CATALOG.items():
        built[catalog_id(name)] = EfaLaunchTemplate(
            stack, catalog_id(name), instance_type=name, efa=row.supports_efa, **catalog_capacity(row), **common
        )

    key = kms.Key(stack, "RootVolumeKey", enable_key_rotation=True, description="Root volumes of training nodes")
    built["CapacityBlock"] = EfaLaunchTemplate(
        stack,
        "CapacityBlock",
        instance_type="p5.48xlarge",
        capacity="capacity-block",
        reservation_id=RESERVATION,
        root_volume_gib=1024,
        key=key,
        image_id="ami-0123456789abcdef0",
        instance_profile_arn="arn:aws:iam::123456789012:instance-profile/training-node",
        user_data=ec2.UserData.custom("#!/bin/bash\necho first boot\n"),
        **common,
    )
    built["Odcr"] = EfaLaunchTemplate(
        stack, "Odcr", instance_type="p5en.48xlarge", capacity="odcr", reservation_id=RESERVATION, **common
    )
    placement = ec2.PlacementGroup(stack, "ClusterPlacement", strategy=ec2.PlacementGroupStrategy.CLUSTER)
    built["PlacementL2"] = EfaLaunchTemplate(
        stack, "PlacementL2", instance_type="p6-b200.48xlarge", placement_group=placement, **common
    )
    cfn_placement = ec2.CfnPlacementGroup(stack, "CfnPlacement", strategy="cluster")
    built["PlacementL1"] = EfaLaunchTemplate(
        stack, "PlacementL1", instance_type="trn1.32xlarge", placement_group=cfn_placement, **common
    )
    built["NoEfa"] = EfaLaunchTemplate(stack, "NoEfa", instance_type="p4d.24xlarge", efa=False, **common)
    reservation = cdk.CfnParameter(stack, "ReservationId", allowed_pattern="^cr-[0-9a-f]{17}$")
    size = cdk.CfnParameter(stack, "RootGib", type="Number", min_value=100, max_value=16384)
    built["Tokens"] = EfaLaunchTemplate(
        stack,
        "Tokens",
        instance_type="p5e.48xlarge",
        capacity="odcr",
        reservation_id=reservation.value_as_string,
        root_volume_gib=size.value_as_number,
        image_id=cdk.CfnParameter(stack, "ImageId", type="AWS::EC2::Image::Id").value_as_string,
        **common,
    )
    extra = ec2.SecurityGroup(
        stack, "ExtraGroup", vpc=network.vpc, allow_all_outbound=False, description="A second group on every ENI"
    )
    built["AmazonLinux"] = EfaLaunchTemplate(
        stack,
        "AmazonLinux",
        instance_type="p5.48xlarge",
        security_groups=[network.efa_security_group, extra],
        subnet=network.compute_subnet,
        root_device_name="/dev/xvda",
        image_id="resolve:ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64",
    )
    cdk.Tags.of(stack).add("team", "ml-platform")

    result = support.synthesize(app, [stack])
    template = result.templates[stack.stack_name]
    return Synthesized(
        stack=stack,
        template=template,
        assertions=Template.from_json(template),
        result=result,
        constructs=built,
        logical_ids={key: stack.resolve(c.launch_template.logical_id) for key, c in built.items()},
    )


def layout(data: dict) -> list[tuple[int, int, str]]:
    return [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in data["NetworkInterfaces"]]


def efa_wired(data: dict) -> int:
    return sum(1 for i in data["NetworkInterfaces"] if i["InterfaceType"] == "efa-only")


# -- interface layout -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(catalog.CATALOG))
def test_every_catalog_type_wires_all_of_its_efa_devices(synthesized, name):
    row = catalog.CATALOG[name]
    interfaces = layout(synthesized.data(catalog_id(name)))
    assert efa_wired(synthesized.data(catalog_id(name))) == row.max_efa_interfaces
    assert interfaces[0] == (0, 0, "interface")  # the one ENA interface: card 0 / device 0
    assert [i for i in interfaces if i[2] == "interface"] == [(0, 0, "interface")]
    efa = [(card, device) for card, device, kind in interfaces if kind == "efa-only"]
    assert [card for card, _ in efa] == list(row.efa_cards)
    assert all(device == (1 if card == 0 else 0) for card, device in efa)
    assert all(card < row.network_cards for card, _, _ in interfaces)
    assert len(set(interfaces)) == len(interfaces)


def test_efa_interfaces_wired_per_node_equal_the_maximum_for_every_type(synthesized):
    figures = {
        name: (efa_wired(synthesized.data(catalog_id(name))), row.max_efa_interfaces)
        for name, row in catalog.CATALOG.items()
    }
    assert all(wired == maximum for wired, maximum in figures.values()), figures
    assert figures["p5.48xlarge"] == (32, 32) and figures["p6-b300.48xlarge"] == (16, 16)


@pytest.mark.parametrize(
    ("name", "card_0"),
    [
        ("p5.48xlarge", [(0, 0, "interface"), (0, 1, "efa-only")]),
        ("p6-b200.48xlarge", [(0, 0, "interface"), (0, 1, "efa-only")]),
        ("p6-b300.48xlarge", [(0, 0, "interface")]),  # card 0 is ENA only: EFA there fails the launch
        ("p6e-gb200.36xlarge", [(0, 0, "interface")]),
    ],
)
def test_card_0_carries_efa_only_where_the_instance_allows_it(synthesized, name, card_0):
    assert [i for i in layout(synthesized.data(catalog_id(name))) if i[0] == 0] == card_0


def test_p6e_gb200_uses_the_odd_efa_only_cards(synthesized):
    efa = [card for card, _, kind in layout(synthesized.data(catalog_id("p6e-gb200.36xlarge"))) if kind == "efa-only"]
    assert efa == [1, 3, 5, 7, 9, 11, 13, 15]


def test_without_efa_only_the_ena_interface_is_set(synthesized):
    assert layout(synthesized.data("NoEfa")) == [(0, 0, "interface")]
    assert layout(synthesized.data(catalog_id("g5.4xlarge"))) == [(0, 0, "interface")]


def test_every_interface_is_in_the_security_groups_and_subnet_and_dies_with_the_instance(synthesized):
    group = {"Fn::GetAtt": [Match.string_like_regexp("EfaSecurityGroup"), "GroupId"]}
    for key in synthesized.logical_ids:
        data = synthesized.data(key)
        assert "SecurityGroupIds" not in data and "SecurityGroups" not in data  # groups go on each interface
        for interface in data["NetworkInterfaces"]:
            assert len(interface["Groups"]) == (2 if key == "AmazonLinux" else 1)
            assert interface["Groups"][0]["Fn::GetAtt"][1] == "GroupId"
            assert interface["SubnetId"]["Ref"].startswith("NetworkComputeSubnet")
            assert interface["DeleteOnTermination"] is True
    synthesized.assertions.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": {"NetworkInterfaces": Match.array_with([Match.object_like({"Groups": [group]})])}},
    )


def test_no_interface_gets_a_public_ip(synthesized):
    for key in synthesized.logical_ids:
        interfaces = synthesized.data(key)["NetworkInterfaces"]
        assert interfaces[0]["AssociatePublicIpAddress"] is False
        for interface in interfaces[1:]:
            assert "AssociatePublicIpAddress" not in interface  # efa-only: no IP address at all
            assert not {"PrivateIpAddress", "PrivateIpAddresses", "SecondaryPrivateIpAddressCount"} & set(interface)


def test_the_construct_exposes_the_template_its_id_version_and_layout(synthesized):
    template = synthesized.constructs["CapacityBlock"]
    logical_id = synthesized.logical_ids["CapacityBlock"]
    assert synthesized.stack.resolve(template.launch_template_id) == {"Ref": logical_id}
    assert synthesized.stack.resolve(template.latest_version) == {"Fn::GetAtt": [logical_id, "LatestVersionNumber"]}
    assert template.interfaces == catalog.network_interfaces(catalog.lookup("p5.48xlarge"))
    assert template.instance is catalog.CATALOG["p5.48xlarge"]
    assert len(template.connections.security_groups) == 1


# -- capacity and placement -----------------------------------------------------------------------------------


def test_capacity_block_sets_the_market_type_and_targets_the_reservation(synthesized):
    data = synthesized.data("CapacityBlock")
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": RESERVATION}
    }
    assert "Placement" not in data


def test_odcr_targets_the_reservation_without_a_market_type(synthesized):
    data = synthesized.data("Odcr")
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": RESERVATION}
    }
    assert "InstanceMarketOptions" not in data


def test_on_demand_has_neither_market_type_nor_reservation(synthesized):
    data = synthesized.data("AmazonLinux")
    assert not {"InstanceMarketOptions", "CapacityReservationSpecification", "Placement"} & set(data)


def test_placement_group_is_named_when_given(synthesized):
    l2, l1 = synthesized.data("PlacementL2")["Placement"], synthesized.data("PlacementL1")["Placement"]
    (placement_id, attribute) = l2["GroupName"]["Fn::GetAtt"]
    assert placement_id.startswith("ClusterPlacement") and attribute == "GroupName"
    assert l1 == {"GroupName": {"Ref": "CfnPlacement"}}


def test_unresolved_tokens_pass_through_unchecked(synthesized):
    data = synthesized.data("Tokens")
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": {"Ref": "ReservationId"}
    }
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == {"Ref": "RootGib"}
    assert data["ImageId"] == {"Ref": "ImageId"}


# -- instance settings ----------------------------------------------------------------------------------------


def test_imdsv2_is_required_with_a_hop_limit_of_2_for_containers(synthesized):
    for key in synthesized.logical_ids:
        assert synthesized.data(key)["MetadataOptions"] == {
            "HttpEndpoint": "enabled",
            "HttpTokens": "required",
            "HttpPutResponseHopLimit": 2,
        }


def test_root_volume_is_encrypted_gp3_of_the_size_asked(synthesized):
    for key in synthesized.logical_ids:
        (mapping,) = synthesized.data(key)["BlockDeviceMappings"]
        assert mapping["DeviceName"] == ("/dev/xvda" if key == "AmazonLinux" else "/dev/sda1")
        ebs = mapping["Ebs"]
        assert ebs["VolumeType"] == "gp3" and ebs["Encrypted"] is True and ebs["DeleteOnTermination"] is True
        if key not in ("CapacityBlock", "Tokens"):
            assert ebs["VolumeSize"] == 512 and "KmsKeyId" not in ebs
    ebs = synthesized.data("CapacityBlock")["BlockDeviceMappings"][0]["Ebs"]
    assert ebs["VolumeSize"] == 1024
    assert ebs["KmsKeyId"]["Fn::GetAtt"][0].startswith("RootVolumeKey")


def test_image_and_instance_profile_only_when_given(synthesized):
    data = synthesized.data("CapacityBlock")
    assert data["ImageId"] == "ami-0123456789abcdef0"
    assert data["IamInstanceProfile"] == {"Arn": "arn:aws:iam::123456789012:instance-profile/training-node"}
    assert synthesized.data("AmazonLinux")["ImageId"].startswith("resolve:ssm:/aws/service/")
    plain = synthesized.data(catalog_id("g5.48xlarge"))
    assert not {"ImageId", "IamInstanceProfile", "UserData"} & set(plain)
    assert plain["InstanceType"] == "g5.48xlarge"


def test_user_data_given_is_the_templates_base64(synthesized):
    """A template of one's own may carry user data (fmcluster's PCS nodes need none: lifecycle actions)."""
    assert synthesized.data("CapacityBlock")["UserData"] == {"Fn::Base64": "#!/bin/bash\necho first boot\n"}


def test_instances_volumes_interfaces_and_the_template_carry_the_tags(synthesized):
    expected = [{"Key": "Name", "Value": "EfaTest-Odcr"}, {"Key": "team", "Value": "ml-platform"}]
    resource = synthesized.resource("Odcr")["Properties"]
    specs = {spec["ResourceType"]: spec["Tags"] for spec in resource["LaunchTemplateData"]["TagSpecifications"]}
    assert specs == {"instance": expected, "volume": expected, "network-interface": expected}
    assert resource["TagSpecifications"] == [{"ResourceType": "launch-template", "Tags": expected}]


# -- gates ----------------------------------------------------------------------------------------------------


def test_cdk_nag_finds_nothing(synthesized):
    assert synthesized.result.nag == []


def test_cfn_lint_region_check_is_waived_only_where_a_reservation_fixes_type_and_zone(synthesized):
    waived = {
        key
        for key, logical_id in synthesized.logical_ids.items()
        if synthesized.template["Resources"][logical_id].get("Metadata", {}).get("cfn-lint")
        == {"config": {"ignore_checks": ["E3628"]}}
    }
    reserved = {key for key in synthesized.logical_ids if "CapacityReservationSpecification" in synthesized.data(key)}
    assert waived == reserved and "AmazonLinux" not in waived and catalog_id("g5.48xlarge") not in waived


def test_cfn_lint_is_clean(synthesized):
    assert synthesized.result.lint() == {"EfaTest": []}


# -- bad props ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch_stack() -> tuple[cdk.Stack, dict]:
    """A stack that is never synthesized: each bad-props case adds (part of) a construct under its own id."""
    stack = cdk.Stack(cdk.App(), "BadProps")
    props = {
        "instance_type": "p5.48xlarge",
        "security_groups": [ec2.SecurityGroup.from_security_group_id(stack, "Sg", "sg-0123456789abcdef0")],
        "subnet": ec2.Subnet.from_subnet_id(stack, "Subnet", "subnet-0123456789abcdef0"),
    }
    return stack, props


BAD_PROPS = [
    (
        "unknown-type",
        {"instance_type": "p5.48xlarg"},
        "instance_type: unknown instance type 'p5.48xlarg': EC2 offers no such type (botocore ec2 InstanceType); "
        "did you mean 'p5.48xlarge'?",
    ),
    (
        "efa-without-efa",
        {"instance_type": "g5.4xlarge"},
        f"efa: g5.4xlarge has no EFA; pass efa=False or use an EFA type ({EFA_TYPES})",
    ),
    (
        "reservation-format",
        {"capacity": "capacity-block", "reservation_id": "cr-123"},
        "reservation_id: must be a capacity reservation id like cr-0123456789abcdef0 ('cr-' and 17 hex digits); "
        "got 'cr-123'",
    ),
    (
        "reservation-uppercase",
        {"capacity": "odcr", "reservation_id": "cr-0123456789ABCDEF0"},
        "reservation_id: must be a capacity reservation id like cr-0123456789abcdef0 ('cr-' and 17 hex digits); "
        "got 'cr-0123456789ABCDEF0'",
    ),
    (
        "reservation-missing-block",
        {"capacity": "capacity-block"},
        "reservation_id: required when capacity is 'capacity-block'",
    ),
    ("reservation-missing-odcr", {"capacity": "odcr"}, "reservation_id: required when capacity is 'odcr'"),
    (
        "reservation-forbidden",
        {"reservation_id": RESERVATION},
        "reservation_id: only for capacity 'capacity-block' or 'odcr'; this group's capacity is 'on-demand'",
    ),
    (
        "placement-with-block",
        {"capacity": "capacity-block", "reservation_id": RESERVATION, "placement_group": "PG"},
        "placement_group: must be omitted with capacity 'capacity-block': capacity blocks are already placed "
        "inside an EC2 UltraCluster and reject a placement group",
    ),
    ("root-too-small", {"root_volume_gib": 99}, "root_volume_gib: must be 100-16384 GiB; got 99"),
    ("root-too-big", {"root_volume_gib": 16385}, "root_volume_gib: must be 100-16384 GiB; got 16385"),
    ("capacity-spot", {"capacity": "spot"}, "capacity: must be 'on-demand', 'capacity-block' or 'odcr'; got 'spot'"),
    (
        "capacity-training-plan",
        {"capacity": "training-plan"},
        "capacity: must be 'on-demand', 'capacity-block' or 'odcr'; got 'training-plan' (training plans are "
        "HyperPod capacity, which takes no launch template)",
    ),
    (
        "no-security-groups",
        {"security_groups": []},
        "security_groups: give at least one, including the EFA group that allows all traffic to and from itself; "
        "got none",
    ),
    (
        "image-id",
        {"image_id": "ubuntu-22.04"},
        "image_id: must be an AMI id like ami-0123456789abcdef0 or resolve:ssm:<parameter>; got 'ubuntu-22.04'",
    ),
    (
        "instance-profile",
        {"instance_profile_arn": "arn:aws:iam::123456789012:role/node"},
        "instance_profile_arn: must be an instance profile ARN like "
        "arn:aws:iam::123456789012:instance-profile/name; got 'arn:aws:iam::123456789012:role/node'",
    ),
    (
        "root-device",
        {"root_device_name": "sda1"},
        "root_device_name: must be a device name like /dev/sda1 or /dev/xvda; got 'sda1'",
    ),
]


@pytest.mark.parametrize(("props", "message"), [case[1:] for case in BAD_PROPS], ids=[c[0] for c in BAD_PROPS])
def test_construct_rejects_bad_props(scratch_stack, request, props, message):
    stack, base = scratch_stack
    if props.get("placement_group") == "PG":
        props = {**props, "placement_group": ec2.PlacementGroup.from_placement_group_name(stack, "Pg", "training")}
    with pytest.raises(ValueError) as error:
        EfaLaunchTemplate(stack, request.node.callspec.id, **{**base, **props})
    assert str(error.value) == f"EfaLaunchTemplate: {message}"


def test_an_instance_type_token_is_rejected_because_the_layout_depends_on_it(scratch_stack):
    stack, base = scratch_stack
    token = cdk.CfnParameter(stack, "InstanceType").value_as_string
    with pytest.raises(ValueError) as error:
        EfaLaunchTemplate(stack, "TokenType", **{**base, "instance_type": token})
    assert str(error.value) == (
        "EfaLaunchTemplate: instance_type: must be an instance type name known at synth time (the interface "
        "layout depends on it); got an unresolved token"
    )


def test_every_problem_is_reported_at_once(scratch_stack):
    stack, base = scratch_stack
    with pytest.raises(ValueError) as error:
        EfaLaunchTemplate(stack, "Many", **{**base, "capacity": "odcr", "root_volume_gib": 50, "image_id": "x"})
    assert str(error.value).splitlines() == [
        "EfaLaunchTemplate: root_volume_gib: must be 100-16384 GiB; got 50",
        "EfaLaunchTemplate: reservation_id: required when capacity is 'odcr'",
        "EfaLaunchTemplate: image_id: must be an AMI id like ami-0123456789abcdef0 or resolve:ssm:<parameter>; got 'x'",
    ]
