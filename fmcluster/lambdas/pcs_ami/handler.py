"""Custom resource: the newest AWS PCS sample AMI for a Slurm version and CPU architecture.

Resolved at deploy time (never at synth) so `cdk synth` needs no AWS call. AWS publishes these images under
names like `aws-pcs-sample_ami-al2023-x86_64-slurm-25.11-<date>`, owned by Amazon, without an SSM parameter;
the handler lists them and returns the most recent. The result only changes when the resource's properties
change, so nodes are not replaced by a new image on an unrelated deploy.
"""

from __future__ import annotations

import json
import logging
import re

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

VERSION_PATTERN = re.compile(r"^\d{2}\.\d{2}$")
ARCHITECTURES = ("x86_64", "arm64")


def image_name_filter(slurm_version: str, architecture: str) -> str:
    """The DescribeImages name filter of the AWS PCS sample AMIs (Amazon Linux 2023)."""
    if not VERSION_PATTERN.match(slurm_version):
        raise ValueError(f"SlurmVersion must look like 25.11; got {slurm_version!r}")
    if architecture not in ARCHITECTURES:
        raise ValueError(f"Architecture must be one of {', '.join(ARCHITECTURES)}; got {architecture!r}")
    return f"aws-pcs-sample_ami-al2023-{architecture}-slurm-{slurm_version}*"


def newest_image(images: list[dict]) -> dict:
    """The image with the latest CreationDate (ISO 8601 strings sort in time order)."""
    if not images:
        raise LookupError("no AWS PCS sample AMI matches; set orchestrator.ami_id to an image of your own")
    return max(images, key=lambda image: image["CreationDate"])


def on_event(event: dict, context: object, ec2=None) -> dict:
    """CDK Provider framework entry point: Create/Update look the image up, Delete has nothing to remove."""
    request = event.get("RequestType")
    if request not in ("Create", "Update", "Delete"):
        raise ValueError(f"RequestType must be Create, Update or Delete; got {request!r}")
    if request == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", "none")}
    properties = event.get("ResourceProperties") or {}
    name_filter = image_name_filter(str(properties.get("SlurmVersion")), str(properties.get("Architecture")))
    ec2 = ec2 or boto3.client("ec2")
    images = ec2.describe_images(
        Owners=["amazon"],
        Filters=[{"Name": "name", "Values": [name_filter]}, {"Name": "state", "Values": ["available"]}],
    )["Images"]
    image = newest_image(images)
    LOG.info(json.dumps({"event": "resolved", "filter": name_filter, "image": image["ImageId"], "name": image["Name"]}))
    return {"PhysicalResourceId": image["ImageId"], "Data": {"ImageId": image["ImageId"], "Name": image["Name"]}}
