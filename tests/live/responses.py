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
BLOCK = "cb-0123456789abcdef0"
PLAN_ARN = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:training-plan/llm-pretrain-2026q4"

# Error codes the models do not declare (EC2 and S3 HEAD declare none), from the services' error-code pages.
DOCUMENTED_ERRORS = {
    "InvalidCapacityReservationId.NotFound": "EC2 API reference, error codes",
    "InvalidAMIID.NotFound": "EC2 API reference, error codes",
    "InvalidGroup.NotFound": "EC2 API reference, error codes (the specified security group does not exist)",
    "InvalidPlacementGroup.Unknown": "EC2 API reference, error codes (the specified placement group cannot be found)",
    "UnauthorizedOperation": "EC2 API reference, error codes",
    "404": "S3 API reference, HeadBucket (a HEAD response has no body: the code is the HTTP status)",
    "403": "S3 API reference, HeadBucket",
    "AccessDenied": "S3 and CloudFormation error responses",
    "ValidationError": "CloudFormation API reference, common errors (DescribeStacks of a missing stack)",
    "ExpiredToken": "STS API reference, common errors",
    "ValidationException": "SageMaker's Describe APIs answer it for a missing resource (aws/aws-sdk issue 165, "
    "DescribeTrainingJob; unconfirmed for DescribeCluster and DescribeTrainingPlan)",
    "RequestLimitExceeded": "EC2 API reference, Request throttling (the code of a throttled EC2 call)",
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
    tags: dict[str, str] | None = None,
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
        "Tags": [{"Key": key, "Value": value} for key, value in (tags or {}).items()],
        "ReservationType": "capacity-block" if block else "default",
    }
    if block:
        row["CapacityBlockId"] = BLOCK
    return {"CapacityReservations": [row]}


def capacity_block_status(
    *, total: int = 16, unavailable: int = 0, interconnect: str = "ok", reservation: str = RESERVATION
) -> dict:
    """EC2 DescribeCapacityBlockStatus (botocore ec2 CapacityBlockStatus: TotalCapacity is available + unavailable;
    InterconnectStatus ok | impaired | insufficient-data), for a block of one reservation."""
    counts = {
        "TotalCapacity": total,
        "TotalAvailableCapacity": total - unavailable,
        "TotalUnavailableCapacity": unavailable,
    }
    return {
        "CapacityBlockStatuses": [
            {
                "CapacityBlockId": BLOCK,
                "InterconnectStatus": interconnect,
                **counts,
                "CapacityReservationStatuses": [{"CapacityReservationId": reservation, **counts}],
            }
        ]
    }


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
    "m5.xlarge": 4,
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
    ("ec2", "DescribeCapacityBlockStatus"): capacity_block_status(interconnect="impaired", unavailable=2),
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


