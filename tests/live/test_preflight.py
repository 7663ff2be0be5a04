"""The whole preflight and `fmcluster validate --live`: all problems in one run, denied calls, no credentials."""

from __future__ import annotations

import functools
import socket
import threading
import time
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from fmcluster import cli, live
from fmcluster.config import Problem
from fmcluster.live.runner import Check, run_checks
from tests.live.conftest import PCS_BLOCK, QUICKSTART, config_of
from tests.live.responses import (
    ACCOUNT,
    BLOCK,
    NOW,
    RESERVATION,
    addresses,
    bootstrap_stack,
    capacity_block_status,
    capacity_reservation,
    identity,
    instance_types,
    instances,
    nat_gateways,
    offerings,
    own_instances_query,
    quota,
    quotas,
    vpcs,
)


def queue_account(
    stub, reservation: dict | None, *, account: str = ACCOUNT, deny: bool = False, own: tuple[str, ...] | None = None
) -> None:
    """Every call the PCS capacity-block file makes, in call order per service (checks run one at a time);
    with `deny`, the reservation and bootstrap calls are refused as EC2 and CloudFormation refuse them; `own`: the
    cluster's own instances in the reservation, when the reservation has fewer free than the file needs. The file
    has no login node and managed Prometheus, so PCS gets a head node group of its own (m5.xlarge): its offering and
    its On-Demand Standard vCPU quota are checked too."""
    stub.ok("sts", "GetCallerIdentity", identity(account), {})
    ask = {"CapacityReservationIds": [RESERVATION]}
    if deny:
        message = "You are not authorized to perform this operation."
        stub.error("ec2", "DescribeCapacityReservations", "UnauthorizedOperation", message, status=403, params=ask)
    else:
        stub.ok("ec2", "DescribeCapacityReservations", reservation, ask)
        total = reservation["CapacityReservations"][0]["TotalInstanceCount"]
        stub.ok("ec2", "DescribeCapacityBlockStatus", capacity_block_status(total=total), {"CapacityBlockIds": [BLOCK]})
    if own is not None:
        tags = {"fmcluster:cluster": "llm-pretrain"}
        stub.ok("ec2", "DescribeInstances", instances(*own, reservation=RESERVATION, tags=tags),
                own_instances_query(RESERVATION, "llm-pretrain"))  # fmt: skip
    stub.ok("ec2", "DescribeInstanceTypeOfferings", offerings("use1-az6", "m5.xlarge"), {
        "LocationType": "availability-zone-id",
        "Filters": [{"Name": "location", "Values": ["use1-az6"]}, {"Name": "instance-type", "Values": ["m5.xlarge"]}],
    })  # fmt: skip
    both = ["m5.xlarge", "p5.48xlarge"]  # read once for every type (quotas, image), reserved or not
    stub.ok("ec2", "DescribeInstanceTypes", instance_types(*both), {"InstanceTypes": both})
    standard = quota("ec2", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "L-1216C47A", 640.0)
    stub.ok("service-quotas", "ListServiceQuotas", quotas(standard), {"ServiceCode": "ec2"})
    fsx = quota("fsx", "Lustre Persistent_2 storage capacity", "L-8F1B9C74", 100800.0)
    stub.ok("service-quotas", "ListServiceQuotas", quotas(fsx), {"ServiceCode": "fsx"})
    stub.ok("ec2", "DescribeVpcs", vpcs(1), {})
    vpc = quota("vpc", "VPCs per Region", "L-F678F1CE", 5.0)
    stub.ok("service-quotas", "ListServiceQuotas", quotas(vpc), {"ServiceCode": "vpc"})
    # the node image drift check: the cluster is not deployed yet (CloudFormation: ValidationError "does not exist")
    missing = "Stack with id llm-pretrain-cluster does not exist"
    stub.error("cloudformation", "DescribeStackResources", "ValidationError", missing,
               params={"StackName": "llm-pretrain-cluster"})  # fmt: skip
    if deny:
        stub.denied("cloudformation", "DescribeStacks", {"StackName": "CDKToolkit"})
    else:
        stub.ok("cloudformation", "DescribeStacks", bootstrap_stack(), {"StackName": "CDKToolkit"})


