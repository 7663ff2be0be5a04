"""Run independent live checks concurrently, with a progress display, and turn what stops a check into its own result.

A check is a function returning results (`Problem`s for validate, `Finding`s, which are Problems, for diagnose).
Their level says what they are: warnings and notes inform; `unchecked` says a check (or part of one) could not run,
with the reason: the IAM action refused, the call throttled, AWS's error. No error was found there, and nothing is
known either, so a run with one never reads as ready. Missing credentials stop the whole run.

>>> [p.text for p in run_checks([Check("two", "x", lambda: [note("x", "2")])], console=None)]
['note: 2']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from fmcluster.live.aws import Denied, Throttled, error_code, error_message
from fmcluster.problems import Problem, note  # noqa: F401  (note: the doctest)

STOPPED = (Denied, Throttled, ClientError, BotoCoreError)
"""What stops a read without stopping the run: a refused or throttled call, AWS's error, botocore's own."""
README_POLICY = "the read-only policy in fmcluster's README grants it"


@dataclass(frozen=True)
class Check:
    """One independent check: what it looks at (shown while it runs), the key its problems belong to, the work."""

    label: str
    path: str
    run: Callable[[], list[Any]]


def is_error(problem: Problem) -> bool:
    return problem.is_error


def is_unchecked(problem: Problem) -> bool:
    return problem.is_unchecked


def denied_reason(action: str) -> str:
    return f"access denied to {action} ({README_POLICY})"


def throttled_reason(error: Throttled) -> str:
    return f"{error.action} throttled ({error.code}) after botocore's retries; run again later"


def stopped_reason(error: Exception) -> str:
    """Why a call stopped a check, in one line: the refused IAM action, the throttle, or AWS's own error."""
    if isinstance(error, Denied):
        return denied_reason(error.action)
    if isinstance(error, Throttled):
        return throttled_reason(error)
    if isinstance(error, ClientError):
        return f"{error_code(error)}: {error_message(error)}"
    return str(error)


def denied(path: str, label: str, action: str) -> Problem:
    return unchecked(path, label, denied_reason(action))


def unchecked(path: str, what: str, reason: str) -> Problem:
    """`what` (a check, or part of one) did not run, and why: an `unchecked` Problem at `path`."""
    return Problem(path, f"{what}: {reason}", "unchecked")


def not_checked(check: Check, reason: str) -> Problem:
    return unchecked(check.path, check.label, reason)


def run_checks(
    checks: Sequence[Check],
    *,
    console: Console | None,
    workers: int = 8,
    failed: Callable[[Check, str], Any] = not_checked,
) -> list[Any]:
    """Every check's results, in the order of `checks` (not of completion); `console` None shows no progress.

    A check stopped by a refused or throttled call or an AWS error yields one `failed(check, reason)` instead."""
    results: list[list[Any]] = [[] for _ in checks]
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        disable=console is None,
    ) as progress:
        task = progress.add_task("checking the account", total=len(checks))
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = {pool.submit(_guarded, check, failed): index for index, check in enumerate(checks)}
            for future in as_completed(futures):
                index = futures[future]
                results[index] = future.result()
                progress.update(task, advance=1, description=f"checked {checks[index].label}")
    return [problem for found in results for problem in found]


def _guarded(check: Check, failed: Callable[[Check, str], Any]) -> list[Any]:
    try:
        return check.run()
    except AssertionError:
        raise  # botocore's Stubber (tests) signals an unexpected call this way; it is no AWS failure to report
    except STOPPED as error:
        return [failed(check, stopped_reason(error))]
