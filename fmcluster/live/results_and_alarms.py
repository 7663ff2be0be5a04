"""The fabric's last nccl-tests result and every fmcluster alarm in ALARM.

nccl-tests results are the metrics fmcluster's results function publishes (namespace fmcluster/nccl, dimensions
Cluster, InstanceType, Nodes: LargestMessageBusBandwidth and BaselineBusBandwidth in GB/s). Alarms are the
AWS::CloudWatch::Alarm resources of the file's stacks (their names are generated). Sources: CloudWatch API
reference (ListMetrics, GetMetricStatistics: at most 1,440 datapoints per call; DescribeAlarms StateValue).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws
from fmcluster.live.findings import Collected, Finding, finding, ok, warning
from fmcluster.live.image_build import stack_resources
from fmcluster.live.runner import Check
from fmcluster.names import OBSERVABILITY_STACK, STORAGE_STACK, stack_name

NAMESPACE = "fmcluster/nccl"
LOOKBACK = timedelta(days=14)
PERIOD = 900
"""14 days in 15-minute periods is 1,344 datapoints, under GetMetricStatistics' 1,440."""
ALARM_STACKS = (STORAGE_STACK, OBSERVABILITY_STACK)


def validation_checks(config: ClusterConfig, aws: Aws, kept: Collected, now: datetime | None = None) -> list[Check]:
    moment = now or datetime.now(UTC)
    return [
        Check("nccl-tests results", "compute", lambda: check_nccl(config, aws, kept, moment)),
        Check("alarms", "observability", lambda: check_alarms(config, aws, kept)),
    ]


def check_nccl(config: ClusterConfig, aws: Aws, kept: Collected, now: datetime) -> list[Finding]:
    metrics = list(
        aws.pages(
            "cloudwatch",
            "ListMetrics",
            "Metrics",
            Namespace=NAMESPACE,
            MetricName="LargestMessageBusBandwidth",
            Dimensions=[{"Name": "Cluster", "Value": config.name}],
        )
    )
    if not metrics:
        return [warning("nccl-tests", "no result yet: run /opt/fmcluster/nccl-tests.sbatch (README)")]
    findings = []
    for metric in sorted(metrics, key=lambda m: sorted((d["Name"], d["Value"]) for d in m["Dimensions"])):
        dimensions = metric["Dimensions"]
        shown = {d["Name"]: d["Value"] for d in dimensions}
        subject = f"nccl-tests {shown.get('Nodes', '?')} x {shown.get('InstanceType', '?')}"
        latest = _latest(aws, "LargestMessageBusBandwidth", dimensions, now)
        if latest is None:
            findings.append(warning(subject, "no result in the last 14 days"))
            continue
        baseline = _latest(aws, "BaselineBusBandwidth", dimensions, now)
        kept.keep(f"nccl/{shown.get('InstanceType')}-{shown.get('Nodes')}", {"latest": latest, "baseline": baseline})
        when = latest["Timestamp"].astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        value = latest["Maximum"]
        if baseline is None:
            findings.append(ok(subject, f"{value:.1f} GB/s bus bandwidth at {when} (no baseline)"))
        elif value < baseline["Maximum"]:
            findings.append(
                finding(
                    "error",
                    subject,
                    f"{value:.1f} GB/s bus bandwidth at {when}, below the "
                    f"baseline {baseline['Maximum']:.1f} GB/s: check EFA (fi_info -p efa), the NCCL "
                    "environment and the nodes' placement",
                    key="nccl.env",
                )
            )
        else:
            findings.append(
                ok(subject, f"{value:.1f} GB/s bus bandwidth at {when} (baseline {baseline['Maximum']:.1f} GB/s)")
            )
    return findings


def _latest(aws: Aws, name: str, dimensions: list[dict], now: datetime) -> dict | None:
    points = aws.call(
        "cloudwatch",
        "GetMetricStatistics",
        Namespace=NAMESPACE,
        MetricName=name,
        Dimensions=dimensions,
        StartTime=now - LOOKBACK,
        EndTime=now,
        Period=PERIOD,
        Statistics=["Maximum"],
    ).get("Datapoints", [])
    return max(points, key=lambda point: point["Timestamp"]) if points else None


def check_alarms(config: ClusterConfig, aws: Aws, kept: Collected) -> list[Finding]:
    names = [
        name
        for part in ALARM_STACKS
        for name in stack_resources(aws, stack_name(config.name, part), "AWS::CloudWatch::Alarm")
    ]
    if not names:
        return []
    alarms = [  # DescribeAlarms takes at most 100 names, and pages its answer (botocore's paginator)
        alarm
        for start in range(0, len(names), 100)
        for alarm in aws.pages("cloudwatch", "DescribeAlarms", "MetricAlarms", AlarmNames=names[start : start + 100])
    ]
    kept.keep("alarms", alarms)
    firing = [alarm for alarm in alarms if alarm.get("StateValue") == "ALARM"]
    if not firing:
        return [ok("alarms", f"none of {len(alarms)} in ALARM")]
    return [
        finding(
            "error",
            f"alarm {alarm['AlarmName']}",
            f"ALARM since "
            f"{alarm['StateUpdatedTimestamp'].astimezone(UTC):%Y-%m-%d %H:%M UTC}: {alarm.get('StateReason', '')}",
            key="observability",
        )
        for alarm in firing
    ]
