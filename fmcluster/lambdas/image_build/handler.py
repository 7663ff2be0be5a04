"""Custom resource: build the training image in CodeBuild and publish `<repository-uri>:<tag>@<digest>` to SSM.

CDK's Provider framework calls `on_event` once per CloudFormation request and then `is_complete` every query interval
until it returns IsComplete or raises (the framework turns a raised error into a FAILED response whose reason is the
error's text, so a deploy never hangs).

on_event
  Create/Update: the image of this specification is `<repository>:<SpecHash>` (the hash of the versions, the
  Dockerfile and the buildspec; a resource property, so CloudFormation sends an Update only when something in it
  changed). When the repository already holds that tag (nothing in the specification changed, or a rollback to an
  earlier one) nothing is built; otherwise one CodeBuild build starts, and the String parameter
  `/fmcluster/<cluster>/image-build` says so for the nodes: JSON with the build id, its start (epoch seconds), the
  expected minutes (ExpectedBuildMinutes) and where its logs are.
  Delete: removes the SSM parameter (the physical id), nothing else: images stay in the retained repository.
is_complete
  Polls the build (BatchGetBuilds). In progress: not complete. Succeeded: writes the String parameter with the image
  URI pinned by digest, removes the image-build parameter and returns the URI as ImageUri/ImageDigest. Failed,
  faulted, timed out or stopped: marks the image-build parameter failed and raises, naming the build, its failed
  phase and where its logs are (CloudWatch Logs group and stream, and the console link).

Malformed events raise ValueError with what is wrong. Logs are JSON lines. Python and boto3 only.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 5, "mode": "standard"})
"""Short network timeouts with retries: the functions run for 60 s at most, the Provider polls again anyway."""

REQUEST_TYPES = ("Create", "Update", "Delete")
PARAMETER_NAME = re.compile(r"^/fmcluster/[a-z][a-z0-9-]{0,22}[a-z0-9]/image-uri$")
SPEC_HASH = re.compile(r"^[0-9a-f]{16,64}$")
PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{1,254}$")
REPOSITORY_NAME = re.compile(r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$")
REPOSITORY_URI = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/(?P<name>.+)$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
BUILD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*:[0-9a-f-]{36}$")
VERSION = re.compile(r"^\d+(\.\d+){1,3}(-\d+)?$")
IMAGE_REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,254}$")
VERSION_PROPERTIES = {
    "Cuda": "CUDA_VERSION",
    "Pytorch": "PYTORCH_VERSION",
    "EfaInstaller": "EFA_INSTALLER_VERSION",
    "AwsOfiNccl": "AWS_OFI_NCCL_VERSION",
    "Nccl": "NCCL_VERSION",
}
"""Custom-resource property -> the buildspec's variable."""
FAILED_STATUSES = ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")


def log(event: str, **fields: Any) -> None:
    LOG.info(json.dumps({"event": event, **fields}, default=str, sort_keys=True))


@dataclass(frozen=True)
class ImageSpec:
    """The custom resource's properties, checked."""

    project_name: str
    repository_name: str
    repository_uri: str
    parameter_name: str
    spec_hash: str
    base_image: str
    versions: dict[str, str]
    """Buildspec variable -> version, e.g. {"CUDA_VERSION": "13.0", ...}."""
    expected_minutes: int = 40
    """How long a build usually takes (ExpectedBuildMinutes, optional): what nodes announce while it runs."""

    @property
    def build_parameter_name(self) -> str:
        """`/fmcluster/<cluster>/image-build`, beside the image parameter."""
        return self.parameter_name.rsplit("/", 1)[0] + "/image-build"

    @classmethod
    def from_properties(cls, properties: object) -> ImageSpec:
        if not isinstance(properties, dict):
            raise ValueError(f"ResourceProperties must be a mapping; got {type(properties).__name__}")
        problems = []

        def text(key: str, pattern: re.Pattern[str], shape: str) -> str:
            value = properties.get(key)
            if not isinstance(value, str) or not pattern.match(value):
                problems.append(f"{key} must be {shape}; got {value!r}")
                return ""
            return value

        project = text("ProjectName", PROJECT_NAME, "a CodeBuild project name")
        repository = text("RepositoryName", REPOSITORY_NAME, "an ECR repository name")
        uri = text("RepositoryUri", REPOSITORY_URI, "an ECR repository URI like 123456789012.dkr.ecr.<region>...")
        parameter = text("ParameterName", PARAMETER_NAME, "an SSM parameter name like /fmcluster/<cluster>/image-uri")
        spec_hash = text("SpecHash", SPEC_HASH, "16 to 64 lowercase hex digits")
        base_image = text("BaseImage", IMAGE_REFERENCE, "a container image reference")
        versions = {
            variable: text(key, VERSION, "a version like 2.31.2") for key, variable in VERSION_PROPERTIES.items()
        }
        match = REPOSITORY_URI.match(uri)
        if match and repository and match["name"] != repository:
            problems.append(f"RepositoryUri {uri!r} does not name repository {repository!r}")
        expected = properties.get("ExpectedBuildMinutes", "40")
        if not (isinstance(expected, str) and expected.isdigit() and 1 <= int(expected) <= 60):
            problems.append(f"ExpectedBuildMinutes must be a whole number of minutes from 1 to 60; got {expected!r}")
            expected = "40"
        if problems:
            raise ValueError("; ".join(problems))
        return cls(project, repository, uri, parameter, spec_hash, base_image, versions, int(expected))

    @property
    def build_variables(self) -> dict[str, str]:
        """The buildspec's variables for this image."""
        return {
            "REPOSITORY_URI": self.repository_uri,
            "IMAGE_TAG": self.spec_hash,
            "BASE_IMAGE": self.base_image,
            **self.versions,
        }


