"""`fmcluster validate FILE --live`: every read-only check of the account a file's deploy depends on, at once.

>>> # preflight(load("cluster.yaml"), Aws("us-east-1"), console=Console(stderr=True)) -> [Problem, ...]
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from fmcluster.config import ClusterConfig, Problem
from fmcluster.live.aws import Aws
from fmcluster.live.bootstrap import bootstrap_checks
from fmcluster.live.capacity import reservation_checks, training_plan_checks
from fmcluster.live.data import data_checks
from fmcluster.live.file_system import file_system_checks
from fmcluster.live.image_drift import node_image_checks
from fmcluster.live.instances import InstanceTypes, instance_types_of, offering_checks
from fmcluster.live.network import network_checks
from fmcluster.live.node_image import image_checks
from fmcluster.live.placement import placement_checks
from fmcluster.live.quotas import quota_checks
from fmcluster.live.runner import Check, run_checks


def preflight(
    config: ClusterConfig,
    aws: Aws,
    *,
    now: datetime | None = None,
    console: Console | None = None,
    workers: int = 8,
) -> list[Problem]:
    """Every live problem of `config`, in a stable order. Raises `NoCredentials` when no call can be made."""
    account = aws.account()
    problems = []
    if config.account and config.account != account:
        problems.append(
            Problem(
                "account",
                f"the credentials are for account {account}, not {config.account}; "
                f"use credentials of {config.account} (AWS_PROFILE)",
            )
        )
    found = run_checks(checks(config, aws, account, now or datetime.now(UTC)), console=console, workers=workers)
    return problems + found


def checks(config: ClusterConfig, aws: Aws, account: str, now: datetime) -> list[Check]:
    types = InstanceTypes(aws, list(instance_types_of(config)))
    return [
        *reservation_checks(config, aws, now),
        *training_plan_checks(config, aws, now),
        *offering_checks(config, aws),
        *quota_checks(config, aws, types),
        *image_checks(config, aws, types),
        *node_image_checks(config, aws),
        *data_checks(config, aws),
        *network_checks(config, aws),
        *placement_checks(config, aws),
        *file_system_checks(config, aws),
        *bootstrap_checks(config, aws, account),
    ]
