"""The README's IAM policy allows exactly the actions the live checks' calls need (fmcluster.live.aws.ACTIONS)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fmcluster.live.aws import ACTIONS, CONNECT_ACTIONS, DIAGNOSE_ACTIONS, INFO_ACTIONS, PLAN_ACTIONS, PREFLIGHT_ACTIONS

README = Path(__file__).resolve().parents[2] / "README.md"
FIRST_JOB = README.with_name("docs") / "first-job.md"


def policy_actions(sid: str, document: Path = README) -> set[str]:
    for block in re.findall(r"```json\n(.*?)```", document.read_text(), flags=re.S):
        policy = json.loads(block)
        for statement in policy.get("Statement", []):
            if statement.get("Sid") == sid:
                assert statement["Effect"] == "Allow" and statement["Resource"] == "*"
                return set(statement["Action"])
    raise AssertionError(f"no policy statement {sid} in {document.name}")


def test_the_validate_live_policy_is_exactly_what_the_calls_need():
    assert policy_actions("FmclusterValidateLive") == set(PREFLIGHT_ACTIONS.values())


def test_the_plan_live_policy_is_exactly_what_the_calls_need():
    assert policy_actions("FmclusterPlanLive") == set(PLAN_ACTIONS.values())


def test_the_diagnose_policy_is_exactly_what_the_calls_need():
    assert policy_actions("FmclusterDiagnose") == set(DIAGNOSE_ACTIONS.values())


def test_the_info_and_connect_policy_is_exactly_what_the_calls_need():
    assert policy_actions("FmclusterConnect", FIRST_JOB) == set(CONNECT_ACTIONS.values())
    assert {"cloudformation:DescribeStacks", "sagemaker:ListClusterNodes", "ec2:DescribeInstances",
            "ec2:DescribeCapacityReservations", "sagemaker:DescribeTrainingPlan"} == set(
        INFO_ACTIONS.values()
    )  # the doc says info needs these five  # fmt: skip


def test_every_action_but_opening_and_closing_a_session_and_starting_health_checks_is_read_only():
    sessions = {"ssm:StartSession", "ssm:TerminateSession", "sagemaker:StartClusterHealthCheck"}
    assert sessions - {"sagemaker:StartClusterHealthCheck"} <= set(CONNECT_ACTIONS.values())
    verbs = {action.split(":", 1)[1] for action in ACTIONS.values() if action not in sessions}
    assert all(re.match(r"^(Describe|Get|List|BatchGet)", verb) for verb in verbs), verbs