def request_type(event: object) -> str:
    if not isinstance(event, dict):
        raise ValueError(f"the event must be a mapping; got {type(event).__name__}")
    request = event.get("RequestType")
    if request not in REQUEST_TYPES:
        raise ValueError(f"RequestType must be Create, Update or Delete; got {request!r}")
    return request


def client(name: str):
    return boto3.client(name, config=CLIENT_CONFIG)


def existing_digest(ecr, spec: ImageSpec) -> str | None:
    """The digest of `<repository>:<spec hash>`, or None when the repository has no such tag."""
    try:
        details = ecr.describe_images(repositoryName=spec.repository_name, imageIds=[{"imageTag": spec.spec_hash}])[
            "imageDetails"
        ]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ImageNotFoundException":
            return None
        raise
    digest = details[0].get("imageDigest") if details else None
    return digest if isinstance(digest, str) and DIGEST.match(digest) else None


def on_event(event: dict, context: object, codebuild=None, ecr=None, ssm=None) -> dict:
    """Create/Update: start a build unless the image exists. Delete: remove the SSM parameter."""
    request = request_type(event)
    if request == "Delete":
        return delete_parameter(event, ssm or client("ssm"))
    spec = ImageSpec.from_properties(event.get("ResourceProperties"))
    old = event.get("OldResourceProperties") if request == "Update" else None
    unchanged = isinstance(old, dict) and old.get("SpecHash") == spec.spec_hash
    digest = existing_digest(ecr or client("ecr"), spec)
    if digest:
        log("image-exists", request=request, unchanged=unchanged, tag=spec.spec_hash, digest=digest)
        return {"PhysicalResourceId": spec.parameter_name, "Data": {"BuildId": "", "ExistingDigest": digest}}
    codebuild = codebuild or client("codebuild")
    arguments: dict[str, Any] = {
        "projectName": spec.project_name,
        "environmentVariablesOverride": [
            {"name": name, "value": value, "type": "PLAINTEXT"} for name, value in spec.build_variables.items()
        ],
    }
    request_id = event.get("RequestId")
    if isinstance(request_id, str) and 0 < len(request_id) <= 64:
        arguments["idempotencyToken"] = request_id  # a retried invocation does not start a second build
    build = codebuild.start_build(**arguments)["build"]
    build_id = build["id"]
    log("build-started", request=request, unchanged=unchanged, build=build_id, tag=spec.spec_hash, **spec.versions)
    put_build_status(ssm or client("ssm"), spec, build, state="building")
    return {"PhysicalResourceId": spec.parameter_name, "Data": {"BuildId": build_id, "ExistingDigest": ""}}


def delete_parameter(event: dict, ssm) -> dict:
    """Delete the parameter named by the physical id and its image-build parameter; a physical id that is no image
    parameter is left alone."""
    physical = event.get("PhysicalResourceId")
    if not isinstance(physical, str) or not physical:
        raise ValueError(f"PhysicalResourceId must be the parameter name for a Delete; got {physical!r}")
    if not PARAMETER_NAME.match(physical):
        # A Create that failed before on_event returned leaves the framework's own id: there is nothing to remove.
        log("delete-skipped", physical=physical, reason="not an image-uri parameter name")
        return {"PhysicalResourceId": physical}
    for name in (physical, physical.rsplit("/", 1)[0] + "/image-build"):
        delete_if_present(ssm, name)
    return {"PhysicalResourceId": physical}


def delete_if_present(ssm, name: str) -> None:
    try:
        ssm.delete_parameter(Name=name)
        log("parameter-deleted", parameter=name)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ParameterNotFound":
            raise
        log("parameter-absent", parameter=name)


