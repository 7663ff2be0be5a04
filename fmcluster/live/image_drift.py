"""Drift of the default node image: the PCS-Ready DLAMI AWS publishes today against the one the cluster runs, or
its baked image was built from (`orchestrator.node_image: baked`).

The deployed `Custom::PcsNodeImage` resources hold the image they resolved as their physical id (the handler returns
the AMI id as PhysicalResourceId: fmcluster/lambdas/pcs_ami/handler.py); they live in the cluster stack (`boot`) or
the node-image stack (`baked`). Sources: CloudFormation DescribeStackResources (LogicalResourceId, ResourceType,
PhysicalResourceId; a stack that does not exist is a ValidationError "does not exist"), SSM GetParameter on the
PCS-Ready DLAMI's public parameter, EC2 DescribeImages (Architecture, Name, CreationDate). The SSM parameter holds the
AMI id only, no release-note fields: what changed is told by the images' names and creation dates.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from fmcluster import names
from fmcluster.config import ClusterConfig, Problem, orchestrators
from fmcluster.config.orchestrators import resolve
from fmcluster.lambdas.pcs_ami.handler import AMI_ID, ARCHITECTURES, parameter_name
from fmcluster.live.aws import Aws, error_code, error_message
from fmcluster.live.runner import Check

PATH = "orchestrator.image_refresh"
RESOLVER = "Custom::PcsNodeImage"


def drift_checks(config: ClusterConfig, aws: Aws) -> list[Check]:
    """For an AWS PCS cluster on the default image (no `ami_id`): whether AWS publishes a newer one (the PCS
    module's `NODE_IMAGE_DRIFT_CHECKS`)."""
    if config.orchestrator.ami_id is not None:
        return []
    return [Check("node image drift", PATH, lambda: check_drift(config, aws))]


def no_drift_checks(config: ClusterConfig, aws: Aws) -> list[Check]:
    """HyperPod's `NODE_IMAGE_DRIFT_CHECKS`: none (its nodes run SageMaker's image, updated by HyperPod itself)."""
    return []


def node_image_checks(config: ClusterConfig, aws: Aws) -> list[Check]:
    """The orchestrator's drift checks (`config.orchestrators`: NODE_IMAGE_DRIFT_CHECKS)."""
    return resolve(orchestrators.of(config.orchestrator.type).NODE_IMAGE_DRIFT_CHECKS)(config, aws)


def check_drift(config: ClusterConfig, aws: Aws) -> list[Problem]:
    baked = config.orchestrator.node_image == "baked"
    stack = names.stack_name(config.name, names.NODE_IMAGE_STACK if baked else names.CLUSTER_STACK)
    try:
        resources = aws.call("cloudformation", "DescribeStackResources", StackName=stack)["StackResources"]
    except ClientError as error:
        if error_code(error) == "ValidationError" and "does not exist" in error_message(error):
            return []  # not deployed: nothing runs yet, so nothing can be behind
        raise
    running = sorted(
        {
            resource["PhysicalResourceId"]
            for resource in resources
            if resource.get("ResourceType") == RESOLVER and AMI_ID.match(resource.get("PhysicalResourceId") or "")
        }
    )
    if not running:
        return []
    images = {image["ImageId"]: image for image in aws.call("ec2", "DescribeImages", ImageIds=running)["Images"]}
    problems: list[Problem] = []
    for ami in running:
        architecture = images.get(ami, {}).get("Architecture")
        if architecture not in ARCHITECTURES:
            problems.append(
                Problem(
                    PATH,
                    f"{ami}, the PCS-Ready DLAMI {stack} resolved, is no longer described by EC2 (deregistered?), so "
                    "whether a newer one is out is not known",
                    level="unchecked",
                )
            )
            continue
        today = aws.call("ssm", "GetParameter", Name=parameter_name(architecture))["Parameter"]["Value"]
        if today == ami:
            continue
        newer = aws.call("ec2", "DescribeImages", ImageIds=[today])["Images"]
        problems.append(
            Problem(
                PATH,
                drift_message(architecture, images[ami], newer[0] if newer else {"ImageId": today}, baked),
                level="warning",
            )
        )
    return problems


def drift_message(architecture: str, running: dict, today: dict, baked: bool) -> str:
    """The warning's text: both images by id, name and creation date, and what moving to today's does."""

    def described(image: dict) -> str:
        return f"{image.get('ImageId', '?')} ({image.get('Name', 'no name')}, created {image.get('CreationDate', '?')})"

    what = "the baked image is built from" if baked else "the node groups run"
    then = "rebuilds the baked image from it and rolls" if baked else "moves"
    return (
        f"AWS publishes a newer PCS-Ready DLAMI for {architecture} than the one {what}: {described(running)} now "
        f"{described(today)}; a new orchestrator.image_refresh label {then} every node group onto it "
        "(fmcluster plan --previous shows which)"
    )
