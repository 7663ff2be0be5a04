"""The update plan on small templates: which property changes replace a resource comes from CloudFormation's
resource schemas (cfn-lint's `createOnlyProperties`, read here directly) and the FSx API reference for the settings
those schemas leave out."""

from __future__ import annotations

import json
from importlib.resources import files

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
    assert refusal(shrunk, {})[1] == (
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
    path, message = refusal(changes[0], old)
    assert path == "orchestrator.size"
    assert "Set orchestrator.size: small to keep it" in message


@pytest.mark.parametrize(
    "resource_type",
    ["AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::PCS::Cluster", "AWS::SageMaker::Cluster"],
)
def test_stateful_and_cluster_types_are_protected(resource_type):
    (change,) = compare(stack(X=(resource_type, {})), {"s": {"Resources": {}}})
    assert change.protected
    assert refusal(change, {})[1].endswith("pass --allow-replacement to do it anyway")


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
    path, message = refusal(change, old)
    assert (path, message) == (
        "s.Gpu",
        "this update would replace AWS::PCS::ComputeNodeGroup (InstanceConfigs is create-only), and CloudFormation "
        "cannot replace a resource that keeps its custom Name: CloudFormation would fail the update and roll back; "
        "keep the old value or give the resource a new name too",
    )
    (change,) = compare(old, stack(Gpu=("AWS::PCS::ComputeNodeGroup", renamed)))
    assert (change.action, change.fails) == ("replace", False)  # a new name: CloudFormation can replace it
