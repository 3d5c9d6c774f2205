"""The machinery behind workshop exercises: check(), hint(), solution() with friendly feedback.

Each exercise checks a learner's answer by running it against real labkit code (SQLite, the
simulator). Only the learner's own code is guarded (`learner_call` and `learner_calls` here,
`sandboxes` for their SQL), and it runs behind walls enforced from outside (`walls`: a child
process killed at its time limit, capped in memory, with every process it started); a
collection answer is read there too (`learner_items`), so nothing endless reaches a checker.
An error anywhere else in a checker is a labkit bug and surfaces as one.
"""

from __future__ import annotations

import html
import itertools
import numbers
import operator
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import labkit.walls as walls
from labkit import validation
from labkit.exercises import progress


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

    status: Status | Literal["hint", "solution", "question"]
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


def learner_call(what: str, func: Callable[..., Any], *args: Any) -> Any:
    """Call the learner's own `func` behind the walls; what stops it becomes a `Wrong`.

    Wrap only the call into learner code: whatever labkit runs around it must fail loudly.
    """
    call = learner_calls(func, [args])[0]
    if call.error is not None:
        raise Wrong(f"{what} {call.error}")
    return call.value


@dataclass(frozen=True)
class Call:
    """One call of the learner's function: what it returned, its dict and list arguments as it
    left them (a function may change a dict it was given; other arguments come back as None),
    or, for the call that failed, why."""

    value: Any
    args: tuple[Any, ...]
    error: str | None = None


def learner_calls(func: Callable[..., Any], arg_sets: Iterable[tuple[Any, ...]]) -> list[Call]:
    """`func(*args)` for each argument tuple in turn, all in one walled child.

    Stops at the first call that raises, returns something that is not plain data, or hits a
    wall: that call is last, with its `error` ("raised KeyError: 'k'", "ran longer than 2 s,
    so it was stopped"). Only plain data crosses back (`walls.encode`): nothing the learner
    made runs in the checking process.
    """
    arg_sets = list(arg_sets)

    def task() -> list[list[Any]]:
        done: list[list[Any]] = []
        for args in arg_sets:
            try:
                value = func(*args)
            except MemoryError:
                mb = walls.MEMORY_BYTES // 2**20
                done.append([None, None, f"needed more than {mb} MB of memory, so it was stopped"])
                break
            except Exception as exc:  # noqa: BLE001 - the learner's exception, whatever it is
                done.append([None, None, f"raised {type(exc).__name__}: {exc}"])
                break
            kept = [a if type(a) in (dict, list) else None for a in args]
            try:
                walls.encode([value, kept])
            except (TypeError, RecursionError):
                kind = type(value).__name__
                done.append([None, None, f"returned a {kind}, not a plain value to check"])
                break
            done.append([value, kept, None])
        return done

    try:
        answers = walls.run_walled(task)
    except walls.Raised as exc:
        return [Call(None, (), f"raised {exc}")]
    except walls.Stopped as exc:
        return [Call(None, (), str(exc))]
    return [Call(value, tuple(kept or ()), error) for value, kept, error in answers]


MOST_ITEMS = 100  # a collection answer is read this far: a set of ids, a list of steps
_PLAIN = (type(None), bool, int, float, str, bytes)


def learner_items(
    value: Any,
    what: str,
    convert: Callable[[Any], Any],
    most: int = MOST_ITEMS,
    noun: str = "items",
) -> list[Any]:
    """The items of the learner's collection `value`, each through `convert` (which may raise
    `Wrong`), as a list; more than `most` of them (an endless iterator too) is `Wrong`.

    A list, tuple, set or frozenset of plain values is read here: nothing of the learner's can
    run. Anything else (a generator, a NumPy array, a pandas Series, the learner's own class)
    is read in a walled child, `most + 1` items at most, and comes back as plain data, so
    nothing endless is consumed and no learner code runs in the checking process.
    """
    if type(value) in (list, tuple, set, frozenset) and all(type(v) in _PLAIN for v in value):
        items = [convert(v) for v in value]
    else:
        items = _items_walled(value, what, convert, most)
    if len(items) > most:
        raise Wrong(
            f"more than {most:,} {noun} in {what}, more than any answer here needs "
            "(an endless iterator?)"
        )
    return items


