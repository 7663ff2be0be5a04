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


# --- fmcluster diagnose -------------------------------------------------------------------------------------------

STACK_ARN = f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/{{name}}/{STACK_UUID}"
FSX_PORTS = (
    'Resource handler returned message: "The file system cannot be created because the default security group in '
    "the subnet provided or the provided security groups do not permit Lustre LNET network traffic on port 988 "
    '(Service: FSx, Status Code: 400, Request ID: 0949dbfc-5e0a-4f03-bf89-d7e74540f8ec)" (RequestToken: '
    "3c1d1f4e-8a33-4f7b-b7b4-6a3e0e0e2f10, HandlerErrorCode: InvalidRequest)"
)
"""FSx's message as aws/aws-parallelcluster issue 6181 reports it, in CloudFormation's Cloud Control wrapping."""


def stack(name: str, status: str, reason: str | None = None) -> dict:
    row = {
        "StackId": STACK_ARN.format(name=name),
        "StackName": name,
        "CreationTime": NOW - timedelta(hours=1),
        "StackStatus": status,
        "EnableTerminationProtection": name.endswith("-storage"),
    }
    if reason:
        row["StackStatusReason"] = reason
    return {"Stacks": [row]}


def event(stack_name: str, logical_id: str, resource_type: str, status: str, minute: int, reason: str = "") -> dict:
    row = {
        "StackId": STACK_ARN.format(name=stack_name),
        "EventId": f"{logical_id}-{status}-{minute}",
        "StackName": stack_name,
        "LogicalResourceId": logical_id,
        "PhysicalResourceId": "",
        "ResourceType": resource_type,
        "Timestamp": NOW - timedelta(minutes=60 - minute),
        "ResourceStatus": status,
    }
    if reason:
        row["ResourceStatusReason"] = reason
    return row


def rolled_back_storage(name: str = "quickstart-storage") -> dict:
    """A create that failed on FSx's port check, then rolled back (newest first, as DescribeStackEvents returns)."""
    stack_type = "AWS::CloudFormation::Stack"
    chronological = [
        event(name, name, stack_type, "CREATE_IN_PROGRESS", 0, "User Initiated"),
        event(name, "BucketsKeyCD6AF5CF", "AWS::KMS::Key", "CREATE_COMPLETE", 2),
        event(name, "LustreSecurityGroupA46A9855", "AWS::EC2::SecurityGroup", "CREATE_COMPLETE", 3),
        event(name, "LustreFileSystem4AFDAE78", "AWS::FSx::FileSystem", "CREATE_IN_PROGRESS", 4),
        event(name, "LustreFileSystem4AFDAE78", "AWS::FSx::FileSystem", "CREATE_FAILED", 5, FSX_PORTS),
        event(name, "BucketsDataBucket44451DC7", "AWS::S3::Bucket", "CREATE_FAILED", 5, "Resource creation cancelled"),
        event(
            name,
            name,
            stack_type,
            "ROLLBACK_IN_PROGRESS",
            6,
            "The following resource(s) failed to create: "
            "[BucketsDataBucket44451DC7, LustreFileSystem4AFDAE78]. Rollback requested by user.",
        ),
        event(name, "LustreSecurityGroupA46A9855", "AWS::EC2::SecurityGroup", "DELETE_COMPLETE", 7),
        event(name, name, stack_type, "ROLLBACK_COMPLETE", 8),
    ]
    return {"StackEvents": list(reversed(chronological))}


CLUSTER_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/a1b2c3d4e5f6"
LIFECYCLE_FAILED = (
    'Instance i-0123456789abcdef0 failed to provision with the following error: "Lifecycle scripts did not run '
    "successfully. Ensure the scripts exist in provided S3 path, are accessible, and run without errors. Please see "
    'CloudWatch logs for lifecycle script execution details." Note that multiple instances may be impacted.'
)
"""HyperPod's message as awslabs/awsome-distributed-ai issue 188 reports it."""


def hyperpod_cluster(status: str = "Failed", failure: str = LIFECYCLE_FAILED) -> dict:
    row = {
        "ClusterArn": CLUSTER_ARN,
        "ClusterName": "quickstart",
        "ClusterStatus": status,
        "CreationTime": NOW - timedelta(minutes=50),
        "InstanceGroups": [
            {"InstanceGroupName": "controller", "InstanceType": "ml.m5.4xlarge", "CurrentCount": 1, "TargetCount": 1},
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 1, "TargetCount": 2},
        ],
        "NodeRecovery": "Automatic",
    }
    if failure:
        row["FailureMessage"] = failure
    return row


def cluster_nodes(*states: tuple[str, str, str, str]) -> dict:
    """(group, instance id, status, message) per node."""
    return {
        "ClusterNodeSummaries": [
            {
                "InstanceGroupName": group,
                "InstanceId": instance,
                "InstanceType": "ml.m5.4xlarge" if group == "controller" else "ml.p5.48xlarge",
                "LaunchTime": NOW - timedelta(minutes=45),
                "InstanceStatus": {"Status": status, "Message": message} if message else {"Status": status},
            }
            for group, instance, status, message in states
        ]
    }


LIFECYCLE_TAIL = [
    "2026-11-30T09:40:01Z on_create.sh[2817] INFO: step scratch starts",
    "2026-11-30T09:40:02Z on_create.sh[2817] INFO: step scratch: /opt/dlami/nvme is ready (vg.01/lv_ephemeral)",
    "2026-11-30T09:40:05Z on_create.sh[2817] INFO: step nccl-env starts",
    "An error occurred (AccessDeniedException) when calling the GetParameter operation: User is not authorized to "
    "perform: ssm:GetParameter",
    "2026-11-30T09:40:06Z on_create.sh[2817] ERROR: step nccl-env: failed with exit status 254",
    "2026-11-30T09:40:09Z on_create.sh[2817] ERROR: fmcluster lifecycle FAILED at step nccl-env: see the lines of "
    "each step above (log: /var/log/fmcluster/lifecycle.log)",
]
"""A lifecycle stream in fmcluster's own format: lib.sh `log` ("<time> <script>[<pid>] <LEVEL>: ...") and
on_create.sh's `fail_lifecycle` line; the AWS CLI error between them is the CLI's own text."""


def log_events(lines: list[str]) -> dict:
    start = int((NOW - timedelta(minutes=20)).timestamp() * 1000)
    return {
        "events": [
            {"timestamp": start + i * 1000, "message": line, "ingestionTime": start + i * 1000 + 500}
            for i, line in enumerate(lines)
        ],
        "nextForwardToken": "f/00000000000000000000000000000000000000000000000000000000",
        "nextBackwardToken": "b/00000000000000000000000000000000000000000000000000000000",
    }


SAMPLES.update(
    {
        ("cloudformation", "DescribeStackEvents"): rolled_back_storage(),
        ("sagemaker", "DescribeCluster"): hyperpod_cluster(),
        ("sagemaker", "ListClusterNodes"): cluster_nodes(("gpu", "i-0123456789abcdef0", "Failure", LIFECYCLE_FAILED)),
        ("logs", "GetLogEvents"): log_events(LIFECYCLE_TAIL),
    }
)
