"""`fmcluster diagnose`: stacks and their root cause, HyperPod nodes and lifecycle logs, the report, --collect."""

from __future__ import annotations

import functools
import json
import re
import tarfile
from datetime import timedelta
from pathlib import Path

from fmcluster import cli, live
from fmcluster.live.findings import Collected
from fmcluster.live.hyperpod import check_cluster
from fmcluster.live.stacks import CONSTRUCTS, check_stack, owner, root_cause, stack_checks
from tests.live import test_redact as redaction
from tests.live.conftest import QUICKSTART, config_of
from tests.live.responses import (
    BUILD_ID,
    CLUSTER_ARN,
    LIFECYCLE_FAILED,
    LIFECYCLE_TAIL,
    NOW,
    alarms,
    build,
    cluster_nodes,
    datapoints,
    hyperpod_cluster,
    identity,
    metrics,
    queue_log_tail,
    rolled_back_storage,
    stack,
    stack_resources,
)

SNAPSHOTS = Path(__file__).resolve().parents[1] / "gates" / "__snapshots__" / "test_templates"


def test_the_first_failure_is_the_root_cause_not_the_cascade():
    events = rolled_back_storage()["StackEvents"]
    first = root_cause(events, "quickstart-storage")
    assert first["LogicalResourceId"] == "LustreFileSystem4AFDAE78"


def test_every_synthesized_resource_maps_to_a_key():
    """Logical ids come from the synthesized templates of every example (the snapshots), not from the mapping."""
    unmapped = set()
    for snapshot in SNAPSHOTS.glob("*.json"):
        example = re.search(r"\[(.+)\]", snapshot.name)[1]
        config = live_config(example)
        for stack_name, template in json.loads(snapshot.read_text()).items():
            part = stack_name.removeprefix(f"{config.name}-")
            for logical_id in template["Resources"]:
                if owner(config, logical_id, part).startswith("a resource fmcluster does not map"):
                    unmapped.add(logical_id)
    assert unmapped == set()
    assert len(CONSTRUCTS) == len({prefix for prefix, _, _ in CONSTRUCTS})


def test_a_logical_id_is_attributed_in_its_own_stack():
    """The image and the mirror stacks each hold a Key961B73FD (the snapshot of examples/pcs-own-vpc.yaml): each is
    named for its own stack, and the mirror stack's resources are the mirror's, not the storage stack's."""
    config = live_config("pcs-own-vpc")
    templates = json.loads((SNAPSHOTS / "test_templates_match_snapshot[pcs-own-vpc].json").read_text())
    assert "Key961B73FD" in templates["pcs-own-vpc-image"]["Resources"]
    assert "Key961B73FD" in templates["pcs-own-vpc-mirror"]["Resources"]
    assert owner(config, "Key961B73FD", "image") == "image: the image repository's KMS key"
    assert owner(config, "Key961B73FD", "mirror") == (
        "orchestrator.node_image: the artifact mirror's KMS key (MirrorStack)"
    )
    assert owner(config, "Mirror224E8F46", "mirror") == (
        "orchestrator.node_image: the artifact mirror's job, in its own stack with a baked node image"
    )
    assert owner(config, "Mirror224E8F46", "storage") == (
        "storage: the artifact mirror: a CodeBuild job outside the VPC, run at deploy (ArtifactMirror)"
    )


def live_config(example: str):
    from fmcluster.config import load

    return load(Path(__file__).resolve().parents[2] / "examples" / f"{example}.yaml")


