"""The update plan on small templates: which property changes replace a resource comes from CloudFormation's
resource schemas (cfn-lint's `createOnlyProperties`, read here directly) and the FSx API reference for the settings
those schemas leave out."""

from __future__ import annotations

import json
from importlib.resources import files

import botocore.session
import pytest

from fmcluster.update_plan import compare, create_only, refusal, render

PROVIDERS = files("cfnlint") / "data" / "schemas" / "providers"


def schema_create_only(resource_type: str) -> list[str]:
    index = json.loads((PROVIDERS / "us-east-1.json").read_text())
    schema = files("cfnlint") / "data" / "schemas" / "resources" / f"{index[resource_type]}.json"
    return json.loads(schema.read_text()).get("createOnlyProperties", [])


def stack(**resources: tuple[str, dict]) -> dict[str, dict]:
    return {"s": {"Resources": {key: {"Type": kind, "Properties": props} for key, (kind, props) in resources.items()}}}


PCS_CLUSTER = {"Name": "llm", "Size": "SMALL", "Scheduler": {"Type": "SLURM", "Version": "25.11"}}
NODE_GROUP = {
    "Name": "gpu",
    "ClusterId": {"Fn::GetAtt": ["Cluster", "Id"]},
    "ScalingConfiguration": {"MinInstanceCount": 1},
}


def test_schema_create_only_properties_decide_replacement():
    # AWS::PCS::Cluster: Name, Networking and Size are create-only; Scheduler changes in place (the schema's own list)
    assert {"/properties/Size", "/properties/Name"} <= set(schema_create_only("AWS::PCS::Cluster"))
    assert "/properties/Scheduler" not in schema_create_only("AWS::PCS::Cluster")
    old = stack(Cluster=("AWS::PCS::Cluster", PCS_CLUSTER))
    newer = stack(Cluster=("AWS::PCS::Cluster", {**PCS_CLUSTER, "Scheduler": {"Type": "SLURM", "Version": "26.05"}}))
    bigger = stack(Cluster=("AWS::PCS::Cluster", {**PCS_CLUSTER, "Size": "MEDIUM"}))
    assert [(c.action, c.properties) for c in compare(old, newer)] == [("modify", ("Scheduler",))]
    assert [(c.action, c.reason) for c in compare(old, bigger)] == [("replace", "Size is create-only")]


def test_a_node_group_follows_its_replaced_cluster_and_scaling_changes_in_place():
    old = stack(Cluster=("AWS::PCS::Cluster", PCS_CLUSTER), Gpu=("AWS::PCS::ComputeNodeGroup", NODE_GROUP))
    grown = {**NODE_GROUP, "ScalingConfiguration": {"MinInstanceCount": 4}}
    scaled = stack(Cluster=("AWS::PCS::Cluster", PCS_CLUSTER), Gpu=("AWS::PCS::ComputeNodeGroup", grown))
    assert [(c.logical_id, c.action) for c in compare(old, scaled)] == [("Gpu", "modify")]
    resized = stack(
        Cluster=("AWS::PCS::Cluster", {**PCS_CLUSTER, "Size": "LARGE"}), Gpu=("AWS::PCS::ComputeNodeGroup", NODE_GROUP)
    )
    assert [(c.logical_id, c.action, c.reason) for c in compare(old, resized)] == [
        ("Cluster", "replace", "Size is create-only"),
        ("Gpu", "replace", "follows Cluster, replaced"),  # ClusterId is create-only for node groups
    ]


