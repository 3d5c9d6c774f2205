"""Feedback quotes a learner's value safely: a huge int, a long string or a repr that raises
becomes a short phrase, never a ValueError out of the check (issue 20.7)."""

from __future__ import annotations

from fresh_exercises import fresh_exercises  # noqa: F401 - autouse: variant 0 per test

from labkit import exercises as exs
from labkit.exercises.kit import SHOWN_CHARS, shown


class Weird:
    def __repr__(self) -> str:
        raise RuntimeError("no")


def test_values_are_shown_short_and_never_raise() -> None:
    assert shown(10**5000) == "a 16610-bit integer"
    assert shown(2**63) == "9223372036854775808"
    assert len(shown("x" * 10_000)) == SHOWN_CHARS
    assert shown(Weird()) == "a Weird whose repr raised RuntimeError"
    assert shown(True) == "True" and shown("4") == "'4'"


def test_a_prediction_with_a_huge_number_is_answered_in_one_line() -> None:
    fb = exs.predict_frontier_ex.check({"frontier": 10**5000, "max_watermark": 6})
    assert fb.status == "incorrect" and "16610-bit integer" in fb.message
    fb = exs.predict_frontier_ex.check({"frontier": Weird(), "max_watermark": 6})
    assert fb.status == "incorrect" and "\n" not in fb.message
