"""The nccl-tests log parser (fmcluster/lambdas/nccl_results/nccl_log.py), a pure function.

Expected values come from two outside sources:
* real public logs (tests/lambdas/fixtures/real/, each with its thread and date in that folder's README): what each
  one must yield is what its author's run did (the collective they ran, their rank list, their failure);
* nccl-tests' source at v2.19.6 for how a row's size relates to its count (`*GetCollByteCount` in
  src/<collective>.cu: all_reduce, reduce, broadcast and sendrecv send and receive `count` elements; all_gather,
  alltoall and reduce_scatter print size = count x ranks x type size), the `N/A` of `-c 0` (src/util.cu
  `writeBenchmarkLineBody`) and the `FAILED` of the summary lines (src/util.cu `writeResultFooter`).
The synthetic fixtures one folder up (their README says how they were made) cover what no public log showed:
`srun -l` labels, `#wrong` above zero, the trailing timestamp column.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "fmcluster" / "lambdas" / "nccl_results"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
REAL = FIXTURES / "real"
GIB = 1024**3


sys.path.insert(0, str(FOLDER))  # the Lambda's task root, where the runtime finds the parser next to the handler
nccl_log = importlib.import_module("nccl_log")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def summary(run) -> tuple:
    return (run.collective, len(run.rows), run.ranks, len(run.hosts), run.validated, run.problem)


# --- the corpus of real logs --------------------------------------------------------------------------------------
TRUNCATED = "truncated: no '# Avg bus bandwidth' line after the last row (size {} B); the job was cut off or the log "
TRUNCATED += "is incomplete"
REAL_RUNS = {
    "nccl-tests-287_alltoall_1gpu_2.x.log": [("alltoall", 1, 1, 1, True, None)],
    "nccl-tests-78_all_reduce_and_alltoall_old-format.log": [
        ("all_reduce", 2, 0, 0, True, None),
        (
            None,
            2,
            0,
            0,
            True,
            "cannot tell which collective the table measured: no '# Collective test starting' line or binary name, "
            "and the rows fit all_gather, alltoall (268435456 B = 1048576 x float (4 B) x 64, redop (none printed), "
            "root (none printed))",
        ),
    ],
    "nccl-tests-5_all_reduce_1.x_cuda-failure.log": [
        (
            "all_reduce",
            0,
            8,
            1,
            False,
            "nccl-tests failed: NCCL failure all_reduce.cu:95 'unhandled cuda error' (line 16)",
        )
    ],
    "nccl-tests-82_broadcast_c0_old-format.log": [("broadcast", 1, 2, 2, False, TRUNCATED.format(8))],
    "aws-k8s-tester-503_all_reduce_p5_mpirun-tags.log": [("all_reduce", 3, 0, 0, True, TRUNCATED.format(32))],
    # the README shows the table without its summary lines ("the output should look as below")
    "awsome-distributed-training_all_reduce_p4de_2n_srun-l.log": [
        ("all_reduce", 29, 0, 0, True, TRUNCATED.format(2147483648))
    ],
    "awsome-distributed-training_all_reduce_p5_2n_srun-l.log": [
        ("all_reduce", 32, 0, 0, True, TRUNCATED.format(17179869184))
    ],
    "awsome-distributed-training_all_reduce_p5_eks_mpirun-tags.log": [("all_reduce", 7, 0, 0, True, None)],
    # sendrecv prints redop `sum` and never checks its in-place half (src/sendrecv.cu): told apart from all_reduce by
    # the in-place N/A of a validated run; the excerpts stop before the summary lines
    "nccl-tests-214_sendrecv_2n_rows-cut.log": [("sendrecv", 5, 2, 2, True, TRUNCATED.format(4096))],
    "nccl-tests-104_sendrecv_old-format.log": [("sendrecv", 1, 0, 0, False, TRUNCATED.format(37748744))],
}
REAL_REJECTED = {
    "nccl-tests-15_all_reduce_init-failure.log": "nccl-tests failed and the log holds no result table header: "
    "NCCL failure common.cu:921 'unhandled system error' (line 4)",
    "nccl-tests-322_all_reduce_1024-ranks_failure-mid-run.log": "nccl-tests failed and the log holds no result table "
    "header: HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) "
    "/ ' (line 7)",
    "bottlerocket-kernel-kit-313_alltoall_rows-only.log": "no nccl-tests result table ('# size count type redop root "
    "time algbw busbw #wrong ...') found; is this nccl-tests output?",
}


def test_the_corpus_holds_at_least_six_real_logs_each_with_its_provenance():
    readme = (REAL / "README.md").read_text()
    logs = sorted(path.name for path in REAL.glob("*.log"))
    assert len(logs) >= 6
    assert sorted({*REAL_RUNS, *REAL_REJECTED}) == logs
    for name in logs:
        (row,) = [line for line in readme.splitlines() if line.startswith(f"| {name} |")]
        assert "https://github.com/" in row and "20" in row, name


@pytest.mark.parametrize("name", REAL_RUNS)
def test_each_real_log_yields_its_tables(name):
    assert [summary(run) for run in nccl_log.parse((REAL / name).read_text())] == REAL_RUNS[name]


@pytest.mark.parametrize("name", REAL_REJECTED)
def test_each_real_log_without_a_table_says_why(name):
    with pytest.raises(nccl_log.ParseError) as error:
        nccl_log.parse((REAL / name).read_text())
    assert str(error.value) == REAL_REJECTED[name]


def test_the_real_alltoall_is_read_column_by_column():
    (run,) = nccl_log.parse((REAL / "nccl-tests-287_alltoall_1gpu_2.x.log").read_text())
    (row,) = run.rows
    assert (row.size, row.count, row.type, row.redop, row.root) == (33554432, 8388608, "float", "none", -1)
    assert row.out_of_place == nccl_log.Measurement(time_us=19.56, algbw=1715.44, busbw=0.0, wrong=0)
    assert row.in_place == nccl_log.Measurement(time_us=0.78, algbw=43046.10, busbw=0.0, wrong=None)
    assert (run.avg_bus_bandwidth, run.out_of_bounds, run.hosts, run.identified_by) == (
        0.0,
        0,
        ["GENOA-01"],
        "binary name before the table",
    )


def test_the_old_layout_reports_an_error_not_a_count():
    first, _ = nccl_log.parse((REAL / "nccl-tests-78_all_reduce_and_alltoall_old-format.log").read_text())
    assert first.counts_wrong is False
    assert first.rows[0].out_of_place == nccl_log.Measurement(time_us=122131, algbw=2.20, busbw=4.33, wrong=None)
    assert (first.largest_size, first.largest_bus_bandwidth, first.avg_bus_bandwidth) == (536870912, 4.32, 4.32178)
    assert first.identified_by.startswith("rows: 268435456 B = 67108864 x float (4 B) x 1, redop sum")


def test_the_published_srun_l_tables_are_read_row_by_row():
    """AWS's published 2x p5 and 2x p4de all_reduce tables (`srun -l`): the figures FACTS.md quotes."""
    (p5,) = nccl_log.parse((REAL / "awsome-distributed-training_all_reduce_p5_2n_srun-l.log").read_text())
    (p4de,) = nccl_log.parse((REAL / "awsome-distributed-training_all_reduce_p4de_2n_srun-l.log").read_text())
    assert (p5.largest_size, p5.largest_bus_bandwidth) == (16 * GIB, 487.26)
    assert [row.busbw for row in p5.rows if row.size == 2 * GIB] == [443.72]
    assert (p4de.largest_size, p4de.largest_bus_bandwidth) == (2 * GIB, 78.33)


