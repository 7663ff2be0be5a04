"""The NCCL-environment custom resource handler (fmcluster/lambdas/nccl_env/handler.py) against emulated AWS.

AWS is emulated by moto (`mock_aws`): SSM PutParameter, GetParameter and DeleteParameter run against moto's in-memory
Parameter Store, so the tests need no AWS account or credentials, run offline and start from an empty store every
time. moto does not enforce IAM: that the function's role may only put and delete parameters under
/fmcluster/<cluster>/ is asserted on the synthesized template (tests/unit/test_nccl_constructs.py). Nor does it run
the CDK Provider framework: that a ValueError from `on_event` becomes a FAILED response with its message is the
framework's contract, so here a malformed event must raise ValueError with a clear message, and nothing else.

The handler is loaded from its asset folder as the module `handler`, exactly as Lambda loads it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from unittest import mock

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

HANDLER = Path(__file__).resolve().parents[2] / "fmcluster" / "lambdas" / "nccl_env" / "handler.py"
NAME = "/fmcluster/llm-pretrain/gpu/nccl-env"
ENVIRONMENT = {"NCCL_SOCKET_IFNAME": "^docker,lo,veth", "NCCL_DEBUG": "WARN"}


def load_handler():
    spec = importlib.util.spec_from_file_location("fmcluster_test_nccl_env_handler", HANDLER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


handler = load_handler()


@pytest.fixture
def ssm(monkeypatch):
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield boto3.client("ssm")


def event(request_type: str, **overrides) -> dict:
    base = {
        "RequestType": request_type,
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:framework-onEvent",
        "ResponseURL": "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/llm-pretrain-cluster/1",
        "RequestId": "6f1a2b3c-0000-4000-8000-000000000001",
        "LogicalResourceId": "NcclEnvironmentgpu9480B5F1",
        "ResourceType": "Custom::NcclEnvironment",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:framework-onEvent",
            "ParameterName": NAME,
            "Environment": json.dumps(ENVIRONMENT),
            "Description": "NCCL environment for compute group gpu (p5.48xlarge), by fmcluster",
        },
    }
    if request_type != "Create":
        base["PhysicalResourceId"] = NAME
    base.update(overrides)
    return base


def stored(ssm, name: str = NAME) -> dict:
    return ssm.get_parameter(Name=name)["Parameter"]


def log_lines(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


# --- create, update, delete ---------------------------------------------------------------------------------------


def test_create_writes_a_string_parameter_and_names_the_resource_after_it(ssm, capsys):
    response = handler.on_event(event("Create"))
    assert response == {"PhysicalResourceId": NAME, "Data": {"ParameterName": NAME}}
    parameter = stored(ssm)
    assert parameter["Type"] == "String"
    assert parameter["Value"] == '{"NCCL_DEBUG":"WARN","NCCL_SOCKET_IFNAME":"^docker,lo,veth"}'
    assert json.loads(parameter["Value"]) == ENVIRONMENT  # the flat object nccl-env.sh reads
    description = ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [NAME]}])["Parameters"][0]
    assert description["Description"] == "NCCL environment for compute group gpu (p5.48xlarge), by fmcluster"
    (entry,) = log_lines(capsys)
    assert entry["level"] == "INFO" and entry["message"] == "wrote NCCL environment"
    assert entry["parameter"] == NAME and entry["variables"] == ["NCCL_DEBUG", "NCCL_SOCKET_IFNAME"]


def test_update_overwrites_the_value_in_place(ssm):
    handler.on_event(event("Create"))
    changed = event("Update")
    changed["ResourceProperties"]["Environment"] = json.dumps({"NCCL_SOCKET_IFNAME": "^docker,lo,veth"})
    assert handler.on_event(changed)["PhysicalResourceId"] == NAME
    parameter = stored(ssm)
    assert json.loads(parameter["Value"]) == {"NCCL_SOCKET_IFNAME": "^docker,lo,veth"}
    assert parameter["Version"] == 2


def test_update_that_renames_returns_the_new_name_and_cloudformation_then_deletes_the_old(ssm, capsys):
    handler.on_event(event("Create"))
    renamed = event("Update")
    renamed["ResourceProperties"]["ParameterName"] = "/fmcluster/llm-pretrain/gpu2/nccl-env"
    assert handler.on_event(renamed)["PhysicalResourceId"] == "/fmcluster/llm-pretrain/gpu2/nccl-env"
    assert json.loads(stored(ssm, "/fmcluster/llm-pretrain/gpu2/nccl-env")["Value"]) == ENVIRONMENT
    assert log_lines(capsys)[-1]["replaces"] == NAME
    # the new physical id makes CloudFormation send Delete for the old one in its cleanup phase
    handler.on_event(event("Delete", PhysicalResourceId=NAME))
    with pytest.raises(ClientError, match="ParameterNotFound"):
        stored(ssm)
    assert stored(ssm, "/fmcluster/llm-pretrain/gpu2/nccl-env")


def test_delete_removes_the_parameter_and_a_second_delete_still_succeeds(ssm, capsys):
    handler.on_event(event("Create"))
    assert handler.on_event(event("Delete")) == {"PhysicalResourceId": NAME}
    with pytest.raises(ClientError, match="ParameterNotFound"):
        stored(ssm)
    assert handler.on_event(event("Delete")) == {"PhysicalResourceId": NAME}
    assert log_lines(capsys)[-1]["message"] == "parameter already gone"


def test_delete_after_a_failed_create_touches_nothing(ssm, capsys):
    """A failed Create leaves the framework's placeholder id; Delete must succeed without deleting anything."""
    ssm.put_parameter(Name="/other/parameter", Value="keep", Type="String")
    placeholder = "llm-pretrain-cluster-NcclEnvironmentgpu9480B5F1-ABCDEF123456"
    for physical_id in (placeholder, "/other/parameter", None):
        assert handler.on_event(event("Delete", PhysicalResourceId=physical_id))["PhysicalResourceId"] in (
            physical_id,
            "none",
        )
    assert stored(ssm, "/other/parameter")["Value"] == "keep"
    assert {line["message"] for line in log_lines(capsys)} == {
        "nothing to delete: the physical id is not an NCCL parameter"
    }


