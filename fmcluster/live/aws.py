"""The caller's AWS session for read-only checks: clients, the IAM action behind each call, and how failures read.

Every call goes through `Aws.call` (or `Aws.pages`, botocore's paginator), which knows the IAM action it needs
(`ACTIONS`, also the README's policy), turns "access denied" into `Denied(action)`, a call still throttled after
botocore's retries into `Throttled(action, code)` and "no usable credentials" into `NoCredentials`.

>>> Aws.action("ec2", "DescribeCapacityReservations")
'ec2:DescribeCapacityReservations'
>>> Aws.action("s3", "HeadBucket")
's3:ListBucket'
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
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
    StubResponseError,
    TokenRetrievalError,
)
from botocore.retries.standard import ThrottledRetryableChecker

PREFLIGHT_ACTIONS: dict[tuple[str, str], str] = {
    ("sts", "GetCallerIdentity"): "sts:GetCallerIdentity",
    ("ec2", "DescribeCapacityReservations"): "ec2:DescribeCapacityReservations",
    ("ec2", "DescribeCapacityBlockStatus"): "ec2:DescribeCapacityBlockStatus",
    ("ec2", "DescribeInstanceTypeOfferings"): "ec2:DescribeInstanceTypeOfferings",
    ("ec2", "DescribeInstanceTypes"): "ec2:DescribeInstanceTypes",
    ("ec2", "DescribeImages"): "ec2:DescribeImages",
    ("ec2", "DescribeInstances"): "ec2:DescribeInstances",
    ("ec2", "DescribePlacementGroups"): "ec2:DescribePlacementGroups",
    ("ec2", "DescribeVpcs"): "ec2:DescribeVpcs",
    ("ec2", "DescribeVpcAttribute"): "ec2:DescribeVpcAttribute",
    ("ec2", "DescribeAddresses"): "ec2:DescribeAddresses",
    ("ec2", "DescribeNatGateways"): "ec2:DescribeNatGateways",
    ("ec2", "DescribeSubnets"): "ec2:DescribeSubnets",
    ("ec2", "DescribeRouteTables"): "ec2:DescribeRouteTables",
    ("ec2", "DescribeVpcEndpoints"): "ec2:DescribeVpcEndpoints",
    ("ec2", "DescribeSecurityGroups"): "ec2:DescribeSecurityGroups",
    ("ec2", "DescribeNetworkInterfaces"): "ec2:DescribeNetworkInterfaces",
    ("fsx", "DescribeFileSystems"): "fsx:DescribeFileSystems",
    ("sagemaker", "DescribeTrainingPlan"): "sagemaker:DescribeTrainingPlan",
    ("service-quotas", "ListServiceQuotas"): "servicequotas:ListServiceQuotas",
    ("service-quotas", "ListAWSDefaultServiceQuotas"): "servicequotas:ListAWSDefaultServiceQuotas",
    # S3 authorizes some operations under an action of another name (S3 user guide, "Policy actions for S3").
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "GetBucketEncryption"): "s3:GetEncryptionConfiguration",
    ("cloudformation", "DescribeStacks"): "cloudformation:DescribeStacks",
    ("cloudformation", "DescribeStackResources"): "cloudformation:DescribeStackResources",
    ("ssm", "GetParameter"): "ssm:GetParameter",
}
"""(boto3 service, API operation) -> the IAM action that authorizes it: every call `validate --live` makes."""

DIAGNOSE_ACTIONS: dict[tuple[str, str], str] = {
    ("sts", "GetCallerIdentity"): "sts:GetCallerIdentity",
    ("cloudformation", "DescribeStacks"): "cloudformation:DescribeStacks",
    ("cloudformation", "DescribeStackEvents"): "cloudformation:DescribeStackEvents",
    ("sagemaker", "DescribeCluster"): "sagemaker:DescribeCluster",
    ("sagemaker", "ListClusterNodes"): "sagemaker:ListClusterNodes",
    ("sagemaker", "ListClusterEvents"): "sagemaker:ListClusterEvents",
    ("sagemaker", "DescribeClusterEvent"): "sagemaker:DescribeClusterEvent",
    ("sagemaker", "ListClusterOperations"): "sagemaker:ListClusterOperations",
    ("sagemaker", "DescribeClusterOperation"): "sagemaker:DescribeClusterOperation",
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
    ("ec2", "DescribeCapacityReservations"): "ec2:DescribeCapacityReservations",
    ("sagemaker", "DescribeTrainingPlan"): "sagemaker:DescribeTrainingPlan",
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

HEALTHCHECK_ACTIONS: dict[tuple[str, str], str] = {
    ("sagemaker", "StartClusterHealthCheck"): "sagemaker:StartClusterHealthCheck",
    ("sagemaker", "ListClusterNodes"): "sagemaker:ListClusterNodes",
}
"""Every call `fmcluster healthcheck` makes: starting the checks (not read-only) and reading the nodes' state."""

PLAN_ACTIONS: dict[tuple[str, str], str] = {("pricing", "GetProducts"): "pricing:GetProducts"}
"""Every call `fmcluster plan --live` makes (the Price List API; read-only)."""

ACTIONS = {**PREFLIGHT_ACTIONS, **DIAGNOSE_ACTIONS, **CONNECT_ACTIONS, **PLAN_ACTIONS, **HEALTHCHECK_ACTIONS}

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

