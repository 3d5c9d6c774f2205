"""The machinery behind workshop exercises: check(), hint(), solution() with friendly feedback.

Each exercise checks a learner's answer by running it against real labkit code (SQLite, the
simulator); `labkit.exercises` holds the exercises themselves.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal


class _Blank:
    """The placeholder a student copy starts with; checking it means "not attempted"."""

    def __repr__(self) -> str:
        return "____"


____ = _Blank()
BLANK = ____

Status = Literal["correct", "incorrect", "not_attempted"]
_ICON = {"correct": "✓ Correct", "incorrect": "✗ Not yet", "not_attempted": "○ Not attempted"}
_COLOR = {"correct": "#2e8b57", "incorrect": "#b22222", "not_attempted": "#555555"}


@dataclass(frozen=True)
class Feedback:
    """What a check, hint or solution says; renders as one coloured line in a notebook."""

    status: Status | Literal["hint", "solution"]
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "correct"

    def __str__(self) -> str:
        label = _ICON.get(self.status, self.status.capitalize())
        return f"{label}: {self.message}"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = _COLOR.get(self.status, "#1f4e9c")
        body = html.escape(str(self)).replace("\n", "<br>")
        return f'<div style="color:{color};font-family:sans-serif">{body}</div>'


class Wrong(Exception):
    """Raised inside a checker to explain what is wrong with an answer."""


@dataclass
class Exercise:
    """One exercise: a question, a checker that raises `Wrong`, a hint and a worked solution."""

    name: str
    question: str
    checker: Callable[[Any], str | None]
    hint_text: str
    solution_text: str

    def check(self, answer: Any = BLANK) -> Feedback:
        """Run the learner's answer against the real code and say what is right or wrong."""
        if answer is BLANK or isinstance(answer, _Blank):
            return Feedback(
                "not_attempted",
                f"{self.name}: replace ____ with your answer, then run this cell again. "
                f"Stuck? Call .hint().",
            )
        try:
            note = self.checker(answer)
        except Wrong as exc:
            return Feedback("incorrect", f"{self.name}: {exc}")
        except Exception as exc:  # a learner's broken answer must not end in a traceback
            return Feedback(
                "incorrect", f"{self.name}: your answer raised {type(exc).__name__}: {exc}"
            )
        return Feedback("correct", f"{self.name}: {note or 'well done.'}")

    def hint(self) -> Feedback:
        return Feedback("hint", self.hint_text)

    def solution(self) -> Feedback:
        return Feedback("solution", self.solution_text)
