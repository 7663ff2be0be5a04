"""A problem's level is data (`Problem.level`), never a prefix written into its message, and nothing parses a message
back (issue 21 item 1): the printer (`fmcluster.problems.render`, the diagnose report) is the only place a level's
label appears before a message. This reads every module of the package as Python tokens, so a check that builds
`f"warning: ..."` or reads `message.startswith("not checked:")` fails here."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from fmcluster.live.findings import ok, problem, unknown
from fmcluster.live.runner import Check, denied, run_checks
from fmcluster.problems import LABELS, Problem, render

PACKAGE = Path(__file__).resolve().parents[2] / "fmcluster"
LEVEL_LABELS = sorted({label for label in LABELS.values() if label} | {"problem", "unknown", "error"})
PREFIXED = re.compile(rf"^(?:{'|'.join(map(re.escape, LEVEL_LABELS))}):")
"""Lower case, as messages are written: the diagnose report's own last line, `NOT CHECKED: ...`, is the printer's."""
STRING_BODY = re.compile(r"^[rRbBuUfF]*(\"\"\"|'''|\"|')(?P<body>.*)\1$", re.DOTALL)
PARSING = re.compile(
    r"""\.(?:r?split|r?partition)\(\s*["']:\s?["']"""  # a message cut at its colons
    rf"""|startswith\(\(?\s*f?["'](?:{"|".join(map(re.escape, LEVEL_LABELS))})\b"""  # a message tested for a level
)


def level_prefixes(source: str) -> list[str]:
    """Every string literal (f-strings included) of `source` that begins with a level's label and a colon."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.STRING:
            continue
        match = STRING_BODY.match(token.string)
        if match and PREFIXED.match(match["body"].lstrip()):
            found.append(f"line {token.start[0]}: {token.string[:60]}")
    return found


def parsing(source: str) -> list[str]:
    return [f"line {n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1) if PARSING.search(line)]


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_scanner_finds_what_it_forbids():
    assert level_prefixes('Problem(at, f"warning: {what} ends")\nx = "note: kept"\n') == [
        'line 1: f"warning: {what} ends"',
        'line 2: "note: kept"',
    ]
    assert level_prefixes('NOT_CHECKED = "not checked: "\n') == ['line 1: "not checked: "']
    assert level_prefixes('Problem(at, f"{what} ends; warning: later")\n') == []
    assert parsing('key, text = line.split(": ", 1)\nif m.startswith(("warning", "note")): pass\n') == [
        'line 1: key, text = line.split(": ", 1)',
        'line 2: if m.startswith(("warning", "note")): pass',
    ]


def test_no_module_writes_a_level_into_a_message_or_parses_one_back():
    offenders = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in modules()
        if (found := level_prefixes(source := path.read_text()) + parsing(source))
    }
    assert offenders == {}


def test_the_printers_write_the_level_labels():
    assert render(Problem("compute[0].count", "quota 'P': access denied", "unchecked"), "c.yaml") == (
        "c.yaml: compute[0].count: not checked: quota 'P': access denied"
    )
    assert render(Problem("", "no region", "error"), "c.yaml") == "c.yaml: no region"
    assert unknown("alarms", "their states", "throttled").render() == (
        "unknown  alarms: not checked: their states: throttled"
    )
    assert unknown("alarms", "", "throttled").message == "throttled"
    assert problem("stack s", "CREATE_FAILED").render().startswith("problem  stack s: CREATE_FAILED")
    assert ok("stack s", "CREATE_COMPLETE", key="network").render() == (
        "ok       stack s: CREATE_COMPLETE\n         from: network"
    )


def test_a_check_that_did_not_run_is_unchecked_by_level():
    [refused] = run_checks([Check("quota", "compute[0]", lambda: [denied("compute[0]", "quota 'P'", "x:Get")])],
                           console=None)  # fmt: skip
    assert (refused.level, refused.message) == (
        "unchecked",
        "quota 'P': access denied to x:Get (the read-only policy in fmcluster's README grants it)",
    )
    assert refused.is_unchecked and not refused.is_error
