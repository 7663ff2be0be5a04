"""A pretend node for testing fmcluster's bash node scripts.

There is no NVMe instance store, Lustre, EFA, systemd, SSM or instance metadata service on a test machine, and the
scripts must never touch the real /etc or /dev here. So a test runs a script with a PATH that holds only stub
commands, which record their arguments to STUB_LOG and answer from a state directory the test prepares
(STUB_STATE), plus links to a few harmless real tools; and with FMCLUSTER_ROOT, which the scripts put in front of
every path they read or write, standing in for /.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

RECORD = """#!/usr/bin/env bash
{ printf '%s' "${0##*/}"; for arg in "$@"; do printf ' %q' "$arg"; done; printf '\\n'; } >>"$STUB_LOG"
"""
"""The first lines of every stub: append `name arg...` (shell-quoted) to STUB_LOG. The name is `${0##*/}`, not
`$(basename "$0")`: a stub runs for nearly every command a script calls, and the expansion forks nothing."""


def fail_first(status: int = 32) -> str:
    """Stub lines that fail with `status` as many times as STUB_STATE/<name>-failures says, then go on."""
    return f"""failures="$STUB_STATE/${{0##*/}}-failures"
if [[ -f "$failures" ]]; then
  left="$(<"$failures")"
  if ((left > 0)); then echo $((left - 1)) >"$failures"; echo "${{0##*/}}: stub failure" >&2; exit {status}; fi
fi
"""


@dataclass
class StubNode:
    """Stub commands on PATH (`bin`), their state, the calls they recorded, and FMCLUSTER_ROOT (`root`)."""

    root: Path
    state: Path
    bin: Path
    log: Path
    env: dict[str, str]

    def calls(self, command: str | None = None) -> list[list[str]]:
        """Every stub call so far as [command, arg, ...], optionally only those of `command`."""
        if not self.log.exists():
            return []
        calls = [shlex.split(line) for line in self.log.read_text().splitlines()]
        return [call for call in calls if command is None or call[0] == command]

    def path(self, absolute: str) -> Path:
        """Where the scripts put `absolute` (e.g. "/etc/fstab") on this pretend node."""
        return self.root / absolute.lstrip("/")

    def set(self, name: str, content: str | bytes) -> None:
        """Put `content` at STUB_STATE/`name` for the stubs to read."""
        target = self.state / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)

    def add_stub(self, name: str, body: str = "exit 0") -> None:
        """Put a stub `name` on PATH, replacing whatever was there (a link to a real tool is removed, never written)."""
        stub = self.bin / name
        stub.unlink(missing_ok=True)
        stub.write_text(RECORD + body + "\n")
        stub.chmod(0o755)

    def script_log(self, name: str) -> str:
        return self.path(f"/var/log/fmcluster/{name}.log").read_text()


def stub_env(tmp_path: Path, *, tools: Iterable[str], stubs: Mapping[str, str], python: bool = False) -> dict:
    """Make root/, state/ and bin/ under `tmp_path` with the stubs and real `tools`; the fields of a StubNode."""
    root, state, stub_bin = tmp_path / "root", tmp_path / "state", tmp_path / "bin"
    for directory in (root, state, stub_bin):
        directory.mkdir()
    for tool in tools:
        real = shutil.which(tool, path="/usr/bin:/bin")
        assert real, f"{tool} is needed to run the node scripts"
        (stub_bin / tool).symlink_to(real)
    if python:
        (stub_bin / "python3").symlink_to(Path(sys.executable).resolve())
    log = tmp_path / "calls.log"
    env = {
        "PATH": str(stub_bin),
        "FMCLUSTER_ROOT": str(root),
        "FMCLUSTER_RETRY_DELAY": "1",
        "STUB_LOG": str(log),
        "STUB_STATE": str(state),
        "LANG": "C",
    }
    fields = {"root": root, "state": state, "bin": stub_bin, "log": log, "env": env}
    for name, body in stubs.items():
        StubNode(**fields).add_stub(name, body)
    return fields
