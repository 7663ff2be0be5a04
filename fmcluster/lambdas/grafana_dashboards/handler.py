"""Custom resource: fmcluster's dashboards and the cluster's Prometheus data source in Amazon Managed Grafana.

Grafana's own HTTP API does the provisioning; the AWS API only lends a short-lived key for it. On Create and Update the
handler makes (or reuses) the workspace service account "fmcluster-provisioner" (ADMIN), takes a 15-minute token,
creates the "fmcluster" folder, creates or updates the data source "fmcluster-amp" (the Amazon Managed Service for
Prometheus workspace, SigV4 with the Grafana workspace's IAM role), uploads every dashboard into the folder (replacing
earlier versions by uid), and deletes the token again. On Delete it removes the dashboards and the data source it
made; a workspace that is gone already is not an error. Any other failure raises, and the CDK Provider framework
reports it to CloudFormation as FAILED with the message.

Resource properties: WorkspaceId, Endpoint (the workspace's host name), PrometheusUrl (the AMP workspace's Prometheus
endpoint), Region, Dashboards (file name -> dashboard JSON text).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
import uuid

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

SERVICE_ACCOUNT = "fmcluster-provisioner"
TOKEN_SECONDS = 900
FOLDER_UID = "fmcluster"
DATASOURCE_UID = "fmcluster-amp"
REQUIRED = ("WorkspaceId", "Endpoint", "PrometheusUrl", "Region", "Dashboards")


class GrafanaError(RuntimeError):
    """Grafana's HTTP API answered with an error status."""


def datasource(prometheus_url: str, region: str) -> dict:
    """The Grafana data source of the cluster's AMP workspace, signed with the Grafana workspace's IAM role."""
    return {
        "uid": DATASOURCE_UID,
        "name": "Amazon Managed Prometheus (fmcluster)",
        "type": "prometheus",
        "access": "proxy",
        "url": prometheus_url.rstrip("/"),
        "isDefault": True,
        "jsonData": {"httpMethod": "POST", "sigV4Auth": True, "sigV4AuthType": "ec2_iam_role", "sigV4Region": region},
    }


def dashboards(texts: dict[str, str]) -> list[dict]:
    """The dashboards to upload, parsed and checked: each needs a uid and a title."""
    if not isinstance(texts, dict) or not texts:
        raise ValueError("Dashboards must map file names to dashboard JSON; got none")
    parsed = []
    for name, text in sorted(texts.items()):
        try:
            dashboard = json.loads(text)
        except (TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"dashboard {name} is not JSON: {error}") from None
        if not isinstance(dashboard, dict) or not dashboard.get("uid") or not dashboard.get("title"):
            raise ValueError(f"dashboard {name} needs a uid and a title")
        parsed.append(dashboard)
    return parsed


class Grafana:
    """A minimal client of Grafana's HTTP API (urllib only: the Lambda runtime has no requests)."""

    def __init__(self, base_url: str, token: str, timeout: float = 20.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: dict | None = None, *, missing_ok: bool = False) -> dict | None:
        """The JSON answer; None for 404 when `missing_ok`; GrafanaError for any other error status."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            if error.code == 404 and missing_ok:
                return None
            detail = error.read().decode(errors="replace")[:500]
            raise GrafanaError(f"Grafana {method} {path} answered {error.code}: {detail}") from None
        return json.loads(payload) if payload else {}


def provision(api: Grafana, prometheus_url: str, region: str, boards: list[dict]) -> list[str]:
    """Folder, data source and dashboards in place; the uids of the dashboards."""
    if api.call("GET", f"/api/folders/{FOLDER_UID}", missing_ok=True) is None:
        api.call("POST", "/api/folders", {"uid": FOLDER_UID, "title": "fmcluster"})
    source = datasource(prometheus_url, region)
    if api.call("GET", f"/api/datasources/uid/{DATASOURCE_UID}", missing_ok=True) is None:
        api.call("POST", "/api/datasources", source)
    else:
        api.call("PUT", f"/api/datasources/uid/{DATASOURCE_UID}", source)
    uids = []
    for board in boards:
        body = {"dashboard": {**board, "id": None}, "folderUid": FOLDER_UID, "overwrite": True, "message": "fmcluster"}
        api.call("POST", "/api/dashboards/db", body)
        uids.append(board["uid"])
    return uids


def remove(api: Grafana, uids: list[str]) -> None:
    for uid in uids:
        api.call("DELETE", f"/api/dashboards/uid/{uid}", missing_ok=True)
    api.call("DELETE", f"/api/datasources/uid/{DATASOURCE_UID}", missing_ok=True)


def service_account_token(client, workspace_id: str) -> tuple[str, str, str]:
    """(service account id, token id, token key) of a fresh short-lived ADMIN token."""
    kwargs = {"workspaceId": workspace_id}
    while True:
        page = client.list_workspace_service_accounts(**kwargs)
        account_id = next((a["id"] for a in page["serviceAccounts"] if a["name"] == SERVICE_ACCOUNT), None)
        if account_id is not None or not page.get("nextToken"):
            break
        kwargs["nextToken"] = page["nextToken"]
    if account_id is None:
        account_id = client.create_workspace_service_account(
            workspaceId=workspace_id, name=SERVICE_ACCOUNT, grafanaRole="ADMIN"
        )["id"]
    token = client.create_workspace_service_account_token(
        workspaceId=workspace_id,
        serviceAccountId=account_id,
        name=f"fmcluster-{uuid.uuid4().hex[:12]}",
        secondsToLive=TOKEN_SECONDS,
    )["serviceAccountToken"]
    return account_id, token["id"], token["key"]


def on_event(event: dict, context: object, grafana=None, base_url: str | None = None) -> dict:
    """CDK Provider framework entry point. `grafana` (a boto3 client) and `base_url` are for tests."""
    request = event.get("RequestType")
    if request not in ("Create", "Update", "Delete"):
        raise ValueError(f"RequestType must be Create, Update or Delete; got {request!r}")
    properties = event.get("ResourceProperties") or {}
    missing = [key for key in REQUIRED if not properties.get(key)]
    if missing:
        raise ValueError(f"missing resource properties: {', '.join(missing)}")
    workspace_id = properties["WorkspaceId"]
    physical_id = f"{workspace_id}/fmcluster-dashboards"
    boards = dashboards(properties["Dashboards"])
    client = grafana or boto3.client("grafana")
    try:
        account_id, token_id, key = service_account_token(client, workspace_id)
    except client.exceptions.ResourceNotFoundException:
        if request == "Delete":
            LOG.info(json.dumps({"event": "workspace gone", "workspace": workspace_id}))
            return {"PhysicalResourceId": event.get("PhysicalResourceId", physical_id)}
        raise
    api = Grafana(base_url or f"https://{properties['Endpoint']}", key)
    try:
        if request == "Delete":
            remove(api, [board["uid"] for board in boards])
            LOG.info(json.dumps({"event": "removed", "workspace": workspace_id}))
            return {"PhysicalResourceId": event.get("PhysicalResourceId", physical_id)}
        uids = provision(api, properties["PrometheusUrl"], properties["Region"], boards)
        LOG.info(json.dumps({"event": "provisioned", "workspace": workspace_id, "dashboards": uids}))
        return {"PhysicalResourceId": physical_id, "Data": {"Dashboards": ",".join(uids)}}
    finally:
        client.delete_workspace_service_account_token(
            workspaceId=workspace_id, serviceAccountId=account_id, tokenId=token_id
        )
