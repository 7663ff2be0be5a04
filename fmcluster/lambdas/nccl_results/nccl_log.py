"""Read nccl-tests output: every result table in a log, which collective it measured, and why a table is unusable.

nccl-tests prints the same table for every collective (src/util.cu `writeResultHeader`, `writeBenchmarkLinePreamble`,
`writeBenchmarkLineBody`, `writeResultFooter`), so a table alone does not say what it measured. In order of trust:
  1. `# Collective test starting: <binary>` (printed by nccl-tests 2.14 and later, once per table);
  2. the binary's name (`alltoall_perf`, `all_gather_perf_mpi`, ...) on a line before the table (the command line);
  3. the rows: `redop` is `none` for broadcast, all_gather and alltoall, the operation's name for the reductions and
     for sendrecv, which reduces nothing but prints the `-o` operation it was given (`sum` by default: src/sendrecv.cu
     passes `run_opnames[j]` to `TimeTest`, while the others pass "none"); `root` is -1 for those without a root;
     size = count x type size for all_reduce, reduce, broadcast and sendrecv, but count x type size x ranks for
     all_gather, alltoall and reduce_scatter (the `*GetCollByteCount` functions of src/<collective>.cu: size is
     max(send, receive bytes), count the per-rank element count); and sendrecv never checks its in-place half
     (`SendRecvInitData` sets `reportErrors = in_place ? 0 : 1`), so with validation on its in-place `#wrong` is
     always `N/A` where all_reduce prints a count. Without validation (`-c 0`) nothing tells a sendrecv table from an
     all_reduce one except its declaration.
A declared collective whose rows do not fit is a rejection, and so is a table that fits several collectives: it is
never guessed.

Formats read: nccl-tests 2.x (`size count type redop root ... #wrong`, optional `timestamp` column, `cputime`), the
older layouts without `root` or with `error` instead of `#wrong` (a maximum error, judged only through the
`Out of bounds values` line), and nccl-tests 1.x (`bytes N type op ... res`). Lines may carry `srun -l` labels
(`0: `) or Open MPI's `--tag-output` tags (`[1,0]<stdout>:`); NCCL_DEBUG lines and MPI warnings are skipped, except
NCCL's "Using network <name>" (`Run.networks`: which network the table's NCCL ran over).

>>> [(run.collective, run.problem) for run in parse(EXAMPLE)]
[('all_reduce', None)]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

KIB, MIB, GIB = 1024, 1024**2, 1024**3
TYPE_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "bfloat16": 2, "int32": 4, "uint32": 4,
    "int": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8,
}  # fmt: skip
"""nccl-tests' type names (src/common.cu `test_typenames`, 1.x and 2.x) and their sizes in bytes."""
SAME_SIZE = {"all_reduce", "reduce", "broadcast", "sendrecv"}
"""size = count x type size (src/<collective>.cu: send and receive counts equal the count)."""
PER_RANK = {"all_gather", "alltoall", "reduce_scatter"}
"""size = count x type size x ranks (the count is per rank)."""
REDUCING = {"all_reduce", "reduce", "reduce_scatter"}
NAMES_AN_OPERATION = REDUCING | {"sendrecv"}
"""The collectives whose rows carry an operation's name as `redop` in the layout with both `redop` and `root` (2.x).
The older layouts printed only the columns that apply: sendrecv had no `redop` column there (nccl-tests issue 104)."""
ROOTED = {"reduce", "broadcast"}
SIZE_CLASSES = (
    ("8B-64KiB", 0, 64 * KIB),
    ("64KiB-16MiB", 64 * KIB, 16 * MIB),
    ("16MiB-1GiB", 16 * MIB, GIB),
    ("1GiB-and-up", GIB, math.inf),
)
"""(name, lower bound exclusive, upper bound inclusive): latency-bound, mid-size, bandwidth-bound, largest."""
EXAMPLE = """# Collective test starting: all_reduce_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
  1073741824     268435456     float     sum      -1   4607.6  233.04  436.94      0   4565.6  235.18  440.96      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 438.95
"""

