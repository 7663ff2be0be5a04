"""Stacks compose constructs from a validated cluster file; `build` wires them into an app."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from fmcluster.config import ClusterConfig
from fmcluster.stacks.network import NetworkStack

__all__ = ["ClusterStacks", "NetworkStack", "build"]


class ClusterStacks:
    """The stacks of one cluster, by role."""

    def __init__(self, network: NetworkStack) -> None:
        self.network = network

    def all(self) -> list[cdk.Stack]:
        return [self.network]


def build(app: cdk.App, config: ClusterConfig) -> ClusterStacks:
    """Add every stack of `config` to `app`, tag them, and apply cdk-nag's AwsSolutions pack."""
    environment = cdk.Environment(account=config.account, region=config.region)
    network = NetworkStack(
        app,
        f"{config.name}-network",
        config=config,
        env=environment,
        description=f"fmcluster {config.name}: VPC, subnets by AZ ID, endpoints, security groups",
    )
    stacks = ClusterStacks(network)
    for key, value in {**config.tags, "fmcluster:cluster": config.name}.items():
        cdk.Tags.of(app).add(key, value)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stacks