def hyperpod_cluster(status: str = "Failed", failure: str = LIFECYCLE_FAILED, gpus: int = 1) -> dict:
    """The quickstart's cluster, `gpus` of its 2 gpu nodes running."""
    row = {
        "ClusterArn": CLUSTER_ARN,
        "ClusterName": "quickstart",
        "ClusterStatus": status,
        "CreationTime": NOW - timedelta(minutes=50),
        "InstanceGroups": [
            {"InstanceGroupName": "controller", "InstanceType": "ml.m5.4xlarge", "CurrentCount": 1, "TargetCount": 1},
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "CurrentCount": gpus, "TargetCount": 2},
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


def log_events(lines: list[str], backward: str = "b/00000000000000000000000000000000000000000000000000000000") -> dict:
    """One GetLogEvents page; `backward` is the nextBackwardToken it returns (the same token as the one passed in
    means the start of the stream was reached: CloudWatch Logs API reference, GetLogEvents)."""
    start = int((NOW - timedelta(minutes=20)).timestamp() * 1000)
    return {
        "events": [
            {"timestamp": start + i * 1000, "message": line, "ingestionTime": start + i * 1000 + 500}
            for i, line in enumerate(lines)
        ],
        "nextForwardToken": "f/00000000000000000000000000000000000000000000000000000000",
        "nextBackwardToken": backward,
    }


def queue_log_tail(stub, group: str, stream: str, limit: int, *pages: list[str]) -> None:
    """GetLogEvents pages read backwards from the newest (`pages` newest first), then the page that ends the stream:
    no events and the token it was given."""
    ask = {"logGroupName": group, "logStreamName": stream, "limit": limit, "startFromHead": False}
    token = None
    for index, lines in enumerate([*pages, []]):
        following = f"b/{min(index + 1, len(pages)):056d}"
        params = {**ask, "nextToken": token} if token else ask
        stub.ok("logs", "GetLogEvents", log_events(lines, following), params)
        token = following


PROVISIONING_FAILED = (
    "We currently do not have sufficient capacity for the requested instance type(s). Please try again."
)
"""HyperPod's capacity failure as awslabs/awsome-distributed-ai issue 204 reports it (causes.py's source; the same text
test_diagnose uses for a cluster's FailureMessage): here as an event's FailureMessage, where HyperPod puts a node's
provisioning error in Continuous mode (unconfirmed that the event's text is the same as the cluster's)."""


def cluster_events(*events: tuple[str, str, str, str, str, str]) -> dict:
    """ListClusterEvents: (event id, level, resource type, instance group, instance id, description) per event, newest
    first, one minute apart (botocore sagemaker ClusterEventSummary: EventId is a UUID; EventLevel Info|Warn|Error)."""
    return {
        "Events": [
            {
                "EventId": event_id,
                "ClusterArn": CLUSTER_ARN,
                "ClusterName": "quickstart",
                "ResourceType": resource,
                "EventTime": NOW - timedelta(minutes=10 + index),
                "EventLevel": level,
                "Description": description,
                **({"InstanceGroupName": group} if group else {}),
                **({"InstanceId": instance} if instance else {}),
            }
            for index, (event_id, level, resource, group, instance, description) in enumerate(events)
        ]
    }


def cluster_event(event_id: str, group: str, instance: str, failure: str) -> dict:
    """DescribeClusterEvent of an Instance event whose EventMetadata.Instance carries the FailureMessage."""
    return {
        "EventDetails": {
            "EventId": event_id,
            "ClusterArn": CLUSTER_ARN,
            "ClusterName": "quickstart",
            "InstanceGroupName": group,
            "InstanceId": instance,
            "ResourceType": "Instance",
            "EventTime": NOW - timedelta(minutes=10),
            "EventLevel": "Error",
            "Description": "Instance provisioning failed",
            "EventDetails": {"EventMetadata": {"Instance": {"FailureMessage": failure}}},
        }
    }


OPERATION = "7c6b5a49-3827-4165-a4f3-e2d1c0b9a817"


def cluster_operations(*operations: tuple[str, str]) -> dict:
    """ListClusterOperations: (operation id, type) per operation in progress (ClusterOperationSummary)."""
    return {
        "ClusterOperationSummaries": [
            {"OperationId": operation, "ClusterArn": CLUSTER_ARN, "Type": kind, "Status": "InProgress",
             "CreationTime": NOW - timedelta(minutes=20)}
            for operation, kind in operations
        ]
    }  # fmt: skip


def scaling_operation(operation: str, group: str, current: int, target: int) -> dict:
    """DescribeClusterOperation of a Scaling operation of one group (ClusterOperationScalingDetails)."""
    return {
        "OperationId": operation,
        "ClusterArn": CLUSTER_ARN,
        "Type": "Scaling",
        "Status": "InProgress",
        "CreationTime": NOW - timedelta(minutes=20),
        "ScalingDetails": [
            {
                "InstanceGroupName": group,
                "Status": "InProgress",
                "Original": {"CurrentCount": current, "TargetCount": current},
                "Desired": {"CurrentCount": current, "TargetCount": target},
            }
        ],
    }


EVENT_A = "0f1e2d3c-4b5a-4978-8697-a5b4c3d2e1f0"
EVENT_B = "1a2b3c4d-5e6f-4a0b-9c1d-2e3f4a5b6c7d"
EVENT_C = "9e8d7c6b-5a49-4837-a261-5f4e3d2c1b0a"


SAMPLES.update(
    {
        ("sagemaker", "ListClusterEvents"): cluster_events(
            (EVENT_A, "Error", "Instance", "gpu", "i-0123456789abcdef0", "Instance provisioning failed"),
            (EVENT_C, "Info", "InstanceGroup", "gpu", "", "Scaling started"),
        ),
        ("sagemaker", "DescribeClusterEvent"): cluster_event(
            EVENT_A, "gpu", "i-0123456789abcdef0", PROVISIONING_FAILED
        ),
        ("sagemaker", "ListClusterOperations"): cluster_operations((OPERATION, "Scaling")),
        ("sagemaker", "DescribeClusterOperation"): scaling_operation(OPERATION, "gpu", 1, 2),
        ("cloudformation", "DescribeStackEvents"): rolled_back_storage(),
        ("sagemaker", "DescribeCluster"): hyperpod_cluster(),
        ("sagemaker", "ListClusterNodes"): cluster_nodes(("gpu", "i-0123456789abcdef0", "Failure", LIFECYCLE_FAILED)),
        ("logs", "GetLogEvents"): log_events(LIFECYCLE_TAIL),
        ("sagemaker", "StartClusterHealthCheck"): {"ClusterArn": CLUSTER_ARN},
    }
)


PCS_CLUSTER_ID = "pcs_0a1b2c3d4e"
GPU_GROUP_ID = "pcs_5f6a7b8c9d"


def pcs_cluster(status: str = "ACTIVE") -> dict:
    return {
        "cluster": {
            "name": "llm-pretrain",
            "id": PCS_CLUSTER_ID,
            "arn": f"arn:aws:pcs:us-east-1:{ACCOUNT}:cluster/{PCS_CLUSTER_ID}",
            "status": status,
            "createdAt": NOW - timedelta(hours=1),
            "modifiedAt": NOW - timedelta(minutes=40),
            "scheduler": {"type": "SLURM", "version": "25.11"},
            "size": "SMALL",
            "networking": {"subnetIds": ["subnet-0123456789abcdef0"], "securityGroupIds": ["sg-0123456789abcdef0"]},
        }
    }


def pcs_group_summaries(*groups: tuple[str, str, str]) -> dict:
    """(name, id, status) per node group: the members of a ComputeNodeGroupSummary."""
    keys = ("name", "id", "arn", "clusterId", "createdAt", "modifiedAt", "status")
    return {
        "computeNodeGroups": [
            {key: value for key, value in pcs_group(name, group_id, status)["computeNodeGroup"].items() if key in keys}
            for name, group_id, status in groups
        ]
    }


def pcs_group(
    name: str, group_id: str, status: str = "ACTIVE", count: int = 16, errors: tuple[tuple[str, str], ...] = ()
) -> dict:
    row = {
        "name": name,
        "id": group_id,
        "arn": f"arn:aws:pcs:us-east-1:{ACCOUNT}:cluster/{PCS_CLUSTER_ID}/computenodegroup/{group_id}",
        "clusterId": PCS_CLUSTER_ID,
        "createdAt": NOW - timedelta(minutes=40),
        "modifiedAt": NOW - timedelta(minutes=30),
        "status": status,
        "subnetIds": ["subnet-0123456789abcdef0"],
        "purchaseOption": "CAPACITY_BLOCK",
        "customLaunchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"},
        "iamInstanceProfileArn": f"arn:aws:iam::{ACCOUNT}:instance-profile/aws-pcs/llm-pretrain-nodes",
        "scalingConfiguration": {"minInstanceCount": count, "maxInstanceCount": count},
        "instanceConfigs": [{"instanceType": "p5.48xlarge"}],
    }
    if errors:
        row["errorInfo"] = [{"code": code, "message": message} for code, message in errors]
    return {"computeNodeGroup": row}


