"""Which capacity ends the cluster drains before: capacity blocks (the block-end Lambda) and training plans (HyperPod's
controller, node/plan-end-drain.sh), each with its groups' Slurm partitions and the longest grace among them.

Example::

    >>> from fmcluster.config import load
    >>> drains_before_end(load("examples/quickstart.yaml").compute, "capacity-block")
    {}
"""

from __future__ import annotations

from collections.abc import Iterable

from fmcluster.config.models import ComputeGroup


def drains_before_end(groups: Iterable[ComputeGroup], capacity: str) -> dict[str, tuple[list[str], int]]:
    """Reservation id (`capacity-block`) or training plan ARN (`training-plan`) -> (its groups' partitions, the longest
    `drain_before_end_minutes` of them), for the groups of that capacity that drain (minutes above 0)."""
    ends: dict[str, tuple[list[str], int]] = {}
    for group in groups:
        key = group.reservation_id if capacity == "capacity-block" else group.training_plan_arn
        if group.capacity != capacity or not key or not group.drain_before_end_minutes:
            continue
        partitions, minutes = ends.get(key, ([], 0))
        ends[key] = ([*partitions, group.name], max(minutes, group.drain_before_end_minutes))
    return ends


def plan_words(groups: Iterable[ComputeGroup]) -> list[str]:
    """plan-end-drain.sh's PLAN arguments (`ARN=MINUTES=PARTITION[,PARTITION...]`), one per training plan that drains.

    >>> from fmcluster.config import load
    >>> plan_words(load("examples/hyperpod-training-plan.yaml").compute)
    ['arn:aws:sagemaker:us-west-2:123456789012:training-plan/llm-pretrain-2026q4=60=gpu']
    """
    return [
        f"{arn}={minutes}={','.join(partitions)}"
        for arn, (partitions, minutes) in drains_before_end(groups, "training-plan").items()
    ]
