"""diagnose's service checks alone: PCS node groups and node boots, the image build, nccl-tests and alarms."""

from __future__ import annotations

from fmcluster.live.diagnose import diagnose
from fmcluster.live.findings import Collected
from fmcluster.live.image_build import check_image_build
from fmcluster.live.pcs import check_pcs
from fmcluster.live.results_and_alarms import check_alarms, check_nccl
from fmcluster.names import HEAD_GROUP
from tests.live.conftest import PCS_BLOCK, QUICKSTART, config_of
from tests.live.responses import (
    BLOCK,
    BOOT_CONSOLE,
    BUILD_ID,
    BUILD_LOG,
    GPU_GROUP_ID,
    NOW,
    RESERVATION,
    WARN_CONSOLE,
    alarms,
    build,
    capacity_block_status,
    capacity_reservation,
    console,
    identity,
    instances,
    pcs_cluster,
    pcs_group,
    pcs_group_summaries,
    queue_log_tail,
    stack,
)
from tests.live.test_diagnose import NCCL_METRICS, queue_alarm_stacks, queue_image_build, queue_nccl

GROUP = {"clusterIdentifier": "llm-pretrain"}
BOOT_FAILED = (
    "problem  PCS node i-0123456789abcdef0 (gpu): fmcluster step lustre FAILED with exit status 1; the node cannot "
    "train without it (log: /var/log/fmcluster/mount-lustre.log) (console output)\n"
    "         from: compute[0]\n" + "\n".join(f"         | {line}" for line in BOOT_CONSOLE)
)


def queue_pcs(stub, group: dict, running: tuple[str, ...], lines: list[str] = BOOT_CONSOLE) -> None:
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
        stub.ok("ec2", "GetConsoleOutput", console(instance, lines), {"InstanceId": instance, "Latest": True})


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
        "warning  PCS node group gpu: consoles read: 1 of 1 (1 with a failed step, 0 with a warning)",
    ]
    assert kept.items["pcs/console/gpu/i-0123456789abcdef0"] == BOOT_CONSOLE