def test_an_elided_excerpt_is_read_around_its_ellipsis():
    (run,) = nccl_log.parse((REAL / "awsome-distributed-training_all_reduce_p5_eks_mpirun-tags.log").read_text())
    assert [row.size for row in run.rows] == [0, *(2**k for k in range(26, 32))]
    assert (run.largest_bus_bandwidth, run.avg_bus_bandwidth, run.out_of_bounds) == (437.89, 52.9753, 0)


def test_the_1x_failure_keeps_its_rank_list():
    (run,) = nccl_log.parse((REAL / "nccl-tests-5_all_reduce_1.x_cuda-failure.log").read_text())
    assert run.hosts == ["node03"] and run.ranks == 8 and run.header_line == 15


# --- the synthetic fixtures (formats nccl-tests prints; see fixtures/README.md) -----------------------------------
GOOD = {
    # name: (rows, largest message, its bus bandwidth, avg bus bandwidth, hosts, ranks, nccl-tests version, validated)
    "all_reduce_p5_2n_nccl-tests-2.13.log": (32, 16 * GIB, 487.26, 124.324, 2, 16, None, True),
    "all_reduce_p4de_2n_mpirun.log": (29, 2 * GIB, 78.33, 18.5269, 2, 16, None, True),
    "all_reduce_p5en_4n_nccl-tests-2.20.log": (32, 16 * GIB, 392.88, 139.476, 4, 32, "2.20.0", True),
    "all_reduce_p5en_4n_degraded.log": (32, 16 * GIB, 143.64, 56.6482, 4, 32, "2.20.0", True),
    "all_reduce_p5_16n_nccl-tests-2.16.log": (32, 16 * GIB, 358.76, 117.693, 16, 128, "2.16.9", True),
    "all_reduce_p6-b200_2n_no-validation.log": (32, 16 * GIB, 628.96, 218.98, 2, 16, "2.20.0", False),
}


