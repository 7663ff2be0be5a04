"""CloudFormation outputs of fmcluster's stacks, as `fmcluster.outputs` declares them (key, description)."""

from __future__ import annotations

import aws_cdk as cdk

from fmcluster.outputs import describe


def add_output(stack: cdk.Stack, part: str, key: str, value: str) -> cdk.CfnOutput:
    """The output `key` of the `part` stack (network, storage, ...), with its declared description.

    Example::

        add_output(stack, "storage", "FileSystemId", lustre.file_system_id)
    """
    return cdk.CfnOutput(stack, key, value=value, description=describe(part, key))
