"""Every example's synthesized stacks carry the outputs a user needs next, as fmcluster/outputs.py declares them
(`fmcluster info` reads them back by these keys), with descriptions for people, and change no resource's logical id
(outputs are not resources)."""

from __future__ import annotations

import json
import re

import pytest

from fmcluster.outputs import OUTPUTS, SELF_HOSTED_GRAFANA_URL, describe
from tests.conftest import EXAMPLES

EXAMPLE_IDS = [path.stem for path in EXAMPLES]
ALWAYS = {
    "network": {"VpcId", "ComputeSubnetId"},
    "mirror": {"MirrorUri"},
    "storage": {"DataBucket", "CheckpointsBucket", "FileSystemId", "FileSystemDnsName", "FileSystemMountName"},
    "data-links": {"DataLinks"},
    "image": {"ImageRepositoryUri", "ImageUri", "ImageParameter"},
    "node-image": {"NodeImages"},
    "cluster": {"Orchestrator", "ClusterName", "ClusterId", "ClusterArn"},
    "observability": {"AlarmTopicArn"},
}
HYPERPOD_ARN = re.compile(r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}")
"""botocore sagemaker ClusterArn's pattern: the id is what follows the one '/'."""


CDK_REFERENCE = "PublishOutput"
"""CDK's own outputs for weak cross-stack references (cdk.json `@aws-cdk/core:defaultCrossStackReferences: weak`),
read by the consumer stack's Fn::GetStackOutput: not for people, no description."""


def outputs_of(example, part: str) -> dict:
    """The stack's outputs for people (CDK's cross-stack references left out)."""
    name = f"{example.config.name}-{part}"
    outputs = example.templates[name].get("Outputs", {})
    return {key: output for key, output in outputs.items() if not key.startswith(CDK_REFERENCE)}


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_each_stack_has_its_declared_outputs_with_their_descriptions(synthesized, example):
    built = synthesized[example]
    for name in built.templates:
        part = name.removeprefix(f"{built.config.name}-")
        outputs = outputs_of(built, part)
        assert ALWAYS[part] <= set(outputs), f"{name}: missing {ALWAYS[part] - set(outputs)}"
        for key, output in outputs.items():
            assert output["Description"] == describe(part, key), f"{name} {key}"
            assert output["Value"] not in ("", None), f"{name} {key}"


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_the_cluster_stack_names_the_head_node_group_and_how_to_find_its_node(synthesized, example):
    built = synthesized[example]
    config = built.config
    outputs = outputs_of(built, "cluster")
    assert outputs["Orchestrator"]["Value"] == config.orchestrator.type
    assert outputs["ClusterName"]["Value"] == config.name
    if config.orchestrator.type == "hyperpod-slurm":
        assert outputs["HeadNodeGroup"]["Value"] == "controller"
        assert "HeadNodeGroupId" not in outputs  # HyperPod's nodes are found by ListClusterNodes
        arn = outputs["ClusterArn"]["Value"]
        assert outputs["ClusterId"]["Value"] == {"Fn::Select": [1, {"Fn::Split": ["/", arn]}]}
        example_arn = "arn:aws:sagemaker:us-east-1:123456789012:cluster/a1b2c3d4e5f6"
        assert HYPERPOD_ARN.fullmatch(example_arn) and example_arn.split("/")[1] == "a1b2c3d4e5f6"
    else:
        head = outputs["HeadNodeGroup"]["Value"] if "HeadNodeGroup" in outputs else None
        assert head in ("login", "head", None)  # fmcluster.config.models LOGIN_GROUP, HEAD_GROUP_NAME
        if head is not None:
            group_id = outputs["HeadNodeGroupId"]["Value"]
            assert list(group_id) == ["Fn::GetAtt"] and group_id["Fn::GetAtt"][1] == "Id"
            resources = built.templates[f"{config.name}-cluster"]["Resources"]
            assert resources[group_id["Fn::GetAtt"][0]]["Properties"]["Name"] == head


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_grafana_url_follows_the_observability_choice(synthesized, example):
    built = synthesized[example]
    observability = built.config.observability
    grafana = outputs_of(built, "observability").get("GrafanaUrl", {}).get("Value")
    if observability.prometheus == "none" or observability.grafana == "none":
        assert grafana is None
    elif observability.grafana == "self-hosted":
        assert grafana == SELF_HOSTED_GRAFANA_URL
    else:
        assert "Fn::Join" in json.dumps(grafana) and "Endpoint" in json.dumps(grafana)


def test_every_declared_output_appears_in_some_example(synthesized):
    seen = {
        (name.removeprefix(f"{built.config.name}-"), key)
        for built in synthesized.values()
        for name, template in built.templates.items()
        for key in template.get("Outputs", {})
    }
    declared = {(part, output.key) for part, outputs in OUTPUTS.items() for output in outputs}
    assert declared - seen == set()
