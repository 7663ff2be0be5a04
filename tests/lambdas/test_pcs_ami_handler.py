"""The PCS sample-image lookup handler. EC2 is emulated by botocore's Stubber, not moto: moto cannot hold
images owned by 'amazon' under chosen names, and the Stubber still validates every request and response
against EC2's real API model."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster.lambdas.pcs_ami.handler import image_name_filter, newest_image, on_event

IMAGES = [
    {
        "ImageId": "ami-0aaaaaaaaaaaaaaaa",
        "Name": "aws-pcs-sample_ami-al2023-x86_64-slurm-25.11-2026-08-01",
        "CreationDate": "2026-08-01T10:00:00.000Z",
    },
    {
        "ImageId": "ami-0bbbbbbbbbbbbbbbb",
        "Name": "aws-pcs-sample_ami-al2023-x86_64-slurm-25.11-2026-11-02",
        "CreationDate": "2026-11-02T10:00:00.000Z",
    },
]


def event(request="Create", **properties):
    return {
        "RequestType": request,
        "ResourceProperties": {"SlurmVersion": "25.11", "Architecture": "x86_64", **properties},
    }


def stubbed(images):
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    stub.add_response(
        "describe_images",
        {"Images": images},
        {
            "Owners": ["amazon"],
            "Filters": [
                {"Name": "name", "Values": ["aws-pcs-sample_ami-al2023-x86_64-slurm-25.11*"]},
                {"Name": "state", "Values": ["available"]},
            ],
        },
    )
    stub.activate()
    return ec2, stub


def test_create_returns_the_newest_image():
    ec2, stub = stubbed(IMAGES)
    result = on_event(event(), None, ec2=ec2)
    stub.assert_no_pending_responses()
    assert result == {
        "PhysicalResourceId": "ami-0bbbbbbbbbbbbbbbb",
        "Data": {"ImageId": "ami-0bbbbbbbbbbbbbbbb", "Name": IMAGES[1]["Name"]},
    }


def test_no_matching_image_fails_the_deploy_with_what_to_do():
    ec2, _ = stubbed([])
    with pytest.raises(LookupError, match=r"set orchestrator\.ami_id"):
        on_event(event(), None, ec2=ec2)


def test_delete_calls_nothing():
    assert on_event({"RequestType": "Delete", "PhysicalResourceId": "ami-1"}, None, ec2=object()) == {
        "PhysicalResourceId": "ami-1"
    }


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"RequestType": "Poke"}, "RequestType must be Create, Update or Delete; got 'Poke'"),
        (event(SlurmVersion="latest"), "SlurmVersion must look like 25.11; got 'latest'"),
        (event(Architecture="sparc"), "Architecture must be one of x86_64, arm64; got 'sparc'"),
        ({"RequestType": "Create"}, "SlurmVersion must look like 25.11; got 'None'"),
    ],
)
def test_malformed_events_raise_a_clear_error(bad, message):
    with pytest.raises(ValueError) as error:
        on_event(bad, None, ec2=object())
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("version", "architecture", "expected"),
    [
        # PCS user guide, "Using sample AMIs" / sample AMI release notes (FACTS.md, Service truth): Amazon Linux 2
        # images for Slurm 25.05 and earlier, Amazon Linux 2023 images from 25.11.
        ("24.11", "arm64", "aws-pcs-sample_ami-amzn2-arm64-slurm-24.11*"),
        ("25.05", "x86_64", "aws-pcs-sample_ami-amzn2-x86_64-slurm-25.05*"),
        ("25.11", "x86_64", "aws-pcs-sample_ami-al2023-x86_64-slurm-25.11*"),
        ("26.05", "arm64", "aws-pcs-sample_ami-al2023-arm64-slurm-26.05*"),
    ],
)
def test_the_filter_names_the_sample_ami_os_of_each_slurm_version(version, architecture, expected):
    assert image_name_filter(version, architecture) == expected


def test_newest_image_wins():
    assert newest_image(list(reversed(IMAGES)))["ImageId"] == "ami-0bbbbbbbbbbbbbbbb"
