"""Instance offerings by availability-zone-id, against stubbed DescribeInstanceTypeOfferings responses."""

from __future__ import annotations

from fmcluster.live.instances import check_offerings
from tests.live.conftest import config_of
from tests.live.responses import offerings

PCS_ON_DEMAND = """\
name: b300
region: us-west-2
availability_zone_id: usw2-az2
compute:
  - {name: b300, instance_type: p6-b300.48xlarge, count: 4}
  - {name: dev, instance_type: g5.12xlarge, count: 1}
orchestrator: {type: pcs, login_instance_type: m5.4xlarge}
"""


def ask(zone: str, *types: str) -> dict:
    return {
        "LocationType": "availability-zone-id",
        "Filters": [{"Name": "location", "Values": [zone]}, {"Name": "instance-type", "Values": sorted(types)}],
    }


TYPES = ("p6-b300.48xlarge", "g5.12xlarge", "m5.4xlarge")


def messages(stubs, text, response, types=TYPES, zone="usw2-az2"):
    config = config_of(text)
    stub = stubs(config.region).ok("ec2", "DescribeInstanceTypeOfferings", response, ask(zone, *types))
    return [p.render("cluster.yaml") for p in check_offerings(config, stub.aws())]


def test_every_type_offered(stubs):
    assert messages(stubs, PCS_ON_DEMAND, offerings("usw2-az2", *TYPES)) == []


def test_a_compute_and_a_login_type_not_offered_in_the_zone(stubs):
    assert messages(stubs, PCS_ON_DEMAND, offerings("usw2-az2", "g5.12xlarge")) == [
        "cluster.yaml: compute[0].instance_type: p6-b300.48xlarge is not offered in usw2-az2 (us-west-2): EC2 lists "
        "no offering of it there; choose a type or zone that has it",
        "cluster.yaml: orchestrator.login_instance_type: m5.4xlarge is not offered in usw2-az2 (us-west-2): EC2 "
        "lists no offering of it there; choose a type or zone that has it",
    ]


def test_hyperpod_gaps_are_warnings_and_include_the_controller(stubs):
    text = PCS_ON_DEMAND.replace(
        "orchestrator: {type: pcs, login_instance_type: m5.4xlarge}",
        "orchestrator: {controller_instance_type: m5.8xlarge}",
    )
    text = text.replace("p6-b300.48xlarge", "p5en.48xlarge")
    types = ("p5en.48xlarge", "g5.12xlarge", "m5.8xlarge")
    assert messages(stubs, text, offerings("usw2-az2", "p5en.48xlarge", "g5.12xlarge"), types) == [
        "cluster.yaml: orchestrator.controller_instance_type: warning: m5.8xlarge is not offered in usw2-az2 "
        "(us-west-2): EC2 lists no offering of it there; HyperPod may not be able to place it either"
    ]


def test_reserved_groups_are_left_to_the_capacity_checks_and_the_pcs_head_node_is_checked(stubs):
    """With managed Prometheus and no login node, PCS files get a head node group of their own (m5.xlarge,
    fmcluster.config.models.pcs_head_group): its type is checked like any node's; the reserved gpu group is not."""
    text = """\
name: llm-pretrain
region: us-east-1
availability_zone_id: use1-az6
compute:
  - {name: gpu, instance_type: p5.48xlarge, count: 16, capacity: capacity-block, reservation_id: cr-0123456789abcdef0}
orchestrator: {type: pcs}
"""
    assert messages(stubs, text, offerings("use1-az6"), ("m5.xlarge",), "use1-az6") == [
        "cluster.yaml: observability.prometheus: m5.xlarge is not offered in use1-az6 (us-east-1): EC2 lists no "
        "offering of it there; choose a type or zone that has it"
    ]
