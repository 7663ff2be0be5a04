"""The nccl-tests results Lambda (fmcluster/lambdas/nccl_results/handler.py) and the sbatch script that feeds it.

AWS is emulated by moto (`mock_aws`): the uploaded log lives in moto's in-memory S3, and PutMetricData lands in moto's
CloudWatch, where `get_metric_statistics` reads it back. That keeps the tests offline and free of credentials, and
every test starts from an empty account. moto enforces no IAM and delivers no S3 notifications: the tests call the
handler with the S3 event S3 would send, and the role's permissions and the bucket subscription are asserted on the
synthesized template (tests/unit/test_nccl_constructs.py).

The parser (nccl_log.py) is tested on its own in test_nccl_log.py, over real public logs (fixtures/real/) and
synthetic ones (fixtures/); here the handler's judgement: which tables are published, which are held to a baseline
(multi-node all_reduce with one rank per GPU), and which are rejected, with what reason.

The sbatch script runs under bash with stub `srun`, `aws` and `nvidia-smi` commands first on PATH: shellcheck clean,
and the log it uploads, to the key it uploads to, is one this handler accepts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal as sig
import stat
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from fmcluster.nccl import (
    LINE_RATE_FRACTION,
    MIN_BASELINE_MESSAGE_BYTES,
    NCCL_TESTS_MAX_BYTES,
    PUBLISHED_ALL_REDUCE,
    PUBLISHED_MARGIN,
    baseline_spec,
)
from tests.lambdas.test_nccl_log import fixture

REPO = Path(__file__).resolve().parents[2]
HANDLER = REPO / "fmcluster" / "lambdas" / "nccl_results" / "handler.py"
SBATCH = REPO / "fmcluster" / "node" / "nccl-tests.sbatch"
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
GIB = 1024**3
BUCKET = "llm-pretrain-checkpoints"
CLUSTER = "llm-pretrain"
TYPES = ("p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "g5.12xlarge")


def load_handler():
    sys.path.insert(0, str(HANDLER.parent))  # the Lambda's task root: handler.py imports nccl_log from it
    spec = importlib.util.spec_from_file_location("fmcluster_test_nccl_results_handler", HANDLER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


handler = load_handler()
Run = handler.Run


def environment(**overrides: str) -> dict[str, str]:
    """The function's environment as NcclValidation sets it."""
    return {
        "CLUSTER_NAME": CLUSTER,
        "BASELINES": json.dumps({t: baseline_spec(t) for t in TYPES}),
        "LINE_RATE_FRACTION": str(LINE_RATE_FRACTION),
        "PUBLISHED_MARGIN": str(PUBLISHED_MARGIN),
        "MIN_BASELINE_BYTES": str(MIN_BASELINE_MESSAGE_BYTES),
        **overrides,
    }


SETTINGS = handler.Settings.from_environment(environment())


# --- the logs (the parser itself: test_nccl_log.py) ----------------------------------------------------------------
P5_LOG = fixture("all_reduce_p5_2n_nccl-tests-2.13.log")
REAL_ALLTOALL = fixture("real/nccl-tests-287_alltoall_1gpu_2.x.log")
LARGEST = {
    # name: (largest message's bus bandwidth, avg bus bandwidth), as the fixture prints them
    "all_reduce_p5_2n_nccl-tests-2.13.log": (487.26, 124.324),
    "all_reduce_p4de_2n_mpirun.log": (78.33, 18.5269),
    "all_reduce_p5en_4n_nccl-tests-2.20.log": (392.88, 139.476),
    "all_reduce_p5en_4n_degraded.log": (143.64, 56.6482),
    "all_reduce_p6-b200_2n_no-validation.log": (628.96, 218.98),
}


# --- the baseline -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "nodes", "largest", "threshold", "basis"),
    [
        ("p5.48xlarge", 2, 16 * GIB, 438.3, "90% of the published 487.0 GB/s for 2x p5.48xlarge at 16 GiB"),
        ("p5.48xlarge", 2, 4 * GIB, 398.7, "90% of the published 443.0 GB/s for 2x p5.48xlarge at 2 GiB"),
        ("p5.48xlarge", 2, 2 * GIB, 398.7, "90% of the published 443.0 GB/s for 2x p5.48xlarge at 2 GiB"),
        ("p4de.24xlarge", 2, 2 * GIB, 70.47, "90% of the published 78.3 GB/s for 2x p4de.24xlarge at 2 GiB"),
        ("p5.48xlarge", 16, 16 * GIB, 280.0, "70% of the 3200 Gbps EFA line rate (400 GB/s); nothing published"),
        ("p5en.48xlarge", 4, 16 * GIB, 280.0, "70% of the 3200 Gbps EFA line rate (400 GB/s); nothing published"),
        ("p4de.24xlarge", 4, 2 * GIB, 35.0, "70% of the 400 Gbps EFA line rate (50 GB/s); nothing published"),
        ("p5.48xlarge", 2, GIB, 280.0, "70% of the 3200 Gbps EFA line rate (400 GB/s); nothing published"),
        # awsome-distributed-ai architectures/aws-pcs/tests/compute-test.md: 2x p6-b300 654 GB/s at 16 GiB, 751 at
        # 64 GiB; 4x p6-b200 377 GB/s at 16 GiB (untuned); other node counts fall back to the line rate
        ("p6-b300.48xlarge", 2, 64 * GIB, 675.9, "90% of the published 751.0 GB/s for 2x p6-b300.48xlarge at 64 GiB"),
        ("p6-b300.48xlarge", 2, 32 * GIB, 588.6, "90% of the published 654.0 GB/s for 2x p6-b300.48xlarge at 16 GiB"),
        ("p6-b300.48xlarge", 4, 64 * GIB, 560.0, "70% of the 6400 Gbps EFA line rate (800 GB/s); nothing published"),
        ("p6-b200.48xlarge", 4, 16 * GIB, 339.3, "90% of the published 377.0 GB/s for 4x p6-b200.48xlarge at 16 GiB"),
        ("p6-b200.48xlarge", 2, 16 * GIB, 280.0, "70% of the 3200 Gbps EFA line rate (400 GB/s); nothing published"),
    ],
)
def test_baseline_prefers_a_published_figure_for_the_same_node_count(instance_type, nodes, largest, threshold, basis):
    judged = handler.baseline(baseline_spec(instance_type), instance_type, nodes, largest, SETTINGS)
    assert judged.threshold_gbs == threshold
    assert judged.basis.startswith(basis)


