"""Scaling compute must never replace stateful resources (file system, buckets, keys, VPC, subnets, logs).

The example is synthesized a second time with only `compute` changed (counts up, a group added); every
stateful resource must keep its logical id and the value of each creation-only property, read from the
CloudFormation resource schemas that cfn-lint ships (the source of truth for what forces a replacement).
"""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from fmcluster.config import load, parse
from tests.conftest import REPO, synthesize

STATEFUL_TYPES = (
    "AWS::FSx::FileSystem",
    "AWS::FSx::DataRepositoryAssociation",
    "AWS::S3::Bucket",
    "AWS::KMS::Key",
    "AWS::ECR::Repository",
    "AWS::Logs::LogGroup",
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
)
EXAMPLES = ("quickstart", "p5-capacity-block")


def create_only_pointers(resource_type: str, region: str) -> list[str]:
    schemas = files("cfnlint") / "data" / "schemas"
    index = json.loads((schemas / "providers" / f"{region}.json").read_text())
    schema = json.loads((schemas / "resources" / f"{index[resource_type]}.json").read_text())
    return schema.get("createOnlyProperties", [])


def value_at(properties: dict, pointer: str) -> object:
    """The value a JSON pointer like /properties/LustreConfiguration/DeploymentType names ('*' maps lists)."""
    return _walk({"properties": properties}, pointer.strip("/").split("/"))


def _walk(node: object, parts: list[str]) -> object:
    if not parts:
        return node
    if parts[0] == "*":
        return [_walk(item, parts[1:]) for item in node or []] if isinstance(node, list) else None
    return _walk(node.get(parts[0]), parts[1:]) if isinstance(node, dict) else None


def stateful(templates: dict[str, dict]) -> dict[tuple[str, str], dict]:
    return {
        (stack, logical_id): resource
        for stack, template in templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in STATEFUL_TYPES
    }


@pytest.mark.parametrize("example", EXAMPLES)
def test_scaling_compute_keeps_stateful_resources(synthesized, example, tmp_path):
    path = REPO / "examples" / f"{example}.yaml"
    config = load(path)
    data = config.model_dump(by_alias=True, exclude_none=True)
    data["compute"] = [{**group, "count": group["count"] * 2 + 1} for group in data["compute"]]
    data["compute"].append({**data["compute"][0], "name": "extra", "count": 3})
    scaled = synthesize(path, tmp_path, parse(data))
    assert scaled.nag == []

    before, after = stateful(synthesized[example].templates), stateful(scaled.templates)
    assert before, "the example has no stateful resources"
    assert sorted(after) == sorted(before)
    for key, resource in before.items():
        assert after[key]["Type"] == resource["Type"]
        for pointer in create_only_pointers(resource["Type"], config.region):
            old = value_at(resource.get("Properties", {}), pointer)
            assert value_at(after[key].get("Properties", {}), pointer) == old, (key, pointer)


def test_value_at_reads_nested_and_listed_properties():
    properties = {"LustreConfiguration": {"DeploymentType": "PERSISTENT_2"}, "Tags": [{"Key": "a"}, {"Key": "b"}]}
    assert value_at(properties, "/properties/LustreConfiguration/DeploymentType") == "PERSISTENT_2"
    assert value_at(properties, "/properties/Tags/*/Key") == ["a", "b"]
    assert value_at(properties, "/properties/Missing/Deeper") is None
    assert "/properties/KmsKeyId" in create_only_pointers("AWS::FSx::FileSystem", "us-east-1")