def test_an_aws_error_other_than_not_found_propagates_so_the_framework_reports_failed(ssm):
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}, "DeleteParameter")
    client = mock.Mock(**{"delete_parameter.side_effect": denied, "put_parameter.side_effect": denied})
    with mock.patch.object(handler, "_ssm", return_value=client):
        for request_type in ("Create", "Delete"):
            with pytest.raises(ClientError, match="AccessDenied"):
                handler.on_event(event(request_type))


# --- malformed events ---------------------------------------------------------------------------------------------


def props(**changes) -> dict:
    properties = dict(event("Create")["ResourceProperties"])
    for key, value in changes.items():
        if value is None:
            properties.pop(key)
        else:
            properties[key] = value
    return properties


MALFORMED = [
    ("not an object", ["Create"], "malformed event: expected a JSON object, got list"),
    (
        {"ResourceProperties": {}},
        None,
        "malformed event: RequestType must be one of Create, Update, Delete; got None",
    ),
    (
        {"RequestType": "Replace"},
        None,
        "malformed event: RequestType must be one of Create, Update, Delete; got 'Replace'",
    ),
    (
        {"RequestType": "Create", "ResourceProperties": "ParameterName=/fmcluster/x/y/nccl-env"},
        None,
        "malformed event: ResourceProperties must be an object with ParameterName and Environment",
    ),
    (
        props(ParameterName=None),
        "props",
        "malformed event: ResourceProperties.ParameterName must look like /fmcluster/<cluster>/<group>/nccl-env; "
        "got None",
    ),
    (
        props(ParameterName="/prod/database/password"),
        "props",
        "malformed event: ResourceProperties.ParameterName must look like /fmcluster/<cluster>/<group>/nccl-env; "
        "got '/prod/database/password'",
    ),
    (
        props(ParameterName="/fmcluster/llm-pretrain/gpu/../../x/nccl-env"),
        "props",
        "malformed event: ResourceProperties.ParameterName must look like /fmcluster/<cluster>/<group>/nccl-env; "
        "got '/fmcluster/llm-pretrain/gpu/../../x/nccl-env'",
    ),
    (
        props(Environment=None),
        "props",
        "malformed event: ResourceProperties.Environment must be a JSON object of variables as a string; got NoneType",
    ),
    (
        props(Environment="{NCCL_DEBUG: WARN}"),
        "props",
        "malformed event: ResourceProperties.Environment is not JSON: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1)",
    ),
    (
        props(Environment='["NCCL_DEBUG=WARN"]'),
        "props",
        "malformed event: ResourceProperties.Environment must be a JSON object; got list",
    ),
    (
        props(Environment='{"LD_PRELOAD": "/tmp/x.so", "NCCL_DEBUG": 3, "NCCL_ALGO": "Ring\\nTree"}'),
        "props",
        "malformed event: ResourceProperties.Environment: 'LD_PRELOAD' is not an NCCL, libfabric or aws-ofi-nccl "
        "variable; NCCL_DEBUG: the value must be a one-line string, got 3; NCCL_ALGO: the value must be a one-line "
        'string, got "Ring\\nTree"',
    ),
    (
        props(Environment=json.dumps({f"NCCL_X{i}": "v" * 40 for i in range(90)})),
        "props",
        "ResourceProperties.Environment is 4851 bytes as JSON; an SSM String parameter holds at most 4096: remove "
        "some variables",
    ),
    (
        props(Description=7),
        "props",
        "malformed event: ResourceProperties.Description must be a string of at most 1024 characters",
    ),
]


@pytest.mark.parametrize(("payload", "shape", "message"), MALFORMED, ids=[m[2][:60] for m in MALFORMED])
def test_malformed_events_raise_a_clear_value_error_and_write_nothing(ssm, payload, shape, message):
    if shape == "props":
        bad = event("Create", ResourceProperties=payload)
    elif shape is None:
        bad = payload
    else:
        bad = shape
    with pytest.raises(ValueError) as error:
        handler.on_event(bad)
    assert str(error.value) == message
    assert ssm.describe_parameters()["Parameters"] == []


def test_update_events_are_checked_like_creates(ssm):
    with pytest.raises(ValueError, match="ParameterName must look like"):
        handler.on_event(event("Update", ResourceProperties=props(ParameterName="/fmcluster/a")))


def test_the_handler_takes_the_variable_names_the_cluster_file_does():
    """The function's code asset ships alone (it cannot import fmcluster), so its copy of the names rule is held to
    the one `fmcluster.nccl` defines (which the cluster file, the NcclTuning construct and the nodes use)."""
    from fmcluster import nccl

    assert handler.VARIABLE_NAME.pattern == nccl.ENV_KEY_PATTERN.pattern
