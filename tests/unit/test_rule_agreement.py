"""The cluster file and the constructs agree on every rule they share (`fmcluster.config.value_rules`).

Each row is one bad value, run through `fmcluster validate`'s path (`parse` of a minimal cluster file) and through
every construct that takes the same value; the message after each side's own location prefix must be the same
text. A rule copied into a construct and then edited on one side only fails here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import aws_cdk as cdk
import pytest

from fmcluster.config import ConfigError, parse
from fmcluster.constructs import (
    ClusterObservability,
    EfaLaunchTemplate,
    HyperPodSlurmCluster,
    LustreMount,
    NcclTuning,
    PcsSlurmCluster,
    TrainingImage,
    TrainingNetwork,
)
from fmcluster.node_scripts import node_lifecycle_actions

pytestmark = pytest.mark.synth

SOURCE = "cluster.yaml"
ACCOUNT = "123456789012"
RESERVATION = "cr-0123456789abcdef0"
PLAN_ARN = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/llm-pretrain"
OTHER_ACCOUNT_ARN = "arn:aws:sagemaker:us-east-1:210987654321:training-plan/llm-pretrain"
DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
BASE: dict = {
    "name": "llm",
    "region": "us-east-1",
    "account": ACCOUNT,
    "availability_zone_id": "use1-az6",
    "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}
GPU = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}

RUNNER, BUNDLE = "s3://assets/run-step.sh", "s3://assets/bundle.zip"


def config_message(data: dict, path: str) -> str:
    """The message `fmcluster validate` prints for `path` of this cluster file."""
    with pytest.raises(ConfigError) as caught:
        parse(data, source=SOURCE)
    prefix = f"{SOURCE}: {path}: "
    found = [line.removeprefix(prefix) for line in caught.value.lines() if line.startswith(prefix)]
    assert len(found) == 1, caught.value.lines()
    return found[0]


def construct_message(build: Callable[[cdk.Stack], object], prefix: str) -> str:
    """The message a construct raises for the prop at `prefix` ("Construct: prop"), built in a fresh stack."""
    stack = cdk.Stack(cdk.App(), "Agreement", env=cdk.Environment(account=ACCOUNT, region="us-east-1"))
    with pytest.raises(ValueError) as caught:
        build(stack)
    found = [line.removeprefix(f"{prefix}: ") for line in str(caught.value).splitlines() if line.startswith(prefix)]
    assert len(found) == 1, str(caught.value)
    return found[0]


def file_with(**changes: object) -> dict:
    data = copy.deepcopy(BASE)
    data.update(copy.deepcopy(changes))
    return data


def hyperpod(**props: object) -> Callable[[cdk.Stack], object]:
    def build(stack: cdk.Stack) -> object:
        network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
        required = {
            "cluster_name": "llm",
            "subnet": network.compute_subnet,
            "security_groups": [network.efa_security_group],
            "compute_groups": [GPU],
        }
        return HyperPodSlurmCluster(stack, "Cluster", **{**required, **props})

    return build


def pcs(**props: object) -> Callable[[cdk.Stack], object]:
    def build(stack: cdk.Stack) -> object:
        network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
        required = {
            "cluster_name": "llm",
            "subnet": network.compute_subnet,
            "security_groups": [network.efa_security_group],
        }
        return PcsSlurmCluster(stack, "Pcs", **{**required, **props})

    return build


def launch_template(**props: object) -> Callable[[cdk.Stack], object]:
    def build(stack: cdk.Stack) -> object:
        network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
        required = {
            "instance_type": "p5.48xlarge",
            "security_groups": [network.efa_security_group],
            "subnet": network.compute_subnet,
        }
        return EfaLaunchTemplate(stack, "Template", **{**required, **props})

    return build


def nccl_tuning(**props: object) -> Callable[[cdk.Stack], object]:
    required = {"cluster_name": "llm", "groups": [("gpu", "p5.48xlarge")]}
    return lambda stack: NcclTuning(stack, "Nccl", **{**required, **props})


UNKNOWN = "p5.48xl"
ON_PLAN = {"capacity": "training-plan", "training_plan_arn": PLAN_ARN}

# (id, cluster file, its path, [(construct builder, "Construct: prop")...])
CASES = [
    (
        "unknown-instance-type",
        file_with(compute=[{**GPU, "instance_type": UNKNOWN}]),
        "compute[0].instance_type",
        [
            (launch_template(instance_type=UNKNOWN), "EfaLaunchTemplate: instance_type"),
            (hyperpod(compute_groups=[{**GPU, "instance_type": UNKNOWN}]),
             "HyperPodSlurmCluster: compute_groups[0].instance_type"),
            (nccl_tuning(groups=[("gpu", UNKNOWN)]), "NcclTuning: groups[0]"),
        ],
    ),
    (
        "reservation-missing",
        file_with(orchestrator={"type": "pcs"}, compute=[{**GPU, "capacity": "odcr"}]),
        "compute[0].reservation_id",
        [(launch_template(capacity="odcr"), "EfaLaunchTemplate: reservation_id")],
    ),
    (
        "reservation-on-demand",
        file_with(orchestrator={"type": "pcs"}, compute=[{**GPU, "reservation_id": RESERVATION}]),
        "compute[0].reservation_id",
        [(launch_template(reservation_id=RESERVATION), "EfaLaunchTemplate: reservation_id")],
    ),
    (
        "reservation-malformed",
        file_with(orchestrator={"type": "pcs"}, compute=[{**GPU, "capacity": "odcr", "reservation_id": "cr-1"}]),
        "compute[0].reservation_id",
        [(launch_template(capacity="odcr", reservation_id="cr-1"), "EfaLaunchTemplate: reservation_id")],
    ),
    (
        "group-names-unique",
        file_with(compute=[GPU, {**GPU, "instance_type": "p4d.24xlarge"}]),
        "compute[1].name",
        [
            (hyperpod(compute_groups=[GPU, {**GPU, "instance_type": "p4d.24xlarge"}]),
             "HyperPodSlurmCluster: compute_groups[1].name"),
            (nccl_tuning(groups=[("gpu", "p5.48xlarge"), ("gpu", "p4d.24xlarge")]), "NcclTuning: groups[1]"),
            (pcs(compute_groups=[GPU, {**GPU, "instance_type": "p4d.24xlarge"}]),
             "PcsSlurmCluster: compute_groups[1].name"),
        ],
    ),
    (
        "training-plan-region",
        file_with(compute=[{**GPU, **ON_PLAN}]),
        "compute[0].training_plan_arn",
        [(hyperpod(compute_groups=[{**GPU, **ON_PLAN}]), "HyperPodSlurmCluster: compute_groups[0].training_plan_arn")],
    ),
    (
        "training-plan-account",
        file_with(compute=[{**GPU, **ON_PLAN, "training_plan_arn": OTHER_ACCOUNT_ARN}]),
        "compute[0].training_plan_arn",
        [
            (hyperpod(compute_groups=[{**GPU, **ON_PLAN, "training_plan_arn": OTHER_ACCOUNT_ARN}]),
             "HyperPodSlurmCluster: compute_groups[0].training_plan_arn"),
        ],
    ),
    (
        "grafana-needs-prometheus",
        file_with(observability={"prometheus": "none", "grafana": "managed"}),
        "observability.grafana",
        [
            (hyperpod(prometheus="none", grafana="managed"), "HyperPodSlurmCluster: grafana"),
            (pcs(prometheus="none", grafana="managed"), "PcsSlurmCluster: grafana"),
            (lambda stack: ClusterObservability(stack, "Observability", cluster_name="llm", prometheus="none",
                                                grafana="managed"), "ClusterObservability: grafana"),
        ],
    ),
    (
        "cluster-name",
        file_with(name="LLM"),
        "name",
        [
            (lambda stack: TrainingImage(stack, "Image", cluster_name="LLM"), "TrainingImage: cluster_name"),
            (nccl_tuning(cluster_name="LLM"), "NcclTuning: cluster_name"),
        ],
    ),
    (   # botocore sagemaker ClusterInstanceType has no ml.r5.* types
        "hyperpod-controller-type",
        file_with(orchestrator={"controller_instance_type": "r5.large"}),
        "orchestrator.controller_instance_type",
        [(hyperpod(controller_instance_type="r5.large"), "HyperPodSlurmCluster: controller_instance_type")],
    ),
    (   # the regional list cdk synth checks (E3644): HyperPod offers ml.p6-b200.48xlarge in us-west-2 only
        "hyperpod-type-not-in-region",
        file_with(compute=[{**GPU, "instance_type": "p6-b200.48xlarge"}]),
        "compute[0].instance_type",
        [(hyperpod(compute_groups=[{**GPU, "instance_type": "p6-b200.48xlarge"}]),
          "HyperPodSlurmCluster: compute_groups[0].instance_type")],
    ),
    (   # botocore pcs ClusterName: 3-40 characters
        "pcs-cluster-name",
        file_with(name="ab", orchestrator={"type": "pcs"}),
        "name",
        [(pcs(cluster_name="ab"), "PcsSlurmCluster: cluster_name")],
    ),
    (   # botocore pcs ComputeNodeGroupName and QueueName: 3-25 characters
        "pcs-group-name",
        file_with(orchestrator={"type": "pcs"}, compute=[{**GPU, "name": "gp"}]),
        "compute[0].name",
        [(pcs(compute_groups=[{**GPU, "name": "gp"}]), "PcsSlurmCluster: compute_groups[0].name")],
    ),
    (
        "pcs-slurm-version",
        file_with(orchestrator={"type": "pcs", "slurm_version": "23.11"}),
        "orchestrator.slurm_version",
        [(pcs(slurm_version="23.11"), "PcsSlurmCluster: slurm_version")],
    ),
    (
        "pcs-ami-id",
        file_with(orchestrator={"type": "pcs", "ami_id": "ubuntu"}),
        "orchestrator.ami_id",
        [(pcs(ami_id="ubuntu"), "PcsSlurmCluster: ami_id")],
    ),
    (
        "pcs-training-plan",
        file_with(orchestrator={"type": "pcs"}, compute=[{**GPU, **ON_PLAN}]),
        "compute[0].capacity",
        [(pcs(compute_groups=[{**GPU, **ON_PLAN}]), "PcsSlurmCluster: compute_groups[0].capacity")],
    ),
    (
        "pcs-deep-health-checks",
        file_with(orchestrator={"type": "pcs"}, compute=[{**GPU, "deep_health_checks": ["InstanceStress"]}]),
        "compute[0].deep_health_checks",
        [(pcs(compute_groups=[{**GPU, "deep_health_checks": ["InstanceStress"]}]),
          "PcsSlurmCluster: compute_groups[0].deep_health_checks")],
    ),
    (   # PCS API reference, Cluster.size: SMALL manages 32 instances; 32 compute nodes + the login node are 33
        "pcs-size-too-small",
        file_with(orchestrator={"type": "pcs", "size": "small", "login_instance_type": "m5.xlarge"},
                  compute=[{**GPU, "count": 32}]),
        "orchestrator.size",
        [(pcs(size="small", login_instance_type="m5.xlarge", compute_groups=[{**GPU, "count": 32}]),
          "PcsSlurmCluster: size")],
    ),
    (   # the metrics head node (m5.xlarge, x86_64) cannot boot the arm64 image of GB200 nodes
        "pcs-one-architecture-per-image",
        file_with(orchestrator={"type": "pcs", "ami_id": "ami-0123456789abcdef0"},
                  compute=[{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 2}]),
        "orchestrator.ami_id",
        [(pcs(ami_id="ami-0123456789abcdef0", prometheus="managed",
              compute_groups=[{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 2}]),
          "PcsSlurmCluster: ami_id")],
    ),
    (   # the PCS sample AMIs' release notes list the NVIDIA driver and CUDA, no AWS Neuron driver
        "pcs-neuron-needs-an-image",
        file_with(orchestrator={"type": "pcs"}, compute=[{**GPU, "instance_type": "trn1.32xlarge"}]),
        "orchestrator.ami_id",
        [(pcs(compute_groups=[{**GPU, "instance_type": "trn1.32xlarge"}]), "PcsSlurmCluster: ami_id")],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("file", "path", "constructs"), [case[1:] for case in CASES], ids=[c[0] for c in CASES])
def test_config_and_constructs_say_the_same(file, path, constructs):
    """A message that names another entry says `compute[i]` in the file and the construct's own prop name."""
    expected = config_message(file, path)
    for build, prefix in constructs:
        entries = prefix.split(": ")[1].split("[")[0]
        assert construct_message(build, prefix) == expected.replace("compute[", f"{entries}[")


