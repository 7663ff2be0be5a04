"""Every scanner acknowledgment, finding-level and next to the construct that causes it: cdk-nag
(`acknowledge_wildcards`, for IAM wildcards that grants cannot avoid), checkov and the AWS Control Tower proactive
controls (`acknowledge_findings`).

Three scanners read fmcluster's templates in `make test`: cdk-nag's AwsSolutions pack, checkov (which reads a
resource's `Metadata.checkov.skip`) and the Control Tower proactive controls as cfn-guard rules (CDK's validation
plugin `cdk-validator-cfnguard`, whose findings CDK's `Validations.of(construct).acknowledge()` suppresses, as for
cdk-nag). An acknowledgment here names one rule and the construct that causes it, with the reason.

Example::

    acknowledge_findings(function, reason="Handler for one CloudFormation custom resource; ...",
                         checkov=["CKV_AWS_116"], controls=["lambda_inside_vpc_check"])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import aws_cdk as cdk
from constructs import IConstruct

GUARD_PLUGIN = "cdk-validator-cfnguard"
"""The name `CfnGuardValidator` reports under; CDK namespaces acknowledgment ids with it (`<plugin>::<rule>`)."""


def acknowledge_findings(
    scope: IConstruct,
    *,
    reason: str,
    checkov: Iterable[str] = (),
    controls: Iterable[str] = (),
    resource_type: str | None = None,
) -> None:
    """Acknowledge the checkov checks and Control Tower rules (cfn-guard rule names) `scope` causes.

    checkov reads skips from each CloudFormation resource's `Metadata.checkov.skip`: they go on `scope` when it is a
    CfnResource, else on its default child, or, with `resource_type` (e.g. "AWS::Lambda::Function"), on every resource
    of that type under `scope` (CDK-made children such as a Provider framework's functions). The Control Tower rules
    are acknowledged on `scope` through CDK's validation API, which covers the constructs beneath it.
    """
    _skip_checkov_under(scope, dict.fromkeys(checkov, reason), resource_type)
    rules = list(controls)
    if rules:
        cdk.Validations.of(scope).acknowledge(
            *(cdk.Acknowledgment(id=f"{GUARD_PLUGIN}::{rule}", reason=reason) for rule in rules)
        )


LAMBDA_IN_VPC = "lambda_inside_vpc_check"
"""CT.LAMBDA.PR.3: a function must have a VpcConfig."""


def acknowledge_deploy_time_functions(scope: IConstruct, what: str, *, resource_type: str | None = None) -> None:
    """Acknowledge, with their reasons, the findings every deploy-time function of fmcluster has: a custom-resource
    handler, a Provider framework's functions, or one of CDK's own singletons. `what` says what the function does and
    which AWS APIs it calls, e.g. "writes this cluster's NCCL SSM parameters (ssm:PutParameter)"."""
    in_vpc = (
        f"Runs only while CloudFormation deploys: it {what}. It calls AWS APIs and reaches nothing inside the VPC, so "
        "outside a VPC it needs no NAT gateway or interface endpoint"
    )
    environment = "Its environment holds names and ARNs only, no secret (Lambda encrypts it at rest with an AWS key)"
    _skip_checkov_under(  # one walk and one metadata write per function, however many checks
        scope,
        {
            "CKV_AWS_117": in_vpc,
            "CKV_AWS_116": "Invoked synchronously by CloudFormation (through the custom-resource framework); a "
            "dead-letter queue applies to asynchronous invocations only, and a failure is reported to CloudFormation, "
            "which rolls back",
            "CKV_AWS_115": "Runs a few times per deploy; reserved concurrency would only take capacity from the "
            "account's unreserved pool",
            "CKV_AWS_173": environment,
            "CKV_AWS_45": environment,
        },
        resource_type,
    )
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"{GUARD_PLUGIN}::{LAMBDA_IN_VPC}", reason=in_vpc))


def _skip_checkov(resource: cdk.CfnResource, comments: Mapping[str, str]) -> None:
    """Add the checks of `comments` (check id -> comment) to the resource's `Metadata.checkov.skip`, keeping skips
    added before."""
    current = resource.get_metadata("checkov") or {}
    skips = [dict(entry) for entry in current.get("skip", [])]
    known = {entry["id"] for entry in skips}
    skips += [{"id": check, "comment": comment} for check, comment in comments.items() if check not in known]
    resource.add_metadata("checkov", {**current, "skip": skips})


def _skip_checkov_under(scope: IConstruct, comments: Mapping[str, str], resource_type: str | None) -> None:
    if not comments:
        return
    resources = _resources(scope, resource_type)
    if not resources:
        raise ValueError(f"acknowledge_findings: no CloudFormation resource under {scope.node.path}")
    for resource in resources:
        _skip_checkov(resource, comments)


def _resources(scope: IConstruct, resource_type: str | None) -> list[cdk.CfnResource]:
    if resource_type is not None:
        return [
            child
            for child in scope.node.find_all()
            if isinstance(child, cdk.CfnResource) and child.cfn_resource_type == resource_type
        ]
    if isinstance(scope, cdk.CfnResource):
        return [scope]
    child = scope.node.default_child
    return [child] if isinstance(child, cdk.CfnResource) else []


def codebuild_default_grants(scope: IConstruct, project_name: str) -> list[cdk.Acknowledgment]:
    """The cdk-nag acknowledgments of the two wildcards aws-cdk-lib grants every CodeBuild project's role, for a
    project (`project_name`, in `scope`'s stack) that logs to a log group of its own and writes no test reports: its
    default log group's streams and its report groups."""
    stack = cdk.Stack.of(scope)
    default_logs = f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:/aws/codebuild/{project_name}"
    report_groups = f"arn:{stack.partition}:codebuild:{stack.region}:{stack.account}:report-group/{project_name}-*"
    return [
        cdk.Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{nag_form(scope, default_logs)}:*]",
            reason="aws-cdk-lib grants every project its default log group /aws/codebuild/<project> and its streams "
            "(named by build id); this project logs to its own log group instead",
        ),
        cdk.Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{nag_form(scope, report_groups)}]",
            reason="aws-cdk-lib lets every project create test report groups named after the project; the wildcard "
            "is limited to that prefix and this project writes no reports",
        ),
    ]