def test_no_baseline_below_one_gib_or_without_efa():
    assert handler.baseline(baseline_spec("p5.48xlarge"), "p5.48xlarge", 2, 512 * 1024**2, SETTINGS) is None
    # g5.4xlarge: no EFA below g5.8xlarge (eksctl's DescribeInstanceTypes table)
    assert handler.baseline(baseline_spec("g5.4xlarge"), "g5.4xlarge", 2, 16 * GIB, SETTINGS) is None


# --- the handler against emulated S3 and CloudWatch ---------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch):
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        **environment(),
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        yield s3, boto3.client("cloudwatch")


def s3_event(key: str, bucket: str = BUCKET) -> dict:
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-east-1",
                "eventTime": "2026-11-29T17:00:00.000Z",
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "nccl-tests",
                    "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                    "object": {"key": key, "size": 1024, "sequencer": "0055AED6DCD90281E5"},
                },
            }
        ]
    }


def upload(s3, key: str, body: str | bytes) -> dict:
    s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode() if isinstance(body, str) else body)
    return s3_event(key)


def metric(cloudwatch, name: str, **dimensions: str) -> list[float]:
    """Every value published for `name` with exactly these dimensions (moto keeps them for the query window)."""
    response = cloudwatch.get_metric_statistics(
        Namespace="fmcluster/nccl",
        MetricName=name,
        Dimensions=[{"Name": k, "Value": v} for k, v in dimensions.items()],
        StartTime="2020-01-01T00:00:00Z",
        EndTime="2100-01-01T00:00:00Z",
        Period=3600,
        Statistics=["Maximum"],
    )
    return [point["Maximum"] for point in response["Datapoints"]]


def logged(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("name", "key", "below"),
    [
        ("all_reduce_p5_2n_nccl-tests-2.13.log", "nccl-tests/p5.48xlarge/2n/4242.log", 0.0),
        ("all_reduce_p4de_2n_mpirun.log", "nccl-tests/p4de.24xlarge/2n/77.log", 0.0),
        ("all_reduce_p5en_4n_nccl-tests-2.20.log", "nccl-tests/p5en.48xlarge/4n/9001.log", 0.0),
        ("all_reduce_p5en_4n_degraded.log", "nccl-tests/p5en.48xlarge/4n/9002.log", 1.0),
        # -c 0: published, never judged (nothing checked the results)
        ("all_reduce_p6-b200_2n_no-validation.log", "nccl-tests/p6-b200.48xlarge/2n/12.log", None),
    ],
)
def test_a_result_publishes_its_metrics_and_its_verdict(aws, capsys, name, key, below):
    s3, cloudwatch = aws
    assert handler.handler(upload(s3, key, fixture(name))) == {"accepted": 1, "rejected": 0}
    instance_type, nodes = key.split("/")[1], key.split("/")[2][:-1]
    dims = {"Cluster": CLUSTER, "InstanceType": instance_type, "Nodes": nodes}
    busbw, average = LARGEST[name]
    assert metric(cloudwatch, "LargestMessageBusBandwidth", **dims) == [busbw]
    assert metric(cloudwatch, "AvgBusBandwidth", **dims) == [average]
    (run,) = handler.nccl_log.parse(fixture(name))
    for size_class, best in run.size_classes().items():
        assert metric(cloudwatch, "BusBandwidth", **dims, SizeClass=size_class) == [best]
    verdict = [] if below is None else [below]
    assert metric(cloudwatch, "BelowBaseline", **dims) == verdict
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType=instance_type) == verdict
    assert metric(cloudwatch, "RejectedResults", Cluster=CLUSTER) == []
    (entry,) = logged(capsys)
    assert entry["message"] == "published nccl-tests result" and entry["key"] == key
    assert entry["below_baseline"] is bool(below) and entry["largest_message_busbw"] == busbw


def test_the_degraded_run_names_its_baseline(aws, capsys):
    s3, cloudwatch = aws
    handler.handler(upload(s3, "nccl-tests/p5en.48xlarge/4n/9002.log", fixture("all_reduce_p5en_4n_degraded.log")))
    dims = {"Cluster": CLUSTER, "InstanceType": "p5en.48xlarge", "Nodes": "4"}
    assert metric(cloudwatch, "BaselineBusBandwidth", **dims) == [280.0]
    (entry,) = logged(capsys)
    assert entry["baseline_gbs"] == 280.0
    assert entry["baseline_basis"] == "70% of the 3200 Gbps EFA line rate (400 GB/s); nothing published"


def test_a_run_without_validation_names_why_it_was_not_judged(aws, capsys):
    s3, _ = aws
    handler.handler(
        upload(s3, "nccl-tests/p6-b200.48xlarge/2n/12.log", fixture("all_reduce_p6-b200_2n_no-validation.log"))
    )
    (entry,) = logged(capsys)
    assert (entry["validated"], entry["baseline_gbs"]) == (False, None)
    assert entry["baseline_basis"] == (
        "not judged: validation was off (-c 0): a fast run with wrong results would pass, so it neither sets nor clears"
    )


