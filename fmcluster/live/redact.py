"""Remove what looks like a secret before diagnosis data leaves the machine (`fmcluster diagnose --collect`).

Keys whose name says secret (password, token, secret, credential, private key, session, auth) lose their value;
strings lose AWS access key ids (AKIA/ASIA + 16) and `NAME=value` pairs whose NAME says secret, wherever they
appear (environment dumps in logs, build environments, event properties).

>>> redact({"Environment": {"Variables": {"DB_PASSWORD": "hunter2"}}, "Note": "AWS_SECRET_ACCESS_KEY=abc ok"})
{'Environment': {'Variables': {'DB_PASSWORD': '<redacted>'}}, 'Note': 'AWS_SECRET_ACCESS_KEY=<redacted> ok'}
"""

from __future__ import annotations

import re
from typing import Any

SECRET_NAME = re.compile(r"pass(word|wd)?|secret|token|credential|private.?key|session|auth|api.?key", re.I)
ACCESS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b")
ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)")
REDACTED = "<redacted>"


def redact(data: Any) -> Any:
    """A copy of `data` (JSON-like) with secret-looking values replaced by '<redacted>'."""
    if isinstance(data, dict):
        # {"name": "DB_PASSWORD", "value": "..."} (CodeBuild and ECS environments) hides "value" by the name.
        named_secret = isinstance(data.get("name"), str) and SECRET_NAME.search(data["name"])
        return {
            key: REDACTED if _secret_key(key) or (named_secret and key.lower() == "value") else redact(value)
            for key, value in data.items()
        }
    if isinstance(data, list):
        return [redact(item) for item in data]
    if isinstance(data, str):
        text = ACCESS_KEY_ID.sub(REDACTED, data)
        return ASSIGNMENT.sub(lambda m: f"{m[1]}={REDACTED}" if SECRET_NAME.search(m[1]) else m[0], text)
    return data


def _secret_key(key: object) -> bool:
    return (
        isinstance(key, str) and SECRET_NAME.search(key) is not None and key not in ("NextToken", "ClientRequestToken")
    )
