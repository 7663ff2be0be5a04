"""The training-image custom resource (fmcluster/lambdas/image_build): build when the specification changes, wait,
publish `<repository-uri>@<digest>` to SSM, fail with the build's log location.

Emulated by moto (`mock_aws`), state kept between calls as AWS would:
- CodeBuild: projects, StartBuild (a build is recorded per call), BatchGetBuilds. moto does not model a build's
  life: BatchGetBuilds reports every build SUCCEEDED (without exported variables), even one stopped with StopBuild;
  it ignores StartBuild's variable overrides and idempotency token, and knows no compute type above LARGE.
- ECR: repositories, PutImage (with a tag; moto assigns a digest), DescribeImages by tag (ImageNotFoundException for
  an absent tag).
- SSM: PutParameter, GetParameter, DeleteParameter (ParameterNotFound for an absent name).

Where moto lacks the behaviour, botocore's Stubber stands in for CodeBuild (it checks each request and response
against CodeBuild's real API model): the exact StartBuild request, a build IN_PROGRESS, a build that SUCCEEDED with
the buildspec's exported IMAGE_DIGEST, and builds that FAILED, FAULTed, TIMED_OUT or were STOPPED, with their phases
and logs.
"""

from __future__ import annotations

import datetime
import json

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from fmcluster.lambdas.image_build import handler
from fmcluster.lambdas.image_build.handler import is_complete, on_event

REGION = "us-east-1"
ACCOUNT = "123456789012"
REPOSITORY = "quickstart-training"
REPOSITORY_URI = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{REPOSITORY}"
PROJECT = "TrainingImageBuild-abc123"
PARAMETER = "/fmcluster/quickstart/image-uri"
BUILD_PARAMETER = "/fmcluster/quickstart/image-build"
SPEC = "34017bfd2abe8910"
OLD_SPEC = "0123456789abcdef"
DIGEST = "sha256:" + "a" * 64
BUILD_ID = f"{PROJECT}:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
PROPERTIES = {
    "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:framework-onEvent",
    "ProjectName": PROJECT,
    "RepositoryName": REPOSITORY,
    "RepositoryUri": REPOSITORY_URI,
    "ParameterName": PARAMETER,
    "SpecHash": SPEC,
    "BaseImage": "public.ecr.aws/deep-learning-containers/base:13.0.0-gpu-py312-cu130-ubuntu22.04-ec2",
    "Cuda": "13.0",
    "Pytorch": "2.14.1",
    "EfaInstaller": "1.50.0",
    "AwsOfiNccl": "1.21.1",
    "Nccl": "2.31.2",
    "ExpectedBuildMinutes": "38",
}
BUILD_VARIABLES = {
    "REPOSITORY_URI": REPOSITORY_URI,
    "IMAGE_TAG": SPEC,
    "BASE_IMAGE": PROPERTIES["BaseImage"],
    "CUDA_VERSION": "13.0",
    "PYTORCH_VERSION": "2.14.1",
    "EFA_INSTALLER_VERSION": "1.50.0",
    "AWS_OFI_NCCL_VERSION": "1.21.1",
    "NCCL_VERSION": "2.31.2",
}
LOGS = {
    "groupName": "quickstart-image-TrainingImageBuildLogs459AD67B-x1y2",
    "streamName": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    "deepLink": "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEvent:group=g;stream=s",
}


def event(request: str = "Create", *, old: dict | None = None, **properties: object) -> dict:
    body = {
        "RequestType": request,
        "RequestId": "5b0c8c2e-1b4a-4c35-9f64-4b0e8a1d2c3f",
        "ResourceProperties": {**PROPERTIES, **properties},
    }
    if request != "Create":
        body["PhysicalResourceId"] = PARAMETER
    if old is not None:
        body["OldResourceProperties"] = {**PROPERTIES, **old}
    return body


def waiting(data: dict, request: str = "Create", **properties: object) -> dict:
    """The is_complete event: the on_event event plus what on_event returned."""
    return {**event(request, **properties), "PhysicalResourceId": PARAMETER, "Data": data}


