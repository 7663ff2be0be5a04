"""Run independent live checks concurrently, with a progress display, and turn what stops a check into a warning.

A check is a function returning results (`Problem`s for validate, `Finding`s for diagnose). Problems of level
"warning" or "note" inform; an "error" stops the deploy. A check the caller's policy refuses
becomes one warning naming the missing IAM action; one that fails on AWS's side becomes a warning with AWS's error.
Missing credentials stop the whole run.

>>> [p.message for p in run_checks([Check("two", "x", lambda: [note("x", "2")])], console=None)]
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

from fmcluster.live.aws import Denied, error_code, error_message
from fmcluster.problems import Problem, warning

README_POLICY = "the read-only policy in fmcluster's README grants it"


@dataclass(frozen=True)
class Check:
    """One independent check: what it looks at (shown while it runs), the key its problems belong to, the work."""

    label: str
    path: str
    run: Callable[[], list[Any]]


def is_error(problem: Problem) -> bool:
    return problem.is_error


def denied_reason(action: str) -> str:
    return f"access denied to {action} ({README_POLICY})"


def denied(path: str, label: str, action: str) -> Problem:
    return warning(path, f"{label} not checked: {denied_reason(action)}")


def not_checked(check: Check, reason: str) -> Problem:
    return warning(check.path, f"{check.label} not checked: {reason}")


def run_checks(
    checks: Sequence[Check],
    *,
    console: Console | None,
    workers: int = 8,
    failed: Callable[[Check, str], Any] = not_checked,
) -> list[Any]:
    """Every check's results, in the order of `checks` (not of completion); `console` None shows no progress.

    A check stopped by a refused call or an AWS error yields one `failed(check, reason)` instead."""
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
    except Denied as error:
        return [failed(check, denied_reason(error.action))]
    except ClientError as error:
        return [failed(check, f"{error_code(error)}: {error_message(error)}")]
    except AssertionError:
        raise  # botocore's Stubber (tests) signals an unexpected call this way; it is no AWS failure to report
    except BotoCoreError as error:
        return [failed(check, str(error))]
