"""Notebook 10's exercises: the worked answers pass, typical wrong answers fail with feedback
that names the idea, blind tries draw fresh variants, and the truth the orphan exercise checks
against (`labkit.audit`) agrees with an independent reading of the definition."""

from __future__ import annotations

import ast
import random

import pytest

from labkit import exercises as exs
from labkit.exercises import audit as ex
from labkit.exercises.kit import VARIANT_AFTER, Wrong, variant_rng

CORRECT, INCORRECT = "correct", "incorrect"


@pytest.fixture(autouse=True)
def fresh() -> None:
    ex.audit_orphans_ex.reset()
    ex.fall_log_ex.reset()


def _answer(solution_text: str) -> object:
    """The literal after `answer = ` or `events = ` in a worked solution."""
    return ast.literal_eval(solution_text.split(" = ", 1)[1])


def oracle_orphans(history: tuple[ex.Event, ...]) -> set[int]:
    """The definition read directly: an id is an orphan if some checkpoint covered it while it
    was open, or covered it before its first status row (and it shows up later)."""
    seen_ever = {a for what, a, _ in history if what == "status"}
    orphans = set()
    for k, (what, start, end) in enumerate(history):
        if what != "checkpoint":
            continue
        state: dict[int, str] = {}
        for w, i, s in history[:k]:
            if w == "status":
                state[i] = s
        for i in range(start + 1, end + 1):
            if i in seen_ever and state.get(i) not in ("delivered", "failed", "cancelled"):
                orphans.add(i)
    return orphans


def test_lesson_10_lists_both_exercises() -> None:
    assert exs.by_lesson[10] == [ex.audit_orphans_ex, ex.fall_log_ex]
    assert exs.audit_orphans_ex is ex.audit_orphans_ex and exs.fall_log_ex is ex.fall_log_ex


def test_the_worked_answers_pass() -> None:
    fb = ex.audit_orphans_ex.check(_answer(ex.audit_orphans_ex.solution_text))
    assert fb.status == CORRECT, fb
    fb = ex.fall_log_ex.check(_answer(ex.fall_log_ex.solution_text))
    assert fb.status == CORRECT and "fall 1 of 1, in 2 reads" in fb.message, fb
    # A numpy-like answer, a list, works too
    assert ex.audit_orphans_ex.check([1, 2, 4, 5]).status == CORRECT


def test_the_audit_agrees_with_the_definition_on_random_histories() -> None:
    rng = random.Random(7)
    for _ in range(200):
        history = ex.random_history(rng)
        assert set(ex.audited_orphans(history)) == oracle_orphans(history), history
    assert set(ex.audited_orphans(ex.ORPHAN_HISTORY)) == oracle_orphans(ex.ORPHAN_HISTORY)


@pytest.mark.parametrize(
    ("answer", "idea"),
    [
        # missed the id first seen after coverage passed it
        ({1, 2, 5}, "commit-order gap"),
        # every id below a checkpoint's end that finished after some bigger id (MAX thinking)
        ({1, 2, 4, 5, 6}, "still open, or not yet seen at all, at that moment"),
        ({1, 2, 6}, "at each first sighting, ask whether coverage has already passed"),
        (set(), "the audit reports more orphans"),
    ],
)
def test_typical_wrong_orphan_answers_name_the_idea(answer: set[int], idea: str) -> None:
    fb = ex.audit_orphans_ex.check(answer)
    assert fb.status == INCORRECT and idea in fb.message, fb.message
    for i in ex.audited_orphans(ex.ORPHAN_HISTORY):  # never names the answer's ids
        assert f"id {i}" not in fb.message


def test_a_shape_mistake_is_named() -> None:
    assert "set of ids" in ex.audit_orphans_ex.check(4).message
    assert "no status row names id 9" in ex.audit_orphans_ex.check({9}).message


def test_blind_tries_draw_a_fresh_variant() -> None:
    e = ex.audit_orphans_ex
    for _ in range(VARIANT_AFTER):
        fb = e.check({1})
    assert e.variant_number == 1 and "fresh variant" in fb.message
    assert e.current().question != e.question
    assert e.check(_answer(e.current().solution_text)).status == CORRECT


def test_every_variant_is_answerable_and_not_all_or_nothing() -> None:
    answers = set()
    for k in range(1, 25):
        v = ex._orphans_variant(variant_rng(ex.audit_orphans_ex.name, k))
        want = _answer(v.solution_text)
        assert v.checker(want)  # passes: returns its note
        with pytest.raises(Wrong):
            v.checker(set())
        answers.add(frozenset(want))
    assert len(answers) > 10  # blind tries do not converge


@pytest.mark.parametrize(
    ("rows", "idea"),
    [
        (  # a commit, but the observer never reads a lower head
            [
                {"at": 1, "event": "head", "observer": "r1", "version": 0},
                {"at": 2, "event": "commit", "ballot": "a", "version": 1, "base": 0},
                {"at": 3, "event": "head", "observer": "r1", "version": 1},
            ],
            "the same observer must read the head before and after a commit",
        ),
        (  # a fall made up by the reader, with no commit behind it
            [
                {"at": 1, "event": "head", "observer": "r1", "version": 2},
                {"at": 2, "event": "head", "observer": "r1", "version": 1},
            ],
            "a fall has to come from a commit",
        ),
        (  # a commit that jumps the version
            [{"at": 1, "event": "commit", "ballot": "a", "version": 3, "base": 0}],
            "a commit writes its base + 1",
        ),
        (  # two observers: each read alone never falls
            [
                {"at": 1, "event": "commit", "ballot": "a", "version": 1, "base": 0},
                {"at": 2, "event": "commit", "ballot": "b", "version": 2, "base": 1},
                {"at": 3, "event": "head", "observer": "r1", "version": 2},
                {"at": 4, "event": "commit", "ballot": "c", "version": 1, "base": 0},
                {"at": 5, "event": "head", "observer": "r2", "version": 1},
            ],
            "the same observer must read",
        ),
        (
            [
                {"at": 2, "event": "head", "observer": "r1", "version": 0},
                {"at": 1, "event": "head", "observer": "r1", "version": 0},
            ],
            "row 2, column 'at'",
        ),
        ([{"at": 1, "event": "hed", "observer": "r1"}], "unknown event 'hed'"),
        ([{"at": 1, "event": "head", "reader": "r1", "version": 0}], "the columns are"),
        ("commit then read", "a list of rows"),
    ],
)
def test_typical_wrong_fall_logs_name_the_idea(rows: object, idea: str) -> None:
    fb = ex.fall_log_ex.check(rows)
    assert fb.status == INCORRECT and idea in fb.message, fb.message
    assert "Traceback" not in fb.message


def test_hints_climb_and_leave_the_idea_to_the_learner() -> None:
    for e in (ex.audit_orphans_ex, ex.fall_log_ex):
        hints = [e.hint(k).message for k in (1, 2, 3)]
        assert len(set(hints)) == 3 and "____" in hints[2]
        assert _answer(e.solution_text) is not None
    near = ex.audit_orphans_ex.hint(3).message
    assert "{1, 2, 4, 5}" not in near and "answer" not in near
