"""The network stack: the cluster's VPC, subnets, endpoints and security groups."""

from __future__ import annotations

from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from constructs import Construct

from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.constructs.existing_network import ExistingNetwork
from fmcluster.constructs.keys import customer_key, encrypt_log_groups
from fmcluster.constructs.network import TrainingNetwork
from fmcluster.endpoints import cluster_endpoint_keys
from fmcluster.stacks.outputs import add_output


class NetworkStack(cdk.Stack):
    """`TrainingNetwork` configured from the cluster file's `network` and AZ keys (or, with `network.vpc_id`,
    `ExistingNetwork`: the VPC and subnet of the file, with only the nodes' security group made), plus one cluster
    placement group per PCS compute group that asks for one (HyperPod places its nodes itself)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: ClusterConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        rules = orchestrators.of(config.orchestrator.type)
        removal_policy = cdk.RemovalPolicy.RETAIN if config.storage.retain_on_delete else cdk.RemovalPolicy.DESTROY
        self.network: TrainingNetwork | ExistingNetwork
        if config.network.vpc_id is not None:
            self.network = ExistingNetwork(
                self,
                "Network",
                vpc_id=config.network.vpc_id,
                subnet_id=cast(str, config.network.subnet_id),  # required with vpc_id
                availability_zone_id=config.availability_zone_id,
                egress=config.network.egress,
            )
        else:
            self.network = TrainingNetwork(
                self,
                "Network",
                availability_zone_id=config.availability_zone_id,
                secondary_availability_zone_id=config.secondary_availability_zone_id,
                vpc_cidr=config.network.vpc_cidr,
                egress=config.network.egress,
                removal_policy=removal_policy,
                interface_endpoints=cluster_endpoint_keys(config),
            )
        self.placement_groups: dict[str, ec2.PlacementGroup] = {}
        if rules.NETWORK_PLACEMENT_GROUPS:
            for group in config.compute:
                if group.new_placement_group:  # a named group exists already: the cluster stack uses it as it is
                    self.placement_groups[group.name] = ec2.PlacementGroup(
                        self, f"{group.name}PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER
                    )
        self.logs_key: kms.IKey | None = None
        """Encrypts the VPC flow logs (and any other log group of this stack); None in a VPC of your own, whose flow
        logs are its owner's."""
        if isinstance(self.network, TrainingNetwork):
            self.logs_key = customer_key(
                self, "LogsKey", removal_policy=removal_policy, description=f"fmcluster {config.name}: network logs"
            )
            encrypt_log_groups(self, self.logs_key)
        add_output(self, "network", "VpcId", self.network.vpc.vpc_id)
        add_output(self, "network", "ComputeSubnetId", self.network.compute_subnet.subnet_id)