@pytest.fixture
def aws(monkeypatch):
    """moto's AWS with the cluster's repository and build project, and clients for them."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients = {name: boto3.client(name, region_name=REGION) for name in ("codebuild", "ecr", "ssm")}
        clients["ecr"].create_repository(repositoryName=REPOSITORY, imageTagMutability="IMMUTABLE")
        clients["codebuild"].create_project(
            name=PROJECT,
            source={"type": "S3", "location": "cdk-assets/source.zip", "buildspec": "buildspec.yml"},
            artifacts={"type": "NO_ARTIFACTS"},
            environment={
                "type": "LINUX_CONTAINER",
                "image": "aws/codebuild/standard:8.0",
                "computeType": "BUILD_GENERAL1_LARGE",  # moto knows no XLARGE; the handler never reads it
                "privilegedMode": True,
            },
            serviceRole=f"arn:aws:iam::{ACCOUNT}:role/image-build",
        )
        yield clients


def push_image(ecr, tag: str) -> str:
    """An image in moto's repository under `tag`; returns its digest."""
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 2, "digest": tag},
            "layers": [],
        }
    )
    ecr.put_image(repositoryName=REPOSITORY, imageManifest=manifest, imageTag=tag)
    details = ecr.describe_images(repositoryName=REPOSITORY, imageIds=[{"imageTag": tag}])["imageDetails"]
    return details[0]["imageDigest"]


def builds(aws) -> list[str]:
    return aws["codebuild"].list_builds_for_project(projectName=PROJECT)["ids"]


def parameter(aws) -> str | None:
    try:
        return aws["ssm"].get_parameter(Name=PARAMETER)["Parameter"]["Value"]
    except aws["ssm"].exceptions.ParameterNotFound:
        return None


def stubbed_codebuild(*builds_in_order: dict):
    """A CodeBuild client whose BatchGetBuilds returns `builds_in_order`, one per call."""
    codebuild = boto3.client("codebuild", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(codebuild)
    for build in builds_in_order:
        stub.add_response("batch_get_builds", {"builds": [build]}, {"ids": [build["id"]]})
    stub.activate()
    return codebuild, stub


def build(status: str, **fields: object) -> dict:
    return {
        "id": BUILD_ID,
        "arn": f"arn:aws:codebuild:{REGION}:{ACCOUNT}:build/{BUILD_ID}",
        "buildStatus": status,
        **fields,
    }


# --- on_event: build only what is not built yet ------------------------------------------------------------------


def test_create_starts_one_build_of_the_specification(aws):
    result = on_event(event("Create"), None, codebuild=aws["codebuild"], ecr=aws["ecr"], ssm=aws["ssm"])
    (started,) = builds(aws)
    assert result == {"PhysicalResourceId": PARAMETER, "Data": {"BuildId": started, "ExistingDigest": ""}}
    assert started.startswith(f"{PROJECT}:")


def test_the_build_gets_every_version_the_tag_and_an_idempotency_token(aws):
    """Stubber: moto drops StartBuild's overrides; the Stubber checks the exact request against CodeBuild's model."""
    codebuild = boto3.client("codebuild", region_name=REGION)
    stub = Stubber(codebuild)
    stub.add_response(
        "start_build",
        {"build": {"id": BUILD_ID}},
        {
            "projectName": PROJECT,
            "environmentVariablesOverride": [
                {"name": name, "value": value, "type": "PLAINTEXT"} for name, value in BUILD_VARIABLES.items()
            ],
            "idempotencyToken": "5b0c8c2e-1b4a-4c35-9f64-4b0e8a1d2c3f",
        },
    )
    with stub:
        result = on_event(event("Create"), None, codebuild=codebuild, ecr=aws["ecr"], ssm=aws["ssm"])
    stub.assert_no_pending_responses()
    assert result["Data"] == {"BuildId": BUILD_ID, "ExistingDigest": ""}


def build_status(aws) -> dict | None:
    """The image-build parameter the nodes read while the image builds, parsed."""
    try:
        return json.loads(aws["ssm"].get_parameter(Name=BUILD_PARAMETER)["Parameter"]["Value"])
    except aws["ssm"].exceptions.ParameterNotFound:
        return None


def test_a_started_build_tells_the_nodes_when_the_image_should_be_ready_and_where_its_logs_are(aws):
    """Stubber: the start time and log location of a real StartBuild response (moto's carry no logs)."""
    codebuild = boto3.client("codebuild", region_name=REGION)
    stub = Stubber(codebuild)
    started = datetime.datetime(2026, 11, 30, 11, 0, tzinfo=datetime.UTC)
    stub.add_response("start_build", {"build": {"id": BUILD_ID, "startTime": started, "logs": LOGS}})
    with stub:
        on_event(event("Create"), None, codebuild=codebuild, ecr=aws["ecr"], ssm=aws["ssm"])
    assert build_status(aws) == {
        "state": "building",
        "build": BUILD_ID,
        "started": int(started.timestamp()),
        "expectedMinutes": 38,
        "logs": f"CloudWatch Logs group {LOGS['groupName']} stream {LOGS['streamName']}, {LOGS['deepLink']}",
    }


def test_a_published_image_removes_the_build_status_and_a_failed_build_marks_it_failed(aws):
    started = on_event(event("Create"), None, **aws)
    assert build_status(aws)["state"] == "building"
    push_image(aws["ecr"], SPEC)
    is_complete({**event("Create"), **started}, None, **aws)
    assert build_status(aws) is None and parameter(aws) is not None

    failed = build("FAILED", logs=LOGS, phases=[{"phaseType": "BUILD", "phaseStatus": "FAILED"}])
    codebuild, _ = stubbed_codebuild(failed)
    with pytest.raises(RuntimeError):
        is_complete(waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}), None, codebuild=codebuild, ssm=aws["ssm"])
    assert build_status(aws)["state"] == "failed"


