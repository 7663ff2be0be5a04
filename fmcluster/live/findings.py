"""What `fmcluster diagnose` found: one `Finding` per subject, ordered most-likely-cause first, and the report.

Levels: `problem` (something failed), `unknown` (a check, or part of one, could not run: the reason names the IAM
action refused, the throttled call or AWS's error; nothing is known there, so it is never ok), `warning`, `ok`.

>>> print(Finding("ok", "stack demo-network", "CREATE_COMPLETE").render())
ok       stack demo-network: CREATE_COMPLETE
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from fmcluster.live.causes import Cause, explain

Level = Literal["problem", "unknown", "warning", "ok"]
ORDER = {"problem": 0, "unknown": 1, "warning": 2, "ok": 3}
NOT_CHECKED = "not checked: "


@dataclass(frozen=True)
class Finding:
    """One subject's state: `message` is one line; `key` the cluster-file key or construct behind it; `cause` a
    known cause matched from AWS's text; `details` lines shown under it (a log's tail)."""

    level: Level
    subject: str
    message: str
    key: str = ""
    cause: Cause | None = None
    details: tuple[str, ...] = ()

    def render(self) -> str:
        lines = [f"{self.level:<8} {self.subject}: {self.message}"]
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
    return Finding("problem", subject, message, key, explain(text or message, details, capacity), details)


def unknown(subject: str, what: str, reason: str, *, key: str = "") -> Finding:
    """What could not be read (`what`) and why (`reason`): a refused IAM action, a throttled call, AWS's error."""
    return Finding("unknown", subject, f"{NOT_CHECKED}{what}: {reason}" if what else NOT_CHECKED + reason, key)


def report(findings: list[Finding]) -> str:
    """Problems with a known cause first, then other problems, what could not be checked, warnings and what is fine
    (stable within each), and a last line saying whether everything was checked."""
    ranked = sorted(findings, key=lambda f: (ORDER[f.level], f.cause is None if f.level == "problem" else False))
    return "\n".join([*(finding.render() for finding in ranked), coverage(findings)])


def coverage(findings: list[Finding]) -> str:
    """'checked: everything fmcluster diagnoses' or 'NOT CHECKED: 2 subjects (...)': the report's last line."""
    missing = [f.subject for f in findings if f.level == "unknown"]
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
