"""S3-event Lambda: judge an uploaded nccl-tests log and publish CloudWatch metrics.

The sbatch script fmcluster/node/nccl-tests.sbatch uploads its output to
    s3://<bucket>/nccl-tests/<instance_type>/<nodes>n/<job>.log
For each such object this function reads the log, splits it into its result tables (`nccl_log.parse`, a pure
function that also says which collective each table measured), and for every usable table publishes to namespace
fmcluster/nccl with dimensions Cluster, InstanceType, Nodes (and Collective, for collectives other than all_reduce):
    BusBandwidth                the best bus bandwidth (GB/s) inside each message-size class (dimension SizeClass)
    LargestMessageBusBandwidth  the bus bandwidth at the largest message size (the better of out-of-place, in-place)
    AvgBusBandwidth             nccl-tests' own "Avg bus bandwidth" line
    BaselineBusBandwidth        the threshold the largest message was held to (judged runs only)
    BelowBaseline               1 when the largest message fell below the baseline, else 0 (also published with
                                dimensions Cluster, InstanceType only: the alarm's series, whatever the node count)
and, for any upload or table it rejects, RejectedResults = 1 with dimension Cluster.

Only multi-node all_reduce runs with data validation on, whose ranks match the instance type (one rank per GPU), are
judged: the baselines are all_reduce figures over EFA. A single-node run measures NVLink, another collective has other
bandwidths, and a run with `-c 0` never checked its results; all are published but never set or clear BelowBaseline.
The baseline per instance type comes from the BASELINES environment variable (built at synth time from fmcluster.nccl
and the instance catalog, with its GPU count): a published figure
for the same node count at the largest published message size not above the run's largest message, held to
PUBLISHED_MARGIN of it; where nothing is published, LINE_RATE_FRACTION of the EFA line rate in GB/s. Runs whose
largest message is below MIN_BASELINE_BYTES are not judged (bus bandwidth is latency-bound there).

Bad input (a key outside the layout, an unknown instance type, a log that is empty or holds no table, a table that is
truncated, garbled, failed, reports #wrong > 0, out-of-bounds values or FAILED, cannot be told apart from another
collective, ran on more or fewer hosts or ranks than the key's node count and the instance type's GPUs, or, on several
EFA instances, over another network than the aws-ofi-nccl plugin, as NCCL's "Using network <name>" line says) is logged
as a structured rejection with its reason and the function returns normally: S3 retries an asynchronous invocation
that raises, and a bad log would only fail again.

Each published result's log line names the network NCCL used (`network`; None when the log has no NCCL INFO lines:
nccl-tests.sbatch runs with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT so that it has).

Environment: CLUSTER_NAME, BASELINES (JSON), LINE_RATE_FRACTION, PUBLISHED_MARGIN, MIN_BASELINE_BYTES,
MAX_LOG_BYTES (optional; default 16 MiB).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import boto3
import nccl_log  # next to this file: the Lambda's task root (and tests) put this folder on sys.path
from botocore.exceptions import ClientError
from nccl_log import GIB, KIB, MIB, Run

NAMESPACE = "fmcluster/nccl"
KEY_PATTERN = re.compile(
    r"^nccl-tests/(?P<instance_type>[a-z][a-z0-9-]*\.[a-z0-9-]+)/(?P<nodes>[1-9][0-9]{0,4})n/"
    r"(?P<job>[A-Za-z0-9][A-Za-z0-9._-]{0,127})\.log$"
)
DEFAULT_MAX_LOG_BYTES = 16 * 1024 * 1024
JUDGED_COLLECTIVE = "all_reduce"
"""The published figures and the line-rate rule are all_reduce bus bandwidths; other collectives are only measured."""


# --- structured logs ----------------------------------------------------------------------------------------------
def log(level: str, message: str, **fields: Any) -> None:
    """One JSON object per line on stdout, which Lambda sends to the function's log group."""
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "level": level, "message": message}
    entry.update(fields)
    print(json.dumps(entry, default=str, sort_keys=True), flush=True)


# --- the baseline -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Baseline:
    threshold_gbs: float
    basis: str


