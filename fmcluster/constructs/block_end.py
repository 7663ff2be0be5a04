"""BlockEndDrain: before a capacity block ends, drain its Slurm nodes and signal the jobs on them to checkpoint."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from fmcluster.config.models import CLUSTER_TAG, DRAIN_CHECK_MINUTES
from fmcluster.constructs.acknowledgments import LAMBDA_IN_VPC, acknowledge_findings, acknowledge_wildcards
from fmcluster.constructs.functions import (
    LAMBDA_RUNTIME,
    function_log_group,
    function_role,
    lambda_code,
    quiet_redundant_depends_on,
)

WARNING_TYPES = ("Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning")
"""EC2 user guide, "Monitor Capacity Blocks using EventBridge": the event EC2 sends 40 minutes before a block ends
(the English page spells it the first way, its other language versions the second; the rule matches both)."""
RUN_SHELL_SCRIPT = "AWS-RunShellScript"
"""The SSM document that runs shell commands as root on a managed Linux instance (SSM user guide, Run Command)."""


class BlockEndDrain(Construct):
    """Drains a cluster's Slurm nodes in capacity blocks shortly before each block ends.

    A Lambda function (fmcluster/lambdas/block_end) runs every 5 minutes (an EventBridge schedule) and on EC2's own
    "Capacity Block Expiration Warning" 40 minutes before a block's end. For a block within its grace of its end
    (EC2 DescribeCapacityReservations: State, EndDate), it runs `/opt/fmcluster/node/block-end-drain.sh` through SSM
    Run Command on one running instance tagged for the cluster (the head node when there is one): the block's Slurm
    partitions are drained and the job steps on them get SIGUSR1, on which examples/jobs/train.py checkpoints. The
    operators get one message per block on `topic`, when nodes were drained or the drain failed.

    Example::

        BlockEndDrain(stack, "BlockEnd", cluster_name="llm", topic=topic,
                      blocks={"cr-0123456789abcdef0": (["gpu"], 60)})

    Args:
        cluster_name: the cluster whose instances carry the tag `fmcluster:cluster` with this value.
        blocks: reservation id -> (the Slurm partitions of its compute groups, minutes before its end to drain).
        topic: the alarm topic the one message per block goes to.
        topic_key: the topic's KMS key, when it is encrypted: the function may use it to publish
            (kms:GenerateDataKey, kms:Decrypt; SNS developer guide, "Encryption at rest"). Omitted: an unencrypted
            topic.
        log_retention: how long the function's log is kept; default one year.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        blocks: Mapping[str, tuple[Sequence[str], int]],
        topic: sns.ITopic,
        topic_key: kms.IKey | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
    ) -> None:
        if not blocks:
            raise ValueError("BlockEndDrain: blocks: needs at least one capacity block")
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.log_group = function_log_group(self, "Logs", log_retention, cdk.RemovalPolicy.DESTROY)
        role = function_role(
            self,
            "Role",
            f"fmcluster {cluster_name}: drains capacity blocks' Slurm nodes before they end",
            self.log_group,
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "ec2:DescribeCapacityReservations",
                    "ec2:DescribeInstances",
                    "ssm:DescribeInstanceInformation",
                    "ssm:GetCommandInvocation",
                ],
                resources=["*"],
            )
        )
        document = stack.format_arn(service="ssm", account="", resource="document", resource_name=RUN_SHELL_SCRIPT)
        instances = stack.format_arn(service="ec2", resource="instance", resource_name="*")
        role.add_to_policy(iam.PolicyStatement(actions=["ssm:SendCommand"], resources=[document]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["ssm:SendCommand"],
                resources=[instances],
                conditions={"StringEquals": {f"ssm:resourceTag/{CLUSTER_TAG}": cluster_name}},
            )
        )
        role.add_to_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[topic.topic_arn]))
        if topic_key is not None:
            topic_key.grant(role, "kms:GenerateDataKey", "kms:Decrypt")
        acknowledge_wildcards(
            role,
            resources=["*"],
            reason="ec2:DescribeCapacityReservations, ec2:DescribeInstances, ssm:DescribeInstanceInformation and "
            "ssm:GetCommandInvocation support no resource-level permissions (Service Authorization Reference); all "
            "four only read",
        )
        acknowledge_wildcards(
            role,
            resources=[instances],
            reason="Run Command may reach only instances tagged for this cluster (the ssm:resourceTag condition); "
            "their ids are known only at run time",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=LAMBDA_RUNTIME,
            handler="handler.on_event",
            code=lambda_code("block_end"),
            role=role,
            log_group=self.log_group,
            timeout=cdk.Duration.minutes(5),
            memory_size=256,
            retry_attempts=0,
            description=f"fmcluster {cluster_name}: drains capacity blocks' Slurm nodes before they end",
            environment={
                "CLUSTER_NAME": cluster_name,
                "CLUSTER_TAG": CLUSTER_TAG,
                "TOPIC_ARN": topic.topic_arn,
                "BLOCKS": json.dumps(
                    {rid: {"partitions": list(parts), "minutes": minutes} for rid, (parts, minutes) in blocks.items()},
                    sort_keys=True,
                    separators=(",", ":"),
                ),
            },
        )
        """The function that drains due blocks (one run per schedule tick or warning; not retried: the next tick is)."""
        quiet_redundant_depends_on(self.function)
        self.schedule = events.Rule(
            self,
            "Every5Minutes",
            description=f"fmcluster {cluster_name}: look for capacity blocks near their end",
            schedule=events.Schedule.rate(cdk.Duration.minutes(DRAIN_CHECK_MINUTES)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        self.warning = events.Rule(
            self,
            "ExpirationWarning",
            description=f"fmcluster {cluster_name}: EC2's warning 40 minutes before a capacity block ends",
            event_pattern=events.EventPattern(
                source=["aws.ec2"],
                detail_type=list(WARNING_TYPES),
                detail={"capacity-reservation-id": sorted(blocks)},
            ),
            targets=[targets.LambdaFunction(self.function, retry_attempts=2)],
        )
        acknowledge_findings(
            self.function,
            checkov=["CKV_AWS_117"],
            controls=[LAMBDA_IN_VPC],
            reason="Calls EC2, SSM and SNS APIs only and reaches nothing inside the VPC (the drain runs on a node "
            "through SSM Run Command), so outside a VPC it needs no NAT gateway or interface endpoint",
        )
        acknowledge_findings(
            self.function,
            checkov=["CKV_AWS_116"],
            reason="EventBridge invokes it every 5 minutes; a failed run is logged and the next one repeats the drain "
            "(the drain script is idempotent), so a dead-letter queue would add nothing",
        )
        acknowledge_findings(
            self.function,
            checkov=["CKV_AWS_115"],
            reason="One invocation per 5 minutes; reserved concurrency would only take capacity from the account's "
            "unreserved pool",
        )
        acknowledge_findings(
            self.function,
            checkov=["CKV_AWS_173", "CKV_AWS_45"],
            reason="Its environment holds the cluster name, reservation ids, partition names and the topic ARN, no "
            "secret (Lambda encrypts it at rest with an AWS key)",
        )