def is_complete(event: dict, context: object, codebuild=None, ecr=None, ssm=None) -> dict:
    """Not complete while the build runs; publish the image when it succeeded; raise when it did not."""
    request = request_type(event)
    if request == "Delete":
        return {"IsComplete": True}
    spec = ImageSpec.from_properties(event.get("ResourceProperties"))
    data = event.get("Data")
    if not isinstance(data, dict):
        raise ValueError(f"Data must be the mapping on_event returned; got {data!r}")
    build_id, existing = data.get("BuildId"), data.get("ExistingDigest")
    if not isinstance(build_id, str) or not isinstance(existing, str):
        raise ValueError(f"Data must hold BuildId and ExistingDigest strings; got {data!r}")
    if not build_id:
        if not DIGEST.match(existing):
            raise ValueError(f"ExistingDigest must look like sha256:<64 hex digits>; got {existing!r}")
        return publish(ssm or client("ssm"), spec, existing, build_id="")
    if not BUILD_ID.match(build_id):
        raise ValueError(f"BuildId must look like <project>:<uuid>; got {build_id!r}")

    build = get_build(codebuild or client("codebuild"), build_id)
    status = build.get("buildStatus")
    if status == "IN_PROGRESS":
        log("build-running", build=build_id, phase=build.get("currentPhase"))
        return {"IsComplete": False}
    if status == "SUCCEEDED":
        digest = exported(build, "IMAGE_DIGEST") or existing_digest(ecr or client("ecr"), spec)
        if not digest or not DIGEST.match(digest):
            raise RuntimeError(
                f"image build {build_id} succeeded but {spec.repository_uri}:{spec.spec_hash} has no image digest "
                f"(exported IMAGE_DIGEST {exported(build, 'IMAGE_DIGEST')!r}); logs: {log_location(build)}"
            )
        return publish(ssm or client("ssm"), spec, digest, build_id=build_id)
    if status in FAILED_STATUSES:
        log("build-failed", build=build_id, status=status, logs=build.get("logs"))
        put_build_status(ssm or client("ssm"), spec, build, state="failed")
        raise RuntimeError(failure_message(build))
    raise RuntimeError(f"image build {build_id} has an unknown status {status!r}; logs: {log_location(build)}")


def put_build_status(ssm, spec: ImageSpec, build: dict, *, state: str) -> None:
    """Tell the nodes a build is running ("building") or has failed: the image-build parameter, as JSON."""
    started: Any = build.get("startTime")
    status = {
        "state": state,
        "build": build.get("id"),
        "started": int(started.timestamp()) if hasattr(started, "timestamp") else int(time.time()),
        "expectedMinutes": spec.expected_minutes,
        "logs": log_location(build),
    }
    ssm.put_parameter(
        Name=spec.build_parameter_name,
        Value=json.dumps(status, sort_keys=True),
        Type="String",
        Overwrite=True,
        Description=f"fmcluster training image build of specification {spec.spec_hash}",
    )
    log("build-status", parameter=spec.build_parameter_name, **status)


def get_build(codebuild, build_id: str) -> dict:
    response = codebuild.batch_get_builds(ids=[build_id])
    builds = [build for build in response.get("builds", []) if build.get("id") == build_id]
    if not builds:
        raise RuntimeError(f"CodeBuild has no build {build_id} (not found: {response.get('buildsNotFound')})")
    return builds[0]


def exported(build: dict, name: str) -> str | None:
    for variable in build.get("exportedEnvironmentVariables") or []:
        if variable.get("name") == name:
            return variable.get("value")
    return None


def log_location(build: dict) -> str:
    """Where a build's logs are: the CloudWatch Logs group and stream and the console link, as far as known."""
    logs = build.get("logs") or {}
    parts = []
    if logs.get("groupName"):
        parts.append(f"CloudWatch Logs group {logs['groupName']} stream {logs.get('streamName', '?')}")
    if logs.get("deepLink"):
        parts.append(logs["deepLink"])
    if not parts:
        parts.append(f"no logs recorded; see build {build.get('id')} in the CodeBuild console ({build.get('arn')})")
    return ", ".join(parts)


def failure_message(build: dict) -> str:
    """'image build X FAILED in phase BUILD (COMMAND_EXECUTION_ERROR: ...); logs: ...'."""
    failed = [
        phase
        for phase in build.get("phases") or []
        if phase.get("phaseStatus") in ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")
    ]
    where = ""
    if failed:
        phase = failed[0]
        reasons = "; ".join(
            f"{context.get('statusCode', '')}: {context.get('message', '')}".strip(": ")
            for context in phase.get("contexts") or []
            if context.get("message") or context.get("statusCode")
        )
        where = f" in phase {phase.get('phaseType')}" + (f" ({reasons[:600]})" if reasons else "")
    return f"image build {build.get('id')} {build.get('buildStatus')}{where}; logs: {log_location(build)}"


def publish(ssm, spec: ImageSpec, digest: str, *, build_id: str) -> dict:
    """Write `<repository-uri>:<spec hash>@<digest>` to the parameter the nodes read; complete the resource.

    Both names: the digest pins the image for tools that take one, the (immutable) tag serves enroot imports.
    """
    image_uri = f"{spec.repository_uri}:{spec.spec_hash}@{digest}"
    ssm.put_parameter(
        Name=spec.parameter_name,
        Value=image_uri,
        Type="String",
        Overwrite=True,
        Description=f"fmcluster training image, specification {spec.spec_hash}",
    )
    log("image-published", parameter=spec.parameter_name, image=image_uri, build=build_id or None)
    delete_if_present(ssm, spec.build_parameter_name)
    return {
        "IsComplete": True,
        "Data": {"ImageUri": image_uri, "ImageDigest": digest, "ImageTag": spec.spec_hash, "BuildId": build_id},
    }
