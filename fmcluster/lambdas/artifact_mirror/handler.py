"""Custom resource: run the artifact-mirror CodeBuild build and wait for it (CDK Provider framework, on_event only).

Create/Update: starts one build of the project (ProjectName) and polls it every 10 s; succeeded: returns the mirror's
URI (MirrorUri) as the resource's `Uri` attribute; failed, faulted, timed out or stopped: raises, naming the build and
its log stream (the framework turns it into a FAILED response, so the deploy fails with the reason). CloudFormation
sends an Update only when a property changed (ListHash: the artifact list), so an unchanged list runs nothing; the
job itself skips what the mirror holds already. A build still running after WAIT_SECONDS raises (the function's
timeout is 15 minutes). Delete: nothing (the mirrored files stay in the retained data bucket). Python and boto3 only.
"""

from __future__ import annotations

import json
import logging
import time

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
WAIT_SECONDS = 13 * 60
POLL_SECONDS = 10
FAILED = ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")


def on_event(event: dict, context: object, codebuild=None, sleep=time.sleep) -> dict:
    request = event.get("RequestType")
    properties = event.get("ResourceProperties") or {}
    uri = properties.get("MirrorUri", "")
    if request == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId") or uri}
    if request not in ("Create", "Update") or not properties.get("ProjectName") or not uri.startswith("s3://"):
        raise ValueError(f"expected a Create/Update with ProjectName and an s3:// MirrorUri; got {request!r}")
    codebuild = codebuild or boto3.client("codebuild")
    build_id = codebuild.start_build(projectName=properties["ProjectName"])["build"]["id"]
    LOG.info(json.dumps({"event": "started", "build": build_id, "list": properties.get("ListHash")}))
    waited = 0
    while True:
        build = codebuild.batch_get_builds(ids=[build_id])["builds"][0]
        status = build.get("buildStatus")
        if status == "SUCCEEDED":
            LOG.info(json.dumps({"event": "succeeded", "build": build_id}))
            return {"PhysicalResourceId": uri, "Data": {"Uri": uri}}
        if status in FAILED:
            logs = build.get("logs", {})
            raise RuntimeError(
                f"the artifact mirror build {build_id} ended {status}: see CloudWatch Logs group "
                f"{logs.get('groupName', '?')}, stream {logs.get('streamName', '?')} (each artifact that failed "
                "is named in a FAILED line)"
            )
        if waited >= WAIT_SECONDS:
            raise RuntimeError(f"the artifact mirror build {build_id} still runs after {WAIT_SECONDS // 60} minutes")
        sleep(POLL_SECONDS)
        waited += POLL_SECONDS