WRONG_EVERYTHING = capacity_reservation(
    instance_type="p5e.48xlarge", az_id="use1-az4", az="us-east-1d", total=8, available=8
)
THREE_PROBLEMS = [
    "cluster.yaml: compute[0].reservation_id: note: capacity block cr-0123456789abcdef0 is active: started "
    "2026-11-30 08:00 UTC, ends 2026-12-14 10:00 UTC (in 14 days 0 h)",
    "cluster.yaml: compute[0].instance_type: cr-0123456789abcdef0 holds p5e.48xlarge, not p5.48xlarge; set "
    "instance_type: p5e.48xlarge or use a reservation for p5.48xlarge",
    "cluster.yaml: availability_zone_id: capacity block cr-0123456789abcdef0 is in use1-az4 (us-east-1d), not "
    "use1-az6; instances launch into it only from a subnet in its zone: set availability_zone_id: use1-az4",
    "cluster.yaml: compute[0].count: group gpu needs 16 instance(s), but capacity block cr-0123456789abcdef0 has 8 "
    "of 8 available",
]


def test_a_reservation_in_another_zone_too_small_and_of_another_type_in_one_run(stubs):
    stub = stubs()
    queue_account(stub, WRONG_EVERYTHING, own=())
    problems = live.preflight(config_of(PCS_BLOCK), stub.aws(), now=NOW, workers=1)
    assert [p.render("cluster.yaml") for p in problems] == THREE_PROBLEMS
    assert sum(live.is_error(p) for p in problems) == 3


def test_credentials_of_another_account(stubs):
    stub = stubs()
    queue_account(stub, capacity_reservation(), account="210987654321")
    problems = live.preflight(config_of(PCS_BLOCK), stub.aws(), now=NOW, workers=1)
    assert problems[0].render("cluster.yaml") == (
        "cluster.yaml: account: the credentials are for account 210987654321, not 123456789012; use credentials of "
        "123456789012 (AWS_PROFILE)"
    )


def test_a_denied_call_becomes_a_warning_naming_the_action_and_the_rest_still_runs(stubs):
    stub = stubs()
    queue_account(stub, None, deny=True)
    problems = live.preflight(config_of(PCS_BLOCK), stub.aws(), now=NOW, workers=1)
    assert [p.render("cluster.yaml") for p in problems] == [
        "cluster.yaml: compute[0].reservation_id: not checked: capacity reservation cr-0123456789abcdef0: access "
        "denied to ec2:DescribeCapacityReservations (the read-only policy in fmcluster's README grants it)",
        "cluster.yaml: region: not checked: CDK bootstrap stack CDKToolkit: access denied to "
        "cloudformation:DescribeStacks (the read-only policy in fmcluster's README grants it)",
    ]
    assert not any(live.is_error(p) for p in problems)
    assert all(live.is_unchecked(p) for p in problems)


