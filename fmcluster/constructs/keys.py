"""KMS key policies the AWS Control Tower proactive controls expect (CT.KMS.PR.3: grants only for AWS resources or
by AWS services), and customer keys for log groups that carry them.

Example::

    key = customer_key(stack, "Key", description="fmcluster llm: data and checkpoints")
    encrypt_log_groups(stack, key)
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from fmcluster.constructs.acknowledgments import acknowledge_findings


def limit_grants_to_aws_services(key: kms.IKey) -> None:
    """Deny kms:CreateGrant on `key` unless the grant is for an AWS resource or made by an AWS service.

    Control Tower's CT.KMS.PR.3 asks every key policy for exactly this statement (Deny, Principal *, Resource *,
    BoolIfExists on kms:GrantIsForAWSResource and aws:PrincipalIsAWSService both false). The services that use
    fmcluster's keys (EBS for launch-template volumes, FSx, SageMaker HyperPod volumes, ECR, CodeBuild) create their
    grants for AWS resources, so nothing they do changes; a person or role can no longer hand the key to others by
    grant. A key imported by ARN has no policy here and is left alone.
    """
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="DenyGrantsExceptForAwsResources",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["kms:CreateGrant"],
            resources=["*"],
            conditions={"BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}},
        ),
        allow_no_op=True,
    )


def every_arn_here(stack: cdk.Stack, service: str, resource: str) -> str:
    """The ARN pattern of every `resource` of `service` in the stack's account and region, for a resource policy's
    `ArnLike` condition: `arn:${Partition}:logs:${Region}:${Account}:log-group:*`."""
    return stack.format_arn(
        service=service, resource=resource, resource_name="*", arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME
    )


def let_logs_use(key: kms.IKey) -> None:
    """Let CloudWatch Logs of this account and region encrypt log groups with `key` (and read them back).

    The statement is the one the CloudWatch Logs user guide gives ("Encrypt log data in CloudWatch Logs using AWS
    KMS", step 2): the regional logs service principal, with the `kms:EncryptionContext:aws:logs:arn` condition
    limited to log groups of this account and region.
    """
    stack = cdk.Stack.of(key)
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsOfThisAccount",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": every_arn_here(stack, "logs", "log-group"),
                }
            },
        ),
        allow_no_op=True,
    )


def customer_key(
    scope: Construct, construct_id: str, *, description: str, removal_policy: cdk.RemovalPolicy
) -> kms.Key:
    """A customer-managed key as fmcluster makes them: yearly rotation, grants only for AWS resources, usable by
    CloudWatch Logs of this account and region (to encrypt log groups)."""
    key = kms.Key(scope, construct_id, enable_key_rotation=True, removal_policy=removal_policy, description=description)
    limit_grants_to_aws_services(key)
    let_logs_use(key)
    return key


AUTO_DELETE_PROVIDER = "Custom::S3AutoDeleteObjectsCustomResourceProvider"
"""The id CDK gives, in each stack, to the provider behind `auto_delete_objects` (its function: child `Handler`)."""
S3_NOTIFICATIONS_HANDLER = "BucketNotificationsHandler050a0587b7544547bf325f094a3db834"
"""The id CDK gives, in each stack, to the singleton Lambda behind `add_event_notification` (child `Resource`)."""
CDK_SINGLETON_FUNCTIONS = {
    AUTO_DELETE_PROVIDER: ("Handler", "AutoDeleteObjectsLogs"),
    S3_NOTIFICATIONS_HANDLER: ("Resource", "BucketNotificationsLogs"),
}
"""CDK singletons whose function is a plain `AWS::Lambda::Function` resource with no log group of its own: Lambda
would create `/aws/lambda/<name>` at the first invocation, unencrypted and kept forever."""
SINGLETON_LOG_RETENTION = logs.RetentionDays.ONE_YEAR


def log_cdk_singletons(stack: cdk.Stack) -> list[logs.LogGroup]:
    """A log group (one year) for each CDK singleton function of `stack`, which the function logs to
    (`LoggingConfig.LogGroup`), so none is created at run time; `encrypt_log_groups` then encrypts it.

    The groups go with the stack on `cdk destroy` (they hold CDK's housekeeping, not data; the function, which refers
    to its group, is deleted first, after its last run)."""
    created = []
    for construct_id, (child_id, log_group_id) in CDK_SINGLETON_FUNCTIONS.items():
        singleton = stack.node.try_find_child(construct_id)
        function = singleton.node.try_find_child(child_id) if singleton is not None else None
        if not isinstance(function, cdk.CfnResource) or function.cfn_resource_type != "AWS::Lambda::Function":
            continue
        if stack.node.try_find_child(log_group_id) is not None:
            continue  # given already
        group = logs.LogGroup(
            stack, log_group_id, retention=SINGLETON_LOG_RETENTION, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        function.add_property_override("LoggingConfig", {"LogGroup": group.log_group_name})
        created.append(group)
    return created


def encrypt_log_groups(scope: IConstruct, key: kms.IKey) -> None:
    """Encrypt every log group under `scope` that has no key yet with `key`, and let CloudWatch Logs use it.

    Call it once per stack, after its constructs are built: it first gives CDK's singleton functions a log group
    (`log_cdk_singletons`), and reaches the log groups CDK makes itself (with
    `@aws-cdk/aws-lambda:useCdkManagedLogGroup`, one per function of a Provider framework). A key of another stack is
    acknowledged for the Control Tower rule, which cannot follow a cross-stack reference.
    """
    log_cdk_singletons(cdk.Stack.of(scope))
    let_logs_use(key)
    key_stack, key_arn = cdk.Stack.of(key), key.key_arn
    elsewhere = key_stack is not cdk.Stack.of(scope)
    reason = (
        f"Encrypted with the KMS key of stack {key_stack.stack_name}: KmsKeyId is a cross-stack reference, which the "
        "rule's template form does not follow (it accepts a literal ARN or a key in the same template); a Control "
        "Tower hook evaluates the resolved key ARN"
    )
    for child in scope.node.find_all():
        if isinstance(child, logs.CfnLogGroup) and child.kms_key_id is None:
            child.kms_key_id = key_arn
            if elsewhere:
                acknowledge_findings(child, controls=["cloudwatch_log_group_encrypted_check"], reason=reason)
