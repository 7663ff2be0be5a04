"""`fmcluster diagnose FILE`: read the deployed cluster the file describes and say what failed, why, and the fix.

>>> # diagnose(load("cluster.yaml"), Aws("us-east-1")).exit_code -> 0 healthy, 1 problems, 2 not all diagnosed

Exit 0 only when every check ran and found nothing wrong; a check that could not run (access denied, throttled, an
AWS error) is an `unchecked` finding that names it, and makes the exit 2 when nothing else is wrong.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rich.console import Console

from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.live.aws import Aws
from fmcluster.live.findings import Collected, Finding, report, unknown
from fmcluster.live.image_build import image_build_checks
from fmcluster.live.redact import redact, redact_text
from fmcluster.live.results_and_alarms import validation_checks
from fmcluster.live.runner import Check, run_checks
from fmcluster.live.stacks import stack_checks
from fmcluster.live.windows import window_checks

HEALTHY, PROBLEMS, UNDIAGNOSED = 0, 1, 2


@dataclass(frozen=True)
class Diagnosis:
    findings: list[Finding]
    collected: Collected

    @property
    def exit_code(self) -> int:
        if any(f.is_error for f in self.findings):
            return PROBLEMS
        if any(f.is_unchecked for f in self.findings):
            return UNDIAGNOSED
        stacks = [f for f in self.findings if f.subject.startswith("stack ")]
        return UNDIAGNOSED if all(f.message == "not deployed" for f in stacks) else HEALTHY

    def report(self, *, redacted: bool = False) -> str:
        """The report; `redacted` passes it through the redactor (what `--collect` writes and prints)."""
        stacks = [f for f in self.findings if f.subject.startswith("stack ")]
        if all(f.message == "not deployed" for f in stacks):
            return "nothing to diagnose: none of the file's stacks is deployed in this account and region"
        text = report(self.findings)
        return redact_text(text) if redacted else text


def diagnose(
    config: ClusterConfig,
    aws: Aws,
    *,
    console: Console | None = None,
    workers: int = 8,
    now: datetime | None = None,
) -> Diagnosis:
    """Read-only diagnosis of what `config` deployed. Raises `NoCredentials` when no call can be made."""
    account = aws.account()
    kept = Collected()
    kept.keep("account", {"Account": account, "Region": aws.region, "Cluster": config.name})
    checks: list[Check] = [
        *stack_checks(config, aws, kept),
        *orchestrators.resolve(orchestrators.of(config.orchestrator.type).DIAGNOSE_CHECKS)(config, aws, kept, workers),
        *image_build_checks(config, aws, kept),
        *validation_checks(config, aws, kept, now),
        *window_checks(config, aws, kept, now),
    ]
    findings = run_checks(checks, console=console, workers=workers, failed=_not_diagnosed)
    return Diagnosis(findings, kept)


def _not_diagnosed(check: Check, reason: str) -> Finding:
    return unknown(check.label, "", reason)


def collect(diagnosis: Diagnosis, directory: str | Path, name: str) -> Path:
    """Write the report and everything read, both through the one redactor, to
    DIR/fmcluster-diagnose-<name>-<time>.tar.gz."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    archive = target / f"fmcluster-diagnose-{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.tar.gz"
    files = {"report.txt": diagnosis.report(redacted=True) + "\n"}
    for key, data in diagnosis.collected.items.items():
        files[f"{key}.json"] = json.dumps(redact(data), indent=2, default=str) + "\n"
    with tarfile.open(archive, "w:gz") as tar:
        for path, text in sorted(files.items()):
            payload = text.encode()
            info = tarfile.TarInfo(f"{archive.name.removesuffix('.tar.gz')}/{path}")
            info.size, info.mtime, info.mode = len(payload), int(time.time()), 0o600
            tar.addfile(info, io.BytesIO(payload))
    return archive
