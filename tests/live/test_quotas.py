"""Service Quotas checks (names and codes as the Service Quotas console shows them; see responses.py)."""

from __future__ import annotations

from fmcluster.live.instances import InstanceTypes
from fmcluster.live.quotas import (
    ServiceQuotas,
    check_elastic_ips,
    check_hyperpod_instances,
    check_hyperpod_type,
    check_lustre_storage,
    check_nat_gateways,
    check_vcpus,
    check_vpcs,
    on_demand_quota,
)
from tests.live.conftest import QUICKSTART, config_of
from tests.live.responses import addresses, instance_types, nat_gateways, quota, quotas, subnets, vpcs

P = "Running On-Demand P instances"
STANDARD = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"


def render(problems):
    return [p.render("cluster.yaml") for p in problems]


def test_families_map_to_their_on_demand_quota():
    # EC2 user guide, On-Demand Instance quotas: which families each vCPU quota covers.
    assert [
        on_demand_quota(t)
        for t in ("p6-b300.48xlarge", "g5.12xlarge", "trn1.32xlarge", "m5.4xlarge", "c7i.large", "inf2.xlarge")
    ] == [P, "Running On-Demand G and VT instances", "Running On-Demand Trn instances", STANDARD, STANDARD, ""]


def vcpu_messages(stubs, value, members, listed=True):
    stub = stubs()
    stub.ok("ec2", "DescribeInstanceTypes", instance_types("p5.48xlarge"), {"InstanceTypes": ["p5.48xlarge"]})
    rows = [quota("ec2", P, "L-417A185B", value)] if listed else []
    stub.ok("service-quotas", "ListServiceQuotas", quotas(*rows), {"ServiceCode": "ec2"})
    if not listed:
        stub.ok(
            "service-quotas",
            "ListAWSDefaultServiceQuotas",
            quotas(quota("ec2", P, "L-417A185B", value)),
            {"ServiceCode": "ec2"},
        )
    aws = stub.aws()
    return render(check_vcpus(ServiceQuotas(aws), InstanceTypes(aws, ["p5.48xlarge"]), P, members))


def test_vcpu_quota_that_covers_the_groups(stubs):
    assert vcpu_messages(stubs, 384.0, [("compute[0].count", "p5.48xlarge", 2)]) == []


def test_vcpu_quota_too_low_names_the_quota_and_its_code(stubs):
    assert vcpu_messages(stubs, 192.0, [("compute[0].count", "p5.48xlarge", 4)]) == [
        "cluster.yaml: compute[0].count: needs 768 vCPUs (4 x p5.48xlarge x 192), but the quota 'Running On-Demand "
        "P instances' (L-417A185B) is 192 vCPUs; request an increase in Service Quotas (running instances count too)"
    ]


def test_a_quota_never_changed_is_read_from_the_defaults(stubs):
    assert vcpu_messages(stubs, 0.0, [("compute[0].count", "p5.48xlarge", 1)], listed=False) == [
        "cluster.yaml: compute[0].count: needs 192 vCPUs (1 x p5.48xlarge x 192), but the quota 'Running On-Demand "
        "P instances' (L-417A185B) is 0 vCPUs; request an increase in Service Quotas (running instances count too)"
    ]


def hyperpod_messages(stubs, value, members, ml_type="ml.p5.48xlarge"):
    name = f"{ml_type} for cluster usage"
    stub = stubs().ok(
        "service-quotas",
        "ListServiceQuotas",
        quotas(quota("sagemaker", name, "L-A9F29A4E", value)),
        {"ServiceCode": "sagemaker"},
    )
    return render(check_hyperpod_type(ServiceQuotas(stub.aws()), ml_type, members))


def test_hyperpod_type_quota_that_covers(stubs):
    assert hyperpod_messages(stubs, 2.0, [("compute[0].count", "p5.48xlarge", 2)]) == []


