"""The caller's AWS session for read-only checks: clients, the IAM action behind each call, and how failures read.

Every call goes through `Aws.call`, which knows the IAM action it needs (`ACTIONS`, also the README's policy),
turns "access denied" into `Denied(action)` and "no usable credentials" into `NoCredentials`.

>>> Aws.action("ec2", "DescribeCapacityReservations")
'ec2:DescribeCapacityReservations'
>>> Aws.action("s3", "HeadBucket")
's3:ListBucket'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import boto3
import botocore.session
from botocore import xform_name
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
)

PREFLIGHT_ACTIONS: dict[tuple[str, str], str] = {
    ("sts", "GetCallerIdentity"): "sts:GetCallerIdentity",
    ("ec2", "DescribeCapacityReservations"): "ec2:DescribeCapacityReservations",
    ("ec2", "DescribeInstanceTypeOfferings"): "ec2:DescribeInstanceTypeOfferings",
    ("ec2", "DescribeInstanceTypes"): "ec2:DescribeInstanceTypes",
    ("ec2", "DescribeImages"): "ec2:DescribeImages",
    ("ec2", "DescribeVpcs"): "ec2:DescribeVpcs",
    ("ec2", "DescribeAddresses"): "ec2:DescribeAddresses",
    ("ec2", "DescribeNatGateways"): "ec2:DescribeNatGateways",
    ("ec2", "DescribeSubnets"): "ec2:DescribeSubnets",
    ("sagemaker", "DescribeTrainingPlan"): "sagemaker:DescribeTrainingPlan",
    ("service-quotas", "ListServiceQuotas"): "servicequotas:ListServiceQuotas",
    ("service-quotas", "ListAWSDefaultServiceQuotas"): "servicequotas:ListAWSDefaultServiceQuotas",
    # S3 authorizes some operations under an action of another name (S3 user guide, "Policy actions for S3").
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "GetBucketEncryption"): "s3:GetEncryptionConfiguration",
    ("cloudformation", "DescribeStacks"): "cloudformation:DescribeStacks",
}
"""(boto3 service, API operation) -> the IAM action that authorizes it: every call `validate --live` makes."""

DIAGNOSE_ACTIONS: dict[tuple[str, str], str] = {
    ("sts", "GetCallerIdentity"): "sts:GetCallerIdentity",
    ("cloudformation", "DescribeStacks"): "cloudformation:DescribeStacks",
    ("cloudformation", "DescribeStackEvents"): "cloudformation:DescribeStackEvents",
    ("sagemaker", "DescribeCluster"): "sagemaker:DescribeCluster",
    ("sagemaker", "ListClusterNodes"): "sagemaker:ListClusterNodes",
    ("logs", "GetLogEvents"): "logs:GetLogEvents",
    ("pcs", "GetCluster"): "pcs:GetCluster",
    ("pcs", "ListComputeNodeGroups"): "pcs:ListComputeNodeGroups",
    ("pcs", "GetComputeNodeGroup"): "pcs:GetComputeNodeGroup",
    ("ec2", "DescribeInstances"): "ec2:DescribeInstances",
    ("ec2", "GetConsoleOutput"): "ec2:GetConsoleOutput",
    ("cloudformation", "ListStackResources"): "cloudformation:ListStackResources",
    ("codebuild", "ListBuildsForProject"): "codebuild:ListBuildsForProject",
    ("codebuild", "BatchGetBuilds"): "codebuild:BatchGetBuilds",
    ("cloudwatch", "ListMetrics"): "cloudwatch:ListMetrics",
    ("cloudwatch", "GetMetricStatistics"): "cloudwatch:GetMetricStatistics",
    ("cloudwatch", "DescribeAlarms"): "cloudwatch:DescribeAlarms",
}
"""Every call `fmcluster diagnose` makes."""

INFO_ACTIONS: dict[tuple[str, str], str] = {
    ("cloudformation", "DescribeStacks"): "cloudformation:DescribeStacks",
    ("sagemaker", "ListClusterNodes"): "sagemaker:ListClusterNodes",
    ("ec2", "DescribeInstances"): "ec2:DescribeInstances",
}
"""Every call `fmcluster info` makes (read-only, like diagnose's)."""

CONNECT_ACTIONS: dict[tuple[str, str], str] = {
    **INFO_ACTIONS,
    ("pcs", "GetComputeNodeGroup"): "pcs:GetComputeNodeGroup",
    ("ssm", "StartSession"): "ssm:StartSession",
    ("ssm", "TerminateSession"): "ssm:TerminateSession",
}
"""Every call `fmcluster connect` makes: finding the node (read-only), then opening (or, when the plugin cannot start,
closing) the session, which is not read-only."""

ACTIONS = {**PREFLIGHT_ACTIONS, **DIAGNOSE_ACTIONS, **CONNECT_ACTIONS}

DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "403", "Forbidden"})
"""Error codes of a call the caller's policy refuses: EC2 answers UnauthorizedOperation (EC2 API reference, error
codes), JSON services AccessDeniedException (their botocore models), S3 a bare 403 to HEAD requests."""

CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
    }
)
"""Error codes that mean the credentials themselves are unusable (STS API reference, common errors)."""

RETRIES = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=10, read_timeout=30)


class Denied(Exception):
    """The caller's policy does not allow `action`."""

    def __init__(self, action: str):
        super().__init__(action)
        self.action = action


class NoCredentials(Exception):
    """No usable credentials (none found, an unknown profile, incomplete, expired or rejected), or AWS could not be
    reached to check them. The message is one line for the user."""


class Aws:
    """Clients for one region from one session; `call` runs one API operation and names the IAM action it needs.

    `clients` maps a boto3 service name to a ready client (tests pass botocore-stubbed ones); otherwise clients
    come from `session` (default: boto3's usual chain of profile, environment, SSO, ...).
    """

    def __init__(self, region: str, *, session: boto3.Session | None = None, clients: dict[str, Any] | None = None):
        self.region = region
        self._session = session
        self._clients: dict[str, Any] = dict(clients or {})
        self._lock = threading.Lock()

    @staticmethod
    def action(service: str, operation: str) -> str:
        return ACTIONS[(service, operation)]

    def account(self) -> str:
        """The caller's account id: the first call of a run, which stops it (`NoCredentials`) when AWS cannot be
        reached at all, rather than letting every check fail alike."""
        try:
            return self.call("sts", "GetCallerIdentity")["Account"]
        except ConnectionError as error:
            raise NoCredentials(f"could not reach AWS STS in {self.region}: {error}") from None

    def client(self, service: str) -> Any:
        # boto3 sessions are not thread-safe; clients are. Create each client once, under a lock.
        with self._lock:
            if service not in self._clients:
                session = self._session or boto3.Session()
                self._session = session
                self._clients[service] = session.client(service, region_name=self.region, config=RETRIES)
            return self._clients[service]

    def call(self, service: str, operation: str, **params: Any) -> dict[str, Any]:
        """One API call: the parsed response, or `Denied`/`NoCredentials`; other client errors pass through."""
        action = self.action(service, operation)
        try:
            method: Callable[..., dict[str, Any]] = getattr(self.client(service), xform_name(operation))
            return method(**params)
        except ProfileNotFound as error:
            raise NoCredentials(f"{error}; check AWS_PROFILE (aws configure list-profiles)") from None
        except (NoCredentialsError, PartialCredentialsError) as error:
            raise NoCredentials(f"no AWS credentials found ({error}); set AWS_PROFILE or run `aws configure`") from None
        except ClientError as error:
            code = error_code(error)
            if code in CREDENTIAL_CODES:
                raise NoCredentials(f"AWS rejected the credentials: {code}: {error_message(error)}") from None
            if code in DENIED_CODES:
                raise Denied(action) from None
            raise
        except (SSOError, TokenRetrievalError, CredentialRetrievalError) as error:
            raise NoCredentials(f"AWS credentials could not be loaded: {error}") from None

    def pages(self, service: str, operation: str, key: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every item under `key` across the pages of a paginated operation.

        The token's name comes from botocore's paginator model: most APIs use NextToken, PCS, CodeBuild and
        CloudWatch Logs use nextToken; reading one name for all would silently stop after the first page."""
        input_token, output_token = page_tokens(service, operation)
        while True:
            page = self.call(service, operation, **params)
            yield from page.get(key, [])
            token = page.get(output_token)
            if not token:
                return
            params = {**params, input_token: token}


@cache
def page_tokens(service: str, operation: str) -> tuple[str, str]:
    """(request token, response token) of a paginated operation, from botocore's paginators-1 data.

    >>> page_tokens("pcs", "ListComputeNodeGroups"), page_tokens("cloudformation", "DescribeStackEvents")
    (('nextToken', 'nextToken'), ('NextToken', 'NextToken'))
    """
    config = botocore.session.get_session().get_paginator_model(service).get_paginator(operation)
    return config["input_token"], config["output_token"]


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", "")).strip()
