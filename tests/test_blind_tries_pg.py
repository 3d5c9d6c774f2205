"""ex07's prediction ("Predict the orphans") against blind cycling, on a real PostgreSQL
server: a learner guessing sets of ids 1..6 per interleaving, reacting to feedback, needs at
least `MIN_TRIES` tries on average, and so does one who tries the commonest answers first.
(tests/test_blind_tries.py measures the exercises that need no server.)"""

from __future__ import annotations

import collections
import random
import re
import statistics
from collections.abc import Iterator

import pytest
from fresh_exercises import fresh_exercises  # noqa: F401 - autouse: variant 0 per test

import labkit.exercises as exs
from labkit.exercises import frontier_pg, kit
from labkit.exercises.kit import Exercise
from labkit.exercises.sandboxes import pg as pg_sandbox

MIN_TRIES = 30
# A variant's first check plays both interleavings on the server (0.3-0.9 s), so a few
# learners, each stopped at CAP tries and then counted as CAP: the mean is a floor.
RUNS, CAP = 3, 36
LABELS = ("P", "Q")
FRESH = "fresh variant"
EX = exs.interleaving_ex


class SetForcer:
    """A blind learner over sets of ids 1..6 per interleaving: never repeats an answer refused
    for the current variant, keeps to the id range a message states, changes only the
    interleaving a message names, and forgets all that when a fresh variant arrives."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._forget()

    def _forget(self) -> None:
        self.tried: set[tuple[frozenset[int], ...]] = set()
        self.top = dict.fromkeys(LABELS, 6)
        self.last: dict[str, frozenset[int]] | None = None

    def answer(self, message: str | None) -> dict[str, set[int]]:
        if message is not None and FRESH in message:
            self._forget()
        named: list[str] = []
        if message is not None:
            for label, top in re.findall(r"interleaving (\w) only takes ids 1 to (\d+)", message):
                self.top[label] = int(top)
            named = [k for k in LABELS if re.search(rf"(^|: ){k}:", message)]
        for _ in range(500):
            pick = dict(self.last) if named and self.last else {}
            for k in LABELS:
                if k not in pick or k in named:
                    ids = range(1, self.top[k] + 1)
                    pick[k] = frozenset(i for i in ids if self.rng.random() < 0.5)
            key = tuple(pick[k] for k in LABELS)
            if key not in self.tried:
                break
        self.tried.add(key)
        self.last = pick
        return {k: set(v) for k, v in pick.items()}


def blind_tries(ex: Exercise, seed: int, cap: int) -> int:
    """Tries one blind learner needs to reach ✓ (at most `cap`), from a fresh exercise."""
    ex.reset()
    forcer = SetForcer(random.Random(seed))
    message = None
    for tries in range(1, cap + 1):
        fb = ex.check(forcer.answer(message))
        if fb.passed:
            return tries
        message = fb.message
    return cap


@pytest.fixture
def on_server(pg_dsn: str) -> Iterator[str]:
    pg_sandbox.use_server(pg_dsn)
    yield pg_dsn
    pg_sandbox.use_server(None)


@pytest.mark.postgres
@pytest.mark.slow
def test_blind_cycling_does_not_converge_on_the_orphans(on_server: str) -> None:
    tries = statistics.mean(blind_tries(EX, seed, CAP) for seed in range(RUNS))
    print(f"interleaving_ex: at least {tries:.1f} expected blind tries")
    assert tries >= MIN_TRIES, f"blind cycling reaches ✓ in {tries:.1f} tries on average"


@pytest.mark.postgres
@pytest.mark.slow
def test_the_forcer_reaches_a_variant_it_can_guess(on_server: str) -> None:
    """The learner is real: on a variant with few ids and no fresh variants it gets there."""
    ex = EX
    ex.reset()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kit, "VARIANT_AFTER", 10**9)
        tries = blind_tries(ex, 0, 200)
    assert tries < 200  # variant 0: P takes 4 ids, Q 2, so 2**6 answers at most


# --- a learner who tries the commonest answers first (no server: the step model draws) -------

DRAWS = 150


def commonest_answer_tries() -> float:
    """Expected tries for a learner who, in each variant, tries the three commonest answers
    (as measured over DRAWS variants) before a fresh variant arrives. P and Q are drawn apart,
    so a pair's share is the product of the two sets' shares."""
    shares: collections.Counter[tuple[int, ...]] = collections.Counter()
    for k in range(1, DRAWS + 1):
        drawn = EX.variants(kit.variant_rng(EX.name, k))
        shares.update(frontier_pg.step_model(s).orphans for s in drawn.scripts.values())
    p = [n / (2 * DRAWS) for _, n in shares.most_common()]
    top = sorted((a * b for a in p for b in p), reverse=True)[: kit.VARIANT_AFTER]
    hit = sum(top)
    per_variant = sum(k * share for k, share in enumerate(top, 1)) + kit.VARIANT_AFTER * (1 - hit)
    return per_variant / hit


@pytest.mark.slow
def test_the_commonest_answers_do_not_converge() -> None:
    tries = commonest_answer_tries()
    print(f"interleaving_ex, commonest answers first: {tries:.1f} expected tries")
    assert tries >= MIN_TRIES


@pytest.mark.slow
def test_the_commonest_answer_measure_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 'no orphans' drawn half the time, trying {'P': set(), 'Q': set()} first wins a
    quarter of the variants: the measure sees it."""
    monkeypatch.setattr(frontier_pg, "NONE_SHARE", 0.5)
    assert commonest_answer_tries() < MIN_TRIES


def test_variants_are_deterministic_and_fresh() -> None:
    first = [EX.new_variant().message for _ in range(3)]
    EX.reset()
    again = [EX.new_variant().message for _ in range(3)]
    assert first == again and len(set(first)) == 3
    EX.reset()
    assert "(variant 0)" in EX.show().message and EX.question in EX.show().message


def test_variants_keep_the_shape_example_wrong_and_the_hints_answer_free() -> None:
    """Each variant's shape example is refused (before any server: it names ids no
    interleaving takes) and no hint holds a variant's worked answer."""
    for _ in range(12):
        EX.new_variant()
        question = EX.current().question
        example = question.split("shaped like ", 1)[1].split(" (other", 1)[0]
        assert not EX.check(eval(example)).passed, question  # noqa: S307 - our own text
        answer = EX.solution().message.rsplit("answer = ", 1)[1]
        assert not any(answer in h for h in EX.hints), answer
        EX.wrong_streak = 0