def instances(*ids: str, reservation: str | None = None, tags: dict[str, str] | None = None) -> dict:
    """Running instances, optionally launched into `reservation` (EC2 Instance.CapacityReservationId) with `tags`."""

    def row(instance: str) -> dict:
        found = {
            "InstanceId": instance,
            "InstanceType": "p5.48xlarge",
            "State": {"Code": 16, "Name": "running"},
            "LaunchTime": NOW - timedelta(minutes=25),
            "SubnetId": "subnet-0123456789abcdef0",
        }
        if reservation:
            found["CapacityReservationId"] = reservation
        if tags:
            found["Tags"] = [{"Key": key, "Value": value} for key, value in tags.items()]
        return found

    return {"Reservations": [{"ReservationId": "r-0123456789abcdef0", "OwnerId": ACCOUNT,
                              "Instances": [row(instance) for instance in ids]}]}  # fmt: skip


def own_instances_query(reservation: str, cluster: str) -> dict:
    """DescribeInstances' Filters for a cluster's own instances in a reservation (botocore ec2 filter names)."""
    return {
        "Filters": [
            {"Name": "capacity-reservation-id", "Values": [reservation]},
            {"Name": "tag:fmcluster:cluster", "Values": [cluster]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    }


BOOT_CONSOLE = [
    "[   12.345678] cloud-init[1714]: Cloud-init v. 22.2.2 running 'modules:final' at Mon, 30 Nov 2026 09:35:10 +0000.",
    "[   13.101010] cloud-init[1714]: Cloud-init v. 22.2.2 finished at Mon, 30 Nov 2026 09:35:11 +0000.",
    "2026-11-30T09:37:18Z run-step[1833]: fmcluster step lustre FAILED with exit status 1; the node cannot train "
    "without it (log: /var/log/fmcluster/mount-lustre.log)",
]
"""A console holding run-step.sh's line for a failed required step, as its `to_console` writes it (the format
tests/node/test_profiles.py reads back from a pseudo-terminal), after the image's own boot lines (cloud-init's, as an
Ubuntu image prints them; their text is incidental). A node whose required step fails is then terminated by PCS: the
diagnosis sees it while it is still running."""
WARN_CONSOLE = [
    *BOOT_CONSOLE[:2],
    "2026-11-30T09:38:02Z run-step[1901]: fmcluster WARNING: step enroot failed; jobs cannot use --container-image "
    "(no enroot/pyxis on this node) (log: /var/log/fmcluster/enroot-pyxis.log)",
]
"""A node that joined without containers: run-step.sh's line for a warn-only step that failed."""


def console(instance: str, lines: list[str]) -> dict:
    import base64

    text = "\n".join(lines) + "\n"
    return {
        "InstanceId": instance,
        "Timestamp": NOW - timedelta(minutes=10),
        "Output": base64.b64encode(text.encode()).decode(),
    }


def stack_resources(stack_name: str, *rows: tuple[str, str, str]) -> dict:
    """(logical id, physical id, type) per resource."""
    return {
        "StackResourceSummaries": [
            {
                "LogicalResourceId": logical,
                "PhysicalResourceId": physical,
                "ResourceType": kind,
                "LastUpdatedTimestamp": NOW - timedelta(minutes=50),
                "ResourceStatus": "CREATE_COMPLETE",
            }
            for logical, physical, kind in rows
        ]
    }


BUILD_ID = "TrainingImageBuild8242BAF6-0a1b2c3d4e5f:3f1c9a2b-7d4e-4f5a-9b6c-0d1e2f3a4b5c"
BUILD_LOG = [
    "[Container] 2026/11/30 09:12:03.101 Running command bash /tmp/build-image.sh",
    "#12 312.4 ./configure: error: cannot find libfabric headers under /opt/amazon/efa",
    '#12 ERROR: process "/bin/sh -c ./configure --with-libfabric=/opt/amazon/efa" did not complete successfully: '
    "exit code: 1",
    "[Container] 2026/11/30 09:17:45.882 Command did not exit successfully bash /tmp/build-image.sh exit status 1",
    "[Container] 2026/11/30 09:17:45.889 Phase complete: BUILD State: FAILED",
    "[Container] 2026/11/30 09:17:45.889 Phase context status code: COMMAND_EXECUTION_ERROR Message: Error while "
    "executing command: bash /tmp/build-image.sh. Reason: exit status 1",
]
"""CodeBuild's `[Container]` phase lines (CodeBuild user guide, build phase transitions) around a docker build step."""


def build(status: str = "FAILED") -> dict:
    phases = [
        {"phaseType": "SUBMITTED", "phaseStatus": "SUCCEEDED"},
        {"phaseType": "PROVISIONING", "phaseStatus": "SUCCEEDED"},
        {
            "phaseType": "BUILD",
            "phaseStatus": status if status != "IN_PROGRESS" else "SUCCEEDED",
            "contexts": [
                {
                    "statusCode": "COMMAND_EXECUTION_ERROR",
                    "message": "Error while executing command: bash /tmp/build-image.sh. Reason: exit status 1",
                }
            ]
            if status == "FAILED"
            else [],
        },
    ]
    return {
        "builds": [
            {
                "id": BUILD_ID,
                "arn": f"arn:aws:codebuild:us-east-1:{ACCOUNT}:build/{BUILD_ID}",
                "buildNumber": 3,
                "startTime": NOW - timedelta(minutes=50),
                "endTime": NOW - timedelta(minutes=42),
                "currentPhase": "COMPLETED" if status != "IN_PROGRESS" else "BUILD",
                "buildStatus": status,
                "projectName": BUILD_ID.split(":")[0],
                "phases": phases,
                "buildComplete": status != "IN_PROGRESS",
                "logs": {
                    "groupName": "llm-pretrain-image-TrainingImageBuildLogs459AD67B-0a1b2c3d",
                    "streamName": BUILD_ID.split(":")[1],
                    "deepLink": "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEvent:group=x",
                },
            }
        ]
    }


def metrics(cluster: str, instance_type: str, nodes: str) -> dict:
    return {
        "Metrics": [
            {
                "Namespace": "fmcluster/nccl",
                "MetricName": "LargestMessageBusBandwidth",
                "Dimensions": [
                    {"Name": "Cluster", "Value": cluster},
                    {"Name": "InstanceType", "Value": instance_type},
                    {"Name": "Nodes", "Value": nodes},
                ],
            }
        ]
    }


def datapoints(*values: tuple[int, float]) -> dict:
    """(minutes ago, value) per datapoint."""
    return {
        "Label": "LargestMessageBusBandwidth",
        "Datapoints": [
            {"Timestamp": NOW - timedelta(minutes=ago), "Maximum": value, "Unit": "Gigabytes/Second"}
            for ago, value in values
        ],
    }


ALARM_REASON = (
    "Threshold Crossed: 1 out of the last 1 datapoints [1.0 (30/11/26 09:00:00)] was greater than or equal to the "
    "threshold (1.0) (minimum 1 datapoint for OK -> ALARM transition)."
)
"""CloudWatch's StateReason wording for a threshold alarm (CloudWatch user guide, alarm state reasons)."""


def alarms(*rows: tuple[str, str]) -> dict:
    """(name, state) per alarm."""
    return {
        "MetricAlarms": [
            {
                "AlarmName": name,
                "AlarmArn": f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:{name}",
                "StateValue": state,
                "StateReason": ALARM_REASON,
                "StateUpdatedTimestamp": NOW - timedelta(minutes=60),
                "MetricName": "BelowBaseline",
                "Namespace": "fmcluster/nccl",
                "Statistic": "Maximum",
                "Period": 86400,
                "EvaluationPeriods": 1,
                "Threshold": 1.0,
                "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            }
            for name, state in rows
        ]
    }


SAMPLES.update(
    {
        ("pcs", "GetCluster"): pcs_cluster(),
        ("pcs", "ListComputeNodeGroups"): pcs_group_summaries(("gpu", GPU_GROUP_ID, "ACTIVE")),
        ("pcs", "GetComputeNodeGroup"): pcs_group(
            "gpu",
            GPU_GROUP_ID,
            "CREATE_FAILED",
            errors=(("InsufficientInstanceCapacity", "We currently do not have sufficient p5.48xlarge capacity"),),
        ),
        ("ec2", "DescribeInstances"): instances("i-0123456789abcdef0"),
        ("ec2", "GetConsoleOutput"): console("i-0123456789abcdef0", BOOT_CONSOLE),
        ("cloudformation", "ListStackResources"): stack_resources(
            "llm-pretrain-image", ("TrainingImageBuild8242BAF6", BUILD_ID.split(":")[0], "AWS::CodeBuild::Project")
        ),
        ("codebuild", "ListBuildsForProject"): {"ids": [BUILD_ID]},
        ("codebuild", "BatchGetBuilds"): build(),
        ("cloudwatch", "ListMetrics"): metrics("llm-pretrain", "p5.48xlarge", "2"),
        ("cloudwatch", "GetMetricStatistics"): datapoints((30, 391.5)),
        ("cloudwatch", "DescribeAlarms"): alarms(
            ("llm-pretrain-storage-NcclTestsBelowBaselinep548xlarge9C1C0161-1A2B3C", "ALARM")
        ),
    }
)


# --- fmcluster info and connect -----------------------------------------------------------------------------------

HEAD_GROUP_ID = "pcs_1a2b3c4d5e"
SESSION_ID = "ml-engineer-0134f9ad4a5be8e2e"
HYPERPOD_CLUSTER_OUTPUTS = {
    "Orchestrator": "hyperpod-slurm",
    "ClusterName": "quickstart",
    "ClusterId": CLUSTER_ARN.rsplit("/", 1)[1],
    "ClusterArn": CLUSTER_ARN,
    "HeadNodeGroup": "controller",
}
"""The quickstart's cluster stack outputs (HyperPod; its controller group)."""
PCS_CLUSTER_OUTPUTS = {
    "Orchestrator": "pcs",
    "ClusterName": "llm-pretrain",
    "ClusterId": PCS_CLUSTER_ID,
    "HeadNodeGroup": "login",
    "HeadNodeGroupId": HEAD_GROUP_ID,
}
"""A PCS cluster stack's outputs with a login node."""


def stack_with_outputs(cluster: str, part: str, outputs: dict[str, str], status: str = "CREATE_COMPLETE") -> dict:
    """DescribeStacks of the deployed stack `<cluster>-<part>` with its Outputs (OutputKey, OutputValue, Description
    as the template declares them: fmcluster.outputs)."""
    from fmcluster.outputs import describe

    response = stack(f"{cluster}-{part}", status)
    response["Stacks"][0]["Outputs"] = [
        {"OutputKey": key, "OutputValue": value, "Description": describe(part, key)} for key, value in outputs.items()
    ]
    return response


def session(session_id: str = SESSION_ID, region: str = "us-east-1") -> dict:
    """StartSession's answer, as the SSM API reference's example shows it (SessionId, StreamUrl, TokenValue)."""
    return {
        "SessionId": session_id,
        "TokenValue": "AAEAAeHX6Nlcf8RqT4QyDPY0QSBg0Ou5oAblo4LjEXAMPLETOKEN",
        "StreamUrl": f"wss://ssmmessages.{region}.amazonaws.com/v1/data-channel/{session_id}?role=publish_subscribe",
    }


SAMPLES.update(
    {
        ("ssm", "StartSession"): session(),
        ("ssm", "TerminateSession"): {"SessionId": SESSION_ID},
    }
)


# --- a VPC, a file system and prices of one's own (tests/live/test_network.py, test_file_system.py, test_prices.py)
SAMPLES.update(
    {
        ("ec2", "DescribeRouteTables"): {
            "RouteTables": [
                {
                    "RouteTableId": "rtb-0123456789abcdef0",
                    "VpcId": "vpc-0123456789abcdef0",
                    "Routes": [{"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": "nat-0123", "State": "active"}],
                }
            ]
        },
        ("ec2", "DescribeVpcEndpoints"): {
            "VpcEndpoints": [
                {
                    "VpcEndpointId": "vpce-0123456789abcdef0",
                    "VpcEndpointType": "Gateway",
                    "ServiceName": "com.amazonaws.us-east-1.s3",
                    "State": "Available",
                    "RouteTableIds": ["rtb-0123456789abcdef0"],
                }
            ]
        },
        ("ec2", "DescribeSecurityGroups"): {
            "SecurityGroups": [
                {
                    "GroupId": "sg-0123456789abcdef0",
                    "IpPermissions": [
                        {"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988, "IpRanges": [{"CidrIp": "10.0.0.0/16"}]}
                    ],
                }
            ]
        },
        ("fsx", "DescribeFileSystems"): {
            "FileSystems": [
                {
                    "FileSystemId": "fs-0123456789abcdef0",
                    "FileSystemType": "LUSTRE",
                    "Lifecycle": "AVAILABLE",
                    "LustreConfiguration": {"MountName": "abcdef12", "EfaEnabled": False},
                }
            ]
        },
        ("ec2", "DescribeNetworkInterfaces"): {
            "NetworkInterfaces": [
                {
                    "NetworkInterfaceId": "eni-0123456789abcdef0",
                    "VpcId": "vpc-0123456789abcdef0",
                    "Groups": [{"GroupId": "sg-0123456789abcdef0", "GroupName": "fsx-lustre"}],
                }
            ]
        },
        ("ec2", "DescribeVpcAttribute"): {"VpcId": "vpc-0123456789abcdef0", "EnableDnsSupport": {"Value": True}},
        ("pricing", "GetProducts"): {"FormatVersion": "aws_v1", "PriceList": ['{"product": {}, "terms": {}}']},
        ("ec2", "DescribePlacementGroups"): {  # tests/live/test_placement.py
            "PlacementGroups": [
                {
                    "GroupName": "p5-odcr-cluster",
                    "State": "available",
                    "Strategy": "cluster",
                    "GroupId": "pg-0123456789abcdef0",
                    "GroupArn": f"arn:aws:ec2:us-east-1:{ACCOUNT}:placement-group/p5-odcr-cluster",
                }
            ]
        },
    }
)


# --- validate --live: the node image drift check ---------------------------------------------------------------


def image_resolvers(stack: str, *amis: str) -> dict:
    resources = [
        {
            "StackName": stack,
            "LogicalResourceId": f"SlurmNodeImagex866{index}",
            "PhysicalResourceId": ami,
            "ResourceType": "Custom::PcsNodeImage",
            "Timestamp": datetime(2026, 11, 1, tzinfo=UTC),
            "ResourceStatus": "CREATE_COMPLETE",
        }
        for index, ami in enumerate(amis)
    ]
    resources.append(
        {
            "StackName": stack,
            "LogicalResourceId": "SlurmCluster",
            "PhysicalResourceId": "pcs_0123456789",
            "ResourceType": "AWS::PCS::Cluster",
            "Timestamp": datetime(2026, 11, 1, tzinfo=UTC),
            "ResourceStatus": "CREATE_COMPLETE",
        }
    )
    return {"StackResources": resources}


def described_image(ami: str, name: str, created: str, architecture: str = "x86_64") -> dict:
    return {
        "Images": [
            {
                "ImageId": ami,
                "Architecture": architecture,
                "State": "available",
                "Name": name,
                "CreationDate": created,
            }
        ]
    }


def parameter(value: str, architecture: str = "x86_64") -> dict:
    name = f"/aws/service/pcs/ami/dlami-base-ubuntu2404/{architecture}/latest/ami-id"  # PCS user guide
    return {
        "Parameter": {
            "Name": name,
            "Type": "String",
            "Value": value,
            "Version": 7,
            "DataType": "aws:ec2:image",
            "ARN": f"arn:aws:ssm:us-east-1::parameter{name}",
        }
    }


SAMPLES.update(
    {
        ("cloudformation", "DescribeStackResources"): image_resolvers("llm-pretrain-cluster", "ami-0123456789abcdef0"),
        ("ssm", "GetParameter"): parameter("ami-0123456789abcdef0"),
    }
)