def test_fsx_settings_the_schema_leaves_out_still_replace():
    # FACTS.md (Service truth): the schema lists neither, the FSx API reference says "set at creation" for both
    assert "/properties/LustreConfiguration/EfaEnabled" not in schema_create_only("AWS::FSx::FileSystem")
    assert "/properties/LustreConfiguration/EfaEnabled" in create_only("AWS::FSx::FileSystem")
    fsx = {"LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "EfaEnabled": False}, "StorageCapacity": 4800}
    old = stack(Fs=("AWS::FSx::FileSystem", fsx))
    efa = stack(
        Fs=("AWS::FSx::FileSystem", {**fsx, "LustreConfiguration": {**fsx["LustreConfiguration"], "EfaEnabled": True}})
    )
    bigger = stack(Fs=("AWS::FSx::FileSystem", {**fsx, "StorageCapacity": 9600}))
    (change,) = compare(old, efa)
    assert (change.action, change.reason, change.protected) == (
        "replace",
        "LustreConfiguration/EfaEnabled is create-only",
        True,
    )
    assert [(c.action, c.protected, c.fails) for c in compare(old, bigger)] == [("modify", False, False)]
    # FSx for Lustre guide, "Managing storage capacity": "You can only increase the amount of storage capacity"
    (shrunk,) = compare(stack(Fs=("AWS::FSx::FileSystem", {**fsx, "StorageCapacity": 9600})), old)
    assert (shrunk.action, shrunk.fails) == ("modify", True)
    assert refusal(shrunk, {}).message == (
        "this update would change AWS::FSx::FileSystem (StorageCapacity), and FSx for Lustre cannot decrease a file "
        "system's storage capacity: CloudFormation would fail the update and roll back; keep the old value"
    )


def test_additions_deletions_and_unknown_types():
    old = stack(Keep=("AWS::SNS::Topic", {}), Gone=("AWS::S3::Bucket", {}))
    old["s"]["Resources"]["Gone"]["DeletionPolicy"] = "Retain"
    new = stack(Keep=("AWS::SNS::Topic", {}), Fresh=("Custom::Thing", {"A": 1}))
    changes = compare(old, new)
    assert [(c.logical_id, c.action, c.protected) for c in changes] == [
        ("Fresh", "add", False),
        ("Gone", "delete", True),
    ]
    assert changes[1].reason == "removed from the stack, kept in the account (DeletionPolicy Retain)"
    moved = compare(stack(X=("Custom::Thing", {"A": 1})), stack(X=("Custom::Thing", {"A": 2})))
    assert [(c.action, c.reason) for c in moved] == [("replace", "no schema for this type: may be replaced")]


def test_render_and_the_size_refusal_say_what_to_do():
    old = stack(Cluster=("AWS::PCS::Cluster", PCS_CLUSTER))
    changes = compare(old, stack(Cluster=("AWS::PCS::Cluster", {**PCS_CLUSTER, "Size": "MEDIUM"})))
    assert list(render(changes, ["s", "t"])) == [
        "s: 0 add, 0 change, 1 replace, 0 delete",
        "  ! REPLACE Cluster (AWS::PCS::Cluster): Size is create-only",
        "t: no change",
    ]
    problem = refusal(changes[0], old)
    path, message = problem.path, problem.message
    assert path == "orchestrator.size"
    assert "Set orchestrator.size: small to keep it" in message


@pytest.mark.parametrize(
    "resource_type",
    ["AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::PCS::Cluster", "AWS::SageMaker::Cluster"],
)
def test_stateful_and_cluster_types_are_protected(resource_type):
    (change,) = compare(stack(X=(resource_type, {})), {"s": {"Resources": {}}})
    assert change.protected
    assert refusal(change, {}).message.endswith("pass --allow-replacement to do it anyway")


def test_the_plan_command_prints_per_stack_and_refuses_with_exit_2(tmp_path, monkeypatch, capsys):
    # Synthesis is replaced by templates that differ in the PCS size only: what this test checks is the command.
    from fmcluster import cli, update_plan

    def fake_synthesize(config, outdir, context):
        size = "SMALL" if config.total_nodes < 10 else "LARGE"
        return {f"{config.name}-cluster": stack(Cluster=("AWS::PCS::Cluster", {**PCS_CLUSTER, "Size": size}))["s"]}

    monkeypatch.setattr(update_plan, "synthesize", fake_synthesize)
    files = {}
    for label, count in (("old", 2), ("new", 20)):
        files[label] = tmp_path / f"{label}.yaml"
        files[label].write_text(
            "name: llm\nregion: us-east-1\navailability_zone_id: use1-az6\norchestrator: {type: pcs}\n"
            f"compute: [{{name: gpu, instance_type: p5.48xlarge, count: {count}}}]\n"
        )
    assert cli.main(["plan", str(files["new"]), "--previous", str(files["old"])]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"Update plan: {files['new']} over {files['old']}",
        "llm-cluster: 0 add, 0 change, 1 replace, 0 delete",
        "  ! REPLACE Cluster (AWS::PCS::Cluster): Size is create-only",
    ]
    assert err.startswith(f"{files['new']}: orchestrator.size: AWS PCS cannot change a cluster's size in place")
    # The cluster keeps its name 'llm', so CloudFormation could not replace it: no override makes this plan pass
    assert cli.main(["plan", str(files["new"]), "--previous", str(files["old"]), "--allow-replacement"]) == 2


def test_replacing_a_resource_that_keeps_its_custom_name_fails_even_when_allowed():
    # CloudFormation template reference, "CloudFormation resource custom naming": "You can't perform an update that
    # causes a custom-named resource to be replaced. If you must replace the resource, specify a new name." A node
    # group's InstanceConfigs are create-only (AWS::PCS::ComputeNodeGroup schema); the group keeps its Name 'gpu'.
    assert "/properties/InstanceConfigs" in schema_create_only("AWS::PCS::ComputeNodeGroup")
    configs = {**NODE_GROUP, "InstanceConfigs": [{"InstanceType": "p5.48xlarge"}]}
    other = {**NODE_GROUP, "InstanceConfigs": [{"InstanceType": "p5en.48xlarge"}]}
    renamed = {**other, "Name": "gpu2"}
    old = stack(Gpu=("AWS::PCS::ComputeNodeGroup", configs))
    (change,) = compare(old, stack(Gpu=("AWS::PCS::ComputeNodeGroup", other)))
    assert (change.action, change.fails, change.protected) == ("replace", True, False)
    problem = refusal(change, old)
    path, message = problem.path, problem.message
    assert (path, message) == (
        "s.Gpu",
        "this update would replace AWS::PCS::ComputeNodeGroup (InstanceConfigs is create-only), and CloudFormation "
        "cannot replace a resource that keeps its custom Name: CloudFormation would fail the update and roll back; "
        "keep the old value or give the resource a new name too",
    )
    (change,) = compare(old, stack(Gpu=("AWS::PCS::ComputeNodeGroup", renamed)))
    assert (change.action, change.fails) == ("replace", False)  # a new name: CloudFormation can replace it


def test_an_image_builder_component_whose_document_changes_under_its_old_name_fails_even_when_allowed():
    # cfn-lint's schema of AWS::ImageBuilder::Component: Data and Name are create-only, so a new document replaces the
    # component; CloudFormation cannot replace a custom-named resource under its old name ("CloudFormation resource
    # custom naming"), and Image Builder names a component by name and version (its ARN ends in name/version). The
    # baked node image's names carry a digest of what the document holds (fmcluster.constructs.node_image).
    assert {"/properties/Data", "/properties/Name"} <= set(schema_create_only("AWS::ImageBuilder::Component"))
    component = {"Name": "llm-node-x86-64-slurm2605-0123456789ab", "Version": "1.0.0", "Platform": "Linux"}
    old = stack(C=("AWS::ImageBuilder::Component", {**component, "Data": "s3://old-mirror"}))
    new = stack(C=("AWS::ImageBuilder::Component", {**component, "Data": "s3://new-mirror"}))
    (change,) = compare(old, new)
    assert (change.action, change.fails) == ("replace", True)
    renamed = stack(C=("AWS::ImageBuilder::Component", {**component, "Name": "llm-x-fedcba987654", "Data": "s3://n"}))
    (change,) = compare(old, renamed)
    assert (change.action, change.fails) == ("replace", False)


def test_a_mirror_moving_out_of_the_storage_stack_is_deleted_there_added_in_its_own_stack_and_refused_nothing():
    """A cluster whose mirror lives in the storage stack (mirror job, its log group kept with DeletionPolicy Retain)
    switched to a baked node image, which moves the mirror to its own stack: the storage stack deletes the job's
    resources, the new stack
    adds them with a bucket of its own (no fixed names, so nothing collides), and the plan says what happens to the
    files already copied: fmcluster/lambdas/artifact_mirror/handler.py deletes nothing on Delete."""
    from fmcluster.update_plan import refusals

    job = {"Type": "Custom::ArtifactMirror", "Properties": {"MirrorUri": "s3://data/fmcluster-mirror"}}
    logs = {"Type": "AWS::Logs::LogGroup", "Properties": {}, "DeletionPolicy": "Retain"}
    bucket = {"Type": "AWS::S3::Bucket", "Properties": {}, "DeletionPolicy": "Retain"}
    old = {"c-storage": {"Resources": {"Mirror": job, "MirrorLogs": logs, "DataBucket": bucket}}}
    new = {
        "c-mirror": {"Resources": {"Mirror": job, "MirrorLogs": logs, "Bucket": bucket}},
        "c-storage": {"Resources": {"DataBucket": bucket}},
    }
    changes = {(c.stack, c.logical_id): c for c in compare(old, new)}
    assert {key: change.action for key, change in changes.items()} == {
        ("c-mirror", "Mirror"): "add",
        ("c-mirror", "MirrorLogs"): "add",
        ("c-mirror", "Bucket"): "add",
        ("c-storage", "Mirror"): "delete",
        ("c-storage", "MirrorLogs"): "delete",
    }
    assert (
        changes["c-storage", "MirrorLogs"].reason
        == "removed from the stack, kept in the account (DeletionPolicy Retain)"
    )
    (effect,) = changes["c-storage", "Mirror"].effects
    assert effect.startswith("its handler deletes nothing (fmcluster/lambdas/artifact_mirror/handler.py, Delete)")
    assert "The mirror moves with orchestrator.node_image" in effect
    assert refusals(list(changes.values()), old, new) == []


def test_a_new_artifact_list_updates_the_mirror_in_place():
    """fmcluster/lambdas/artifact_mirror/handler.py answers an Update with the same physical id (the mirror's URI), so
    CloudFormation keeps the resource; without this entry the plan would call it replaced (no schema for a custom
    type) and refuse its readers as stale."""
    from fmcluster.lambdas.artifact_mirror import handler

    uri = "s3://b/fmcluster-mirror"
    event = {
        "RequestType": "Update",
        "PhysicalResourceId": uri,
        "ResourceProperties": {"ProjectName": "p", "MirrorUri": uri},
    }

    class Build:
        def start_build(self, projectName):
            return {"build": {"id": "b:1"}}

        def batch_get_builds(self, ids):
            return {"builds": [{"buildStatus": "SUCCEEDED"}]}

    assert handler.on_event(event, None, codebuild=Build(), sleep=lambda _: None)["PhysicalResourceId"] == uri
    old = stack(Mirror=("Custom::ArtifactMirror", {"MirrorUri": uri, "ListHash": "a"}))
    new = stack(Mirror=("Custom::ArtifactMirror", {"MirrorUri": uri, "ListHash": "b"}))
    (change,) = compare(old, new)
    assert (change.action, change.properties) == ("modify", ("ListHash",))
    assert change.effects[0].startswith("updated in place: the mirror job runs again")


# Update rules as a table: (rule, old template, new template, expected (logical id, action) list, expected refusal key
# paths without --allow-replacement, the same with it). Each rule's source is checked by the test after the table.


def botocore_model(service: str) -> dict:
    """The service's API model as botocore ships it (its newest version)."""
    import botocore.loaders

    return botocore.loaders.Loader().load_service_model(service, "service-2")


def botocore_doc(service: str, shape: str, member: str) -> str:
    return botocore_model(service)["shapes"][shape]["members"][member]["documentation"]


def two_stacks(producer: dict, reader: dict) -> dict[str, dict]:
    """A producing stack 'net' whose output Sg is read by stack 'app' through Fn::GetStackOutput."""
    reference = {"Fn::GetStackOutput": {"StackName": "net", "OutputName": "Sg"}}
    return {
        "net": {
            "Resources": {"Sg": {"Type": "AWS::EC2::SecurityGroup", "Properties": producer}},
            "Outputs": {"Sg": {"Value": {"Fn::GetAtt": ["Sg", "GroupId"]}}},
        },
        "app": {
            "Resources": {
                "Fs": {"Type": "AWS::FSx::FileSystem", "Properties": {**reader, "SecurityGroupIds": [reference]}}
            }
        },
    }


def with_policy(kind: str, policy: str) -> dict[str, dict]:
    resources = stack(X=(kind, {"A": 1}))
    resources["s"]["Resources"]["X"].update(DeletionPolicy=policy, UpdateReplacePolicy=policy)
    return resources


LINK = {"FileSystemId": "fs-1", "FileSystemPath": "/datasets", "DataRepositoryPath": "s3://a/"}
METADATA = {"LustreConfiguration": {"MetadataConfiguration": {"Mode": "USER_PROVISIONED", "Iops": 12000}}}
ACCOUNT_JOIN = {"BucketName": {"Fn::Join": ["", ["sagemaker-x-", {"Ref": "AWS::AccountId"}, "-us-east-1"]]}}
NODES = {
    **NODE_GROUP,
    "CustomLaunchTemplate": {"TemplateId": {"Ref": "Lt"}, "Version": {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]}},
}
HYPERPOD_GROUP = {"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 2}

RULES = [
    (
        "an S3 link replaced on its own path fails (create-then-delete)",
        stack(L=("AWS::FSx::DataRepositoryAssociation", LINK)),
        stack(L=("AWS::FSx::DataRepositoryAssociation", {**LINK, "DataRepositoryPath": "s3://b/"})),
        [("L", "replace")],
        ["storage.lustre.repositories"],
        ["storage.lustre.repositories"],
    ),
    (
        "an S3 link on a new path is an add and a delete, which FSx allows",
        stack(L=("AWS::FSx::DataRepositoryAssociation", LINK)),
        stack(M=("AWS::FSx::DataRepositoryAssociation", {**LINK, "FileSystemPath": "/other"})),
        [("M", "add"), ("L", "delete")],
        [],
        [],
    ),
    (
        "a replaced security group that another stack reads is refused whatever the flag",
        two_stacks({"GroupDescription": "EFA"}, {}),
        two_stacks({"GroupDescription": "EFA traffic"}, {}),
        [("Sg", "replace")],
        ["net.Sg"],
        ["net.Sg"],
    ),
    (
        "a bucket no longer retained is refused without the flag",
        with_policy("AWS::S3::Bucket", "Retain"),
        with_policy("AWS::S3::Bucket", "Delete"),
        [("X", "modify")],
        ["storage.retain_on_delete"],
        [],
    ),
    (
        "a log group no longer retained is shown, not refused",
        with_policy("AWS::Logs::LogGroup", "Retain"),
        with_policy("AWS::Logs::LogGroup", "Delete"),
        [("X", "modify")],
        [],
        [],
    ),
    (
        "metadata IOPS lowered fails",
        stack(Fs=("AWS::FSx::FileSystem", METADATA)),
        stack(
            Fs=(
                "AWS::FSx::FileSystem",
                {"LustreConfiguration": {"MetadataConfiguration": {"Mode": "USER_PROVISIONED", "Iops": 6000}}},
            )
        ),
        [("Fs", "modify")],
        ["storage.lustre.metadata_iops"],
        ["storage.lustre.metadata_iops"],
    ),
    (
        "metadata IOPS unset (back to AUTOMATIC) fails",
        stack(Fs=("AWS::FSx::FileSystem", METADATA)),
        stack(Fs=("AWS::FSx::FileSystem", {"LustreConfiguration": {"MetadataConfiguration": {"Mode": "AUTOMATIC"}}})),
        [("Fs", "modify")],
        ["storage.lustre.metadata_iops"],
        ["storage.lustre.metadata_iops"],
    ),
    (
        "metadata IOPS raised changes in place",
        stack(Fs=("AWS::FSx::FileSystem", METADATA)),
        stack(
            Fs=(
                "AWS::FSx::FileSystem",
                {"LustreConfiguration": {"MetadataConfiguration": {"Mode": "USER_PROVISIONED", "Iops": 24000}}},
            )
        ),
        [("Fs", "modify")],
        [],
        [],
    ),
    (
        "new tags on a placement group replace it (so fmcluster puts none there)",
        stack(Pg=("AWS::EC2::PlacementGroup", {"Strategy": "cluster", "Tags": [{"Key": "a", "Value": "1"}]})),
        stack(Pg=("AWS::EC2::PlacementGroup", {"Strategy": "cluster", "Tags": [{"Key": "a", "Value": "2"}]})),
        [("Pg", "replace")],
        ["s.Pg"],
        [],
    ),
    (
        "a deleted placement group is refused without the flag",
        stack(Pg=("AWS::EC2::PlacementGroup", {"Strategy": "cluster"})),
        {"s": {"Resources": {}}},
        [("Pg", "delete")],
        ["s.Pg"],
        [],
    ),
    (
        "Ref AWS::AccountId against the account itself is no change",
        stack(B=("AWS::S3::Bucket", ACCOUNT_JOIN)),
        stack(B=("AWS::S3::Bucket", {"BucketName": "sagemaker-x-123456789012-us-east-1"})),
        [],
        [],
        [],
    ),
    (
        "a changed fmcluster custom resource is updated in place",
        stack(N=("Custom::NcclEnvironment", {"Environment": "{}"})),
        stack(N=("Custom::NcclEnvironment", {"Environment": '{"NCCL_DEBUG": "INFO"}'})),
        [("N", "modify")],
        [],
        [],
    ),
    (
        "a changed launch template names its node groups",
        stack(
            Lt=("AWS::EC2::LaunchTemplate", {"LaunchTemplateData": {"A": 1}}), Gpu=("AWS::PCS::ComputeNodeGroup", NODES)
        ),
        stack(
            Lt=("AWS::EC2::LaunchTemplate", {"LaunchTemplateData": {"A": 2}}), Gpu=("AWS::PCS::ComputeNodeGroup", NODES)
        ),
        [("Lt", "modify")],
        [],
        [],
    ),
    (
        "a HyperPod group's new instance type is refused without the flag",
        stack(C=("AWS::SageMaker::Cluster", {"InstanceGroups": [HYPERPOD_GROUP]})),
        stack(
            C=("AWS::SageMaker::Cluster", {"InstanceGroups": [{**HYPERPOD_GROUP, "InstanceType": "ml.p5en.48xlarge"}]})
        ),
        [("C", "modify")],
        ["s.C"],
        [],
    ),
    (
        "a HyperPod group's new count is allowed",
        stack(C=("AWS::SageMaker::Cluster", {"InstanceGroups": [HYPERPOD_GROUP]})),
        stack(C=("AWS::SageMaker::Cluster", {"InstanceGroups": [{**HYPERPOD_GROUP, "InstanceCount": 4}]})),
        [("C", "modify")],
        [],
        [],
    ),
]


@pytest.mark.parametrize(
    ("rule", "old", "new", "actions", "refused", "refused_when_allowed"), RULES, ids=[r[0] for r in RULES]
)
def test_update_rules(rule, old, new, actions, refused, refused_when_allowed):
    from fmcluster.update_plan import refusals

    changes = compare(old, new, {"AWS::AccountId": "123456789012"})
    assert [(c.logical_id, c.action) for c in changes] == actions
    assert [problem.path for problem in refusals(changes, old, new)] == refused
    assert [problem.path for problem in refusals(changes, old, new, allow_replacement=True)] == refused_when_allowed


def test_the_rules_sources_say_what_the_table_assumes():
    # cfn-lint schemas: what replaces, and in which order (no replacementStrategy: create the new one first)
    assert {"/properties/DataRepositoryPath", "/properties/FileSystemPath"} <= set(
        schema_create_only("AWS::FSx::DataRepositoryAssociation")
    )
    assert "/properties/Tags" in schema_create_only("AWS::EC2::PlacementGroup")
    assert "/properties/GroupDescription" in schema_create_only("AWS::EC2::SecurityGroup")
    index = json.loads((PROVIDERS / "us-east-1.json").read_text())
    link_schema = (
        files("cfnlint") / "data" / "schemas" / "resources" / f"{index['AWS::FSx::DataRepositoryAssociation']}.json"
    )
    assert "replacementStrategy" not in json.loads(link_schema.read_text())
    # botocore fsx: one link per path; metadata IOPS never lowered, AUTOMATIC refused above its own figure
    path_doc = botocore_doc("fsx", "CreateDataRepositoryAssociationRequest", "FileSystemPath")
    assert "can be linked to only one Amazon S3 bucket" in path_doc
    iops_doc = botocore_doc("fsx", "UpdateFileSystemLustreMetadataConfiguration", "Iops")
    assert "greater than or equal to the current number of Metadata IOPS" in iops_doc
    mode_doc = botocore_doc("fsx", "UpdateFileSystemLustreMetadataConfiguration", "Mode")
    assert "rejects a switch to AUTOMATIC mode" in mode_doc
    # botocore ec2: a placement group is deleted only once its instances are gone
    delete_doc = botocore_model("ec2")["operations"]["DeletePlacementGroup"]["documentation"]
    assert "You must terminate all instances in the placement group" in delete_doc


def test_what_an_update_does_is_said_under_the_change():
    old, new = RULES[12][1], RULES[12][2]  # the launch template row
    assert list(render(compare(old, new), ["s"])) == [
        "s: 0 add, 1 change, 0 replace, 0 delete",
        "  ~ change  Lt (AWS::EC2::LaunchTemplate): LaunchTemplateData",
        "      a new version, read by Gpu: new nodes only: AWS PCS launches new instances from the new version, "
        "running nodes keep theirs until they are replaced (PCS user guide, 'Updating an AWS PCS compute node "
        "group': 'New instances launch with the updated properties')",
    ]
    (nccl,) = compare(RULES[11][1], RULES[11][2])
    assert "running nodes keep the old variables" in nccl.effects[0]
    (hyperpod,) = compare(RULES[13][1], RULES[13][2])
    assert hyperpod.effects[0].startswith("group gpu: InstanceType changes: HyperPod's UpdateCluster can change")
    assert "unconfirmed" in hyperpod.effects[0]


def test_refusal_messages_give_the_safe_path():
    from fmcluster.update_plan import refusals

    link_old, link_new = RULES[0][1], RULES[0][2]
    (link,) = [problem.message for problem in refusals(compare(link_old, link_new), link_old, link_new)]
    assert link.endswith(
        "Keep its old s3_uri, or change it in two deploys: remove the repository at /datasets and deploy (the files "
        "already in the file system stay), then add it back with the new s3_uri and deploy again"
    )
    sg_old, sg_new = RULES[2][1], RULES[2][2]
    (stale,) = [problem.message for problem in refusals(compare(sg_old, sg_new), sg_old, sg_new)]
    assert "while other stacks use it through Fn::GetStackOutput (app Fs)" in stale
    assert stale.endswith("deploy the file under a new name (a new cluster beside this one), move the work, then "
                          "`cdk destroy` the old cluster")  # fmt: skip
    pg_old, pg_new = RULES[9][1], RULES[9][2]
    (deleted,) = [problem.message for problem in refusals(compare(pg_old, pg_new), pg_old, pg_new)]
    assert "first deploy with that compute group's count: 0 so its nodes terminate, then remove it" in deleted


def test_stacks_no_longer_in_the_app_are_left_alone():
    from fmcluster.update_plan import left_alone

    old = {
        "a": {"Resources": {"X": {"Type": "AWS::SNS::Topic"}}},
        "links": {"Resources": {"L": {"Type": "AWS::SNS::Topic"}}},
    }
    new = {"a": old["a"]}
    assert compare(old, new) == []  # cdk deploy never deletes a stack that left the app
    assert left_alone(old, new) == ["links"]
    assert list(render([], ["a", "links"], ["links"])) == [
        "a: no change",
        "links: not in the new app: `cdk deploy` leaves it as it is (`cdk destroy links` deletes it)",
    ]


def test_a_renamed_cluster_is_planned_as_a_new_one_beside_the_old(tmp_path, monkeypatch, capsys):
    # Every stack is named after the cluster (fmcluster.stacks.build), and `cdk deploy` only deploys the stacks of the
    # app it runs: another name builds a second cluster and leaves the first alone. Synthesis is replaced here.
    from fmcluster import cli, update_plan

    built = []

    def fake_synthesize(config, outdir, context):
        built.append(config.name)
        return {
            f"{config.name}-cluster": stack(Cluster=("AWS::PCS::Cluster", {**PCS_CLUSTER, "Name": config.name}))["s"]
        }

    monkeypatch.setattr(update_plan, "synthesize", fake_synthesize)
    files = {}
    for name in ("llm", "llm2"):
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(
            f"name: {name}\nregion: us-east-1\navailability_zone_id: use1-az6\norchestrator: {{type: pcs}}\n"
            "compute: [{name: gpu, instance_type: p5.48xlarge, count: 2}]\n"
        )
    assert cli.main(["plan", str(files["llm2"]), "--previous", str(files["llm"])]) == 0
    assert built == ["llm2"]  # the old file is not even built: nothing of it changes
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"{files['llm2']} builds a new cluster 'llm2' beside 'llm': `cdk deploy` creates its stacks (llm2-cluster)",
        "and changes nothing of the old cluster, whose stacks stay as they are;",
        f"`cdk destroy --all -c config={files['llm']}` deletes them once the work has moved",
    ]