_PREFIX = re.compile(r"^\s*(?:(?P<srun>\d+): |\[\d+,(?P<mpi>\d+)\]<std(?:out|err)>:)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_BINARY = re.compile(r"(?:^|[/\s])(?P<name>[a-z_]+?)_perf(?:_mpi)?(?:\s|$)")
_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)(?:\s+Group\s+\d+)?(?:\s+Pid\s+\d+)?\s+on\s+(\S+)\s+device")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVERAGE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?\s*$")
_FAILURE = re.compile(r"(?:Test (?:NCCL |CUDA )?failure|^NCCL failure) (\S+:\d+)(.*)$")
_STOPPED = re.compile(r"^#\s*fmcluster: nccl-tests did not finish: ")
"""The line fmcluster/node/nccl-tests.sbatch appends when it stopped a run (time limit, scancel): a failed run."""
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ABORT)\b")
_USING_NETWORK = re.compile(r"\bNCCL INFO Using network (\S.*?)\s*$")
"""NCCL's INIT line naming the network it chose: `INFO(NCCL_INIT, "Using network %s", comm->ncclNet->name)` (NVIDIA/nccl
src/init.cc at v2.18.5-1, v2.23.4-1 and v2.30.7-1), printed as `<host>:<pid>:<tid> [<cuda device>] NCCL INFO <text>`
(src/debug.cc `ncclDebugLog`; a timestamp may come first with NCCL_DEBUG_TIMESTAMP_FORMAT)."""
_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
_MEASURED = ("time", "algbw", "busbw")


def collective_name(binary: str) -> str:
    """`all_gather_perf_mpi` -> `all_gather` (nccl-tests' binaries are <collective>_perf[_mpi])."""
    return re.sub(r"(_perf)?(_mpi)?$", "", binary.rsplit("/", 1)[-1])


@dataclass(frozen=True)
class Measurement:
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    """Elements that failed validation; None when not counted (`-c 0` prints N/A; old formats print an error)."""


@dataclass(frozen=True)
class Row:
    size: int
    count: int
    type: str
    redop: str | None
    """None in layouts without the column, or where an old alltoall left it blank."""
    root: int | None
    out_of_place: Measurement
    in_place: Measurement

    @property
    def busbw(self) -> float:
        """The better of the out-of-place and in-place bus bandwidth."""
        return max(self.out_of_place.busbw, self.in_place.busbw)


@dataclass
class Run:
    """One result table and what surrounds it; `problem` says why it cannot be used (None: usable)."""

    collective: str | None = None
    identified_by: str = ""
    rows: list[Row] = field(default_factory=list)
    avg_bus_bandwidth: float | None = None
    out_of_bounds: int | None = None
    hosts: list[str] = field(default_factory=list)
    """Distinct host names of the ranks, in rank order (empty when the log has no `# Rank` lines)."""
    ranks: int = 0
    nccl_tests_version: str | None = None
    networks: list[str] = field(default_factory=list)
    """The networks NCCL said it used ("Using network <name>") since the previous table, in order, each once: the
    aws-ofi-nccl plugin's name ("Libfabric", "AWS Libfabric" before plugin 1.13) or an internal one ("IB", "Socket").
    Empty when the log has no NCCL_DEBUG=INFO lines."""
    counts_wrong: bool = True
    """False for layouts whose error column is a maximum error rather than a count of wrong elements."""
    problem: str | None = None
    header_line: int = 0
    _declared: str | None = None
    _binary: str | None = None
    _failure: str | None = None
    _average_failed: bool = False

    @property
    def validated(self) -> bool:
        """False when the run skipped data validation (`-c 0`: every #wrong is N/A)."""
        return any(m.wrong is not None for row in self.rows for m in (row.out_of_place, row.in_place)) or (
            not self.counts_wrong and self.out_of_bounds is not None
        )

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


@dataclass(frozen=True)
class _Layout:
    left: tuple[str, ...]
    """The columns before the two measurements: size, count, type and any of redop, root."""
    half: int
    """Columns per measurement: time, algbw, busbw, #wrong, and with -R (per-iteration timing) i_min .. i_cv%."""
    counts_wrong: bool
    timestamp: bool

    @property
    def width(self) -> int:
        return len(self.left) + 2 * self.half


class ParseError(ValueError):
    """The text holds no nccl-tests result table at all."""


