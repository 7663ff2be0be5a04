"""What the fabric check expects per instance type (fmcluster.fabric), against the catalog's sources and AWS's
GPU health check suite (awslabs/awsome-distributed-ai 4.validation_and_observability/2.gpu-cluster-healthcheck at
2b0416e: instance-profiles.conf lists GPU_COUNT|EFA_COUNT per type; checks/5-nccl-allreduce.sh the NVLink-only
thresholds the floors halve)."""

from __future__ import annotations

import pytest

from fmcluster.fabric import NVLINK_FLOORS_GBPS, FabricExpectation, fabric_expectation

AWS_PROFILES = {
    "p4d.24xlarge": (8, 4), "p4de.24xlarge": (8, 4), "p5.48xlarge": (8, 32), "p5e.48xlarge": (8, 32),
    "p5en.48xlarge": (8, 16), "p6-b200.48xlarge": (8, 8),
}  # fmt: skip
"""instance-profiles.conf: INSTANCE_TYPE|GPU_COUNT|EFA_COUNT (the types fmcluster's catalog has too)."""
AWS_NVLINK_ONLY_GBPS = {"p4d.24xlarge": 200, "p5.48xlarge": 500, "p5e.48xlarge": 500, "p5en.48xlarge": 500,
                        "p6-b200.48xlarge": 600}  # fmt: skip
"""checks/5-nccl-allreduce.sh, nvlink_only_threshold."""


@pytest.mark.parametrize(("instance_type", "counts"), AWS_PROFILES.items())
def test_expected_devices_are_awss_own_per_type(instance_type, counts):
    expectation = fabric_expectation(instance_type, efa=True)
    assert expectation is not None and (expectation.gpus, expectation.efa) == counts


def test_floors_are_half_awss_nvlink_only_thresholds():
    for instance_type, threshold in AWS_NVLINK_ONLY_GBPS.items():
        assert NVLINK_FLOORS_GBPS[instance_type] * 2 == threshold
    assert NVLINK_FLOORS_GBPS["p4de.24xlarge"] == NVLINK_FLOORS_GBPS["p4d.24xlarge"]  # the same NVLink 3


@pytest.mark.parametrize(
    ("instance_type", "efa", "expected"),
    [
        ("p5.48xlarge", False, FabricExpectation(0, 8, 250)),  # EFA turned off: only the GPUs and NVLink
        ("p6-b300.48xlarge", True, FabricExpectation(16, 8, 0)),  # no published floor: the run must only be right
        ("g5.4xlarge", True, FabricExpectation(0, 1, 0)),  # no EFA on the type; one GPU, nothing to all_reduce
        ("trn1.32xlarge", True, FabricExpectation(8, 0, 0)),  # Trainium: no nvidia-smi
        ("m5.2xlarge", True, None),
    ],
)
def test_what_each_kind_of_group_is_checked_for(instance_type, efa, expected):
    assert fabric_expectation(instance_type, efa=efa) == expected


def test_arguments_and_the_hyperpod_setting():
    expectation = FabricExpectation(16, 8, 0)
    assert expectation.arguments() == ["--efa", "16", "--gpus", "8"]
    assert expectation.setting("gpu") == "gpu=16,8,0"