def test_the_modules_examples_hold(monkeypatch):
    import doctest

    from fmcluster import recorded_context, update_plan
    from tests.conftest import REPO

    monkeypatch.chdir(REPO)  # recorded_context's example reads examples/
    assert doctest.testmod(update_plan).failed == 0
    assert doctest.testmod(recorded_context).failed == 0


def test_a_follower_that_keeps_its_custom_name_fails_even_when_allowed():
    # CloudFormation template reference, "CloudFormation resource custom naming": a custom-named resource cannot be
    # replaced. A PCS cluster's Networking is create-only (AWS::PCS::Cluster schema), a security group's
    # GroupDescription too (AWS::EC2::SecurityGroup schema): a reworded group replaces the cluster that reads it,
    # which keeps its Name 'llm', so CloudFormation fails the update whatever --allow-replacement says.
    assert "/properties/Networking" in schema_create_only("AWS::PCS::Cluster")
    assert "/properties/GroupDescription" in schema_create_only("AWS::EC2::SecurityGroup")
    from fmcluster.update_plan import refusals

    cluster = {**PCS_CLUSTER, "Networking": {"SecurityGroupIds": [{"Fn::GetAtt": ["Sg", "GroupId"]}]}}
    old = stack(Sg=("AWS::EC2::SecurityGroup", {"GroupDescription": "a"}), Cluster=("AWS::PCS::Cluster", cluster))
    new = stack(Sg=("AWS::EC2::SecurityGroup", {"GroupDescription": "b"}), Cluster=("AWS::PCS::Cluster", cluster))
    changes = {c.logical_id: c for c in compare(old, new)}
    assert (changes["Cluster"].action, changes["Cluster"].fails) == ("replace", True)
    assert [p.path for p in refusals(list(changes.values()), old, new, allow_replacement=True)] == ["s.Cluster"]
    renamed = stack(
        Sg=("AWS::EC2::SecurityGroup", {"GroupDescription": "b"}),
        Cluster=("AWS::PCS::Cluster", {**cluster, "Name": "x"}),
    )
    (cluster_change,) = [c for c in compare(old, renamed) if c.logical_id == "Cluster"]
    assert (cluster_change.action, cluster_change.fails) == ("replace", False)  # a new name: it can be replaced


