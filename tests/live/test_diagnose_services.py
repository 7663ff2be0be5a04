"""diagnose's service checks alone: PCS node groups and node boots, the image build, nccl-tests and alarms."""

from __future__ import annotations

from fmcluster.live.diagnose import diagnose
from fmcluster.live.findings import Collected
from fmcluster.live.image_build import check_image_build
from fmcluster.live.pcs import check_pcs
from fmcluster.live.results_and_alarms import check_alarms, check_nccl
from tests.live.conftest import PCS_BLOCK, QUICKSTART, config_of
from tests.live.responses import (
    BOOT_CONSOLE,
    BUILD_ID,
    BUILD_LOG,
    GPU_GROUP_ID,
    NOW,
    alarms,
    build,
    console,
    identity,
    instances,
    log_events,
    pcs_cluster,
    pcs_group,
    pcs_group_summaries,
    stack,
)
from tests.live.test_diagnose import NCCL_METRICS, queue_alarm_stacks, queue_image_build, queue_nccl

GROUP = {"clusterIdentifier": "llm-pretrain"}
BOOT_FAILED = (
    "problem  PCS node i-0123456789abcdef0 (gpu): bootstrap finished with failures: mount-lustre: the node may never "
    "have joined Slurm (console output; on the node: /var/log/fmcluster/bootstrap.log)\n"
    "         from: compute[0]\n" + "\n".join(f"         | {line}" for line in BOOT_CONSOLE)
)


