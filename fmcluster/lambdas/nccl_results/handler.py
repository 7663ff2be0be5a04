"""S3-event Lambda: judge an uploaded nccl-tests all_reduce_perf log and publish CloudWatch metrics.

The sbatch script fmcluster/node/nccl-tests.sbatch uploads its output to
    s3://<bucket>/nccl-tests/<instance_type>/<nodes>n/<job>.log
For each such object this function reads the log, parses it (`parse_all_reduce`, a pure function), and publishes to
namespace fmcluster/nccl with dimensions Cluster, InstanceType, Nodes:
    BusBandwidth                the best bus bandwidth (GB/s) inside each message-size class (dimension SizeClass)
    LargestMessageBusBandwidth  the bus bandwidth at the largest message size (the better of out-of-place, in-place)
    AvgBusBandwidth             nccl-tests' own "Avg bus bandwidth" line
    BaselineBusBandwidth        the threshold the largest message was held to
    BelowBaseline               1 when the largest message fell below the baseline, else 0 (also published with
                                dimensions Cluster, InstanceType only: the alarm's series, whatever the node count)
and, for any upload it rejects, RejectedResults = 1 with dimension Cluster.

The baseline per instance type comes from the BASELINES environment variable (built at synth time from
fmcluster.nccl and the instance catalog): a published figure for the same node count at the largest published
message size not above the run's largest message, held to PUBLISHED_MARGIN of it; where nothing is published,
LINE_RATE_FRACTION of the EFA line rate in GB/s. Runs whose largest message is below MIN_BASELINE_BYTES are not
judged (bus bandwidth is latency-bound there).

Bad input (a key outside the layout, an unknown instance type, a log that is empty, truncated, garbled, has no
header, reports #wrong > 0 or out-of-bounds values, or lists more or fewer hosts than the key's node count) is
logged as a structured rejection and the function returns normally: S3 retries an asynchronous invocation that
raises, and a bad log would only fail again.

Environment: CLUSTER_NAME, BASELINES (JSON), LINE_RATE_FRACTION, PUBLISHED_MARGIN, MIN_BASELINE_BYTES,
MAX_LOG_BYTES (optional; default 16 MiB).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

NAMESPACE = "fmcluster/nccl"
KEY_PATTERN = re.compile(
    r"^nccl-tests/(?P<instance_type>[a-z][a-z0-9-]*\.[a-z0-9-]+)/(?P<nodes>[1-9][0-9]{0,4})n/"
    r"(?P<job>[A-Za-z0-9][A-Za-z0-9._-]{0,127})\.log$"
)
DEFAULT_MAX_LOG_BYTES = 16 * 1024 * 1024
KIB, MIB, GIB = 1024, 1024**2, 1024**3
SIZE_CLASSES = (
    ("8B-64KiB", 0, 64 * KIB),
    ("64KiB-16MiB", 64 * KIB, 16 * MIB),
    ("16MiB-1GiB", 16 * MIB, GIB),
    ("1GiB-and-up", GIB, math.inf),
)
"""(name, lower bound exclusive, upper bound inclusive): latency-bound, mid-size, bandwidth-bound, largest."""


# --- structured logs ----------------------------------------------------------------------------------------------
def log(level: str, message: str, **fields: Any) -> None:
    """One JSON object per line on stdout, which Lambda sends to the function's log group."""
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "level": level, "message": message}
    entry.update(fields)
    print(json.dumps(entry, default=str, sort_keys=True), flush=True)


# --- the parser ---------------------------------------------------------------------------------------------------
class ParseError(ValueError):
    """The text is not a complete, valid all_reduce_perf result."""


@dataclass(frozen=True)
class Measurement:
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    """Elements that failed validation; None when the run did not validate (-c 0 prints N/A)."""


@dataclass(frozen=True)
class Row:
    size: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: Measurement
    in_place: Measurement

    @property
    def busbw(self) -> float:
        """The better of the out-of-place and in-place bus bandwidth."""
        return max(self.out_of_place.busbw, self.in_place.busbw)


@dataclass(frozen=True)
class Result:
    rows: tuple[Row, ...]
    avg_bus_bandwidth: float
    out_of_bounds: int | None = None
    hosts: tuple[str, ...] = ()
    """Distinct host names of the ranks, in rank order, from the '# Using devices' block (empty when absent)."""
    ranks: int = 0
    nccl_tests_version: str | None = None
    validated: bool = True
    """False when the run skipped data validation (#wrong is N/A)."""

    @property
    def largest_size(self) -> int:
        return max(row.size for row in self.rows)

    @property
    def largest_bus_bandwidth(self) -> float:
        return max(row.busbw for row in self.rows if row.size == self.largest_size)

    def size_classes(self) -> dict[str, float]:
        """The best bus bandwidth inside each size class that has rows."""
        found: dict[str, float] = {}
        for name, low, high in SIZE_CLASSES:
            values = [row.busbw for row in self.rows if low < row.size <= high or (low == 0 and row.size == 0)]
            if values:
                found[name] = max(values)
        return found


