"""The rule linking the training image's CUDA with the node image's NVIDIA driver (fmcluster/config/node_images.py).

Expected values: NVIDIA's CUDA Compatibility guide, "Minor Version Compatibility", Table 1 (CUDA 13.x needs a driver
>= 580, 12.x >= 525, 11.x >= 450); the drivers of the images: the DLAMI release notes (Base AMI with Single CUDA,
Ubuntu 24.04, 2026-07: 595.71.05, tests/node/profiles/pcs-ready-dlami-ubuntu2404.json) and, for the image that fails,
the Amazon Linux 2 PCS sample AMI's 550.127.08 (FACTS.md, Node images; its AMI release notes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fmcluster.config.node_images import DEFAULT_NODE_IMAGES, NodeImage, cuda_driver_problem
from tests.unit.test_config_rules import PCS, lines_for, rendered, valid

PROFILES = Path(__file__).parents[1] / "node" / "profiles"
AL2_SAMPLE_AMI = NodeImage("the Amazon Linux 2 PCS sample AMI", "550.127.08", "FACTS.md, Node images")


def test_cuda_13_on_the_driver_550_image_is_refused_with_the_exact_message():
    assert cuda_driver_problem("13.0", AL2_SAMPLE_AMI) == (
        "CUDA 13.0 needs an NVIDIA driver >= 580 (NVIDIA CUDA minor version compatibility table), but the Amazon "
        "Linux 2 PCS sample AMI carries 550.127.08 and jobs would fail with 'CUDA driver version is insufficient'; "
        "use a CUDA 12.x training image or a node image with a newer driver"
    )


@pytest.mark.parametrize(("cuda", "fits"), [("12.4", True), ("12.8", True), ("13.0", False), ("11.8", True)])
def test_each_cuda_line_against_driver_550(cuda, fits):
    assert (cuda_driver_problem(cuda, AL2_SAMPLE_AMI) is None) is fits


def test_the_pcs_ready_dlami_runs_the_default_cuda_13_image():
    assert cuda_driver_problem("13.0", DEFAULT_NODE_IMAGES["pcs"]) is None
    assert cuda_driver_problem("13.2", DEFAULT_NODE_IMAGES["pcs"]) is None


def test_the_default_images_drivers_are_their_profiles():
    for orchestrator, profile in (
        ("pcs", "pcs-ready-dlami-ubuntu2404"),
        ("hyperpod-slurm", "hyperpod-dlami-ubuntu2204"),
    ):
        facts = json.loads((PROFILES / f"{profile}.json").read_text())
        assert DEFAULT_NODE_IMAGES[orchestrator].nvidia_driver == facts["software"]["value"]["nvidia_driver"]


def test_an_unconfirmed_driver_is_not_judged():
    """HyperPod's AMI: no release note found states its driver (docs/node-images.md)."""
    assert cuda_driver_problem("13.0", DEFAULT_NODE_IMAGES["hyperpod-slurm"]) is None


def test_validate_refuses_a_cuda_line_without_a_known_driver_minimum():
    changes = {
        **PCS,
        "image.base_image": "nvcr.io/nvidia/cuda:14.0.0-devel-ubuntu24.04",
        "image.cuda": "14.0",
    }
    assert lines_for(changes) == rendered(
        [
            "image.cuda: fmcluster knows no minimum NVIDIA driver for CUDA 14.0 (NVIDIA's compatibility table lists "
            "11.x, 12.x, 13.x), so it cannot say that the PCS-Ready DLAMI's driver 595.71.05 runs it; use a CUDA of "
            "those lines"
        ]
    )


def test_an_image_of_ones_own_is_not_judged():
    changes = {
        **PCS,
        "orchestrator.ami_id": "ami-0123456789abcdef0",
        "image.base_image": "nvcr.io/nvidia/cuda:14.0.0-devel-ubuntu24.04",
        "image.cuda": "14.0",
    }
    assert valid(changes).image.cuda == "14.0"  # its driver is unknown here: nothing to compare
