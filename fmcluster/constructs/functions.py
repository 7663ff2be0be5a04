"""What every Lambda function of fmcluster shares: its runtime, its code from package data, a cfn-lint note."""

from __future__ import annotations

from importlib import resources

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct

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
