"""The arrival-schedule vocabulary shared by the replay on SQLite (`arrival_orders`), the
in-memory search (`arrival_search`) and the workbench (`schedule_builder`): a step as a small
type, its text form, its error, and what an exploration found.

A `Step` is a `Kind` and, for most kinds, a request number: `deliver` request N's response
(`dup` is the same step, written for a delivery known to repeat an earlier one), `stale` (its
first delivery, with a body computed from the version before its base), `timeout` (give up
on the oldest wait, or on request N's) and `crash` (the loop dies and restarts). Modules pass
steps as this type; text is read (`parse_step`) and written (`str(step)`) only where a person
types or reads a schedule: ``"deliver N"`` (or ``"N"``), ``"dup N"``, ``"stale N"``,
``"timeout"`` / ``"timeout N"``, ``"crash"``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from labkit import validation


class Kind(StrEnum):
    """What a step does (and what an outcome was); the value is the verb a person types."""

    DELIVER = "deliver"
    DUP = "dup"
    STALE = "stale"
    TIMEOUT = "timeout"
    CRASH = "crash"


_RESPONSES = (Kind.DELIVER, Kind.DUP, Kind.STALE)  # the kinds that name a response

_GRAMMAR = "write 'deliver N' (or 'N', 'dup N'), 'stale N', 'timeout [N]' or 'crash'"
MAX_STEP_TEXT = 40  # longer text is no step; refused before any other look at it
_SEPARATOR = re.compile(r"[\s:]+", re.ASCII)
_NUMBER = re.compile(r"r?([0-9]{1,9})")  # ASCII digits only: int() would take '²' or '٣'


class ScheduleError(ValueError):
    """A step that is not in the grammar, or that the loop cannot take now.

    `text` is the step as written and `problem` what is wrong with it, in words for a reader;
    the message adds `detail` (context for a programmer, e.g. which requests were sent).
    """

    def __init__(self, text: str, problem: str, detail: str = "") -> None:
        self.text, self.problem = text, problem
        super().__init__(f"{self.where()}: {problem}{detail}")

    @property
    def shown(self) -> str:
        """The step's text as a message quotes it (long text cut short)."""
        return self.text if len(self.text) <= MAX_STEP_TEXT else self.text[:MAX_STEP_TEXT] + "..."

    def where(self) -> str:
        """Which step the message is about."""
        return f"step {self.shown!r}"


@functools.total_ordering
@dataclass(frozen=True, slots=True)
class Step:
    """One step of an arrival schedule: `kind` and the request it names (None for `crash`,
    and for a `timeout` that gives up on the oldest wait).

    Steps sort by kind, then request number (how the search breaks ties between schedules).
    """

    kind: Kind
    request: int | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", Kind(self.kind))
        except ValueError:
            known = ", ".join(Kind)
            raise ValueError(f"unknown step kind {self.kind!r}; expected one of {known}") from None
        if self.request is None:
            if self.kind in _RESPONSES:
                raise ValueError(f"a '{self.kind}' step names a request")
        elif self.kind == Kind.CRASH:
            raise ValueError("a 'crash' step names no request")
        elif not validation.is_int(self.request):
            raise ValueError(f"a step's request is an int, got {self.request!r}")

    def __str__(self) -> str:
        return self.kind.value if self.request is None else f"{self.kind.value} {self.request}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Step):
            return NotImplemented
        return self._order < other._order

    @property
    def _order(self) -> tuple[str, int]:
        return self.kind, -1 if self.request is None else self.request

    @classmethod
    def deliver(cls, request: int) -> Step:
        """Request `request`'s response arrives (a duplicate if it arrived before)."""
        return _made(Kind.DELIVER, request)

    @classmethod
    def dup(cls, request: int) -> Step:
        """Request `request`'s response arrives again (plays as `deliver`)."""
        return _made(Kind.DUP, request)

    @classmethod
    def stale(cls, request: int) -> Step:
        """Request `request`'s response arrives first, its body built on an older version."""
        return _made(Kind.STALE, request)

    @classmethod
    def timeout(cls, request: int | None = None) -> Step:
        """The loop gives up on its oldest wait, or on request `request`'s."""
        return _made(Kind.TIMEOUT, request)

    @classmethod
    def crash(cls) -> Step:
        """The loop dies and restarts from its store."""
        return _made(Kind.CRASH, None)


_MADE: dict[tuple[Kind, int | None], Step] = {}
_MADE_MAX = 4096


def _made(kind: Kind, request: int | None) -> Step:
    """The one `Step(kind, request)`: steps are frozen, so equal steps can share an object, and
    the searches ask for the same few millions of times. Anything but an int or None is built
    (and refused) afresh, so `True` never passes for request 1."""
    if request is not None and type(request) is not int:
        return Step(kind, request)
    step = _MADE.get((kind, request))
    if step is None:
        if len(_MADE) >= _MADE_MAX:
            _MADE.clear()
        step = _MADE[kind, request] = Step(kind, request)
    return step


def parse_step(text: str) -> Step:
    """The step a person wrote, e.g. ``"deliver 3"``, ``"3"``, ``"timeout"``; `ScheduleError`
    (naming the text) for anything else, including non-ASCII digits and text over 40 chars."""
    if not isinstance(text, str):
        raise ScheduleError(repr(text), f"not text (of type {type(text).__name__}); {_GRAMMAR}")
    if len(text) > MAX_STEP_TEXT:
        raise ScheduleError(text, f"longer than {MAX_STEP_TEXT} characters; {_GRAMMAR}")
    words = [w for w in _SEPARATOR.split(text) if w]
    verb = words[0].lower() if words else ""
    if len(words) == 1:
        number = _NUMBER.fullmatch(words[0])
        if number:
            return Step(Kind.DELIVER, int(number.group(1)))
        if verb in (Kind.TIMEOUT, Kind.CRASH):
            return Step(Kind(verb))
    elif len(words) == 2 and verb in (*_RESPONSES, Kind.TIMEOUT):
        number = _NUMBER.fullmatch(words[1])
        if number:
            return Step(Kind(verb), int(number.group(1)))
    raise ScheduleError(text, f"not a step; {_GRAMMAR}")


def as_step(step: Step | str) -> Step:
    """`step` itself, or the step its text names (`parse_step`)."""
    return step if isinstance(step, Step) else parse_step(step)


def as_steps(steps: Iterable[Step | str]) -> list[Step]:
    """Each of `steps` as a `Step` (text parsed, see `as_step`)."""
    if isinstance(steps, str):
        raise ScheduleError(
            steps, "one string where a list of steps was expected, e.g. ['timeout', 'deliver 2']"
        )
    return [as_step(s) for s in steps]


def format_schedule(steps: Iterable[Step], sep: str = "; ") -> str:
    """Steps as a person reads them, e.g. ``"timeout; deliver 2"``."""
    return sep.join(map(str, steps))


def outcome_label(
    kind: Kind, request: int | None, committed: bool | None, reason: str | None
) -> str:
    """What one step did, as short text for tables and captions (e.g. ``12:commit``,
    ``12:stale_base``, ``timeout 12``): the one wording of a run's outcomes on the real design
    (`arrival_orders.StepOutcome`) and on its model (`model.ModelOutcome`)."""
    if kind == Kind.CRASH:
        return "crash+restart"
    if kind == Kind.TIMEOUT:
        return "timeout: nothing awaited" if request is None else f"timeout {request}"
    return f"{request}:{'commit' if committed else reason}"


@dataclass(frozen=True)
class Exploration:
    """Every arrival order of a small run for one design."""

    design: str
    orders: int
    rewinding: int
    shortest: list[Step] | None
