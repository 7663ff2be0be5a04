"""The managed-Grafana provisioning handler against a stand-in Grafana HTTP API on 127.0.0.1 and botocore's Stubber.

The AWS side (service account and its token) is botocore's Stubber, which checks every request and response against
the real Amazon Managed Grafana API model. The Grafana side is a small in-memory HTTP server implementing the few
endpoints the handler calls (folders, data sources by uid, dashboards), answering as Grafana does (404 for a missing
uid, 401 without the bearer token). Dashboards are fmcluster's real files.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from botocore.stub import ANY, Stubber

from fmcluster.lambdas.grafana_dashboards.handler import DATASOURCE_UID, SERVICE_ACCOUNT, GrafanaError, on_event
from tests.observability.conftest import DASHBOARDS

WORKSPACE = "g-0123456789"
TOKEN = "glsa_stub_token_0123456789"
PROMETHEUS_URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567-89ef/"
BOARDS = {path.name: path.read_text() for path in sorted(DASHBOARDS.glob("*.json"))}


class FakeGrafana:
    """Grafana's HTTP API, the parts the handler uses, in memory."""

    def __init__(self) -> None:
        self.folders: dict[str, dict] = {}
        self.datasources: dict[str, dict] = {}
        self.dashboards: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.fail_dashboards = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                outer.requests.append((method, self.path))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._answer(401, {"message": "Unauthorized"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                status, answer = outer.handle(method, self.path, body)
                self._answer(status, answer)

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PUT(self) -> None:
                self._route("PUT")

            def do_DELETE(self) -> None:
                self._route("DELETE")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, method: str, path: str, body: dict | None) -> tuple[int, object]:
        not_found = (404, {"message": "not found"})
        if path.startswith("/api/folders"):
            uid = path.removeprefix("/api/folders").strip("/")
            if method == "GET":
                return (200, self.folders[uid]) if uid in self.folders else not_found
            self.folders[body["uid"]] = body
            return 200, body
        if path.startswith("/api/datasources"):
            uid = path.removeprefix("/api/datasources/uid/") if "/uid/" in path else None
            if method == "GET":
                return (200, self.datasources[uid]) if uid in self.datasources else not_found
            if method == "DELETE":
                return (200, {"message": "deleted"}) if self.datasources.pop(uid, None) else not_found
            if method == "POST" and body["uid"] in self.datasources:
                return 409, {"message": "data source with the same uid already exists"}
            self.datasources[body["uid"]] = body
            return 200, {"datasource": body}
        if path == "/api/dashboards/db" and method == "POST":
            if self.fail_dashboards:
                return 400, {"message": "Dashboard title cannot be empty"}
            dashboard = body["dashboard"]
            self.dashboards[dashboard["uid"]] = body
            return 200, {"status": "success", "uid": dashboard["uid"]}
        if path.startswith("/api/dashboards/uid/") and method == "DELETE":
            uid = path.removeprefix("/api/dashboards/uid/")
            return (200, {"title": uid}) if self.dashboards.pop(uid, None) else not_found
        return not_found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def grafana_api():
    fake = FakeGrafana()
    yield fake
    fake.close()


def event(request: str = "Create", **properties) -> dict:
    return {
        "RequestType": request,
        "PhysicalResourceId": f"{WORKSPACE}/fmcluster-dashboards",
        "ResourceProperties": {
            "WorkspaceId": WORKSPACE,
            "Endpoint": f"{WORKSPACE}.grafana-workspace.us-east-1.amazonaws.com",
            "PrometheusUrl": PROMETHEUS_URL,
            "Region": "us-east-1",
            "Dashboards": BOARDS,
            **properties,
        },
    }


def stubbed(*, existing_account: bool = False, token: bool = True, delete_token: bool = True):
    client = boto3.client("grafana", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    accounts = (
        [{"id": "7", "name": SERVICE_ACCOUNT, "grafanaRole": "ADMIN", "isDisabled": "false"}]
        if existing_account
        else []
    )
    stub.add_response(
        "list_workspace_service_accounts",
        {"serviceAccounts": accounts, "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE},
    )
    if not existing_account:
        stub.add_response(
            "create_workspace_service_account",
            {"id": "7", "name": SERVICE_ACCOUNT, "grafanaRole": "ADMIN", "workspaceId": WORKSPACE},
            {"workspaceId": WORKSPACE, "name": SERVICE_ACCOUNT, "grafanaRole": "ADMIN"},
        )
    if token:
        stub.add_response(
            "create_workspace_service_account_token",
            {"serviceAccountToken": {"id": "41", "name": "fmcluster-x", "key": TOKEN}, "serviceAccountId": "7",
             "workspaceId": WORKSPACE},
            {"workspaceId": WORKSPACE, "serviceAccountId": "7", "name": ANY, "secondsToLive": 900},
        )  # fmt: skip
    if delete_token:
        stub.add_response(
            "delete_workspace_service_account_token",
            {"serviceAccountId": "7", "tokenId": "41", "workspaceId": WORKSPACE},
            {"workspaceId": WORKSPACE, "serviceAccountId": "7", "tokenId": "41"},
        )
    stub.activate()
    return client, stub


def test_create_provisions_the_data_source_and_every_dashboard_then_drops_the_token(grafana_api):
    client, stub = stubbed()
    result = on_event(event(), None, grafana=client, base_url=grafana_api.url)
    stub.assert_no_pending_responses()
    assert result == {
        "PhysicalResourceId": f"{WORKSPACE}/fmcluster-dashboards",
        "Data": {"Dashboards": "fmcluster-efa,fmcluster-fsx,fmcluster-gpu,fmcluster-slurm"},
    }
    source = grafana_api.datasources[DATASOURCE_UID]
    assert source["url"] == PROMETHEUS_URL.rstrip("/")
    assert source["jsonData"] == {
        "httpMethod": "POST", "sigV4Auth": True, "sigV4AuthType": "ec2_iam_role", "sigV4Region": "us-east-1",
    }  # fmt: skip
    assert set(grafana_api.folders) == {"fmcluster"}
    for uid, body in grafana_api.dashboards.items():
        assert body["folderUid"] == "fmcluster" and body["overwrite"] is True
        assert body["dashboard"]["id"] is None and body["dashboard"]["uid"] == uid
    assert grafana_api.dashboards["fmcluster-gpu"]["dashboard"]["panels"]


def test_update_reuses_the_service_account_and_updates_the_data_source_in_place(grafana_api):
    client, _ = stubbed()
    on_event(event(), None, grafana=client, base_url=grafana_api.url)
    client, stub = stubbed(existing_account=True)
    other = PROMETHEUS_URL.replace("ws-0123abcd-4567-89ef", "ws-99999999-aaaa-bbbb")
    on_event(event("Update", PrometheusUrl=other), None, grafana=client, base_url=grafana_api.url)
    stub.assert_no_pending_responses()
    assert ("PUT", f"/api/datasources/uid/{DATASOURCE_UID}") in grafana_api.requests
    assert grafana_api.datasources[DATASOURCE_UID]["url"] == other.rstrip("/")
    assert len(grafana_api.dashboards) == 4


def test_delete_removes_what_it_made(grafana_api):
    client, _ = stubbed()
    on_event(event(), None, grafana=client, base_url=grafana_api.url)
    client, stub = stubbed(existing_account=True)
    result = on_event(event("Delete"), None, grafana=client, base_url=grafana_api.url)
    stub.assert_no_pending_responses()
    assert result == {"PhysicalResourceId": f"{WORKSPACE}/fmcluster-dashboards"}
    assert grafana_api.dashboards == {} and grafana_api.datasources == {}


def test_delete_after_the_workspace_is_gone_succeeds():
    client = boto3.client("grafana", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_client_error("list_workspace_service_accounts", "ResourceNotFoundException", http_status_code=404)
    stub.activate()
    result = on_event(event("Delete"), None, grafana=client, base_url="http://127.0.0.1:9")
    assert result == {"PhysicalResourceId": f"{WORKSPACE}/fmcluster-dashboards"}


def test_a_grafana_error_fails_the_resource_and_still_drops_the_token(grafana_api):
    grafana_api.fail_dashboards = True
    client, stub = stubbed()
    with pytest.raises(GrafanaError, match=r"POST /api/dashboards/db answered 400: .*title cannot be empty"):
        on_event(event(), None, grafana=client, base_url=grafana_api.url)
    stub.assert_no_pending_responses()  # the token was deleted


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"RequestType": "Replace"}, "RequestType must be Create, Update or Delete; got 'Replace'"),
        ({"ResourceProperties": {"WorkspaceId": WORKSPACE}}, "missing resource properties: Endpoint, PrometheusUrl"),
        ({"ResourceProperties": {**event()["ResourceProperties"], "Dashboards": {"x.json": "{"}}},
         "dashboard x.json is not JSON"),
        ({"ResourceProperties": {**event()["ResourceProperties"], "Dashboards": {"x.json": "{}"}}},
         "dashboard x.json needs a uid and a title"),
    ],
    ids=["request-type", "missing", "not-json", "no-uid"],
)  # fmt: skip
def test_bad_events_raise_before_any_call(bad, message):
    client = boto3.client("grafana", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.activate()  # no responses queued: any AWS call would fail the test
    with pytest.raises(ValueError, match=message):
        on_event({**event(), **bad}, None, grafana=client, base_url="http://127.0.0.1:9")
