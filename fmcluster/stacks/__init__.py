"""Stacks compose constructs from a validated cluster file; `build` wires them into an app."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from fmcluster.config import ClusterConfig
from fmcluster.config.models import CLUSTER_TAG
from fmcluster.stacks.cluster_hyperpod import HyperPodClusterStack
from fmcluster.stacks.cluster_pcs import PcsClusterStack
from fmcluster.stacks.image import ImageStack
from fmcluster.stacks.links import DataLinksStack
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.observability import ObservabilityStack
from fmcluster.stacks.storage import StorageStack

__all__ = [
    "ClusterStacks",
    "DataLinksStack",
    "HyperPodClusterStack",
    "ImageStack",
    "NetworkStack",
    "ObservabilityStack",
    "PcsClusterStack",
    "StorageStack",
    "build",
]


class ClusterStacks:
    """The stacks of one cluster, by role."""

    def __init__(
        self,
        network: NetworkStack,
        storage: StorageStack,
        image: ImageStack,
        cluster: PcsClusterStack | HyperPodClusterStack,
        observability: ObservabilityStack,
        links: DataLinksStack | None = None,
    ) -> None:
        self.network = network
        self.storage = storage
        self.image = image
        self.cluster = cluster
        self.observability = observability
        self.links = links
        """The S3 links, beside the cluster (None without `storage.lustre.repositories`)."""

    def all(self) -> list[cdk.Stack]:
        links = [self.links] if self.links is not None else []
        return [self.network, self.storage, *links, self.image, self.cluster, self.observability]


def build(app: cdk.App, config: ClusterConfig) -> ClusterStacks:
    """Add every stack of `config` to `app`, tag them, and apply cdk-nag's AwsSolutions pack to the app.

    >>> from fmcluster.config import load
    >>> stacks = build(cdk.App(), load("examples/quickstart.yaml"))
    >>> print(*[stack.stack_name.removeprefix("quickstart-") for stack in stacks.all()])
    network storage data-links image cluster observability
    """
    environment = cdk.Environment(account=config.account, region=config.region)
    network = NetworkStack(
        app,
        f"{config.name}-network",
        config=config,
        env=environment,
        description=f"fmcluster {config.name}: VPC, subnets by AZ ID, endpoints, security groups",
    )
    storage = StorageStack(
        app,
        f"{config.name}-storage",
        config=config,
        network=network.network,
        env=environment,
        description=f"fmcluster {config.name}: KMS key, data and checkpoint buckets, FSx for Lustre linked to S3",
    )
    links = None
    if config.storage.lustre.repositories:
        links = DataLinksStack(
            app,
            f"{config.name}-data-links",
            config=config,
            storage=storage,
            env=environment,
            description=f"fmcluster {config.name}: S3 links of the file system, created while the cluster boots",
        )
    image = ImageStack(
        app,
        f"{config.name}-image",
        config=config,
        env=environment,
        description=f"fmcluster {config.name}: training image (ECR repository, CodeBuild project, image build)",
    )
    cluster_stack, what = (
        (PcsClusterStack, "AWS PCS Slurm cluster, EFA launch templates, node bootstrap")
        if config.orchestrator.type == "pcs"
        else (HyperPodClusterStack, "SageMaker HyperPod Slurm cluster, lifecycle scripts, node role")
    )
    cluster = cluster_stack(
        app,
        f"{config.name}-cluster",
        config=config,
        network=network,
        storage=storage,
        env=environment,
        description=f"fmcluster {config.name}: {what}",
    )
    observability = ObservabilityStack(
        app,
        f"{config.name}-observability",
        config=config,
        storage=storage,
        node_roles=[cluster.node_role],
        env=environment,
        description=f"fmcluster {config.name}: Amazon Managed Prometheus, Grafana, alarms and node-health events",
    )
    stacks = ClusterStacks(network, storage, image, cluster, observability, links)
    tags = {**config.tags, CLUSTER_TAG: config.name}
    for stack in stacks.all():  # only these stacks: other stacks of a library user's app keep their own tags
        stack_tags = cdk.Tags.of(stack)
        for key, value in tags.items():
            stack_tags.add(key, value)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stacks
