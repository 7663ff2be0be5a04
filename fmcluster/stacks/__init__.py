"""Stacks compose constructs from a validated cluster file; `build` wires them into an app."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from fmcluster import names
from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.config.models import CLUSTER_TAG
from fmcluster.names import stack_name
from fmcluster.stacks.cluster_hyperpod import HyperPodClusterStack
from fmcluster.stacks.cluster_pcs import PcsClusterStack
from fmcluster.stacks.image import ImageStack
from fmcluster.stacks.links import DataLinksStack
from fmcluster.stacks.mirror import MirrorStack, mirror_has_own_stack
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.node_image import NodeImageStack
from fmcluster.stacks.observability import ObservabilityStack
from fmcluster.stacks.storage import StorageStack

__all__ = [
    "ClusterStacks",
    "DataLinksStack",
    "HyperPodClusterStack",
    "ImageStack",
    "MirrorStack",
    "NetworkStack",
    "NodeImageStack",
    "ObservabilityStack",
    "PcsClusterStack",
    "StorageStack",
    "build",
]


CREATE_ONLY_TAGS = ("AWS::EC2::PlacementGroup",)
"""Types whose Tags are create-only (cfn-lint's schema of AWS::EC2::PlacementGroup lists /properties/Tags in
createOnlyProperties): a new `tags:` value would replace them, and a placement group in use cannot be deleted
(DeletePlacementGroup). They carry only `CLUSTER_TAG`; tests/gates/test_update_safety.py checks every such type."""


class ClusterStacks:
    """The stacks of one cluster, by role."""

    def __init__(
        self,
        network: NetworkStack,
        mirror: MirrorStack | None,
        storage: StorageStack,
        image: ImageStack,
        cluster: PcsClusterStack | HyperPodClusterStack,
        observability: ObservabilityStack,
        links: DataLinksStack | None = None,
        node_image: NodeImageStack | None = None,
    ) -> None:
        self.network = network
        self.mirror = mirror
        """The artifact mirror's own stack, depending on no stack: the node-image build and the nodes wait for it
        only. None unless `orchestrator.node_image: baked` (the storage stack holds the mirror then:
        `mirror_has_own_stack`)."""
        self.storage = storage
        self.image = image
        self.cluster = cluster
        self.observability = observability
        self.links = links
        """The S3 links, beside the cluster (None without `storage.lustre.repositories`)."""
        self.node_image = node_image
        """The baked node images, beside the storage stack and before the cluster (None unless
        `orchestrator.node_image: baked`)."""

    def all(self) -> list[cdk.Stack]:
        links = [self.links] if self.links is not None else []
        baked = [self.node_image] if self.node_image is not None else []
        mirror = [self.mirror] if self.mirror is not None else []
        return [self.network, *mirror, self.storage, *links, self.image, *baked, self.cluster, self.observability]


def build(app: cdk.App, config: ClusterConfig) -> ClusterStacks:
    """Add every stack of `config` to `app`, tag them, and apply cdk-nag's AwsSolutions pack to the app.

    >>> from fmcluster.config import load
    >>> stacks = build(cdk.App(), load("examples/quickstart.yaml"))
    >>> print(*[stack.stack_name.removeprefix("quickstart-") for stack in stacks.all()])
    network storage data-links image cluster observability
    >>> stacks = build(cdk.App(), load("examples/pcs-own-vpc.yaml"))
    >>> print(*[stack.stack_name.removeprefix("pcs-own-vpc-") for stack in stacks.all()])
    network mirror storage image node-image cluster observability
    """
    environment = cdk.Environment(account=config.account, region=config.region)
    network = NetworkStack(
        app,
        stack_name(config.name, names.NETWORK_STACK),
        config=config,
        env=environment,
        description=f"fmcluster {config.name}: VPC, subnets by AZ ID, endpoints, security groups",
    )
    mirror = None
    if mirror_has_own_stack(config):
        mirror = MirrorStack(
            app,
            stack_name(config.name, names.MIRROR_STACK),
            config=config,
            env=environment,
            description=f"fmcluster {config.name}: artifact mirror (the files every node installs, filled at deploy)",
        )
    storage = StorageStack(
        app,
        stack_name(config.name, names.STORAGE_STACK),
        config=config,
        network=network.network,
        env=environment,
        description=f"fmcluster {config.name}: KMS key, data and checkpoint buckets, FSx for Lustre linked to S3",
    )
    links = None
    if config.storage.repositories:
        links = DataLinksStack(
            app,
            stack_name(config.name, names.DATA_LINKS_STACK),
            config=config,
            storage=storage,
            env=environment,
            description=f"fmcluster {config.name}: S3 links of the file system, created while the cluster boots",
        )
    image = ImageStack(
        app,
        stack_name(config.name, names.IMAGE_STACK),
        config=config,
        env=environment,
        description=f"fmcluster {config.name}: training image (ECR repository, CodeBuild project, image build)",
    )
    node_image = None
    if mirror is not None:  # node_image: baked, PCS only (the model refuses it for HyperPod)
        node_image = NodeImageStack(
            app,
            stack_name(config.name, names.NODE_IMAGE_STACK),
            config=config,
            network=network,
            mirror=mirror,
            env=environment,
            description=f"fmcluster {config.name}: baked node images (EC2 Image Builder), one per CPU architecture",
        )
    rules = orchestrators.of(config.orchestrator.type)
    cluster_stack, what = orchestrators.resolve(rules.CLUSTER_STACK), rules.CLUSTER_STACK_DESCRIPTION
    cluster = cluster_stack(
        app,
        stack_name(config.name, names.CLUSTER_STACK),
        config=config,
        network=network,
        storage=storage,
        mirror=mirror,
        env=environment,
        description=f"fmcluster {config.name}: {what}",
        **({"node_image": node_image} if node_image is not None else {}),  # only the PCS stack takes baked images
    )
    observability = ObservabilityStack(
        app,
        stack_name(config.name, names.OBSERVABILITY_STACK),
        config=config,
        storage=storage,
        node_roles=[cluster.node_role],
        env=environment,
        description=f"fmcluster {config.name}: Amazon Managed Prometheus, Grafana, alarms and node-health events",
    )
    stacks = ClusterStacks(network, mirror, storage, image, cluster, observability, links, node_image)
    for stack in stacks.all():  # only these stacks: other stacks of a library user's app keep their own tags
        stack_tags = cdk.Tags.of(stack)
        for key, value in config.tags.items():
            stack_tags.add(key, value, exclude_resource_types=list(CREATE_ONLY_TAGS))
        stack_tags.add(CLUSTER_TAG, config.name)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stacks