def test_a_healthy_sendrecv_log_is_published_with_its_collective_and_never_judged(aws, capsys):
    s3, cloudwatch = aws
    key = "nccl-tests/p5.48xlarge/2n/31.log"
    assert handler.handler(upload(s3, key, fixture("sendrecv_p5_2n_nccl-tests-2.19.log"))) == {
        "accepted": 1,
        "rejected": 0,
    }
    dims = {"Cluster": CLUSTER, "InstanceType": "p5.48xlarge", "Nodes": "2", "Collective": "sendrecv"}
    (run,) = handler.nccl_log.parse(fixture("sendrecv_p5_2n_nccl-tests-2.19.log"))
    assert metric(cloudwatch, "LargestMessageBusBandwidth", **dims) == [run.largest_bus_bandwidth]
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType="p5.48xlarge") == []
    assert metric(cloudwatch, "RejectedResults", Cluster=CLUSTER) == []


def test_a_sendrecv_table_it_cannot_tell_from_all_reduce_is_rejected(aws, capsys):
    s3, cloudwatch = aws
    key = "nccl-tests/p5.48xlarge/2n/32.log"
    body = fixture("sendrecv_p5_2n_no-validation_undeclared.log")
    assert handler.handler(upload(s3, key, body)) == {"accepted": 0, "rejected": 1}
    assert metric(cloudwatch, "RejectedResults", Cluster=CLUSTER) == [1.0]
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType="p5.48xlarge") == []
    (entry,) = logged(capsys)
    assert entry["reason"].startswith("cannot tell which collective the table measured")


def test_a_run_too_short_to_judge_publishes_no_verdict(aws):
    s3, cloudwatch = aws
    short = "\n".join(line for line in P5_LOG.splitlines() if not any(f" {2**k} " in line for k in range(30, 35)))
    assert handler.handler(upload(s3, "nccl-tests/p5.48xlarge/2n/5.log", short)) == {"accepted": 1, "rejected": 0}
    dims = {"Cluster": CLUSTER, "InstanceType": "p5.48xlarge", "Nodes": "2"}
    assert metric(cloudwatch, "LargestMessageBusBandwidth", **dims) == [394.0]  # rows up to 512 MiB
    assert metric(cloudwatch, "BelowBaseline", **dims) == []


REJECTIONS = [
    (
        "logs/p5.48xlarge/2n/1.log",
        P5_LOG,
        "key does not follow nccl-tests/<instance_type>/<nodes>n/<job>.log (e.g. nccl-tests/p5.48xlarge/2n/1234.log)",
    ),
    (
        "nccl-tests/p5.48xlarge/two/1.log",
        P5_LOG,
        "key does not follow nccl-tests/<instance_type>/<nodes>n/<job>.log (e.g. nccl-tests/p5.48xlarge/2n/1234.log)",
    ),
    (
        "nccl-tests/p5e.48xlarge/2n/1.log",
        P5_LOG,
        "unknown instance type 'p5e.48xlarge'; this cluster's: g5.12xlarge, p4de.24xlarge, p5.48xlarge, "
        "p5en.48xlarge, p6-b200.48xlarge",
    ),
    (
        "nccl-tests/p5.48xlarge/4n/1.log",
        P5_LOG,
        "the key says 4 nodes but the log's ranks ran on 2 hosts (ip-10-1-44-123, ip-10-1-45-17)",
    ),
    (
        "nccl-tests/p5.48xlarge/2n/2.log",
        fixture("broken_truncated.log"),
        "truncated: no '# Avg bus bandwidth' line after the last row (size 1073741824 B); the job was cut off or the "
        "log is incomplete",
    ),
    (
        "nccl-tests/p5en.48xlarge/4n/3.log",
        fixture("broken_garbled.log"),
        "line 65: garbled result row '67108864      16777216     float     sum      -1    601.5  1#1.57  209.19      "
        "0    604': 10 fields where the header has 13",
    ),
    (
        "nccl-tests/p5.48xlarge/2n/4.log",
        fixture("broken_wrong.log"),
        "data corruption: #wrong > 0 (268435456 B in-place: 3); the results are not valid",
    ),
    ("nccl-tests/p5.48xlarge/2n/5.log", "", "empty output: the log has no text"),
    (
        "nccl-tests/p5.48xlarge/2n/6.log",
        fixture("broken_no_header.log"),
        "nccl-tests failed and the log holds no result table header: ip-10-1-44-123: Test NCCL failure common.cu:961 "
        "'unhandled system error (run with NCCL_DEBUG=INFO for details) / ' (line 8)",
    ),
    (
        # 16 ranks on 2 p4de.24xlarge (8 GPUs each) fit; on 2 g5.12xlarge (4 GPUs each) they cannot
        "nccl-tests/g5.12xlarge/2n/8.log",
        P5_LOG,
        "16 ranks on 2 nodes, but 2x g5.12xlarge (4 GPUs each) run 8 ranks, one per GPU",
    ),
    (
        "nccl-tests/p5.48xlarge/2n/9.log",
        P5_LOG.replace("# Avg bus bandwidth    : 124.324 ", "# Avg bus bandwidth    : 124.324 FAILED"),
        "nccl-tests' own check failed: 'Avg bus bandwidth ... FAILED' (below 90% of its -a figure)",
    ),
    (
        "nccl-tests/p5.48xlarge/2n/7.log",
        b"\x1f\x8b\x08\x00binary",
        "the log is not UTF-8 text (invalid start byte at byte 1)",
    ),
]