THROTTLE_CODES = frozenset(ThrottledRetryableChecker._THROTTLED_ERROR_CODES)
"""Error codes of a throttled call: botocore's own list (botocore/retries/standard.py), which its standard retry mode
already retries with backoff; a call still throttled after the last attempt becomes `Throttled`."""

RETRIES = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=10, read_timeout=30)

RATE_LIMITS: dict[tuple[str, str], float] = {("ec2", "GetConsoleOutput"): 10.0, ("logs", "GetLogEvents"): 10.0}
"""Calls per second fmcluster allows itself for calls it makes once per node. EC2 API reference, "Request throttling":
each API has its own token bucket; a non-mutating action's holds 100 tokens refilled at 20 per second (the page's
DescribeHosts example; that GetConsoleOutput has those figures is unconfirmed). CloudWatch Logs' quota for
GetLogEvents is 25 per second per account and Region (unconfirmed: the figure was not found in AWS's page here).
Half the refill or less leaves room for other callers in the account, so a group of thousands of nodes is read at a
steady pace instead of being throttled; botocore's standard retries cover the rest."""


class Denied(Exception):
    """The caller's policy does not allow `action`."""

    def __init__(self, action: str):
        super().__init__(action)
        self.action = action


class Throttled(Exception):
    """AWS kept refusing `action` for its rate limit (`code`) after every retry."""

    def __init__(self, action: str, code: str):
        super().__init__(f"{action} throttled ({code})")
        self.action = action
        self.code = code


class NoCredentials(Exception):
    """No usable credentials (none found, an unknown profile, incomplete, expired or rejected), or AWS could not be
    reached to check them. The message is one line for the user."""


class Aws:
    """Clients for one region from one session; `call` runs one API operation and names the IAM action it needs.

    `clients` maps a boto3 service name to a ready client (tests pass botocore-stubbed ones); otherwise clients
    come from `session` (default: boto3's usual chain of profile, environment, SSO, ...). `rate_limits` replaces
    `RATE_LIMITS` (tests, whose stubs answer at once, pass {}).
    """

    def __init__(
        self,
        region: str,
        *,
        session: boto3.Session | None = None,
        clients: dict[str, Any] | None = None,
        rate_limits: dict[tuple[str, str], float] | None = None,
    ):
        self.region = region
        self._session = session
        self._clients: dict[str, Any] = dict(clients or {})
        self._lock = threading.Lock()
        limits = RATE_LIMITS if rate_limits is None else rate_limits
        self._limits = {key: RateLimit(rate) for key, rate in limits.items()}

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
        """One API call: the parsed response, or `Denied`/`Throttled`/`NoCredentials`; other client errors pass."""
        limit = self._limits.get((service, operation))
        if limit is not None:
            limit.wait()
        with self._translated(service, operation):
            method: Callable[..., dict[str, Any]] = getattr(self.client(service), xform_name(operation))
            return method(**params)

    def pages(self, service: str, operation: str, key: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every item under `key` across the pages of a paginated operation, read with botocore's paginator for it
        (its model knows each API's token names: NextToken, nextToken, Marker, ...)."""
        with self._translated(service, operation):
            paginator = self.client(service).get_paginator(xform_name(operation))
            for page in paginator.paginate(**params):
                yield from page.get(key, [])

    @contextmanager
    def _translated(self, service: str, operation: str) -> Iterator[None]:
        action = self.action(service, operation)
        try:
            yield
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
            if code in THROTTLE_CODES:
                raise Throttled(action, code) from None
            raise
        except StubResponseError as error:
            # botocore's Stubber (tests) reports a call it was not given as a BotoCoreError; it must fail the test,
            # never read as an AWS failure that a check reports and goes on from.
            raise AssertionError(str(error)) from None
        except (SSOError, TokenRetrievalError, CredentialRetrievalError) as error:
            raise NoCredentials(f"AWS credentials could not be loaded: {error}") from None


class RateLimit:
    """At most `per_second` calls a second across threads: each caller waits for its slot (a leaky bucket)."""

    def __init__(self, per_second: float):
        self._interval = 1.0 / per_second
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self._interval
        if slot > now:
            time.sleep(slot - now)


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", "")).strip()


SAGEMAKER_NOT_FOUND = re.compile(r"not found|does not exist|could not find", re.I)


def sagemaker_not_found(error: ClientError) -> bool:
    """SageMaker's "no such resource": `ResourceNotFound` as its model declares, or `ValidationException` with a
    not-found message, which its Describe APIs are known to answer (aws/aws-sdk issue 165 for DescribeTrainingJob;
    aws-controllers-k8s/community issue 431 quotes "Requested resource not found", "Could not find endpoint").
    Whether DescribeCluster and DescribeTrainingPlan answer so is unconfirmed: both forms are read.

    >>> from botocore.exceptions import ClientError
    >>> sagemaker_not_found(ClientError({"Error": {"Code": "ValidationException",
    ...     "Message": "Cluster demo not found"}}, "DescribeCluster"))
    True
    """
    code = error_code(error)
    if code in ("ResourceNotFound", "ResourceNotFoundException"):
        return True
    return code == "ValidationException" and SAGEMAKER_NOT_FOUND.search(error_message(error)) is not None