def _layout(tokens: list[str]) -> _Layout | None:
    names = ["time" if token == "cputime" else token for token in tokens]
    names = ["size" if n == "bytes" else "count" if n == "N" else "redop" if n == "op" else n for n in names]
    timestamp = names[-1:] == ["timestamp"]
    if timestamp:
        names = names[:-1]
    if "time" not in names or names[:3] != ["size", "count", "type"]:
        return None
    first = names.index("time")
    left, right = names[:first], names[first:]
    half = len(right) // 2
    wrong = right[3] if len(right) >= 4 else ""
    if half < 4 or right[:half] != right[half:] or right[:4] != [*_MEASURED, wrong]:
        return None
    if wrong not in ("#wrong", "error", "res") or not set(left[3:]) <= {"redop", "root"}:
        return None
    return _Layout(tuple(left), half, wrong == "#wrong", timestamp)


def _number(token: str, what: str) -> float:
    value = float(token)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} {token!r} is not a finite, non-negative number")
    return value


def _measurement(tokens: list[str], counts_wrong: bool) -> Measurement:
    time_us, algbw, busbw = (_number(token, what) for token, what in zip(tokens[:3], _MEASURED, strict=True))
    wrong = None
    if tokens[3] != "N/A":
        value = float(tokens[3])
        if counts_wrong:
            if not value.is_integer() or value < 0:
                raise ValueError(f"#wrong {tokens[3]!r} is not a count")
            wrong = int(value)
    return Measurement(time_us, algbw, busbw, wrong)


def _row(tokens: list[str], layout: _Layout) -> Row:
    if layout.timestamp:  # src/util.cu writeTimestamp: "%Y-%m-%d %H:%M:%S" after the in-place columns
        tokens = [token for token in tokens if not re.fullmatch(r"\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d(\.\d+)?", token)]
    left = dict.fromkeys(layout.left)
    given = tokens[: len(tokens) - 2 * layout.half]
    if len(given) == len(left) - 1 and "redop" in left:
        left.pop("redop")  # an old alltoall printed no redop at all
    if len(given) != len(left) or len(tokens) < 2 * layout.half:
        raise ValueError(f"{len(tokens)} fields where the header has {layout.width}")
    values = dict(zip(left, given, strict=True))
    size, count = int(values["size"]), int(values["count"])
    redop = values.get("redop")
    if not _IDENT.match(values["type"]) or (redop is not None and not _IDENT.match(redop)):
        raise ValueError(f"type {values['type']!r} or redop {redop!r} is not a name")
    root = int(values["root"]) if "root" in values else None
    measured = tokens[len(given) :]
    return Row(
        size,
        count,
        values["type"],
        redop,
        root,
        _measurement(measured[:4], layout.counts_wrong),
        _measurement(measured[layout.half : layout.half + 4], layout.counts_wrong),
    )


def _candidates(run: Run) -> tuple[set[str], str]:
    """The collectives whose byte counts, redop and root fit the rows, and the evidence."""
    sample = next((row for row in run.rows if row.count > 0 and row.type in TYPE_BYTES), None)
    if sample is None:
        return set(), "no row with a known type and a non-zero count"
    ratio = sample.size / (sample.count * TYPE_BYTES[sample.type])
    if ratio == 1:
        fits = SAME_SIZE | (PER_RANK if run.ranks == 1 else set())  # one rank: per-rank counts are the whole
    elif ratio.is_integer() and ratio > 1 and (not run.ranks or ratio == run.ranks):
        fits = set(PER_RANK)
    else:
        fits = set()
    fits = _by_operation(fits, sample)
    rooted = sample.root is not None and sample.root >= 0
    fits = fits & ROOTED if rooted else fits - ROOTED
    fits = _by_in_place_check(fits, run)
    evidence = (
        f"{sample.size} B = {sample.count} x {sample.type} ({TYPE_BYTES[sample.type]} B) x {ratio:g}, "
        f"redop {sample.redop or '(none printed)'}, root {sample.root if sample.root is not None else '(none printed)'}"
    )
    return fits, evidence