def test_update_to_a_new_specification_starts_a_build(aws):
    push_image(aws["ecr"], OLD_SPEC)
    result = on_event(event("Update", old={"SpecHash": OLD_SPEC, "Nccl": "2.30.7"}), None, **aws)
    assert len(builds(aws)) == 1
    assert result["Data"]["BuildId"] == builds(aws)[0]
    assert result["PhysicalResourceId"] == PARAMETER


def test_update_with_the_same_specification_starts_nothing_and_publishes_the_existing_image(aws):
    digest = push_image(aws["ecr"], SPEC)
    update = event("Update", old={"SpecHash": SPEC, "ProjectName": "TrainingImageBuild-old"})
    result = on_event(update, None, **aws)
    assert builds(aws) == []
    assert result == {"PhysicalResourceId": PARAMETER, "Data": {"BuildId": "", "ExistingDigest": digest}}
    done = is_complete({**update, **result}, None, **aws)
    assert done["IsComplete"] is True
    assert parameter(aws) == f"{REPOSITORY_URI}:{SPEC}@{digest}"


def test_a_rollback_to_an_earlier_specification_reuses_its_image(aws):
    digest = push_image(aws["ecr"], OLD_SPEC)
    rollback = event("Update", SpecHash=OLD_SPEC, old={"SpecHash": SPEC})
    result = on_event(rollback, None, **aws)
    assert builds(aws) == []
    assert result["Data"] == {"BuildId": "", "ExistingDigest": digest}


# --- is_complete: wait, publish, or fail with the logs --------------------------------------------------------------


def test_a_running_build_is_not_complete_and_publishes_nothing(aws):
    """Stubber: moto reports every build as finished."""
    codebuild, stub = stubbed_codebuild(build("IN_PROGRESS", currentPhase="BUILD"))
    result = is_complete(
        waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}), None, codebuild=codebuild, ssm=aws["ssm"]
    )
    stub.assert_no_pending_responses()
    assert result == {"IsComplete": False}
    assert parameter(aws) is None


def test_a_succeeded_build_publishes_the_exported_digest(aws):
    """Stubber for the build (moto exports no variables), moto for SSM."""
    exported = [{"name": "IMAGE_DIGEST", "value": DIGEST}, {"name": "IMAGE_URI", "value": f"{REPOSITORY_URI}@{DIGEST}"}]
    codebuild, _ = stubbed_codebuild(build("SUCCEEDED", exportedEnvironmentVariables=exported, logs=LOGS))
    result = is_complete(
        waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}), None, codebuild=codebuild, ecr=aws["ecr"], ssm=aws["ssm"]
    )
    assert parameter(aws) == f"{REPOSITORY_URI}:{SPEC}@{DIGEST}"
    assert result == {
        "IsComplete": True,
        "Data": {
            "ImageUri": f"{REPOSITORY_URI}:{SPEC}@{DIGEST}",
            "ImageDigest": DIGEST,
            "ImageTag": SPEC,
            "BuildId": BUILD_ID,
        },
    }
    stored = aws["ssm"].get_parameter(Name=PARAMETER)["Parameter"]
    assert stored["Type"] == "String"