ROLLED_BACK = (
    "problem  stack quickstart-storage: ROLLBACK_COMPLETE; first failure: LustreFileSystem4AFDAE78 "
    '(AWS::FSx::FileSystem) CREATE_FAILED: Resource handler returned message: "The file system cannot be created '
    "because the default security group in the subnet provided or the provided security groups do not permit Lustre "
    "LNET network traffic on port 988 (Service: FSx, Status Code: 400, Request ID: 0949dbfc-5e0a-4f03-bf89-"
    'd7e74540f8ec)" (RequestToken: 3c1d1f4e-8a33-4f7b-b7b4-6a3e0e0e2f10, HandlerErrorCode: InvalidRequest)\n'
    "         from: storage.lustre: FSx for Lustre (LustreStorage)\n"
    "         cause: FSx checked the file system's security groups before the Lustre port rules existed, or without "
    "them\n"
    "         fix: deploy the storage stack again (its rules are created first); with security groups of your own, "
    "allow TCP 988 and 1018-1023 between the file system and the nodes\n"
    "         source: github.com/aws/aws-parallelcluster/issues/6181"
)


def test_a_rolled_back_storage_stack(stubs):
    stub = stubs()
    stub.ok(
        "cloudformation",
        "DescribeStacks",
        stack("quickstart-storage", "ROLLBACK_COMPLETE"),
        {"StackName": "quickstart-storage"},
    )
    stub.ok("cloudformation", "DescribeStackEvents", rolled_back_storage(), {"StackName": "quickstart-storage"})
    kept = Collected()
    [finding] = check_stack(config_of(QUICKSTART), stub.aws(), "quickstart-storage", kept)
    assert finding.render() == ROLLED_BACK
    assert set(kept.items) == {"stacks/quickstart-storage", "events/quickstart-storage"}


def test_the_data_links_stack_is_diagnosed_when_the_file_has_s3_links(stubs):
    """`<name>-data-links` exists only with storage.lustre.repositories (fmcluster/stacks/__init__.py builds it)."""
    links = {"lustre": {"repositories": [{"path": "/datasets"}]}}
    stub = stubs()
    labels = [check.label for check in stack_checks(config_of(QUICKSTART, storage=links), stub.aws(), Collected())]
    assert labels == [f"stack quickstart-{part}" for part in
                      ("network", "storage", "data-links", "image", "cluster", "observability")]  # fmt: skip
    labels = [check.label for check in stack_checks(config_of(QUICKSTART), stub.aws(), Collected())]
    assert "stack quickstart-data-links" not in labels


def test_the_mirror_stack_is_diagnosed_with_a_baked_node_image_only(stubs):
    """fmcluster.stacks.mirror.mirror_has_own_stack: with boot the storage stack holds the mirror."""
    from tests.live.conftest import PCS_BLOCK

    stub = stubs()
    baked = config_of(PCS_BLOCK, orchestrator={"type": "pcs", "node_image": "baked"})
    labels = [
        check.label.removeprefix(f"stack {baked.name}-") for check in stack_checks(baked, stub.aws(), Collected())
    ]
    assert labels == ["network", "mirror", "storage", "image", "node-image", "cluster", "observability"]
    boot = [check.label for check in stack_checks(config_of(PCS_BLOCK), stub.aws(), Collected())]
    assert not [label for label in boot if label.endswith("-mirror")]


def test_healthy_missing_and_running_stacks(stubs):
    stub = stubs()
    ask = {"StackName": "quickstart-network"}
    stub.ok("cloudformation", "DescribeStacks", stack("quickstart-network", "CREATE_COMPLETE"), ask)
    stub.error(
        "cloudformation",
        "DescribeStacks",
        "ValidationError",
        "Stack with id quickstart-network does not exist",
        params=ask,
    )
    stub.ok("cloudformation", "DescribeStacks", stack("quickstart-network", "UPDATE_IN_PROGRESS"), ask)
    aws, config = stub.aws(), config_of(QUICKSTART)
    rendered = [check_stack(config, aws, "quickstart-network", Collected())[0].render() for _ in range(3)]
    assert rendered == [
        "ok       stack quickstart-network: CREATE_COMPLETE",
        "warning  stack quickstart-network: not deployed",
        "warning  stack quickstart-network: UPDATE_IN_PROGRESS (a deploy is running; diagnose again when it ends)",
    ]