@pytest.mark.parametrize(
    ("build", "prefix"),
    [
        (hyperpod(file_system=LustreMount(DNS, "abcdefghi")), "HyperPodSlurmCluster: file_system.mount_name"),
        (lambda stack: node_lifecycle_actions(runner_s3_uri=RUNNER, bundle_s3_uri=BUNDLE, lustre_dns_name=DNS,
                                              lustre_mount_name="abcdefghi"),
         "node_lifecycle_actions: lustre_mount_name"),
    ],
    ids=["hyperpod", "node-bootstrap"],
)  # fmt: skip
def test_lustre_mount_name_is_the_fsx_api_rule(build, prefix):
    """botocore `fsx` LustreFileSystemMountName (and `sagemaker` ClusterMountName): 1-8 of [A-Za-z0-9_-].

    The node bootstrap once allowed 1-16 characters; HyperPod's copy had the API's 8.
    """
    expected = "must be an FSx mount name of 1-8 letters, digits, '_' or '-'; got 'abcdefghi'"
    assert construct_message(build, prefix) == expected


@pytest.mark.parametrize(
    ("build", "prefix"),
    [
        (hyperpod(file_system=LustreMount("nfs.example.com", "abc")), "HyperPodSlurmCluster: file_system.dns_name"),
        (lambda stack: node_lifecycle_actions(runner_s3_uri=RUNNER, bundle_s3_uri=BUNDLE,
                                              lustre_dns_name="nfs.example.com", lustre_mount_name="abc"),
         "node_lifecycle_actions: lustre_dns_name"),
    ],
    ids=["hyperpod", "node-bootstrap"],
)  # fmt: skip
def test_lustre_dns_name_is_the_fsx_api_rule(build, prefix):
    """botocore `fsx` DNSName (and `sagemaker` ClusterDnsName): `(fs|fc)i?-<hex>.<domain>`."""
    assert construct_message(build, prefix) == (
        "must be an FSx DNS name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; got 'nfs.example.com'"
    )