@pytest.mark.parametrize(("key", "body", "reason"), REJECTIONS, ids=[r[2][:50] for r in REJECTIONS])
def test_bad_input_is_logged_counted_and_never_raised(aws, capsys, key, body, reason):
    s3, cloudwatch = aws
    assert handler.handler(upload(s3, key, body)) == {"accepted": 0, "rejected": 1}
    (entry,) = logged(capsys)
    assert (entry["level"], entry["message"], entry["reason"]) == ("WARNING", "rejected nccl-tests upload", reason)
    assert entry["bucket"] == BUCKET and entry["key"] == key
    assert metric(cloudwatch, "RejectedResults", Cluster=CLUSTER) == [1.0]
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType="p5.48xlarge") == []


def test_a_deleted_object_or_a_malformed_event_is_a_rejection_too(aws, capsys):
    _, cloudwatch = aws
    assert handler.handler(s3_event("nccl-tests/p5.48xlarge/2n/gone.log")) == {"accepted": 0, "rejected": 1}
    assert handler.handler({"Records": [{"eventSource": "aws:sqs"}]}) == {"accepted": 0, "rejected": 1}
    assert handler.handler({"detail-type": "Object Created"}) == {"accepted": 0, "rejected": 1}
    reasons = [entry["reason"] for entry in logged(capsys)]
    assert reasons == [
        "cannot read the object: NoSuchKey",
        "not an S3 object notification: no s3.bucket.name or s3.object.key",
        "not an S3 event: no Records",
    ]
    assert metric(cloudwatch, "RejectedResults", Cluster=CLUSTER) == [1.0]  # Maximum per period; three points


def test_an_oversized_log_is_rejected_without_reading_it(aws, capsys, monkeypatch):
    s3, _ = aws
    monkeypatch.setenv("MAX_LOG_BYTES", "4096")
    handler.handler(upload(s3, "nccl-tests/p5.48xlarge/2n/8.log", P5_LOG))
    (entry,) = logged(capsys)
    assert entry["reason"] == (
        f"the log is {len(P5_LOG.encode())} bytes, over the 4096-byte limit; is this an nccl-tests log?"
    )


def test_a_single_node_run_is_published_but_never_judged(aws, capsys):
    """A one-node run measures NVLink: judged against the EFA line rate it would raise (or clear) a false alarm."""
    s3, cloudwatch = aws
    one_node = "\n".join(line for line in P5_LOG.splitlines() if "ip-10-1-45-17" not in line)
    # ranks 0-7 on one host: 8 ranks for the 8 GPUs of one p5.48xlarge
    assert handler.handler(upload(s3, "nccl-tests/p5.48xlarge/2n/20.log", P5_LOG))["accepted"] == 1
    assert handler.handler(upload(s3, "nccl-tests/p5.48xlarge/1n/21.log", one_node)) == {"accepted": 1, "rejected": 0}
    single = {"Cluster": CLUSTER, "InstanceType": "p5.48xlarge", "Nodes": "1"}
    assert metric(cloudwatch, "LargestMessageBusBandwidth", **single) == [487.26]
    assert metric(cloudwatch, "BelowBaseline", **single) == []
    # the alarm's series holds the two-node verdict only
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType="p5.48xlarge") == [0.0]
    entry = logged(capsys)[-1]
    assert entry["baseline_basis"] == (
        "not judged: a single-node run measures NVLink, not EFA; fmcluster has no NVLink baseline"
    )


def as_alltoall(log: str) -> str:
    """The 2x p5 table relabelled as an alltoall run: redop none, a per-rank count (src/alltoall.cu: size = count x
    ranks x type size), and the line nccl-tests 2.14+ prints before it."""
    out = ["0: # Collective test starting: alltoall_perf"]
    for line in log.splitlines():
        fields = line.split()
        if line.startswith("0: ") and len(fields) == 14 and fields[1].isdigit():
            fields[2], fields[4] = str(int(fields[2]) // 16), "none"
            line = "0: " + "  ".join(fields[1:])
        out.append(line)
    return "\n".join(out)


def test_another_collective_is_published_with_its_name_and_never_judged(aws, capsys):
    s3, cloudwatch = aws
    key = "nccl-tests/p5.48xlarge/1n/22.log"
    assert handler.handler(upload(s3, key, REAL_ALLTOALL)) == {"accepted": 0, "rejected": 1}
    # nccl-tests issue 287's run: 1 rank on a host with one GPU, so on a p5.48xlarge (8 GPUs) it is rejected
    assert (
        logged(capsys)[-1]["reason"] == "1 ranks on 1 nodes, but 1x p5.48xlarge (8 GPUs each) run 8 ranks, one per GPU"
    )
    alltoall = as_alltoall(P5_LOG)
    assert handler.handler(upload(s3, "nccl-tests/p5.48xlarge/2n/23.log", alltoall)) == {"accepted": 1, "rejected": 0}
    dims = {"Cluster": CLUSTER, "InstanceType": "p5.48xlarge", "Nodes": "2", "Collective": "alltoall"}
    assert metric(cloudwatch, "LargestMessageBusBandwidth", **dims) == [487.26]
    assert metric(cloudwatch, "BelowBaseline", **dims) == []
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType="p5.48xlarge") == []
    entry = logged(capsys)[-1]
    assert (entry["collective"], entry["identified_by"]) == ("alltoall", "'# Collective test starting' line")
    assert (
        entry["baseline_basis"]
        == "not judged: alltoall is measured, not judged: the baselines are all_reduce bus bandwidths"
    )