def nag_form(scope: IConstruct, value: str) -> str:
    """`value` (maybe a token) the way cdk-nag names it in a finding id: <LogicalId.Attr>, <AWS::Region>, ..."""
    return _flatten(cdk.Stack.of(scope).resolve(value))


def _flatten(node: object) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, dict) and "Ref" in node:
        return f"<{node['Ref']}>"
    if isinstance(node, dict) and "Fn::GetAtt" in node:
        logical_id, attribute = node["Fn::GetAtt"]
        return f"<{logical_id}.{attribute}>"
    if isinstance(node, dict) and isinstance(node.get("Fn::Sub"), str):
        return re.sub(r"\$\{([^}]+)\}", r"<\1>", node["Fn::Sub"])
    if isinstance(node, dict) and "Fn::Join" in node:
        separator, parts = node["Fn::Join"]
        return separator.join(_flatten(part) for part in parts)
    raise ValueError(f"cannot name {node!r} as cdk-nag does")


def acknowledge_wildcards(
    construct: IConstruct, *, actions: Iterable[str] = (), resources: Iterable[str] = (), reason: str
) -> None:
    """Acknowledge AwsSolutions-IAM5 for exactly these wildcard actions and resources (resources may be tokens)."""
    ids = [f"AwsSolutions-IAM5[Action::{action}]" for action in actions]
    ids += [f"AwsSolutions-IAM5[Resource::{nag_form(construct, resource)}]" for resource in resources]
    cdk.Validations.of(construct).acknowledge(*(cdk.Acknowledgment(id=id_, reason=reason) for id_ in ids))