_PREFIX = re.compile(r"^(?:\s*\d+: |\[\d+,\d+\]<std(?:out|err)>:)")
"""`srun -l` labels ("0: ") and Open MPI's --tag-output ("[1,0]<stdout>:")."""
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ABORT)\b")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+")
_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?\s*$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
HEADER = (
    "size",
    "count",
    "type",
    "redop",
    "root",
    "time",
    "algbw",
    "busbw",
    "#wrong",
    "time",
    "algbw",
    "busbw",
    "#wrong",
)


def _header_tokens(comment: str) -> list[str]:
    return comment.lstrip("#").split()


def _is_header(tokens: list[str]) -> bool:
    return tokens[:2] == ["size", "count"]


def _check_header(tokens: list[str], number: int) -> bool:
    """True when the table carries a trailing timestamp column; ParseError for any other layout."""
    normalized = ["time" if token == "cputime" else token for token in tokens]
    if normalized == list(HEADER):
        return False
    if normalized == [*HEADER, "timestamp"]:
        return True
    raise ParseError(
        f"line {number}: unsupported table header {' '.join(tokens)!r}; expected the all_reduce_perf columns "
        f"{' '.join(HEADER)} (nccl-tests 2.13 or later, without per-iteration timing)"
    )


def _float(token: str, what: str) -> float:
    value = float(token)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} {token!r} is not a finite, non-negative number")
    return value


def _wrong(token: str) -> int | None:
    if token == "N/A":
        return None
    value = float(token)
    if not value.is_integer() or value < 0:
        raise ValueError(f"#wrong {token!r} is not a count")
    return int(value)


def _measurement(tokens: list[str]) -> Measurement:
    return Measurement(
        time_us=_float(tokens[0], "time"),
        algbw=_float(tokens[1], "algbw"),
        busbw=_float(tokens[2], "busbw"),
        wrong=_wrong(tokens[3]),
    )


def _row(tokens: list[str], timestamps: bool) -> Row:
    expected = 15 if timestamps else 13
    if len(tokens) != expected:
        raise ValueError(f"{len(tokens)} fields where the header has {expected}")
    size, count, root = int(tokens[0]), int(tokens[1]), int(tokens[4])
    if size < 0 or count < 0:
        raise ValueError("negative size or count")
    if not _IDENT.match(tokens[2]) or not _IDENT.match(tokens[3]):
        raise ValueError(f"type {tokens[2]!r} or redop {tokens[3]!r} is not a name")
    return Row(size, count, tokens[2], tokens[3], root, _measurement(tokens[5:9]), _measurement(tokens[9:13]))