def test_hyperpod_type_quota_too_low(stubs):
    assert hyperpod_messages(stubs, 1.0, [("compute[0].count", "p5.48xlarge", 2)]) == [
        "cluster.yaml: compute[0].count: needs 2 x ml.p5.48xlarge, but the quota 'ml.p5.48xlarge for cluster usage' "
        "(L-A9F29A4E) is 1; request an increase in Service Quotas (other HyperPod clusters' instances count too)"
    ]


def test_hyperpod_type_quota_missing_is_not_checked(stubs):
    stub = stubs()
    stub.ok("service-quotas", "ListServiceQuotas", quotas(), {"ServiceCode": "sagemaker"})
    stub.ok("service-quotas", "ListAWSDefaultServiceQuotas", quotas(), {"ServiceCode": "sagemaker"})
    assert render(
        check_hyperpod_type(ServiceQuotas(stub.aws()), "ml.p5.48xlarge", [("compute[0].count", "p5.48xlarge", 2)])
    ) == [
        "cluster.yaml: compute[0].count: not checked: quota 'ml.p5.48xlarge for cluster usage': Service Quotas "
        "lists no SageMaker quota of that name"
    ]


TOTAL = "Total number of instances allowed across SageMaker HyperPod clusters"
SPOT_TOTAL = "Total number of Spot instances allowed across SageMaker HyperPod clusters"
PER_CLUSTER = "Maximum number instances allowed per SageMaker HyperPod cluster"
"""Names: SageMaker HyperPod developer guide, prerequisites, "Quotas" table (the Spot twin: HyperPod Spot docs).
Codes L-3308CCC7, L-97A2C724 and L-2CE978FC as a public account's ListServiceQuotas listing shows them (us-east-1,
2026; unconfirmed in AWS's docs, which name quotas only)."""


def test_hyperpod_total_counts_controller_and_compute(stubs):
    stub = stubs().ok(
        "service-quotas",
        "ListServiceQuotas",
        quotas(quota("sagemaker", TOTAL, "L-3308CCC7", 2.0)),
        {"ServiceCode": "sagemaker"},
    )
    assert render(check_hyperpod_instances(ServiceQuotas(stub.aws()), config_of(QUICKSTART), TOTAL)) == [
        f"cluster.yaml: compute: the cluster has 3 instances (2 compute, 1 controller), but the quota '{TOTAL}' "
        "(L-3308CCC7) is 2; request an increase"
    ]


def test_hyperpod_total_is_not_confused_with_its_spot_twin(stubs):
    # The Spot quota's name has every word of the On-Demand one's; an account may list it first, at 0.
    stub = stubs().ok(
        "service-quotas",
        "ListServiceQuotas",
        quotas(quota("sagemaker", SPOT_TOTAL, "L-97A2C724", 0.0), quota("sagemaker", TOTAL, "L-3308CCC7", 30.0)),
        {"ServiceCode": "sagemaker"},
    )
    assert render(check_hyperpod_instances(ServiceQuotas(stub.aws()), config_of(QUICKSTART), TOTAL)) == []


def test_hyperpod_per_cluster_quota(stubs):
    stub = stubs().ok(
        "service-quotas",
        "ListServiceQuotas",
        quotas(quota("sagemaker", PER_CLUSTER, "L-2CE978FC", 20.0)),
        {"ServiceCode": "sagemaker"},
    )
    config = config_of(QUICKSTART, compute=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 24}])
    assert render(check_hyperpod_instances(ServiceQuotas(stub.aws()), config, PER_CLUSTER)) == [
        f"cluster.yaml: compute: the cluster has 25 instances (24 compute, 1 controller), but the quota "
        f"'{PER_CLUSTER}' (L-2CE978FC) is 20; request an increase"
    ]


LUSTRE = "Lustre Persistent_2 storage capacity"
LOOK_ALIKE = "Lustre Persistent Intelligent-Tiering SSD read cache storage capacity"
"""FSx quotas as ListServiceQuotas names them (public account listings: L-8F1B9C74 at its default 100,800;
L-B7391FCE), unconfirmed in AWS's FSx guide. The look-alike has every word a loose match would look for."""


