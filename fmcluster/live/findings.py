"""What `fmcluster diagnose` found: one `Finding` per subject, ordered most-likely-cause first, and the report.

>>> print(Finding("ok", "stack demo-network", "CREATE_COMPLETE").render())
ok       stack demo-network: CREATE_COMPLETE
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from fmcluster.live.causes import Cause, explain

Level = Literal["problem", "warning", "ok"]
ORDER = {"problem": 0, "warning": 1, "ok": 2}


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


def problem(subject: str, message: str, *, key: str = "", text: str = "", details: tuple[str, ...] = ()) -> Finding:
    """A problem whose known cause (if any) is matched in `text` (default: the message) and the details."""
    return Finding("problem", subject, message, key, explain("\n".join([text or message, *details])), details)


def report(findings: list[Finding]) -> str:
    """Problems with a known cause first, then other problems, warnings and what is fine (stable within each)."""
    ranked = sorted(findings, key=lambda f: (ORDER[f.level], f.cause is None if f.level == "problem" else False))
    return "\n".join(finding.render() for finding in ranked)


@dataclass
class Collected:
    """Everything the diagnosis read, by name, for `--collect` (thread-safe)."""

    items: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def keep(self, name: str, data: Any) -> None:
        with self._lock:
            self.items[name] = data
