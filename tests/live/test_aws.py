"""The shared AWS layer: botocore's paginators, the throttle, the client-side pace of per-node calls."""

from __future__ import annotations

import time

import pytest

from fmcluster.live.aws import THROTTLE_CODES, RateLimit, Throttled
from tests.live.responses import alarms


def test_pages_follow_botocores_paginator_across_pages(stubs):
    """CloudWatch DescribeAlarms pages with NextToken (botocore's cloudwatch paginators-1); a name list of up to 100
    can answer in more than one page, which one call used to cut short."""
    stub = stubs()
    names = ["a-1", "a-2"]
    first = {**alarms(("a-1", "OK")), "NextToken": "page-2"}
    stub.ok("cloudwatch", "DescribeAlarms", first, {"AlarmNames": names})
    stub.ok("cloudwatch", "DescribeAlarms", alarms(("a-2", "ALARM")), {"AlarmNames": names, "NextToken": "page-2"})
    found = list(stub.aws().pages("cloudwatch", "DescribeAlarms", "MetricAlarms", AlarmNames=names))
    assert [alarm["AlarmName"] for alarm in found] == names


def test_a_call_still_throttled_after_the_retries_names_the_action():
    assert {"RequestLimitExceeded", "ThrottlingException", "Throttling"} <= THROTTLE_CODES  # botocore's own list


def test_throttled_is_raised_with_the_action(stubs):
    stub = stubs()
    stub.error("ec2", "GetConsoleOutput", "RequestLimitExceeded", "Request limit exceeded.", status=503)
    with pytest.raises(Throttled) as raised:
        stub.aws().call("ec2", "GetConsoleOutput", InstanceId="i-0123456789abcdef0", Latest=True)
    assert (raised.value.action, raised.value.code) == ("ec2:GetConsoleOutput", "RequestLimitExceeded")


def test_the_rate_limit_paces_calls():
    limit = RateLimit(50.0)
    started = time.monotonic()
    for _ in range(11):
        limit.wait()
    assert time.monotonic() - started >= 0.19  # 10 intervals of 20 ms after the first call