@pytest.mark.parametrize("name", GOOD)
def test_synthetic_all_reduce_logs_parse(name):
    rows, largest, busbw, average, hosts, ranks, version, validated = GOOD[name]
    (run,) = nccl_log.parse(fixture(name))
    assert run.problem is None and run.collective == "all_reduce"
    assert [row.size for row in run.rows] == [8 * 2**i for i in range(rows)]  # 8 B doubling, in order
    assert (run.largest_size, run.largest_bus_bandwidth, run.avg_bus_bandwidth) == (largest, busbw, average)
    assert (len(run.hosts), run.ranks, run.nccl_tests_version, run.validated) == (hosts, ranks, version, validated)


def test_size_classes_take_the_best_bus_bandwidth_inside_each():
    (run,) = nccl_log.parse(fixture("all_reduce_p5_2n_nccl-tests-2.13.log"))
    assert run.size_classes() == {"8B-64KiB": 1.18, "64KiB-16MiB": 105.53, "16MiB-1GiB": 440.96, "1GiB-and-up": 487.26}


BROKEN = {
    "broken_truncated.log": TRUNCATED.format(1073741824),
    "broken_garbled.log": "line 65: garbled result row '67108864      16777216     float     sum      -1    601.5  "
    "1#1.57  209.19      0    604': 10 fields where the header has 13",
    "broken_wrong.log": "data corruption: #wrong > 0 (268435456 B in-place: 3); the results are not valid",
}


@pytest.mark.parametrize("name", BROKEN)
def test_broken_tables_carry_their_reason(name):
    (run,) = nccl_log.parse(fixture(name))
    assert run.problem == BROKEN[name]


def test_no_text_or_no_table_is_a_parse_error():
    with pytest.raises(nccl_log.ParseError, match=r"^empty output: the log has no text$"):
        nccl_log.parse(fixture("broken_empty.log"))
    with pytest.raises(nccl_log.ParseError, match=r"^nccl-tests failed and the log holds no result table header: "):
        nccl_log.parse(fixture("broken_no_header.log"))
    with pytest.raises(nccl_log.ParseError, match=r"^no nccl-tests result table"):
        nccl_log.parse("# Avg bus bandwidth    : 52.9753\n")