def _by_operation(fits: set[str], sample: Row) -> set[str]:
    """The collectives of `fits` that print `redop` as `sample` does."""
    if sample.redop is None:  # a column the layout lacks means the collective has none (old layouts)
        return fits - REDUCING
    if sample.redop == "none":
        return fits - NAMES_AN_OPERATION
    uniform_layout = sample.root is not None  # 2.x prints redop and root for every collective
    return fits & (NAMES_AN_OPERATION if uniform_layout else REDUCING)


def _by_in_place_check(fits: set[str], run: Run) -> set[str]:
    """With validation on, an in-place half never counted is not all_reduce's, a counted one not sendrecv's.

    src/sendrecv.cu sets `reportErrors = in_place ? 0 : 1`; src/all_reduce.cu leaves it at the `-c` setting.
    """
    if not run.counts_wrong or all(row.out_of_place.wrong is None for row in run.rows):
        return fits  # -c 0, or a layout whose error column is not a count: no evidence either way
    if all(row.in_place.wrong is None for row in run.rows):
        return fits - {"all_reduce"}
    return fits - {"sendrecv"}


def _identify(run: Run) -> None:
    fits, evidence = _candidates(run)
    declared: str | None
    if run._declared:
        declared, source = run._declared, "'# Collective test starting' line"
    else:
        declared, source = run._binary, "binary name before the table"
    if declared:
        run.collective, run.identified_by = declared, source
        known = SAME_SIZE | PER_RANK
        if declared in known and fits and declared not in fits:
            run.problem = f"the table's rows do not fit {declared} (named by the {source}): {evidence}"
        return
    if len(fits) == 1:
        run.collective, run.identified_by = fits.pop(), f"rows: {evidence}"
        return
    run.problem = (
        f"cannot tell which collective the table measured: no '# Collective test starting' line or binary name, "
        f"and the rows fit {', '.join(sorted(fits)) or 'none of them'} ({evidence})"
    )


def _judge(run: Run) -> None:
    """Set `run.problem` to the first reason the table cannot be used, if any."""
    if run._failure:
        run.problem = f"nccl-tests failed: {run._failure}"
    elif not run.rows:
        run.problem = f"the result table (header at line {run.header_line}) has no rows: the run produced no results"
    elif run.avg_bus_bandwidth is None:
        run.problem = (
            f"truncated: no '# Avg bus bandwidth' line after the last row (size {run.rows[-1].size} B); the job "
            "was cut off or the log is incomplete"
        )
    elif wrong := [
        f"{row.size} B {label}: {m.wrong}"
        for row in run.rows
        for label, m in (("out-of-place", row.out_of_place), ("in-place", row.in_place))
        if m.wrong
    ]:
        run.problem = f"data corruption: #wrong > 0 ({'; '.join(wrong)}); the results are not valid"
    elif run.out_of_bounds:
        run.problem = f"data corruption: {run.out_of_bounds} out-of-bounds values reported (FAILED)"
    elif run._average_failed:
        run.problem = "nccl-tests' own check failed: 'Avg bus bandwidth ... FAILED' (below 90% of its -a figure)"
    if run.problem is None:
        _identify(run)
    else:  # still say what the table was, as far as can be told
        fits = _candidates(run)[0] if run.rows else set()
        run.collective = run._declared or run._binary or (fits.pop() if len(fits) == 1 else None)


