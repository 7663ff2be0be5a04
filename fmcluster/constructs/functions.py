"""What every Lambda function of fmcluster shares: runtime, code from package data, a cfn-lint note, a Provider."""

from __future__ import annotations

from importlib import resources

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from fmcluster.constructs.acknowledgments import acknowledge_deploy_time_functions, nag_form

LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_14
"""The newest Python runtime (cdk-nag's AwsSolutions-L1 accepts only the latest)."""


def lambda_code(name: str) -> lambda_.Code:
    """The handler folder `fmcluster/lambdas/<name>` (package data, so it ships with `pip install fmcluster`)."""
    folder = resources.files("fmcluster").joinpath("lambdas", name)
    return lambda_.Code.from_asset(str(folder), exclude=["__pycache__", "*.pyc"])


def quiet_redundant_depends_on(construct: IConstruct) -> None:
    """Tell cfn-lint that the DependsOn CDK writes on a function's (or state machine's) role is deliberate (W3005).

    CDK makes a function depend on its role and the role's policy (it must not run before its permissions exist)
    and references the role by GetAtt too; cfn-lint reports the role half as redundant. `construct` may be the L2
    construct or its CfnResource.
    """
    resource = construct if isinstance(construct, cdk.CfnResource) else construct.node.try_find_child("Resource")
    if isinstance(resource, cdk.CfnResource):
        resource.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})


BASIC_EXECUTION_ROLE = (
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
)
"""cdk-nag's finding on a function role with the AWS-managed basic execution policy (CloudWatch Logs writes)."""


def acknowledge_cdk_function(function: IConstruct, what: str, basic_role_reason: str) -> None:
    """The findings of one of CDK's own deploy-time functions (a singleton whose role fmcluster cannot replace): the
    role's DependsOn (cfn-lint W3005), every deploy-time function's findings (`what` it does) and its basic execution
    role (`basic_role_reason`)."""
    quiet_redundant_depends_on(function)
    acknowledge_deploy_time_functions(function, what, resource_type="AWS::Lambda::Function")
    cdk.Validations.of(function).acknowledge(cdk.Acknowledgment(id=BASIC_EXECUTION_ROLE, reason=basic_role_reason))


def provider_with_handler(
    scope: Construct,
    construct_id: str,
    provider_id: str,
    *,
    code: str,
    description: str,
    timeout: cdk.Duration,
    calls: str,
) -> tuple[lambda_.Function, cr.Provider]:
    """A custom-resource handler (`fmcluster/lambdas/<code>/handler.on_event`) behind the CDK Provider framework.

    The handler logs to its own group (one year); the cdk-nag findings every such pair has (the basic execution
    role, the framework invoking the handler's versions, the framework's runtime) are acknowledged here. Add the
    handler's own permissions, and acknowledge their wildcards, at the call site.
    """
    handler = lambda_.Function(
        scope,
        construct_id,
        runtime=LAMBDA_RUNTIME,
        handler="handler.on_event",
        code=lambda_code(code),
        timeout=timeout,
        description=description,
        log_group=logs.LogGroup(scope, f"{construct_id}Logs", retention=logs.RetentionDays.ONE_YEAR),
    )
    provider = cr.Provider(scope, provider_id, on_event_handler=handler)
    for function in (handler, provider.node.find_child("framework-onEvent")):
        quiet_redundant_depends_on(function)
    basic = BASIC_EXECUTION_ROLE
    cdk.Validations.of(handler).acknowledge(
        cdk.Acknowledgment(id=basic, reason="Lets the function write its own CloudWatch logs; no other permission")
    )
    cdk.Validations.of(provider).acknowledge(
        cdk.Acknowledgment(
            id=basic, reason="The CDK Provider framework's own function writes only its CloudWatch logs"
        ),
        cdk.Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{nag_form(handler, handler.function_arn)}:*]",
            reason="The Provider framework invokes every version of the one handler function it wraps",
        ),
        cdk.Acknowledgment(
            id="AwsSolutions-L1",
            reason="The Provider framework's runtime is chosen and updated by aws-cdk-lib, not by this project",
        ),
    )
    acknowledge_deploy_time_functions(handler, calls)
    acknowledge_deploy_time_functions(
        provider, f"invokes the handler that {calls}", resource_type="AWS::Lambda::Function"
    )
    return handler, provider


def function_log_group(
    scope: Construct, construct_id: str, retention: logs.RetentionDays, policy: cdk.RemovalPolicy
) -> logs.LogGroup:
    """A function's own log group."""
    return logs.LogGroup(scope, construct_id, retention=retention, removal_policy=policy)


def function_role(scope: Construct, construct_id: str, description: str, log_group: logs.ILogGroup) -> iam.Role:
    """A role for one function: it writes to its own log group and nothing else until granted more."""
    role = iam.Role(
        scope, construct_id, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description
    )
    log_group.grant_write(role)
    return role
