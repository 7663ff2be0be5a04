"""The `fmcluster healthcheck` subcommand: its arguments and its run (fmcluster.live.healthcheck does the work)."""

from __future__ import annotations

import argparse
import sys

from fmcluster.config import ClusterConfig

CHECK_NAMES = ("InstanceStress", "InstanceConnectivity")
"""botocore sagemaker DeepHealthCheckType (also fmcluster.live.healthcheck.CHECKS, which loads boto3)."""


def add_healthcheck_command(commands: argparse._SubParsersAction, default_file: str) -> None:
    command = commands.add_parser("healthcheck", help="run the orchestrator's deep health checks, report per node")
    command.add_argument("file", nargs="?", default=default_file, help=f"cluster file (default {default_file})")
    command.add_argument("--group", action="append", default=[], help="a compute group (repeatable; default: all)")
    command.add_argument(
        "--level", action="append", default=[], choices=CHECK_NAMES,
        help="a check to run (repeatable; default: every check the group can take)",
    )  # fmt: skip
    command.add_argument("--status", action="store_true", help="only list the nodes' state; start nothing")


def run_healthcheck(args: argparse.Namespace, config: ClusterConfig, exit_invalid: int) -> int:
    """Exit 0 when the checks started (or --status listed the nodes), 2 with one line when they could not."""
    from fmcluster import live  # boto3 loads only for live commands
    from fmcluster.live.healthcheck import HealthCheckError, healthcheck

    try:
        nodes = healthcheck(config, live.Aws(config.region), groups=tuple(args.group), checks=tuple(args.level),
                            start=not args.status)  # fmt: skip
    except (HealthCheckError, live.NoCredentials) as error:
        print(f"{args.file}: healthcheck: {error}", file=sys.stderr)
        return exit_invalid
    except live.Denied as error:
        print(f"{args.file}: healthcheck: access denied: your credentials lack {error.action}", file=sys.stderr)
        return exit_invalid
    if not args.status:
        print(f"{config.name}: deep health checks started; HyperPod reboots or replaces the nodes that fail them; "
              f"`fmcluster healthcheck {args.file} --status` shows their progress")  # fmt: skip
    for node in nodes:
        print(node.line())
    return 0