FAILED_NODE = (
    "problem  HyperPod node i-0123456789abcdef0 (gpu): Failure: " + LIFECYCLE_FAILED + "; fmcluster lifecycle FAILED "
    "at step nccl-env: see the lines of each step above (log: /var/log/fmcluster/lifecycle.log) (log: "
    "/aws/sagemaker/Clusters/quickstart/a1b2c3d4e5f6 stream LifecycleConfig/gpu/i-0123456789abcdef0)\n"
    "         from: compute[0]\n"
    "         cause: a HyperPod lifecycle script exited with an error on a node\n"
    "         fix: read the node's lifecycle log (below): its last line names the failed fmcluster step and "
    "/var/log/fmcluster/lifecycle.log on the node; fix the cause, then deploy again\n"
    "         source: github.com/awslabs/awsome-distributed-ai/issues/188\n"
    + "\n".join(f"         | {line}" for line in LIFECYCLE_TAIL)
)


LOG_GROUP = "/aws/sagemaker/Clusters/quickstart/a1b2c3d4e5f6"


def queue_failed_hyperpod(stub, status: str = "Failed") -> None:
    failure = LIFECYCLE_FAILED if status == "Failed" else ""
    stub.ok("sagemaker", "DescribeCluster", hyperpod_cluster(status, failure), {"ClusterName": "quickstart"})
    stub.ok(
        "sagemaker",
        "ListClusterNodes",
        cluster_nodes(
            ("controller", "i-0aaaaaaaaaaaaaaa0", "Running", ""),
            ("gpu", "i-0123456789abcdef0", "Failure", LIFECYCLE_FAILED),
            ("gpu", "i-0bbbbbbbbbbbbbbb0", "Running", ""),
        ),
        {"ClusterName": "quickstart"},
    )
    queue_log_tail(stub, LOG_GROUP, "LifecycleConfig/gpu/i-0123456789abcdef0", 40, LIFECYCLE_TAIL)


def test_a_failed_hyperpod_node_with_its_lifecycle_log(stubs):
    stub = stubs()
    queue_failed_hyperpod(stub)
    kept = Collected()
    cluster, node = check_cluster(config_of(QUICKSTART), stub.aws(), kept)
    assert cluster.level == "error" and cluster.cause.name == "lifecycle-script-failed"
    assert node.render() == FAILED_NODE
    assert kept.items["hyperpod/lifecycle/gpu/i-0123456789abcdef0"] == LIFECYCLE_TAIL
    assert CLUSTER_ARN.endswith("/a1b2c3d4e5f6")


def test_a_node_that_failed_before_its_scripts_ran(stubs):
    stub = stubs()
    stub.ok("sagemaker", "DescribeCluster", hyperpod_cluster("InService", ""), {"ClusterName": "quickstart"})
    stub.ok(
        "sagemaker",
        "ListClusterNodes",
        cluster_nodes(("gpu", "i-0123456789abcdef0", "Failure", "")),
        {"ClusterName": "quickstart"},
    )
    stub.error("logs", "GetLogEvents", "ResourceNotFoundException", "The specified log stream does not exist.")
    _, node = check_cluster(config_of(QUICKSTART), stub.aws(), Collected())
    assert node.details == (
        "(no lifecycle log: /aws/sagemaker/Clusters/quickstart/a1b2c3d4e5f6 "
        "LifecycleConfig/gpu/i-0123456789abcdef0 does not exist; the node failed before its "
        "scripts ran)",
    )


