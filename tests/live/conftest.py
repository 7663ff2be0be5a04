"""Shared setup of the live-check tests: fake credentials, botocore-stubbed clients and cluster files.

Nothing here reaches AWS: every client is wrapped in botocore's Stubber, which fails a test on any call it was
not given a response for. Every response added is first checked against the operation's output shape in
botocore's service model (`shapes.shape_problems`), and every error code against the model's declared errors
or the service's documented error codes.
"""

from __future__ import annotations

import functools

import boto3
import pytest
from botocore import xform_name
from botocore.stub import Stubber

from fmcluster.config import ClusterConfig, parse
from fmcluster.live.aws import DENIED_CODES, Aws
from tests.live.responses import DOCUMENTED_ERRORS
from tests.live.shapes import declared_errors, output_shape, shape_problems


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


class NoSession:
    """A boto3 session stand-in that refuses to make clients: only stubbed ones may be used."""

    def client(self, service: str, **_: object) -> object:
        raise AssertionError(f"{service} was called but has no stubbed responses")


@functools.cache
def _session() -> boto3.Session:
    """One boto3 session for every test: it loads each service's botocore model once (a quarter of a second for
    EC2's) and caches it, where a session per test loaded them again for every test. Clients and their Stubbers are
    still made per test."""
    return boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing")


class Stubs:
    """Stubbed clients for one region; `ok`/`error` queue one response each, in call order per service."""

    def __init__(self, region: str):
        self.region = region
        self.clients: dict[str, object] = {}
        self._stubbers: dict[str, Stubber] = {}
        self._session = _session()

    def _stubber(self, service: str) -> Stubber:
        if service not in self._stubbers:
            client = self._session.client(service, region_name=self.region)
            stubber = Stubber(client)
            stubber.activate()
            self.clients[service] = client
            self._stubbers[service] = stubber
        return self._stubbers[service]

    def ok(self, service: str, operation: str, response: dict, params: dict | None = None) -> Stubs:
        problems = shape_problems(output_shape(service, operation), response)
        assert not problems, f"{service} {operation} fixture does not fit botocore's model: {problems}"
        self._stubber(service).add_response(xform_name(operation), response, params)
        return self

    def error(
        self, service: str, operation: str, code: str, message: str = "", status: int = 400, params: dict | None = None
    ) -> Stubs:
        known = declared_errors(service, operation)
        assert code in known or code in DOCUMENTED_ERRORS or code in DENIED_CODES, f"{code} has no source"
        self._stubber(service).add_client_error(xform_name(operation), code, message, status, expected_params=params)
        return self

    def denied(self, service: str, operation: str, params: dict) -> Stubs:
        """The call refused by the caller's policy, as the service answers it (HTTP 403)."""
        return self.error(
            service,
            operation,
            "AccessDenied",
            "User is not authorized to perform this action",
            status=403,
            params=params,
        )

    def no_stack(self, operation: str, name: str) -> Stubs:
        """CloudFormation's answer about a stack that does not exist (API reference, common errors)."""
        return self.error(
            "cloudformation",
            operation,
            "ValidationError",
            f"Stack with id {name} does not exist",
            params={"StackName": name},
        )

    def aws(self) -> Aws:
        """An Aws of the stubbed clients only: a call to any other service fails the test, never reaches AWS."""
        return Aws(self.region, clients=self.clients, session=NoSession(), rate_limits={})  # paced in test_aws

    def assert_done(self) -> None:
        for service, stubber in self._stubbers.items():
            left = [item["operation_name"] for item in stubber._queue]  # Stubber keeps no public view of its queue
            assert not left, f"{service}: stubbed but never called: {left}"


@pytest.fixture
def stubs():
    made: list[Stubs] = []

    def make(region: str = "us-east-1") -> Stubs:
        made.append(Stubs(region))
        return made[-1]

    yield make
    for stub in made:
        stub.assert_done()


PCS_BLOCK = """\
name: llm-pretrain
region: us-east-1
account: "123456789012"
availability_zone_id: use1-az6
network: {egress: none}
compute:
  - {name: gpu, instance_type: p5.48xlarge, count: 16, capacity: capacity-block, reservation_id: cr-0123456789abcdef0}
orchestrator: {type: pcs}
"""

QUICKSTART = """\
name: quickstart
region: us-east-1
availability_zone_id: use1-az6
compute:
  - {name: gpu, instance_type: p5.48xlarge, count: 2}
"""


def config_of(text: str, **changes: object) -> ClusterConfig:
    """A validated config from YAML text, with top-level keys replaced by `changes`."""
    import yaml

    data = yaml.safe_load(text)
    data.update(changes)
    return parse(data, source="cluster.yaml")
