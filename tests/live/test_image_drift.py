"""The node image drift check of `validate --live` (fmcluster/live/image_drift.py), against stubbed CloudFormation,
SSM and EC2 responses (shapes checked against botocore's models by tests/live/conftest.py).

What the responses stand for: the deployed `Custom::PcsNodeImage` resource's physical id is the AMI it resolved
(fmcluster/lambdas/pcs_ami/handler.py returns it as PhysicalResourceId); the SSM parameter is the PCS-Ready DLAMI's
public one (PCS user guide), which holds an AMI id only.
"""

from __future__ import annotations

from fmcluster.lambdas.pcs_ami.handler import parameter_name
from fmcluster.live.image_drift import check_drift, node_image_checks
from tests.live.conftest import PCS_BLOCK, QUICKSTART, config_of
from tests.live.responses import described_image, image_resolvers, parameter

RUNNING = "ami-0123456789abcdef0"
TODAY = "ami-0fedcba9876543210"
CLUSTER_STACK = "llm-pretrain-cluster"


def messages(stub, config) -> list[str]:
    return [problem.render("cluster.yaml") for problem in check_drift(config, stub.aws())]


def queue_running(stub, stack: str = CLUSTER_STACK) -> None:
    stub.ok("cloudformation", "DescribeStackResources", image_resolvers(stack, RUNNING), {"StackName": stack})
    old = described_image(RUNNING, "dlami-base-ubuntu2404-pcs-20261001", "2026-10-01T00:00:00.000Z")
    stub.ok("ec2", "DescribeImages", old, {"ImageIds": [RUNNING]})


def test_a_cluster_on_todays_image_has_no_drift(stubs):
    stub = stubs()
    queue_running(stub)
    stub.ok("ssm", "GetParameter", parameter(RUNNING), {"Name": parameter_name("x86_64")})
    assert messages(stub, config_of(PCS_BLOCK)) == []


def test_a_newer_image_is_a_warning_naming_both_and_the_way_to_move(stubs):
    stub = stubs()
    queue_running(stub)
    stub.ok("ssm", "GetParameter", parameter(TODAY), {"Name": parameter_name("x86_64")})
    new = described_image(TODAY, "dlami-base-ubuntu2404-pcs-20261120", "2026-11-20T00:00:00.000Z")
    stub.ok("ec2", "DescribeImages", new, {"ImageIds": [TODAY]})
    assert messages(stub, config_of(PCS_BLOCK)) == [
        "cluster.yaml: orchestrator.image_refresh: warning: AWS publishes a newer PCS-Ready DLAMI for x86_64 than the "
        "one the node groups run: ami-0123456789abcdef0 (dlami-base-ubuntu2404-pcs-20261001, created "
        "2026-10-01T00:00:00.000Z) now ami-0fedcba9876543210 (dlami-base-ubuntu2404-pcs-20261120, created "
        "2026-11-20T00:00:00.000Z); a new orchestrator.image_refresh label moves every node group onto it (fmcluster "
        "plan --previous shows which)"
    ]


def test_a_baked_cluster_is_compared_by_the_image_it_was_built_from(stubs):
    stub = stubs()
    queue_running(stub, "llm-pretrain-node-image")
    stub.ok("ssm", "GetParameter", parameter(TODAY), {"Name": parameter_name("x86_64")})
    stub.ok("ec2", "DescribeImages", {"Images": []}, {"ImageIds": [TODAY]})
    baked = config_of(PCS_BLOCK, orchestrator={"type": "pcs", "node_image": "baked"})
    (message,) = messages(stub, baked)
    assert "than the one the baked image is built from: ami-0123456789abcdef0" in message
    assert "now ? (no name, created ?)" not in message and "now ami-0fedcba9876543210 (no name, created ?)" in message
    assert "label rebuilds the baked image from it and rolls every node group onto it" in message


def test_an_undeployed_cluster_has_nothing_to_compare(stubs):
    stub = stubs()
    stub.error("cloudformation", "DescribeStackResources", "ValidationError",
               "Stack with id llm-pretrain-cluster does not exist", params={"StackName": CLUSTER_STACK})  # fmt: skip
    assert messages(stub, config_of(PCS_BLOCK)) == []


def test_an_image_ec2_no_longer_describes_is_not_checked(stubs):
    stub = stubs()
    stub.ok("cloudformation", "DescribeStackResources", image_resolvers(CLUSTER_STACK, RUNNING),
            {"StackName": CLUSTER_STACK})  # fmt: skip
    stub.ok("ec2", "DescribeImages", {"Images": []}, {"ImageIds": [RUNNING]})
    assert messages(stub, config_of(PCS_BLOCK)) == [
        "cluster.yaml: orchestrator.image_refresh: not checked: ami-0123456789abcdef0, the PCS-Ready DLAMI "
        "llm-pretrain-cluster resolved, is no longer described by EC2 (deregistered?), so whether a newer one is out "
        "is not known"
    ]


def test_only_pcs_clusters_on_the_default_image_are_checked(stubs):
    aws = stubs().aws()
    assert node_image_checks(config_of(QUICKSTART), aws) == []  # HyperPod
    own = config_of(PCS_BLOCK, orchestrator={"type": "pcs", "ami_id": RUNNING})
    assert node_image_checks(own, aws) == []
    assert [check.label for check in node_image_checks(config_of(PCS_BLOCK), aws)] == ["node image drift"]