def test_cli_with_checks_that_did_not_run_never_says_ready_and_exits_1(stubs, tmp_path, monkeypatch, capsys):
    stub = stubs()
    queue_account(stub, None, deny=True)
    monkeypatch.setattr(live, "Aws", lambda region: stub.aws())
    monkeypatch.setattr(live, "preflight", functools.partial(live.preflight, now=NOW, workers=1))
    path = write(tmp_path, PCS_BLOCK)
    assert cli.main(["validate", path, "--live"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "is ready" not in err
    assert err.splitlines()[-1] == (
        f"{path}: valid, but 2 live check(s) did not run (above), so the account in us-east-1 is not known to be "
        "ready for it"
    )


def test_cli_on_a_deployed_clusters_file_with_its_own_instances_in_the_block_exits_0(
    stubs, tmp_path, monkeypatch, capsys
):
    """The deployed cluster's 16 nodes use the block up (0 of 16 available); they are found by the block's id and
    the cluster's tag (DescribeInstances filters capacity-reservation-id and tag:fmcluster:cluster), so a re-check
    of the same file passes."""
    stub = stubs()
    deployed = tuple(f"i-0{index:016x}" for index in range(16))
    queue_account(stub, capacity_reservation(total=16, available=0), own=deployed)
    monkeypatch.setattr(live, "Aws", lambda region: stub.aws())
    monkeypatch.setattr(live, "preflight", functools.partial(live.preflight, now=NOW, workers=1))
    path = write(tmp_path, PCS_BLOCK)
    assert cli.main(["validate", path, "--live"]) == 0
    out, _ = capsys.readouterr()
    assert out == (
        f"{path}: valid, and every live check ran: the account in us-east-1 is ready for it (1 note(s) or warning(s))\n"
    )


def test_expired_credentials_stop_the_run(stubs):
    stub = stubs()
    stub.error(
        "sts",
        "GetCallerIdentity",
        "ExpiredToken",
        "The security token included in the request is expired",
        status=403,
        params={},
    )
    with pytest.raises(live.NoCredentials, match=r"^AWS rejected the credentials: ExpiredToken: The security token"):
        live.preflight(config_of(PCS_BLOCK), stub.aws(), now=NOW, workers=1)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return str(path)


def test_cli_without_credentials_prints_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(name, raising=False)
    path = write(tmp_path, PCS_BLOCK)
    assert cli.main(["validate", path, "--live"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{path}: --live: no AWS credentials found (Unable to locate credentials); set AWS_PROFILE or run "
        "`aws configure`"
    ]


def test_cli_reports_every_problem_and_exits_2(stubs, tmp_path, monkeypatch, capsys):
    stub = stubs()
    queue_account(stub, WRONG_EVERYTHING, own=())
    monkeypatch.setattr(live, "Aws", lambda region: stub.aws())
    monkeypatch.setattr(live, "preflight", functools.partial(live.preflight, now=NOW, workers=1))
    path = write(tmp_path, PCS_BLOCK)
    assert cli.main(["validate", path, "--live"]) == 2
    _out, err = capsys.readouterr()
    assert err.splitlines() == [line.replace("cluster.yaml", path, 1) for line in THREE_PROBLEMS]


def test_cli_ready_account_exits_0(stubs, tmp_path, monkeypatch, capsys):
    stub = stubs()
    queue_account(stub, capacity_reservation())
    monkeypatch.setattr(live, "Aws", lambda region: stub.aws())
    monkeypatch.setattr(live, "preflight", functools.partial(live.preflight, now=NOW, workers=1))
    path = write(tmp_path, PCS_BLOCK)
    assert cli.main(["validate", path, "--live"]) == 0
    out, _ = capsys.readouterr()
    assert out == (
        f"{path}: valid, and every live check ran: the account in us-east-1 is ready for it (1 note(s) or warning(s))\n"
    )


def test_checks_run_concurrently_and_report_in_their_own_order():
    started = threading.Barrier(3, timeout=5)  # three checks must be running at once to pass the barrier

    def slow(name: str, delay: float):
        def run():
            started.wait()
            time.sleep(delay)
            return [Problem(name, "note: done")]

        return run

    checks = [Check("a", "a", slow("a", 0.2)), Check("b", "b", slow("b", 0.0)), Check("c", "c", slow("c", 0.1))]
    assert [p.path for p in run_checks(checks, console=None, workers=3)] == ["a", "b", "c"]


def test_a_ready_hyperpod_account_passes_every_check(stubs):
    """The quickstart (HyperPod, NAT egress): offerings, HyperPod quotas, FSx, VPC, NAT and EIP headroom, bootstrap."""
    stub = stubs()
    stub.ok("sts", "GetCallerIdentity", identity(), {})
    stub.ok(
        "ec2",
        "DescribeInstanceTypeOfferings",
        offerings("use1-az6", "m5.4xlarge", "p5.48xlarge"),
        {
            "LocationType": "availability-zone-id",
            "Filters": [
                {"Name": "location", "Values": ["use1-az6"]},
                {"Name": "instance-type", "Values": ["m5.4xlarge", "p5.48xlarge"]},
            ],
        },
    )
    sagemaker = quotas(
        quota("sagemaker", "ml.m5.4xlarge for cluster usage", "L-0A1B2C01", 4.0),
        quota("sagemaker", "ml.p5.48xlarge for cluster usage", "L-A9F29A4E", 4.0),
        quota("sagemaker", "Total number of instances allowed across SageMaker HyperPod clusters", "L-3308CCC7", 100.0),
        quota("sagemaker", "Maximum number instances allowed per SageMaker HyperPod cluster", "L-2CE978FC", 20.0),
    )
    stub.ok("service-quotas", "ListServiceQuotas", sagemaker, {"ServiceCode": "sagemaker"})
    fsx = quota("fsx", "Lustre Persistent_2 storage capacity", "L-8F1B9C74", 100800.0)
    stub.ok("service-quotas", "ListServiceQuotas", quotas(fsx), {"ServiceCode": "fsx"})
    stub.ok("ec2", "DescribeVpcs", vpcs(1), {})
    vpc = quotas(
        quota("vpc", "VPCs per Region", "L-F678F1CE", 5.0),
        quota("vpc", "NAT gateways per Availability Zone", "L-FE5A380F", 5.0),
    )
    stub.ok("service-quotas", "ListServiceQuotas", vpc, {"ServiceCode": "vpc"})
    stub.ok(
        "ec2",
        "DescribeNatGateways",
        nat_gateways(),
        {"Filter": [{"Name": "state", "Values": ["pending", "available"]}]},
    )
    stub.ok("ec2", "DescribeAddresses", addresses(1), {})
    eips = quotas(quota("ec2", "EC2-VPC Elastic IPs", "L-0263D0A3", 5.0))
    stub.ok("service-quotas", "ListServiceQuotas", eips, {"ServiceCode": "ec2"})
    stub.ok("cloudformation", "DescribeStacks", bootstrap_stack(), {"StackName": "CDKToolkit"})
    assert live.preflight(config_of(QUICKSTART), stub.aws(), now=NOW, workers=1) == []


def test_the_progress_display_runs_on_a_terminal():
    from io import StringIO

    from rich.console import Console

    screen = StringIO()
    checks = [Check("one", "x", lambda: [Problem("x", "note: 1")])]
    assert run_checks(checks, console=Console(file=screen, force_terminal=True, width=100)) == [Problem("x", "note: 1")]
    assert "checked one" in screen.getvalue() or "checking the account" in screen.getvalue()


def test_cli_with_an_unknown_profile_prints_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    # A mistyped AWS_PROFILE: botocore raises ProfileNotFound when the client is made, before any call.
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    path = write(tmp_path, PCS_BLOCK)
    assert cli.main(["validate", path, "--live"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{path}: --live: The config profile (no-such-profile) could not be found; check AWS_PROFILE "
        "(aws configure list-profiles)"
    ]


def test_aws_out_of_reach_stops_the_run_with_one_reason():
    # No network (or a dead proxy): botocore's EndpointConnectionError, a ConnectionError, on the first call.
    # Emulated with a local port nothing listens on; nothing leaves the machine.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    sts = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        "sts", region_name="us-east-1", endpoint_url=endpoint, config=Config(retries={"max_attempts": 1})
    )
    aws = live.Aws("us-east-1", clients={"sts": sts})
    with pytest.raises(live.NoCredentials) as stopped:
        live.preflight(config_of(PCS_BLOCK), aws, now=NOW, workers=1)
    assert (
        str(stopped.value)
        == f'could not reach AWS STS in us-east-1: Could not connect to the endpoint URL: "{endpoint}/"'
    )