def test_a_log_without_rank_lines_is_published_but_not_judged(aws, capsys):
    """AWS's EKS example (awsome-distributed-training README): its ranks per node cannot be checked."""
    s3, cloudwatch = aws
    text = fixture("real/awsome-distributed-training_all_reduce_p5_eks_mpirun-tags.log")
    assert handler.handler(upload(s3, "nccl-tests/p5.48xlarge/2n/30.log", text)) == {"accepted": 1, "rejected": 0}
    dims = {"Cluster": CLUSTER, "InstanceType": "p5.48xlarge", "Nodes": "2"}
    assert metric(cloudwatch, "LargestMessageBusBandwidth", **dims) == [437.89]
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType="p5.48xlarge") == []
    assert logged(capsys)[-1]["baseline_basis"] == (
        "not judged: the log lists no '# Rank' lines, so its ranks per node cannot be checked"
    )


def test_every_table_of_a_log_is_judged_on_its_own(aws, capsys):
    s3, cloudwatch = aws
    truncated = fixture("broken_truncated.log")
    assert handler.handler(upload(s3, "nccl-tests/p5.48xlarge/2n/24.log", P5_LOG + truncated)) == {
        "accepted": 1,
        "rejected": 1,
    }
    good, bad = logged(capsys)
    assert (good["table"], good["message"], bad["table"], bad["message"]) == (
        1,
        "published nccl-tests result",
        2,
        "rejected nccl-tests upload",
    )
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType="p5.48xlarge") == [0.0]


def test_several_records_are_judged_one_by_one(aws):
    s3, _ = aws
    good = upload(s3, "nccl-tests/p5.48xlarge/2n/10.log", P5_LOG)
    bad = upload(s3, "nccl-tests/p5.48xlarge/2n/11.log", fixture("broken_truncated.log"))
    assert handler.handler({"Records": good["Records"] + bad["Records"]}) == {"accepted": 1, "rejected": 1}


def test_url_encoded_keys_are_decoded(aws):
    s3, _ = aws
    s3.put_object(Bucket=BUCKET, Key="nccl-tests/p5.48xlarge/2n/run=3.log", Body=P5_LOG.encode())
    assert handler.handler(s3_event("nccl-tests/p5.48xlarge/2n/run%3D3.log"))["rejected"] == 1  # '=' not a job id
    s3.put_object(Bucket=BUCKET, Key="nccl-tests/p5.48xlarge/2n/run_3.log", Body=P5_LOG.encode())
    assert handler.handler(s3_event("nccl-tests/p5.48xlarge/2n/run%5F3.log")) == {"accepted": 1, "rejected": 0}


# --- the sbatch script --------------------------------------------------------------------------------------------