def queue_account(stub, scenario: str, leaky: bool = False) -> None:
    """Two accounts as a user meets them (checks run one at a time): "storage", the storage stack rolled back
    on the first deploy (so no cluster); "node", a deployed cluster whose replacement gpu node failed its
    lifecycle scripts. `leaky` ("storage" only): every shape of the redaction corpus is in what is read: stack
    parameters and tags, an event's ResourceProperties, the image build's environment and its failed log."""
    stub.ok("sts", "GetCallerIdentity", identity(), {})
    statuses = {
        "storage": {"network": "CREATE_COMPLETE", "storage": "ROLLBACK_COMPLETE", "image": "CREATE_COMPLETE"},
        "node": {
            "network": "CREATE_COMPLETE",
            "storage": "CREATE_COMPLETE",
            "image": "CREATE_COMPLETE",
            "cluster": "CREATE_COMPLETE",
            "observability": "UPDATE_COMPLETE",
        },
    }[scenario]
    for part in ("network", "storage", "image", "cluster", "observability"):
        name = f"quickstart-{part}"
        if part not in statuses:
            stub.no_stack("DescribeStacks", name)
            continue
        found = stack(name, statuses[part])
        events = rolled_back_storage()
        if leaky:
            found["Stacks"][0].update(redaction.CORPUS["cloudformation-parameters-and-tags"][0])
            properties = redaction.CORPUS["stack-event-resource-properties"][0]["ResourceProperties"]
            events["StackEvents"][-2]["ResourceProperties"] = properties  # on the KMS key's CREATE_COMPLETE event
        stub.ok("cloudformation", "DescribeStacks", found, {"StackName": name})
        if statuses[part] == "ROLLBACK_COMPLETE":
            stub.ok("cloudformation", "DescribeStackEvents", events, {"StackName": name})
    if scenario == "storage":
        stub.error(
            "sagemaker",
            "DescribeCluster",
            "ResourceNotFound",
            "Cluster quickstart not found",
            params={"ClusterName": "quickstart"},
        )
    else:
        queue_failed_hyperpod(stub, "InService")
    queue_image_build(stub, "FAILED" if leaky else "SUCCEEDED", leaky=leaky)
    if scenario == "storage":
        stub.ok("cloudwatch", "ListMetrics", {"Metrics": []}, NCCL_METRICS)
        queue_alarm_stacks(stub, storage=[], observability=None)
    else:
        queue_nccl(stub, 480.2, 438.3)
        firing = (
            "quickstart-storage-NcclTestsBelowBaselinep548xlarge9C1C0161-1A2B3C",
            "quickstart-observability-ObservabilityFsxFreeCapacityAlarm0589C9EA-4D5E",
        )
        queue_alarm_stacks(stub, storage=[firing[0]], observability=[firing[1]])
        stub.ok(
            "cloudwatch", "DescribeAlarms", alarms((firing[0], "OK"), (firing[1], "OK")), {"AlarmNames": list(firing)}
        )


NCCL_METRICS = {
    "Namespace": "fmcluster/nccl",
    "MetricName": "LargestMessageBusBandwidth",
    "Dimensions": [{"Name": "Cluster", "Value": "quickstart"}],
}
NCCL_DIMENSIONS = [
    {"Name": "Cluster", "Value": "quickstart"},
    {"Name": "InstanceType", "Value": "p5.48xlarge"},
    {"Name": "Nodes", "Value": "2"},
]


def leaky_log() -> list[str]:
    """Every text of the redaction corpus as log events, data as JSON printed into a line, line lists line by line."""
    lines: list[str] = []
    for data, _ in redaction.CORPUS.values():
        if isinstance(data, str):
            lines.append(data)
        elif isinstance(data, list):
            lines += data
        else:
            lines.append(f"[Container] 2026/11/30 09:12:03.101 {json.dumps(data)}")
    return lines


def queue_image_build(stub, status: str, name: str = "quickstart", leaky: bool = False) -> None:
    project = BUILD_ID.split(":")[0]
    stub.ok(
        "cloudformation",
        "ListStackResources",
        stack_resources(
            f"{name}-image",
            ("TrainingImageBuild8242BAF6", project, "AWS::CodeBuild::Project"),
            ("TrainingImageRepositoryA4686A09", f"{name}-training", "AWS::ECR::Repository"),
        ),
        {"StackName": f"{name}-image"},
    )
    stub.ok(
        "codebuild", "ListBuildsForProject", {"ids": [BUILD_ID]}, {"projectName": project, "sortOrder": "DESCENDING"}
    )
    built = build(status)
    if leaky:
        built["builds"][0]["environment"] = {
            "type": "LINUX_CONTAINER",
            "image": "aws/codebuild/standard:7.0",
            "computeType": "BUILD_GENERAL1_LARGE",
            **redaction.CORPUS["codebuild-environment"][0],
        }
    stub.ok("codebuild", "BatchGetBuilds", built, {"ids": [BUILD_ID]})
    if leaky:
        logs = built["builds"][0]["logs"]
        queue_log_tail(stub, logs["groupName"], logs["streamName"], 30, leaky_log())


