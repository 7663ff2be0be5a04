"""The execution role of a HyperPod cluster's instance groups: what its nodes and its VPC interfaces may do."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

from fmcluster.constructs.acknowledgments import nag_form
from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.hyperpod.lifecycle import LIFECYCLE_PREFIX
from fmcluster.constructs.image import ECR_PULL_ACTIONS
from fmcluster.drains import drains_before_end

if TYPE_CHECKING:
    from fmcluster.constructs.hyperpod.cluster import HyperPodSlurmCluster

VPC_DESCRIBE_ACTIONS = (
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
)
"""Read-only calls HyperPod makes in VPC mode; EC2 offers no resource-level permission for them."""
NETWORK_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterfacePermission",
    "ec2:CreateTags",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DetachNetworkInterface",
)
"""What HyperPod does to the nodes' interfaces in the compute subnet (AWS's HyperPod IAM prerequisites list these,
with ec2:CreateNetworkInterface and the Describe calls, for clusters in your own VPC)."""
MANAGED_INSTANCE_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"


def execution_role(
    cluster: HyperPodSlurmCluster,
    *,
    subnet: ec2.ISubnet,
    security_groups: Sequence[ec2.ISecurityGroup],
    buckets: ProjectBuckets | None,
    key: kms.IKey | None,
    image_repositories: Sequence[ecr.IRepository] | None,
) -> iam.Role:
    """The execution role of every instance group of `cluster`: VPC interfaces, lifecycle scripts, the project's
    buckets, this cluster's SSM parameters, ECR pulls, node logs and metrics, each as narrow as HyperPod allows
    (every wildcard acknowledged with its reason)."""
    stack = cdk.Stack.of(cluster)
    role = iam.Role(
        cluster,
        "ExecutionRole",
        assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
        description=f"SageMaker HyperPod cluster {cluster.cluster_name}: its nodes and its VPC interfaces",
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(MANAGED_INSTANCE_POLICY)],
    )
    wildcards: list[tuple[str, str]] = []

    def allow(actions: Sequence[str], resources: Sequence[str], reason: str | None = None, **condition) -> None:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=list(resources), conditions=condition or None)
        )
        if reason is not None:
            wildcards.extend((r, reason) for r in resources if "*" in json.dumps(stack.resolve(r)))

    # VPC mode (HyperPod IAM prerequisites): interfaces in the compute subnet, in the cluster's groups.
    interfaces = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
    allow(
        VPC_DESCRIBE_ACTIONS,
        ["*"],
        "EC2 Describe calls support no resource-level permissions; HyperPod reads the VPC, subnet, security "
        "groups and DHCP options to place the nodes' interfaces",
    )
    allow(
        ["ec2:CreateNetworkInterface"],
        [
            interfaces,
            stack.format_arn(service="ec2", resource="subnet", resource_name=subnet.subnet_id),
            *(
                stack.format_arn(service="ec2", resource="security-group", resource_name=group.security_group_id)
                for group in security_groups
            ),
        ],
        "HyperPod creates each node's interfaces itself, so their ids are unknown in advance; creation is "
        "limited to this account and region, the compute subnet and the cluster's security groups",
    )
    allow(
        NETWORK_INTERFACE_ACTIONS,
        [interfaces],
        "HyperPod tags, shares with its service account, detaches and deletes the interfaces it created for "
        "the nodes; their ids are known only at run time, so the statement names this account's and region's "
        "interfaces",
    )
    allow(
        ["ec2:DetachNetworkInterface"],
        [stack.format_arn(service="ec2", resource="instance", resource_name="*", account="*")],
        "HyperPod's instances live in a SageMaker-owned account; detaching an interface from one is "
        "authorized on that instance, whose account and id are HyperPod's",
    )

    # The lifecycle scripts (the managed policy reaches sagemaker-* buckets too; this names the one prefix).
    allow(
        ["s3:GetObject"],
        [cluster.lifecycle_bucket.arn_for_objects(f"{LIFECYCLE_PREFIX}/*")],
        "Nodes download every lifecycle script under the one prefix of their own lifecycle bucket",
    )
    allow(
        ["s3:ListBucket"],
        [cluster.lifecycle_bucket.bucket_arn],
        StringLike={"s3:prefix": [f"{LIFECYCLE_PREFIX}/*", LIFECYCLE_PREFIX]},
    )

    if buckets is not None:
        buckets.grant_node_access(role)

    # This cluster's SSM parameters: the NCCL environment of each group and the training image's URI.
    prefixes = dict.fromkeys([cluster.parameter_prefix, cluster.nccl_parameter_prefix])
    allow(
        ["ssm:GetParameter"],
        [stack.format_arn(service="ssm", resource="parameter", resource_name=f"{p.lstrip('/')}/*") for p in prefixes],
        "Nodes read only this cluster's own SSM parameters (the NCCL environment of each group, the training "
        "image URI), whose names end in group names",
    )

    # Pulling training images from ECR.
    allow(
        ["ecr:GetAuthorizationToken"],
        ["*"],
        "ecr:GetAuthorizationToken supports no resource-level permissions; the token it returns only "
        "reaches what the role's ECR statements allow",
    )
    if image_repositories:
        allow(ECR_PULL_ACTIONS, [repository.repository_arn for repository in image_repositories])
    elif image_repositories is None:  # empty: the caller grants pulls itself
        allow(
            ECR_PULL_ACTIONS,
            [stack.format_arn(service="ecr", resource="repository", resource_name="*")],
            "No image repository was named, so nodes may pull (never push) from this account's repositories "
            "in this region; pass image_repositories to narrow it",
        )

    # Logs and metrics of the nodes.
    cluster.node_log_group.grant_write(role)
    allow(
        ["cloudwatch:PutMetricData"],
        ["*"],
        "cloudwatch:PutMetricData supports no resource-level permissions; the condition keeps the nodes to "
        "their own namespace",
        StringEquals={"cloudwatch:namespace": cluster.metrics_namespace},
    )

    # The controller's plan-end-drain.sh reads each training plan's end (SageMaker DescribeTrainingPlan) at run time.
    if plans := sorted(drains_before_end(cluster.compute_groups, "training-plan")):
        allow(["sagemaker:DescribeTrainingPlan"], plans)

    if key is not None:
        allow(["kms:DescribeKey", "kms:Decrypt", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom",
               "kms:ReEncryptTo"], [key.key_arn])  # fmt: skip
        allow(["kms:CreateGrant"], [key.key_arn], Bool={"kms:GrantIsForAWSResource": "true"})

    cdk.Validations.of(role).acknowledge(
        cdk.Acknowledgment(
            id=f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{MANAGED_INSTANCE_POLICY}]",
            reason="The HyperPod instance policy AWS requires on every cluster execution role: its agents' "
            "CloudWatch logs and metrics under /aws/sagemaker/Clusters, SSM sessions to nodes, and reading "
            "sagemaker-* lifecycle buckets; AWS keeps it in step with the HyperPod agents",
        ),
        *(
            cdk.Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{nag_form(role, resource)}]", reason=reason)
            for resource, reason in dict(wildcards).items()
        ),
    )
    return role
