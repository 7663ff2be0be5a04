"""What AWS's own models decide about a cluster file: names and types against botocore's shapes, services and
instance types per region. Expected values come from the sources themselves, read here directly: botocore's
`pcs` (2023-02-10) and `sagemaker` (2017-07-24) models, cfn-lint's providers and instance-type extensions
(`cfnlint/data/schemas`), and, for HyperPod types, what CDK's synth-time engine rejects (checked against the
engine itself in tests/gates/test_service_truth.py)."""

from __future__ import annotations

import copy
import json
from importlib.resources import files

import botocore.loaders
import pytest

from fmcluster.config import ConfigError, parse
from fmcluster.config.api_rules import api_values
from fmcluster.config.regions import REGIONS
from fmcluster.config.service_models import shape_problem
from fmcluster.names import HEAD_GROUP as HEAD_GROUP_NAME

SOURCE = "cluster.yaml"
BASE = {
    "name": "quickstart",
    "region": "us-east-1",
    "availability_zone_id": "use1-az6",
    "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}
PCS_NAME = "(?!pcs_)^[A-Za-z][A-Za-z0-9-]+"
"""botocore pcs ClusterName, ComputeNodeGroupName and QueueName: the pattern (lengths 3-40, 3-25, 3-25)."""
CFN_SCHEMAS = files("cfnlint") / "data" / "schemas"


def sagemaker_types() -> list[str]:
    return botocore.loaders.Loader().load_service_model("sagemaker", "service-2")["shapes"]["ClusterInstanceType"][
        "enum"
    ]


def cfn_regions_with(resource_type: str) -> str:
    """Regions fmcluster knows whose cfn-lint provider list has `resource_type`, as the message lists them."""
    providers = CFN_SCHEMAS / "providers"
    regions = [
        region
        for region in sorted(REGIONS)
        if (providers / f"{region}.json").is_file()
        and resource_type in json.loads((providers / f"{region}.json").read_text())
    ]
    return ", ".join(regions)


def cfn_ec2_regions(instance_type: str) -> str:
    lists = json.loads((CFN_SCHEMAS / "extensions" / "aws_ec2_instance" / "instancetype_enum.json").read_text())
    return ", ".join(r for r in sorted(REGIONS) if instance_type in lists.get(r, {}).get("enum", []))


def data_for(changes: dict) -> dict:
    """BASE with each 'key' or 'section.key' of `changes` set."""
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        section, _, leaf = key.partition(".")
        if leaf:
            data.setdefault(section, {})[leaf] = value
        else:
            data[key] = value
    return data


def lines_for(changes: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(data_for(changes), source=SOURCE)
    return caught.value.lines()


PCS = {"orchestrator.type": "pcs"}
CASES = [
    pytest.param(
        {**PCS, "name": "ab"},
        [f"name: AWS PCS takes 3-40 characters matching {PCS_NAME} (botocore pcs ClusterName); got 'ab'"],
        id="pcs-cluster-name-2-chars",
    ),
    pytest.param(
        {**PCS, "compute": [{"name": "gp", "instance_type": "p5.48xlarge", "count": 2}]},
        [
            f"compute[0].name: AWS PCS takes 3-25 characters matching {PCS_NAME} (botocore pcs "
            "ComputeNodeGroupName); got 'gp'"
        ],
        id="pcs-group-name-2-chars",
    ),
    pytest.param(
        {"orchestrator.controller_instance_type": "r5.large"},
        [
            f"orchestrator.controller_instance_type: SageMaker HyperPod takes one of the {len(sagemaker_types())} "
            "values of botocore sagemaker ClusterInstanceType; got 'ml.r5.large'; did you mean ml.m5.large or "
            "ml.c5.large or ml.r7i.large?"
        ],
        id="hyperpod-controller-type-not-in-the-api",
    ),
    pytest.param(
        {"orchestrator.login_instance_type": "c7i.8xlarge"},
        [
            f"orchestrator.login_instance_type: SageMaker HyperPod takes one of the {len(sagemaker_types())} "
            "values of botocore sagemaker ClusterInstanceType; got 'ml.c7i.8xlarge'; did you mean ml.r7i.8xlarge "
            "or ml.m7i.8xlarge or ml.c7g.8xlarge?"
        ],
        id="hyperpod-login-type-not-in-the-api",
    ),
    pytest.param(
        # cfn-lint's HyperPod list names ml.p5e.48xlarge in no region (FACTS.md, Service truth)
        {"compute": [{"name": "gpu", "instance_type": "p5e.48xlarge", "count": 2}]},
        [
            "compute[0].instance_type: SageMaker HyperPod does not offer ml.p5e.48xlarge in us-east-1 "
            "(CloudFormation's regional list, which cdk synth checks as E3644); no region lists it"
        ],
        id="hyperpod-type-in-no-region",
    ),
    pytest.param(
        # cfn-lint 1.58.0 lists ml.p6-b200.48xlarge in us-east-1, but the engine of aws-cdk-lib 2.275.0 rejects it
        # there: `cdk synth` fails, so validate refuses it too.
        {"compute": [{"name": "gpu", "instance_type": "p6-b200.48xlarge", "count": 2}]},
        [
            "compute[0].instance_type: SageMaker HyperPod does not offer ml.p6-b200.48xlarge in us-east-1 "
            "(CloudFormation's regional list, which cdk synth checks as E3644); regions that offer it: us-west-2"
        ],
        id="hyperpod-type-cdk-rejects-in-region",
    ),
    pytest.param(
        {"region": "af-south-1", "availability_zone_id": "afs1-az1"},
        [
            "orchestrator.type: SageMaker HyperPod (AWS::SageMaker::Cluster) is not offered in af-south-1 "
            f"(CloudFormation's regional resource list); regions that offer it: "
            f"{cfn_regions_with('AWS::SageMaker::Cluster')}"
        ],
        id="region-without-hyperpod",
    ),
    pytest.param(
        {**PCS, "region": "us-west-1", "availability_zone_id": "usw1-az1"},
        [
            "orchestrator.type: AWS PCS (AWS::PCS::Cluster) is not offered in us-west-1 (CloudFormation's regional "
            f"resource list); regions that offer it: {cfn_regions_with('AWS::PCS::Cluster')}"
        ],
        id="region-without-pcs",
    ),
    pytest.param(
        {**PCS, "region": "eu-west-3", "availability_zone_id": "euw3-az1", "observability.grafana": "managed"},
        [
            "observability.grafana: Amazon Managed Grafana (AWS::Grafana::Workspace) is not offered in eu-west-3 "
            "(CloudFormation's regional resource list); regions that offer it: "
            f"{cfn_regions_with('AWS::Grafana::Workspace')}",
            "compute[0].instance_type: EC2 does not offer p5.48xlarge in eu-west-3 (CloudFormation's regional "
            f"list, as cfn-lint checks launch templates: rule E3628); regions that offer it: "
            f"{cfn_ec2_regions('p5.48xlarge')}",
        ],
        id="pcs-type-and-grafana-not-in-region",
    ),
    pytest.param(
        {
            **PCS,
            "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 40}],
            "orchestrator.size": "small",
        },
        [
            "orchestrator.size: 'small' manages 32 instances, fewer than these 41 nodes (with the head node); the "
            "size of a running cluster cannot change (it replaces the cluster with every node group and queue): to "
            "grow past it, deploy the file under a new name with a larger size, move the work, then delete the old "
            "cluster"
        ],
        id="pcs-size-too-small",
    ),
    pytest.param(
        {"orchestrator.size": "medium"},
        ["orchestrator.size: only for orchestrator.type: pcs (HyperPod clusters have no size)"],
        id="size-on-hyperpod",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), CASES)
def test_aws_models_judge_the_file(changes: dict, expected: list[str]) -> None:
    assert lines_for(changes) == [f"{SOURCE}: {line}" for line in expected]


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"name": "ab", "compute": [{"name": "g", "instance_type": "p5.48xlarge", "count": 2}]},
                     id="hyperpod-short-names"),  # sagemaker ClusterName / ClusterInstanceGroupName: 1-63
        pytest.param({**PCS, "name": "abc", "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}]},
                     id="pcs-3-char-names"),
        pytest.param({"orchestrator.controller_instance_type": "m7i.8xlarge"}, id="hyperpod-controller-m7i"),
        pytest.param({"region": "us-west-2", "availability_zone_id": "usw2-az4",
                      "compute": [{"name": "gpu", "instance_type": "p6-b200.48xlarge", "count": 2}]},
                     id="hyperpod-b200-in-us-west-2"),
        pytest.param({**PCS, "compute": [{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 2}]},
                     id="pcs-type-the-ec2-list-does-not-know"),
    ],
)  # fmt: skip
def test_what_the_models_accept_passes(changes: dict) -> None:
    parse(data_for(changes), source=SOURCE)