def queue_nccl(stub, largest: float, baseline: float) -> None:
    stub.ok("cloudwatch", "ListMetrics", metrics("quickstart", "p5.48xlarge", "2"), NCCL_METRICS)
    for metric, value in (("LargestMessageBusBandwidth", largest), ("BaselineBusBandwidth", baseline)):
        stub.ok(
            "cloudwatch",
            "GetMetricStatistics",
            datapoints((2000, value - 10), (30, value)),
            {
                "Namespace": "fmcluster/nccl",
                "MetricName": metric,
                "Dimensions": NCCL_DIMENSIONS,
                "StartTime": NOW - timedelta(days=14),
                "EndTime": NOW,
                "Period": 900,
                "Statistics": ["Maximum"],
            },
        )


def queue_alarm_stacks(stub, *, storage: list[str] | None, observability: list[str] | None) -> None:
    for part, names in (("storage", storage), ("observability", observability)):
        name = f"quickstart-{part}"
        if names is None:
            stub.no_stack("ListStackResources", name)
            continue
        rows = [(f"Alarm{index}", alarm, "AWS::CloudWatch::Alarm") for index, alarm in enumerate(names)]
        stub.ok("cloudformation", "ListStackResources", stack_resources(name, *rows), {"StackName": name})


def test_a_rolled_back_first_deploy_leads_with_the_storage_cause_and_exits_1(stubs):
    stub = stubs()
    queue_account(stub, "storage")
    diagnosis = live.diagnose(config_of(QUICKSTART), stub.aws(), workers=1, now=NOW)
    assert diagnosis.exit_code == 1
    lines = [line for line in diagnosis.report().splitlines() if not line.startswith(" ")]
    assert [line.split(":")[0] for line in lines] == [
        "problem  stack quickstart-storage",
        "warning  stack quickstart-cluster",
        "warning  stack quickstart-observability",
        "warning  HyperPod cluster quickstart",
        "warning  nccl-tests",
        "ok       stack quickstart-network",
        "ok       stack quickstart-image",
        "ok       training image build",
        "checked",
    ]


def test_a_failed_hyperpod_node_in_a_running_cluster_exits_1(stubs):
    stub = stubs()
    queue_account(stub, "node")
    diagnosis = live.diagnose(config_of(QUICKSTART), stub.aws(), workers=1, now=NOW)
    assert diagnosis.exit_code == 1
    report = diagnosis.report()
    # HyperPod keeps the cluster InService while a group is short of its target: the README's old sample showed
    # "gpu 1/2" as ok.
    assert report.startswith(
        FAILED_NODE + "\n"
        "problem  HyperPod instance group gpu: InService, but 1 of its 2 nodes are running; HyperPod replaces nodes "
        "that fail (nodes controller 1/1, gpu 1/2)\n"
        "         from: compute[0]\n"
    )
    assert report.splitlines()[-4:] == [
        f"ok       training image build: SUCCEEDED ({BUILD_ID})",
        "ok       nccl-tests 2 x p5.48xlarge: 480.2 GB/s bus bandwidth at 2026-11-30 09:30 UTC (baseline 438.3 GB/s)",
        "ok       alarms: none of 2 in ALARM",
        "checked: every check ran",
    ]


