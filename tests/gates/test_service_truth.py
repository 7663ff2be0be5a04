"""Every name and type the synthesized examples send to AWS PCS and SageMaker HyperPod, judged by the services' own
models: botocore's shapes (pcs 2023-02-10, sagemaker 2017-07-24) and the regional instance-type lists (HyperPod's
as `cdk synth` checks them, EC2's as cfn-lint checks launch templates). The walk reads the templates, not the cluster
file, so a construct that derives a new name or sends a new type cannot slip past the validate-time rules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fmcluster.config import load
from fmcluster.config.service_models import instance_type_problem, shape_problem
from tests.conftest import EXAMPLES

SHAPES = {
    # CloudFormation property path (list items as *) -> (botocore service, shape)
    "AWS::PCS::Cluster": {"Name": ("pcs", "ClusterName"), "Size": ("pcs", "Size")},
    "AWS::PCS::ComputeNodeGroup": {
        "Name": ("pcs", "ComputeNodeGroupName"),
        "PurchaseOption": ("pcs", "PurchaseOption"),
    },
    "AWS::PCS::Queue": {"Name": ("pcs", "QueueName")},
    "AWS::SageMaker::Cluster": {
        "ClusterName": ("sagemaker", "ClusterName"),
        "NodeRecovery": ("sagemaker", "ClusterNodeRecovery"),
        "InstanceGroups/*/InstanceGroupName": ("sagemaker", "ClusterInstanceGroupName"),
        "InstanceGroups/*/InstanceType": ("sagemaker", "ClusterInstanceType"),
        "InstanceGroups/*/SlurmConfig/NodeType": ("sagemaker", "ClusterSlurmNodeType"),
        "InstanceGroups/*/SlurmConfig/PartitionNames/*": ("sagemaker", "ClusterPartitionName"),
        "InstanceGroups/*/OnStartDeepHealthChecks/*": ("sagemaker", "DeepHealthCheckType"),
        "InstanceGroups/*/TrainingPlanArn": ("sagemaker", "TrainingPlanArn"),
    },
}
REGIONAL = {
    "AWS::SageMaker::Cluster": ("InstanceGroups/*/InstanceType", "hyperpod"),
    "AWS::EC2::LaunchTemplate": ("LaunchTemplateData/InstanceType", "ec2"),
}


def values_at(node: object, parts: list[str]) -> Iterator[object]:
    if not parts:
        yield node
    elif parts[0] == "*" and isinstance(node, list):
        for item in node:
            yield from values_at(item, parts[1:])
    elif isinstance(node, dict) and parts[0] in node:
        yield from values_at(node[parts[0]], parts[1:])


def resources(example) -> Iterator[tuple[str, str, dict]]:
    for stack, template in example.templates.items():
        for logical_id, resource in template["Resources"].items():
            yield f"{stack}/{logical_id}", resource["Type"], resource.get("Properties", {})


@pytest.mark.parametrize("example", [path.stem for path in EXAMPLES])
def test_every_pcs_and_sagemaker_value_fits_its_botocore_shape(synthesized, example):
    problems, judged = [], 0
    for where, kind, properties in resources(synthesized[example]):
        for path, (service, shape) in SHAPES.get(kind, {}).items():
            for value in values_at(properties, path.split("/")):
                judged += 1
                if isinstance(value, str) and (problem := shape_problem(service, shape, value)):
                    problems.append(f"{where} {path}: {problem}")
    assert problems == []
    assert judged > 0


@pytest.mark.parametrize("example", [path.stem for path in EXAMPLES])
def test_every_instance_type_is_offered_in_the_region(synthesized, example):
    region = load(synthesized[example].path).region
    problems, judged = [], 0
    for where, kind, properties in resources(synthesized[example]):
        if kind in REGIONAL:
            path, list_kind = REGIONAL[kind]
            for value in values_at(properties, path.split("/")):
                judged += 1
                if problem := instance_type_problem(list_kind, region, value):
                    problems.append(f"{where}: {problem}")
    assert problems == []
    assert judged > 0


def test_the_walk_finds_a_bad_name():
    bad = {"Name": "fmcluster_head", "InstanceConfigs": []}
    (value,) = values_at(bad, ["Name"])
    assert shape_problem(*SHAPES["AWS::PCS::ComputeNodeGroup"]["Name"], value) is not None