def test_a_pcs_node_that_joined_without_containers_is_a_warning(stubs):
    stub = stubs()
    queue_pcs(stub, pcs_group("gpu", GPU_GROUP_ID, count=1), ("i-0123456789abcdef0",), lines=WARN_CONSOLE)
    findings = check_pcs(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert [f.render() for f in findings][2:] == [
        "warning  PCS node i-0123456789abcdef0 (gpu): fmcluster WARNING: step enroot failed; jobs cannot use "
        "--container-image (no enroot/pyxis on this node) (log: /var/log/fmcluster/enroot-pyxis.log) (console output)"
        "\n         from: compute[0]\n" + "\n".join(f"         | {line}" for line in WARN_CONSOLE),
        "warning  PCS node group gpu: consoles read: 1 of 1 (0 with a failed step, 1 with a warning)",
    ]


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
    queue_log_tail(stub, logs["groupName"], logs["streamName"], 30, BUILD_LOG)
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
    # the capacity windows check, last: the block's window and its status (fmcluster.live.windows)
    stub.ok("ec2", "DescribeCapacityReservations", capacity_reservation(), {"CapacityReservationIds": [RESERVATION]})
    stub.ok("ec2", "DescribeCapacityBlockStatus", capacity_block_status(interconnect="impaired", unavailable=2),
            {"CapacityBlockIds": [BLOCK]})  # fmt: skip
    result = diagnose(config_of(PCS_BLOCK), stub.aws(), workers=1, now=NOW)
    assert result.exit_code == 1
    assert result.report().startswith(BOOT_FAILED + "\n")
    assert (
        f"warning  capacity block {RESERVATION}: active, started 2026-11-30 08:00 UTC, ends 2026-12-14 10:00 UTC "
        "(in 14 days 0 h); interconnect impaired, 14 of 16 instances available; its nodes drain 60 min before its end"
    ) in result.report().splitlines()


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


FILTERS = {
    "Filters": [
        {"Name": "tag:aws:pcs:compute-node-group-id", "Values": [GPU_GROUP_ID]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
}
GOOD_CONSOLE = [line for line in BOOT_CONSOLE if "fmcluster" not in line]
"""The same boot without its failure: cloud-init's own lines."""


def hundred_node_group(stub, failed: set[str], *, deny: set[str] = frozenset()) -> tuple[str, ...]:
    """A 100-node ACTIVE gpu group: consoles of `failed` show a failed bootstrap, those of `deny` are refused."""
    ids = tuple(f"i-0{index:016x}" for index in range(100))
    stub.ok("pcs", "GetCluster", pcs_cluster(), GROUP)
    stub.ok("pcs", "ListComputeNodeGroups", pcs_group_summaries(("gpu", GPU_GROUP_ID, "ACTIVE")), GROUP)
    group = pcs_group("gpu", GPU_GROUP_ID, count=100)
    stub.ok("pcs", "GetComputeNodeGroup", group, {**GROUP, "computeNodeGroupIdentifier": GPU_GROUP_ID})
    stub.ok("ec2", "DescribeInstances", instances(*ids), FILTERS)
    for instance in ids:  # workers=1: read in instance id order
        ask = {"InstanceId": instance, "Latest": True}
        if instance in deny:
            stub.denied("ec2", "GetConsoleOutput", ask)
        else:
            stub.ok("ec2", "GetConsoleOutput", console(instance, BOOT_CONSOLE if instance in failed else GOOD_CONSOLE),
                    ask)  # fmt: skip
    return ids


def test_a_100_node_group_with_3_failed_boots_reports_all_3(stubs):
    """Every console is read, not the lowest 8: failures at ids 17, 58 and 99 are all found, and the count is said."""
    stub = stubs()
    failed = {f"i-0{index:016x}" for index in (17, 58, 99)}
    hundred_node_group(stub, failed)
    findings = check_pcs(config_of(PCS_BLOCK), stub.aws(), Collected(), workers=1)
    assert sorted(f.subject for f in findings if f.level == "error") == sorted(
        f"PCS node {instance} (gpu)" for instance in failed
    )
    assert findings[-1].render() == (
        "warning  PCS node group gpu: consoles read: 100 of 100 (3 with a failed step, 0 with a warning)"
    )


def test_refused_consoles_are_counted_and_never_read_as_good_boots(stubs):
    """The issue's reproduction: `ec2:GetConsoleOutput` denied. Before, the whole PCS check was dropped and diagnose
    exited 0; now the group's state stays, and the consoles not read are an unknown with the action refused."""
    stub = stubs()
    ids = tuple(f"i-0{index:016x}" for index in range(100))
    hundred_node_group(stub, set(), deny=set(ids[3:]))
    findings = check_pcs(config_of(PCS_BLOCK), stub.aws(), Collected(), workers=1)
    assert [f.render() for f in findings] == [
        "ok       PCS cluster llm-pretrain: ACTIVE",
        "ok       PCS node group gpu: ACTIVE",
        "unknown  PCS node group gpu: not checked: boots: consoles read 3 of 100: 97 not read: access denied to "
        "ec2:GetConsoleOutput (the read-only policy in fmcluster's README grants it)\n         from: compute[0]",
    ]


def test_a_refused_console_read_makes_diagnose_exit_non_zero_and_name_the_check(stubs):
    stub = stubs()
    stub.ok("sts", "GetCallerIdentity", identity(), {})
    for part in ("network", "storage", "image", "cluster", "observability"):
        name = f"llm-pretrain-{part}"
        stub.ok("cloudformation", "DescribeStacks", stack(name, "CREATE_COMPLETE"), {"StackName": name})
    stub.ok("pcs", "GetCluster", pcs_cluster(), GROUP)
    stub.ok("pcs", "ListComputeNodeGroups", pcs_group_summaries(("gpu", GPU_GROUP_ID, "ACTIVE")), GROUP)
    group = pcs_group("gpu", GPU_GROUP_ID, count=1)
    stub.ok("pcs", "GetComputeNodeGroup", group, {**GROUP, "computeNodeGroupIdentifier": GPU_GROUP_ID})
    stub.ok("ec2", "DescribeInstances", instances("i-0123456789abcdef0"), FILTERS)
    stub.denied("ec2", "GetConsoleOutput", {"InstanceId": "i-0123456789abcdef0", "Latest": True})
    queue_image_build(stub, "SUCCEEDED", name="llm-pretrain")
    stub.ok("cloudwatch", "ListMetrics", {"Metrics": []},
            {**NCCL_METRICS, "Dimensions": [{"Name": "Cluster", "Value": "llm-pretrain"}]})  # fmt: skip
    for part in ("storage", "observability"):
        stub.ok("cloudformation", "ListStackResources", {"StackResourceSummaries": []},
                {"StackName": f"llm-pretrain-{part}"})  # fmt: skip
    stub.ok("ec2", "DescribeCapacityReservations", capacity_reservation(), {"CapacityReservationIds": [RESERVATION]})
    stub.ok("ec2", "DescribeCapacityBlockStatus", capacity_block_status(), {"CapacityBlockIds": [BLOCK]})
    result = diagnose(config_of(PCS_BLOCK), stub.aws(), workers=1, now=NOW)
    assert result.exit_code == 2
    assert result.report().splitlines()[-1] == (
        "NOT CHECKED: 1 check(s) did not run in full, so nothing is known there: PCS node group gpu"
    )
    assert "healthy" not in result.report()


def test_an_active_group_with_errors_is_a_problem_with_its_cause(stubs):
    """PCS keeps a group ACTIVE while launches fail; its errorInfo is the failure record (PCS API reference,
    ComputeNodeGroup.errorInfo). PCS's own error texts have no public example here: EC2's message is the one
    matched (unconfirmed that PCS passes it through unchanged)."""
    stub = stubs()
    message = "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested."
    group = pcs_group("gpu", GPU_GROUP_ID, count=0, errors=(("InsufficientInstanceCapacity", message),))
    queue_pcs(stub, group, ())
    _, found, *_ = check_pcs(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert found.level == "error" and found.message.startswith("ACTIVE but PCS reports errors: ")
    # The group is on a capacity block: it is not told to buy one.
    assert found.cause.name == "insufficient-capacity" and "reservation_id" in found.cause.fix
    assert "capacity block or ODCR" not in found.cause.fix


def test_the_head_node_group_maps_to_its_key_under_its_real_name(stubs):
    """fmcluster names the PCS head node's group `head` (fmcluster.names.HEAD_GROUP, which the cluster stack and
    live/pcs.py's keys both take), not `fmcluster_head` (a PCS group name cannot hold '_': botocore pcs
    ComputeNodeGroupName pattern); without a login node it exists for managed Prometheus."""
    assert HEAD_GROUP == "head"
    stub = stubs()
    stub.ok("pcs", "GetCluster", pcs_cluster(), GROUP)
    stub.ok("pcs", "ListComputeNodeGroups", pcs_group_summaries(("head", "pcs_head000001", "CREATE_FAILED")), GROUP)
    stub.ok("pcs", "GetComputeNodeGroup", pcs_group("head", "pcs_head000001", "CREATE_FAILED"),
            {**GROUP, "computeNodeGroupIdentifier": "pcs_head000001"})  # fmt: skip
    _, head = check_pcs(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert (head.subject, head.key) == ("PCS node group head", "observability.prometheus")


def test_a_build_whose_log_stream_was_never_created_is_still_reported_failed(stubs):
    stub = stubs()
    queue_image_build(stub, "FAILED", name="llm-pretrain")
    logs = build()["builds"][0]["logs"]
    stub.error("logs", "GetLogEvents", "ResourceNotFoundException", "The specified log stream does not exist.",
               params={"logGroupName": logs["groupName"], "logStreamName": logs["streamName"], "limit": 30,
                       "startFromHead": False})  # fmt: skip
    [finding] = check_image_build(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert finding.level == "error" and finding.message.startswith("FAILED in phase BUILD")
    assert finding.details == ("(no build log: the stream was never created; the build failed before it wrote any)",)


def test_a_log_tail_whose_first_page_is_empty_is_read_on(stubs):
    """CloudWatch Logs API reference, GetLogEvents: a page "might only be partially full, or even empty"; the tail
    goes on until the token comes back unchanged."""
    stub = stubs()
    queue_image_build(stub, "FAILED", name="llm-pretrain")
    logs = build()["builds"][0]["logs"]
    queue_log_tail(stub, logs["groupName"], logs["streamName"], 30, [], BUILD_LOG)
    [finding] = check_image_build(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert finding.details == tuple(BUILD_LOG)


def test_a_throttled_call_names_the_action_and_the_throttle(stubs):
    stub = stubs()
    stub.ok("pcs", "GetCluster", pcs_cluster(), GROUP)
    stub.ok("pcs", "ListComputeNodeGroups", pcs_group_summaries(("gpu", GPU_GROUP_ID, "ACTIVE")), GROUP)
    stub.ok("pcs", "GetComputeNodeGroup", pcs_group("gpu", GPU_GROUP_ID, count=0),
            {**GROUP, "computeNodeGroupIdentifier": GPU_GROUP_ID})  # fmt: skip
    stub.error("ec2", "DescribeInstances", "RequestLimitExceeded", "Request limit exceeded.", status=503,
               params=FILTERS)  # fmt: skip
    findings = check_pcs(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert findings[-1].render() == (
        "unknown  PCS node group gpu: not checked: its instances and their boots: ec2:DescribeInstances throttled "
        "(RequestLimitExceeded) after botocore's retries; run again later\n         from: compute[0]"
    )


def test_a_build_batchgetbuilds_no_longer_finds_is_not_checked_not_a_traceback(stubs):
    """CodeBuild API reference, BatchGetBuilds: the answer lists `builds` and, apart, `buildsNotFound` (botocore's
    codebuild model: BatchGetBuildsOutput); a build listed by ListBuildsForProject and deleted since comes back in
    `buildsNotFound` with `builds` empty."""
    stub = stubs()
    project = BUILD_ID.split(":")[0]
    stub.ok("cloudformation", "ListStackResources",
            {"StackResourceSummaries": [{"LogicalResourceId": "TrainingImageBuild8242BAF6",
                                         "PhysicalResourceId": project, "ResourceType": "AWS::CodeBuild::Project",
                                         "LastUpdatedTimestamp": NOW, "ResourceStatus": "CREATE_COMPLETE"}]},
            {"StackName": "llm-pretrain-image"})  # fmt: skip
    stub.ok("codebuild", "ListBuildsForProject", {"ids": [BUILD_ID]},
            {"projectName": project, "sortOrder": "DESCENDING"})  # fmt: skip
    stub.ok("codebuild", "BatchGetBuilds", {"builds": [], "buildsNotFound": [BUILD_ID]}, {"ids": [BUILD_ID]})
    [finding] = check_image_build(config_of(PCS_BLOCK), stub.aws(), Collected())
    assert (finding.level, finding.text) == (
        "unchecked",
        f"not checked: the last build: CodeBuild no longer finds {BUILD_ID} (BatchGetBuilds buildsNotFound)",
    )
