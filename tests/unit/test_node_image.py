"""Baked node images (`orchestrator.node_image: baked`): the node-image stack, what the node groups run, the plan.

One baked file with an x86_64 and an arm64 group is synthesized for the module, through cdk-nag, cfn-lint and
checkov (examples/pcs-own-vpc.yaml, baked too, gets every gate of the examples, the Control Tower rules among
them). Expected values come from: cfn-lint's AWS::ImageBuilder::* and AWS::PCS::ComputeNodeGroup schemas (what is
create-only), the EC2 Image Builder user guide ("Use documents in EC2 Image Builder": the component document's
schema, kept below as a JSON schema), and `run-step.sh`'s own usage line (what the component runs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cfnlint.jsonschema import StandardValidator

from fmcluster import names, node_files
from fmcluster.config import parse
from fmcluster.config.service_models import create_only_properties
from fmcluster.update_plan import compare, refusals, stale_readers
from tests.conftest import synthesize
from tests.node.test_scripts import NODE_DIR
from tests.scanners import checkov_findings
from tests.support import of_type

EXAMPLE = Path(__file__).parents[2] / "examples" / "pcs-cpu-and-gpu.yaml"
NODE_IMAGE_STACK = "pcs-mixed-node-image"
CLUSTER_STACK = "pcs-mixed-cluster"
DOCUMENT_SCHEMA = {
    "type": "object",
    "required": ["schemaVersion", "phases"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "schemaVersion": {"const": "1.0"},
        "phases": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "steps"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string"},
                    "steps": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name", "action", "inputs"],
                            "additionalProperties": False,
                            "properties": {
                                "name": {"type": "string"},
                                "action": {"type": "string"},
                                "timeoutSeconds": {"type": "integer", "minimum": 1},
                                "onFailure": {"enum": ["Abort", "Continue"]},
                                "maxAttempts": {"type": "integer"},
                                "inputs": {"type": ["object", "array"]},
                            },
                        },
                    },
                },
            },
        },
    },
}
"""The component document's schema as the EC2 Image Builder user guide states it ("Document schema and
definitions": name, description, schemaVersion 1.0, phases; a phase's name and steps; a step's name, action,
timeoutSeconds, onFailure Abort|Continue, maxAttempts, inputs), awsdocs/ec2-image-builder-user-guide
doc_source/image-builder-application-documents.md. No machine-readable schema of AWSTOE's was found to check against;
cfn-lint's JSON-schema validator checks it."""
IMAGE_PHASES = ("build", "validate", "test")
"""The phases Image Builder runs (same page, "Document sections")."""

pytestmark = pytest.mark.synth


def baked_file(**orchestrator) -> dict:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["compute"].append({"name": "arm", "instance_type": "c7g.4xlarge", "count": 2})  # a Graviton group: arm64
    raw["orchestrator"].update({"node_image": "baked", **orchestrator})
    return raw


def baked_config(**orchestrator):
    return parse(baked_file(**orchestrator), source="baked.yaml")


@pytest.fixture(scope="module")
def baked(tmp_path_factory):
    """Without the Control Tower rules: tests/gates/test_templates.py runs them on examples/pcs-own-vpc.yaml, whose
    node image is baked too (the same construct)."""
    return synthesize(None, tmp_path_factory.mktemp("baked"), baked_config(), guard=False)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """The same file with `node_image_version` set: an explicit rebuild (no Control Tower rules: compared only)."""
    return synthesize(None, tmp_path_factory.mktemp("rebuilt"), baked_config(node_image_version="2"), guard=False)


@pytest.mark.real_tools  # checkov
def test_the_baked_file_passes_every_gate(baked):
    assert baked.nag == []
    assert {name: found for name, found in baked.lint().items() if found} == {}
    failed, passed = checkov_findings([baked.template_file(NODE_IMAGE_STACK), baked.template_file(CLUSTER_STACK)])
    assert failed == [] and passed > 0


