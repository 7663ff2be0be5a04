"""What deploying one cluster file over another does to each resource: added, changed in place, replaced, deleted.

Both files are synthesized by this fmcluster and compared stack by stack, resource by logical id. A changed resource
is replaced when a create-only property changes: CloudFormation's resource schemas (`createOnlyProperties`, shipped
in config/service_data.json.gz from cfn-lint) plus `KNOWN_CREATE_ONLY`, settings the schemas leave out. A type
without a shipped schema counts as replaced (the safe guess). A resource whose create-only property refers to a
replaced resource of its stack is replaced too (a PCS node group follows its cluster).

Replacing or deleting what holds data or the cluster itself (`PROTECTED_TYPES`) is refused unless asked for.

>>> changes = compare({"s": {"Resources": {"A": {"Type": "AWS::PCS::Cluster", "Properties": {"Size": "SMALL"}}}}},
...                   {"s": {"Resources": {"A": {"Type": "AWS::PCS::Cluster", "Properties": {"Size": "LARGE"}}}}})
>>> [(c.logical_id, c.action, c.reason) for c in changes]
[('A', 'replace', 'Size is create-only')]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fmcluster.config.service_models import create_only_properties

Action = Literal["add", "modify", "replace", "delete"]
KNOWN_CREATE_ONLY: Mapping[str, tuple[str, ...]] = {
    "AWS::FSx::FileSystem": (
        "/properties/LustreConfiguration/DeploymentType",
        "/properties/LustreConfiguration/EfaEnabled",
    ),
}
"""Create-only settings missing from `createOnlyProperties`: FSx API reference, CreateFileSystemLustreConfiguration
("DeploymentType", "EfaEnabled": set at creation only; FACTS.md, Service truth)."""
PROTECTED_TYPES: Mapping[str, str] = {
    "AWS::FSx::FileSystem": "the FSx for Lustre file system (its data is lost)",
    "AWS::S3::Bucket": "a bucket (a new bucket starts empty)",
    "AWS::KMS::Key": "a KMS key (data encrypted with the old key needs it)",
    "AWS::PCS::Cluster": "the AWS PCS cluster (with every node group, queue and running job)",
    "AWS::SageMaker::Cluster": "the HyperPod cluster (with every node and running job)",
}
"""Types whose replacement or deletion `fmcluster plan --previous` refuses without --allow-replacement."""
NAME_PROPERTIES: Mapping[str, str] = {
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::CodeBuild::Project": "Name",
    "AWS::EC2::LaunchTemplate": "LaunchTemplateName",
    "AWS::EC2::SecurityGroup": "GroupName",
    "AWS::ECR::Repository": "RepositoryName",
    "AWS::Events::Rule": "Name",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::Role": "RoleName",
    "AWS::KMS::Alias": "AliasName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::PCS::Cluster": "Name",
    "AWS::PCS::ComputeNodeGroup": "Name",
    "AWS::PCS::Queue": "Name",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SSM::Parameter": "Name",
    "AWS::SageMaker::Cluster": "ClusterName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
}
"""The property that names a resource of each type itself (not one that refers to another resource). "You can't
perform an update that causes a custom-named resource to be replaced. If you must replace the resource, specify a new
name" (CloudFormation template reference, "CloudFormation resource custom naming"): the update fails ("cannot update a
stack when a custom-named resource requires replacing") and rolls back, whatever the plan's override says."""
GROW_ONLY: Mapping[str, Mapping[str, str]] = {
    "AWS::FSx::FileSystem": {
        "/properties/StorageCapacity": "FSx for Lustre cannot decrease a file system's storage capacity",
    },
}
"""Settings an update can raise but never lower: FSx for Lustre guide, "Managing storage capacity" ("Increase only
- You can only increase the amount of storage capacity"); UpdateFileSystem StorageCapacity: "must be greater than the
current storage capacity"."""
SYMBOLS = {"add": "+", "modify": "~", "replace": "!", "delete": "-"}
WORDS = {"add": "add", "modify": "change", "replace": "REPLACE", "delete": "DELETE"}


@dataclass(frozen=True)
class Change:
    """What an update does to one resource."""

    stack: str
    logical_id: str
    resource_type: str
    action: Action
    properties: tuple[str, ...] = ()
    """Top-level properties whose value changes."""
    reason: str = ""
    failure: str = ""
    """Why CloudFormation would fail this change and roll the stack back (no override helps), or ''."""

    @property
    def fails(self) -> bool:
        return bool(self.failure)

    @property
    def protected(self) -> bool:
        return self.action in ("replace", "delete") and self.resource_type in PROTECTED_TYPES

    def line(self) -> str:
        """'  ! REPLACE  Cluster (AWS::PCS::Cluster): Size is create-only'."""
        detail = self.reason or ", ".join(self.properties)
        return f"  {SYMBOLS[self.action]} {WORDS[self.action]:<7} {self.logical_id} ({self.resource_type})" + (
            f": {detail}" if detail else ""
        )


