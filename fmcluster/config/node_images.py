"""The node images fmcluster supports by default, what NVIDIA driver each carries, and which CUDA that driver runs.

`validate` refuses a training image (`image.cuda`) whose CUDA needs a newer NVIDIA driver than the nodes' image
carries: "CUDA driver version is insufficient" at the first job otherwise. Each driver version has its source; where
none is found (HyperPod's AMI) the driver is None and the rule says nothing about it (docs/node-images.md).
An `orchestrator.ami_id` of the user's own is not checked: its driver is unknown here.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.config.models import version_tuple


@dataclass(frozen=True)
class NodeImage:
    """A node image: its name as the docs say it, its NVIDIA driver (None: unconfirmed) and where that comes from."""

    name: str
    nvidia_driver: str | None
    source: str


PCS_READY_DLAMI = NodeImage(
    name="the PCS-Ready DLAMI",
    nvidia_driver="595.71.05",
    source="DLAMI release notes, Base AMI with Single CUDA (Ubuntu 24.04) 20260717 and ARM64 20260724: nvidia_driver "
    "595.71.05 (the PCS-Ready DLAMI is built on it; that it carries the same driver is unconfirmed)",
)
HYPERPOD_AMI = NodeImage(
    name="the SageMaker HyperPod AMI",
    nvidia_driver=None,
    source="(unconfirmed) no HyperPod AMI release note found states the driver version",
)
DEFAULT_NODE_IMAGES = {"pcs": PCS_READY_DLAMI, "hyperpod-slurm": HYPERPOD_AMI}
"""The image an orchestrator's nodes run when the file names none (tests/node/profiles holds the same facts)."""

CUDA_MIN_DRIVER = {11: "450.80.02", 12: "525", 13: "580"}
"""The oldest Linux driver that runs a CUDA major release (minor version compatibility): NVIDIA, CUDA Compatibility,
"Minor Version Compatibility", Table 1: CUDA 13.x >= 580, 12.x >= 525, 11.x >= 450 (450.80.02, the CUDA 11.0 driver);
the CUDA Toolkit release notes hold the same table."""


def cuda_driver_problem(cuda: str, image: NodeImage) -> str | None:
    """Why `image`'s driver cannot run CUDA `cuda`, or None (also when the driver is unconfirmed).

    >>> cuda_driver_problem("13.0", NodeImage("an Amazon Linux 2 PCS sample AMI", "550.127.08", "FACTS.md"))[:44]
    'CUDA 13.0 needs an NVIDIA driver >= 580 (NVI'
    """
    if image.nvidia_driver is None:
        return None
    major = version_tuple(cuda)[0]
    needed = CUDA_MIN_DRIVER.get(major)
    if needed is None:
        known = ", ".join(f"{key}.x" for key in CUDA_MIN_DRIVER)
        return (
            f"fmcluster knows no minimum NVIDIA driver for CUDA {cuda} (NVIDIA's compatibility table lists {known}), "
            f"so it cannot say that {image.name}'s driver {image.nvidia_driver} runs it; use a CUDA of those lines"
        )
    driver = version_tuple(image.nvidia_driver)
    if driver >= version_tuple(needed):
        return None
    runs = [f"{key}.x" for key, minimum in CUDA_MIN_DRIVER.items() if version_tuple(minimum) <= driver]
    return (
        f"CUDA {cuda} needs an NVIDIA driver >= {needed} (NVIDIA CUDA minor version compatibility table), but "
        f"{image.name} carries {image.nvidia_driver} and jobs would fail with 'CUDA driver version is insufficient'; "
        f"use a CUDA {runs[-1] if runs else 'older'} training image or a node image with a newer driver"
    )
