"""NcclValidation: nccl-tests results judged against a baseline, as CloudWatch metrics and alarms.

`NcclValidation` subscribes a Lambda to the `nccl-tests/` uploads of a bucket (the checkpoints bucket, where
`fmcluster/node/nccl-tests.sbatch` puts its logs), which parses each all_reduce_perf log, publishes bus-bandwidth
metrics and a BelowBaseline flag to CloudWatch (namespace fmcluster/nccl), and alarms per instance type when the
largest message falls below the baseline. It is deployed with the storage stack, apart from `NcclTuning`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sns as sns
from constructs import Construct

from fmcluster.constructs.acknowledgments import (
    LAMBDA_IN_VPC,
    acknowledge_findings,
    acknowledge_wildcards,
)
from fmcluster.constructs.functions import (
    LAMBDA_RUNTIME,
    acknowledge_cdk_function,
    function_log_group,
    function_role,
    lambda_code,
    quiet_redundant_depends_on,
)
from fmcluster.constructs.keys import S3_NOTIFICATIONS_HANDLER
from fmcluster.constructs.nccl_tuning import group_pair_problems
from fmcluster.nccl import LINE_RATE_FRACTION, MIN_BASELINE_MESSAGE_BYTES, PUBLISHED_MARGIN, baseline_spec
from fmcluster.problems import Problem, raise_if_any

METRICS_NAMESPACE = "fmcluster/nccl"
RESULTS_PREFIX = "nccl-tests/"
"""Where nccl-tests.sbatch uploads: nccl-tests/<instance_type>/<nodes>n/<job>.log."""


class NcclValidation(Construct):
    """nccl-tests results judged: a Lambda on the `nccl-tests/` uploads of a bucket, metrics, and alarms.

    `fmcluster/node/nccl-tests.sbatch` uploads each all_reduce_perf log to
    `s3://<results_bucket>/nccl-tests/<instance_type>/<nodes>n/<job>.log`. Every such object (created, ending in .log)
    invokes a Lambda (Python, boto3 only, fmcluster/lambdas/nccl_results) that parses the log and publishes to
    CloudWatch namespace `fmcluster/nccl`, with dimensions Cluster, InstanceType and Nodes: BusBandwidth per message
    size class, LargestMessageBusBandwidth, AvgBusBandwidth, BaselineBusBandwidth and BelowBaseline (1 when the
    largest message's bus bandwidth fell below the baseline). A truncated, garbled or corrupted (#wrong > 0) log, or
    one for an instance type not in `groups`, is logged as a structured rejection and counted in RejectedResults.

    The baseline of an instance type is a published nccl-tests figure for the same node count (90% of it:
    `fmcluster.nccl.PUBLISHED_ALL_REDUCE`: 2x p4de, 2x p5, 2x p6-b300, 4x p6-b200), else `line_rate_fraction` of the EFA
    line rate from the instance catalog. One alarm per instance type in `groups` (`alarms`) goes off when a run falls
    below it and stays so until a run meets it again; `rejected_alarm` goes off for a rejected upload. Both notify
    `alarm_topic` on alarm and on recovery; without a topic there are no alarms until `add_alarms(scope, topic)` makes
    them (an alarm that notifies nobody is what Control Tower's CT.CLOUDWATCH.PR.1 forbids).

    The function may read `nccl-tests/*` of the bucket (and decrypt with its key, when the bucket has one) and put
    metric data in namespace fmcluster/nccl only. When `results_bucket` lives in another stack, the notification is
    added to it as to an imported bucket (a CDK custom resource in this stack that keeps the bucket's other
    notifications), so the bucket's stack never depends on this one.

    Example::

        NcclValidation(stack, "NcclTests", cluster_name="llm-pretrain",
                       results_bucket=storage.buckets.checkpoints_bucket, groups=[("gpu", "p5.48xlarge")])

    Args:
        cluster_name: the cluster's name; the metrics' Cluster dimension.
        results_bucket: where nccl-tests logs are uploaded (the checkpoints bucket).
        groups: (group name, EC2 instance type) per compute group; their instance types are the ones judged.
        alarm_topic: an SNS topic the alarms notify; omitted: no alarms (see `add_alarms`).
        line_rate_fraction: where nothing is published, the fraction of the EFA line rate the largest message's
            bus bandwidth must reach; omitted: 0.7.
        log_retention: how long the function's logs are kept; omitted: one year.
        removal_policy: what `cdk destroy` does to the log group; omitted: RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        results_bucket: s3.IBucket,
        groups: Sequence[tuple[str, str]],
        alarm_topic: sns.ITopic | None = None,
        line_rate_fraction: float = LINE_RATE_FRACTION,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        groups = [tuple(group) if isinstance(group, list) else group for group in groups]
        problems = group_pair_problems(cluster_name, groups)
        if not isinstance(line_rate_fraction, int | float) or not 0 < line_rate_fraction <= 1:
            problems.append(Problem("line_rate_fraction", f"must be above 0 and at most 1; got {line_rate_fraction!r}"))
        raise_if_any("NcclValidation", problems)
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)

        by_type: dict[str, list[str]] = {}
        for name, instance_type in groups:
            by_type.setdefault(instance_type, []).append(name)
        self.baselines: Mapping[str, Mapping[str, object]] = MappingProxyType(
            {instance_type: baseline_spec(instance_type) for instance_type in sorted(by_type)}
        )
        """What each instance type is held to: EFA line rate and published figures (the function's BASELINES)."""

        self.log_group = function_log_group(self, "Logs", log_retention, removal_policy)
        role = function_role(
            self,
            "Role",
            f"fmcluster {cluster_name}: reads nccl-tests logs, publishes fmcluster/nccl metrics",
            self.log_group,
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[results_bucket.arn_for_objects(f"{RESULTS_PREFIX}*")]
            )
        )
        if results_bucket.encryption_key is not None:
            results_bucket.encryption_key.grant_decrypt(role)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}},
            )
        )
        acknowledge_wildcards(
            role,
            resources=[results_bucket.arn_for_objects(f"{RESULTS_PREFIX}*")],
            reason=(
                "The function reads the nccl-tests logs the sbatch script uploads; their keys (instance type, node "
                "count, Slurm job id) are known only at run time. Read-only, and only under the nccl-tests/ prefix."
            ),
        )
        acknowledge_wildcards(
            role,
            resources=["*"],
            reason=(
                "cloudwatch:PutMetricData supports no resource-level permissions (Resource must be '*'); the "
                "statement is limited to the fmcluster/nccl namespace by the cloudwatch:namespace condition."
            ),
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=LAMBDA_RUNTIME,
            handler="handler.handler",
            code=lambda_code("nccl_results"),
            role=role,
            log_group=self.log_group,
            timeout=cdk.Duration.seconds(60),
            memory_size=256,
            retry_attempts=2,
            max_event_age=cdk.Duration.hours(6),
            description=f"fmcluster {cluster_name}: judges nccl-tests all_reduce_perf logs, publishes metrics",
            environment={
                "CLUSTER_NAME": cluster_name,
                "BASELINES": json.dumps(self.baselines, sort_keys=True, separators=(",", ":"), default=dict),
                "LINE_RATE_FRACTION": str(line_rate_fraction),
                "PUBLISHED_MARGIN": str(PUBLISHED_MARGIN),
                "MIN_BASELINE_BYTES": str(MIN_BASELINE_MESSAGE_BYTES),
            },
        )
        """The function that judges each upload (bad input is logged, never retried)."""
        quiet_redundant_depends_on(self.function)

        bucket = results_bucket
        if not isinstance(results_bucket, s3.Bucket) or cdk.Stack.of(results_bucket) is not stack:
            bucket = s3.Bucket.from_bucket_attributes(
                self, "ResultsBucket", bucket_arn=results_bucket.bucket_arn, bucket_name=results_bucket.bucket_name
            )
        bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            s3n.LambdaDestination(self.function),
            s3.NotificationKeyFilter(prefix=RESULTS_PREFIX, suffix=".log"),
        )
        _acknowledge_notifications_handler(cdk.Stack.of(bucket))
        self._acknowledge_function(cross_stack=bucket is not results_bucket)

        self.cluster_name = cluster_name
        self._groups_by_type = by_type
        self.alarms: Mapping[str, cloudwatch.Alarm] = MappingProxyType({})
        """One alarm per instance type of `groups`, by instance type (none until there is a topic to notify)."""
        self.rejected_alarm: cloudwatch.Alarm | None = None
        """Goes off when an upload is rejected; back to OK after five quiet minutes."""
        if alarm_topic is not None:
            self.add_alarms(self, alarm_topic)

    def add_alarms(self, scope: Construct, topic: sns.ITopic) -> None:
        """Create the alarms under `scope`, notifying `topic` on alarm and on recovery.

        `scope` may sit in another stack, such as the one that holds the alarm topic: the alarms refer to metric names
        only, never to this construct's resources. Once per construct.
        """
        if self.rejected_alarm is not None:
            raise ValueError("NcclValidation: the alarms exist already")
        alarms = MappingProxyType(
            {
                instance_type: cloudwatch.Alarm(
                    scope,
                    f"BelowBaseline-{instance_type}",
                    metric=cloudwatch.Metric(
                        namespace=METRICS_NAMESPACE,
                        metric_name="BelowBaseline",
                        dimensions_map={"Cluster": self.cluster_name, "InstanceType": instance_type},
                        statistic="Maximum",
                        period=cdk.Duration.minutes(5),
                    ),
                    threshold=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    evaluation_periods=1,
                    treat_missing_data=cloudwatch.TreatMissingData.IGNORE,
                    alarm_description=(
                        f"fmcluster {self.cluster_name}: the last nccl-tests all_reduce_perf run on {instance_type} "
                        f"(compute group {', '.join(names)}) reached less bus bandwidth at its largest message than "
                        "the baseline; see metric LargestMessageBusBandwidth vs BaselineBusBandwidth in fmcluster/nccl "
                        "and the function's log. Stays in alarm until a run meets the baseline."
                    ),
                )
                for instance_type, names in sorted(self._groups_by_type.items())
            }
        )
        rejected = cloudwatch.Alarm(
            scope,
            "Rejected",
            metric=cloudwatch.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name="RejectedResults",
                dimensions_map={"Cluster": self.cluster_name},
                statistic="Sum",
                period=cdk.Duration.minutes(5),
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"fmcluster {self.cluster_name}: an upload under nccl-tests/ was rejected (truncated, garbled, "
                "#wrong > 0, unknown instance type or key); the function's log says which and why."
            ),
        )
        action = cloudwatch_actions.SnsAction(topic)
        for alarm in (*alarms.values(), rejected):
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        self.alarms, self.rejected_alarm = alarms, rejected

    def _acknowledge_function(self, cross_stack: bool) -> None:
        acknowledge_findings(
            self.function,
            checkov=["CKV_AWS_117"],
            controls=[LAMBDA_IN_VPC],
            reason="Reads nccl-tests logs from S3 and puts CloudWatch metrics; it reaches nothing inside the VPC, so "
            "outside a VPC it needs no NAT gateway or interface endpoint",
        )
        acknowledge_findings(
            self.function,
            checkov=["CKV_AWS_116"],
            reason="S3 invokes it asynchronously with two retries; a log it still cannot judge is logged and counted "
            "in RejectedResults (which alarms), and the log itself stays in the bucket to judge again",
        )
        acknowledge_findings(
            self.function,
            checkov=["CKV_AWS_115"],
            reason="One invocation per uploaded nccl-tests log (a few per day); reserved concurrency would only take "
            "capacity from the account's unreserved pool",
        )
        acknowledge_findings(
            self.function,
            checkov=["CKV_AWS_173", "CKV_AWS_45"],
            reason="Its environment holds the cluster name and baseline figures, no secret (Lambda encrypts it at "
            "rest with an AWS key)",
        )
        if not cross_stack:
            return
        acknowledge_findings(
            self,
            controls=["lambda_function_public_access_prohibited_check"],
            reason="S3 may invoke the function only for the checkpoints bucket (SourceArn) of this account "
            "(SourceAccount); both are references the rule cannot read statically (the bucket is in the storage stack, "
            "the account a pseudo parameter), and a Control Tower hook sees the resolved values",
        )


def _acknowledge_notifications_handler(stack: cdk.Stack) -> None:
    """Acknowledge the findings on CDK's S3-notifications singleton, which `add_event_notification` creates."""
    handler = stack.node.try_find_child(S3_NOTIFICATIONS_HANDLER)
    if handler is None:
        return
    acknowledge_cdk_function(
        handler,
        "sets the bucket's event notifications (s3:PutBucketNotification)",
        "CDK's bucket-notifications handler (one per stack, created by aws-s3 add_event_notification; its role cannot "
        "be replaced) gets only the AWS-managed basic execution policy: CloudWatch Logs writes for its own log "
        "streams. Its S3 permission is an inline s3:PutBucketNotification.",
    )
