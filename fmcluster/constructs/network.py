"""TrainingNetwork: a VPC for one GPU training cluster, with subnets placed by availability-zone ID."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from fmcluster.addressing import plan_subnets
from fmcluster.config.models import Network
from fmcluster.config.regions import AZ_ID_PATTERN
from fmcluster.constructs.functions import acknowledge_cdk_function
from fmcluster.constructs.props import prop_problems
from fmcluster.endpoints import INTERFACE_ENDPOINT_SERVICES, INTERFACE_ENDPOINTS, endpoint_keys
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token

AWS_CUSTOM_RESOURCE_FUNCTION = "AWS679f53fac002430cb0da5b7982bd2287"
"""The id CDK gives, in each stack, to the singleton Lambda behind every `AwsCustomResource`."""


class TrainingNetwork(Construct):
    """A VPC for GPU training: compute subnet in the capacity's AZ (by AZ ID), EFA security group, flow logs.

    Subnets are placed with `AvailabilityZoneId`, so capacity blocks, ODCRs, FSx and nodes line up in the
    same physical zone in every account and `cdk synth` needs no AZ lookup. The compute subnet is half the
    VPC block (a /16 gives a /17 for 32,507 nodes: EFA interfaces are `efa-only` and take no address).
    With `egress="nat"` a public subnet holds one NAT gateway; with `egress="none"` there is no internet
    path and interface endpoints carry ECR, SSM, CloudWatch, STS and SageMaker traffic. An S3 gateway
    endpoint is always there (free, and keeps dataset reads off the NAT gateway).

    Example::

        network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6", egress="none")
        ec2.SecurityGroup(stack, "Extra", vpc=network.vpc)
        network.efa_security_group  # put every node's interfaces in it

    Args:
        availability_zone_id: AZ ID (not name) of the GPUs, e.g. "use1-az6".
        vpc_cidr: private /16-/20 block; default "10.0.0.0/16".
        egress: "nat" (default) or "none".
        secondary_availability_zone_id: a second AZ ID for services that need two zones; default none.
        flow_log_retention: how long VPC flow logs are kept; default one year.
        removal_policy: what `cdk destroy` does to the flow-log group; default RETAIN.
        interface_endpoints: with `egress="none"`, the interface endpoints to create, as keys of
            `fmcluster.endpoints.INTERFACE_ENDPOINT_SERVICES` (`endpoint_keys` makes the list for an orchestrator;
            PCS nodes need "Pcs" to register with their cluster); default: what a HyperPod cluster with Managed
            Prometheus calls.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        availability_zone_id: str,
        vpc_cidr: str = "10.0.0.0/16",
        egress: Literal["nat", "none"] = "nat",
        secondary_availability_zone_id: str | None = None,
        flow_log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        interface_endpoints: Sequence[str] | None = None,
    ) -> None:
        _validated(vpc_cidr, egress, availability_zone_id, secondary_availability_zone_id)
        super().__init__(scope, construct_id)

        self.egress = egress
        plan = plan_subnets(vpc_cidr)
        cfn_vpc = ec2.CfnVPC(self, "Vpc", cidr_block=vpc_cidr, enable_dns_hostnames=True, enable_dns_support=True)
        self._name(cfn_vpc, "vpc")
        self._close_default_security_group(cfn_vpc)

        private_routes = ec2.CfnRouteTable(self, "PrivateRoutes", vpc_id=cfn_vpc.ref)
        self._name(private_routes, "private")
        compute = self._subnet("ComputeSubnet", cfn_vpc, plan.compute, availability_zone_id, private_routes, "compute")
        secondary = None
        if secondary_availability_zone_id:
            secondary = self._subnet(
                "SecondarySubnet",
                cfn_vpc,
                plan.secondary,
                secondary_availability_zone_id,
                private_routes,
                "secondary",
            )

        self.nat_gateway: ec2.CfnNatGateway | None = None
        public_subnet_ids: list[str] = []
        if egress == "nat":
            public = self._public_subnet(cfn_vpc, plan.public, availability_zone_id)
            public_subnet_ids = [public.ref]
            ec2.CfnRoute(
                self,
                "PrivateDefaultRoute",
                route_table_id=private_routes.ref,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=cast(ec2.CfnNatGateway, self.nat_gateway).ref,  # made by _public_subnet
            )

        private_subnets = [compute] + ([secondary] if secondary else [])
        subnet_kind = "private" if egress == "nat" else "isolated"
        subnets: dict[str, Any] = {
            f"{subnet_kind}_subnet_ids": [subnet.ref for subnet in private_subnets],
            f"{subnet_kind}_subnet_route_table_ids": [private_routes.ref] * len(private_subnets),
        }
        self.vpc: ec2.IVpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Imported",
            vpc_id=cfn_vpc.ref,
            vpc_cidr_block=cfn_vpc.attr_cidr_block,
            availability_zones=[subnet.attr_availability_zone for subnet in private_subnets],
            **subnets,
        )
        """The VPC as an `ec2.IVpc` for L2 constructs (its private or isolated subnets are the ones above)."""
        self.cfn_vpc = cfn_vpc
        self.public_subnet_ids = public_subnet_ids
        self.compute_subnet: ec2.ISubnet = ec2.Subnet.from_subnet_attributes(
            self,
            "ComputeSubnetRef",
            subnet_id=compute.ref,
            availability_zone=compute.attr_availability_zone,
            route_table_id=private_routes.ref,
            ipv4_cidr_block=plan.compute,
        )
        """The subnet in `availability_zone_id` where nodes, FSx and endpoints live."""
        self.secondary_subnet: ec2.ISubnet | None = None
        if secondary:
            self.secondary_subnet = ec2.Subnet.from_subnet_attributes(
                self,
                "SecondarySubnetRef",
                subnet_id=secondary.ref,
                availability_zone=secondary.attr_availability_zone,
                route_table_id=private_routes.ref,
                ipv4_cidr_block=plan.secondary,
            )

        self.efa_security_group = node_security_group(self, self.vpc, egress)
        """All traffic to and from itself (EFA needs both directions), HTTPS out; nothing in from outside."""

        self.s3_endpoint = ec2.GatewayVpcEndpoint(
            self,
            "S3Endpoint",
            vpc=self.vpc,
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=[self.compute_subnet])],
        )
        self.endpoint_security_group: ec2.SecurityGroup | None = None
        if egress == "none":
            keys = endpoint_keys(("SageMakerApi",), managed_prometheus=True)
            self._interface_endpoints(vpc_cidr, keys if interface_endpoints is None else interface_endpoints)

        self.flow_log_group = logs.LogGroup(
            self, "FlowLogs", retention=flow_log_retention, removal_policy=removal_policy
        )
        ec2.FlowLog(
            self,
            "FlowLog",
            resource_type=ec2.FlowLogResourceType.from_vpc(self.vpc),
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )

    @property
    def compute_subnets(self) -> ec2.SubnetSelection:
        """`SubnetSelection` of the compute subnet, for L2 constructs that take one."""
        return ec2.SubnetSelection(subnets=[self.compute_subnet])

    def _subnet(
        self, construct_id: str, vpc: ec2.CfnVPC, cidr: str, az_id: str, routes: ec2.CfnRouteTable, name: str
    ) -> ec2.CfnSubnet:
        subnet = ec2.CfnSubnet(
            self,
            construct_id,
            vpc_id=vpc.ref,
            cidr_block=cidr,
            availability_zone_id=az_id,
            map_public_ip_on_launch=False,
        )
        self._name(subnet, name)
        ec2.CfnSubnetRouteTableAssociation(
            self, f"{construct_id}Routes", subnet_id=subnet.ref, route_table_id=routes.ref
        )
        return subnet

    def _public_subnet(self, vpc: ec2.CfnVPC, cidr: str, az_id: str) -> ec2.CfnSubnet:
        gateway = ec2.CfnInternetGateway(self, "InternetGateway")
        self._name(gateway, "igw")
        attachment = ec2.CfnVPCGatewayAttachment(
            self, "InternetGatewayAttachment", vpc_id=vpc.ref, internet_gateway_id=gateway.ref
        )
        routes = ec2.CfnRouteTable(self, "PublicRoutes", vpc_id=vpc.ref)
        self._name(routes, "public")
        default_route = ec2.CfnRoute(
            self,
            "PublicDefaultRoute",
            route_table_id=routes.ref,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=gateway.ref,
        )
        default_route.node.add_dependency(attachment)
        subnet = self._subnet("PublicSubnet", vpc, cidr, az_id, routes, "public")
        address = ec2.CfnEIP(self, "NatAddress", domain="vpc")
        address.node.add_dependency(attachment)
        self._name(address, "nat")
        self.nat_gateway = ec2.CfnNatGateway(
            self, "NatGateway", subnet_id=subnet.ref, allocation_id=address.attr_allocation_id
        )
        self._name(self.nat_gateway, "nat")
        return subnet

    def _interface_endpoints(self, vpc_cidr: str, keys: Sequence[str]) -> None:
        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="VPC interface endpoints: HTTPS from inside the VPC only",
        )
        self.endpoint_security_group.add_ingress_rule(ec2.Peer.ipv4(vpc_cidr), ec2.Port.tcp(443), "HTTPS from the VPC")
        services = {
            key: getattr(ec2.InterfaceVpcEndpointAwsService, INTERFACE_ENDPOINTS[key])
            if key in INTERFACE_ENDPOINTS
            else ec2.InterfaceVpcEndpointAwsService(INTERFACE_ENDPOINT_SERVICES[key])
            for key in keys
        }
        # one interface per AZ: with a secondary subnet, clients there keep their endpoints when the compute AZ fails
        # (each service must be offered in both zones: DescribeVpcEndpointServices' AvailabilityZones, unconfirmed
        # here for every service and zone)
        endpoint_subnets = [self.compute_subnet] + ([self.secondary_subnet] if self.secondary_subnet else [])
        for construct_id, service in services.items():
            ec2.InterfaceVpcEndpoint(
                self,
                f"{construct_id}Endpoint",
                vpc=self.vpc,
                service=service,
                subnets=ec2.SubnetSelection(subnets=endpoint_subnets),
                security_groups=[self.endpoint_security_group],
                open=False,
                private_dns_enabled=True,
            )

    def _close_default_security_group(self, vpc: ec2.CfnVPC) -> None:
        """Remove the rules AWS puts in every VPC's default security group (all traffic in from the group itself,
        all traffic out), so an interface that lands in it by mistake can reach nothing.

        CDK's `@aws-cdk/aws-ec2:restrictDefaultSecurityGroup` does this for the L2 `ec2.Vpc` only; this VPC is an L1
        (subnets by AZ ID), so the same two EC2 calls run here through `AwsCustomResource`, once each. The rules are
        the defaults of the VPC user guide ("Default security groups for your VPCs"); a rule already gone is fine.
        """
        stack = cdk.Stack.of(self)
        group_id = vpc.attr_default_security_group
        group_arn = stack.format_arn(service="ec2", resource="security-group", resource_name=group_id)
        default_rules = {
            "Ingress": (
                "revokeSecurityGroupIngress",
                {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]},
            ),
            "Egress": ("revokeSecurityGroupEgress", {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}),
        }
        for direction, (action, permission) in default_rules.items():
            call = cr.AwsSdkCall(
                service="EC2",
                action=action,
                parameters={"GroupId": group_id, "IpPermissions": [permission]},
                physical_resource_id=cr.PhysicalResourceId.of(f"{group_id}-{direction.lower()}"),
                ignore_error_codes_matching="InvalidPermission.NotFound",
            )
            cr.AwsCustomResource(
                self,
                f"CloseDefaultSecurityGroup{direction}",
                on_create=call,
                on_update=call,
                policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[group_arn]),
                install_latest_aws_sdk=False,
            )
        function = stack.node.find_child(AWS_CUSTOM_RESOURCE_FUNCTION)
        acknowledge_cdk_function(
            function,
            "removes the default security group's rules (ec2:RevokeSecurityGroupIngress/Egress)",
            "CDK's AwsCustomResource function writes only its own CloudWatch logs with this policy; its EC2 "
            "permissions are inline and name the default security group",
        )

    def _name(self, resource: cdk.CfnResource, suffix: str) -> None:
        prefix = re.sub(r"[^A-Za-z0-9-]", "-", cdk.Stack.of(self).stack_name)
        cdk.Tags.of(resource).add("Name", f"{prefix}-{suffix}")