def test_a_link_that_follows_its_replaced_file_system_can_be_replaced():
    # cfn-lint schema of AWS::FSx::DataRepositoryAssociation: FileSystemId is create-only, so the link follows a new
    # file system; the new link is on the new file system, so FSx's one-link-per-path rule does not stop it.
    assert "/properties/FileSystemId" in schema_create_only("AWS::FSx::DataRepositoryAssociation")
    link = {"FileSystemId": {"Ref": "Fs"}, "FileSystemPath": "/data", "DataRepositoryPath": "s3://b/data"}
    fsx = {"LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "EfaEnabled": False}}
    efa = {"LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "EfaEnabled": True}}
    old = stack(Fs=("AWS::FSx::FileSystem", fsx), Link=("AWS::FSx::DataRepositoryAssociation", link))
    new = stack(Fs=("AWS::FSx::FileSystem", efa), Link=("AWS::FSx::DataRepositoryAssociation", link))
    assert [(c.logical_id, c.action, c.fails) for c in compare(old, new)] == [
        ("Fs", "replace", False),
        ("Link", "replace", False),
    ]


def test_hyperpod_groups_written_with_fn_if_are_planned_as_risky_not_a_traceback():
    # CloudFormation intrinsic function reference, Fn::If: a property's whole value may be one (a template composed by
    # a library user); the plan cannot read the groups, so it fails safe: --allow-replacement needed.
    from fmcluster.update_plan import refusals

    groups = [{"InstanceGroupName": "g", "InstanceCount": 1}]
    conditional = {"Fn::If": ["Big", [{"InstanceGroupName": "g", "InstanceCount": 2}], groups]}
    old = stack(Hp=("AWS::SageMaker::Cluster", {"ClusterName": "c", "InstanceGroups": groups}))
    new = stack(Hp=("AWS::SageMaker::Cluster", {"ClusterName": "c", "InstanceGroups": conditional}))
    (change,) = compare(old, new)
    assert (change.action, change.risk) == ("modify", "InstanceGroups unread")
    assert [problem.path for problem in refusals([change], old, new)] == ["s.Hp"]


def test_pcs_accounting_changes_in_place_and_the_plan_says_it_is_billed():
    """cfn-lint's AWS::PCS::Cluster schema leaves SlurmConfiguration/Accounting out of createOnlyProperties, botocore
    pcs UpdateClusterSlurmConfigurationRequest has `accounting` (UpdateAccountingRequest.mode), and CloudFormation's
    Accounting Mode says "Update requires: No interruption": turning it on updates the cluster in place."""
    assert "/properties/SlurmConfiguration/Accounting" not in schema_create_only("AWS::PCS::Cluster")
    base = {"Name": "llm", "Size": "SMALL", "SlurmConfiguration": {"ScaleDownIdleTimeInSeconds": 600}}
    on = {**base, "SlurmConfiguration": {**base["SlurmConfiguration"], "Accounting": {"Mode": "STANDARD"}}}
    (change,) = compare(stack(Cluster=("AWS::PCS::Cluster", base)), stack(Cluster=("AWS::PCS::Cluster", on)))
    assert change.action == "modify" and not change.risk
    assert any("starts PCS's accounting charge and can never be turned off again" in e for e in change.effects)


def test_pcs_cluster_slurm_settings_change_in_place_and_the_plan_says_what_enforcing_does():
    """cfn-lint's AWS::PCS::Cluster schema: only Name, Networking and Size are create-only, so a new cluster-level
    setting (AccountingStorageEnforce, which fmcluster adds with the first `users`) updates the cluster in place;
    botocore pcs UpdateClusterSlurmConfigurationRequest has slurmCustomSettings (the API CloudFormation calls)."""
    assert set(schema_create_only("AWS::PCS::Cluster")) == {"/properties/Name", "/properties/Networking",
                                                            "/properties/Size"}  # fmt: skip
    update = botocore.session.get_session().get_service_model("pcs").shape_for("UpdateClusterSlurmConfigurationRequest")
    assert "slurmCustomSettings" in update.members
    hook = [{"ParameterName": name, "ParameterValue": "/opt/fmcluster/node/slurm/gpu-job-map.sh"}
            for name in ("Prolog", "Epilog")]  # fmt: skip
    enforce = [{"ParameterName": "AccountingStorageEnforce", "ParameterValue": "associations,limits,qos"}]
    base = {"Name": "llm", "Size": "SMALL", "SlurmConfiguration": {"SlurmCustomSettings": hook}}
    enforced = {**base, "SlurmConfiguration": {"SlurmCustomSettings": hook + enforce}}
    (change,) = compare(stack(Cluster=("AWS::PCS::Cluster", base)), stack(Cluster=("AWS::PCS::Cluster", enforced)))
    assert (change.action, change.risk, change.failure) == ("modify", "", "")
    in_place, enforcing = change.effects
    assert "change in place" in in_place
    assert enforcing == (
        "AccountingStorageEnforce is turned on (orchestrator.accounting_enforce): from then on a job of a user "
        "without an association is refused at submission, and such users' pending jobs become ineligible (squeue "
        "Reason=InvalidAccount: Slurm src/slurmctld/job_mgr.c `_job_fail_account`); the file's users get theirs from "
        "the head node's timer within 10 minutes"
    )
    # turned off, or another setting changed: in place, nothing said about refused jobs
    for old, new in ((enforced, base), (base, {**base, "SlurmConfiguration": {"SlurmCustomSettings": hook[:1]}})):
        (change,) = compare(stack(Cluster=("AWS::PCS::Cluster", old)), stack(Cluster=("AWS::PCS::Cluster", new)))
        (effect,) = change.effects
        assert "change in place" in effect and "refused" not in effect


def test_pcs_accounting_turned_off_is_refused():
    """PCS user guide, 'Slurm accounting in AWS PCS': "You can't disable accounting on a cluster that has it enabled.
    You must delete the cluster." CloudFormation would try the update in place and fail it."""
    from fmcluster.update_plan import ACCOUNTING_OFF

    base = {"Name": "llm", "Size": "SMALL", "SlurmConfiguration": {"ScaleDownIdleTimeInSeconds": 600}}
    on = {**base, "SlurmConfiguration": {**base["SlurmConfiguration"], "Accounting": {"Mode": "STANDARD"}}}
    (change,) = compare(stack(Cluster=("AWS::PCS::Cluster", on)), stack(Cluster=("AWS::PCS::Cluster", base)))
    assert (change.key, change.failure) == ("orchestrator.accounting", ACCOUNTING_OFF)
    assert ACCOUNTING_OFF.startswith("AWS PCS managed accounting cannot be turned off on a cluster that has it")


def test_new_node_lifecycle_actions_drain_and_replace_the_group_and_are_refused_without_allow_replacement():
    """PCS user guide, node lifecycle actions: "Configuration changes drain and replace existing nodes"; the schema
    leaves NodeLifecycleActions updatable, so CloudFormation updates in place and PCS rolls the group."""
    from fmcluster.update_plan import refusals

    assert "/properties/NodeLifecycleActions" not in schema_create_only("AWS::PCS::ComputeNodeGroup")
    group = {"ClusterId": "c", "Name": "gpu", "InstanceConfigs": [{"InstanceType": "p5.48xlarge"}]}
    actions = {"Stages": {"NodeBootstrapped": [{"Name": "install", "ScriptSource": {"ScriptLocation": "s3://b/k"}}]}}
    old = stack(Gpu=("AWS::PCS::ComputeNodeGroup", group))
    new = stack(Gpu=("AWS::PCS::ComputeNodeGroup", {**group, "NodeLifecycleActions": actions}))
    (change,) = compare(old, new)
    assert change.action == "modify" and change.risk == "NodeLifecycleActions change"
    assert any("drains and replaces every node of the group" in effect for effect in change.effects)
    (refused,) = refusals([change], old, new)
    assert refused.message.startswith("this update may replace running nodes (NodeLifecycleActions change)")


@pytest.mark.parametrize(
    ("policy", "fate", "after"),
    [
        (
            "Retain",
            "CloudFormation leaves it in FSx (DeletionPolicy Retain), with its data and its hourly charge, but no "
            "stack manages it and no node mounts it any more",
            " (then copy what you need and delete the file system in FSx yourself)",
        ),
        ("Delete", "CloudFormation deletes it with its data (DeletionPolicy Delete)", ""),
    ],
)
def test_taking_the_file_system_out_of_a_running_cluster_is_refused_and_says_what_becomes_of_it(policy, fate, after):
    """`storage.lustre: none` over a file that had one: the storage stack no longer holds the file system. What
    CloudFormation does with a removed resource is its DeletionPolicy (CloudFormation user guide, DeletionPolicy
    attribute: Retain keeps the resource "without deleting the resource or its contents")."""
    from fmcluster.update_plan import refusals

    old = {"s": {"Resources": {"Fs": {"Type": "AWS::FSx::FileSystem", "Properties": {}, "DeletionPolicy": policy}}}}
    new: dict[str, dict] = {"s": {"Resources": {}}}
    changes = compare(old, new)
    assert [(change.action, change.protected) for change in changes] == [("delete", True)]
    (problem,) = refusals(changes, old, new)
    assert (problem.path, problem.message) == (
        "storage.lustre",
        f"this update would take the FSx for Lustre file system Fs out of the cluster: {fate}; homes, the imported "
        "training image and checkpoints on /fsx leave every node. Keep storage.lustre as it was, or pass "
        f"--allow-replacement to do it anyway{after}",
    )
    assert refusals(changes, old, new, allow_replacement=True) == []
