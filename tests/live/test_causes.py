"""Each known cause matches the real failure message it was written from (the message and its source)."""

from __future__ import annotations

import pytest

from fmcluster.live.causes import CAUSES, explain

REAL_MESSAGES = {
    # AWS CDK developer guide, Bootstrapping.
    "cdk-bootstrap-missing": "BootstrapExampleStack: SSM parameter /cdk-bootstrap/hnb659fds/version not found. Has "
    "the environment been bootstrapped? Please run 'cdk bootstrap' (see https://docs.aws.amazon.com/cdk/latest/guide/"
    "bootstrapping.html)",
    # github.com/aws/aws-parallelcluster/issues/1216
    "insufficient-capacity": "You must use a valid fully-formed launch template. We currently do not have sufficient "
    "c5n.18xlarge capacity in the Availability Zone you requested (us-east-1a). Our system will be working on "
    "provisioning additional capacity. You can currently get c5n.18xlarge capacity by not specifying an Availability "
    "Zone in your request or choosing us-east-1b, us-east-1d, us-east-1f, us-east-1c. (Service: AmazonAutoScaling; "
    "Status Code: 400; Error Code: ValidationError; Request ID: 2996fd43-acc0-11e9-bf48-6b6dbfbd66b4)",
    # github.com/awslabs/awsome-distributed-ai/issues/204: HyperPod's DescribeCluster FailureMessage.
    "hyperpod-insufficient-capacity": "We currently do not have sufficient capacity for the requested instance "
    "type(s). Please try again.",
    # github.com/scylladb/scylla-cluster-tests/pull/5123
    "unsupported-in-zone": "An error occurred (Unsupported) when calling the RunInstances operation: Your requested "
    "instance type (is4gen.8xlarge) is not supported in your requested Availability Zone (us-east-1e). Please retry "
    "your request by not specifying an Availability Zone or choosing us-east-1a, us-east-1b, us-east-1c, us-east-1d.",
    # github.com/StreisandEffect/streisand/issues/1715
    "ec2-vcpu-quota": "Instance creation failed => VcpuLimitExceeded: You have requested more vCPU capacity than your "
    "current vCPU limit of 1 allows for the instance bucket that the specified instance type belongs to. Please visit "
    "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.",
    # rajinikanthvadla-ai/mlops-churn-prediction-resume-added-project, QUOTA_FIX.md (SageMaker's text; HyperPod
    # names its quota '<type> for cluster usage' in the same sentence).
    "sagemaker-quota": "The account-level service limit 'ml.m5.large for processing job usage' is 0 Instances",
    # EC2 API reference, error codes.
    "vpc-quota": 'Resource handler returned message: "The maximum number of VPCs has been reached. (Service: Ec2, '
    'Status Code: 400, Request ID: 0a1b2c3d)" (RequestToken: 1a2b, HandlerErrorCode: ServiceLimitExceeded)',
    # github.com/scylladb/scylla-cluster-tests/issues/8839
    "reservation-capacity-exceeded": "An error occurred (ReservationCapacityExceeded) when calling the RunInstances "
    "operation: The requested reservation does not have sufficient compatible and available capacity for this "
    "request.",
    # github.com/aws/aws-parallelcluster/issues/6870
    "reservation-not-active": "Unable to parse configuration file. An error occurred when calling the "
    "DescribeCapacityReservations operation: The capacity reservation ID 'cr-xxxxx' was not found",
    # github.com/awslabs/awsome-distributed-ai/pull/259
    "efa-security-group": 'cluster creation failed with "EFA health check error" on trn1/p4d/p4de/p5',
    # github.com/aws/aws-parallelcluster/issues/6181
    "fsx-lustre-ports": "The file system cannot be created because the default security group in the subnet provided "
    "or the provided security groups do not permit Lustre LNET network traffic on port 988 (Service: AmazonFSx; Status "
    "Code: 400; Error Code: InvalidNetworkSettings; Request ID: 0949dbfc-5e0a-4f03-bf89-d7e74540f8ec; Proxy: null)",
    # github.com/aws-samples/amazon-eks-machine-learning-with-terraform-and-kubeflow/issues/91
    "fsx-dra-access": "creating FSx for Lustre Data Repository Association: BadRequest: Amazon FSx is unable to "
    "validate access to the S3 bucket. Ensure the IAM role or user you are using has s3:Get*, s3:List* and "
    "s3:PutObject permissions to the S3 bucket prefix.",
    # EC2 API reference, error codes (InvalidAMIID.NotFound), as CloudFormation reports it.
    "image-not-found": "Resource handler returned message: \"The image id '[ami-0123456789abcdef0]' does not exist "
    '(Service: Ec2, Status Code: 400, Request ID: 5e6f)"',
    # github.com/awslabs/awsome-distributed-ai/issues/188
    "lifecycle-script-failed": 'Instance i-XXX failed to provision with the following error: "Lifecycle scripts did '
    "not run successfully. Ensure the scripts exist in provided S3 path, are accessible, and run without errors. "
    'Please see CloudWatch logs for lifecycle script execution details." Note that multiple instances may be '
    "impacted.",
    # github.com/amazon-connect/amazon-connect-call-quality-monitoring/issues/16
    "custom-resource-timeout": "CloudFormation did not receive a response from your Custom Resource. Please check your "
    "logs for requestId [2f83d1e3-58e2-4eb5-803e-bfa7cb216805]. If you are using the Python cfn-response module, you "
    "may need to update your Lambda function code so that CloudFormation can attach the updated version.",
}