def value_at(properties: Mapping, pointer: str) -> object:
    """The value a schema pointer like /properties/LustreConfiguration/DeploymentType names ('*' maps lists)."""
    return _walk({"properties": properties}, pointer.strip("/").split("/"))


def _walk(node: object, parts: list[str]) -> object:
    if not parts:
        return node
    if parts[0] == "*":
        return [_walk(item, parts[1:]) for item in node] if isinstance(node, list) else None
    return _walk(node.get(parts[0]), parts[1:]) if isinstance(node, dict) else None


def create_only(resource_type: str) -> tuple[str, ...] | None:
    """Every create-only pointer of `resource_type`; None when no schema ships for it."""
    schema = create_only_properties(resource_type)
    if schema is None:
        return None
    return (*schema, *KNOWN_CREATE_ONLY.get(resource_type, ()))


def _refers_to(value: object, logical_ids: set[str]) -> str | None:
    """The first of `logical_ids` that `value` reaches through Ref or Fn::GetAtt."""
    if isinstance(value, dict):
        if "Ref" in value and value["Ref"] in logical_ids:
            return value["Ref"]
        target = value.get("Fn::GetAtt")
        if isinstance(target, list) and target and target[0] in logical_ids:
            return target[0]
        values: Iterable[object] = value.values()
    elif isinstance(value, list):
        values = value
    else:
        return None
    return next((found for item in values if (found := _refers_to(item, logical_ids))), None)


def _pointer_name(pointer: str) -> str:
    return "/".join(pointer.removeprefix("/properties/").split("/"))


def _resource_change(stack: str, logical_id: str, old: dict, new: dict) -> Change | None:
    kind = new["Type"]
    if old["Type"] != kind:
        return Change(stack, logical_id, kind, "replace", (), f"type changes from {old['Type']}")
    before, after = old.get("Properties", {}), new.get("Properties", {})
    changed = tuple(sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key)))
    if not changed:
        return None
    pointers = create_only(kind)
    if pointers is None:
        return Change(stack, logical_id, kind, "replace", changed, "no schema for this type: may be replaced")
    moved = [_pointer_name(p) for p in pointers if value_at(before, p) != value_at(after, p)]
    if moved:
        name_key = NAME_PROPERTIES.get(kind)
        kept = name_key is not None and name_key in before and before.get(name_key) == after.get(name_key)
        failure = f"CloudFormation cannot replace a resource that keeps its custom {name_key}" if kept else ""
        return Change(stack, logical_id, kind, "replace", changed, f"{', '.join(moved)} is create-only", failure)
    failure = next((why for pointer, why in GROW_ONLY.get(kind, {}).items() if _shrinks(before, after, pointer)), "")
    return Change(stack, logical_id, kind, "modify", changed, failure=failure)


def _shrinks(before: Mapping, after: Mapping, pointer: str) -> bool:
    old, new = value_at(before, pointer), value_at(after, pointer)
    return isinstance(old, int) and isinstance(new, int) and new < old


def _stack_changes(stack: str, old: dict, new: dict) -> list[Change]:
    old_resources, new_resources = old.get("Resources", {}), new.get("Resources", {})
    changes: dict[str, Change] = {}
    for logical_id, resource in new_resources.items():
        if logical_id not in old_resources:
            changes[logical_id] = Change(stack, logical_id, resource["Type"], "add")
        elif change := _resource_change(stack, logical_id, old_resources[logical_id], resource):
            changes[logical_id] = change
    for logical_id, resource in old_resources.items():
        if logical_id not in new_resources:
            retained = resource.get("DeletionPolicy") == "Retain"
            note = "removed from the stack, kept in the account (DeletionPolicy Retain)" if retained else ""
            changes[logical_id] = Change(stack, logical_id, resource["Type"], "delete", (), note)
    _follow_replacements(stack, new_resources, changes)
    return [changes[key] for key in sorted(changes, key=lambda key: (list(SYMBOLS).index(changes[key].action), key))]


def _follow_replacements(stack: str, resources: dict, changes: dict[str, Change]) -> None:
    """A resource whose create-only property refers to a replaced one is replaced as well; others that refer to
    it change in place (they get the new id)."""
    while True:
        replaced = {key for key, change in changes.items() if change.action == "replace"}
        grew = False
        for logical_id, resource in resources.items():
            current = changes.get(logical_id)
            if logical_id in replaced or (current is not None and current.action in ("add", "delete")):
                continue
            kind, properties = resource["Type"], resource.get("Properties", {})
            pointers = create_only(kind) or ()
            source = next((s for p in pointers if (s := _refers_to(value_at(properties, p), replaced))), None)
            if source is not None:
                changes[logical_id] = Change(stack, logical_id, kind, "replace", (), f"follows {source}, replaced")
                grew = True
            elif current is None and (source := _refers_to(properties, replaced)):
                changes[logical_id] = Change(stack, logical_id, kind, "modify", (), f"gets the new {source}")
        if not grew:
            return


