"""Custom resource: the newest AWS PCS sample AMI for a Slurm version and CPU architecture.

Resolved at deploy time (never at synth) so `cdk synth` needs no AWS call. AWS publishes these images under
names `aws-pcs-sample_ami-<os>-<architecture>-slurm-<version>-<date>`, owned by Amazon, without an SSM parameter;
the handler lists them and returns the most recent. The OS depends on the Slurm version: Amazon Linux 2
(`amzn2`) up to Slurm 25.05, Amazon Linux 2023 (`al2023`) from 25.11 (PCS user guide, "Using sample AMIs" and the
sample AMI release notes). The result only changes when the resource's properties
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
FIRST_AL2023_SLURM = (25, 11)
"""The first Slurm version whose AWS PCS sample AMI is Amazon Linux 2023; older ones are Amazon Linux 2."""


def image_name_filter(slurm_version: str, architecture: str) -> str:
    """The DescribeImages name filter of the AWS PCS sample AMIs of a Slurm version (amzn2 to 25.05, then al2023).

    >>> image_name_filter("25.05", "x86_64")
    'aws-pcs-sample_ami-amzn2-x86_64-slurm-25.05*'
    """
    if not VERSION_PATTERN.match(slurm_version):
        raise ValueError(f"SlurmVersion must look like 25.11; got {slurm_version!r}")
    if architecture not in ARCHITECTURES:
        raise ValueError(f"Architecture must be one of {', '.join(ARCHITECTURES)}; got {architecture!r}")
    major, minor = (int(part) for part in slurm_version.split("."))
    system = "al2023" if (major, minor) >= FIRST_AL2023_SLURM else "amzn2"
    return f"aws-pcs-sample_ami-{system}-{architecture}-slurm-{slurm_version}*"


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
