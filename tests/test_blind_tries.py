"""A learner who tries answers blindly, reacting to feedback as a brute-forcer would, needs at
least `MIN_TRIES` tries on average to reach ✓ on every prediction and verdict exercise: wrong
streaks bring fresh variants and feedback names the idea, not the wrong label or the value."""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Callable
from typing import Any

import pytest
from fresh_exercises import fresh_exercises  # noqa: F401 - autouse: variant 0 per test

import labkit.exercises as exs
from labkit.exercises import kit
from labkit.exercises.kit import Exercise, Wrong

MIN_TRIES = 30
# Blind learners per exercise (each with its own random seed) and the tries each may take; a
# learner stopped at the cap counts as the cap, so the mean is a floor. A prediction has a
# small answer space, so more learners measure it; a verdict's learners all stop at the cap.
RUNS = {"predict_frontier_ex": 24}
CAP = {"predict_frontier_ex": 150}
VERDICT_RUNS, VERDICT_CAP = 5, 45
DECISIONS = ("commit", "unknown_ballot", "stale_watermark", "stale_base")
FRESH = "fresh variant"


class Forcer:
    """A blind learner: never repeats an answer refused for the current variant, changes only
    the part feedback names (a label, or the half of a prediction said to be wrong), and
    forgets what it learned when a fresh variant arrives."""

    def __init__(self, keys: dict[str, tuple[Any, ...]], rng: random.Random) -> None:
        self.keys, self.rng = keys, rng
        self.tried: set[tuple[Any, ...]] = set()
        self.last: dict[str, Any] | None = None

    def answer(self, message: str | None) -> dict[str, Any]:
        if message is not None and FRESH in message:
            self.tried, self.last = set(), None
        named = self._named(message) if message and self.last else []
        for _ in range(500):
            pick = dict(self.last) if named and self.last else {}
            for key, values in self.keys.items():
                if key not in pick or key in named:
                    pick[key] = self.rng.choice(values)
            if tuple(pick.values()) not in self.tried:
                break
        self.tried.add(tuple(pick.values()))
        self.last = pick
        return pick

    def _named(self, message: str) -> list[str]:
        """The keys a message points at, as a brute-forcer reads it."""
        named = [k for k in self.keys if re.search(rf"\b(response|label) {k}\b|\b{k}:", message)]
        if "the frontier is right" in message:
            named = ["max_watermark"]
        elif "frontier" in self.keys and "you said the frontier" in message:
            named = ["frontier"]
        return named


VERDICT_KEYS = {k: DECISIONS for k in "ABCDE"}
CRASH_KEYS = {"X": tuple(range(1, 7)), **{k: DECISIONS for k in "ABCD"}}
PREDICT_KEYS = {"frontier": tuple(range(10)), "max_watermark": tuple(range(10))}
ORPHAN_KEYS = {str(i): (False, True) for i in range(1, 10)}


def _orphans(pick: dict[str, Any]) -> set[int]:
    return {int(k) for k, v in pick.items() if v}


BLIND: dict[str, tuple[Exercise, dict[str, tuple[Any, ...]], Callable[[dict[str, Any]], Any]]] = {
    "rejection_reasons_ex": (exs.rejection_reasons_ex, VERDICT_KEYS, dict),
    "crash_verdicts_ex": (exs.crash_verdicts_ex, CRASH_KEYS, dict),
    "predict_frontier_ex": (exs.predict_frontier_ex, PREDICT_KEYS, dict),
    "max_orphans_ex": (exs.max_orphans_ex, ORPHAN_KEYS, _orphans),
    "audit_orphans_ex": (exs.audit_orphans_ex, ORPHAN_KEYS, _orphans),
}


def blind_tries(
    ex: Exercise, keys: dict[str, tuple[Any, ...]], shape: Callable, seed: int, cap: int
) -> int:
    """Tries one blind learner needs to reach ✓ (at most `cap`), from a fresh exercise."""
    ex.reset()
    forcer = Forcer(keys, random.Random(seed))
    message = None
    for tries in range(1, cap + 1):
        fb = ex.check(shape(forcer.answer(message)))
        if fb.passed:
            return tries
        message = fb.message
    return cap


