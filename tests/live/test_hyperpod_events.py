"""diagnose's HyperPod cluster events: read only where the cluster's NodeProvisioningMode keeps them (Continuous),
grouped, each group described once for the failure message only DescribeClusterEvent carries, mapped to the
cluster-file key of its instance group and to a known cause. Shapes: tests/live/responses.py, checked against botocore's
sagemaker model by the Stubs (ClusterEventSummary, ClusterEventDetail, EventMetadata)."""

from __future__ import annotations

from fmcluster.live.findings import Collected
from fmcluster.live.hyperpod import check_cluster
from fmcluster.live.redact import redact
from tests.live.conftest import QUICKSTART, config_of
from tests.live.responses import (
    EVENT_A,
    EVENT_B,
    EVENT_C,
    OPERATION,
    PROVISIONING_FAILED,
    cluster_event,
    cluster_events,
    cluster_nodes,
    cluster_operations,
    hyperpod_cluster,
    scaling_operation,
)

NAME = {"ClusterName": "quickstart"}
NEWEST = {**NAME, "SortBy": "EventTime", "SortOrder": "Descending", "MaxResults": 100}
RUNNING = {**NAME, "Status": "InProgress", "MaxResults": 100}


def queue_cluster(stub, mode: str | None = "Continuous") -> None:
    cluster = hyperpod_cluster("InService", "", gpus=2)
    if mode:
        cluster["NodeProvisioningMode"] = mode
    stub.ok("sagemaker", "DescribeCluster", cluster, NAME)


def queue_nodes(stub, operations: bool = True) -> None:
    """The operations in progress (none) a Continuous cluster is asked for, then its nodes."""
    if operations:
        stub.ok("sagemaker", "ListClusterOperations", cluster_operations(), RUNNING)
    stub.ok("sagemaker", "ListClusterNodes", cluster_nodes(), NAME)


def test_a_node_provisioning_error_is_found_in_the_events_with_its_key_and_cause(stubs):
    stub = stubs()
    queue_cluster(stub)
    stub.ok(
        "sagemaker",
        "ListClusterEvents",
        cluster_events(
            (EVENT_A, "Error", "Instance", "gpu", "i-0123456789abcdef0", "Instance provisioning failed"),
            (EVENT_B, "Error", "Instance", "gpu", "i-0bbbbbbbbbbbbbbb0", "Instance provisioning failed"),
            (EVENT_C, "Info", "InstanceGroup", "gpu", "", "Scaling started"),
        ),
        NEWEST,
    )
    stub.ok(
        "sagemaker",
        "DescribeClusterEvent",
        cluster_event(EVENT_A, "gpu", "i-0123456789abcdef0", PROVISIONING_FAILED),
        {**NAME, "EventId": EVENT_A},
    )
    queue_nodes(stub)
    kept = Collected()
    cluster, event = check_cluster(config_of(QUICKSTART), stub.aws(), kept)
    assert cluster.level == "ok"
    assert event.render().splitlines()[:3] == [
        "problem  HyperPod event on instance group gpu: Error at 2026-11-30 09:50 UTC: Instance provisioning failed; "
        f"{PROVISIONING_FAILED}; 2 such event(s) among the newest 3; nodes i-0123456789abcdef0, i-0bbbbbbbbbbbbbbb0",
        "         from: compute[0]",
        "         cause: SageMaker has no free capacity of the requested instance type for the HyperPod cluster in "
        "its zone",
    ]
    assert [e["EventId"] for e in kept.items["hyperpod/events"]] == [EVENT_A, EVENT_B, EVENT_C]
    assert kept.items[f"hyperpod/events/{EVENT_A}"]["EventDetails"]["InstanceId"] == "i-0123456789abcdef0"