def test_one_image_per_architecture_from_the_pcs_ready_dlami_resolved_once(baked):
    template = baked.templates[NODE_IMAGE_STACK]
    images = of_type(template, "AWS::ImageBuilder::Image")
    assert sorted(name[: -len("1ED1E44B")] for name in images) == ["ImageArm64Image", "ImageX8664Image"]
    recipes = of_type(template, "AWS::ImageBuilder::ImageRecipe")
    parents = {
        recipe["Properties"]["ParentImage"]["Fn::GetAtt"][0]: recipe["Properties"]["Name"]
        for recipe in recipes.values()
    }
    resolvers = of_type(template, "Custom::PcsNodeImage")
    assert set(parents) == set(resolvers) == {"BaseImageX8664", "BaseImageArm64"}
    assert {resolver["Properties"]["Architecture"] for resolver in resolvers.values()} == {"x86_64", "arm64"}
    infrastructure = {
        config["Properties"]["Name"]: config["Properties"]["InstanceTypes"]
        for config in of_type(template, "AWS::ImageBuilder::InfrastructureConfiguration").values()
    }
    assert infrastructure == {
        "pcs-mixed-node-x86-64-slurm2605": ["c6i.4xlarge", "m6i.4xlarge"],
        "pcs-mixed-node-arm64-slurm2605": ["c7g.4xlarge", "m7g.4xlarge"],
    }
    for image in images.values():
        assert image["Properties"]["ImageTestsConfiguration"] == {"ImageTestsEnabled": True, "TimeoutMinutes": 60}
    joined = template["Outputs"]["NodeImages"]["Value"]["Fn::Join"]
    assert joined[0] == ", "
    assert [
        [part if isinstance(part, str) else part["Fn::GetAtt"] for part in pair["Fn::Join"][1]] for pair in joined[1]
    ] == [
        ["arm64=", [next(name for name in images if name.startswith("ImageArm64")), "ImageId"]],
        ["x86_64=", [next(name for name in images if name.startswith("ImageX8664")), "ImageId"]],
    ]


def test_every_node_group_runs_the_image_of_its_architecture_and_is_tagged_with_its_digest(baked):
    outputs = baked.templates[NODE_IMAGE_STACK]["Outputs"]
    by_output = {
        name: output["Value"]["Fn::GetAtt"][0] for name, output in outputs.items() if name.startswith("PublishOutput")
    }
    recipes = of_type(baked.templates[NODE_IMAGE_STACK], "AWS::ImageBuilder::ImageRecipe")
    digests = {name.split("Recipe")[0]: props["Properties"]["Name"][-12:] for name, props in recipes.items()}
    groups = of_type(baked.templates[CLUSTER_STACK], "AWS::PCS::ComputeNodeGroup")
    architectures = {"gpu": "X8664", "cpu": "X8664", "login": "X8664", "arm": "Arm64"}
    assert {props["Properties"]["Name"] for props in groups.values()} == set(architectures)
    for props in groups.values():
        properties = props["Properties"]
        reference = properties["AmiId"]["Fn::GetStackOutput"]
        assert reference["StackName"] == NODE_IMAGE_STACK
        image = by_output[reference["OutputName"]]
        arch = architectures[properties["Name"]]
        assert image.startswith(f"Image{arch}Image")
        assert properties["Tags"][names.NODE_IMAGE_TAG] == digests[f"Image{arch}"]
    assert of_type(baked.templates[CLUSTER_STACK], "Custom::PcsNodeImage") == {}  # nothing resolved there any more


def resolved_document(component: dict) -> dict:
    """The component's Data with its deploy-time parts (the mirror's URI) written as <mirror>."""
    data = component["Properties"]["Data"]
    if isinstance(data, dict):
        data = "".join(part if isinstance(part, str) else "<mirror>" for part in data["Fn::Join"][1])
    return yaml.safe_load(data)


def test_the_component_runs_the_node_runner_bake_and_the_image_check_in_the_documented_schema(baked):
    template = baked.templates[NODE_IMAGE_STACK]
    for component in of_type(template, "AWS::ImageBuilder::Component").values():
        document = resolved_document(component)
        assert [error.message for error in StandardValidator(DOCUMENT_SCHEMA).iter_errors(document)] == []
        assert [phase["name"] for phase in document["phases"]] == list(IMAGE_PHASES)
        (bake,) = document["phases"][0]["steps"]
        commands = bake["inputs"]["commands"]
        fetch, run = commands[2].split(), commands[3].split()
        assert fetch[:3] == ["aws", "s3", "cp"] and fetch[-1] == "/opt/fmcluster-build/run-step.sh"
        # run-step.sh's usage: bake SOURCE [--region REGION] [--slurm-version VERSION] [--mirror S3_URI]
        assert (
            "run-step.sh bake SOURCE [--region REGION] [--slurm-version VERSION] [--mirror S3_URI]"
            in (NODE_DIR / "run-step.sh").read_text()
        )
        assert run[:3] == ["bash", "/opt/fmcluster-build/run-step.sh", "bake"]
        assert run[4:] == ["--region", "us-east-1", "--slurm-version", "26.05", "--mirror", "<mirror>"]
        assert run[3].startswith("s3://cdk-") and run[3].endswith(".zip")
        for phase in document["phases"][1:]:
            (check,) = phase["steps"]
            assert check["inputs"]["commands"] == ["/opt/fmcluster/node/image-check.sh --slurm-version 26.05"]