P5_LOG = fixture("all_reduce_p5_2n_nccl-tests-2.13.log")
ROW_1G = (
    "0:   1073741824     268435456     float     sum      -1   4607.6  233.04  436.94      0   4565.6  235.18  440.96"
    "      0"
)


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        (ROW_1G.replace("233.04", "abc"), "could not convert string to float: 'abc'"),
        (ROW_1G.replace("436.94", "-436.94"), "busbw '-436.94' is not a finite, non-negative number"),
        (ROW_1G.replace("436.94", "nan"), "busbw 'nan' is not a finite, non-negative number"),
        (ROW_1G.replace("  float", "  fl@at"), "type 'fl@at' or redop 'sum' is not a name"),
        (ROW_1G.replace("      0   4565.6", "    0.5   4565.6"), "#wrong '0.5' is not a count"),
        (ROW_1G + "  1", "14 fields where the header has 13"),
        ("0: 1073741824 Segmentation fault (core dumped)", "5 fields where the header has 13"),
    ],
)
def test_garbled_rows_reject_their_table(replacement, message):
    assert ROW_1G in P5_LOG
    (run,) = nccl_log.parse(P5_LOG.replace(ROW_1G, replacement))
    assert run.problem.startswith("line 57: garbled result row ")
    assert run.problem.endswith(message)


