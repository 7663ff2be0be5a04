"""`fmcluster info FILE` and `fmcluster connect FILE`: the arguments, and the run that prints one line and exits 2
when something stands in the way (no credentials, no node, no Session Manager plugin). boto3 loads only when one of
them runs; aws_cdk never does."""

from __future__ import annotations

import argparse
import json
import sys

from fmcluster.config import ClusterConfig


def add_access_commands(commands: argparse._SubParsersAction, default_file: str) -> None:
    info = commands.add_parser("info", help="print what a deployed cluster's stacks say you need next")
    info.add_argument("file", nargs="?", default=default_file, help=f"cluster file (default {default_file})")
    info.add_argument("--json", action="store_true", help="print JSON: {stack part: {output: value}, head_node}")
    connect = commands.add_parser("connect", help="open a Session Manager session to the head node or another node")
    connect.add_argument("file", nargs="?", default=default_file, help=f"cluster file (default {default_file})")
    where = connect.add_mutually_exclusive_group()
    where.add_argument("--node", metavar="ID", help="an instance id (i-...) instead of the head node")
    where.add_argument("--group", metavar="G", help="the first running node of this node group (HyperPod instance "
                       "group or PCS node group) instead of the head node")  # fmt: skip
    connect.add_argument("--user", metavar="NAME", help="a login shell of this Linux user (sudo -iu NAME)")
    connect.add_argument("--port-forward", metavar="LOCAL:REMOTE", help="forward localhost:LOCAL to the node's "
                         "REMOTE port (e.g. 3000:3000 for the self-hosted Grafana) instead of a shell")  # fmt: skip


def run_access_command(args: argparse.Namespace, config: ClusterConfig, exit_invalid: int) -> int:
    from fmcluster import live  # boto3 loads only for live commands
    from fmcluster.live.connect import ConnectError, connect, placeholder_target, session_request
    from fmcluster.live.info import cluster_info

    aws = live.Aws(config.region)
    command = args.command
    try:
        if command == "info":
            info = cluster_info(config, aws)
            print(json.dumps(info.as_json(), indent=2) if args.json else info.report(args.file))
            return 0 if any(stack.status is not None for stack in info.stacks) else 1
        return connect(config, aws, group=args.group, node=args.node, user=args.user, port_forward=args.port_forward,
                       say=lambda line: print(line, file=sys.stderr))  # fmt: skip
    except ConnectError as error:
        print(f"{args.file}: {command}: {error}", file=sys.stderr)
    except live.NoCredentials as error:
        print(f"{args.file}: {command}: {error}", file=sys.stderr)
        if command == "connect":
            target = placeholder_target(config, args.group, args.node)
            request = session_request(target, user=args.user, port_forward=args.port_forward)
            print(f"  the session by hand, once you have credentials: {request.cli_command(config.region)}",
                  file=sys.stderr)  # fmt: skip
    except live.Denied as error:
        print(f"{args.file}: {command}: access denied: your credentials lack {error.action}", file=sys.stderr)
    return exit_invalid
