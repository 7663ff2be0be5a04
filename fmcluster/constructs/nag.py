"""Finding-level cdk-nag acknowledgments for wildcards that IAM grants cannot avoid."""

from __future__ import annotations

import re
from collections.abc import Iterable

import aws_cdk as cdk
from constructs import IConstruct


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
