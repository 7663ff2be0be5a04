"""The image stack: the training image's KMS key, ECR repository, CodeBuild project and build."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from fmcluster.config import ClusterConfig
from fmcluster.constructs.image import TrainingImage, parameter_name
from fmcluster.constructs.keys import customer_key, encrypt_log_groups
from fmcluster.stacks.outputs import add_output


class ImageStack(cdk.Stack):
    """`TrainingImage` configured from the cluster file's `image` section.

    It depends on nothing but the cluster file: no network, no storage. CloudFormation deploys it beside the storage
    stack, so the image build (about half an hour) and the FSx for Lustre creation run at the same time. Its KMS key,
    ECR repository and logs follow `storage.retain_on_delete`: kept by `cdk destroy` by default (the stack is then
    termination-protected like the storage stack), deleted with the stack otherwise (the repository emptied first).
    Nodes read the image URI from the SSM parameter `/fmcluster/<name>/image-uri` (`training_image.parameter_name`);
    give their roles `training_image.grant_pull(role)`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: ClusterConfig, **kwargs) -> None:
        retain = config.storage.retain_on_delete
        kwargs.setdefault("termination_protection", retain)
        super().__init__(scope, construct_id, **kwargs)
        removal_policy = cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY
        self.key = customer_key(
            self,
            "Key",
            removal_policy=removal_policy,
            description=f"fmcluster {config.name}: training image repository and builds",
        )
        """The customer-managed key of the image repository and the build's artifacts."""
        self.training_image = TrainingImage(
            self,
            "TrainingImage",
            cluster_name=config.name,
            image=config.image,
            key=self.key,
            removal_policy=removal_policy,
        )
        encrypt_log_groups(self, self.key)
        add_output(self, "image", "ImageRepositoryUri", self.training_image.repository.repository_uri)
        add_output(self, "image", "ImageUri", self.training_image.image_uri)
        add_output(self, "image", "ImageParameter", parameter_name(config.name))