def test_nothing_deployed_cannot_be_diagnosed(stubs):
    stub = stubs()
    stub.ok("sts", "GetCallerIdentity", identity(), {})
    for part in ("network", "storage", "image", "cluster", "observability"):
        stub.no_stack("DescribeStacks", f"quickstart-{part}")
    stub.error(
        "sagemaker",
        "DescribeCluster",
        "ResourceNotFound",
        "Cluster quickstart not found",
        params={"ClusterName": "quickstart"},
    )
    stub.no_stack("ListStackResources", "quickstart-image")
    stub.ok("cloudwatch", "ListMetrics", {"Metrics": []}, NCCL_METRICS)
    queue_alarm_stacks(stub, storage=None, observability=None)
    diagnosis = live.diagnose(config_of(QUICKSTART), stub.aws(), workers=1, now=NOW)
    assert diagnosis.exit_code == 2
    assert diagnosis.report() == (
        "nothing to diagnose: none of the file's stacks is deployed in this account and region"
    )


def test_cli_diagnose_prints_the_report_collects_it_redacted_and_exits_1(stubs, tmp_path, monkeypatch, capsys):
    """Every secret of the redaction corpus is in what the diagnosis reads (stack parameters and tags, an event's
    ResourceProperties, the build's environment, the failed build's log shown in the report): none of them reaches
    the archive, nor what `--collect` prints."""
    stub = stubs()
    queue_account(stub, "storage", leaky=True)
    monkeypatch.setattr(live, "Aws", lambda region: stub.aws())
    monkeypatch.setattr(live, "diagnose", functools.partial(live.diagnose, workers=1, now=NOW))
    path = tmp_path / "cluster.yaml"
    path.write_text(QUICKSTART)
    assert cli.main(["diagnose", str(path), "--collect", str(tmp_path / "out")]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(ROLLED_BACK + "\n")
    [archive] = (tmp_path / "out").glob("fmcluster-diagnose-quickstart-*.tar.gz")
    assert err == f"collected: {archive}\n"
    with tarfile.open(archive) as tar:
        files = {
            Path(member.name).relative_to(Path(member.name).parts[0]).as_posix(): tar.extractfile(member)
            .read()
            .decode()
            for member in tar
        }
    assert sorted(files) == [
        "account.json",
        "events/quickstart-storage.json",
        "image/build-log.json",
        "image/build.json",
        "report.txt",
        "stacks/quickstart-image.json",
        "stacks/quickstart-network.json",
        "stacks/quickstart-storage.json",
    ]
    assert files["report.txt"] == out
    assert "problem  training image build: FAILED in phase BUILD" in out  # its log's tail is shown, redacted
    leaked = {name: [s for s in redaction.SECRETS if s in text] for name, text in files.items()}
    assert {name: found for name, found in leaked.items() if found} == {}
    assert [secret for secret in redaction.SECRETS if secret in out] == []
    assert len(json.loads(files["image/build-log.json"])) == len(leaky_log())  # the whole log was read and kept


def test_cli_diagnose_without_credentials_exits_2(tmp_path, monkeypatch, capsys):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "cluster.yaml"
    path.write_text(QUICKSTART)
    assert cli.main(["diagnose", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: diagnose: no AWS credentials found (Unable to locate credentials); set AWS_PROFILE or run "
        "`aws configure`"
    ]


def test_stacks_that_cannot_be_read_cannot_be_diagnosed(stubs):
    stub = stubs()
    stub.ok("sts", "GetCallerIdentity", identity(), {})
    for part in ("network", "storage", "image", "cluster", "observability"):
        stub.denied("cloudformation", "DescribeStacks", {"StackName": f"quickstart-{part}"})
    stub.ok("sagemaker", "DescribeCluster", hyperpod_cluster("InService", "", gpus=2), {"ClusterName": "quickstart"})
    stub.ok("sagemaker", "ListClusterNodes", cluster_nodes(), {"ClusterName": "quickstart"})
    stub.denied("cloudformation", "ListStackResources", {"StackName": "quickstart-image"})
    stub.ok("cloudwatch", "ListMetrics", {"Metrics": []}, NCCL_METRICS)
    stub.denied("cloudformation", "ListStackResources", {"StackName": "quickstart-storage"})
    diagnosis = live.diagnose(config_of(QUICKSTART), stub.aws(), workers=1, now=NOW)
    assert diagnosis.exit_code == 2
    lines = diagnosis.report().splitlines()
    assert (
        "unknown  stack quickstart-network: not checked: access denied to cloudformation:DescribeStacks (the "
        "read-only policy in fmcluster's README grants it)" in lines
    )
    assert lines[-1].startswith("NOT CHECKED: 7 check(s) did not run in full, so nothing is known there: stack ")


def test_a_cluster_sagemaker_answers_validation_exception_for_is_not_found(stubs):
    """aws/aws-sdk issue 165: SageMaker's Describe APIs answer ValidationException for a missing resource
    (unconfirmed for DescribeCluster; both forms are read)."""
    stub = stubs()
    stub.error("sagemaker", "DescribeCluster", "ValidationException", "Cluster quickstart not found",
               params={"ClusterName": "quickstart"})  # fmt: skip
    [finding] = check_cluster(config_of(QUICKSTART), stub.aws(), Collected())
    assert finding.render() == "warning  HyperPod cluster quickstart: not found (the cluster stack has not created it)"


def test_hyperpods_capacity_message_on_a_training_plan_group_points_at_the_plan(stubs):
    """awslabs/awsome-distributed-ai issue 204: HyperPod's own FailureMessage when it has no capacity."""
    from tests.live.test_capacity import PLAN

    stub = stubs("us-west-2")
    failure = "We currently do not have sufficient capacity for the requested instance type(s). Please try again."
    cluster = {**hyperpod_cluster("Failed", failure), "ClusterName": "llm-plan"}
    stub.ok("sagemaker", "DescribeCluster", cluster, {"ClusterName": "llm-plan"})
    stub.ok("sagemaker", "ListClusterNodes", cluster_nodes(), {"ClusterName": "llm-plan"})
    [finding] = check_cluster(config_of(PLAN), stub.aws(), Collected())
    assert finding.cause.name == "hyperpod-insufficient-capacity"
    assert "training plan" in finding.cause.fix and "capacity: training-plan" not in finding.cause.fix


def test_nodes_and_logs_that_cannot_be_read_leave_what_was_read(stubs):
    stub = stubs()
    stub.ok("sagemaker", "DescribeCluster", hyperpod_cluster("InService", "", gpus=2), {"ClusterName": "quickstart"})
    stub.denied("sagemaker", "ListClusterNodes", {"ClusterName": "quickstart"})
    cluster, nodes = check_cluster(config_of(QUICKSTART), stub.aws(), Collected())
    assert cluster.level == "ok"
    assert nodes.render() == (
        "unknown  HyperPod nodes of quickstart: not checked: their states: access denied to sagemaker:ListClusterNodes "
        "(the read-only policy in fmcluster's README grants it)\n         from: compute"
    )
    stub = stubs()
    stub.ok("sagemaker", "DescribeCluster", hyperpod_cluster("InService", "", gpus=2), {"ClusterName": "quickstart"})
    stub.ok("sagemaker", "ListClusterNodes", cluster_nodes(("gpu", "i-0123456789abcdef0", "Failure", LIFECYCLE_FAILED)),
            {"ClusterName": "quickstart"})  # fmt: skip
    stub.denied("logs", "GetLogEvents", {"logGroupName": LOG_GROUP, "logStreamName":
                "LifecycleConfig/gpu/i-0123456789abcdef0", "limit": 40, "startFromHead": False})  # fmt: skip
    _, node, log = check_cluster(config_of(QUICKSTART), stub.aws(), Collected())
    assert node.level == "error" and node.cause.name == "lifecycle-script-failed"
    assert log.level == "unchecked" and "its lifecycle log: access denied to logs:GetLogEvents" in log.message
