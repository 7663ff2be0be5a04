"""The CDK bootstrap stack (CDKToolkit) exists, is usable and is new enough for fmcluster's templates.

Sources: CDK developer guide, "Bootstrapping" (default stack name CDKToolkit, output BootstrapVersion); the
minimum version is the one fmcluster's own synthesized templates assert in their CheckBootstrapVersion rule
(versions 1-5 are refused), see tests/gates/__snapshots__.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig, Problem
from fmcluster.live.aws import Aws, error_code, error_message
from fmcluster.live.runner import Check, unchecked

STACK = "CDKToolkit"
MIN_VERSION = 6
USABLE = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE")


def bootstrap_checks(config: ClusterConfig, aws: Aws, account: str) -> list[Check]:
    return [Check(f"CDK bootstrap stack {STACK}", "region", lambda: check_bootstrap(config, aws, account))]


def check_bootstrap(config: ClusterConfig, aws: Aws, account: str) -> list[Problem]:
    command = f"run `cdk bootstrap aws://{account}/{config.region}`"
    try:
        stacks = aws.call("cloudformation", "DescribeStacks", StackName=STACK)["Stacks"]
    except ClientError as error:
        if error_code(error) == "ValidationError" and "does not exist" in error_message(error):
            stacks = []
        else:
            raise
    if not stacks:
        return [
            Problem(
                "region",
                f"account {account} is not bootstrapped for CDK in {config.region} (no {STACK} stack); {command}",
            )
        ]
    stack = stacks[0]
    status = stack.get("StackStatus", "")
    if status not in USABLE:
        return [Problem("region", f"the CDK bootstrap stack {STACK} is {status}; fix or delete it, then {command}")]
    outputs = {row.get("OutputKey"): row.get("OutputValue") for row in stack.get("Outputs", [])}
    version = outputs.get("BootstrapVersion")
    if version is None or not version.isdigit():
        return [
            unchecked(
                "region",
                f"the version of the CDK bootstrap stack {STACK}",
                f"it has no numeric BootstrapVersion output ({version!r}); {command} to update it",
            )
        ]
    if int(version) < MIN_VERSION:
        return [
            Problem(
                "region",
                f"the CDK bootstrap stack is version {version}; fmcluster's templates need "
                f"{MIN_VERSION} or later: {command}",
            )
        ]
    return []
