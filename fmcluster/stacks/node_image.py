"""The node-image stack (`orchestrator.node_image: baked`): one baked AMI per CPU architecture the node groups need."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from fmcluster.catalog import instance_architecture
from fmcluster.config import ClusterConfig
from fmcluster.config.orchestrators.pcs import head_group
from fmcluster.constructs.keys import encrypt_log_groups
from fmcluster.constructs.node_image import BakedNodeImage
from fmcluster.constructs.pcs.cluster import node_image_provider, pcs_ready_dlami
from fmcluster.stacks.mirror import MirrorStack
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.outputs import add_output


def architectures(config: ClusterConfig) -> list[str]:
    """The CPU architectures of the cluster's node groups (compute groups and the head or login node), sorted."""
    types = [group.instance_type for group in config.compute]
    if head := head_group(config.orchestrator, config.observability):
        types.append(head[2])
    return sorted({instance_architecture(instance_type) for instance_type in types})


class NodeImageStack(cdk.Stack):
    """A `BakedNodeImage` per CPU architecture of the cluster's node groups, for the cluster's Slurm version.

    Each is built from the PCS-Ready DLAMI of its architecture, resolved here once and kept (`Custom::PcsNodeImage`,
    moved by `orchestrator.image_refresh`), in the network's compute subnet and EFA security group (the nodes' own
    path to the S3 gateway endpoint, SSM and the package repositories), from the mirror stack's artifact mirror. So
    it deploys after the network and mirror stacks, beside the storage stack (it needs nothing of it), and before the
    cluster stack, whose node groups run `image_ids`; the output NodeImages lists them.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        network: NetworkStack,
        mirror: MirrorStack,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        orchestrator = config.orchestrator
        provider = node_image_provider(self)
        self.images: dict[str, BakedNodeImage] = {}
        for architecture in architectures(config):
            suffix = architecture.replace("_", "").capitalize()
            parent = pcs_ready_dlami(self, f"BaseImage{suffix}", provider, architecture, orchestrator.image_refresh)
            image = BakedNodeImage(
                self,
                f"Image{suffix}",
                name=config.name,
                architecture=architecture,
                parent_image=parent,
                slurm_version=orchestrator.slurm_version,  # type: ignore[arg-type]  # set for pcs by the model
                mirror=mirror.mirror.uri,
                mirror_home=mirror.stack_name,
                subnet=network.network.compute_subnet,
                security_groups=[network.network.efa_security_group],
                parent_label=orchestrator.image_refresh,
                version=orchestrator.node_image_version,
            )
            image.role.add_managed_policy(mirror.mirror.read_policy)
            self.images[architecture] = image
        self.image_ids = {architecture: image.image_id for architecture, image in self.images.items()}
        """The AMI id per CPU architecture (deploy-time tokens), for `PcsSlurmCluster(node_images=...)`."""
        pairs = [f"{architecture}={image_id}" for architecture, image_id in self.image_ids.items()]
        add_output(self, "node-image", "NodeImages", cdk.Fn.join(", ", pairs))
        encrypt_log_groups(self, mirror.key)