def mean_tries(name: str) -> float:
    ex, keys, shape = BLIND[name]
    runs, cap = RUNS.get(name, VERDICT_RUNS), CAP.get(name, VERDICT_CAP)
    return statistics.mean(blind_tries(ex, keys, shape, seed, cap) for seed in range(runs))


@pytest.mark.parametrize("name", sorted(BLIND))
def test_blind_cycling_does_not_converge(name: str) -> None:
    tries = mean_tries(name)
    print(f"{name}: at least {tries:.1f} expected blind tries")
    assert tries >= MIN_TRIES, f"{name}: blind cycling reaches ✓ in {tries:.1f} tries on average"


def test_every_variant_exercise_is_measured() -> None:
    with_variants = {n for n in dir(exs) if isinstance(getattr(exs, n), Exercise)}
    with_variants = {n for n in with_variants if getattr(exs, n).variants is not None}
    # interleaving_ex (ex07) needs a server: tests/test_blind_tries_pg.py measures it
    assert with_variants == set(BLIND) | {"interleaving_ex"}


def test_the_measure_fails_without_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no fresh variants the same blind learner converges on a prediction in far fewer
    than MIN_TRIES tries: the measure can fail."""
    monkeypatch.setattr(kit, "VARIANT_AFTER", 10**9)
    assert mean_tries("predict_frontier_ex") < MIN_TRIES


def test_the_forcer_exploits_feedback_that_names_the_label() -> None:
    """Feedback as it was (naming the first wrong label) lets the blind learner converge: the
    learner reacts to feedback, so the measure tests the feedback too."""
    truth = {"A": "unknown_ballot", "B": "stale_base", "C": "commit", "D": "stale_watermark"}

    def naming_checker(answer: dict[str, Any]) -> str:
        wrong = next((k for k in truth if answer[k] != truth[k]), None)
        if wrong:
            raise Wrong(f"response {wrong}: not {answer[wrong]!r}")
        return "ok"

    old = Exercise("old", "q", naming_checker, ("h",), "s")
    keys = {k: DECISIONS for k in truth}
    tries = [blind_tries(old, keys, dict, seed, VERDICT_CAP) for seed in range(VERDICT_RUNS)]
    assert statistics.mean(tries) < MIN_TRIES / 2


def test_variants_are_deterministic_and_fresh() -> None:
    for ex, _, _ in BLIND.values():
        first = [ex.new_variant().message for _ in range(3)]
        ex.reset()
        again = [ex.new_variant().message for _ in range(3)]
        assert first == again and len(set(first)) == 3
        ex.reset()
        assert "(variant 0)" in ex.show().message and ex.question in ex.show().message


def test_a_wrong_streak_brings_a_variant_whose_solution_passes() -> None:
    for name, (ex, _, _) in BLIND.items():
        for _ in range(kit.VARIANT_AFTER):
            fb = ex.check({"no": "answer"} if name != "max_orphans_ex" else {99})
        assert FRESH in fb.message and ex.variant_number == 1, fb
        worked = ex.solution().message.rsplit("answer = ", 1)[1]
        assert ex.check(eval(worked)).passed, (name, worked)  # noqa: S307 - our own text
        ex.reset()
        assert ex.variant_number == 0 and ex.wrong_streak == 0


def test_variants_keep_the_shape_example_wrong_and_the_hints_answer_free() -> None:
    """Each variant's question states the answer's shape with an example that is not its
    answer, and no hint holds a variant's worked answer."""
    for ex, _, _ in BLIND.values():
        for _ in range(12):
            ex.new_variant()
            question = ex.current().question
            example = question.split("shaped like ", 1)[1].split(" (other", 1)[0]
            assert not ex.check(eval(example)).passed, (ex.name, question)  # noqa: S307
            answer = ex.solution().message.rsplit("answer = ", 1)[1]
            assert not any(answer in h for h in ex.hints), (ex.name, answer)
            ex.wrong_streak = 0
        ex.reset()
