"""Remove what looks like a secret before diagnosis data leaves the machine (`fmcluster diagnose --collect`).

One redactor for everything `--collect` writes or prints: the JSON files, the report and its log and console tails.
It knows the shapes secrets take in what the diagnosis reads (tests/live/test_redact.py holds a corpus of each, with
its source):
- a key whose name says secret (password, secret, token, credential, private key, session, auth, API key, JWT,
  access key) loses its value, in JSON-like data and in text: `NAME=value`, `NAME = value` (ini, as in
  ~/.aws/credentials), `NAME: value` (YAML), `"NAME": "value"` (JSON printed into a log);
- name/value pairs: `{"name": ..., "value": ...}` (CodeBuild, ECS), `ParameterKey`/`ParameterValue` (CloudFormation
  parameters), `Key`/`Value` (tags), `OutputKey`/`OutputValue`: the value goes when the name says secret;
- JSON text inside a string (a stack event's `ResourceProperties`) is parsed and redacted as data;
- AWS access key ids (AKIA/ASIA + 16), `Bearer` tokens, bare JWTs, passwords in URLs (`scheme://user:pass@`),
  `--password x`, `docker login -p x`, `curl -u user:x` and `mysql -px`, PEM private keys (also split over a list
  of lines), Hugging Face (`hf_`) and GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`) tokens.
What it leaves readable: instance, AMI, reservation and request ids, ARNs, hashes.

>>> redact({"Environment": {"Variables": {"DB_PASSWORD": "hunter2"}}, "Note": "AWS_SECRET_ACCESS_KEY=abc ok"})
{'Environment': {'Variables': {'DB_PASSWORD': '<redacted>'}}, 'Note': 'AWS_SECRET_ACCESS_KEY=<redacted> ok'}
>>> redact_text("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
'aws_secret_access_key = <redacted>'
"""

from __future__ import annotations

import json
import re
from typing import Any

REDACTED = "<redacted>"
WINDOW = 16_384
"""Characters after a '{' searched for a JSON object embedded in text."""
SECRET_NAME = re.compile(
    r"pass(word|wd|phrase)?|secret|token|credential|private.?key|session|auth|api.?key|jwt|access.?key", re.I
)
NOT_SECRET_NAMES = frozenset(
    {"NextToken", "nextToken", "ClientRequestToken", "RequestToken", "nextForwardToken", "nextBackwardToken"}
)
"""Pagination, idempotency and request tokens: names that say token, values that carry nothing (botocore models;
CloudFormation's handler messages end "(RequestToken: <uuid>, HandlerErrorCode: ...)")."""
PAIRS = (("name", "value"), ("Name", "Value"), ("Key", "Value"), ("ParameterKey", "ParameterValue"),
         ("OutputKey", "OutputValue"))  # fmt: skip