def test_the_image_bundle_holds_the_runner_the_helpers_and_the_image_steps_scripts_only():
    tree = node_files.image_tree()
    assert set(tree) == {
        "manifest", "node/lib.sh", "node/mirror.sh", "node/run-step.sh", "node/image-check.sh",
        "node/package-updates.sh", "node/enroot-pyxis.sh",
    }  # fmt: skip
    assert tree["manifest"][0].decode().splitlines()[0] == "0755 node/enroot-pyxis.sh"


def test_a_new_node_image_version_rebuilds_the_images_and_the_plan_names_every_node_group_it_moves(baked, rebuilt):
    """Recipe Name and Components and Component Name are create-only (cfn-lint schemas), and so are the Image's
    ImageRecipeArn: a new digest replaces component, recipe and image; the node groups change in place (their tag),
    so no stack keeps reading the old image through Fn::GetStackOutput."""
    for kind, pointer in (
        ("AWS::ImageBuilder::Component", "/properties/Name"),
        ("AWS::ImageBuilder::ImageRecipe", "/properties/Name"),
        ("AWS::ImageBuilder::Image", "/properties/ImageRecipeArn"),
    ):
        assert pointer in create_only_properties(kind)
    assert "/properties/AmiId" not in create_only_properties("AWS::PCS::ComputeNodeGroup")
    assert "/properties/Tags" not in create_only_properties("AWS::PCS::ComputeNodeGroup")
    changes = compare(baked.templates, rebuilt.templates)
    replaced = sorted(
        change.resource_type for change in changes if change.stack == NODE_IMAGE_STACK and change.action == "replace"
    )
    assert replaced == sorted(
        ["AWS::ImageBuilder::Component", "AWS::ImageBuilder::ImageRecipe", "AWS::ImageBuilder::Image"] * 2
    )
    moved = [change for change in changes if change.resource_type == "AWS::PCS::ComputeNodeGroup"]
    assert len(moved) == 4
    for change in moved:
        assert change.action == "modify" and change.risk == f"Tags/{names.NODE_IMAGE_TAG} change"
        assert any("a new baked node image" in effect for effect in change.effects)
    assert stale_readers(changes, rebuilt.templates) == []
    refused = refusals(changes, baked.templates, rebuilt.templates)
    assert len([problem for problem in refused if "may replace running nodes" in problem.message]) == 4
    # nothing else moves: the launch templates, queues and the cluster stay as they are
    assert {change.resource_type for change in changes if change.stack == CLUSTER_STACK} == {
        "AWS::PCS::ComputeNodeGroup"
    }


def test_an_unrelated_change_leaves_the_images_alone(baked, tmp_path):
    raw = baked_file()
    raw["compute"][1]["count"] = 9
    other = synthesize(None, tmp_path, parse(raw, source="baked.yaml"), guard=False)
    changes = compare(baked.templates, other.templates)
    assert [change for change in changes if change.stack == NODE_IMAGE_STACK] == []


def test_with_boot_there_is_no_node_image_stack():
    import aws_cdk as cdk

    from fmcluster.stacks import build

    raw = yaml.safe_load(EXAMPLE.read_text())
    stacks = build(cdk.App(), parse(raw, source="boot.yaml"))
    assert stacks.node_image is None
    assert not [stack for stack in stacks.all() if stack.stack_name.endswith(names.NODE_IMAGE_STACK)]


