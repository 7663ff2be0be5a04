"""The node image named by `orchestrator.ami_id`: it exists in the region and its architecture fits every node.

Sources: EC2 API reference (DescribeImages: Image.State, Image.Architecture; error codes InvalidAMIID.NotFound
and InvalidAMIID.Malformed); DescribeInstanceTypes (ProcessorInfo.SupportedArchitectures).
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig, Problem
from fmcluster.live.aws import Aws, error_code
from fmcluster.live.instances import InstanceTypes, instance_types_of
from fmcluster.live.runner import Check

PATH = "orchestrator.ami_id"
NOT_FOUND_CODES = ("InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidAMIID.Unavailable")


def image_checks(config: ClusterConfig, aws: Aws, types: InstanceTypes) -> list[Check]:
    ami = config.orchestrator.ami_id
    if ami is None:
        return []
    return [Check(f"image {ami}", PATH, lambda: check_image(config, aws, types, ami))]


def check_image(config: ClusterConfig, aws: Aws, types: InstanceTypes, ami: str) -> list[Problem]:
    try:
        images = aws.call("ec2", "DescribeImages", ImageIds=[ami])["Images"]
    except ClientError as error:
        if error_code(error) not in NOT_FOUND_CODES:
            raise
        images = []
    if not images:
        return [
            Problem(
                PATH,
                f"{ami} not found in {config.region}, or not shared with this account "
                "(AMIs are regional: copy it with aws ec2 copy-image)",
            )
        ]
    image = images[0]
    problems = []
    if image.get("State") != "available":
        problems.append(Problem(PATH, f"{ami} is {image.get('State')}, not available"))
    architecture = image.get("Architecture")
    misfits = [
        name
        for name in instance_types_of(config)
        if types.architectures(name) and architecture not in types.architectures(name)
    ]
    if misfits:
        needs = sorted({arch for name in misfits for arch in types.architectures(name)})
        problems.append(
            Problem(
                PATH,
                f"{ami} is {architecture}, but {', '.join(misfits)} run {' or '.join(needs)}; use an {needs[0]} image",
            )
        )
    return problems
