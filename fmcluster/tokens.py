"""Unresolved CDK tokens: values known only at deploy time, which no rule can judge at synth time.

Only code that builds constructs imports this module: it loads `aws_cdk`, and with it jsii starts a Node process.
The cluster file's rules (`fmcluster.config`) never see a token, so `fmcluster validate` runs without Node; a
construct skips a token before it calls a rule (`known`), or tells a model to (`DEFERRED`).

>>> is_token(cdk.Fn.ref("Capacity")), is_token("llm"), known(cdk.Aws.REGION), known("us-east-1")
(True, False, None, 'us-east-1')
"""

from __future__ import annotations

from typing import TypeVar

import aws_cdk as cdk

Value = TypeVar("Value")


def is_token(value: object) -> bool:
    """True when `value` is an unresolved CDK token: known only at deploy time, so no rule can judge it yet."""
    return isinstance(value, str | int | float) and not isinstance(value, bool) and cdk.Token.is_unresolved(value)


def known(value: Value) -> Value | None:
    """`value`, or None when it is a token (the rules read None as "not known here")."""
    return None if is_token(value) else value


DEFERRED = {"deferred": is_token}
"""The pydantic validation context under which the cluster file's models leave deploy-time values unjudged
(`fmcluster.config.models.deferred`)."""