def queue_pcs(stub, group: dict, running: tuple[str, ...]) -> None:
    stub.ok("pcs", "GetCluster", pcs_cluster(), GROUP)
    status = group["computeNodeGroup"]["status"]
    stub.ok("pcs", "ListComputeNodeGroups", pcs_group_summaries(("gpu", GPU_GROUP_ID, status)), GROUP)
    stub.ok("pcs", "GetComputeNodeGroup", group, {**GROUP, "computeNodeGroupIdentifier": GPU_GROUP_ID})
    if status != "ACTIVE":
        return
    stub.ok(
        "ec2",
        "DescribeInstances",
        instances(*running),
        {
            "Filters": [
                {"Name": "tag:aws:pcs:compute-node-group-id", "Values": [GPU_GROUP_ID]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        },
    )
    for instance in sorted(running):
        stub.ok("ec2", "GetConsoleOutput", console(instance, BOOT_CONSOLE), {"InstanceId": instance, "Latest": True})


def test_a_pcs_node_that_never_joined_is_diagnosed_from_its_console(stubs):
    stub = stubs()
    queue_pcs(stub, pcs_group("gpu", GPU_GROUP_ID, count=2), ("i-0123456789abcdef0",))
    kept = Collected()
    findings = check_pcs(config_of(PCS_BLOCK), stub.aws(), kept)
    assert [f.render() for f in findings] == [
        "ok       PCS cluster llm-pretrain: ACTIVE",
        "ok       PCS node group gpu: ACTIVE",
        "problem  PCS node group gpu: 1 of its 2 static instances are running; PCS replaces nodes that fail to launch "
        "or register\n         from: compute[0]",
        BOOT_FAILED,
    ]
    assert kept.items["pcs/console/gpu/i-0123456789abcdef0"] == BOOT_CONSOLE


def test_a_failed_pcs_node_group_with_its_error_and_cause(stubs):
    stub = stubs()
    message = (
        "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1a)."
    )
    queue_pcs(
        stub, pcs_group("gpu", GPU_GROUP_ID, "CREATE_FAILED", errors=(("InsufficientInstanceCapacity", message),)), ()
    )
    _, group = check_pcs(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert group.message == f"CREATE_FAILED: InsufficientInstanceCapacity: {message}"
    assert group.key == "compute[0]" and group.cause.name == "insufficient-capacity"


def test_a_failed_image_build_with_its_phase_and_log_tail(stubs):
    stub = stubs()
    queue_image_build(stub, "FAILED", name="llm-pretrain")
    logs = build()["builds"][0]["logs"]
    stub.ok(
        "logs",
        "GetLogEvents",
        log_events(BUILD_LOG),
        {"logGroupName": logs["groupName"], "logStreamName": logs["streamName"], "limit": 30, "startFromHead": False},
    )
    [finding] = check_image_build(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert finding.render() == (
        "problem  training image build: FAILED in phase BUILD: Error while executing command: bash "
        f"/tmp/build-image.sh. Reason: exit status 1 ({BUILD_ID}; log: {logs['groupName']} stream "
        f"{logs['streamName']})\n         from: image\n" + "\n".join(f"         | {line}" for line in BUILD_LOG)
    )


def test_nccl_below_baseline_is_a_problem(stubs):
    stub = stubs()
    queue_nccl(stub, 391.5, 438.3)
    [finding] = check_nccl(config_of(QUICKSTART), stub.aws(), Collected(), NOW)
    assert finding.render() == (
        "problem  nccl-tests 2 x p5.48xlarge: 391.5 GB/s bus bandwidth at 2026-11-30 09:30 UTC, below the baseline "
        "438.3 GB/s: check EFA (fi_info -p efa), the NCCL environment and the nodes' placement\n"
        "         from: nccl.env"
    )


def test_an_alarm_in_alarm(stubs):
    stub = stubs()
    name = "quickstart-storage-NcclTestsBelowBaselinep548xlarge9C1C0161-1A2B3C"
    queue_alarm_stacks(stub, storage=[name], observability=None)
    stub.ok("cloudwatch", "DescribeAlarms", alarms((name, "ALARM")), {"AlarmNames": [name]})
    [finding] = check_alarms(config_of(QUICKSTART), stub.aws(), Collected())
    assert finding.render().startswith(
        f"problem  alarm {name}: ALARM since 2026-11-30 09:00 UTC: Threshold Crossed: 1 out of the last 1 datapoints"
    )


def test_pcs_end_to_end_exit_1(stubs):
    """A PCS file whose compute node never joined, through the whole diagnosis."""
    stub = stubs()
    stub.ok("sts", "GetCallerIdentity", identity(), {})
    for part in ("network", "storage", "image", "cluster", "observability"):
        name = f"llm-pretrain-{part}"
        stub.ok("cloudformation", "DescribeStacks", stack(name, "CREATE_COMPLETE"), {"StackName": name})
    queue_pcs(stub, pcs_group("gpu", GPU_GROUP_ID, count=1), ("i-0123456789abcdef0",))
    queue_image_build(stub, "SUCCEEDED", name="llm-pretrain")
    stub.ok(
        "cloudwatch",
        "ListMetrics",
        {"Metrics": []},
        {**NCCL_METRICS, "Dimensions": [{"Name": "Cluster", "Value": "llm-pretrain"}]},
    )
    for part in ("storage", "observability"):
        stub.ok(
            "cloudformation",
            "ListStackResources",
            {"StackResourceSummaries": []},
            {"StackName": f"llm-pretrain-{part}"},
        )
    result = diagnose(config_of(PCS_BLOCK), stub.aws(), workers=1, now=NOW)
    assert result.exit_code == 1
    assert result.report().startswith(BOOT_FAILED + "\n")


def test_pcs_node_groups_on_a_second_page_are_read(stubs):
    # botocore's pcs paginators-1 data: ListComputeNodeGroups pages with nextToken (lower case) in and out, where
    # most APIs use NextToken; a pager that reads NextToken would never see the second page.
    stub = stubs()
    stub.ok("pcs", "GetCluster", pcs_cluster(), GROUP)
    first = pcs_group_summaries(("gpu", GPU_GROUP_ID, "CREATE_FAILED"))
    stub.ok("pcs", "ListComputeNodeGroups", {**first, "nextToken": "page-2"}, GROUP)
    stub.ok(
        "pcs",
        "GetComputeNodeGroup",
        pcs_group("gpu", GPU_GROUP_ID, "CREATE_FAILED"),
        {**GROUP, "computeNodeGroupIdentifier": GPU_GROUP_ID},
    )
    stub.ok(
        "pcs",
        "ListComputeNodeGroups",
        pcs_group_summaries(("login", "pcs_login0001", "UPDATE_FAILED")),
        {**GROUP, "nextToken": "page-2"},
    )
    stub.ok(
        "pcs",
        "GetComputeNodeGroup",
        pcs_group("login", "pcs_login0001", "UPDATE_FAILED"),
        {**GROUP, "computeNodeGroupIdentifier": "pcs_login0001"},
    )
    findings = check_pcs(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert [(f.subject, f.message) for f in findings[1:]] == [
        ("PCS node group gpu", "CREATE_FAILED: PCS gave no reason"),
        ("PCS node group login", "UPDATE_FAILED: PCS gave no reason"),
    ]
