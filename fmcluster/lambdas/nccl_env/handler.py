"""Custom resource (CDK Provider framework, on_event): a compute group's NCCL environment as an SSM parameter.

ResourceProperties (all strings, as CloudFormation passes them):
    ParameterName   /fmcluster/<cluster>/<group>/nccl-env
    Environment     a JSON object of variables, e.g. {"NCCL_SOCKET_IFNAME": "^docker,lo,veth"}; names match
                    ^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$, values are one-line strings (what fmcluster/node/nccl-env.sh
                    accepts on the nodes)
    Description     optional; the parameter's description

Create and Update write the parameter (an SSM String, overwritten in place) and return its name as the
PhysicalResourceId; an Update that renames it returns the new name, and CloudFormation then deletes the old one.
Delete removes the parameter named by the PhysicalResourceId (nothing to do when it is already gone, or when the
id is not one of ours: a Create that failed leaves the framework's placeholder id).

A malformed event raises ValueError with what is wrong; the Provider framework reports it to CloudFormation as a
FAILED response with that message, so a deploy fails fast instead of waiting for a timeout. Logs are JSON lines.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import boto3
from botocore.exceptions import ClientError

PARAMETER_NAME = re.compile(r"^/fmcluster/[a-z][a-z0-9-]{0,22}[a-z0-9]/[a-z][a-z0-9-]{0,19}/nccl-env$")
VARIABLE_NAME = re.compile(r"^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$")
MAX_VALUE_BYTES = 4096
"""SSM Standard-tier parameters hold at most 4 KB."""
REQUEST_TYPES = ("Create", "Update", "Delete")


def log(level: str, message: str, **fields: Any) -> None:
    """One JSON object per line on stdout, which Lambda sends to the function's log group."""
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "level": level, "message": message}
    entry.update(fields)
    print(json.dumps(entry, default=str, sort_keys=True), flush=True)


def _ssm():
    return boto3.client("ssm")


def parse_request(event: object) -> dict[str, Any]:
    """The parts of a custom-resource event this handler uses; ValueError says what is malformed."""
    if not isinstance(event, dict):
        raise ValueError(f"malformed event: expected a JSON object, got {type(event).__name__}")
    request_type = event.get("RequestType")
    if request_type not in REQUEST_TYPES:
        raise ValueError(
            f"malformed event: RequestType must be one of {', '.join(REQUEST_TYPES)}; got {request_type!r}"
        )
    request = {"RequestType": request_type, "PhysicalResourceId": event.get("PhysicalResourceId")}
    if request_type == "Delete":
        return request
    properties = event.get("ResourceProperties")
    if not isinstance(properties, dict):
        raise ValueError("malformed event: ResourceProperties must be an object with ParameterName and Environment")
    name = properties.get("ParameterName")
    if not isinstance(name, str) or not PARAMETER_NAME.match(name):
        raise ValueError(
            "malformed event: ResourceProperties.ParameterName must look like /fmcluster/<cluster>/<group>/nccl-env; "
            f"got {name!r}"
        )
    description = properties.get("Description", f"NCCL environment for {name.split('/')[3]} (fmcluster)")
    if not isinstance(description, str) or len(description) > 1024:
        raise ValueError("malformed event: ResourceProperties.Description must be a string of at most 1024 characters")
    request.update(
        ParameterName=name,
        Value=_environment_value(properties.get("Environment")),
        Description=description,
    )
    return request


def _environment_value(raw: object) -> str:
    """The canonical JSON (sorted keys, compact) of the Environment property, after checking every variable."""
    if not isinstance(raw, str):
        raise ValueError(
            "malformed event: ResourceProperties.Environment must be a JSON object of variables as a string; "
            f"got {type(raw).__name__}"
        )
    try:
        variables = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"malformed event: ResourceProperties.Environment is not JSON: {error}") from None
    if not isinstance(variables, dict):
        raise ValueError(
            f"malformed event: ResourceProperties.Environment must be a JSON object; got {type(variables).__name__}"
        )
    problems = []
    for key, value in variables.items():
        if not VARIABLE_NAME.match(key):
            problems.append(f"{key!r} is not an NCCL, libfabric or aws-ofi-nccl variable")
        elif not isinstance(value, str) or any(c in value for c in "\n\r\0"):
            problems.append(f"{key}: the value must be a one-line string, got {json.dumps(value)}")
    if problems:
        raise ValueError("malformed event: ResourceProperties.Environment: " + "; ".join(problems))
    value = json.dumps(variables, sort_keys=True, separators=(",", ":"))
    if len(value.encode()) > MAX_VALUE_BYTES:
        raise ValueError(
            f"ResourceProperties.Environment is {len(value.encode())} bytes as JSON; an SSM String parameter holds "
            f"at most {MAX_VALUE_BYTES}: remove some variables"
        )
    return value


def on_event(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """Entry point for the Provider framework's on_event handler."""
    request = parse_request(event)
    request_type = request["RequestType"]
    if request_type == "Delete":
        return _delete(request["PhysicalResourceId"])
    name = request["ParameterName"]
    _ssm().put_parameter(
        Name=name,
        Value=request["Value"],
        Type="String",
        Tier="Standard",
        DataType="text",
        Overwrite=True,
        Description=request["Description"],
    )
    log(
        "INFO",
        "wrote NCCL environment",
        request_type=request_type,
        parameter=name,
        variables=sorted(json.loads(request["Value"])),
        replaces=request["PhysicalResourceId"] if request["PhysicalResourceId"] not in (None, name) else None,
    )
    return {"PhysicalResourceId": name, "Data": {"ParameterName": name}}


def _delete(physical_id: object) -> dict[str, Any]:
    if not isinstance(physical_id, str) or not PARAMETER_NAME.match(physical_id):
        # A Create that failed never wrote a parameter; the framework then names the resource with a placeholder.
        log("INFO", "nothing to delete: the physical id is not an NCCL parameter", physical_id=physical_id)
        return {"PhysicalResourceId": physical_id if isinstance(physical_id, str) else "none"}
    try:
        _ssm().delete_parameter(Name=physical_id)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ParameterNotFound":
            raise
        log("INFO", "parameter already gone", parameter=physical_id)
    else:
        log("INFO", "deleted NCCL environment", parameter=physical_id)
    return {"PhysicalResourceId": physical_id}