def test_warnings_are_warnings_and_a_quiet_cluster_says_what_it_read(stubs):
    stub = stubs()
    queue_cluster(stub)
    stub.ok(
        "sagemaker",
        "ListClusterEvents",
        cluster_events((EVENT_C, "Warn", "Cluster", "", "", "Slurm accounting database unreachable")),
        NEWEST,
    )
    slurm = cluster_event(EVENT_C, "gpu", "", "")["EventDetails"]
    slurm.update(ResourceType="Cluster", EventLevel="Warn", Description="Slurm accounting database unreachable")
    del slurm["InstanceGroupName"], slurm["InstanceId"]
    # EventMetadata is a tagged union (botocore): a Slurm health event carries SlurmHealth, with no FailureMessage
    slurm["EventDetails"] = {"EventMetadata": {"SlurmHealth": {"Component": "Slurmdbd", "Status": "Unhealthy",
                                                               "Reason": "DbUnreachable"}}}  # fmt: skip
    stub.ok("sagemaker", "DescribeClusterEvent", {"EventDetails": slurm}, {**NAME, "EventId": EVENT_C})
    queue_nodes(stub)
    _, event = check_cluster(config_of(QUICKSTART), stub.aws(), Collected())
    assert event.render() == (
        "warning  HyperPod event on cluster quickstart: Warn at 2026-11-30 09:50 UTC: Slurm accounting database "
        "unreachable\n         from: compute"
    )

    stub = stubs()
    queue_cluster(stub)
    stub.ok("sagemaker", "ListClusterEvents", cluster_events((EVENT_C, "Info", "Cluster", "", "", "Cluster created")),
            NEWEST)  # fmt: skip
    queue_nodes(stub)
    _, event = check_cluster(config_of(QUICKSTART), stub.aws(), Collected())
    assert event.render() == "ok       HyperPod events of quickstart: no errors or warnings among the newest 1 events"


def test_a_cluster_without_continuous_provisioning_is_not_asked_for_events(stubs):
    stub = stubs()
    queue_cluster(stub, mode=None)
    queue_nodes(stub, operations=False)
    findings = check_cluster(config_of(QUICKSTART), stub.aws(), Collected())
    assert [f.subject for f in findings] == ["HyperPod cluster quickstart"]  # no events or operations asked for


def test_events_that_cannot_be_read_are_not_checked_and_say_why(stubs):
    stub = stubs()
    queue_cluster(stub)
    stub.denied("sagemaker", "ListClusterEvents", NEWEST)
    queue_nodes(stub)
    _, event = check_cluster(config_of(QUICKSTART), stub.aws(), Collected())
    assert event.level == "unchecked" and event.key == "compute"
    assert event.text.startswith("not checked: the newest events: ")
    assert "sagemaker:ListClusterEvents" in event.message


def test_what_the_events_hold_passes_the_redactor(stubs):
    """An event's text is AWS's, but a description can quote what a user passed (a lifecycle script's arguments):
    everything kept goes through the one redactor on its way into --collect's archive."""
    stub = stubs()
    queue_cluster(stub)
    leaked = "Lifecycle script failed: curl -u admin:hunter2secret https://repo.example.com"
    stub.ok("sagemaker", "ListClusterEvents",
            cluster_events((EVENT_A, "Error", "Instance", "gpu", "i-0123456789abcdef0", leaked)), NEWEST)  # fmt: skip
    stub.ok("sagemaker", "DescribeClusterEvent", cluster_event(EVENT_A, "gpu", "i-0123456789abcdef0", leaked),
            {**NAME, "EventId": EVENT_A})  # fmt: skip
    queue_nodes(stub)
    kept = Collected()
    check_cluster(config_of(QUICKSTART), stub.aws(), kept)
    assert "hunter2secret" not in str(redact(kept.items["hyperpod/events"]))
    assert "hunter2secret" not in str(redact(kept.items[f"hyperpod/events/{EVENT_A}"]))


def test_a_scaling_operation_in_progress_is_shown_with_what_it_changes(stubs):
    stub = stubs()
    queue_cluster(stub)
    stub.ok("sagemaker", "ListClusterEvents", cluster_events(), NEWEST)
    stub.ok("sagemaker", "ListClusterOperations", cluster_operations((OPERATION, "Scaling")), RUNNING)
    stub.ok("sagemaker", "DescribeClusterOperation", scaling_operation(OPERATION, "gpu", 1, 2),
            {**NAME, "OperationId": OPERATION})  # fmt: skip
    stub.ok("sagemaker", "ListClusterNodes", cluster_nodes(), NAME)
    kept = Collected()
    _, events, operation = check_cluster(config_of(QUICKSTART), stub.aws(), kept)
    assert events.message == "no errors or warnings among the newest 0 events"
    assert operation.render() == (
        f"warning  HyperPod Scaling operation {OPERATION}: in progress since 2026-11-30 09:40 UTC: gpu 1 -> 2 nodes\n"
        "         from: compute[0]"
    )
    assert kept.items[f"hyperpod/operations/{OPERATION}"]["Type"] == "Scaling"