def _items_walled(value: Any, what: str, convert: Callable[[Any], Any], most: int) -> list[Any]:
    """`learner_items` for a collection that is not plain: its first `most + 1` items read
    and converted in a walled child."""

    def task() -> list[Any]:
        got = []
        for item in itertools.islice(value, most + 1):
            try:
                got.append(convert(item))
            except Wrong as exc:
                return ["wrong", str(exc)]
        return ["ok", got]

    try:
        kind, body = walls.run_walled(task)
    except walls.Raised as exc:
        raise Wrong(f"reading {what} raised {exc}") from None
    except walls.Stopped as exc:
        raise Wrong(f"reading {what} {exc}") from None
    if kind == "wrong":
        raise Wrong(body)
    return body


class _Items:
    """A mapping's items, asked for only when iterated (in the walled child)."""

    def __init__(self, mapping: Mapping[Any, Any]) -> None:
        self.mapping = mapping

    def __iter__(self) -> Any:
        return iter(self.mapping.items())


SHOWN_CHARS = 80


def shown(value: Any) -> str:
    """A learner's value as feedback quotes it: its repr, cut to `SHOWN_CHARS`; an integer too
    long to print is named by its size (Python refuses to print ints over 4,300 digits)."""
    if validation.is_int(value) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit integer"
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - the learner's own __repr__ may raise anything
        return f"a {type(value).__name__} whose repr raised {type(exc).__name__}"
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def listing(items: Iterable[Any]) -> str:
    """`1, 3, 5`, or `none` for no items: how feedback names a few ids."""
    return ", ".join(str(i) for i in items) or "none"


def whole(value: Any, what: str) -> int:
    """`value` as a Python int if it is a whole number of any integer type (Python, NumPy,
    pandas: whatever labkit's own DataFrames hand out); else `Wrong` naming the type."""
    if isinstance(value, bool):
        raise Wrong(f"{what} must be a whole number; {shown(value)} is a bool")
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        raise Wrong(f"{what} must be a number, not the text {shown(value)}: drop the quotes")
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        number = float(value)
        if number.is_integer():  # 3.0, or a NumPy float64 from a DataFrame: the meaning is clear
            return int(number)
        raise Wrong(f"{what} must be a whole number; {shown(value)} is not")
    try:
        return operator.index(value)
    except TypeError:
        raise Wrong(
            f"{what} must be a whole number; {shown(value)} is a {type(value).__name__}"
        ) from None


def label_key(key: Any) -> str:
    """A label as the learner typed it ('a', ' B ') in the form the questions print it."""
    return str(key).strip().upper()


def by_label(answer: Mapping[Any, Any]) -> dict[str, Any]:
    """The learner's dict with its labels in the questions' form ('a' -> 'A'); `Wrong` if two
    keys name the same label. A mapping that is not a dict is read in a walled child
    (`learner_items`), and its values must then be plain data."""
    if isinstance(answer, dict):
        pairs = list(dict.items(answer))  # a dict subclass's own items() is never called
    else:
        pairs = learner_items(_Items(answer), "your dict", _plain_pair, noun="entries")
    out: dict[str, Any] = {}
    for key, value in pairs:
        label = label_key(key)
        if label in out:
            raise Wrong(f"label {label} is given twice; give each label once")
        out[label] = value
    return out


def _plain_pair(pair: Any) -> tuple[str, Any]:
    """In the walled child: one entry of a mapping that is not a dict, as (label, value),
    the value plain data that can cross the wall."""
    key, value = pair
    try:
        walls.encode(value)
    except (TypeError, RecursionError):
        raise Wrong(
            f"give a plain dict: the value for {label_key(key)} is a {type(value).__name__}, "
            "which a check reads only from a dict; dict(yours) makes one"
        ) from None
    return label_key(key), value


def _forms(word: str) -> set[str]:
    """A word and its -s and -ed forms: reject, rejects, rejected; commit, committed."""
    return {word, word + "s", word + "d", word + "ed", word + word[-1] + "ed"}


def word_choice(value: str, choices: Sequence[str]) -> str | None:
    """The one of `choices` that `value` names, whatever its case, punctuation, spaces, '_' or
    '-' between the words, and -s or -ed endings ('Rejected.' names 'reject', 'Stale-Watermark'
    names 'stale_watermark'); None if it names none of them. Every word answer is read so."""
    said = re.findall(r"[a-z]+", value.lower())
    for choice in choices:
        words = re.findall(r"[a-z]+", choice.lower())
        if len(said) == len(words) and all(
            s in _forms(w) for s, w in zip(said, words, strict=True)
        ):
            return choice
    return None


