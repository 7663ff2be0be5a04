"""Known causes of failed deploys and nodes: an AWS error text pattern, what it means, the fix, and its source.

The table is data: each entry's pattern was written from a real failure message reported in public (the source
names where), and tests/live/test_causes.py matches each against that message. A cause is matched in the failure
record itself first (a stack event's reason, a node's status message, PCS's errorInfo, a build phase's context),
then in the error lines of the tail that came with it, newest first (the failed step's line before the steps that
ran before it), never in the tail's other lines: an incidental line must not override the real cause. Within one
text the table's order decides, so specific entries come before general ones. A fix that depends on how the group
gets its capacity (on-demand, capacity-block, odcr, training-plan) has one text per capacity type.

>>> explain("VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit of 0 allows").name
'ec2-vcpu-quota'
>>> tail = ["ERROR: RunInstances: VcpuLimitExceeded", "INFO: retrying after InsufficientInstanceCapacity"]
>>> explain("CREATE_FAILED", tail).name  # the INFO line is incidental: it reports no failure
'ec2-vcpu-quota'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Cause:
    name: str
    pattern: str
    cause: str
    fix: str
    source: str
    fixes: tuple[tuple[str, str], ...] = ()
    """(capacity type, fix) where the general `fix` does not fit that capacity type."""

    def matches(self, text: str) -> bool:
        return re.search(self.pattern, text, flags=re.IGNORECASE | re.DOTALL) is not None

    def for_capacity(self, capacity: str | None) -> Cause:
        """This cause with the fix for `capacity` (None: the general fix)."""
        fix = dict(self.fixes).get(capacity or "")
        return replace(self, fix=fix) if fix else self


RESERVED_FIX = (
    "the group launches into its reservation_id: check that it is active, in this zone and has a free instance "
    "for every node (`fmcluster validate FILE --live` counts the cluster's own instances as its own). Buying "
    "on-demand capacity does not apply"
)
PLAN_FIX = (
    "the group's capacity comes from its training plan: check the plan's status, zone and reserved count "
    "(`fmcluster validate FILE --live`); nodes beyond the plan's count get no capacity"
)
ERROR_LINE = re.compile(r"\b(error|fatal|failed|failure|denied|exception)\b", re.I)
"""A tail line that reports a failure (fmcluster's node scripts log `ERROR:`; the AWS CLI says "An error occurred")."""


CAUSES: tuple[Cause, ...] = (
    Cause(
        "cdk-bootstrap-missing",
        r"/cdk-bootstrap/\w+/version not found|Has the environment been bootstrapped",
        "the account and region were never bootstrapped for CDK",
        "run `cdk bootstrap aws://ACCOUNT/REGION` once, then deploy again",
        "AWS CDK developer guide, Bootstrapping (the error a deploy to an unbootstrapped environment prints)",
    ),
    Cause(
        "hyperpod-insufficient-capacity",
        r"We currently do not have sufficient capacity for the requested instance type",
        "SageMaker has no free capacity of the requested instance type for the HyperPod cluster in its zone",
        "reserve the capacity with a SageMaker training plan (compute[].capacity: training-plan), or choose an "
        "availability_zone_id whose offerings list the type (`fmcluster validate FILE --live` checks them)",
        "github.com/awslabs/awsome-distributed-ai/issues/204 (HyperPod's FailureMessage)",
        fixes=(("training-plan", PLAN_FIX),),
    ),
    Cause(
        "insufficient-capacity",
        r"InsufficientInstanceCapacity|do not have sufficient \S+ capacity in the Availability Zone",
        "EC2 has no free capacity of this instance type in the zone right now",
        "use a capacity block or ODCR in that zone (compute[].capacity and reservation_id), or another "
        "availability_zone_id that offers the type; on-demand GPU capacity comes and goes",
        "github.com/aws/aws-parallelcluster/issues/1216",
        fixes=(("capacity-block", RESERVED_FIX), ("odcr", RESERVED_FIX), ("training-plan", PLAN_FIX)),
    ),
    Cause(
        "unsupported-in-zone",
        r"Your requested instance type \(\S+\) is not supported in your requested Availability Zone|"
        r"\bUnsupported\b.*instance type",
        "the instance type is not offered in the availability zone",
        "choose an availability_zone_id that offers the type (`fmcluster validate FILE --live` checks offerings)",
        "github.com/scylladb/scylla-cluster-tests/pull/5123",
    ),
    Cause(
        "ec2-vcpu-quota",
        r"VcpuLimitExceeded|more vCPU capacity than your current vCPU limit",
        "the account's On-Demand vCPU quota for the instance family is too low",
        "request an increase of the family's 'Running On-Demand ... instances' quota in Service Quotas "
        "(`fmcluster validate FILE --live` names it and the vCPUs needed)",
        "github.com/StreisandEffect/streisand/issues/1715",
    ),
    Cause(
        "sagemaker-quota",
        r"account-level service limit '[^']+' is \d+ Instances",
        "the SageMaker quota named in the message (for HyperPod: '<type> for cluster usage') is too low",
        "request an increase of that quota in Service Quotas (service: Amazon SageMaker), or lower compute[].count",
        "SageMaker's ResourceLimitExceeded text, as reported in "
        "github.com/rajinikanthvadla-ai/mlops-churn-prediction-resume-added-project (QUOTA_FIX.md)",
    ),
    Cause(
        "vpc-quota",
        r"VpcLimitExceeded|maximum number of VPCs has been reached",
        "the region already has as many VPCs as the 'VPCs per Region' quota allows",
        "delete an unused VPC or request an increase of 'VPCs per Region' (Amazon VPC) in Service Quotas",
        "EC2 API reference, error codes (VpcLimitExceeded)",
    ),
    Cause(
        "reservation-capacity-exceeded",
        r"ReservationCapacityExceeded|reservation does not have sufficient compatible and available capacity",
        "the capacity reservation has fewer free instances (of that type, platform and zone) than asked for",
        "lower compute[].count to the reservation's available count, or free instances running in it",
        "github.com/scylladb/scylla-cluster-tests/issues/8839",
    ),
    Cause(
        "reservation-not-active",
        r"capacity reservation ID '?cr-\w+'? was not found|Capacity Reservation .* (?:is )?not active|"
        r"InvalidCapacityReservationId",
        "the capacity reservation or block does not exist (any more), or is not active yet",
        "check reservation_id and the block's start and end (`fmcluster validate FILE --live` states them); "
        "a capacity block's instances launch only between its start and end",
        "github.com/aws/aws-parallelcluster/issues/6870",
    ),
    Cause(
        "efa-security-group",
        r"EFA health check|Unresponsive receiver \(reachable by EFA device but handshake failed\)|"
        r"requires a security group that allows all inbound and outbound traffic to and from the security group",
        "EFA traffic is blocked: a security group on the nodes lacks the all-traffic rule to and from itself "
        "(ingress and egress)",
        "use only fmcluster's EFA security group on the nodes, or add the self-referencing ingress and egress "
        "rules to every group you attach",
        "github.com/awslabs/awsome-distributed-ai/pull/259; github.com/gardener/gardener-extension-provider-aws/"
        "issues/1832",
    ),
    Cause(
        "fsx-lustre-ports",
        r"do not permit Lustre LNET network traffic on port 988",
        "FSx checked the file system's security groups before the Lustre port rules existed, or without them",
        "deploy the storage stack again (its rules are created first); with security groups of your own, allow "
        "TCP 988 and 1018-1023 between the file system and the nodes",
        "github.com/aws/aws-parallelcluster/issues/6181",
    ),
    Cause(
        "fsx-dra-access",
        r"unable to validate access to the S3 bucket",
        "FSx cannot read (or for export write) the bucket linked by a data repository association",
        "let FSx's service-linked role read the bucket (and its KMS key) in the bucket policy, or drop the "
        "repository's s3_uri to use the project's own bucket",
        "github.com/aws-samples/amazon-eks-machine-learning-with-terraform-and-kubeflow/issues/91",
    ),
    Cause(
        "image-not-found",
        r"InvalidAMIID\.(?:NotFound|Malformed)|The image id '\[?ami-[0-9a-f]+\]?' does not exist",
        "the AMI does not exist in this region or is not shared with the account",
        "set orchestrator.ami_id to an AMI of this region (AMIs are regional; copy it with `aws ec2 copy-image`), "
        "or remove it to use the PCS-Ready DLAMI",
        "EC2 API reference, error codes (InvalidAMIID.NotFound)",
    ),
    Cause(
        "lifecycle-script-failed",
        r"Lifecycle scripts did not run successfully",
        "a HyperPod lifecycle script exited with an error on a node",
        "read the node's lifecycle log (below): its last line names the failed fmcluster step and "
        "/var/log/fmcluster/lifecycle.log on the node; fix the cause, then deploy again",
        "github.com/awslabs/awsome-distributed-ai/issues/188",
    ),
    Cause(
        "custom-resource-timeout",
        r"did not receive a response from your Custom Resource|failed to stabilize in expected time|"
        r"Custom Resource .*timed out",
        "a custom resource's function never answered CloudFormation (it crashed or ran past its timeout)",
        "read the function's log group (named after the resource) for the error; fmcluster's custom resources "
        "use the Provider framework, so a timeout here means its waiter gave up",
        "github.com/amazon-connect/amazon-connect-call-quality-monitoring/issues/16",
    ),
)


def explain(record: str, tail: Sequence[str] = (), capacity: str | None = None) -> Cause | None:
    """The known cause of the failure `record`, else of the newest error line of `tail` that has one; its fix fits
    `capacity` (the group's capacity type, when the failure belongs to one group). None when nothing matches."""
    for text in (record, *(line for line in reversed(tail) if ERROR_LINE.search(line))):
        cause = next((cause for cause in CAUSES if text and cause.matches(text)), None)
        if cause is not None:
            return cause.for_capacity(capacity)
    return None
