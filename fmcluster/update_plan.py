"""What deploying one cluster file over another does to each resource: added, changed in place, replaced, deleted.

Both files are synthesized by this fmcluster and compared stack by stack, resource by logical id. A changed resource
is replaced when a create-only property changes: CloudFormation's resource schemas (`createOnlyProperties`, shipped
in config/service_data.json.gz from cfn-lint) plus `KNOWN_CREATE_ONLY`, settings the schemas leave out. A type
without a shipped schema counts as replaced (the safe guess). A resource whose create-only property refers to a
replaced resource of its stack is replaced too (a PCS node group follows its cluster).

Replacing or deleting what holds data or the cluster itself (`PROTECTED_TYPES`), and switching a stateful resource
from Retain to Delete (`RETAINED_TYPES`), is refused unless asked for. What CloudFormation or the service would refuse
(`fails`) is refused whatever the flag. Values that differ only in how they are written (`Ref AWS::AccountId` against
the account itself) are compared as they resolve (`resolved`). Custom resources, launch templates and HyperPod
instance groups say what an update does to running nodes (`effects`).

>>> changes = compare({"s": {"Resources": {"A": {"Type": "AWS::PCS::Cluster", "Properties": {"Size": "SMALL"}}}}},
...                   {"s": {"Resources": {"A": {"Type": "AWS::PCS::Cluster", "Properties": {"Size": "LARGE"}}}}})
>>> [(c.logical_id, c.action, c.reason) for c in changes]
[('A', 'replace', 'Size is create-only')]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

from fmcluster.config.service_models import create_only_properties
from fmcluster.names import NODE_IMAGE_TAG
from fmcluster.problems import Problem

Action = Literal["add", "modify", "replace", "delete"]
KNOWN_CREATE_ONLY: Mapping[str, tuple[str, ...]] = {
    "AWS::FSx::FileSystem": (
        "/properties/LustreConfiguration/DeploymentType",
        "/properties/LustreConfiguration/EfaEnabled",
    ),
}
"""Create-only settings missing from `createOnlyProperties`: FSx API reference, CreateFileSystemLustreConfiguration
("DeploymentType", "EfaEnabled": set at creation only; FACTS.md, Service truth)."""
IN_PLACE_EFFECTS: Mapping[str, Mapping[str, tuple[str, bool]]] = {
    "AWS::PCS::ComputeNodeGroup": {
        "/properties/NodeLifecycleActions": (
            "its node lifecycle actions change (a node script, its arguments or the bundle): AWS PCS drains and "
            "replaces every node of the group, running jobs finishing first (PCS user guide, node lifecycle actions: "
            "'Configuration changes drain and replace existing nodes')",
            True,
        ),
        "/properties/AmiId": (
            "its image changes (orchestrator.ami_id): CloudFormation updates AmiId in place (cfn-lint: not "
            "create-only) and AWS PCS launches new instances from the new image (PCS user guide, 'Updating an AWS "
            "PCS compute node group': 'New instances launch with the updated properties'); whether PCS also replaces "
            "the running nodes itself is unconfirmed: plan for every node of the group being replaced",
            True,
        ),
        f"/properties/Tags/{NODE_IMAGE_TAG}": (
            "a new baked node image (the node-image stack builds it first, orchestrator.node_image: baked): the "
            "group's AmiId moves to it in place and AWS PCS launches new instances from it (PCS user guide, "
            "'Updating an AWS PCS compute node group'); whether PCS also replaces the running nodes itself is "
            "unconfirmed: plan for "
            "every node of the group being replaced",
            True,
        ),
    },
    "AWS::PCS::Cluster": {
        "/properties/SlurmConfiguration/Accounting": (
            "its managed Slurm accounting is turned on in place (botocore pcs UpdateAccountingRequest; CloudFormation "
            "AWS::PCS::Cluster Accounting Mode: 'Update requires: No interruption'); it starts PCS's accounting "
            "charge and can never be turned off again",
            False,
        ),
        "/properties/SlurmConfiguration/SlurmCustomSettings": (
            "its cluster-level Slurm settings (Prolog, Epilog, AccountingStorageEnforce) change in place (cfn-lint: "
            "SlurmConfiguration is not create-only; botocore pcs UpdateClusterSlurmConfigurationRequest has "
            "slurmCustomSettings): the cluster shows Updating meanwhile, and PCS takes the update only while every "
            "queue and node group is ACTIVE (PCS user guide, 'Update an AWS PCS cluster'); what it does to running "
            "jobs is unconfirmed",
            False,
        ),
    },
}
"""What an in-place change of these settings does beyond the property itself: (effect, replaces running nodes). The
schemas leave them updatable (cfn-lint: not in createOnlyProperties), so CloudFormation updates in place."""
ENFORCEMENT_ON = (
    "AccountingStorageEnforce is turned on (orchestrator.accounting_enforce): from then on a job of a user without "
    "an association is refused at submission, and such users' pending jobs become ineligible (squeue Reason="
    "InvalidAccount: Slurm src/slurmctld/job_mgr.c `_job_fail_account`); the file's users get theirs from the head "
    "node's timer within 10 minutes"
)
"""The added effect of a PCS cluster update that adds AccountingStorageEnforce (`_enforcement_added`)."""
PROTECTED_TYPES: Mapping[str, str] = {
    "AWS::FSx::FileSystem": "the FSx for Lustre file system (its data is lost)",
    "AWS::S3::Bucket": "a bucket (a new bucket starts empty)",
    "AWS::KMS::Key": "a KMS key (data encrypted with the old key needs it)",
    "AWS::PCS::Cluster": "the AWS PCS cluster (with every node group, queue and running job)",
    "AWS::SageMaker::Cluster": "the HyperPod cluster (with every node and running job)",
    "AWS::ECR::Repository": "the training image repository (its images are lost)",
    "AWS::APS::Workspace": "the Prometheus workspace (its metrics are lost)",
    "AWS::EC2::PlacementGroup": (
        "a cluster placement group (EC2 deletes one only once every instance in it is terminated: DeletePlacementGroup)"
    ),
}
"""Types whose replacement or deletion `fmcluster plan --previous` refuses without --allow-replacement."""
RETAINED_TYPES = (
    "AWS::FSx::FileSystem",
    "AWS::S3::Bucket",
    "AWS::KMS::Key",
    "AWS::ECR::Repository",
    "AWS::APS::Workspace",
)
"""Stateful types whose DeletionPolicy or UpdateReplacePolicy moving away from Retain is refused without
--allow-replacement: after it, `cdk destroy` (or removing the resource) deletes the data
(`storage.retain_on_delete`)."""
POLICIES = ("DeletionPolicy", "UpdateReplacePolicy")
"""Resource attributes compared besides Properties (CloudFormation's default for both is Delete)."""
NAME_PROPERTIES: Mapping[str, str] = {
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::CodeBuild::Project": "Name",
    "AWS::EC2::LaunchTemplate": "LaunchTemplateName",
    "AWS::EC2::SecurityGroup": "GroupName",
    "AWS::ECR::Repository": "RepositoryName",
    "AWS::Events::Rule": "Name",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
    "AWS::ImageBuilder::Component": "Name",
    "AWS::ImageBuilder::ImageRecipe": "Name",
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
stack when a custom-named resource requires replacing") and rolls back, whatever the plan's override says. Image
Builder components and recipes are named by Name and Version (their ARN ends in name/version; botocore imagebuilder
CreateImageRecipe raises ResourceAlreadyExistsException)."""
GROW_ONLY: Mapping[str, Mapping[str, tuple[str, str]]] = {
    "AWS::FSx::FileSystem": {
        "/properties/StorageCapacity": (
            "storage.lustre.capacity_gib",
            "FSx for Lustre cannot decrease a file system's storage capacity",
        ),
        "/properties/LustreConfiguration/MetadataConfiguration/Iops": (
            "storage.lustre.metadata_iops",
            "FSx for Lustre cannot decrease a file system's metadata IOPS",
        ),
    },
}
"""Settings an update can raise but never lower, each with the cluster-file key that sets it. StorageCapacity: FSx for
Lustre guide, "Managing storage capacity" ("Increase only - You can only increase the amount of storage capacity");
UpdateFileSystem StorageCapacity: "must be greater than the current storage capacity". Metadata IOPS: botocore fsx
UpdateFileSystemLustreMetadataConfiguration.Iops ("must be greater than or equal to the current number of Metadata
IOPS"). A value that disappears counts as lowered when `UNSET_REFUSED` says so."""
UNSET_REFUSED: Mapping[str, Mapping[str, str]] = {
    "AWS::FSx::FileSystem": {
        "/properties/LustreConfiguration/MetadataConfiguration/Iops": (
            "FSx for Lustre refuses the switch back to AUTOMATIC metadata mode when the current IOPS exceed what "
            "AUTOMATIC provisions for this capacity (how much that is stays unconfirmed here, so fmcluster refuses)"
        ),
    },
}
"""Settings whose removal the service may refuse. Metadata IOPS: botocore fsx
UpdateFileSystemLustreMetadataConfiguration.Mode: "FSx for Lustre rejects a switch to AUTOMATIC mode when your
current Metadata IOPS value is greater than what AUTOMATIC mode provisions, because decreasing Metadata IOPS is not
supported"."""
ONE_AT_A_TIME: Mapping[str, tuple[tuple[str, ...], str]] = {
    "AWS::FSx::DataRepositoryAssociation": (
        ("FileSystemId", "FileSystemPath"),
        "FSx refuses a second data repository association on the same file-system path (botocore fsx "
        "CreateDataRepositoryAssociation.FileSystemPath: 'This file system directory can be linked to only one Amazon "
        "S3 bucket'), and CloudFormation creates the replacement before it deletes the old one",
    ),
}
"""Types of which two resources with the same values of these properties cannot exist at once. CloudFormation replaces
a resource by creating the new one first unless its schema says `replacementStrategy: delete_then_create`
(CloudFormation CLI, resource type schema; "Understand update behaviors of stack resources": it "usually creates the
replacement resource first"); cfn-lint's schema of AWS::FSx::DataRepositoryAssociation has no replacementStrategy, so
replacing a link that keeps its path fails and the stack rolls back."""
CUSTOM_UPDATES: Mapping[str, str] = {
    "Custom::NcclEnvironment": (
        "updated in place: the SSM parameter is overwritten (fmcluster/lambdas/nccl_env/handler.py); a node reads it "
        "once, when it is set up (its nccl lifecycle step runs nccl-env.sh), so running nodes keep the old "
        "variables until they are replaced or nccl-env.sh runs again"
    ),
    "Custom::ArtifactMirror": (
        "updated in place: the mirror job runs again and copies what the list adds, under new keys (a new version is "
        "a new key), keeping the physical id, the mirror's URI (fmcluster/lambdas/artifact_mirror/handler.py); nodes "
        "install a new version only when their node scripts ask for it"
    ),
    "Custom::TrainingImage": (
        "updated in place: CodeBuild builds the new image and its URI is published to SSM "
        "(fmcluster/lambdas/image_build/handler.py); running jobs keep the image they started with"
    ),
    "Custom::PcsSampleImage": (
        "updated in place: the newest sample AMI is looked up again (fmcluster/lambdas/pcs_ami/handler.py); a new "
        "image id gives the launch templates a new version, used by new nodes only"
    ),
    "Custom::GrafanaDashboards": (
        "updated in place: dashboards and the data source are uploaded again by uid "
        "(fmcluster/lambdas/grafana_dashboards/handler.py)"
    ),
    "Custom::S3AutoDeleteObjects": (
        "updated in place: nothing happens unless the bucket name changes, then the old bucket is emptied (aws-cdk "
        "custom-resource-handlers, auto-delete-objects-handler onUpdate)"
    ),
    "Custom::S3BucketNotifications": (
        "updated in place: the bucket's notification configuration is put again (aws-cdk BucketNotificationsHandler)"
    ),
    "Custom::CDKBucketDeployment": (
        "updated in place: the new files are copied into the bucket (aws-cdk BucketDeployment); HyperPod runs "
        "lifecycle scripts when it creates a node, so running nodes keep what they ran"
    ),
    "Custom::AWS": (
        "updated in place: these calls have no onUpdate, so nothing runs (aws-cdk AwsCustomResource: onUpdate "
        "'Default: no call')"
    ),
}
"""What fmcluster's custom resources (and those CDK adds) do when their properties change. CloudFormation sends such a
resource an Update request, never a replacement of its own; the handler decides (each handler's source is named)."""
DELETE_EFFECTS: Mapping[str, str] = {
    "Custom::ArtifactMirror": (
        "its handler deletes nothing (fmcluster/lambdas/artifact_mirror/handler.py, Delete): the files it copied stay "
        "under fmcluster-mirror/ of their bucket, and nodes that were given this mirror keep installing from them. The "
        "mirror moves with orchestrator.node_image (fmcluster.stacks.mirror.mirror_has_own_stack): to the "
        "<cluster>-mirror stack with baked, back to the storage stack with boot. It is filled there first (the "
        "node-image and cluster stacks wait for it), and every node group's lifecycle actions get its URI in the "
        "same update that gives them the new image, which replaces their nodes anyway: the move replaces no node "
        "more. Delete the old prefix yourself once no node reads it"
    ),
}
"""What deleting one of these custom resources does (CloudFormation sends a Delete request; the handler decides)."""
NEW_NODES_ONLY = (
    "new nodes only: AWS PCS launches new instances from the new version, running nodes keep theirs until they are "
    "replaced (PCS user guide, 'Updating an AWS PCS compute node group': 'New instances launch with the updated "
    "properties')"
)
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
    """Top-level properties (and DeletionPolicy, UpdateReplacePolicy) whose value changes."""
    reason: str = ""
    failure: str = ""
    """Why CloudFormation would fail this change and roll the stack back (no override helps), or ''."""
    key: str = ""
    """The cluster-file key whose value makes the failure, when one does (storage.lustre.metadata_iops)."""
    effects: tuple[str, ...] = ()
    """What the change does to running nodes or data, one sentence each, with its source."""
    risk: str = ""
    """Why an in-place change needs --allow-replacement (retention loosened, nodes possibly replaced), or ''."""

    @property
    def fails(self) -> bool:
        return bool(self.failure)

    @property
    def protected(self) -> bool:
        replaced = self.action in ("replace", "delete") and self.resource_type in PROTECTED_TYPES
        return replaced or bool(self.risk)

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


UNORDERED_KEYS = frozenset({"Action", "NotAction", "Resource", "NotResource"})
"""IAM policy elements whose lists are sets (IAM JSON policy reference: a statement matches any listed action or
resource): CDK orders them differently when the account is a token than when it is a literal."""


def resolved(value: object, pseudo: Mapping[str, str]) -> object:
    """`value` with the pseudo parameters of `pseudo` written out, adjacent text of joins joined and IAM's unordered
    lists sorted, so two spellings of one value compare equal.

    >>> resolved({"Fn::Join": ["", ["a-", {"Ref": "AWS::AccountId"}]]}, {"AWS::AccountId": "123456789012"})
    'a-123456789012'
    >>> resolved({"Fn::Sub": "b-${AWS::AccountId}-${X}"}, {"AWS::AccountId": "1"})
    {'Fn::Sub': 'b-1-${X}'}
    >>> resolved({"Fn::Join": ["", ["arn:", {"Ref": "AWS::AccountId"}, ":x/", {"Ref": "Y"}]]}, {"AWS::AccountId": "1"})
    {'Fn::Join': ['', ['arn:1:x/', {'Ref': 'Y'}]]}
    """
    if isinstance(value, list):
        return [resolved(item, pseudo) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and value.get("Ref") in pseudo:
        return pseudo[value["Ref"]]
    if len(value) == 1 and isinstance(value.get("Fn::Sub"), str):
        text = value["Fn::Sub"]
        for name, literal in pseudo.items():
            text = text.replace("${" + name + "}", literal)
        return text if "${" not in text else {"Fn::Sub": text}
    out: dict[str, Any] = {key: resolved(item, pseudo) for key, item in value.items()}
    for key in UNORDERED_KEYS & set(out):
        if isinstance(out[key], list):
            out[key] = sorted(out[key], key=lambda item: json.dumps(item, sort_keys=True))
    join = out.get("Fn::Join")
    if len(out) == 1 and isinstance(join, list) and len(join) == 2 and join[0] == "" and isinstance(join[1], list):
        parts: list[object] = []
        for part in join[1]:  # adjacent text joined: ["a:", "1", ":b", X] and ["a:1:b", X] are one value
            if isinstance(part, str) and parts and isinstance(parts[-1], str):
                parts[-1] += part
            else:
                parts.append(part)
        return parts[0] if len(parts) == 1 and isinstance(parts[0], str) else {"Fn::Join": ["", parts]}
    return out


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


def _resource_change(stack: str, logical_id: str, old: dict, new: dict, pseudo: Mapping[str, str]) -> Change | None:
    kind = new["Type"]
    if old["Type"] != kind:
        return Change(stack, logical_id, kind, "replace", (), f"type changes from {old['Type']}")
    before = cast(dict, resolved(old.get("Properties", {}), pseudo))  # a dict resolves to a dict
    after = cast(dict, resolved(new.get("Properties", {}), pseudo))
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    policies = [name for name in POLICIES if old.get(name, "Delete") != new.get(name, "Delete")]
    if not changed and not policies:
        return None
    properties = (*changed, *policies)
    risk = ""
    if any(old.get(name) == "Retain" for name in policies) and kind in RETAINED_TYPES:
        risk = ", ".join(f"{name} Retain -> {new.get(name, 'Delete')}" for name in policies)
    if not changed:
        return Change(stack, logical_id, kind, "modify", properties, risk=risk)
    if kind in CUSTOM_UPDATES:
        return Change(stack, logical_id, kind, "modify", properties, effects=(CUSTOM_UPDATES[kind],), risk=risk)
    pointers = create_only(kind)
    if pointers is None:
        return Change(stack, logical_id, kind, "replace", properties, "no schema for this type: may be replaced")
    moved = [_pointer_name(p) for p in pointers if value_at(before, p) != value_at(after, p)]
    if moved:
        failure = _replacement_failure(kind, before, after)
        return Change(stack, logical_id, kind, "replace", properties, f"{', '.join(moved)} is create-only", failure)
    key, failure = _refused_value(kind, before, after)
    effects, group_risk = hyperpod_groups(before, after) if kind == "AWS::SageMaker::Cluster" else ((), "")
    risk = risk or group_risk
    for pointer, (effect, replaces_nodes) in IN_PLACE_EFFECTS.get(kind, {}).items():
        if value_at(before, pointer) != value_at(after, pointer):
            effects = (*effects, effect)
            if replaces_nodes and not risk:
                risk = f"{_pointer_name(pointer)} change"
    if kind == "AWS::PCS::Cluster" and _enforces(after) and not _enforces(before):
        effects = (*effects, ENFORCEMENT_ON)
    return Change(stack, logical_id, kind, "modify", properties, failure=failure, key=key, effects=effects, risk=risk)


def _enforces(cluster: Mapping) -> bool:
    """Whether a PCS cluster's properties set AccountingStorageEnforce among its cluster-level Slurm settings."""
    settings = value_at(cluster, "/properties/SlurmConfiguration/SlurmCustomSettings")
    if not isinstance(settings, list):
        return False
    return any(isinstance(s, dict) and s.get("ParameterName") == "AccountingStorageEnforce" for s in settings)


def _replacement_failure(kind: str, before: Mapping, after: Mapping) -> str:
    """Why CloudFormation fails replacing a `kind` resource from `before` to `after` properties, or ''."""
    name_key = NAME_PROPERTIES.get(kind)
    if name_key is not None and name_key in before and before.get(name_key) == after.get(name_key):
        return f"CloudFormation cannot replace a resource that keeps its custom {name_key}"
    if kind in ONE_AT_A_TIME:
        keys, why = ONE_AT_A_TIME[kind]
        return why if all(before.get(k) == after.get(k) for k in keys) else ""
    return ""


ACCOUNTING_OFF = (
    "AWS PCS managed accounting cannot be turned off on a cluster that has it (PCS user guide, 'Slurm accounting in "
    "AWS PCS': 'You can't disable accounting on a cluster that has it enabled. You must delete the cluster'); keep "
    "accounting: true"
)


def _accounting_mode(properties: Mapping) -> object:
    return value_at(properties, "/properties/SlurmConfiguration/Accounting/Mode") or "NONE"


def _refused_value(kind: str, before: Mapping, after: Mapping) -> tuple[str, str]:
    """(cluster-file key, why) of the first setting the service cannot lower or unset, or ('', '')."""
    if kind == "AWS::PCS::Cluster" and _accounting_mode(before) == "STANDARD" != _accounting_mode(after):
        return "orchestrator.accounting", ACCOUNTING_OFF
    for pointer, (key, why) in GROW_ONLY.get(kind, {}).items():
        old, new = value_at(before, pointer), value_at(after, pointer)
        if isinstance(old, int) and isinstance(new, int) and new < old:
            return key, why
        unset = UNSET_REFUSED.get(kind, {}).get(pointer)
        if isinstance(old, int) and new is None and unset:
            return key, unset
    return "", ""


HYPERPOD_GROUP_CHANGES: Mapping[str, tuple[str, bool]] = {
    "InstanceType": (
        "HyperPod's UpdateCluster can change an existing group's instance type (SageMaker developer guide, 'Updating "
        "SageMaker HyperPod cluster configuration'); what it does to the group's running nodes is unconfirmed: plan "
        "for every node of the group being replaced, its jobs stopped",
        True,
    ),
    "TrainingPlanArn": (
        "the group's nodes come from another training plan: what HyperPod does to the running ones is unconfirmed; "
        "plan for every node of the group being replaced",
        True,
    ),
    "InstanceCount": (
        "HyperPod adds nodes, or removes nodes to reach the new count (UpdateCluster InstanceCount)",
        False,
    ),
    "LifeCycleConfig": (
        "new nodes only: HyperPod runs the lifecycle scripts when it creates a node (ClusterLifeCycleConfig.OnCreate)",
        False,
    ),
    "InstanceStorageConfigs": (
        "new nodes only (unconfirmed): the storage settings are applied when HyperPod creates a node",
        False,
    ),
}
"""What HyperPod does when a property of an existing instance group changes, from botocore sagemaker
(UpdateCluster, ClusterInstanceGroupSpecification) and the SageMaker developer guide; True: the running nodes may be
replaced (unconfirmed), so the plan needs --allow-replacement."""


def hyperpod_groups(before: Mapping, after: Mapping) -> tuple[tuple[str, ...], str]:
    """(effects, risk) of the instance-group changes of one AWS::SageMaker::Cluster update, group by group."""
    groups = [before.get("InstanceGroups") or [], after.get("InstanceGroups") or []]
    if not all(isinstance(side, list) and all(isinstance(group, dict) for group in side) for side in groups):
        unread = "InstanceGroups is not a plain list of groups (an intrinsic function): what HyperPod does to them"
        return (f"{unread} is not read here; plan for every group's nodes being replaced",), "InstanceGroups unread"
    old = {group.get("InstanceGroupName"): group for group in groups[0]}
    new = {group.get("InstanceGroupName"): group for group in groups[1]}
    effects: list[str] = []
    risky: list[str] = []
    for name in sorted(set(old) - set(new), key=str):
        effects.append(f"group {name}: removed; HyperPod deletes its nodes (UpdateCluster InstanceGroupsToDelete)")
        risky.append(f"group {name} removed")
    for name in sorted(set(new) - set(old), key=str):
        effects.append(f"group {name}: added; HyperPod creates its nodes")
    for name in sorted(set(old) & set(new), key=str):
        for field in sorted(key for key in set(old[name]) | set(new[name]) if old[name].get(key) != new[name].get(key)):
            what, replaces = HYPERPOD_GROUP_CHANGES.get(
                field, ("changed in place through UpdateCluster (its effect on running nodes is unconfirmed)", False)
            )
            effects.append(f"group {name}: {field} changes: {what}")
            if replaces:
                risky.append(f"group {name} {field} changes")
    return tuple(effects), ", ".join(risky)


def _stack_changes(stack: str, old: dict, new: dict, pseudo: Mapping[str, str]) -> list[Change]:
    old_resources, new_resources = old.get("Resources", {}), new.get("Resources", {})
    changes: dict[str, Change] = {}
    for logical_id, resource in new_resources.items():
        if logical_id not in old_resources:
            changes[logical_id] = Change(stack, logical_id, resource["Type"], "add")
        elif change := _resource_change(stack, logical_id, old_resources[logical_id], resource, pseudo):
            changes[logical_id] = change
    for logical_id, resource in old_resources.items():
        if logical_id not in new_resources:
            retained = resource.get("DeletionPolicy") == "Retain"
            note = "removed from the stack, kept in the account (DeletionPolicy Retain)" if retained else ""
            effects = (DELETE_EFFECTS[resource["Type"]],) if resource["Type"] in DELETE_EFFECTS else ()
            changes[logical_id] = Change(stack, logical_id, resource["Type"], "delete", (), note, effects=effects)
    _follow_replacements(stack, new_resources, changes)
    _name_launch_template_readers(new_resources, changes)
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
            if source is not None:  # its values that read a replaced resource get new ids; the rest stay
                renewed = {
                    key: ("new", value) if _refers_to(value, replaced) else value for key, value in properties.items()
                }
                failure = _replacement_failure(kind, properties, renewed)
                why = f"follows {source}, replaced"
                changes[logical_id] = Change(stack, logical_id, kind, "replace", (), why, failure)
                grew = True
            elif current is None and (source := _refers_to(properties, replaced)):
                changes[logical_id] = Change(stack, logical_id, kind, "modify", (), f"gets the new {source}")
        if not grew:
            return


def _name_launch_template_readers(resources: dict, changes: dict[str, Change]) -> None:
    """A launch template changed in place gets a new version: name the node groups that launch from it."""
    for logical_id, change in list(changes.items()):
        if change.resource_type != "AWS::EC2::LaunchTemplate" or change.action != "modify":
            continue
        readers = sorted(
            key
            for key, resource in resources.items()
            if resource["Type"] == "AWS::PCS::ComputeNodeGroup"
            and _refers_to(resource.get("Properties", {}).get("CustomLaunchTemplate"), {logical_id})
        )
        if readers:
            effect = f"a new version, read by {', '.join(readers)}: {NEW_NODES_ONLY}"
            changes[logical_id] = replace(change, effects=(*change.effects, effect))


def compare(old: Mapping[str, dict], new: Mapping[str, dict], pseudo: Mapping[str, str] | None = None) -> list[Change]:
    """Every change from the `old` templates to the `new` ones (stack name -> template), stack by stack. Stacks only
    in `old` are left out: `cdk deploy` never deletes a stack that is no longer in the app (`left_alone`). `pseudo`:
    pseudo parameters whose value is known (AWS::AccountId when either file names the account)."""
    changes: list[Change] = []
    for stack in sorted(new):
        changes += _stack_changes(stack, old.get(stack, {}), new[stack], pseudo or {})
    return changes


def left_alone(old: Mapping[str, dict], new: Mapping[str, dict]) -> list[str]:
    """Stacks of `old` that `new` no longer has: `cdk deploy` leaves them as they are (it deploys the stacks of the
    app it runs; only `cdk destroy STACK` deletes one)."""
    return [stack for stack in old if stack not in new]


@dataclass(frozen=True)
class StaleReader:
    """A stack that reads a replaced resource's value through `Fn::GetStackOutput` (weak cross-stack reference)."""

    stack: str
    logical_id: str
    source: Change
    output: str

    def line(self) -> str:
        return (
            f"  ! stale  {self.stack} {self.logical_id} reads {self.output} of the replaced {self.source.logical_id} "
            f"({self.source.stack}) through Fn::GetStackOutput"
        )


def stale_refusals(readers: list[StaleReader]) -> list[Problem]:
    """A `Problem` per replaced resource that other stacks read: refused whatever --allow-replacement says.

    Cross-stack values are weak references (cdk.json `@aws-cdk/core:defaultCrossStackReferences: weak`), resolved when
    the reading stack deploys; the CDK CLI skips a stack whose template did not change (FACTS.md: unconfirmed whether
    CloudFormation would resolve the new value at all). The readers keep the old resource, which CloudFormation then
    deletes, or empties of its rules, in the producing stack's cleanup: nodes lose their network, security group rules
    or file system with no error."""
    by_source: dict[tuple[str, str], list[StaleReader]] = {}
    for reader in readers:
        by_source.setdefault((reader.source.stack, reader.source.logical_id), []).append(reader)
    refusals: list[Problem] = []
    for (stack, logical_id), mine in by_source.items():
        names = [f"{reader.stack} {reader.logical_id}" for reader in mine]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        source = mine[0].source
        refusals.append(
            Problem(
                f"{stack}.{logical_id}",
                f"this update would replace {source.resource_type} ({source.reason}) while other stacks use it "
                f"through Fn::GetStackOutput ({shown}); `cdk deploy --all` skips a stack whose template does not "
                "change, so they keep the old one, which CloudFormation then deletes or strips in cleanup. Keep the "
                "old value, or deploy the file under a new name (a new cluster beside this one), move the work, then "
                "`cdk destroy` the old cluster",
            )
        )
    return refusals


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


def render(changes: list[Change], stacks: list[str], left: Sequence[str] = ()) -> Iterator[str]:
    """The plan as text: per stack its changes (each followed by what it does, indented), or 'no change'; the
    stacks in `left` as left alone."""
    for stack in stacks:
        if stack in left:
            yield f"{stack}: not in the new app: `cdk deploy` leaves it as it is (`cdk destroy {stack}` deletes it)"
            continue
        mine = [change for change in changes if change.stack == stack]
        counts = ", ".join(f"{sum(c.action == a for c in mine)} {WORDS[a].lower()}" for a in SYMBOLS)
        yield f"{stack}: " + (counts if mine else "no change")
        for change in mine:
            yield change.line()
            yield from (f"      {effect}" for effect in change.effects)


def read_templates(outdir: Path, stack_names: list[str]) -> dict[str, dict]:
    """The synthesized template of each stack in `outdir`."""
    return {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in stack_names}


def refusal(change: Change, old: Mapping[str, dict]) -> Problem:
    """The `Problem` (key path, message) that explains a refused change and what to do instead."""
    if change.resource_type == "AWS::PCS::Cluster" and change.reason == "Size is create-only":
        size = old[change.stack]["Resources"][change.logical_id]["Properties"]["Size"].lower()
        return Problem(
            "orchestrator.size",
            f"AWS PCS cannot change a cluster's size in place: this update would replace the cluster (size "
            f"{size}) with every node group, queue and running job. Set orchestrator.size: {size} to keep it (it must "
            "still hold every node), or deploy the file under a new name, move the work, then delete the old cluster",
        )
    if change.fails and change.resource_type == "AWS::FSx::DataRepositoryAssociation":
        path = old[change.stack]["Resources"][change.logical_id]["Properties"].get("FileSystemPath")
        return Problem(
            "storage.lustre.repositories",
            f"this update would replace the S3 link of {path} ({change.reason}): {change.failure}, so the update "
            f"would fail and roll back. Keep its old s3_uri, or change it in two deploys: remove the repository at "
            f"{path} and deploy (the files already in the file system stay), then add it back with the new s3_uri and "
            "deploy again",
        )
    if change.fails:
        replaced = change.action == "replace"
        detail = change.reason if replaced else ", ".join(change.properties)
        what = f"{'replace' if replaced else 'change'} {change.resource_type} ({detail})"
        return Problem(
            change.key or f"{change.stack}.{change.logical_id}",
            f"this update would {what}, and {change.failure}: CloudFormation would fail the update and roll back; "
            "keep the old value" + (" or give the resource a new name too" if replaced else ""),
        )
    if change.action == "delete" and change.resource_type == "AWS::FSx::FileSystem":
        return file_system_removal(change, old)
    if change.risk and change.resource_type in RETAINED_TYPES:
        what = PROTECTED_TYPES[change.resource_type].split(" (")[0]
        return Problem(
            "storage.retain_on_delete",
            f"this update would stop retaining {what} {change.logical_id} ({change.risk}): `cdk destroy`, or a later "
            "update that removes it, would then delete it with its data; keep storage.retain_on_delete: true, or "
            "pass --allow-replacement to do it anyway",
        )
    if change.risk:
        return Problem(
            f"{change.stack}.{change.logical_id}",
            f"this update may replace running nodes ({change.risk}); drain the group's jobs first, then pass "
            "--allow-replacement to do it anyway",
        )
    verb = "replace" if change.action == "replace" else "delete"
    why = f" ({change.reason})" if change.reason else ""
    return Problem(
        f"{change.stack}.{change.logical_id}",
        f"this update would {verb} {PROTECTED_TYPES[change.resource_type]}{why}; "
        + (
            "first deploy with that compute group's count: 0 so its nodes terminate, then remove it, or "
            if change.resource_type == "AWS::EC2::PlacementGroup" and verb == "delete"
            else ""
        )
        + "pass --allow-replacement to do it anyway",
    )


def file_system_removal(change: Change, old: Mapping[str, dict]) -> Problem:
    """Taking the file system out of the file (`storage.lustre: none`, or `file_system_id` instead): retained, it stays
    in FSx, with its data and its charge, but unmanaged and mounted by no node; otherwise it is deleted."""
    resource = old.get(change.stack, {}).get("Resources", {}).get(change.logical_id, {})
    retained = resource.get("DeletionPolicy") == "Retain"
    fate = (
        "CloudFormation leaves it in FSx (DeletionPolicy Retain), with its data and its hourly charge, but no stack "
        "manages it and no node mounts it any more"
        if retained
        else "CloudFormation deletes it with its data (DeletionPolicy Delete)"
    )
    return Problem(
        "storage.lustre",
        f"this update would take the FSx for Lustre file system {change.logical_id} out of the cluster: {fate}; homes, "
        "the imported training image and checkpoints on /fsx leave every node. Keep storage.lustre as it was, or pass "
        "--allow-replacement to do it anyway"
        + (" (then copy what you need and delete the file system in FSx yourself)" if retained else ""),
    )


def refusals(
    changes: list[Change], old: Mapping[str, dict], new: Mapping[str, dict], *, allow_replacement: bool = False
) -> list[Problem]:
    """The `Problem`s of everything the update may not do: what CloudFormation or the service would fail and
    replaced resources that other stacks read (whatever the flag), then, without `allow_replacement`, what replaces,
    deletes or stops retaining data or the cluster, or may replace running nodes."""
    refused = [refusal(change, old) for change in changes if change.fails]
    refused += stale_refusals(stale_readers(changes, new))
    if not allow_replacement:
        refused += [refusal(change, old) for change in changes if change.protected and not change.fails]
    return refused


def synthesize(config: object, outdir: Path, context: Mapping[str, object]) -> dict[str, dict]:
    """Build `config` (a ClusterConfig) into a CDK app with `context` (cdk.json's), synthesize it into `outdir`,
    and return each stack's template."""
    import aws_cdk as cdk

    from fmcluster.stacks import build

    app = cdk.App(outdir=str(outdir), context=dict(context))
    stacks = build(app, config)  # type: ignore[arg-type]
    app.synth()
    return read_templates(outdir, [stack.stack_name for stack in stacks.all()])
