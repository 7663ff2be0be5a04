"""What `fmcluster diagnose` found: one `Finding` per subject, ordered most-likely-cause first, and the report.

A `Finding` is a `Problem` (fmcluster.problems) about one subject, with the same levels: `error` (something failed;
the report's column says `problem`), `unchecked` (a check, or part of one, could not run: the reason names the IAM
action refused, the throttled call or AWS's error; nothing is known there, so it is never ok; the column says
`unknown` and the message reads `not checked: ...`), `warning`, `note` and `ok`. Its `path` is the cluster-file key
or construct behind it (`key`).

>>> print(ok("stack demo-network", "CREATE_COMPLETE").render())
ok       stack demo-network: CREATE_COMPLETE
>>> print(unknown("alarms", "their states", "access denied to cloudwatch:DescribeAlarms").render())
unknown  alarms: not checked: their states: access denied to cloudwatch:DescribeAlarms
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fmcluster.live.causes import Cause, explain
from fmcluster.problems import LABELS, Level, Problem

ORDER: dict[Level, int] = {"error": 0, "unchecked": 1, "warning": 2, "note": 3, "ok": 4}
COLUMN: dict[Level, str] = {
    "error": "problem",
    "unchecked": "unknown",
    "warning": "warning",
    "note": "note",
    "ok": "ok",
}
"""The report's first column for each level (the words diagnose has always printed)."""


@dataclass(frozen=True, kw_only=True)
class Finding(Problem):
    """One subject's state: `message` is one line; `path` (`key`) the cluster-file key or construct behind it;
    `cause` a known cause matched from AWS's text; `details` lines shown under it (a log's tail)."""

    subject: str
    cause: Cause | None = None
    details: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.path

    def render(self, source: str = "") -> str:
        """The report's lines for this finding (`source` is not shown: the report is about one cluster file)."""
        text = f"{LABELS[self.level]}: {self.message}" if self.level == "unchecked" else self.message
        lines = [f"{COLUMN[self.level]:<8} {self.subject}: {text}"]
        if self.key:
            lines.append(f"         from: {self.key}")
        if self.cause:
            lines += [
                f"         cause: {self.cause.cause}",
                f"         fix: {self.cause.fix}",
                f"         source: {self.cause.source}",
            ]
        lines += [f"         | {line}" for line in self.details]
        return "\n".join(lines)


def finding(level: Level, subject: str, message: str, *, key: str = "") -> Finding:
    return Finding(key, message, level, subject=subject)


def ok(subject: str, message: str, *, key: str = "") -> Finding:
    return finding("ok", subject, message, key=key)


def warning(subject: str, message: str, *, key: str = "") -> Finding:
    return finding("warning", subject, message, key=key)


def problem(
    subject: str,
    message: str,
    *,
    key: str = "",
    text: str = "",
    details: tuple[str, ...] = (),
    capacity: str | None = None,
) -> Finding:
    """A problem whose known cause (if any) is matched in its failure record `text` (default: the message), else in
    the error lines of `details`, with the fix for the group's `capacity` type when the failure belongs to a group."""
    return Finding(key, message, subject=subject, cause=explain(text or message, details, capacity), details=details)


def unknown(subject: str, what: str, reason: str, *, key: str = "") -> Finding:
    """What could not be read (`what`) and why (`reason`): a refused IAM action, a throttled call, AWS's error."""
    return finding("unchecked", subject, f"{what}: {reason}" if what else reason, key=key)


def report(findings: list[Finding]) -> str:
    """Problems with a known cause first, then other problems, what could not be checked, warnings and what is fine
    (stable within each), and a last line saying whether everything was checked."""
    ranked = sorted(findings, key=lambda f: (ORDER[f.level], f.cause is None if f.is_error else False))
    return "\n".join([*(finding.render() for finding in ranked), coverage(findings)])


def coverage(findings: list[Finding]) -> str:
    """'checked: everything fmcluster diagnoses' or 'NOT CHECKED: 2 subjects (...)': the report's last line."""
    missing = [f.subject for f in findings if f.is_unchecked]
    if not missing:
        return "checked: every check ran"
    return f"NOT CHECKED: {len(missing)} check(s) did not run in full, so nothing is known there: {'; '.join(missing)}"


@dataclass
class Collected:
    """Everything the diagnosis read, by name, for `--collect` (thread-safe)."""

    items: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def keep(self, name: str, data: Any) -> None:
        with self._lock:
            self.items[name] = data