def test_names_are_judged_whole_not_by_prefix() -> None:
    # botocore's patterns carry no end anchor; fmcluster requires the whole name to match (the fail-safe reading).
    assert shape_problem("pcs", "ComputeNodeGroupName", "fmcluster_head") == (
        f"takes 3-25 characters matching {PCS_NAME} (botocore pcs ComputeNodeGroupName); got 'fmcluster_head'"
    )
    assert shape_problem("pcs", "ComputeNodeGroupName", "pcs_head") is not None  # the (?!pcs_) look-ahead
    assert shape_problem("pcs", "ComputeNodeGroupName", HEAD_GROUP_NAME) is None


def test_derived_names_reach_the_api_and_pass() -> None:
    config = parse({**BASE, "orchestrator": {"type": "pcs"}}, source=SOURCE)
    values = list(api_values(config.name, config.orchestrator, list(enumerate(config.compute)), config.observability))
    assert [(v.path, v.shape, v.value) for v in values] == [
        ("name", "ClusterName", "quickstart"),
        ("compute[0].name", "ComputeNodeGroupName", "gpu"),
        ("compute[0].name", "QueueName", "gpu"),
        ("observability.prometheus", "ComputeNodeGroupName", "head"),  # the head node's own group, no login node
    ]
    assert [v.problem() for v in values] == [None] * 4


@pytest.mark.parametrize(
    ("nodes", "size"),
    # PCS API reference, Cluster.size: SMALL 32, MEDIUM 512, LARGE 2,048 instances; the default leaves room to double
    [(15, "small"), (16, "medium"), (255, "medium"), (256, "large"), (2047, "large")],
)
def test_the_default_pcs_size_leaves_room_to_double(nodes: int, size: str) -> None:
    compute = [{"name": "gpu", "instance_type": "p5.48xlarge", "count": nodes}]
    config = parse({**BASE, "orchestrator": {"type": "pcs"}, "compute": compute}, source=SOURCE)
    assert config.pcs_size == size  # nodes + 1 head node
