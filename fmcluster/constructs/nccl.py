"""NcclTuning and NcclValidation: the NCCL environment per compute group in SSM, and nccl-tests results judged.

`NcclTuning` computes, per compute group, the environment `fmcluster.nccl.nccl_environment` gives for its instance
type and the image's versions, and writes it through a Lambda-backed custom resource (CDK Provider framework) to the
SSM parameter `/fmcluster/<cluster>/<group>/nccl-env`, which `fmcluster/node/nccl-env.sh` reads on every node.

`NcclValidation` subscribes a Lambda to the `nccl-tests/` uploads of a bucket (the checkpoints bucket, where
`fmcluster/node/nccl-tests.sbatch` puts its logs), which parses each all_reduce_perf log, publishes bus-bandwidth
metrics and a BelowBaseline flag to CloudWatch (namespace fmcluster/nccl), and alarms per instance type when the
largest message falls below the baseline.
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
from aws_cdk import custom_resources as cr
from constructs import Construct

from fmcluster import catalog
from fmcluster.config.models import GROUP_NAME_PATTERN, NAME_PATTERN
from fmcluster.constructs.compliance import LAMBDA_IN_VPC, acknowledge_deploy_time_functions, acknowledge_findings
from fmcluster.constructs.functions import LAMBDA_RUNTIME, lambda_code, quiet_redundant_depends_on
from fmcluster.constructs.nag import acknowledge_wildcards
from fmcluster.nccl import (
    DEFAULT_EFA_INSTALLER_VERSION,
    DEFAULT_NCCL_VERSION,
    DEFAULT_OFI_NCCL_VERSION,
    LINE_RATE_FRACTION,
    MIN_BASELINE_MESSAGE_BYTES,
    PUBLISHED_MARGIN,
    Versions,
    baseline_spec,
    floor_problems,
    nccl_environment,
    obsolete_variables,
    user_env_problems,
)

"""The newest Python runtime in aws-cdk-lib's `Runtime.ALL`: what cdk-nag's AwsSolutions-L1 requires (cdk-nag 3.0.2,
rules/lambda/LambdaLatestVersion)."""
METRICS_NAMESPACE = "fmcluster/nccl"
RESULTS_PREFIX = "nccl-tests/"
"""Where nccl-tests.sbatch uploads: nccl-tests/<instance_type>/<nodes>n/<job>.log."""
S3_NOTIFICATIONS_HANDLER = "BucketNotificationsHandler050a0587b7544547bf325f094a3db834"
"""The id CDK gives, in each stack, to the singleton Lambda behind `add_event_notification`."""


def parameter_name(cluster_name: str, group: str) -> str:
    """The SSM parameter the nodes of `group` read their NCCL environment from."""
    return f"/fmcluster/{cluster_name}/{group}/nccl-env"


def _check_groups(construct: str, cluster_name: str, groups: Sequence[tuple[str, str]]) -> list[str]:
    problems = []
    if not isinstance(cluster_name, str) or not NAME_PATTERN.match(cluster_name):
        problems.append(
            f"cluster_name: must be 2-24 lowercase letters, digits or '-', starting with a letter and ending with a "
            f"letter or digit; got {cluster_name!r}"
        )
    if not groups:
        problems.append("groups: give at least one (group name, instance type) pair")
    seen: dict[str, int] = {}
    for index, group in enumerate(groups):
        if not (isinstance(group, tuple | list) and len(group) == 2):
            problems.append(f"groups[{index}]: must be a (group name, instance type) pair; got {group!r}")
            continue
        name, instance_type = group
        if not isinstance(name, str) or not GROUP_NAME_PATTERN.match(name) or name.endswith("-"):
            problems.append(
                f"groups[{index}]: group name must be a lowercase letter, then up to 19 lowercase letters, digits or "
                f"'-', not ending with '-'; got {name!r}"
            )
        elif name in seen:
            problems.append(f"groups[{index}]: group name {name!r} repeats groups[{seen[name]}]")
        else:
            seen[name] = index
        if instance_type not in catalog.CATALOG:
            problems.append(
                f"groups[{index}]: unknown instance type {instance_type!r}; known: {', '.join(catalog.CATALOG)}"
            )
    return [f"{construct}: {problem}" for problem in problems]


def _log_group(scope: Construct, construct_id: str, retention: logs.RetentionDays, policy: cdk.RemovalPolicy):
    return logs.LogGroup(scope, construct_id, retention=retention, removal_policy=policy)


def _lambda_role(scope: Construct, construct_id: str, description: str, log_group: logs.ILogGroup) -> iam.Role:
    """A role for one function: it writes to its own log group and nothing else until granted more."""
    role = iam.Role(
        scope, construct_id, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description
    )
    log_group.grant_write(role)
    return role


class NcclTuning(Construct):
    """The NCCL environment of each compute group, written to SSM for the nodes, through one custom resource each.

    For every `(group, instance type)` in `groups` the environment is `fmcluster.nccl.nccl_environment(instance type,
    versions..., user_env)`: `NCCL_SOCKET_IFNAME=^docker,lo,veth` and whatever older plugins still need, nothing the
    aws-ofi-nccl plugin sets itself, no obsolete variable, then `user_env` on top. It is stored as a JSON object in the
    SSM String parameter `/fmcluster/<cluster_name>/<group>/nccl-env` (`parameter_names[group]`), which
    `fmcluster/node/nccl-env.sh` lays over its defaults on the node; the node role needs `grant_read`.

    One `custom_resources.Provider` serves every group; its on_event Lambda (Python, boto3 only,
    fmcluster/lambdas/nccl_env) puts the parameter on Create/Update and deletes it on Delete. Its role may put and
    delete parameters under `/fmcluster/<cluster_name>/` only; both functions log to log groups kept for
    `log_retention`. A version below the P5-class floors, an unknown instance type or a bad group name raises
    ValueError at synth time (every problem at once); a variable of `user_env` that is obsolete or that the plugin
    sets itself gives a synth warning (`warnings`) and is still applied: the user's value wins.

    Example::

        tuning = NcclTuning(stack, "Nccl", cluster_name="llm-pretrain", groups=[("gpu", "p5.48xlarge")],
                            user_env={"NCCL_DEBUG": "WARN"})
        tuning.grant_read(node_role)
        bootstrap_user_data(nccl_parameter_name=tuning.parameter_names["gpu"], ...)

    Args:
        cluster_name: the cluster's name (2-24 lowercase letters, digits, '-'); the parameters' path prefix.
        groups: (group name, EC2 instance type from the catalog) per compute group; at least one.
        nccl_version: NCCL in the training image; omitted: `fmcluster.nccl.DEFAULT_NCCL_VERSION`.
        ofi_nccl_version: aws-ofi-nccl in the image; omitted: `DEFAULT_OFI_NCCL_VERSION`.
        efa_installer_version: the EFA installer of the image; omitted: `DEFAULT_EFA_INSTALLER_VERSION`.
        user_env: variables for every job (the cluster file's `nccl.env`), winning over fmcluster's; omitted: none.
        log_retention: how long the functions' logs are kept; omitted: one year.
        removal_policy: what `cdk destroy` does to those log groups; omitted: RETAIN. (The parameters are always
            deleted with their custom resources: they are derived data, rebuilt on the next deploy.)
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        groups: Sequence[tuple[str, str]],
        nccl_version: str = DEFAULT_NCCL_VERSION,
        ofi_nccl_version: str = DEFAULT_OFI_NCCL_VERSION,
        efa_installer_version: str = DEFAULT_EFA_INSTALLER_VERSION,
        user_env: Mapping[str, str] = MappingProxyType({}),
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        groups = [tuple(group) if isinstance(group, list) else group for group in groups]
        problems = _check_groups("NcclTuning", cluster_name, groups)
        try:
            versions: Versions | None = Versions(nccl_version, ofi_nccl_version, efa_installer_version)
        except ValueError as error:
            problems += [f"NcclTuning: {line}" for line in str(error).splitlines()]
            versions = None
        problems += [f"NcclTuning: {problem}" for problem in user_env_problems(user_env)]
        environments: dict[str, dict[str, str]] = {}
        warnings: dict[str, list[str]] = {}
        if versions is not None and not problems:
            for index, (name, instance_type) in enumerate(groups):
                floors = floor_problems(instance_type, versions)
                problems += [f"NcclTuning: groups[{index}] ({name}, {instance_type}): {line}" for line in floors]
                if floors:
                    continue
                environments[name] = nccl_environment(
                    instance_type,
                    nccl_version=nccl_version,
                    ofi_nccl_version=ofi_nccl_version,
                    efa_installer_version=efa_installer_version,
                    user_env=user_env,
                )
                warnings[name] = obsolete_variables(user_env, versions, instance_type=instance_type)
        if problems:
            raise ValueError("\n".join(problems))
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)

        self.cluster_name = cluster_name
        self.environments: Mapping[str, Mapping[str, str]] = MappingProxyType(environments)
        """The environment written for each group, by group name."""
        self.parameter_names: Mapping[str, str] = MappingProxyType(
            {name: parameter_name(cluster_name, name) for name, _ in groups}
        )
        """The SSM parameter of each group, by group name (what the node bootstrap reads)."""
        self.warnings: Mapping[str, tuple[str, ...]] = MappingProxyType({k: tuple(v) for k, v in warnings.items()})
        """Per group: variables of `user_env` to remove, and why (also reported as synth warnings)."""
        for name, lines in warnings.items():
            for line in lines:
                cdk.Annotations.of(self).add_warning_v2(
                    f"fmcluster:nccl-env:{name}:{line.split(':', 1)[0]}", f"nccl.env for group {name!r}: {line}"
                )

        self.log_group = _log_group(self, "HandlerLogs", log_retention, removal_policy)
        """The on_event function's logs (JSON lines)."""
        role = _lambda_role(
            self, "HandlerRole", f"fmcluster {cluster_name}: writes the NCCL environment SSM parameters", self.log_group
        )
        parameters_arn = stack.format_arn(
            service="ssm", resource="parameter", resource_name=f"fmcluster/{cluster_name}/*"
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["ssm:PutParameter", "ssm:DeleteParameter"], resources=[parameters_arn])
        )
        acknowledge_wildcards(
            role,
            resources=[parameters_arn],
            reason=(
                "The handler writes /fmcluster/<cluster>/<group>/nccl-env and must also delete the parameter of a "
                "group that was renamed or removed: CloudFormation deletes the old custom resource in the update's "
                "cleanup phase, after this policy already lists only the new groups. The wildcard is limited to "
                "this cluster's own parameter path and to ssm:PutParameter/DeleteParameter."
            ),
        )
        self.function = lambda_.Function(
            self,
            "Handler",
            runtime=LAMBDA_RUNTIME,
            handler="handler.on_event",
            code=lambda_code("nccl_env"),
            role=role,
            log_group=self.log_group,
            timeout=cdk.Duration.seconds(30),
            memory_size=128,
            description=f"fmcluster {cluster_name}: NCCL environment per compute group to SSM (custom resource)",
        )
        """The custom resource's on_event handler."""
        quiet_redundant_depends_on(self.function)

        framework_logs = _log_group(self, "ProviderLogs", log_retention, removal_policy)
        framework_role = _lambda_role(
            self,
            "ProviderRole",
            f"fmcluster {cluster_name}: custom-resource framework for the NCCL environment",
            framework_logs,
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            framework_on_event_role=framework_role,
            log_group=framework_logs,
        )
        """The Provider framework in front of `function` (it answers CloudFormation, so a failure never hangs)."""
        quiet_redundant_depends_on(self.provider.node.find_child("framework-onEvent"))
        acknowledge_deploy_time_functions(self.function, "writes this cluster's NCCL SSM parameters (ssm:PutParameter)")
        acknowledge_deploy_time_functions(
            self.provider, "invokes the NCCL parameter handler", resource_type="AWS::Lambda::Function"
        )
        acknowledge_wildcards(
            framework_role,
            resources=[f"{self.function.function_arn}:*"],
            reason=(
                "CDK's Provider framework grants lambda:InvokeFunction on the on_event function and its "
                "versions/aliases (function ARN + ':*'); it invokes that one function only."
            ),
        )

        self.resources: Mapping[str, cdk.CustomResource] = MappingProxyType(
            {
                name: cdk.CustomResource(
                    self,
                    f"Environment-{name}",
                    service_token=self.provider.service_token,
                    resource_type="Custom::NcclEnvironment",
                    properties={
                        "ParameterName": self.parameter_names[name],
                        "Environment": json.dumps(environments[name], sort_keys=True, separators=(",", ":")),
                        "Description": f"NCCL environment for compute group {name} ({instance_type}), by fmcluster",
                    },
                )
                for name, instance_type in groups
            }
        )
        """The custom resource of each group, by group name."""

    def parameter_arn(self, group: str) -> str:
        """The ARN of `group`'s SSM parameter."""
        if group not in self.parameter_names:
            raise KeyError(f"unknown group {group!r}; known: {', '.join(self.parameter_names)}")
        return cdk.Stack.of(self).format_arn(
            service="ssm", resource="parameter", resource_name=self.parameter_names[group].lstrip("/")
        )

    def grant_read(self, grantee: iam.IGrantable, *groups: str) -> iam.Grant:
        """Let `grantee` (a node role) read the NCCL parameters of `groups` (omitted: every group)."""
        arns = [self.parameter_arn(group) for group in (groups or self.parameter_names)]
        return iam.Grant.add_to_principal(grantee=grantee, actions=["ssm:GetParameter"], resource_arns=arns)


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
    `fmcluster.nccl.PUBLISHED_ALL_REDUCE`, 2x p4de and 2x p5), else `line_rate_fraction` of the EFA line rate from
    the instance catalog. One alarm per instance type in `groups` (`alarms`) goes off when a run falls below it and
    stays so until a run meets it again; `rejected_alarm` goes off for a rejected upload. Both notify `alarm_topic` on
    alarm and on recovery; without a topic there are no alarms until `add_alarms(scope, topic)` makes them (an alarm
    that notifies nobody is what Control Tower's CT.CLOUDWATCH.PR.1 forbids).

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
        problems = _check_groups("NcclValidation", cluster_name, groups)
        if not isinstance(line_rate_fraction, int | float) or not 0 < line_rate_fraction <= 1:
            problems.append(
                f"NcclValidation: line_rate_fraction: must be above 0 and at most 1; got {line_rate_fraction!r}"
            )
        if problems:
            raise ValueError("\n".join(problems))
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)

        by_type: dict[str, list[str]] = {}
        for name, instance_type in groups:
            by_type.setdefault(instance_type, []).append(name)
        self.baselines: Mapping[str, Mapping[str, object]] = MappingProxyType(
            {instance_type: baseline_spec(instance_type) for instance_type in sorted(by_type)}
        )
        """What each instance type is held to: EFA line rate and published figures (the function's BASELINES)."""

        self.log_group = _log_group(self, "Logs", log_retention, removal_policy)
        role = _lambda_role(
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
    quiet_redundant_depends_on(handler)
    acknowledge_deploy_time_functions(
        handler,
        "sets the bucket's event notifications (s3:PutBucketNotification)",
        resource_type="AWS::Lambda::Function",
    )
    cdk.Validations.of(handler).acknowledge(
        cdk.Acknowledgment(
            id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            reason=(
                "CDK's bucket-notifications handler (one per stack, created by aws-s3 add_event_notification; its role "
                "cannot be replaced) gets only the AWS-managed basic execution policy: CloudWatch Logs writes for its "
                "own log streams. Its S3 permission is an inline s3:PutBucketNotification."
            ),
        )
    )