@dataclass(frozen=True)
class Settings:
    cluster: str
    baselines: dict[str, dict[str, Any]]
    line_rate_fraction: float = 0.7
    published_margin: float = 0.9
    min_baseline_bytes: int = GIB
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Settings:
        environ = dict(os.environ if environ is None else environ)
        return cls(
            cluster=environ["CLUSTER_NAME"],
            baselines=json.loads(environ["BASELINES"]),
            line_rate_fraction=float(environ.get("LINE_RATE_FRACTION", "0.7")),
            published_margin=float(environ.get("PUBLISHED_MARGIN", "0.9")),
            min_baseline_bytes=int(environ.get("MIN_BASELINE_BYTES", str(GIB))),
            max_log_bytes=int(environ.get("MAX_LOG_BYTES", str(DEFAULT_MAX_LOG_BYTES))),
        )


def _size(n: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def baseline(
    spec: dict[str, Any], instance_type: str, nodes: int, largest_size: int, settings: Settings
) -> Baseline | None:
    """The bus bandwidth the largest message of a run must reach, and why; None when there is nothing to hold it to."""
    if largest_size < settings.min_baseline_bytes:
        return None
    published = [
        p for p in spec.get("published", []) if int(p["nodes"]) == nodes and int(p["message_bytes"]) <= largest_size
    ]
    if published:
        best = max(published, key=lambda p: int(p["message_bytes"]))
        return Baseline(
            threshold_gbs=round(float(best["bus_gbs"]) * settings.published_margin, 2),
            basis=(
                f"{settings.published_margin:.0%} of the published {best['bus_gbs']} GB/s for {nodes}x {instance_type} "
                f"at {_size(int(best['message_bytes']))} ({best.get('source', 'published')})"
            ),
        )
    gbps = float(spec.get("efa_gbps", 0))
    if gbps <= 0:
        return None
    return Baseline(
        threshold_gbs=round(gbps / 8 * settings.line_rate_fraction, 2),
        basis=(
            f"{settings.line_rate_fraction:.0%} of the {gbps:g} Gbps EFA line rate ({gbps / 8:g} GB/s); "
            "nothing published"
        ),
    )


# --- metrics ------------------------------------------------------------------------------------------------------
def metric_data(
    run: Run, *, cluster: str, instance_type: str, nodes: int, judged: Baseline | None
) -> list[dict[str, Any]]:
    """The CloudWatch datapoints for one usable table; collectives other than all_reduce carry a Collective dimension.

    BelowBaseline is published only for a judged run, so an unjudged one (a single node, another collective, a short
    run) never sets or clears the alarm.
    """
    dimensions = [
        {"Name": "Cluster", "Value": cluster},
        {"Name": "InstanceType", "Value": instance_type},
        {"Name": "Nodes", "Value": str(nodes)},
    ]
    if run.collective != JUDGED_COLLECTIVE:
        dimensions.append({"Name": "Collective", "Value": str(run.collective)})
    rate = "Gigabytes/Second"
    data = [
        {
            "MetricName": "BusBandwidth",
            "Dimensions": [*dimensions, {"Name": "SizeClass", "Value": name}],
            "Value": value,
            "Unit": rate,
        }
        for name, value in run.size_classes().items()
    ]
    data.append(
        {
            "MetricName": "LargestMessageBusBandwidth",
            "Dimensions": dimensions,
            "Value": run.largest_bus_bandwidth,
            "Unit": rate,
        }
    )
    data.append(
        {"MetricName": "AvgBusBandwidth", "Dimensions": dimensions, "Value": run.avg_bus_bandwidth, "Unit": rate}
    )
    if judged is not None:
        below = 1.0 if run.largest_bus_bandwidth < judged.threshold_gbs else 0.0
        data.append(
            {
                "MetricName": "BaselineBusBandwidth",
                "Dimensions": dimensions,
                "Value": judged.threshold_gbs,
                "Unit": rate,
            }
        )
        data.append({"MetricName": "BelowBaseline", "Dimensions": dimensions, "Value": below, "Unit": "None"})
        data.append({"MetricName": "BelowBaseline", "Dimensions": dimensions[:2], "Value": below, "Unit": "None"})
    return data


def placement_problem(run: Run, *, instance_type: str, nodes: int, gpus: int) -> str | None:
    """Why the ranks of `run` do not match `nodes` x `instance_type` (one rank per GPU), or None.

    >>> placement_problem(Run(hosts=["a", "b"], ranks=8), instance_type="p5.48xlarge", nodes=2, gpus=8)
    '8 ranks on 2 nodes, but 2x p5.48xlarge (8 GPUs each) run 16 ranks, one per GPU'
    """
    if run.hosts and len(run.hosts) != nodes:
        shown = ", ".join(run.hosts[:8]) + (", ..." if len(run.hosts) > 8 else "")
        return f"the key says {nodes} nodes but the log's ranks ran on {len(run.hosts)} hosts ({shown})"
    if run.ranks and gpus and run.ranks != nodes * gpus:
        return (
            f"{run.ranks} ranks on {nodes} nodes, but {nodes}x {instance_type} ({gpus} GPUs each) run "
            f"{nodes * gpus} ranks, one per GPU"
        )
    return None


PLUGIN_NETWORKS = ("libfabric", "aws libfabric", "ofi")
"""The names NCCL knows the aws-ofi-nccl plugin by, case aside (NCCL compares NCCL_NET with strcasecmp): "AWS Libfabric"
up to plugin v1.12.1-aws, "Libfabric" from v1.13.0-aws, which also answers to "AWS Libfabric" and "OFI"
(aws/aws-ofi-nccl src/nccl_ofi_interface_nvidia.c(pp), `nvidia_plugin_name_fixup`)."""


def network_problem(run: Run, *, nodes: int, efa: bool) -> str | None:
    """Why a multi-node run on EFA instances did not measure EFA: NCCL named another network than the plugin.

    >>> network_problem(Run(networks=["Socket"]), nodes=2, efa=True)
    "NCCL used its Socket network, not EFA (the aws-ofi-nccl plugin): the bandwidth is the sockets', not EFA's"
    """
    others = [name for name in run.networks if name.lower() not in PLUGIN_NETWORKS]
    if nodes < 2 or not efa or not others:
        return None
    return (
        f"NCCL used its {', '.join(others)} network, not EFA (the aws-ofi-nccl plugin): the bandwidth is the "
        f"{'sockets' if others == ['Socket'] else 'other network'}', not EFA's"
    )


def why_not_judged(run: Run, nodes: int) -> str | None:
    """Why a usable run is not held to a baseline (None: judge it)."""
    if run.collective != JUDGED_COLLECTIVE:
        return f"{run.collective} is measured, not judged: the baselines are all_reduce bus bandwidths"
    if nodes < 2:
        return "a single-node run measures NVLink, not EFA; fmcluster has no NVLink baseline"
    if not run.ranks:
        return "the log lists no '# Rank' lines, so its ranks per node cannot be checked"
    if not run.validated:
        return "validation was off (-c 0): a fast run with wrong results would pass, so it neither sets nor clears"
    return None


# --- the handler --------------------------------------------------------------------------------------------------
def _s3():
    return boto3.client("s3")


def _cloudwatch():
    return boto3.client("cloudwatch")


class Rejected(Exception):
    """An upload that is not a usable nccl-tests result; logged, never retried."""

    def __init__(self, reason: str, **fields: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fields = fields


def handler(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """Entry point: one S3 ObjectCreated notification (one or more records); counts tables accepted and rejected."""
    settings = Settings.from_environment()
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        _reject(
            settings,
            Rejected("not an S3 event: no Records"),
            event_keys=sorted(event) if isinstance(event, dict) else None,
        )
        return {"accepted": 0, "rejected": 1}
    accepted = rejected = 0
    for record in records:
        try:
            good, bad = _process(record, settings)
            accepted, rejected = accepted + good, rejected + bad
        except Rejected as rejection:
            _reject(settings, rejection)
            rejected += 1
    return {"accepted": accepted, "rejected": rejected}


def _reject(settings: Settings, rejection: Rejected, **fields: Any) -> None:
    log("WARNING", "rejected nccl-tests upload", reason=rejection.reason, **rejection.fields, **fields)
    _cloudwatch().put_metric_data(
        Namespace=NAMESPACE,
        MetricData=[
            {
                "MetricName": "RejectedResults",
                "Dimensions": [{"Name": "Cluster", "Value": settings.cluster}],
                "Value": 1.0,
                "Unit": "Count",
            }
        ],
    )


def _process(record: object, settings: Settings) -> tuple[int, int]:
    """Judge every table of one uploaded log: (tables published, tables rejected)."""
    try:
        bucket = record["s3"]["bucket"]["name"]  # type: ignore[index]
        raw_key = record["s3"]["object"]["key"]  # type: ignore[index]
    except (KeyError, TypeError):
        raise Rejected("not an S3 object notification: no s3.bucket.name or s3.object.key") from None
    key = urllib.parse.unquote_plus(raw_key)
    where = {"bucket": bucket, "key": key}
    match = KEY_PATTERN.match(key)
    if not match:
        raise Rejected(
            "key does not follow nccl-tests/<instance_type>/<nodes>n/<job>.log "
            "(e.g. nccl-tests/p5.48xlarge/2n/1234.log)",
            **where,
        )
    instance_type, nodes = match["instance_type"], int(match["nodes"])
    spec = settings.baselines.get(instance_type)
    if spec is None:
        raise Rejected(
            f"unknown instance type {instance_type!r}; this cluster's: {', '.join(sorted(settings.baselines))}", **where
        )
    text = _read(bucket, key, settings.max_log_bytes, where)
    try:
        runs = nccl_log.parse(text)
    except nccl_log.ParseError as error:
        raise Rejected(str(error), **where) from None
    published = rejected = 0
    for number, run in enumerate(runs, start=1):
        table = {**where, "table": number, "collective": run.collective}
        problem = (
            run.problem
            or placement_problem(run, instance_type=instance_type, nodes=nodes, gpus=int(spec.get("gpus", 0)))
            or network_problem(run, nodes=nodes, efa=bool(spec.get("efa_gbps")))
        )
        if problem:
            _reject(settings, Rejected(problem, **table))
            rejected += 1
            continue
        unjudged = why_not_judged(run, nodes)
        judged = None if unjudged else baseline(spec, instance_type, nodes, run.largest_size, settings)
        data = metric_data(run, cluster=settings.cluster, instance_type=instance_type, nodes=nodes, judged=judged)
        _cloudwatch().put_metric_data(Namespace=NAMESPACE, MetricData=data)
        published += 1
        log(
            "INFO",
            "published nccl-tests result",
            **table,
            identified_by=run.identified_by,
            instance_type=instance_type,
            nodes=nodes,
            ranks=run.ranks,
            rows=len(run.rows),
            largest_message_bytes=run.largest_size,
            largest_message_busbw=run.largest_bus_bandwidth,
            avg_busbw=run.avg_bus_bandwidth,
            validated=run.validated,
            nccl_tests_version=run.nccl_tests_version,
            network=", ".join(run.networks) or None,
            baseline_gbs=judged.threshold_gbs if judged else None,
            baseline_basis=judged.basis
            if judged
            else f"not judged: {unjudged or f'largest message below {_size(settings.min_baseline_bytes)} or no EFA'}",
            below_baseline=bool(judged and run.largest_bus_bandwidth < judged.threshold_gbs),
        )
    return published, rejected


def _read(bucket: str, key: str, max_bytes: int, where: dict[str, str]) -> str:
    try:
        response = _s3().get_object(Bucket=bucket, Key=key)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "404", "AccessDenied", "403"):
            raise Rejected(f"cannot read the object: {code}", **where) from None
        raise
    length = int(response.get("ContentLength", 0))
    if length > max_bytes:
        response["Body"].close()
        raise Rejected(
            f"the log is {length} bytes, over the {max_bytes}-byte limit; is this an nccl-tests log?", **where
        )
    body = response["Body"].read(max_bytes + 1)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Rejected(f"the log is not UTF-8 text ({error.reason} at byte {error.start})", **where) from None