def compare(old: Mapping[str, dict], new: Mapping[str, dict]) -> list[Change]:
    """Every change from the `old` templates to the `new` ones (stack name -> template), stack by stack."""
    changes: list[Change] = []
    for stack in sorted(set(old) | set(new)):
        changes += _stack_changes(stack, old.get(stack, {}), new.get(stack, {}))
    return changes


@dataclass(frozen=True)
class StaleReader:
    """A stack that reads a replaced resource's value through `Fn::GetStackOutput` (weak cross-stack reference)."""

    stack: str
    logical_id: str
    source: Change
    output: str

    def line(self) -> str:
        return (
            f"  note: {self.stack} {self.logical_id} reads {self.output} of the replaced {self.source.logical_id} "
            f"({self.source.stack}) through Fn::GetStackOutput; its template text does not change, so "
            "`cdk deploy --all` may skip it and its nodes keep the old value"
        )


def stale_readers(changes: list[Change], new: Mapping[str, dict]) -> list[StaleReader]:
    """Resources of other stacks that read a replaced resource through a weak cross-stack reference and whose own
    template does not change (cdk.json's `@aws-cdk/core:defaultCrossStackReferences: weak`)."""
    changed = {(change.stack, change.logical_id) for change in changes}
    readers = []
    for source in (change for change in changes if change.action == "replace"):
        outputs = {
            name
            for name, output in new.get(source.stack, {}).get("Outputs", {}).items()
            if _refers_to(output.get("Value"), {source.logical_id})
        }
        for stack, template in new.items():
            for logical_id, resource in template.get("Resources", {}).items():
                output = _reads_output(resource.get("Properties", {}), source.stack, outputs)
                if output and (stack, logical_id) not in changed:
                    readers.append(StaleReader(stack, logical_id, source, output))
    return readers


def _reads_output(value: object, stack: str, outputs: set[str]) -> str | None:
    if isinstance(value, dict):
        reference = value.get("Fn::GetStackOutput")
        if (
            isinstance(reference, dict)
            and reference.get("StackName") == stack
            and reference.get("OutputName") in outputs
        ):
            return reference["OutputName"]
        values = list(value.values())
    elif isinstance(value, list):
        values = value
    else:
        return None
    return next((found for item in values if (found := _reads_output(item, stack, outputs))), None)


def render(changes: list[Change], stacks: list[str]) -> Iterator[str]:
    """The plan as text: per stack its changes, or 'no change'."""
    for stack in stacks:
        mine = [change for change in changes if change.stack == stack]
        counts = ", ".join(f"{sum(c.action == a for c in mine)} {WORDS[a].lower()}" for a in SYMBOLS)
        yield f"{stack}: " + (counts if mine else "no change")
        yield from (change.line() for change in mine)


def read_templates(outdir: Path, stack_names: list[str]) -> dict[str, dict]:
    """The synthesized template of each stack in `outdir`."""
    return {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in stack_names}


def refusal(change: Change, old: Mapping[str, dict]) -> tuple[str, str]:
    """(key path, message) that explains a refused change and what to do instead."""
    if change.resource_type == "AWS::PCS::Cluster" and change.reason == "Size is create-only":
        size = old[change.stack]["Resources"][change.logical_id]["Properties"]["Size"].lower()
        return (
            "orchestrator.size",
            f"AWS PCS cannot change a cluster's size in place: this update would replace the cluster (size "
            f"{size}) with every node group, queue and running job. Set orchestrator.size: {size} to keep it (it must "
            "still hold every node), or deploy the file under a new name, move the work, then delete the old cluster",
        )
    if change.fails:
        replaced = change.action == "replace"
        detail = change.reason if replaced else ", ".join(change.properties)
        what = f"{'replace' if replaced else 'change'} {change.resource_type} ({detail})"
        return (
            f"{change.stack}.{change.logical_id}",
            f"this update would {what}, and {change.failure}: CloudFormation would fail the update and roll back; "
            "keep the old value" + (" or give the resource a new name too" if replaced else ""),
        )
    verb = "replace" if change.action == "replace" else "delete"
    why = f" ({change.reason})" if change.reason else ""
    return (
        f"{change.stack}.{change.logical_id}",
        f"this update would {verb} {PROTECTED_TYPES[change.resource_type]}{why}; "
        "pass --allow-replacement to do it anyway",
    )


def synthesize(config: object, outdir: Path, context: Mapping[str, object]) -> dict[str, dict]:
    """Build `config` (a ClusterConfig) into a CDK app with `context` (cdk.json's), synthesize it into `outdir`,
    and return each stack's template."""
    import aws_cdk as cdk

    from fmcluster.stacks import build

    app = cdk.App(outdir=str(outdir), context=dict(context))
    stacks = build(app, config)  # type: ignore[arg-type]
    app.synth()
    return read_templates(outdir, [stack.stack_name for stack in stacks.all()])