def test_a_mirror_that_moves_gives_the_image_new_names():
    """The component's document carries the mirror's URI, a deploy-time value: where the mirror lives (its stack) is
    part of the digest, so a moved mirror makes a new component and recipe under new names instead of replacing them
    under the old ones, which CloudFormation fails (tests/unit/test_update_plan.py, Image Builder names)."""
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    from fmcluster.constructs.node_image import BakedNodeImage

    stack = cdk.Stack(cdk.App(), "s", env=cdk.Environment(account="111122223333", region="us-east-1"))
    subnet = ec2.Subnet.from_subnet_attributes(stack, "Subnet", subnet_id="subnet-1", availability_zone="us-east-1a")
    group = ec2.SecurityGroup.from_security_group_id(stack, "Sg", "sg-1")
    mirror = cdk.Token.as_string(cdk.Fn.get_att("Mirror", "Uri"))

    def digest(construct_id: str, **where) -> str:
        common = {"name": "llm", "architecture": "x86_64", "parent_image": "ami-0123456789abcdef0"}
        image = BakedNodeImage(
            stack, construct_id, **common, slurm_version="26.05", subnet=subnet, security_groups=[group], **where
        )
        return image.digest

    in_storage = digest("A", mirror=mirror, mirror_home="llm-storage")
    assert digest("B", mirror=mirror, mirror_home="llm-storage") == in_storage
    assert digest("C", mirror=mirror, mirror_home="llm-mirror") != in_storage
    assert digest("D", mirror="s3://b/fmcluster-mirror") != digest("E", mirror="s3://c/fmcluster-mirror")
    with pytest.raises(ValueError) as refused:
        digest("F", mirror=mirror)
    assert str(refused.value) == (
        "mirror is a deploy-time value: give mirror_home (where it lives, e.g. the mirror's stack name), so "
        "the image's component and recipe names change with the mirror (their document carries it; Image "
        "Builder refuses a new document under an old name and version)"
    )


@pytest.fixture(scope="module")
def booted(tmp_path_factory):
    """The baked file with `node_image: boot`, nothing else changed (compared only: no Control Tower rules)."""
    raw = baked_file()
    raw["orchestrator"]["node_image"] = "boot"
    return synthesize(None, tmp_path_factory.mktemp("booted"), parse(raw, source="boot.yaml"), guard=False)


def test_switching_node_image_moves_the_mirror_and_the_plan_says_it_with_the_new_image(booted, baked):
    """boot -> baked: the mirror leaves the storage stack for its own (fmcluster.stacks.mirror.mirror_has_own_stack)
    in the same update that gives every node group the baked image, so its new URI replaces no node that the image
    does not replace anyway; the plan says both. baked -> boot: the mirror returns to the storage stack, and the mirror
    and node-image stacks are left alone (`cdk deploy` deletes no stack)."""
    from fmcluster.update_plan import left_alone

    mirror_stack, storage_stack = "pcs-mixed-mirror", "pcs-mixed-storage"
    assert mirror_stack not in booted.templates and mirror_stack in baked.templates
    changes = compare(booted.templates, baked.templates)
    mirrors = sorted((c.stack, c.action, c.logical_id) for c in changes if c.resource_type == "Custom::ArtifactMirror")
    assert mirrors == [(mirror_stack, "add", "Mirror224E8F46"), (storage_stack, "delete", "Mirror224E8F46")]
    (moved,) = [c for c in changes if c.resource_type == "Custom::ArtifactMirror" and c.action == "delete"]
    (effect,) = moved.effects
    assert "The mirror moves with orchestrator.node_image" in effect and "the move replaces no node more" in effect
    added = {c.logical_id for c in changes if c.stack == mirror_stack}
    assert {"Mirror224E8F46", "Bucket83908E77", "Key961B73FD", "MirrorReadPolicy307359AF"} <= added
    assert {c.action for c in changes if c.stack == mirror_stack} == {"add"}
    groups = [c for c in changes if c.resource_type == "AWS::PCS::ComputeNodeGroup"]
    assert len(groups) == 4
    for group in groups:  # the image and the lifecycle actions' mirror URI, in one update of each group
        assert group.action == "modify" and "AmiId" in group.properties
    back = compare(baked.templates, booted.templates)
    (returned,) = [c for c in back if c.resource_type == "Custom::ArtifactMirror"]
    assert (returned.stack, returned.action) == (storage_stack, "add")
    assert sorted(left_alone(baked.templates, booted.templates)) == ["pcs-mixed-mirror", "pcs-mixed-node-image"]