def test_lustre_capacity_within_and_over_the_quota(stubs):
    config = config_of(QUICKSTART)  # default 4800 GiB
    for value, expected in (
        (4800.0, []),
        (
            2400.0,
            [
                "cluster.yaml: storage.lustre.capacity_gib: 4,800 GiB exceeds the quota "
                f"'{LUSTRE}' (L-8F1B9C74) of 2,400; request an increase (other file systems count too)"
            ],
        ),
    ):
        stub = stubs().ok(
            "service-quotas",
            "ListServiceQuotas",
            quotas(
                quota("fsx", LOOK_ALIKE, "L-B7391FCE", 0.0),
                quota("fsx", "Lustre Persistent_1 storage capacity", "L-C8640C82", 100800.0),
                quota("fsx", LUSTRE, "L-8F1B9C74", value),
            ),
            {"ServiceCode": "fsx"},
        )
        assert render(check_lustre_storage(ServiceQuotas(stub.aws()), config)) == expected


def test_vpcs_per_region_headroom(stubs):
    stub = stubs().ok("ec2", "DescribeVpcs", vpcs(5), {})
    stub.ok(
        "service-quotas",
        "ListServiceQuotas",
        quotas(quota("vpc", "VPCs per Region", "L-F678F1CE", 5.0)),
        {"ServiceCode": "vpc"},
    )
    assert render(check_vpcs(ServiceQuotas(stub.aws()), stub.aws())) == [
        "cluster.yaml: network: the network stack creates 1 VPC, but 5 of the quota 'VPCs per Region' (L-F678F1CE) "
        "of 5 are in use; free one or request an increase"
    ]


def test_nat_gateways_counted_in_the_zone_only(stubs):
    stub = stubs()
    stub.ok(
        "ec2",
        "DescribeNatGateways",
        nat_gateways("subnet-0a", "subnet-0b", "subnet-0c"),
        {"Filter": [{"Name": "state", "Values": ["pending", "available"]}]},
    )
    stub.ok(
        "ec2",
        "DescribeSubnets",
        subnets({"subnet-0a": "use1-az6", "subnet-0b": "use1-az6", "subnet-0c": "use1-az4"}),
        {"SubnetIds": ["subnet-0a", "subnet-0b", "subnet-0c"]},
    )
    stub.ok(
        "service-quotas",
        "ListServiceQuotas",
        quotas(quota("vpc", "NAT gateways per Availability Zone", "L-FE5A380F", 2.0)),
        {"ServiceCode": "vpc"},
    )
    aws = stub.aws()
    assert render(check_nat_gateways(ServiceQuotas(aws), aws, "use1-az6")) == [
        "cluster.yaml: network.egress: egress: nat creates 1 NAT gateway in use1-az6, but 2 of the quota 'NAT "
        "gateways per Availability Zone' (L-FE5A380F) of 2 are in use; free one or request an increase or set "
        "egress: none"
    ]


def test_elastic_ips_headroom(stubs):
    for used, expected in (
        (4, []),
        (
            5,
            [
                "cluster.yaml: network.egress: egress: nat allocates 1 Elastic IP for its NAT gateway, but 5 of the "
                "quota 'EC2-VPC Elastic IPs' (L-0263D0A3) of 5 are in use; free one or request an increase or set "
                "egress: none"
            ],
        ),
    ):
        stub = stubs().ok("ec2", "DescribeAddresses", addresses(used), {})
        stub.ok(
            "service-quotas",
            "ListServiceQuotas",
            quotas(quota("ec2", "EC2-VPC Elastic IPs", "L-0263D0A3", 5.0)),
            {"ServiceCode": "ec2"},
        )
        aws = stub.aws()
        assert render(check_elastic_ips(ServiceQuotas(aws), aws)) == expected