"""(name key, value key) of the name/value lists AWS returns: CodeBuild and ECS environments, SSM, tags (EC2,
CloudFormation), CloudFormation parameters and outputs (their API references)."""

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_VALUE = r"\\\"(?:[^\"\\]|\\[^\"])*\\\"|\"[^\"]*\"|'[^']*'|[^\s,;{}\[\]\"'\\]+"
"""A quoted value (also in escaped quotes: JSON inside a JSON string), or a bare word; never an object or list."""
PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM private keys (RFC 7468): the whole block, or from BEGIN to the end of the text when it was cut.
    (
        re.compile(r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----).*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
        rf"\1{REDACTED}\2",
    ),
    # HTTP Authorization schemes (RFC 6750 Bearer, RFC 7617 Basic) with a credential of 8 or more characters, so
    # "basic checks passed" stays readable.
    (re.compile(r"\b([Bb]earer|BEARER|Basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), REDACTED),  # a JWT: base64url '{"' ...
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    (re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    # Bounded: a scheme (RFC 3986: letters, digits, '+', '.', '-') of 32 characters at most, and `-p` within 200
    # characters of `login`; unbounded, each was searched for from every word boundary to the end of a long word or
    # line, quadratic in a console line of 64 KB.
    (re.compile(r"\b([a-z][a-z0-9+.-]{0,31}://[^\s:/@]+):[^\s@/]+@", re.I), rf"\1:{REDACTED}@"),
    (re.compile(r"(--pass(?:word|wd)?(?:-stdin)?(?:=|\s+))(?!-)\S+"), rf"\1{REDACTED}"),
    (re.compile(r"(\blogin\b[^\n]{0,200}?\s-p\s+)\S+"), rf"\1{REDACTED}"),
    # curl's `-u user:password` (curl(1)); the MySQL client's `-pPASSWORD`, attached (MySQL reference manual).
    (re.compile(r"(\s(?:-u\s+|--user[=\s]+)[^\s:]{1,128}:)\S+"), rf"\1{REDACTED}"),
    (re.compile(r"(\b(?:mysql|mysqldump|mariadb)\b[^\n]{0,200}?\s-p)(?!\s)\S+"), rf"\1{REDACTED}"),
)
"""Secrets recognised by their own shape, wherever they are."""
ASSIGNMENT = re.compile(rf"(?<![\w:/.-])(?P<q>\\?[\"']|)(?P<name>{_NAME})(?P=q)[ \t]*[=:][ \t]*")
VALUE = re.compile(_VALUE)
"""`NAME=value`, `NAME = value`, `NAME: value`, `"NAME": "value"`: the value goes when NAME says secret. A NAME right
after `:` or `/` is part of an ARN or a path (`arn:aws:secretsmanager:...:secret:db-AbCdEf`) and stays."""


def redact(data: Any) -> Any:
    """A copy of `data` (JSON-like) with secret-looking values replaced by '<redacted>'."""
    if isinstance(data, dict):
        secret_values = {value for name, value in PAIRS if _secret_name(data.get(name))}
        return {
            key: REDACTED if _secret_name(key) or key in secret_values else redact(value) for key, value in data.items()
        }
    if isinstance(data, list):
        return (
            _redact_lines(data)
            if data and all(isinstance(item, str) for item in data)
            else [redact(item) for item in data]
        )
    if isinstance(data, str):
        return redact_text(data)
    return data


def redact_text(text: str) -> str:
    """`text` with every secret shape replaced; JSON inside it (all of it, or an object printed into a log line) is
    redacted as data and written back compactly."""
    text = _embedded_json(text)
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return _assignments(text)


def _embedded_json(text: str) -> str:
    """`text` with each JSON object in it (all of it, or one printed into a log line) redacted as data: name/value
    pairs too. Objects are looked for at each '{' within `WINDOW` characters (a credentials dump is far smaller), so a
    long text with many braces costs little: a failed parse is cheap only on a short text."""
    if "{" not in text:
        return text
    if text.lstrip().startswith("{"):
        try:
            whole = _as_json(json.loads(text))
        except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion limit: text then
            whole = ""
        if whole:
            return whole
    decoder = json.JSONDecoder()
    out, position = [], 0
    for match in re.finditer(r"\{", text):
        start = match.start()
        if start < position:
            continue
        try:
            parsed, length = decoder.raw_decode(text[start : start + WINDOW])
            redacted = _as_json(parsed)
        except (ValueError, RecursionError):
            continue
        if redacted:
            out += [text[position:start], redacted]
            position = start + length
    return "".join([*out, text[position:]]) if out else text


def _as_json(parsed: Any) -> str:
    """A parsed non-empty object, redacted and written back compactly; "" for anything else."""
    return json.dumps(redact(parsed)) if isinstance(parsed, dict) and parsed else ""


def _redact_lines(lines: list[str]) -> list[str]:
    """Lines of one log or console: a PEM block split over lines loses every line between BEGIN and END."""
    out, inside = [], False
    for line in lines:
        if inside:
            inside = "-----END " not in line
            out.append(REDACTED if inside else redact_text(line))
            continue
        redacted = redact_text(line)
        inside = re.search(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----", line) is not None and "-----END " not in line
        out.append(redacted)
    return out


def _assignments(text: str) -> str:
    """Every `NAME<sep>value` whose NAME says secret loses its value. A value of another name is scanned too: it may
    hold quoted pairs of its own (`"ResourceProperties": "{\\"MasterUserPassword\\": \\"...\\"}"`)."""
    out, position = [], 0
    while (match := ASSIGNMENT.search(text, position)) is not None:
        # The value is matched only after a secret name: matched after every name, a bare value (which runs over
        # '&' and '=') was read to the end of its word once per pair in it, quadratic in a long query string.
        value = VALUE.match(text, match.end()) if _secret_name(match["name"]) else None
        if value is None or value[0].strip("\"'\\") in ("", REDACTED):
            out.append(text[position : match.end()])
            position = match.end()  # after the name: the search goes on inside the value
            continue
        quote = '\\"' if value[0].startswith('\\"') else value[0][0] if value[0][:1] in "\"'" else ""
        out.append(f"{text[position : match.end()]}{quote}{REDACTED}{quote}")
        position = value.end()
    return "".join([*out, text[position:]])


def _secret_name(name: object) -> bool:
    return isinstance(name, str) and name not in NOT_SECRET_NAMES and SECRET_NAME.search(name) is not None