def parse_all_reduce(text: str) -> Result:
    """Parse the stdout of nccl-tests all_reduce_perf (2.13 or later; srun -l and mpirun tags are stripped).

    Raises ParseError (a ValueError) for empty text, no result header, a garbled row, a log that ends before the
    "# Avg bus bandwidth" line (truncated), any row with #wrong > 0, or out-of-bounds values reported.
    """
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty output: the log has no text")
    rows: list[Row] = []
    hosts: list[str] = []
    ranks: set[int] = set()
    version = None
    header_at = None
    timestamps = False
    out_of_bounds = None
    average = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _PREFIX.sub("", raw.rstrip("\r"), count=1).strip()
        if not line:
            continue
        if line.startswith("#"):
            if average is not None:
                continue  # the trailer after the summary ("#", "# Collective test concluded: ...")
            if match := _VERSION.match(line):
                version = match[1]
            elif match := _RANK.match(line):
                ranks.add(int(match[1]))
                if match[2] not in hosts:
                    hosts.append(match[2])
            elif _is_header(tokens := _header_tokens(line)):
                if header_at is not None:
                    raise ParseError(f"line {number}: a second result table header (line {header_at} has one)")
                timestamps = _check_header(tokens, number)
                header_at = number
            elif match := _OUT_OF_BOUNDS.match(line):
                out_of_bounds = int(match[1])
            elif match := _AVG.match(line):
                if header_at is None:
                    break  # reported below as a missing header
                try:
                    average = _float(match[1], "Avg bus bandwidth")
                except ValueError as error:
                    raise ParseError(f"line {number}: garbled summary {line!r}: {error}") from None
            continue
        if _NCCL_LOG.search(line) or header_at is None or average is not None:
            continue  # NCCL_DEBUG output, and whatever precedes the table or follows its summary
        try:
            row = _row(line.split(), timestamps)
        except ValueError as error:
            raise ParseError(f"line {number}: garbled result row {line!r}: {error}") from None
        rows.append(row)
    if header_at is None:
        raise ParseError(
            "no all_reduce_perf result header ('# size count type redop root time algbw busbw #wrong ...') found; "
            "is this nccl-tests output?"
        )
    if not rows:
        raise ParseError(f"the result table (header at line {header_at}) has no rows: the run produced no results")
    if average is None:
        raise ParseError(
            f"truncated: no '# Avg bus bandwidth' line after the last row (size {rows[-1].size} B); the job was cut "
            "off or the log is incomplete"
        )
    wrong = [
        f"{row.size} B {label}: {m.wrong}"
        for row in rows
        for label, m in (("out-of-place", row.out_of_place), ("in-place", row.in_place))
        if m.wrong
    ]
    if wrong:
        raise ParseError(f"data corruption: #wrong > 0 ({'; '.join(wrong)}); the results are not valid")
    if out_of_bounds:
        raise ParseError(f"data corruption: {out_of_bounds} out-of-bounds values reported; the results are not valid")
    validated = all(m.wrong is not None for row in rows for m in (row.out_of_place, row.in_place))
    return Result(
        rows=tuple(rows),
        avg_bus_bandwidth=average,
        out_of_bounds=out_of_bounds,
        hosts=tuple(hosts),
        ranks=len(ranks),
        nccl_tests_version=version,
        validated=validated,
    )


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
    result: Result, *, cluster: str, instance_type: str, nodes: int, judged: Baseline | None
) -> list[dict[str, Any]]:
    """The CloudWatch datapoints for one parsed run."""
    dimensions = [
        {"Name": "Cluster", "Value": cluster},
        {"Name": "InstanceType", "Value": instance_type},
        {"Name": "Nodes", "Value": str(nodes)},
    ]
    rate = "Gigabytes/Second"
    data = [
        {
            "MetricName": "BusBandwidth",
            "Dimensions": [*dimensions, {"Name": "SizeClass", "Value": name}],
            "Value": value,
            "Unit": rate,
        }
        for name, value in result.size_classes().items()
    ]
    data.append(
        {
            "MetricName": "LargestMessageBusBandwidth",
            "Dimensions": dimensions,
            "Value": result.largest_bus_bandwidth,
            "Unit": rate,
        }
    )
    data.append(
        {"MetricName": "AvgBusBandwidth", "Dimensions": dimensions, "Value": result.avg_bus_bandwidth, "Unit": rate}
    )
    if judged is not None:
        below = 1.0 if result.largest_bus_bandwidth < judged.threshold_gbs else 0.0
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
    """Entry point: one S3 ObjectCreated notification (one or more records)."""
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
            _process(record, settings)
            accepted += 1
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


def _process(record: object, settings: Settings) -> None:
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
        result = parse_all_reduce(text)
    except ParseError as error:
        raise Rejected(str(error), **where) from None
    if result.hosts and len(result.hosts) != nodes:
        raise Rejected(
            f"the key says {nodes} nodes but the log's ranks ran on {len(result.hosts)} hosts "
            f"({', '.join(result.hosts[:8])}{', ...' if len(result.hosts) > 8 else ''})",
            **where,
        )
    judged = baseline(spec, instance_type, nodes, result.largest_size, settings)
    data = metric_data(result, cluster=settings.cluster, instance_type=instance_type, nodes=nodes, judged=judged)
    _cloudwatch().put_metric_data(Namespace=NAMESPACE, MetricData=data)
    log(
        "INFO",
        "published nccl-tests result",
        **where,
        instance_type=instance_type,
        nodes=nodes,
        ranks=result.ranks,
        rows=len(result.rows),
        largest_message_bytes=result.largest_size,
        largest_message_busbw=result.largest_bus_bandwidth,
        avg_busbw=result.avg_bus_bandwidth,
        validated=result.validated,
        nccl_tests_version=result.nccl_tests_version,
        baseline_gbs=judged.threshold_gbs if judged else None,
        baseline_basis=judged.basis
        if judged
        else f"not judged: largest message below {_size(settings.min_baseline_bytes)} or no EFA",
        below_baseline=bool(judged and result.largest_bus_bandwidth < judged.threshold_gbs),
    )


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
            f"the log is {length} bytes, over the {max_bytes}-byte limit; is this an all_reduce_perf log?", **where
        )
    body = response["Body"].read(max_bytes + 1)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Rejected(f"the log is not UTF-8 text ({error.reason} at byte {error.start})", **where) from None
