"""One kind of problem for every check fmcluster runs, and the one printer of `FILE: key.path: message` lines.

The cluster file (`fmcluster.config`), the constructs' props checks, `fmcluster plan`, `validate --live` and
`diagnose` all report `Problem`s: a level (an error stops; a warning or a note informs; `unchecked` says a check, or
part of one, could not run, with the reason: no error was found there and nothing is known either; `ok` is what
`diagnose` found fine), the key path it belongs to (`compute[0].reservation_id` in a cluster file, `reservation_id`
for a construct's prop), the message, and where one is known the nearest valid value. The level is data, never a
prefix inside the message, and nothing parses a message back; the printer shows the level
(tests/unit/test_problem_levels.py keeps it so).

>>> problem = Problem("compute[0].count", "must be at most 6758; got 7000", nearest="6758")
>>> render(problem, "cluster.yaml")
'cluster.yaml: compute[0].count: must be at most 6758; got 7000'
>>> render(warning("training", "one checkpoint takes 400 s"), "cluster.yaml")
'cluster.yaml: training: warning: one checkpoint takes 400 s'
>>> render(Problem("compute[0]", "quota 'P5': access denied", "unchecked"), "cluster.yaml")
"cluster.yaml: compute[0]: not checked: quota 'P5': access denied"
>>> str(InvalidProps("EfaLaunchTemplate", [Problem("capacity", "must be 'odcr'")]))
"EfaLaunchTemplate: capacity: must be 'odcr'"
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

Level = Literal["error", "warning", "note", "unchecked", "ok"]
LABELS: dict[Level, str] = {"error": "", "warning": "warning", "note": "note", "unchecked": "not checked", "ok": "ok"}
"""What the printer writes before the message of each level (an error's message stands alone)."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong, or worth a warning or a note, at one key path."""

    path: str
    """Where it is: a key path of the cluster file (`compute[0].name`), or a construct's prop; '' for the whole."""
    message: str
    """What is wrong, the value given and what would be right, in one line (without the level)."""
    level: Level = "error"
    nearest: str | None = None
    """The nearest valid value, where one is known (the message names it too)."""

    @property
    def is_error(self) -> bool:
        return self.level == "error"

    @property
    def is_unchecked(self) -> bool:
        return self.level == "unchecked"

    @property
    def text(self) -> str:
        """The message with its level's label before it (`warning: ...`, `not checked: ...`); an error's alone."""
        label = LABELS[self.level]
        return f"{label}: {self.message}" if label else self.message

    def at(self, prefix: str) -> Problem:
        """The same problem one level down: `at("compute_groups[0]")` turns `name` into `compute_groups[0].name`."""
        return replace(self, path=join_path(prefix, self.path))

    @property
    def line(self) -> str:
        """`key.path: message`, without source or level (for a message that says where it belongs itself)."""
        return f"{self.path}: {self.message}" if self.path else self.message

    def render(self, source: str) -> str:
        return render(self, source)


def warning(path: str, message: str) -> Problem:
    return Problem(path, message, "warning")


def note(path: str, message: str) -> Problem:
    return Problem(path, message, "note")


def join_path(prefix: str, path: str) -> str:
    """'compute[0]' + 'name' -> 'compute[0].name'; an index joins without a dot; an empty side is left out."""
    if not prefix or not path:
        return prefix or path
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def render(problem: Problem, source: str) -> str:
    """`SOURCE: key.path: message`, with `warning: `, `note: ` or `not checked: ` before the message of one that
    does not stop the work."""
    return f"{source}: {problem.path}: {problem.text}" if problem.path else f"{source}: {problem.text}"


def render_all(problems: Iterable[Problem], source: str) -> list[str]:
    return [render(problem, source) for problem in problems]


def errors(problems: Iterable[Problem]) -> list[Problem]:
    return [problem for problem in problems if problem.is_error]


class Problems(Exception):
    """Problems that stop the work, all at once; `source` names where they are (a file, a construct)."""

    def __init__(self, source: str, problems: Sequence[Problem]):
        self.source = source
        self.problems = tuple(problems)
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return render_all(self.problems, self.source)


class InvalidProps(Problems, ValueError):
    """A construct's props that break its rules (or the cluster file's): raised before anything is built.

    A ValueError, as construct validation has always raised; its text is one `Construct: prop: message` line per
    problem.
    """


def raise_if_any(construct: str, problems: Sequence[Problem]) -> None:
    """Raise `InvalidProps(construct, problems)` when there is any problem."""
    if problems:
        raise InvalidProps(construct, problems)
