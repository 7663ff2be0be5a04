"""The PCS node-image resolver. SSM is emulated by botocore's Stubber, not moto: moto holds no `/aws/service/pcs/...`
public parameter, and the Stubber still validates every request and response against SSM's real API model.

The parameter's name is AWS's (PCS user guide; awsome-distributed-training
`architectures/aws-pcs/assets/pcs-ready-dlami-with-enroot-pyxis.yaml`, Mappings.DLAMIConfigs)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster.lambdas.pcs_ami.handler import on_event, parameter_name

X86_PARAMETER = "/aws/service/pcs/ami/dlami-base-ubuntu2404/x86_64/latest/ami-id"


def event(request="Create", old=None, physical=None, **properties):
    built = {"RequestType": request, "ResourceProperties": {"Architecture": "x86_64", **properties}}
    if old is not None:
        built["OldResourceProperties"] = {"Architecture": "x86_64", **old}
    if physical is not None:
        built["PhysicalResourceId"] = physical
    return built


def stubbed(value="ami-0bbbbbbbbbbbbbbbb", name=X86_PARAMETER):
    ssm = boto3.client("ssm", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ssm)
    stub.add_response("get_parameter", {"Parameter": {"Name": name, "Type": "String", "Value": value}}, {"Name": name})
    stub.activate()
    return ssm, stub


def test_create_resolves_the_parameter_once():
    ssm, stub = stubbed()
    assert on_event(event(), None, ssm=ssm) == {
        "PhysicalResourceId": "ami-0bbbbbbbbbbbbbbbb",
        "Data": {"ImageId": "ami-0bbbbbbbbbbbbbbbb"},
    }
    stub.assert_no_pending_responses()


def test_an_update_that_changes_nothing_that_resolves_keeps_the_image():
    """A new ServiceToken (the function was replaced) or any other property: the node groups keep their image."""
    ssm, stub = stubbed()
    result = on_event(
        event("Update", old={"ServiceToken": "arn:old"}, physical="ami-0aaaaaaaaaaaaaaaa", ServiceToken="arn:new"),
        None,
        ssm=ssm,
    )
    assert result == {"PhysicalResourceId": "ami-0aaaaaaaaaaaaaaaa", "Data": {"ImageId": "ami-0aaaaaaaaaaaaaaaa"}}
    with pytest.raises(AssertionError):
        stub.assert_no_pending_responses()  # the parameter was not read


@pytest.mark.parametrize(
    ("old", "new"),
    [({"Refresh": "2026-11-01"}, {"Refresh": "2026-12-01"}), ({}, {"Refresh": "1"})],
)
def test_a_new_refresh_label_resolves_again(old, new):
    ssm, stub = stubbed()
    result = on_event(event("Update", old=old, physical="ami-0aaaaaaaaaaaaaaaa", **new), None, ssm=ssm)
    assert result["PhysicalResourceId"] == "ami-0bbbbbbbbbbbbbbbb"
    stub.assert_no_pending_responses()


def test_a_new_architecture_resolves_its_own_parameter():
    arm = "/aws/service/pcs/ami/dlami-base-ubuntu2404/arm64/latest/ami-id"
    ssm, stub = stubbed("ami-0cccccccccccccccc", name=arm)
    result = on_event(event("Update", old={}, physical="ami-0aaaaaaaaaaaaaaaa", Architecture="arm64"), None, ssm=ssm)
    assert result["Data"] == {"ImageId": "ami-0cccccccccccccccc"}
    stub.assert_no_pending_responses()


def test_a_parameter_that_holds_no_ami_id_fails_the_deploy_with_what_to_do():
    ssm, _ = stubbed("not-an-image")
    with pytest.raises(LookupError, match=r"holds 'not-an-image', not an AMI id; set orchestrator\.ami_id"):
        on_event(event(), None, ssm=ssm)


def test_delete_calls_nothing():
    assert on_event({"RequestType": "Delete", "PhysicalResourceId": "ami-1"}, None, ssm=object()) == {
        "PhysicalResourceId": "ami-1"
    }


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"RequestType": "Poke"}, "RequestType must be Create, Update or Delete; got 'Poke'"),
        (event(Architecture="sparc"), "Architecture must be one of x86_64, arm64; got 'sparc'"),
        ({"RequestType": "Create"}, "Architecture must be one of x86_64, arm64; got 'None'"),
    ],
)
def test_malformed_events_raise_a_clear_error(bad, message):
    with pytest.raises(ValueError) as error:
        on_event(bad, None, ssm=object())
    assert str(error.value) == message


@pytest.mark.parametrize("architecture", ["x86_64", "arm64"])
def test_the_parameter_is_awss_for_each_architecture(architecture):
    assert parameter_name(architecture) == f"/aws/service/pcs/ami/dlami-base-ubuntu2404/{architecture}/latest/ami-id"
