"""CPU partitions next to the GPUs, scale to zero and an existing placement group, read from the session's synthesized
examples: pcs-cpu-and-gpu (4 x p5 on an ODCR in a named placement group, a c6i.4xlarge group scaling 0-8) and
hyperpod-cpu (2 x p5 and an ml.m5.2xlarge group on HyperPod).

What a general-purpose group (a type outside fmcluster's catalog) must not get comes from the catalog's role: EFA
layout, GPUs and baselines are known only for cataloged types (fmcluster/catalog.py); the PCS shapes from botocore pcs
(ScalingConfigurationRequest, ComputeNodeGroupSlurmConfigurationRequest.scaleDownIdleTimeInSeconds) and HyperPod's
from botocore sagemaker (ClusterInstanceGroupSpecification)."""

from __future__ import annotations

import pytest

from tests.support import of_type

pytestmark = pytest.mark.synth


@pytest.fixture(scope="module")
def pcs_mixed(synthesized) -> dict[str, dict]:
    return synthesized["pcs-cpu-and-gpu"].templates


@pytest.fixture(scope="module")
def hyperpod_mixed(synthesized) -> dict[str, dict]:
    return synthesized["hyperpod-cpu"].templates


def _by_instance_type(template: dict) -> dict[str, dict]:
    return {
        resource["Properties"]["LaunchTemplateData"].get("InstanceType"): resource["Properties"]["LaunchTemplateData"]
        for resource in of_type(template, "AWS::EC2::LaunchTemplate").values()
    }


def test_a_cpu_group_gets_one_interface_and_no_placement_group_next_to_the_efa_gpus(pcs_mixed):
    templates = _by_instance_type(pcs_mixed["pcs-mixed-cluster"])
    cpu, gpu = templates["c6i.4xlarge"], templates["p5.48xlarge"]
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i.get("InterfaceType")) for i in cpu["NetworkInterfaces"]] == [
        (0, 0, "interface")  # the one ENA interface, no efa-only ones
    ]
    assert "Placement" not in cpu
    assert sum(i.get("InterfaceType") == "efa-only" for i in gpu["NetworkInterfaces"]) == 32  # p5: 32 EFA cards


def test_an_existing_placement_group_is_named_and_none_is_created(pcs_mixed):
    """The ODCR made in a cluster placement group: the launch template names that group, no stack makes one."""
    gpu = _by_instance_type(pcs_mixed["pcs-mixed-cluster"])["p5.48xlarge"]
    assert gpu["Placement"] == {"GroupName": "p5-odcr-cluster"}
    assert gpu["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0fedcba9876543210"}
    }
    assert [name for template in pcs_mixed.values() for name in of_type(template, "AWS::EC2::PlacementGroup")] == []


def test_a_group_below_its_maximum_scales_to_zero_with_its_own_idle_time(pcs_mixed):
    groups = {
        resource["Properties"]["Name"]: resource["Properties"]
        for resource in of_type(pcs_mixed["pcs-mixed-cluster"], "AWS::PCS::ComputeNodeGroup").values()
    }
    assert groups["cpu"]["ScalingConfiguration"] == {"MinInstanceCount": 0, "MaxInstanceCount": 8}
    assert groups["cpu"]["SlurmConfiguration"] == {"ScaleDownIdleTimeInSeconds": 1200}  # 20 minutes
    assert groups["gpu"]["ScalingConfiguration"] == {"MinInstanceCount": 4, "MaxInstanceCount": 4}  # ODCR: static
    assert "SlurmConfiguration" not in groups["gpu"]


def test_only_the_gpu_type_gets_an_nccl_tests_baseline_alarm(pcs_mixed, hyperpod_mixed):
    for templates in (pcs_mixed, hyperpod_mixed):
        descriptions = [
            resource["Properties"]["AlarmDescription"]
            for template in templates.values()
            for resource in of_type(template, "AWS::CloudWatch::Alarm").values()
            if "nccl-tests all_reduce_perf run on" in resource["Properties"].get("AlarmDescription", "")
        ]
        assert [text.split(" run on ")[1].split(" ")[0] for text in descriptions] == ["p5.48xlarge"]


def test_a_hyperpod_cpu_group_has_no_efa_interface_and_keeps_hyperthreads(hyperpod_mixed):
    (cluster,) = of_type(hyperpod_mixed["hyperpod-mixed-cluster"], "AWS::SageMaker::Cluster").values()
    groups = {group["InstanceGroupName"]: group for group in cluster["Properties"]["InstanceGroups"]}
    assert groups["cpu"]["InstanceType"] == "ml.m5.2xlarge"
    assert "NetworkInterface" not in groups["cpu"] and "ThreadsPerCore" not in groups["cpu"]
    assert groups["gpu"]["NetworkInterface"] == {"InterfaceType": "efa-only"}
    assert groups["cpu"]["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["cpu"]}
