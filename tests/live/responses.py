"""Responses as the AWS APIs return them, for botocore's Stubber.

Each builder follows the operation's output shape in botocore's service model (the members, enums and types
that `shapes.shape_problems` checks for every stub added) and the examples of the API references: EC2
DescribeCapacityReservations / DescribeInstanceTypes / DescribeInstanceTypeOfferings / DescribeImages, SageMaker
DescribeTrainingPlan, Service Quotas ListServiceQuotas, S3 HeadBucket / GetBucketEncryption, CloudFormation
DescribeStacks, STS GetCallerIdentity. Quota codes are those AWS's console shows (P L-417A185B, G and VT
L-DB2E81BA, Standard L-1216C47A, VPCs per Region L-F678F1CE, NAT gateways per AZ L-FE5A380F, EC2-VPC Elastic
IPs L-0263D0A3); the others here are placeholders of the same form, since checks match quotas by name.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

ACCOUNT = "123456789012"
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
RESERVATION = "cr-0123456789abcdef0"
PLAN_ARN = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:training-plan/llm-pretrain-2026q4"

# Error codes the models do not declare (EC2 and S3 HEAD declare none), from the services' error-code pages.
DOCUMENTED_ERRORS = {
    "InvalidCapacityReservationId.NotFound": "EC2 API reference, error codes",
    "InvalidAMIID.NotFound": "EC2 API reference, error codes",
    "UnauthorizedOperation": "EC2 API reference, error codes",
    "404": "S3 API reference, HeadBucket (a HEAD response has no body: the code is the HTTP status)",
    "403": "S3 API reference, HeadBucket",
    "AccessDenied": "S3 and CloudFormation error responses",
    "ValidationError": "CloudFormation API reference, common errors (DescribeStacks of a missing stack)",
    "ExpiredToken": "STS API reference, common errors",
}


def identity(account: str = ACCOUNT) -> dict:
    return {"UserId": "AIDASAMPLEUSERID", "Account": account, "Arn": f"arn:aws:iam::{account}:user/ml-engineer"}


def capacity_reservation(
    *,
    instance_type: str = "p5.48xlarge",
    az_id: str = "use1-az6",
    az: str = "us-east-1a",
    total: int = 16,
    available: int = 16,
    state: str = "active",
    block: bool = True,
    start: datetime = NOW - timedelta(hours=2),
    end: datetime = NOW + timedelta(days=14),
    platform: str = "Linux/UNIX",
) -> dict:
    row = {
        "CapacityReservationId": RESERVATION,
        "OwnerId": ACCOUNT,
        "CapacityReservationArn": f"arn:aws:ec2:us-east-1:{ACCOUNT}:capacity-reservation/{RESERVATION}",
        "AvailabilityZoneId": az_id,
        "InstanceType": instance_type,
        "InstancePlatform": platform,
        "AvailabilityZone": az,
        "Tenancy": "default",
        "TotalInstanceCount": total,
        "AvailableInstanceCount": available,
        "EbsOptimized": True,
        "EphemeralStorage": False,
        "State": state,
        "StartDate": start,
        "EndDate": end,
        "EndDateType": "limited",
        "InstanceMatchCriteria": "targeted",
        "CreateDate": start - timedelta(days=7),
        "Tags": [],
        "ReservationType": "capacity-block" if block else "default",
    }
    if block:
        row["CapacityBlockId"] = "cb-0123456789abcdef0"
    return {"CapacityReservations": [row]}


def training_plan(
    *,
    status: str = "Active",
    instance_type: str = "ml.p5en.48xlarge",
    count: int = 8,
    az_id: str = "usw2-az2",
    targets: tuple[str, ...] = ("hyperpod-cluster",),
    start: datetime = NOW - timedelta(days=1),
    end: datetime = NOW + timedelta(days=13),
) -> dict:
    return {
        "TrainingPlanArn": PLAN_ARN,
        "TrainingPlanName": "llm-pretrain-2026q4",
        "Status": status,
        "DurationHours": 336,
        "DurationMinutes": 0,
        "StartTime": start,
        "EndTime": end,
        "UpfrontFee": "123456.78",
        "CurrencyCode": "USD",
        "TotalInstanceCount": count,
        "AvailableInstanceCount": count,
        "InUseInstanceCount": 0,
        "TargetResources": list(targets),
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:reserved-capacity/rc-0a1b2c3d",
                "ReservedCapacityType": "Instance",
                "InstanceType": instance_type,
                "TotalInstanceCount": count,
                "Status": status,
                "AvailabilityZone": "us-west-2b",
                "AvailabilityZoneId": az_id,
                "DurationHours": 336,
                "DurationMinutes": 0,
                "StartTime": start,
                "EndTime": end,
            }
        ],
    }


VCPUS = {
    "p5.48xlarge": 192,
    "p5en.48xlarge": 192,
    "g5.12xlarge": 48,
    "m5.4xlarge": 16,
    "m5.8xlarge": 32,
    "p6-b300.48xlarge": 192,
    "trn1.32xlarge": 128,
}
"""DefaultVCpus from DescribeInstanceTypes (EC2 instance type specifications)."""


def instance_types(*names: str, arm64: tuple[str, ...] = ()) -> dict:
    return {
        "InstanceTypes": [
            {
                "InstanceType": name,
                "CurrentGeneration": True,
                "ProcessorInfo": {"SupportedArchitectures": ["arm64" if name in arm64 else "x86_64"]},
                "VCpuInfo": {"DefaultVCpus": VCPUS[name], "DefaultCores": VCPUS[name] // 2, "DefaultThreadsPerCore": 2},
            }
            for name in names
        ]
    }


def offerings(zone: str, *names: str) -> dict:
    return {
        "InstanceTypeOfferings": [
            {"InstanceType": name, "LocationType": "availability-zone-id", "Location": zone} for name in names
        ]
    }


def quota(service: str, name: str, code: str, value: float, unit: str = "None") -> dict:
    return {
        "ServiceCode": service,
        "ServiceName": {
            "ec2": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "vpc": "Amazon Virtual Private Cloud (Amazon VPC)",
            "sagemaker": "Amazon SageMaker",
            "fsx": "Amazon FSx",
        }[service],
        "QuotaArn": f"arn:aws:servicequotas:us-east-1:{ACCOUNT}:{service}/{code}",
        "QuotaCode": code,
        "QuotaName": name,
        "Value": value,
        "Unit": unit,
        "Adjustable": True,
        "GlobalQuota": False,
    }


def quotas(*rows: dict) -> dict:
    return {"Quotas": list(rows)}


def image(ami: str, architecture: str = "x86_64", state: str = "available") -> dict:
    return {
        "Images": [
            {
                "ImageId": ami,
                "Architecture": architecture,
                "State": state,
                "Name": "aws-pcs-sample_ami-al2023-x86_64-slurm-25.11-20261101",
                "OwnerId": ACCOUNT,
                "PlatformDetails": "Linux/UNIX",
                "RootDeviceType": "ebs",
                "VirtualizationType": "hvm",
                "CreationDate": "2026-11-01T00:00:00.000Z",
            }
        ]
    }


def head_bucket(region: str) -> dict:
    return {"BucketRegion": region, "AccessPointAlias": False}


def listing(bucket: str, prefix: str, keys: int) -> dict:
    return {
        "IsTruncated": keys > 1,
        "Name": bucket,
        "Prefix": prefix,
        "MaxKeys": 1,
        "KeyCount": min(keys, 1),
        "Contents": [{"Key": f"{prefix}shard-00000.arrow", "Size": 1048576, "StorageClass": "STANDARD"}][:keys],
    }


def bucket_encryption(algorithm: str = "AES256", key: str | None = None) -> dict:
    default = {"SSEAlgorithm": algorithm}
    if key:
        default["KMSMasterKeyID"] = key
    return {
        "ServerSideEncryptionConfiguration": {
            "Rules": [{"ApplyServerSideEncryptionByDefault": default, "BucketKeyEnabled": algorithm != "AES256"}]
        }
    }


STACK_UUID = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"


def bootstrap_stack(status: str = "UPDATE_COMPLETE", version: str = "29") -> dict:
    return {
        "Stacks": [
            {
                "StackId": f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/CDKToolkit/{STACK_UUID}",
                "StackName": "CDKToolkit",
                "Description": "This stack includes resources needed to deploy AWS CDK apps into this environment",
                "CreationTime": NOW - timedelta(days=200),
                "StackStatus": status,
                "EnableTerminationProtection": True,
                "Outputs": [
                    {"OutputKey": "BucketName", "OutputValue": f"cdk-hnb659fds-assets-{ACCOUNT}-us-east-1"},
                    {
                        "OutputKey": "BootstrapVersion",
                        "OutputValue": version,
                        "Description": "The version of the bootstrap resources that are currently mastered "
                        "in this stack",
                    },
                ],
            }
        ]
    }


def vpcs(count: int) -> dict:
    return {
        "Vpcs": [
            {
                "VpcId": f"vpc-0{index:016x}",
                "State": "available",
                "CidrBlock": f"10.{index}.0.0/16",
                "IsDefault": index == 0,
                "OwnerId": ACCOUNT,
            }
            for index in range(count)
        ]
    }


def nat_gateways(*subnets: str) -> dict:
    return {
        "NatGateways": [
            {
                "NatGatewayId": f"nat-0{index:016x}",
                "SubnetId": subnet,
                "State": "available",
                "VpcId": "vpc-00000000000000001",
                "ConnectivityType": "public",
            }
            for index, subnet in enumerate(subnets)
        ]
    }


def subnets(zone_of: dict[str, str]) -> dict:
    return {
        "Subnets": [
            {
                "SubnetId": subnet,
                "AvailabilityZoneId": zone,
                "VpcId": "vpc-00000000000000001",
                "CidrBlock": "10.0.0.0/24",
                "State": "available",
            }
            for subnet, zone in zone_of.items()
        ]
    }


def addresses(count: int) -> dict:
    return {
        "Addresses": [
            {"AllocationId": f"eipalloc-0{index:016x}", "PublicIp": f"198.51.100.{index + 1}", "Domain": "vpc"}
            for index in range(count)
        ]
    }


SAMPLES = {
    ("sts", "GetCallerIdentity"): identity(),
    ("ec2", "DescribeCapacityReservations"): capacity_reservation(),
    ("sagemaker", "DescribeTrainingPlan"): training_plan(),
    ("ec2", "DescribeInstanceTypes"): instance_types(*VCPUS),
    ("ec2", "DescribeInstanceTypeOfferings"): offerings("use1-az6", "p5.48xlarge"),
    ("service-quotas", "ListServiceQuotas"): quotas(quota("ec2", "Running On-Demand P instances", "L-417A185B", 384.0)),
    ("service-quotas", "ListAWSDefaultServiceQuotas"): quotas(quota("vpc", "VPCs per Region", "L-F678F1CE", 5.0)),
    ("ec2", "DescribeImages"): image("ami-0123456789abcdef0"),
    ("s3", "HeadBucket"): head_bucket("us-east-1"),
    ("s3", "ListObjectsV2"): listing("my-datasets", "c4/", 1),
    ("s3", "GetBucketEncryption"): bucket_encryption("aws:kms", "arn:aws:kms:us-east-1:123456789012:key/0a1b2c3d"),
    ("cloudformation", "DescribeStacks"): bootstrap_stack(),
    ("ec2", "DescribeVpcs"): vpcs(2),
    ("ec2", "DescribeNatGateways"): nat_gateways("subnet-0123456789abcdef0"),
    ("ec2", "DescribeSubnets"): subnets({"subnet-0123456789abcdef0": "use1-az6"}),
    ("ec2", "DescribeAddresses"): addresses(2),
}
"""One sample of every operation the live checks call (the shape test walks them all)."""
