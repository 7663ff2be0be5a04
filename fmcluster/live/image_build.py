"""The training image's last CodeBuild build: its status and, when it failed, the failed phase and its log's tail.

The project is found among the image stack's resources (its name is generated). Sources: CodeBuild API reference
(ListBuildsForProject newest first with sortOrder DESCENDING; BatchGetBuilds buildStatus, phases, logs.groupName
and streamName); CloudFormation ListStackResources.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from fmcluster import names
from fmcluster.config import ClusterConfig
from fmcluster.live.aws import Aws, error_code, error_message
from fmcluster.live.findings import Collected, Finding, ok, problem, unknown, warning
from fmcluster.live.logs import log_tail
from fmcluster.live.runner import STOPPED, Check, stopped_reason

TAIL = 30
BAD = ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")


def image_build_checks(config: ClusterConfig, aws: Aws, kept: Collected) -> list[Check]:
    return [Check("training image build", "image", lambda: check_image_build(config, aws, kept))]


def stack_resources(aws: Aws, stack: str, resource_type: str) -> list[str]:
    """Physical ids of the stack's resources of one type; [] when the stack does not exist."""
    try:
        rows = list(aws.pages("cloudformation", "ListStackResources", "StackResourceSummaries", StackName=stack))
    except ClientError as error:
        if error_code(error) == "ValidationError" and "does not exist" in error_message(error):
            return []
        raise
    return [
        row["PhysicalResourceId"]
        for row in rows
        if row.get("ResourceType") == resource_type and row.get("PhysicalResourceId")
    ]


def check_image_build(config: ClusterConfig, aws: Aws, kept: Collected) -> list[Finding]:
    subject = "training image build"
    projects = stack_resources(aws, names.stack_name(config.name, names.IMAGE_STACK), "AWS::CodeBuild::Project")
    if not projects:
        return [warning(subject, "no CodeBuild project (the image stack is not deployed)")]
    ids = aws.call("codebuild", "ListBuildsForProject", projectName=projects[0], sortOrder="DESCENDING").get("ids")
    if not ids:
        return [warning(subject, f"project {projects[0]} has never built")]
    builds = aws.call("codebuild", "BatchGetBuilds", ids=ids[:1]).get("builds", [])
    if not builds:  # deleted since it was listed: BatchGetBuilds answers it in buildsNotFound
        gone = f"CodeBuild no longer finds {ids[0]} (BatchGetBuilds buildsNotFound)"
        return [unknown(subject, "the last build", gone, key="image")]
    build = builds[0]
    kept.keep("image/build", build)
    status = build.get("buildStatus", "")
    if status == "SUCCEEDED":
        return [ok(subject, f"SUCCEEDED ({build['id']})")]
    if status not in BAD:
        return [warning(subject, f"{status} ({build['id']}, phase {build.get('currentPhase', '?')})")]
    failed: dict = next((p for p in build.get("phases", []) if p.get("phaseStatus") in BAD), {})
    why = "; ".join(c.get("message", "") for c in failed.get("contexts", []) if c.get("message"))
    logs = build.get("logs", {})
    lines: list[str] = []
    where = f"log: {logs.get('groupName')} stream {logs.get('streamName')}" if logs.get("groupName") else "no log"
    message = f"{status} in phase {failed.get('phaseType', '?')}: {why or 'no reason given'} ({build['id']}; {where})"
    found = []
    if logs.get("groupName") and logs.get("streamName"):
        # The build failed whatever its log says: a log that cannot be read, or was never created (a build that
        # failed before its container started writes none), never hides the failure.
        try:
            tail = log_tail(aws, logs["groupName"], logs["streamName"], TAIL)
        except STOPPED as error:
            found.append(unknown(subject, "its build log", stopped_reason(error), key="image"))
        else:
            if tail is None:
                lines = ["(no build log: the stream was never created; the build failed before it wrote any)"]
            else:
                lines = tail
                kept.keep("image/build-log", lines)
    return [problem(subject, message, key="image", text=why, details=tuple(lines[-15:])), *found]