def test_sbatch_script_is_shellcheck_clean_ascii_and_strict():
    result = subprocess.run(
        [SHELLCHECK, "-x", "--shell=bash", SBATCH.name],
        cwd=SBATCH.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = SBATCH.read_text(encoding="ascii")
    assert text.startswith("#!/usr/bin/env bash\n#SBATCH ")
    assert "\nset -euo pipefail\n" in text


STUBS = {
    # srun: the job's one-task-per-node check that every node reads the ECR credentials (all nodes share this test's
    # directories); else record its arguments and the NCCL environment it was given, then print the fixture (as rank
    # 0 does)
    "srun": """if [[ "$*" == *" test -r "* ]]; then [[ -r "${!#}" ]]; exit; fi
{ printf '%s\\n' "$*"; env | grep -E '^(NCCL|FI|OFI_NCCL)_' | sort; } >"$STUB_DIR/srun.args"
if [[ -n "${ENROOT_CONFIG_PATH:-}" ]]; then
  credentials="$ENROOT_CONFIG_PATH/.credentials"
  { echo "$ENROOT_CONFIG_PATH"; stat -c %a "$credentials"; cat "$credentials"; } >"$STUB_DIR/enroot-credentials"
fi
if [[ -n "${STUB_SRUN_HANG:-}" ]]; then  # a hung collective: some rows, then nothing
  head -n "$STUB_SRUN_HANG" "$STUB_DIR/output.log"; touch "$STUB_DIR/hanging"; exec /bin/sleep 120
fi
cat "$STUB_DIR/output.log"
exit "${STUB_SRUN_STATUS:-0}"
""",
    # aws: record its arguments and keep the uploaded file; fail the first STUB_AWS_FAILURES calls
    "aws": """printf '%s\\n' "$*" >>"$STUB_DIR/aws.args"
if [[ "$1 $2" == "ecr get-login-password" ]]; then echo stub-ecr-password; exit 0; fi
if [[ "$1" == ssm ]]; then
  if [[ -f "$STUB_DIR/image-uri" ]]; then cat "$STUB_DIR/image-uri"; exit 0; fi
  echo "An error occurred (ParameterNotFound)" >&2; exit 254
fi
failures="$(cat "$STUB_DIR/aws.failures" 2>/dev/null || echo 0)"
if ((failures > 0)); then echo $((failures - 1)) >"$STUB_DIR/aws.failures"; echo "upload failed" >&2; exit 1; fi
cp "${@: -2:1}" "$STUB_DIR/uploaded.log"
""",
    "nvidia-smi": "printf '%s\\n' 0 1 2 3 4 5 6 7\n",
    "sleep": "exit 0\n",
    "curl": "echo 'curl must not be called when the instance type and region are given' >&2; exit 7\n",
}


@pytest.fixture
def sbatch(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in STUBS.items():
        path = stubs / name
        path.write_text("#!/usr/bin/env bash\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "output.log").write_text(P5_LOG)
    env_file = tmp_path / "nccl.env"
    env_file.write_text(
        "# Written by fmcluster nccl-env.sh from SSM parameter /fmcluster/llm-pretrain/gpu/nccl-env\n"
        "NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME=^docker,lo,veth\n"
    )
    base = {
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "STUB_DIR": str(tmp_path),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NUM_NODES": "2",
        "FMCLUSTER_NCCL_ENV_FILE": str(env_file),
        "AWS_REGION": "us-east-1",
        "FMCLUSTER_RETRY_DELAY": "0",
        "FMCLUSTER_SHARED_DIR": str(tmp_path / "fsx"),
    }
    (tmp_path / "fsx").mkdir()

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SBATCH), *args],
            env={**base, **env},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    run.dir = tmp_path
    run.env = base
    return run


IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-pretrain-training:2026-11-29"
ARGS = ("--bucket", BUCKET, "--image", IMAGE, "--instance-type", "ml.p5.48xlarge")


def test_sbatch_runs_all_reduce_in_the_image_and_uploads_what_the_handler_accepts(sbatch, aws):
    result = sbatch(*ARGS)
    assert result.returncode == 0, result.stderr
    srun_args, *srun_env = (sbatch.dir / "srun.args").read_text().splitlines()
    assert srun_args == (
        "--nodes=2 --ntasks-per-node=8 --mpi=pmix --cpu-bind=none -u -l "
        "--container-image=123456789012.dkr.ecr.us-east-1.amazonaws.com#llm-pretrain-training:2026-11-29 "
        "--container-env=NCCL_DEBUG,NCCL_SOCKET_IFNAME,NCCL_DEBUG_SUBSYS "
        "/opt/nccl-tests/bin/all_reduce_perf -b 8 -e 64G -f 2 -g 1 -c 1"
    )
    # the node's NCCL_DEBUG=WARN gives way to INFO with INIT lines only: the log then names the network NCCL used
    assert srun_env == ["NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT", "NCCL_SOCKET_IFNAME=^docker,lo,veth"]
    key = "nccl-tests/p5.48xlarge/2n/4242.log"
    assert (sbatch.dir / "aws.args").read_text().splitlines() == [
        "ecr get-login-password --region us-east-1",
        f"s3 cp --only-show-errors --region us-east-1 {sbatch.dir}/nccl-tests-4242.log s3://{BUCKET}/{key}",
    ]
    assert result.stdout == P5_LOG  # the job's own output keeps a copy
    # the key and the log are what the Lambda judges
    s3, _ = aws
    assert handler.KEY_PATTERN.match(key)
    s3.put_object(Bucket=BUCKET, Key=key, Body=(sbatch.dir / "uploaded.log").read_bytes())
    assert handler.handler(s3_event(key)) == {"accepted": 1, "rejected": 0}


def test_sbatch_options_from_the_environment_and_squashfs_images(sbatch):
    result = sbatch(
        FMCLUSTER_CHECKPOINTS_BUCKET=BUCKET,
        FMCLUSTER_TRAINING_IMAGE="/fsx/images/train.sqsh",
        FMCLUSTER_INSTANCE_TYPE="p5en.48xlarge",
        SLURM_GPUS_ON_NODE="4",
        FMCLUSTER_NCCL_TESTS_MAX_BYTES="2G",
        SLURM_JOB_NUM_NODES="4",
    )
    assert result.returncode == 0, result.stderr
    srun_args = (sbatch.dir / "srun.args").read_text().splitlines()[0]
    assert "--nodes=4 --ntasks-per-node=4 " in srun_args
    assert "--container-image=/fsx/images/train.sqsh " in srun_args and " -e 2G " in srun_args
    assert (sbatch.dir / "aws.args").read_text().endswith(f"s3://{BUCKET}/nccl-tests/p5en.48xlarge/4n/4242.log\n")


def test_sbatch_reads_the_image_the_build_published_and_pins_its_digest(sbatch):
    digest = "sha256:" + "0123456789abcdef" * 4
    (sbatch.dir / "image-uri").write_text(f"{IMAGE.rsplit(':', 1)[0]}@{digest}\n")
    result = sbatch("--bucket", BUCKET, "--cluster", CLUSTER, "--instance-type", "p5.48xlarge", "--binary", "/x/arp")
    assert result.returncode == 0, result.stderr
    aws_calls = (sbatch.dir / "aws.args").read_text().splitlines()
    assert aws_calls[0] == (
        f"ssm get-parameter --region us-east-1 --name /fmcluster/{CLUSTER}/image-uri --query Parameter.Value "
        "--output text"
    )
    srun_args = (sbatch.dir / "srun.args").read_text().splitlines()[0]
    assert (
        f" --container-image=123456789012.dkr.ecr.us-east-1.amazonaws.com#llm-pretrain-training:{digest} " in srun_args
    )
    assert " /x/arp -b 8 " in srun_args


def test_sbatch_without_the_image_parameter_stops_before_running(sbatch):
    result = sbatch("--bucket", BUCKET, "--cluster", CLUSTER, "--instance-type", "p5.48xlarge")
    assert result.returncode == 1
    assert f"cannot read SSM parameter /fmcluster/{CLUSTER}/image-uri (has the image been built?)" in result.stderr
    assert not (sbatch.dir / "srun.args").exists()


@pytest.mark.parametrize(
    ("image", "enroot"),
    [
        ("nvcr.io/nvidia/pytorch:25.10-py3", "nvcr.io#nvidia/pytorch:25.10-py3"),
        ("nvcr.io#nvidia/pytorch:25.10-py3", "nvcr.io#nvidia/pytorch:25.10-py3"),
        ("localhost:5000/train:1", "localhost:5000#train:1"),
        ("ubuntu:24.04", "ubuntu:24.04"),
        ("library/ubuntu:24.04", "library/ubuntu:24.04"),
        (f"{IMAGE}@sha256:{'a' * 64}", IMAGE.replace(".com/", ".com#")),
        (
            f"{IMAGE.rsplit(':', 1)[0]}@sha256:{'a' * 64}",
            f"{IMAGE.rsplit(':', 1)[0].replace('.com/', '.com#')}:sha256:{'a' * 64}",
        ),
        ("/fsx/images/train.sqsh", "/fsx/images/train.sqsh"),
    ],
)
def test_sbatch_gives_pyxis_enroots_image_references(sbatch, image, enroot):
    assert sbatch("--bucket", BUCKET, "--image", image, "--instance-type", "p5.48xlarge").returncode == 0
    assert f" --container-image={enroot} " in (sbatch.dir / "srun.args").read_text()


def test_sbatch_uploads_the_log_of_a_failed_run_and_exits_with_its_status(sbatch):
    result = sbatch(*ARGS, STUB_SRUN_STATUS="3")
    assert result.returncode == 3
    assert "all_reduce_perf failed with exit status 3; uploading its output anyway" in result.stderr
    assert (sbatch.dir / "uploaded.log").read_text() == P5_LOG


def test_sbatch_has_a_time_limit_with_a_warning_signal_for_its_trap():
    directives = [line for line in SBATCH.read_text().splitlines() if line.startswith("#SBATCH ")]
    assert "#SBATCH --time=01:00:00" in directives
    assert "#SBATCH --signal=B:USR1@120" in directives  # sbatch(1): B: signals the batch shell only


@pytest.mark.parametrize(
    ("signal", "reason"),
    [
        (sig.SIGUSR1, "the job reached its time limit less 120 s (USR1 from Slurm)"),
        (sig.SIGTERM, "the job was cancelled or preempted (SIGTERM)"),
    ],
)
def test_sbatch_stops_a_hung_test_and_uploads_a_failed_result(sbatch, aws, signal, reason):
    """Emulated: Slurm's signal is sent by the test (real Slurm: tests/node/test_real_slurm.py runs sbatch itself)."""
    process = subprocess.Popen(
        ["bash", str(SBATCH), *ARGS],
        env={**sbatch.env, "STUB_SRUN_HANG": "60"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (sbatch.dir / "hanging").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 1, stderr
    uploaded = (sbatch.dir / "uploaded.log").read_text()
    assert uploaded.endswith(f"# fmcluster: nccl-tests did not finish: {reason}\n")
    assert f"stopping the test: {reason}" in stderr
    s3, cloudwatch = aws
    key = "nccl-tests/p5.48xlarge/2n/4242.log"
    s3.put_object(Bucket=BUCKET, Key=key, Body=uploaded.encode())
    assert handler.handler(s3_event(key)) == {"accepted": 0, "rejected": 1}
    assert metric(cloudwatch, "RejectedResults", Cluster=CLUSTER) == [1.0]


def test_sbatch_sweep_reaches_the_largest_published_message():
    """The default -e is the largest size any published figure was measured at (fmcluster.nccl)."""
    default = re.search(r'MAX_BYTES="\$\{FMCLUSTER_NCCL_TESTS_MAX_BYTES:-(\d+)G\}"', SBATCH.read_text())[1]
    assert f"{default}G" == NCCL_TESTS_MAX_BYTES
    assert int(default) * GIB == max(p.message_bytes for p in PUBLISHED_ALL_REDUCE)


def test_sbatch_retries_the_upload_then_gives_up(sbatch):
    (sbatch.dir / "aws.failures").write_text("2")
    assert sbatch(*ARGS).returncode == 0
    uploads = [line for line in (sbatch.dir / "aws.args").read_text().splitlines() if line.startswith("s3 cp")]
    assert len(uploads) == 3
    (sbatch.dir / "aws.failures").write_text("9")
    result = sbatch(*ARGS, FMCLUSTER_RETRY_ATTEMPTS="2")
    assert result.returncode == 1
    assert f"could not upload {sbatch.dir}/nccl-tests-4242.log to s3://{BUCKET}/nccl-tests/" in result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (ARGS, {"SLURM_JOB_ID": ""}, "not inside a Slurm job; submit this script with sbatch"),
        (("--image", IMAGE), {}, "--bucket (the checkpoints bucket) is required"),
        (("--bucket", "Bad_Bucket", "--image", IMAGE), {}, "--bucket: not an S3 bucket name: Bad_Bucket"),
        (("--bucket", BUCKET), {}, "--cluster (to read the image from SSM) or --image is required"),
        (("--bucket", BUCKET, "--cluster", "Prod"), {}, "--cluster: not a cluster name: Prod"),
        ((*ARGS, "--max-bytes", "lots"), {}, "--max-bytes: a size like 16G, 512M or 1048576; got lots"),
        ((*ARGS, "--gpus-per-node", "0"), {}, "--gpus-per-node: a positive number; got 0"),
        ((*ARGS, "--frobnicate", "1"), {}, "unknown option: --frobnicate"),
        ((*ARGS, "--binary"), {}, "--binary needs a value"),
        (("--bucket", BUCKET, "--image", IMAGE, "--instance-type", "p5"), {}, "not an EC2 instance type: p5"),
    ],
)
def test_sbatch_bad_usage_exits_2_before_running_anything(sbatch, args, env, message):
    result = sbatch(*args, **env)
    assert result.returncode == 2
    assert f"nccl-tests: {message}\n" in result.stderr
    assert not (sbatch.dir / "srun.args").exists()


def test_sbatch_refuses_to_test_without_the_nodes_nccl_environment(sbatch):
    result = sbatch(*ARGS, FMCLUSTER_NCCL_ENV_FILE=str(sbatch.dir / "missing.env"))
    assert result.returncode == 1
    assert "missing.env is missing: the node was not set up by fmcluster" in result.stderr
    assert not (sbatch.dir / "srun.args").exists()


def test_sbatch_gives_enroot_ecr_credentials_on_the_shared_file_system_and_removes_them(sbatch):
    """enroot reads registry credentials from $ENROOT_CONFIG_PATH/.credentials (netrc form); without them every node's
    pull from the private ECR repository fails. The directory is on the shared file system so all nodes see it."""
    result = sbatch(*ARGS)
    assert result.returncode == 0, result.stderr
    path, mode, credentials = (sbatch.dir / "enroot-credentials").read_text().splitlines()
    assert path.startswith(f"{sbatch.dir}/fsx/.fmcluster-enroot-4242.") and mode == "600"
    assert credentials == "machine 123456789012.dkr.ecr.us-east-1.amazonaws.com login AWS password stub-ecr-password"
    assert not any((sbatch.dir / "fsx").iterdir())  # removed when the job ends


def test_sbatch_uses_the_image_the_cluster_imported_on_the_shared_file_system(sbatch):
    """HyperPod's controller imports the cluster's image into /fsx/enroot/images (import-image.sh): no node pulls."""
    images = sbatch.dir / "fsx" / "enroot" / "images"
    images.mkdir(parents=True)
    (images / "llm-pretrain-training+2026-11-29.sqsh").write_text("squashfs")
    (images / "training-image.sqsh").symlink_to("llm-pretrain-training+2026-11-29.sqsh")
    (images / "training-image.uri").write_text(IMAGE + "\n")
    (sbatch.dir / "image-uri").write_text(IMAGE + "\n")
    result = sbatch("--bucket", BUCKET, "--cluster", CLUSTER, "--instance-type", "p5.48xlarge")
    assert result.returncode == 0, result.stderr
    assert f" --container-image={images}/training-image.sqsh " in (sbatch.dir / "srun.args").read_text()
    assert not (sbatch.dir / "enroot-credentials").exists()  # nothing to pull
    assert "ecr get-login-password" not in (sbatch.dir / "aws.args").read_text()


def test_sbatch_pulls_the_published_image_when_the_imported_one_is_older(sbatch):
    images = sbatch.dir / "fsx" / "enroot" / "images"
    images.mkdir(parents=True)
    (images / "training-image.sqsh").write_text("squashfs")
    (images / "training-image.uri").write_text(IMAGE.replace("2026-11-29", "2026-10-01") + "\n")
    (sbatch.dir / "image-uri").write_text(IMAGE + "\n")
    result = sbatch("--bucket", BUCKET, "--cluster", CLUSTER, "--instance-type", "p5.48xlarge")
    assert result.returncode == 0, result.stderr
    assert "not the published" in result.stderr
    assert f" --container-image={IMAGE.replace('.com/', '.com#')} " in (sbatch.dir / "srun.args").read_text()
    assert (sbatch.dir / "enroot-credentials").exists()


# -- which network NCCL used -----------------------------------------------------------------------------------------
# NCCL's line is `INFO(NCCL_INIT, "Using network %s", comm->ncclNet->name)` (NVIDIA/nccl src/init.cc, v2.30.7-1); a
# real one from an EFA run: "8h200-2:6831:6840 [0] NCCL INFO Using network Libfabric" (NVIDIA/nccl issue 1597). The
# plugin's name is "Libfabric" from aws-ofi-nccl v1.13.0-aws, "AWS Libfabric" before; NCCL's internal fallbacks are
# named "IB" and "Socket" (src/transport/net_ib.cc, net_socket.cc: ncclNetIb / ncclNetSocket).
P5EN_LOG = fixture("all_reduce_p5en_4n_nccl-tests-2.20.log")


def test_a_run_over_efa_says_so_in_its_result(aws, capsys):
    s3, _ = aws
    assert handler.handler(upload(s3, "nccl-tests/p5en.48xlarge/4n/71.log", P5EN_LOG)) == {"accepted": 1, "rejected": 0}
    (entry,) = logged(capsys)
    assert entry["network"] == "Libfabric"


def test_a_multi_node_run_over_sockets_on_efa_instances_is_rejected(aws, capsys):
    s3, cloudwatch = aws
    over_sockets = P5EN_LOG.replace("NCCL INFO Using network Libfabric", "NCCL INFO Using network Socket")
    assert over_sockets != P5EN_LOG
    assert handler.handler(upload(s3, "nccl-tests/p5en.48xlarge/4n/72.log", over_sockets)) == {
        "accepted": 0,
        "rejected": 1,
    }
    (entry,) = logged(capsys)
    assert entry["reason"] == (
        "NCCL used its Socket network, not EFA (the aws-ofi-nccl plugin): the bandwidth is the sockets', not EFA's"
    )
    assert metric(cloudwatch, "RejectedResults", Cluster=CLUSTER) == [1.0]
    assert metric(cloudwatch, "BelowBaseline", Cluster=CLUSTER, InstanceType="p5en.48xlarge") == []


def test_the_plugin_is_known_by_all_its_names_and_a_log_without_the_line_says_nothing():
    for name in ("Libfabric", "AWS Libfabric", "OFI", "libfabric"):
        assert handler.network_problem(Run(networks=[name]), nodes=4, efa=True) is None
    assert handler.network_problem(Run(networks=[]), nodes=4, efa=True) is None
    assert handler.network_problem(Run(networks=["Socket"]), nodes=1, efa=True) is None  # NVLink, no network
    assert handler.network_problem(Run(networks=["Socket"]), nodes=2, efa=False) is None  # no EFA: sockets it is
    assert "its IB network" in handler.network_problem(Run(networks=["IB"]), nodes=2, efa=True)
