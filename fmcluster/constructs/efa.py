"""EfaLaunchTemplate: an EC2 launch template that wires every EFA device of a GPU or Trainium instance."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from constructs import Construct

from fmcluster import catalog
from fmcluster.config.value_rules import (
    AMI_ID_PATTERN,
    ROOT_VOLUME_GIB,
    no_efa,
    reservation_problem,
    unknown_instance_type,
)
from fmcluster.constructs.acknowledgments import acknowledge_findings
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token

CAPACITIES = ("on-demand", "capacity-block", "odcr")
IMAGE_ID_PATTERN = re.compile(rf"^({AMI_ID_PATTERN.pattern.removeprefix('^').removesuffix('$')}|resolve:ssm:\S+)$")
"""An AMI id (the cluster file's rule) or a `resolve:ssm:` reference to one."""
INSTANCE_PROFILE_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:instance-profile/[\w+=,.@/-]{1,128}$")
DEVICE_NAME_PATTERN = re.compile(r"^/dev/(sd[a-z]\d*|xvd[a-z]+|nvme\d+n\d+)$")
METADATA_HOP_LIMIT = 2
"""IMDSv2 responses survive one extra network hop, so containers on the node (Docker, enroot) reach IMDS."""
HOP_LIMIT_REASON = (
    "A hop limit of 2 lets containers that jobs run on Docker's default bridge network reach IMDSv2 for the node "
    "role's credentials (datasets in S3, images in ECR); with 1 their AWS calls fail (EC2 user guide, instance "
    "metadata options: 2 for containers). IMDSv2 tokens stay required"
)
CONTROL_TOWER_NITRO_LIST_LACKS = frozenset(
    {"p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge", "p6e-gb200.36xlarge", "trn2.48xlarge"}
)
"""Catalog types missing from NITRO_INSTANCE_TYPES of CT.EC2.PR.15 as cdklabs.cdk-validator-cfnguard 0.0.62 ships it
(rules/control-tower/cfn-guard/ec2/ct-ec2-pr-15.guard: its P types stop at p5 and p4de); all are Nitro instances."""


@jsii.implements(cdk.ITaggable)
class EfaLaunchTemplate(Construct):
    """An EC2 launch template for EFA training nodes: every EFA device wired, IMDSv2, an encrypted root volume.

    The network interfaces follow AWS's current layout for the instance type (`fmcluster.catalog`): network
    card 0 / device 0 is the one ENA interface (`interface`, private IP only); each EFA device is an `efa-only`
    interface (card 0 / device 1 where card 0 carries EFA, device 0 on every other EFA card), so all of the
    instance's EFA bandwidth is wired and a node takes one IP address. On p6-b300 and p6e-gb200, card 0 is ENA
    only and gets no EFA interface (EC2 rejects one there). Every interface is in every security group given,
    in `subnet`, and deleted with the instance.

    Capacity: "capacity-block" sets market type `capacity-block` and targets the reservation (capacity blocks
    sit inside an EC2 UltraCluster already, so no placement group); "odcr" targets the reservation with no
    market type; "on-demand" adds neither. A placement group, when given, is named in `Placement`.

    The instance metadata service requires IMDSv2 tokens, with a hop limit of 2 so containers reach it. The root
    volume is gp3, encrypted (with `key` when given), deleted with the instance. Instances, their volumes and
    network interfaces are tagged with a Name and with every tag applied to this construct or a scope above it
    (`cdk.Tags.of(app).add(...)`), as is the launch template itself.

    Example::

        network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
        template = EfaLaunchTemplate(
            stack, "P5",
            instance_type="p5.48xlarge",
            security_groups=[network.efa_security_group],
            subnet=network.compute_subnet,
            capacity="capacity-block", reservation_id="cr-0123456789abcdef0",
        )
        pcs.CfnComputeNodeGroup(..., custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
            template_id=template.launch_template_id, version=template.latest_version),
            node_lifecycle_actions=node_lifecycle_actions(runner_s3_uri=..., bundle_s3_uri=...))

    Args:
        instance_type: an EC2 instance type EC2 offers (a concrete name: the interface layout depends on it), e.g.
            "p5.48xlarge". Types in `fmcluster.catalog` get their EFA layout; any other is general purpose: pass
            efa=False, it gets the one ENA interface.
        security_groups: the groups every interface joins; at least one, and the EFA group among them (EFA
            needs all traffic to and from the group itself). Other groups can only be added here.
        subnet: the subnet of every interface; for capacity blocks and ODCRs, in the reservation's AZ.
        efa: wire the EFA devices. Omitted: True; must be False for a type without EFA (then only the ENA
            interface at card 0 is set).
        root_volume_gib: root volume size, 100-16384 GiB. Omitted: 512.
        capacity: "on-demand", "capacity-block" or "odcr". Omitted: "on-demand".
        reservation_id: the capacity reservation (cr- and 17 hex digits); required for "capacity-block" and
            "odcr", not allowed for "on-demand". Omitted: none.
        placement_group: a cluster placement group for the instances; not allowed with "capacity-block".
            Omitted: no placement group.
        user_data: what the instance runs at first boot (fmcluster's PCS nodes need none: their set-up runs as PCS node
            lifecycle actions, `fmcluster.node_scripts.node_lifecycle_actions`).
            Omitted: none.
        image_id: an AMI id (ami-...) or "resolve:ssm:<parameter>". Omitted: none in the template, for
            services that choose the image themselves (AWS PCS takes it on the compute node group).
        instance_profile_arn: the instance profile's ARN. Omitted: none in the template (AWS PCS takes it on
            the compute node group).
        key: a customer KMS key for the root volume. Its key policy must let whoever launches the instances
            use it (an EC2 Fleet or Auto Scaling service-linked role needs kms:CreateGrant, Decrypt,
            GenerateDataKeyWithoutPlaintext, ReEncrypt* and DescribeKey), or launches fail. Omitted: the
            account's default EBS encryption key.
        root_device_name: the AMI's root device name, which the root volume mapping must match: "/dev/sda1"
            for Ubuntu-based AMIs such as the Deep Learning AMIs, "/dev/xvda" for Amazon Linux. Omitted:
            "/dev/sda1".
        detailed_monitoring: CloudWatch detailed (1-minute) monitoring of the instances, billed per instance (what
            Control Tower's CT.EC2.PR.10 asks for). Omitted: False (basic 5-minute monitoring; the nodes' own
            exporters give finer metrics).

    Attributes:
        launch_template: the `ec2.CfnLaunchTemplate`.
        launch_template_id: its id (lt-...).
        latest_version: its latest version number, as a string.
        interfaces: the network-interface layout (`catalog.NetworkInterface` tuple), card 0 / device 0 first.
        instance: the instance type's catalog row.
        connections: the security groups, for `connections.allow_*` and constructs that take `IConnectable`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        instance_type: str,
        security_groups: Sequence[ec2.ISecurityGroup],
        subnet: ec2.ISubnet,
        efa: bool = True,
        root_volume_gib: int = 512,
        capacity: Literal["on-demand", "capacity-block", "odcr"] = "on-demand",
        reservation_id: str | None = None,
        placement_group: ec2.IPlacementGroup | ec2.CfnPlacementGroup | None = None,
        user_data: ec2.UserData | None = None,
        image_id: str | None = None,
        instance_profile_arn: str | None = None,
        key: kms.IKey | None = None,
        root_device_name: str = "/dev/sda1",
        detailed_monitoring: bool = False,
    ) -> None:
        _validated(
            instance_type=instance_type,
            security_groups=security_groups,
            efa=efa,
            root_volume_gib=root_volume_gib,
            capacity=capacity,
            reservation_id=reservation_id,
            placement_group=placement_group,
            image_id=image_id,
            instance_profile_arn=instance_profile_arn,
            root_device_name=root_device_name,
        )
        super().__init__(scope, construct_id)

        self.instance = catalog.lookup(instance_type)
        self.interfaces: tuple[catalog.NetworkInterface, ...] = catalog.network_interfaces(self.instance, efa=efa)
        group_ids = [group.security_group_id for group in security_groups]
        self.connections = ec2.Connections(security_groups=list(security_groups))
        self._tags = cdk.TagManager(
            cdk.TagType.KEY_VALUE,
            "AWS::EC2::LaunchTemplate",
            {"Name": _name(cdk.Stack.of(self).stack_name, construct_id)},
        )

        Cfn = ec2.CfnLaunchTemplate
        data = Cfn.LaunchTemplateDataProperty(
            instance_type=instance_type,
            image_id=image_id,
            iam_instance_profile=Cfn.IamInstanceProfileProperty(arn=instance_profile_arn)
            if instance_profile_arn
            else None,
            network_interfaces=[_interface(i, group_ids, subnet.subnet_id) for i in self.interfaces],
            metadata_options=Cfn.MetadataOptionsProperty(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=METADATA_HOP_LIMIT,
            ),
            block_device_mappings=[
                Cfn.BlockDeviceMappingProperty(
                    device_name=root_device_name,
                    ebs=Cfn.EbsProperty(
                        volume_type="gp3",
                        volume_size=root_volume_gib,
                        encrypted=True,
                        kms_key_id=key.key_arn if key else None,
                        delete_on_termination=True,
                    ),
                )
            ],
            instance_market_options=Cfn.InstanceMarketOptionsProperty(market_type="capacity-block")
            if capacity == "capacity-block"
            else None,
            capacity_reservation_specification=Cfn.CapacityReservationSpecificationProperty(
                capacity_reservation_target=Cfn.CapacityReservationTargetProperty(
                    capacity_reservation_id=reservation_id
                )
            )
            if capacity in ("capacity-block", "odcr")
            else None,
            placement=Cfn.PlacementProperty(group_name=_placement_group_name(placement_group))
            if placement_group is not None
            else None,
            user_data=cdk.Fn.base64(user_data.render()) if user_data is not None else None,
            monitoring=Cfn.MonitoringProperty(enabled=True) if detailed_monitoring else None,
        )
        self.launch_template = Cfn(self, "Resource", launch_template_data=data)
        self._acknowledge_controls(instance_type, detailed_monitoring)
        # Tags are rendered at synth time, so tags added to a scope above this one reach the instances too.
        self.launch_template.add_property_override(
            "LaunchTemplateData.TagSpecifications",
            [
                {"ResourceType": kind, "Tags": self._tags.rendered_tags}
                for kind in ("instance", "volume", "network-interface")
            ],
        )
        self.launch_template.add_property_override(
            "TagSpecifications", [{"ResourceType": "launch-template", "Tags": self._tags.rendered_tags}]
        )
        if capacity in ("capacity-block", "odcr"):
            # cfn-lint E3628 checks the instance type against the region's on-demand price list, which omits types
            # sold only as capacity blocks (p5e, p6e-gb200, trn2 in us-east-1). Here the reservation, not that
            # list, fixes what runs where: it holds this instance type in this AZ. On-demand keeps the check.
            self.launch_template.add_metadata("cfn-lint", {"config": {"ignore_checks": ["E3628"]}})
        self.launch_template_id: str = self.launch_template.ref
        self.latest_version: str = self.launch_template.attr_latest_version_number

    def _acknowledge_controls(self, instance_type: str, detailed_monitoring: bool) -> None:
        acknowledge_findings(self, controls=["ec2_launch_template_token_hop_limit_check"], reason=HOP_LIMIT_REASON)
        if not detailed_monitoring:
            acknowledge_findings(
                self,
                controls=["ec2_launch_template_monitoring_enabled_check"],
                reason="Detailed monitoring is billed per instance; GPU nodes report their metrics every 15 s through "
                "their own exporters to Prometheus. `compliance: control-tower` (detailed_monitoring=True) turns it on",
            )
        if len(self.interfaces) > 1:
            acknowledge_findings(
                self,
                controls=["ec2_launch_template_public_ip_disabled_check"],
                reason="The primary ENA interface sets AssociatePublicIpAddress false; the efa-only interfaces take no "
                "IP address at all, and EC2 accepts AssociatePublicIpAddress only on the single interface at device "
                "index 0 (EC2 API reference, InstanceNetworkInterfaceSpecification)",
            )
        if instance_type in CONTROL_TOWER_NITRO_LIST_LACKS:
            acknowledge_findings(
                self,
                controls=["ec2_launch_template_nitro_instance_type_check"],
                reason=f"{instance_type} is built on the AWS Nitro System (every EFA instance type is); the rule's "
                "list of Nitro types in cdklabs.cdk-validator-cfnguard 0.0.62 predates it",
            )

    @property
    def tags(self) -> cdk.TagManager:
        """Tags for the launch template and the instances, volumes and interfaces it launches."""
        return self._tags


def _validated(
    *,
    instance_type: str,
    security_groups: Sequence[ec2.ISecurityGroup],
    efa: bool,
    root_volume_gib: int,
    capacity: str,
    reservation_id: str | None,
    placement_group: object | None,
    image_id: str | None,
    instance_profile_arn: str | None,
    root_device_name: str,
) -> None:
    """Nothing; or ValueError naming every problem with the props, one line each.

    Values that are unresolved tokens are not checked (they are known only at deploy time), except
    `instance_type`, which decides the interface layout at synth time.
    """
    problems: list[Problem] = []
    if is_token(instance_type):
        problems.append(
            Problem(
                "instance_type",
                "must be an instance type name known at synth time (the interface layout depends "
                "on it); got an unresolved token",
            )
        )
    elif problem := unknown_instance_type(instance_type):
        problems.append(Problem("instance_type", problem))
    elif efa and (problem := no_efa(instance_type, "pass efa=False")):
        problems.append(Problem("efa", problem))
    if not security_groups:
        problems.append(
            Problem(
                "security_groups",
                "give at least one, including the EFA group that allows all traffic to and from itself; got none",
            )
        )
    if not is_token(root_volume_gib) and not ROOT_VOLUME_GIB[0] <= root_volume_gib <= ROOT_VOLUME_GIB[1]:
        problems.append(
            Problem("root_volume_gib", f"must be {ROOT_VOLUME_GIB[0]}-{ROOT_VOLUME_GIB[1]} GiB; got {root_volume_gib}")
        )
    if capacity not in CAPACITIES:
        why = " (training plans are HyperPod capacity, which takes no launch template)"
        problems.append(
            Problem(
                "capacity",
                f"must be 'on-demand', 'capacity-block' or 'odcr'; got {capacity!r}"
                + (why if capacity == "training-plan" else ""),
            )
        )
    elif problem := reservation_problem(capacity, reservation_id, deferred=is_token(reservation_id)):
        problems.append(Problem("reservation_id", problem))
    if placement_group is not None and capacity == "capacity-block":
        problems.append(
            Problem(
                "placement_group",
                "must be omitted with capacity 'capacity-block': capacity blocks are already placed "
                "inside an EC2 UltraCluster and reject a placement group",
            )
        )
    for prop, value, pattern, right in (
        ("image_id", image_id, IMAGE_ID_PATTERN, "an AMI id like ami-0123456789abcdef0 or resolve:ssm:<parameter>"),
        (
            "instance_profile_arn",
            instance_profile_arn,
            INSTANCE_PROFILE_ARN_PATTERN,
            "an instance profile ARN like arn:aws:iam::123456789012:instance-profile/name",
        ),
        ("root_device_name", root_device_name, DEVICE_NAME_PATTERN, "a device name like /dev/sda1 or /dev/xvda"),
    ):
        if value is not None and not is_token(value) and not pattern.match(value):
            problems.append(Problem(prop, f"must be {right}; got {value!r}"))
    raise_if_any("EfaLaunchTemplate", problems)


def _interface(
    interface: catalog.NetworkInterface, group_ids: list[str], subnet_id: str
) -> ec2.CfnLaunchTemplate.NetworkInterfaceProperty:
    primary = interface.interface_type == "interface"
    return ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
        network_card_index=interface.network_card_index,
        device_index=interface.device_index,
        interface_type=interface.interface_type,
        groups=group_ids,
        subnet_id=subnet_id,
        delete_on_termination=True,
        # the ENA interface gets a private address only; efa-only interfaces take no address at all
        associate_public_ip_address=False if primary else None,
        description=f"{'ENA' if primary else 'EFA'} card {interface.network_card_index}",
    )


def _placement_group_name(group: ec2.IPlacementGroup | ec2.CfnPlacementGroup | None) -> str | None:
    if group is None:
        return None
    if isinstance(group, ec2.CfnPlacementGroup):
        return group.ref  # Ref of AWS::EC2::PlacementGroup is its name
    return group.placement_group_name


def _name(stack_name: str, construct_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", f"{stack_name}-{construct_id}")