def _lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, text without its srun/mpirun label, whether it comes from the rank that prints the tables).

    nccl-tests built without MPI but started as several processes prints one full output per process (nccl-tests
    issue 107); with `srun -l` or `--tag-output` labels, only the lowest label that prints a table header is read.
    Failures are read from every label.
    """
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        match = _PREFIX.match(raw)
        label = None if match is None else int(match["srun"] or match["mpi"])
        line = raw[match.end() :] if match else raw
        if line.strip():
            lines.append((number, label, line.strip()))
    headers = {label for _, label, line in lines if line.startswith("#") and line.lstrip("#").split()[:1] == ["size"]}
    numbered = {label for label in headers if label is not None}
    reader = min(numbered) if len(headers) > 1 and None not in headers else None
    return [(number, line, reader is None or label == reader) for number, label, line in lines]


def parse(text: str) -> list[Run]:
    """Every result table of an nccl-tests log, in order, each identified and judged.

    Raises ParseError when the text is empty or holds no result table (with the failure nccl-tests printed, if any).
    """
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty output: the log has no text")
    runs: list[Run] = []
    pending = Run()  # what precedes the next table: its declared name, version, ranks
    current: Run | None = None
    layout: _Layout | None = None
    early_failure = None
    for number, line, printer in _lines(text):
        if match := _USING_NETWORK.search(line):  # every rank's, whichever prints the tables
            network_run = current if current is not None and current.avg_bus_bandwidth is None else pending
            if match[1] not in network_run.networks:
                network_run.networks.append(match[1])
            continue
        if _FAILURE.search(line) or _STOPPED.match(line):
            failure = f"{line} (line {number})"
            target = current if current is not None and current.avg_bus_bandwidth is None else None
            if target is not None:
                target._failure = target._failure or failure
            else:
                early_failure = early_failure or failure
            continue
        if not printer:
            continue
        if match := _STARTING.match(line):
            current, layout = None, None  # an unfinished table before it stays in `runs`, judged truncated
            pending = Run(
                _declared=collective_name(match[1]),
                nccl_tests_version=pending.nccl_tests_version,
                networks=pending.networks,
            )
            continue
        if match := _VERSION.match(line):
            pending.nccl_tests_version = match[1]
            continue
        if match := _RANK.match(line):
            if current is not None and current.avg_bus_bandwidth is not None:
                current = None  # a new run's device list
            if int(match[1]) == 0 and pending.ranks:
                pending.hosts, pending.ranks = [], 0
            pending.ranks += 1
            if match[2] not in pending.hosts:
                pending.hosts.append(match[2])
            continue
        if line.startswith("#"):
            tokens = line.lstrip("#").split()
            if tokens[:2] in (["size", "count"], ["bytes", "N"]):
                if current is not None and not current.rows and current.avg_bus_bandwidth is None:
                    runs.remove(current)  # a repeated header (several processes printing) before any row
                layout = _layout(tokens)
                current = Run(
                    nccl_tests_version=pending.nccl_tests_version,
                    hosts=list(pending.hosts),
                    ranks=pending.ranks,
                    networks=list(pending.networks),
                    header_line=number,
                    _declared=pending._declared,
                    _binary=pending._binary,
                    _failure=early_failure,
                )
                early_failure = None
                pending = Run(nccl_tests_version=pending.nccl_tests_version, hosts=pending.hosts, ranks=pending.ranks)
                runs.append(current)
                if layout is None:
                    current.problem = f"line {number}: unsupported table header {' '.join(tokens)!r}"
                else:
                    current.counts_wrong = layout.counts_wrong
                continue
            if current is None or current.avg_bus_bandwidth is not None:
                continue
            if match := _OUT_OF_BOUNDS.match(line):
                current.out_of_bounds = int(match[1])
            elif match := _AVERAGE.match(line):
                try:
                    current.avg_bus_bandwidth = _number(match[1], "Avg bus bandwidth")
                except ValueError as error:
                    current.problem = current.problem or f"line {number}: garbled summary {line!r}: {error}"
                    current.avg_bus_bandwidth = math.nan
                current._average_failed = match[2] == "FAILED"
            continue
        if current is None or current.avg_bus_bandwidth is not None or layout is None:
            if match := _BINARY.search(line):
                pending._binary = collective_name(match["name"])
            continue
        if _NCCL_LOG.search(line) or not line[0].isdigit():
            continue  # NCCL_DEBUG output, MPI warnings
        try:
            current.rows.append(_row(line.split(), layout))
        except ValueError as error:
            current.problem = current.problem or f"line {number}: garbled result row {line!r}: {error}"
    if not runs:
        if early_failure:
            raise ParseError(f"nccl-tests failed and the log holds no result table header: {early_failure}")
        raise ParseError(
            "no nccl-tests result table ('# size count type redop root time algbw busbw #wrong ...') found; "
            "is this nccl-tests output?"
        )
    if early_failure and runs[-1]._failure is None and runs[-1].avg_bus_bandwidth is None:
        runs[-1]._failure = early_failure
    for run in runs:
        if run.problem is None:
            _judge(run)
    return runs