def test_every_cause_has_a_real_message():
    assert sorted(REAL_MESSAGES) == sorted(cause.name for cause in CAUSES)


@pytest.mark.parametrize("name", sorted(REAL_MESSAGES))
def test_the_real_message_is_explained_by_its_cause(name):
    cause = explain(REAL_MESSAGES[name])
    assert cause is not None and cause.name == name
    assert cause.fix and cause.source


def test_an_unknown_message_has_no_cause():
    assert explain("Resource creation cancelled") is None


def test_the_failure_record_wins_over_its_tail():
    """The node's own status message is the record; an error line in the tail before it does not override it."""
    tail = [
        "2026-11-30T09:40:01Z on_create.sh[2817] ERROR: step scratch: VcpuLimitExceeded seen while probing (retried)",
        "2026-11-30T09:40:09Z on_create.sh[2817] ERROR: fmcluster lifecycle FAILED at step nccl-env",
    ]
    assert explain(REAL_MESSAGES["lifecycle-script-failed"], tail).name == "lifecycle-script-failed"


def test_only_error_lines_of_a_tail_count_and_the_newest_first():
    tail = [
        "2026-11-30T09:35:11Z bootstrap.sh[1802] ERROR: RunInstances said VcpuLimitExceeded",
        "2026-11-30T09:35:12Z bootstrap.sh[1802] INFO: note: InsufficientInstanceCapacity is retried by PCS",
        "2026-11-30T09:36:11Z mount-lustre.sh[1830] ERROR: FSx: do not permit Lustre LNET network traffic on port 988",
    ]
    assert explain("bootstrap finished with failures: mount-lustre", tail).name == "fsx-lustre-ports"
    assert explain("bootstrap finished with failures: x", tail[:2]).name == "ec2-vcpu-quota"  # INFO is incidental


def test_hyperpods_own_capacity_message_is_not_the_ec2_one():
    assert explain(REAL_MESSAGES["hyperpod-insufficient-capacity"]).name == "hyperpod-insufficient-capacity"
    assert explain(REAL_MESSAGES["insufficient-capacity"]).name == "insufficient-capacity"


@pytest.mark.parametrize(
    ("name", "capacity", "says", "never"),
    [
        ("insufficient-capacity", "on-demand", "capacity block or ODCR", "training plan"),
        ("insufficient-capacity", None, "capacity block or ODCR", "training plan"),
        ("insufficient-capacity", "capacity-block", "reservation_id", "capacity block or ODCR"),
        ("insufficient-capacity", "odcr", "reservation_id", "capacity block or ODCR"),
        ("insufficient-capacity", "training-plan", "training plan", "capacity block or ODCR"),
        ("hyperpod-insufficient-capacity", "on-demand", "training plan", "capacity block"),
        ("hyperpod-insufficient-capacity", "training-plan", "plan's status", "training-plan)"),
    ],
)
def test_fixes_fit_the_groups_capacity_type(name, capacity, says, never):
    """A group already on a capacity block is not told to buy one; one on a training plan is sent to its plan."""
    cause = explain(REAL_MESSAGES[name], capacity=capacity)
    assert cause.name == name
    assert says in cause.fix and never not in cause.fix
