"""The one harness every CDK test uses: cdk.json's feature flags, synth, cdk-nag, cfn-lint and asset-hash masking.

A test module builds its constructs into `app(outdir)`, then calls `synthesize(app, stacks)` once (module fixture):
cdk-nag's AwsSolutions pack runs first, then the app is synthesized and every stack's template is read back.
`view(stack)` pairs a stack with its template to find a construct's resource by its logical id.

    built = synthesize(app(tmp_path), [stack])
    assert built.nag == [] and built.lint() == {stack.stack_name: []}
    props = built.view(stack).props(my_construct)
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import cx_api
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint_file
from constructs import IConstruct

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

REPO = Path(__file__).resolve().parents[1]
CDK_JSON_CONTEXT = json.loads((REPO / "cdk.json").read_text())["context"]
"""The feature flags `cdk synth` runs with, so the tested templates are the ones users deploy."""
LINT_REGION = "us-east-1"
"""cfn-lint's region for a stack whose region is a token (a library user's stack without an environment)."""
ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def app(outdir: Path, context: dict | None = None) -> cdk.App:
    """An app writing to `outdir`, with cdk.json's feature flags unless `context` is given ({} = a library user's)."""
    return cdk.App(outdir=str(outdir), context=CDK_JSON_CONTEXT if context is None else context)


def nag_findings(scope: IConstruct) -> list[str]:
    """Every unacknowledged finding of cdk-nag's AwsSolutions pack under `scope`, one line each."""
    report = AwsSolutionsChecks().validate_scope(scope)
    return [
        f"{violation.rule_name} {resource.construct_path}: {violation.description}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]


def lint(template_file: Path, region: str) -> list[str]:
    """Every cfn-lint error and warning of one template, one line each."""
    return [f"{m.rule.id} {m.message} ({m.path})" for m in lint_file(template_file, ManualArgs(regions=[region]))]


def mask_asset_hashes(value: object) -> object:
    """`value` (JSON-able) with every asset hash replaced, so snapshots do not change with the bundled files."""
    return json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(value, sort_keys=True)))


def of_type(template: dict, kind: str) -> dict[str, dict]:
    """Logical id -> resource, for every resource of type `kind` in one template."""
    return {name: resource for name, resource in template["Resources"].items() if resource["Type"] == kind}


def properties_of(template: dict, kind: str) -> list[dict]:
    """The properties of every resource of type `kind` in one template."""
    return [resource["Properties"] for resource in of_type(template, kind).values()]


def region_of(stack: cdk.Stack) -> str:
    return LINT_REGION if cdk.Token.is_unresolved(stack.region) else stack.region


@dataclass
class StackTemplate:
    """One synthesized stack and its template: find a construct's resource, resolve a reference."""

    stack: cdk.Stack
    template: dict

    def logical_id(self, element: IConstruct) -> str:
        cfn = element if isinstance(element, cdk.CfnElement) else element.node.default_child
        return self.stack.resolve(self.stack.get_logical_id(cfn))

    def resource(self, element: IConstruct) -> dict:
        return self.template["Resources"][self.logical_id(element)]

    def props(self, element: IConstruct) -> dict:
        return self.resource(element)["Properties"]

    def ref(self, value: object) -> object:
        return self.stack.resolve(value)

    def of_type(self, kind: str) -> dict[str, dict]:
        return of_type(self.template, kind)

    def assertions(self) -> Template:
        return Template.from_json(self.template)


@dataclass
class Synthesized:
    """An app after cdk-nag and synth: its findings and the template of each stack, by stack name."""

    app: cdk.App
    outdir: Path
    nag: list[str]
    stacks: dict[str, cdk.Stack] = field(default_factory=dict)
    templates: dict[str, dict] = field(default_factory=dict)
    assembly: cx_api.CloudAssembly | None = None

    def template_file(self, stack_name: str) -> Path:
        return self.outdir / f"{stack_name}.template.json"

    def view(self, stack: cdk.Stack | str) -> StackTemplate:
        name = stack if isinstance(stack, str) else stack.stack_name
        return StackTemplate(self.stacks[name], self.templates[name])

    def lint(self) -> dict[str, list[str]]:
        """cfn-lint's errors and warnings by stack name, each stack linted in its own region."""
        return {name: lint(self.template_file(name), region_of(stack)) for name, stack in self.stacks.items()}


def synthesize(app: cdk.App, stacks: list[cdk.Stack]) -> Synthesized:
    """Run cdk-nag over `app`, then synthesize it and read the template of each of `stacks`.

    With findings the app is not synthesized (an app whose stacks carry cdk-nag's aspect would fail on the same
    findings); the nag test reports them.
    """
    result = Synthesized(app=app, outdir=Path(app.outdir), nag=nag_findings(app))
    result.stacks = {stack.stack_name: stack for stack in stacks}
    if result.nag:
        return result
    result.assembly = app.synth()
    result.templates = {name: json.loads(result.template_file(name).read_text()) for name in result.stacks}
    return result
