"""The `fmcluster` command: validate, plan, diagnose, info and connect FILE (default examples/quickstart.yaml)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fmcluster import advice, cost, deploy_time, sizing
from fmcluster.access_command import add_access_commands, run_access_command
from fmcluster.config import ClusterConfig, ConfigError, load, orchestrators
from fmcluster.config.value_rules import possible_deep_health_checks
from fmcluster.healthcheck_command import add_healthcheck_command, run_healthcheck
from fmcluster.update_command import add_update_arguments, plan_update

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_FILE = "examples/quickstart.yaml"
EXIT_INVALID = 2
EXIT_UNCHECKED = 1
"""`validate --live`: no error found, but a check did not run (access denied, throttled, AWS's error)."""
PLAN_WIDTH = 140
"""The plan's tables need about this many columns; rich assumes 80 when output is not a terminal."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fmcluster", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("validate", "check a cluster file"), ("plan", "show what a cluster file builds")):
        command = commands.add_parser(name, help=text)
        command.add_argument("file", nargs="?", default=DEFAULT_FILE, help=f"cluster file (default {DEFAULT_FILE})")
        if name == "plan":
            command.add_argument(
                "--assembly", metavar="DIR", help="the file's cloud assembly (cdk.out) to time; default: synthesize it"
            )
            add_update_arguments(command)
            command.add_argument(
                "--live", action="store_true", help="price the plan from the AWS Price List API (credentials)"
            )
        if name == "validate":
            command.add_argument(
                "--live", action="store_true", help="also check the AWS account with read-only calls (credentials)"
            )
    diagnose = commands.add_parser("diagnose", help="say why a deployed cluster or one of its nodes failed")
    diagnose.add_argument("file", nargs="?", default=DEFAULT_FILE, help=f"cluster file (default {DEFAULT_FILE})")
    diagnose.add_argument("--collect", metavar="DIR", help="also write what was read (secrets redacted) to DIR")
    add_access_commands(commands, DEFAULT_FILE)
    add_healthcheck_command(commands, DEFAULT_FILE)
    args = parser.parse_args(argv)
    if args.command == "plan" and args.previous:
        return plan_update(args.file, args.previous, allow_replacement=args.allow_replacement)

    config = load_or_report(args.file)
    if config is None:
        return EXIT_INVALID
    if args.command == "diagnose":
        return run_diagnose(args.file, config, args.collect)
    if args.command in ("info", "connect"):
        return run_access_command(args, config, EXIT_INVALID)
    if args.command == "healthcheck":
        return run_healthcheck(args, config, EXIT_INVALID)
    if args.command == "validate" and args.live:
        return validate_live(args.file, config)
    if args.command == "validate":
        scaling = any(group.scales for group in config.compute)
        nodes = f"{sum(g.min_count for g in config.compute)}-{config.total_nodes}" if scaling else config.total_nodes
        print(f"{args.file}: valid: {len(config.compute)} compute group(s), {nodes} node(s)")
    else:
        from rich.console import Console  # rich loads only for the plan's tables and the live commands' progress

        console = Console(width=max(Console().width, PLAN_WIDTH))
        print_plan(config, console)
        if print_cost(args.file, config, console, live=args.live) is None:
            return EXIT_INVALID
        try:
            estimate = _assembly_estimate(config, args.assembly)
        except (RuntimeError, OSError, ValueError) as error:  # jsii reports a failed synth as RuntimeError
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            print(f"{args.file}: deploy time: cannot synthesize the app or read its assembly: {reason}",
                  file=sys.stderr)  # fmt: skip
            return EXIT_INVALID
        print_deploy_time(estimate, console, shared_image=config.storage.lustre is not None)
    return 0


def load_or_report(path: str) -> ClusterConfig | None:
    """The validated file, with warnings on stderr; None after printing every problem to stderr."""
    try:
        config = load(path)
    except ConfigError as error:
        for line in error.lines():
            print(line, file=sys.stderr)
        return None
    for warning in advice.warnings(config):
        print(warning.render(path), file=sys.stderr)
    return config


def validate_live(path: str, config: ClusterConfig) -> int:
    """Run the live preflight: problems to stderr (exit 2 on any error, 1 when no error was found but a check did
    not run), or one line without credentials."""
    from rich.console import Console

    from fmcluster import live  # boto3 loads only for --live

    progress = Console(stderr=True)
    try:
        problems = live.preflight(config, live.Aws(config.region), console=progress if progress.is_terminal else None)
    except live.NoCredentials as error:
        print(f"{path}: --live: {error}", file=sys.stderr)
        return EXIT_INVALID
    for problem in problems:
        print(problem.render(path), file=sys.stderr)
    if any(live.is_error(problem) for problem in problems):
        return EXIT_INVALID
    unchecked = [problem for problem in problems if live.is_unchecked(problem)]
    if unchecked:
        print(
            f"{path}: valid, but {len(unchecked)} live check(s) did not run (above), so the account in "
            f"{config.region} is not known to be ready for it",
            file=sys.stderr,
        )
        return EXIT_UNCHECKED
    print(f"{path}: valid, and every live check ran: the account in {config.region} is ready for it "
          f"({len(problems)} note(s) or warning(s))")  # fmt: skip
    return 0


def run_diagnose(path: str, config: ClusterConfig, collect_dir: str | None) -> int:
    """Print the diagnosis; exit 0 healthy (every check ran), 1 problems found, 2 not everything could be diagnosed."""
    from rich.console import Console

    from fmcluster import live  # boto3 loads only for live commands
    from fmcluster.live.diagnose import collect

    progress = Console(stderr=True)
    try:
        diagnosis = live.diagnose(config, live.Aws(config.region), console=progress if progress.is_terminal else None)
    except live.NoCredentials as error:
        print(f"{path}: diagnose: {error}", file=sys.stderr)
        return EXIT_INVALID
    print(diagnosis.report(redacted=collect_dir is not None))  # what --collect writes, it prints
    if collect_dir:
        print(f"collected: {collect(diagnosis, collect_dir, config.name)}", file=sys.stderr)
    return diagnosis.exit_code


def print_plan(config: ClusterConfig, console: Console) -> None:
    """Tables of compute (accelerators, EFA) and storage (throughput, checkpoint time) for `config`."""
    from rich.table import Table

    compute = Table(
        title=f"{config.name}: compute ({config.orchestrator.type}, {config.region} {config.availability_zone_id})"
    )
    for column in (
        "group",
        "instance type",
        "capacity",
        "nodes",
        "accelerators",
        "EFA/node",
        "EFA Gbps/node",
        "EFA Gbps total",
        "NVMe/node",
    ):
        compute.add_column(column, justify="left" if column in ("group", "instance type", "capacity") else "right")
    for group in config.compute:
        row = group.instance
        efa_count = row.max_efa_interfaces if group.efa else 0
        efa_gbps = row.efa_gbps if group.efa else 0
        accelerators = (
            f"{group.count * row.accelerator_count} x {row.accelerator.removeprefix('NVIDIA ')}"
            if row.is_accelerated
            else "none (general purpose)"
        )
        if group.scales and row.is_accelerated:
            accelerators = f"up to {accelerators}"
        compute.add_row(
            group.name,
            group.instance_type,
            group.capacity,
            f"{group.min_count}-{group.count}" if group.scales else str(group.count),
            accelerators,
            str(efa_count),
            f"{efa_gbps:,}",
            f"{efa_gbps * group.count:,}",
            f"{row.nvme_total_gb / 1000:g} TB" if row.cataloged else "not known",
        )
    console.print(compute)
    print_capacity_windows(config, console)
    if orchestrators.of(config.orchestrator.type).RUNS_DEEP_HEALTH_CHECKS:
        print_deep_health_checks(config, console)
    for group in config.compute:
        if group.health_checks is not None:
            console.print(
                f"PCS instance health checks of {group.name}: applied right after its node group is created, so PCS "
                f"drains and replaces its {group.count} instance(s) once on the first deploy, and again on every "
                "change (botocore pcs UpdateComputeNodeGroup)",
                soft_wrap=True,
            )

    lustre = config.storage.lustre
    if lustre is None:
        console.print(
            "storage: no shared file system (storage.lustre: none): the storage.lustre warning says what differs",
            soft_wrap=True,
        )
        return
    if lustre.existing:
        console.print(
            f"storage: the existing FSx for Lustre file system {lustre.file_system_id} ({lustre.dns_name}@tcp:/"
            f"{lustre.mount_name}), mounted at /fsx; nothing of it is created, and its size and throughput are its own",
            soft_wrap=True,
        )
        return
    storage = Table(title="storage: FSx for Lustre (PERSISTENT_2, SSD)")
    storage.add_column("item")
    storage.add_column("value", justify="right")
    storage.add_row("capacity", f"{lustre.capacity_gib:,} GiB")
    storage.add_row(
        "throughput",
        f"{lustre.throughput_per_tib} MB/s/TiB = "
        f"{sizing.filesystem_mbps(lustre.capacity_gib, lustre.throughput_per_tib):,.0f} MB/s",
    )
    storage.add_row("EFA", "yes" if lustre.efa else "no")
    storage.add_row("S3 links", str(len(lustre.repositories)))
    estimate = sizing.checkpoint_estimate(config)
    if estimate is not None and config.training is not None:
        storage.add_row(
            "checkpoint size",
            f"{estimate.size_bytes / 1e12:.2f} TB "
            f"({sizing.format_parameters(config.training.model_parameters)} parameters)",
        )
        storage.add_row(
            "checkpoint write time",
            f"{estimate.seconds:,.0f} s (target {estimate.target_seconds} s, limited by {estimate.limited_by})",
        )
    console.print(storage)


def print_capacity_windows(config: ClusterConfig, console: Console) -> None:
    """Per capacity block and training plan: the groups on it and its drain; the window itself only `info` reads."""
    seen: dict[str, list[str]] = {}
    for group in config.compute:
        key = group.reservation_id if group.capacity == "capacity-block" else group.training_plan_arn
        if key:
            seen.setdefault(key, []).append(group.name)
    for key, names in seen.items():
        groups = [group for group in config.compute if group.name in names]
        minutes = max(group.drain_before_end_minutes or 0 for group in groups)
        what = f"training plan {key.rsplit('/', 1)[-1]}" if key.startswith("arn:") else f"capacity block {key}"
        drain = f"its nodes drain {minutes} min before its end" if minutes else "its nodes are not drained"
        console.print(
            f"{what} ({', '.join(names)}): start and end known live only (`fmcluster info`); {drain}", soft_wrap=True
        )


def print_cost(path: str, config: ClusterConfig, console: Console, *, live: bool = False) -> cost.Total | None:
    """The cost table: every billed part per hour and per month, from the shipped price table or (`live`) the AWS
    Price List API; None after one line on stderr when `live` has no credentials."""
    from rich.table import Table

    table = cost.PriceTable.load()
    lookup: Callable[[str, str], cost.Price | None] = table.get
    origin = f"price table of {table.date} ({table.source})"
    if live:
        from fmcluster import live as aws_live  # boto3 loads only for --live
        from fmcluster.live.prices import PriceList

        try:
            lookup = PriceList(aws_live.Aws(PriceList.REGION)).lookup_or(table.get)
        except aws_live.NoCredentials as error:
            print(f"{path}: plan --live: {error}", file=sys.stderr)
            return None
        origin = f"AWS Price List API (today), else the price table of {table.date}"
    lines = cost.estimate(config, lookup)
    shown = Table(title=f"cost estimate ({config.region}, USD, list prices; {origin})")
    for column in ("part", "per hour", "per month", "note"):
        shown.add_column(column, justify="right" if column.startswith("per") else "left")
    for line in lines:
        hourly, one_off = line.hourly, line.one_off
        flag = " (unconfirmed)" if line.price is not None and not line.price.confirmed else ""
        if line.prepaid:
            cells = ("prepaid", "prepaid")
        elif one_off is not None:
            cells = (f"${one_off:,.2f} per build{flag}", "")
        elif hourly is not None and line.scales:
            least = line.hourly_least or 0.0
            cells = (
                f"at most {_usd(hourly)}, at least {_usd(least)}{flag}",
                f"at most ${hourly * cost.HOURS_PER_MONTH:,.0f}, at least ${least * cost.HOURS_PER_MONTH:,.0f}{flag}",
            )
        elif hourly is not None:
            cells = (f"{_usd(hourly)}{flag}", f"${hourly * cost.HOURS_PER_MONTH:,.0f}{flag}")
        elif line.key is not None:
            cells = (f"no price for {line.key}", "")
        else:
            cells = ("not estimated", "")
        shown.add_row(line.part, *cells, line.note)
    console.print(shown)
    summed = cost.total(lines)
    flag = " (includes unconfirmed figures)" if summed.unconfirmed else ""
    console.print(f"estimate: {estimate_sum(summed)} from the {origin}{flag}", soft_wrap=True)
    if summed.missing:
        console.print(
            f"not in the estimate (no price; run tools/prices.py or plan --live): {'; '.join(summed.missing)}",
            soft_wrap=True,
        )
    return summed


def estimate_sum(summed: cost.Total) -> str:
    """The sum per hour and per month. A part without a price is not in it, so it is a floor ("at least"); groups
    that scale make it a range, from every group at its min_count to every group at its count.

    >>> estimate_sum(cost.Total(hourly=10.0, missing=[], unconfirmed=False, hourly_least=2.0))
    '$2.00 to $10.00 per hour, $1,460 to $7,300 per month (730 h; groups that scale between min_count and count)'
    >>> estimate_sum(cost.Total(hourly=10.0, missing=["x"], unconfirmed=False, hourly_least=2.0))
    'at least $2.00 per hour, at least $1,460 per month (730 h; $10.00 per hour with groups that scale at their count)'
    """
    hours, least, most = cost.HOURS_PER_MONTH, summed.least, summed.hourly
    if summed.missing:
        scaled = f"; ${most:,.2f} per hour with groups that scale at their count" if summed.scales else ""
        return f"at least ${least:,.2f} per hour, at least ${least * hours:,.0f} per month ({hours} h{scaled})"
    if summed.scales:
        return (
            f"${least:,.2f} to ${most:,.2f} per hour, ${least * hours:,.0f} to ${most * hours:,.0f} per month "
            f"({hours} h; groups that scale between min_count and count)"
        )
    return f"${most:,.2f} per hour, ${most * hours:,.0f} per month ({hours} h)"


def _usd(value: float) -> str:
    """$1,234.57 and $0.045: cents, or three decimals below a dollar (NAT gateways and endpoints bill $0.0x)."""
    return f"${value:,.2f}" if value >= 1 else f"${value:.3f}"


def print_deep_health_checks(config: ClusterConfig, console: Console) -> None:
    """Per HyperPod group: its deep health checks and what they add to every new node, or what it goes without."""
    weights = deploy_time.Weights.load()
    for group in config.compute:
        checks = group.deep_health_checks
        if checks:
            cost = sum(weights.deep_health_checks[check] for check in checks)
            text = f"{' + '.join(checks)}, ~{cost:.0f} min more for every new node"
        else:
            possible = possible_deep_health_checks(group.instance.is_accelerated, group.efa, group.count)
            cost = sum(weights.deep_health_checks[check] for check in possible)
            text = f"none ({' + '.join(possible)} would add ~{cost:.0f} min to every new node)"
        console.print(f"deep health checks of {group.name}: {text}", soft_wrap=True)


def print_deploy_time(estimate: deploy_time.DeployEstimate, console: Console, *, shared_image: bool = True) -> None:
    """The deploy's critical path, when nodes take jobs, and the one-stack-at-a-time figure. `shared_image` False
    (`storage.lustre: none`): no /fsx to import the image into, so each job pulls it (an import of its own, unconfirmed
    to take as long as the shared one)."""
    console.print(estimate.summary(), soft_wrap=True)
    first, container = estimate.first_job, estimate.first_container_job
    if first is not None and container is not None:
        how = "imported into /fsx" if shared_image else "then pulled from ECR by each job: no /fsx to import it into"
        console.print(
            f"first job ~{first:.0f} min after `cdk deploy --all --concurrency 8` starts; container jobs "
            f"~{container:.0f} min (image built and {how})",
            soft_wrap=True,
        )
    if node_images := estimate.node_image_times():
        console.print(node_images, soft_wrap=True)
    console.print(f"without --concurrency (one stack at a time): ~{estimate.sequential:.0f} min", soft_wrap=True)


def _assembly_estimate(config: ClusterConfig, assembly: str | None) -> deploy_time.DeployEstimate:
    """The estimate of `assembly`, or of `config` synthesized (with ./cdk.json's context when there is one)."""
    if assembly is not None:
        return deploy_time.estimate_assembly(assembly)
    import aws_cdk as cdk  # only here: jsii starts node, which validate and --assembly never need

    from fmcluster.stacks import build

    cdk_json = Path("cdk.json")
    context = json.loads(cdk_json.read_text()).get("context", {}) if cdk_json.is_file() else {}
    with tempfile.TemporaryDirectory(prefix="fmcluster-plan-") as outdir:
        app = cdk.App(outdir=outdir, context=context)
        build(app, config)
        app.synth()
        return deploy_time.estimate_assembly(outdir)


if __name__ == "__main__":
    sys.exit(main())
