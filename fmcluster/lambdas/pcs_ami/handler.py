"""Custom resource: the PCS-Ready DLAMI for a CPU architecture, resolved once at deploy time and then kept.

AWS publishes the PCS-Ready DLAMI (Ubuntu 24.04 with the PCS agent and Slurm preinstalled) as the SSM public
parameter `/aws/service/pcs/ami/dlami-base-ubuntu2404/<architecture>/latest/ami-id` (PCS user guide;
awsome-distributed-training `architectures/aws-pcs/assets/pcs-ready-dlami-with-enroot-pyxis.yaml`). A
CloudFormation parameter of type `AWS::SSM::Parameter::Value<...>` would re-resolve `/latest/` on every stack update
and roll every node group onto a newer image on an unrelated change (awsome-distributed-training
`architectures/aws-pcs/README.md` warns of it), so the id is resolved here, at Create, and kept:

- Create: read the parameter, return its AMI id (also the physical id).
- Update: read it again only when `Architecture` or `Refresh` changed (`orchestrator.image_refresh`); any other
  change (a new Lambda, so a new ServiceToken) keeps the image resolved before.
- Delete: nothing to remove.

Resolved at deploy time, never at synth, so `cdk synth` needs no AWS call.
"""

from __future__ import annotations

import json
import logging
import re

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

ARCHITECTURES = ("x86_64", "arm64")
PARAMETER = "/aws/service/pcs/ami/dlami-base-ubuntu2404/{architecture}/latest/ami-id"
"""The PCS-Ready DLAMI's SSM public parameter (FACTS.md, Node images)."""
AMI_ID = re.compile(r"^ami-([0-9a-f]{8}|[0-9a-f]{17})$")
RESOLVING = ("Architecture", "Refresh")
"""The properties whose change re-resolves the image; nothing else does."""


def parameter_name(architecture: str) -> str:
    """The SSM public parameter of the PCS-Ready DLAMI for `architecture`.

    >>> parameter_name("arm64")
    '/aws/service/pcs/ami/dlami-base-ubuntu2404/arm64/latest/ami-id'
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"Architecture must be one of {', '.join(ARCHITECTURES)}; got {architecture!r}")
    return PARAMETER.format(architecture=architecture)


def resolve(architecture: str, ssm) -> str:
    """The AMI id the parameter holds now."""
    name = parameter_name(architecture)
    value = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    if not AMI_ID.match(value):
        raise LookupError(f"SSM parameter {name} holds {value!r}, not an AMI id; set orchestrator.ami_id instead")
    return value


def must_resolve(event: dict) -> bool:
    """Whether this event asks for the parameter to be read (Create, or an Update that changed what resolves)."""
    if event["RequestType"] == "Create":
        return True
    new = event.get("ResourceProperties") or {}
    old = event.get("OldResourceProperties") or {}
    return any(new.get(key) != old.get(key) for key in RESOLVING) or not AMI_ID.match(
        str(event.get("PhysicalResourceId"))
    )


def on_event(event: dict, context: object, ssm=None) -> dict:
    """CDK Provider framework entry point (see the module docstring)."""
    request = event.get("RequestType")
    if request not in ("Create", "Update", "Delete"):
        raise ValueError(f"RequestType must be Create, Update or Delete; got {request!r}")
    if request == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", "none")}
    properties = event.get("ResourceProperties") or {}
    architecture = str(properties.get("Architecture"))
    parameter_name(architecture)  # a bad architecture fails before any call
    if not must_resolve(event):
        image = event["PhysicalResourceId"]
        LOG.info(json.dumps({"event": "kept", "architecture": architecture, "image": image}))
        return {"PhysicalResourceId": image, "Data": {"ImageId": image}}
    image = resolve(architecture, ssm or boto3.client("ssm"))
    LOG.info(json.dumps({"event": "resolved", "architecture": architecture, "image": image}))
    return {"PhysicalResourceId": image, "Data": {"ImageId": image}}