def test_a_succeeded_build_without_exported_digest_publishes_the_pushed_tags_digest(aws):
    """All moto: the build moto reports SUCCEEDED, the digest read back from the repository by tag."""
    started = on_event(event("Create"), None, **aws)
    digest = push_image(aws["ecr"], SPEC)  # what the build pushed
    result = is_complete({**event("Create"), **started}, None, **aws)
    assert result["IsComplete"] is True
    assert result["Data"]["ImageDigest"] == digest
    assert parameter(aws) == f"{REPOSITORY_URI}:{SPEC}@{digest}"


def test_an_update_overwrites_the_published_image(aws):
    aws["ssm"].put_parameter(Name=PARAMETER, Value=f"{REPOSITORY_URI}@sha256:{'b' * 64}", Type="String")
    codebuild, _ = stubbed_codebuild(
        build("SUCCEEDED", exportedEnvironmentVariables=[{"name": "IMAGE_DIGEST", "value": DIGEST}])
    )
    is_complete(
        waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}, "Update"), None, codebuild=codebuild, ssm=aws["ssm"]
    )
    assert parameter(aws) == f"{REPOSITORY_URI}:{SPEC}@{DIGEST}"


def test_a_failed_build_fails_the_deploy_naming_its_phase_and_logs(aws):
    """Stubber: moto never fails a build."""
    failed = build(
        "FAILED",
        logs=LOGS,
        phases=[
            {"phaseType": "PRE_BUILD", "phaseStatus": "SUCCEEDED"},
            {
                "phaseType": "BUILD",
                "phaseStatus": "FAILED",
                "contexts": [
                    {
                        "statusCode": "COMMAND_EXECUTION_ERROR",
                        "message": "Error while executing command: docker build ... Reason: exit status 1",
                    }
                ],
            },
        ],
    )
    codebuild, _ = stubbed_codebuild(failed)
    with pytest.raises(RuntimeError) as error:
        is_complete(waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}), None, codebuild=codebuild, ssm=aws["ssm"])
    assert str(error.value) == (
        f"image build {BUILD_ID} FAILED in phase BUILD (COMMAND_EXECUTION_ERROR: Error while executing command: "
        "docker build ... Reason: exit status 1); logs: CloudWatch Logs group "
        f"{LOGS['groupName']} stream {LOGS['streamName']}, {LOGS['deepLink']}"
    )
    assert parameter(aws) is None


@pytest.mark.parametrize("status", ["FAULT", "TIMED_OUT"])
def test_a_faulted_or_timed_out_build_fails_the_deploy(aws, status):
    """Stubber: moto has neither status."""
    codebuild, _ = stubbed_codebuild(build(status, logs=LOGS, phases=[{"phaseType": "BUILD", "phaseStatus": status}]))
    with pytest.raises(RuntimeError, match=rf"^image build {BUILD_ID} {status} in phase BUILD; logs: CloudWatch Logs"):
        is_complete(waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}), None, codebuild=codebuild, ssm=aws["ssm"])


def test_a_stopped_build_fails_the_deploy_with_its_log_location(aws):
    """Stubber: moto reports a stopped build as SUCCEEDED on the next BatchGetBuilds."""
    stopped = build(
        "STOPPED",
        logs=LOGS,
        phases=[{"phaseType": "BUILD", "phaseStatus": "STOPPED", "contexts": [{"message": "Build was stopped"}]}],
    )
    codebuild, _ = stubbed_codebuild(stopped)
    with pytest.raises(RuntimeError) as error:
        is_complete(waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}), None, codebuild=codebuild, ssm=aws["ssm"])
    assert str(error.value) == (
        f"image build {BUILD_ID} STOPPED in phase BUILD (Build was stopped); logs: CloudWatch Logs group "
        f"{LOGS['groupName']} stream {LOGS['streamName']}, {LOGS['deepLink']}"
    )
    assert parameter(aws) is None


def test_a_build_without_logs_points_to_the_console(aws):
    codebuild, _ = stubbed_codebuild(build("FAULT", phases=[{"phaseType": "PROVISIONING", "phaseStatus": "FAULT"}]))
    with pytest.raises(RuntimeError, match=r"logs: no logs recorded; see build .* in the CodeBuild console \(arn:"):
        is_complete(waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}), None, codebuild=codebuild, ssm=aws["ssm"])


def test_a_succeeded_build_with_no_image_fails_clearly(aws):
    started = on_event(event("Create"), None, **aws)  # moto: SUCCEEDED, but nothing was pushed
    with pytest.raises(RuntimeError, match=rf"succeeded but {REPOSITORY_URI}:{SPEC} has no image digest"):
        is_complete({**event("Create"), **started}, None, **aws)