def node_security_group(scope: Construct, vpc: ec2.IVpc, egress: Literal["nat", "none"]) -> ec2.SecurityGroup:
    """The cluster nodes' security group in `vpc`: all traffic to and from itself (EFA needs both directions, EC2
    user guide "Prepare an EFA-enabled security group"), HTTPS out to AWS APIs, HTTP out too with an internet path
    (`egress="nat"`); nothing in from outside."""
    group = ec2.SecurityGroup(
        scope,
        "EfaSecurityGroup",
        vpc=vpc,
        allow_all_outbound=False,
        description="Cluster nodes: EFA and Slurm traffic between members; HTTPS out to AWS APIs",
    )
    group.add_ingress_rule(group, ec2.Port.all_traffic(), "EFA, NCCL and Slurm between cluster nodes")
    group.add_egress_rule(group, ec2.Port.all_traffic(), "EFA, NCCL and Slurm between cluster nodes")
    group.add_egress_rule(
        ec2.Peer.any_ipv4(),
        ec2.Port.tcp(443),
        "HTTPS to AWS APIs and package mirrors (through the NAT gateway or VPC endpoints)",
    )
    if egress == "nat":
        group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP package mirrors (apt) through the NAT gateway"
        )
    return group


def _validated(
    vpc_cidr: str, egress: str, availability_zone_id: str, secondary_availability_zone_id: str | None
) -> None:
    """Nothing; or ValueError naming every problem with the props, one line each."""
    problems = prop_problems(Network, vpc_cidr=vpc_cidr, egress=egress)
    for prop, az_id in (
        ("availability_zone_id", availability_zone_id),
        ("secondary_availability_zone_id", secondary_availability_zone_id),
    ):
        if az_id is not None and not is_token(az_id) and not AZ_ID_PATTERN.match(az_id):
            problems.append(Problem(prop, f"must be an AZ ID like use1-az6; got {az_id!r}"))
    if secondary_availability_zone_id is not None and secondary_availability_zone_id == availability_zone_id:
        # both subnets go to every interface endpoint; EC2 refuses two in one AZ (DuplicateSubnetsInSameZone)
        message = f"must differ from availability_zone_id; both are {availability_zone_id!r}"
        problems.append(Problem("secondary_availability_zone_id", message))
    raise_if_any("TrainingNetwork", problems)