@dataclass(frozen=True)
class Variant:
    """One draw of an exercise: the question it asks, the checker that judges an answer to it
    (the truth computed by labkit from the variant's data) and its worked answer."""

    question: str
    checker: Callable[[Any], str | None]
    solution_text: str


VARIANT_AFTER = 3  # wrong tries in a row after which a variant exercise draws a fresh variant


def variant_rng(name: str, number: int) -> random.Random:
    """The random source of variant `number` of exercise `name`: the same draw every time."""
    return random.Random(f"{name}#{number}")


@dataclass
class Exercise:
    """One exercise: a question, a checker that raises `Wrong`, a ladder of hints and a worked
    solution.

    The checker raises `Wrong` to explain a wrong answer; any other exception is a bug in the
    checker or in labkit and propagates. `hints` climbs from a nudge to the method to a
    near-answer with a gap to fill; only `solution()` gives the worked answer. An exercise with
    `variants` (a function of a random source, giving new data for the same idea) draws a fresh
    variant after `VARIANT_AFTER` wrong tries in a row or on `new_variant()`, so answers tried
    blindly do not converge; variant 0 is the question as written.
    """

    name: str
    question: str
    checker: Callable[[Any], str | None]
    hints: tuple[str, ...]
    solution_text: str
    variants: Callable[[random.Random], Variant] | None = None
    variant_number: int = field(default=0, init=False, compare=False)
    wrong_streak: int = field(default=0, init=False, compare=False)
    _drawn: dict[int, Variant] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        _ALL.append(self)

    def current(self) -> Variant:
        """The variant being asked now (variant 0: the question as written)."""
        if self.variant_number == 0 or self.variants is None:
            return Variant(self.question, self.checker, self.solution_text)
        k = self.variant_number
        if k not in self._drawn:
            self._drawn[k] = self.variants(variant_rng(self.name, k))
        return self._drawn[k]

    def show(self) -> Feedback:
        """The question being asked now, with its data, as a notebook cell prints it."""
        return Feedback(
            "question", f"{self.name} (variant {self.variant_number}): {self.current().question}"
        )

    def new_variant(self) -> Feedback:
        """Draw the next variant (new data, the same idea) and show it."""
        if self.variants is None:
            return Feedback("question", f"{self.name} has one form only: {self.question}")
        self.variant_number += 1
        self.wrong_streak = 0
        return self.show()

    def reset(self) -> None:
        """Back to variant 0 with no wrong streak: the exercise as a fresh kernel meets it."""
        self.variant_number = 0
        self.wrong_streak = 0

    @progress.recorded("check")
    def check(self, answer: Any = BLANK) -> Feedback:
        """Run the learner's answer against the real code and say what is right or wrong."""
        if answer is BLANK or isinstance(answer, _Blank):
            return Feedback(
                "not_attempted",
                f"{self.name}: replace ____ with your answer, then run this cell again. "
                f"Stuck? .hint(1) to .hint({len(self.hints)}) climb from a nudge to a "
                "near-answer.",
            )
        try:
            note = self.current().checker(answer)
        except Wrong as exc:
            return Feedback("incorrect", f"{self.name}: {exc}{self._after_wrong()}")
        self.wrong_streak = 0
        return Feedback("correct", f"{self.name}: {note or 'well done.'}")

    def _after_wrong(self) -> str:
        """Count a wrong try; after `VARIANT_AFTER` in a row, draw a fresh variant and say so."""
        if self.variants is None:
            return ""
        self.wrong_streak += 1
        if self.wrong_streak < VARIANT_AFTER:
            return ""
        self.new_variant()
        return (
            f"\n{VARIANT_AFTER} wrong tries in a row, so here is a fresh variant (new data, the "
            f"same idea; .show() prints it again): {self.current().question}"
        )

    @progress.recorded("hint")
    def hint(self, level: int = 1) -> Feedback:
        """Hint 1 points the way; each level says more; the last leaves a gap to fill."""
        n = len(self.hints)
        if type(level) is not int or level not in range(1, n + 1):
            return Feedback("hint", f"there are {n} hints, .hint(1) to .hint({n}), not {level!r}")
        return Feedback("hint", f"({level} of {n}) {self.hints[level - 1]}")

    @progress.recorded("solution")
    def solution(self) -> Feedback:
        """The worked answer to the variant being asked, and the only place it is written."""
        return Feedback("solution", f"(the answer) {self.current().solution_text}")


_ALL: list[Exercise] = []


def reset_all() -> None:
    """Every exercise back to variant 0 with no wrong streak (a test's fresh start)."""
    for ex in _ALL:
        ex.reset()