def test_out_of_bounds_values_and_a_failed_average_reject_the_table():
    (run,) = nccl_log.parse(P5_LOG.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 12 FAILED"))
    assert run.problem == "data corruption: 12 out-of-bounds values reported (FAILED)"
    (run,) = nccl_log.parse(
        P5_LOG.replace("# Avg bus bandwidth    : 124.324 ", "# Avg bus bandwidth    : 124.324 FAILED")
    )
    assert run.problem == "nccl-tests' own check failed: 'Avg bus bandwidth ... FAILED' (below 90% of its -a figure)"


def test_the_timestamp_column_and_cputime_are_understood():
    out = []
    for line in fixture("all_reduce_p5en_4n_nccl-tests-2.20.log").splitlines():
        body = line[3:]
        if "#wrong" in body and "size" in body:
            line = line.replace(" time ", " cputime ").rstrip() + "  timestamp"
        elif body.strip() and body.strip()[0].isdigit():
            line = line + "  2026-11-29 17:02:11"
        out.append(line)
    (run,) = nccl_log.parse("\n".join(out))
    assert run.problem is None and len(run.rows) == 32 and run.largest_bus_bandwidth == 392.88


def test_crlf_line_ends_and_missing_labels_are_fine():
    text = P5_LOG.replace("\n0: ", "\n").removeprefix("0: ").replace("\n", "\r\n")
    (run,) = nccl_log.parse(text)
    assert run.largest_bus_bandwidth == 487.26


# --- which collective ---------------------------------------------------------------------------------------------
HEADER = "#  size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong"  # spacing is free
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5\n"


def table(size: int, count: int, redop: str, root: int, *, kind: str = "float", ranks: int = 16) -> str:
    devices = "".join(
        f"#  Rank {r:2d} Group  0 Pid {r:6d} on node-{r // 8} device {r % 8} [0x53] GPU\n" for r in range(ranks)
    )
    row = f"{size:12d}  {count:12d}  {kind:>8}  {redop:>6}  {root:6d}   100.0  1.50  1.40  0   100.0  1.50  1.40  0"
    return f"{devices}#\n{HEADER}\n{row}\n{FOOTER}"


@pytest.mark.parametrize(
    ("rows", "collective"),
    [
        # src/all_reduce.cu: send = receive = count
        (table(1048576, 262144, "sum", -1), "all_reduce"),
        # src/reduce.cu: send = receive = count, a root
        (table(1048576, 262144, "sum", 0), "reduce"),
        # src/broadcast.cu: send = receive = count, a root, no reduction
        (table(1048576, 262144, "none", 3), "broadcast"),
        # src/sendrecv.cu: send = receive = count, no root, the -o operation's name, in-place never checked
        (table(1048576, 262144, "sum", -1).replace("1.40  0\n#", "1.40  N/A\n#"), "sendrecv"),
        (table(1048576, 262144, "max", -1).replace("1.40  0\n#", "1.40  N/A\n#"), "sendrecv"),
        # src/reduce_scatter.cu: send = count x ranks, a reduction
        (table(1048576, 16384, "sum", -1), "reduce_scatter"),
        # bfloat16 (2 B): all_reduce
        (table(1048576, 524288, "sum", -1, kind="bfloat16"), "all_reduce"),
    ],
)
def test_the_rows_name_the_collective_when_nothing_else_does(rows, collective):
    (run,) = nccl_log.parse(rows)
    assert (run.collective, run.problem) == (collective, None)
    assert run.identified_by.startswith("rows: ")


def test_all_gather_and_alltoall_need_a_name():
    rows = table(1048576, 16384, "none", -1)  # src/all_gather.cu and src/alltoall.cu: size = count x ranks
    (run,) = nccl_log.parse(rows)
    assert run.collective is None
    assert run.problem.endswith(
        "the rows fit all_gather, alltoall (1048576 B = 16384 x float (4 B) x 16, redop none, root -1)"
    )
    (run,) = nccl_log.parse("# Collective test starting: all_gather_perf_mpi\n" + rows)
    assert (run.collective, run.identified_by, run.problem) == ("all_gather", "'# Collective test starting' line", None)
    (run,) = nccl_log.parse("srun --mpi=pmix /opt/nccl-tests/build/alltoall_perf -b 8 -e 16G\n" + rows)
    assert (run.collective, run.identified_by, run.problem) == ("alltoall", "binary name before the table", None)


def test_a_name_the_rows_contradict_rejects_the_table():
    (run,) = nccl_log.parse("# Collective test starting: all_gather_perf\n" + table(1048576, 262144, "sum", -1))
    assert run.problem == (
        "the table's rows do not fit all_gather (named by the '# Collective test starting' line): "
        "1048576 B = 262144 x float (4 B) x 1, redop sum, root -1"
    )


def test_a_log_with_several_collectives_yields_each():
    log = (
        "# Collective test starting: all_reduce_perf\n"
        + table(1048576, 262144, "sum", -1)
        + "# Collective test concluded: all_reduce_perf\n"
        + "# Collective test starting: alltoall_perf\n"
        + table(1048576, 16384, "none", -1)
        + "# Collective test starting: all_gather_perf\n"
        + table(1048576, 16384, "none", -1).replace("# Avg bus bandwidth    : 1.5\n", "")
    )
    runs = nccl_log.parse(log)
    assert [(run.collective, run.problem) for run in runs] == [
        ("all_reduce", None),
        ("alltoall", None),
        ("all_gather", TRUNCATED.format(1048576)),
    ]
    assert all(run.ranks == 16 and len(run.hosts) == 2 for run in runs)


def test_a_table_cut_off_by_the_next_collective_is_truncated_once():
    cut = table(1048576, 262144, "sum", -1).replace(FOOTER, "")
    log = "# Collective test starting: all_reduce_perf\n" + cut + "# Collective test starting: alltoall_perf\n"
    runs = nccl_log.parse(log + table(1048576, 16384, "none", -1))
    assert [(run.collective, run.problem) for run in runs] == [
        ("all_reduce", TRUNCATED.format(1048576)),
        ("alltoall", None),
    ]


def test_only_the_first_printer_of_several_is_read():
    """nccl-tests built without MPI and started as 2 processes prints two outputs (nccl-tests issue 107)."""
    one = table(1048576, 262144, "sum", -1, ranks=2)
    labelled = "\n".join(f"{label}: {line}" for label in (0, 1) for line in one.splitlines())
    (run,) = nccl_log.parse(labelled)
    assert (run.collective, run.ranks, run.problem) == ("all_reduce", 2, None)


def test_a_failure_printed_by_another_rank_still_fails_the_table():
    one = table(1048576, 262144, "sum", -1).replace(
        "# Out of bounds", "1: node-1: Test NCCL failure common.cu:1204 'x'\n# Out of bounds"
    )
    (run,) = nccl_log.parse(
        "\n".join(f"0: {line}" if not line.startswith("1: ") else line for line in one.splitlines())
    )
    assert run.problem.startswith("nccl-tests failed: node-1: Test NCCL failure common.cu:1204 'x' (line ")


def test_the_per_iteration_layout_is_read():
    """nccl-tests -I 1 (src/util.cu writeResultHeader with per_iter_timing, writePerIterReport): each measurement
    carries i_min, i_max, i_p99 and i_cv% after #wrong; with -T a timestamp follows the in-place columns."""
    names = ("time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")
    header = "#  size  count  type  redop  root  " + "  ".join(names * 2) + "  timestamp"
    row = (
        "  1073741824  268435456  float  sum  -1   4607.6  233.04  436.94  0  4601.2  4690.1  4688.7  0.41"
        "   4565.6  235.18  440.96  0  4560.0  4630.9  4629.8  0.38  2026-11-29 17:02:11"
    )
    (run,) = nccl_log.parse(f"{header}\n{row}\n{FOOTER}")
    assert (run.collective, run.problem) == ("all_reduce", None)
    (parsed,) = run.rows
    assert parsed.out_of_place == nccl_log.Measurement(time_us=4607.6, algbw=233.04, busbw=436.94, wrong=0)
    assert parsed.in_place == nccl_log.Measurement(time_us=4565.6, algbw=235.18, busbw=440.96, wrong=0)


# --- sendrecv against all_reduce ----------------------------------------------------------------------------------
def test_every_sendrecv_table_of_the_real_corpus_is_identified_as_sendrecv():
    """The corpus's sendrecv logs (real/README.md): each is sendrecv, and nothing but the excerpt's cut is wrong."""
    names = sorted(path.name for path in REAL.glob("*sendrecv*.log"))
    assert len(names) >= 2
    for name in names:
        runs = nccl_log.parse((REAL / name).read_text())
        assert [run.collective for run in runs] == ["sendrecv"], name
        assert all(run.problem is None or run.problem.startswith("truncated:") for run in runs), name


def test_a_complete_sendrecv_log_is_accepted():
    (run,) = nccl_log.parse(fixture("sendrecv_p5_2n_nccl-tests-2.19.log"))
    assert summary(run) == ("sendrecv", 32, 16, 2, True, None)
    assert run.identified_by == "'# Collective test starting' line"
    assert run.largest_size == 16 * GIB


def test_a_sendrecv_table_that_cannot_be_told_from_all_reduce_is_rejected():
    """-c 0 prints N/A in both halves, so the in-place check says nothing, and no line names the collective."""
    (run,) = nccl_log.parse(fixture("sendrecv_p5_2n_no-validation_undeclared.log"))
    assert run.collective is None
    assert run.problem == (
        "cannot tell which collective the table measured: no '# Collective test starting' line or binary name, "
        "and the rows fit all_reduce, sendrecv (8 B = 2 x float (4 B) x 1, redop sum, root -1)"
    )
    declared = "0: # Collective test starting: sendrecv_perf\n" + fixture("sendrecv_p5_2n_no-validation_undeclared.log")
    (run,) = nccl_log.parse(declared)
    assert (run.collective, run.problem, run.validated) == ("sendrecv", None, False)


def test_a_table_named_all_reduce_whose_in_place_half_is_unchecked_is_rejected():
    text = fixture("sendrecv_p5_2n_nccl-tests-2.19.log").replace("sendrecv_perf", "all_reduce_perf")
    (run,) = nccl_log.parse(text)
    assert run.problem == (
        "the table's rows do not fit all_reduce (named by the '# Collective test starting' line): "
        "8 B = 2 x float (4 B) x 1, redop sum, root -1"
    )


def test_a_table_named_sendrecv_whose_in_place_half_is_checked_is_rejected():
    (run,) = nccl_log.parse("# Collective test starting: sendrecv_perf\n" + table(1048576, 262144, "sum", -1))
    assert run.problem.startswith("the table's rows do not fit sendrecv (named by the '# Collective test starting'")


def test_no_nccl_tests_version_prints_redop_none_for_a_same_size_rootless_table():
    (run,) = nccl_log.parse(table(1048576, 262144, "none", -1))
    assert run.collective is None
    assert run.problem.endswith(
        "and the rows fit none of them (1048576 B = 262144 x float (4 B) x 1, redop none, root -1)"
    )


# --- a run the job stopped ----------------------------------------------------------------------------------------
STOPPED = "# fmcluster: nccl-tests did not finish: the job reached its time limit less 120 s (USR1 from Slurm)"


def test_a_run_the_job_stopped_mid_table_is_a_failure():
    """fmcluster/node/nccl-tests.sbatch appends STOPPED when its time-limit trap stops the test."""
    cut = table(1048576, 262144, "sum", -1).replace(FOOTER, "")
    (run,) = nccl_log.parse(cut + STOPPED + "\n")
    assert run.problem == f"nccl-tests failed: {STOPPED} (line 20)"  # 16 rank lines, "#", the header, a row


def test_a_run_stopped_before_its_first_table_is_a_parse_error():
    with pytest.raises(nccl_log.ParseError) as error:
        nccl_log.parse("0: # nThread 1 nGpus 1 minBytes 8 maxBytes 68719476736\n0: #\n" + STOPPED + "\n")
    assert str(error.value) == f"nccl-tests failed and the log holds no result table header: {STOPPED} (line 3)"


@pytest.mark.parametrize(
    ("name", "networks"),
    [
        ("all_reduce_p5en_4n_nccl-tests-2.20.log", ["Libfabric"]),  # aws-ofi-nccl 1.21.1's name
        ("all_reduce_p5_2n_nccl-tests-2.13.log", ["AWS Libfabric"]),  # the name up to plugin v1.12.1-aws
        ("all_reduce_p4de_2n_mpirun.log", []),  # no NCCL INFO lines: nothing said
    ],
)
def test_each_table_names_the_network_nccl_said_it_used(name, networks):
    assert [run.networks for run in nccl_log.parse(fixture(name))] == [networks]


def test_the_network_line_of_every_rank_and_every_run_is_read():
    """NCCL's line as it prints it (src/debug.cc: `<host>:<pid>:<tid> [<device>] NCCL INFO <text>`; a real one:
    "8h200-2:6831:6840 [0] NCCL INFO Using network Libfabric", NVIDIA/nccl issue 1597), from two ranks whose `srun -l`
    labels differ, before each of two runs in one log."""
    table = fixture("all_reduce_p5en_4n_nccl-tests-2.20.log")
    first = table.replace("0: ip-10-2-10-31:40000:40088 [0] NCCL INFO Using network Libfabric",
                          "0: 8h200-2:6831:6840 [0] NCCL INFO Using network Libfabric\n"
                          "17: 8h200-3:6310:6318 [1] NCCL INFO Using network Socket")  # fmt: skip
    second = table.replace("NCCL INFO Using network Libfabric", "NCCL INFO Using network IB")
    assert [run.networks for run in nccl_log.parse(first + second)] == [["Libfabric", "Socket"], ["IB"]]