def test_an_unknown_build_fails_clearly(aws):
    with pytest.raises(RuntimeError, match=rf"^CodeBuild has no build {PROJECT}:"):
        is_complete(waiting({"BuildId": BUILD_ID, "ExistingDigest": ""}), None, **aws)


# --- Delete: the parameter only -----------------------------------------------------------------------------------


def test_delete_removes_the_parameter_and_nothing_else(aws):
    digest = push_image(aws["ecr"], SPEC)
    aws["ssm"].put_parameter(Name=PARAMETER, Value=f"{REPOSITORY_URI}@{digest}", Type="String")
    aws["ssm"].put_parameter(Name=BUILD_PARAMETER, Value="{}", Type="String")
    assert on_event(event("Delete"), None, **aws) == {"PhysicalResourceId": PARAMETER}
    assert parameter(aws) is None and build_status(aws) is None
    assert aws["ecr"].describe_images(repositoryName=REPOSITORY)["imageDetails"][0]["imageDigest"] == digest
    assert is_complete(event("Delete"), None, **aws) == {"IsComplete": True}


def test_delete_of_an_absent_parameter_succeeds(aws):
    assert on_event(event("Delete"), None, **aws) == {"PhysicalResourceId": PARAMETER}


def test_delete_after_a_create_that_never_started_touches_nothing(aws):
    """A Create that failed in on_event leaves the framework's own physical id, which names no parameter."""
    aws["ssm"].put_parameter(Name=PARAMETER, Value="keep", Type="String")
    failed_create = {**event("Delete"), "PhysicalResourceId": "5b0c8c2e-1b4a-4c35-9f64-4b0e8a1d2c3f"}
    assert on_event(failed_create, None, **aws) == {"PhysicalResourceId": failed_create["PhysicalResourceId"]}
    assert parameter(aws) == "keep"


# --- malformed events: a clear ValueError, which the Provider framework reports as FAILED --------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([], "the event must be a mapping; got list"),
        ({"RequestType": "Poke"}, "RequestType must be Create, Update or Delete; got 'Poke'"),
        ({"RequestType": "Create"}, "ResourceProperties must be a mapping; got NoneType"),
        (event(SpecHash="latest"), "SpecHash must be 16 to 64 lowercase hex digits; got 'latest'"),
        (
            event(ParameterName="/other/param"),
            "ParameterName must be an SSM parameter name like /fmcluster/<cluster>/image-uri; got '/other/param'",
        ),
        (
            event(Nccl=2.31, Cuda=None),
            "Cuda must be a version like 2.31.2; got None; Nccl must be a version like 2.31.2; got 2.31",
        ),
        (
            event(RepositoryName="other"),
            f"RepositoryUri '{REPOSITORY_URI}' does not name repository 'other'",
        ),
        (
            event(ExpectedBuildMinutes="90"),
            "ExpectedBuildMinutes must be a whole number of minutes from 1 to 60; got '90'",
        ),
        ({**event("Delete"), "PhysicalResourceId": None}, "PhysicalResourceId must be the parameter name for a Delete"),
    ],
)
def test_malformed_on_event_requests_raise_a_clear_error(aws, bad, message):
    with pytest.raises(ValueError) as error:
        on_event(bad, None, **aws)
    assert str(error.value).startswith(message)
    assert builds(aws) == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "Data must be the mapping on_event returned; got None"),
        ({"BuildId": 7, "ExistingDigest": ""}, "Data must hold BuildId and ExistingDigest strings"),
        ({"BuildId": "", "ExistingDigest": "latest"}, "ExistingDigest must look like sha256:<64 hex digits>"),
        ({"BuildId": "no-colon", "ExistingDigest": ""}, "BuildId must look like <project>:<uuid>; got 'no-colon'"),
    ],
)
def test_malformed_is_complete_requests_raise_a_clear_error(aws, data, message):
    with pytest.raises(ValueError) as error:
        is_complete(waiting(data), None, **aws)
    assert str(error.value).startswith(message)
    assert parameter(aws) is None


def test_logs_are_json_lines(aws, caplog):
    caplog.set_level("INFO", logger=handler.LOG.name)
    on_event(event("Create"), None, **aws)
    (line,) = [record.getMessage() for record in caplog.records if "build-started" in record.getMessage()]
    logged = json.loads(line)
    assert logged["event"] == "build-started"
    assert logged["tag"] == SPEC
    assert logged["NCCL_VERSION"] == "2.31.2"
