"""A reader's own catalog loop as a design the workbook's drivers run (`LoopDesign`): the
explorer's runner for the search (`labkit.audit.loop`) and the real driver for the run against
the service (`labkit.audit.loop_service`).

FACTORY is called with one argument, a new in-memory SQLite connection (`labkit.db.connect`),
as `WatermarkLoop(conn)` is built; a loop that keeps its state in Python may ignore it. The loop
needs `WatermarkLoop`'s methods: `reserve()` returning a ballot (`ballot_id`, `watermark`,
`base_version`), `apply(response)` returning an outcome (`committed`, `reason`), `head_version()`
and `abandon(ballot_id)`. The head an independent reader sees is `head_version()`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import labkit.catalog.versions as catalog
from labkit import db, validation
from labkit.audit.inputs import UsageError
from labkit.catalog.loop import Response
from labkit.designs.arrival_orders import _Runner, explore_runner
from labkit.designs.design import Decision, Request
from labkit.designs.schedules import Exploration, ScheduleError, Step, as_steps

TICKS = 1000  # versions the explorer's driver asks for: more than any schedule of n deliveries


class LoopAuditError(UsageError):
    """The loop could not be audited (MODULE:FACTORY not found, the loop raised or hung): one
    line, exit 2."""


def load_factory(target: str) -> Callable[[Any], Any]:
    """The callable `target` (``MODULE:FACTORY``, FACTORY may be dotted) names; one-line
    `LoopAuditError` naming `target` when it cannot be imported or is not callable."""
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise LoopAuditError(f"{target!r}: write MODULE:FACTORY, e.g. myapp.catalog:make_loop")
    try:
        found: Any = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - the reader's module, whatever it raises
        raise LoopAuditError(f"{target}: cannot import {module}: {_one_line(exc)}") from None
    for part in name.split("."):
        if not hasattr(found, part):
            raise LoopAuditError(f"{target}: {module} has no {name}")
        found = getattr(found, part)
    if not callable(found):
        raise LoopAuditError(f"{target}: {name} is a {type(found).__name__}, not callable")
    return found  # type: ignore[no-any-return]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class LoopDesign:
    """The single-ballot design (`BallotDesign`) run on a reader's loop: keep `window` ballots
    in flight, apply every answer, give up (abandon) a ballot whose answer did not commit or
    that timed out, and reserve anew until the head reaches `ticks`. Which ballots are in flight
    is kept here, since the loop's interface does not list them."""

    name = "your loop"

    def __init__(
        self, factory: Callable[[Any], Any], *, window: int = 1, ticks: int = TICKS
    ) -> None:
        self.conn = db.connect(":memory:")  # copied by `fork_design` with the loop
        self.loop = factory(self.conn)
        self.window, self.ticks = window, ticks
        self.next_request = 1
        self.flight: dict[int, Request] = {}  # ballot id -> its request, oldest first
        self.bodies: dict[int, tuple[Any, ...]] = {}  # version -> the body that made it

    def _fill(self, replay_of: int | None = None) -> list[Request]:
        sends = []
        while self._head() < self.ticks and len(self.flight) < self.window:
            b = self.loop.reserve()
            try:
                ballot_id, fence, base = int(b.ballot_id), int(b.watermark), int(b.base_version)
            except (AttributeError, TypeError, ValueError):
                raise TypeError(
                    f"reserve() returned {b!r}: a ballot has int ballot_id, watermark and "
                    "base_version"
                ) from None
            req = Request(self.next_request, ballot_id, fence, base, self.tools_at(base), replay_of)
            self.next_request += 1
            self.flight[ballot_id] = req
            sends.append(req)
            replay_of = None
        return sends

    def _head(self) -> int:
        head = self.loop.head_version()
        if not validation.is_int(head):
            raise TypeError(f"head_version() returned {head!r}, not an int")
        return head

    def start(self, now: float) -> list[Request]:
        return self._fill()

    def on_response(self, request: Request, response: Response, now: float) -> Decision:
        """Apply the answer; a ballot in flight leaves flight (abandoned unless it committed)."""
        out = self.loop.apply(response)
        committed = getattr(out, "committed", None)
        if not isinstance(committed, bool):
            raise TypeError(f"apply() returned {out!r}: an outcome has a bool `committed`")
        reason = None if committed else str(getattr(out, "reason", None))
        if committed:
            self.bodies[self._head()] = tuple(response.tools)
        if self.flight.pop(response.ballot_id, None) is None:  # not in flight: nothing to refill
            return Decision(committed, reason)
        if not committed:
            self.loop.abandon(response.ballot_id)
        replay = None if committed else response.ballot_id
        return Decision(committed, reason, self._fill(replay))

    def on_timeout(self, request: Request, now: float) -> list[Request]:
        if request.ballot_id is None or self.flight.pop(request.ballot_id, None) is None:
            return []
        self.loop.abandon(request.ballot_id)
        return self._fill(replay_of=request.ballot_id)

    def crash_restart(self, now: float) -> list[Request]:
        raise ScheduleError("crash", "the loop audit plays deliveries and time-outs, no crash")

    def awaited(self) -> list[Request]:
        return list(self.flight.values())

    def settle(self, now: float) -> tuple[Request, Decision] | None:
        return None

    def stalled(self) -> str | None:
        return None

    def read_head(self) -> tuple[int, str]:
        head = self._head()
        return head, catalog.tools_hash(self.bodies.get(head, ()))

    def tools_at(self, version: int) -> tuple[Any, ...]:
        return self.bodies.get(version, ())


class _LoopRunner(_Runner):
    """The explorer's runner (`arrival_orders._Runner`) on a `LoopDesign`. A step the loop
    raises on is a one-line `LoopAuditError`; a loop `fork_design` cannot copy (it holds a
    connection of its own, a lock) is forked by playing the steps so far on a new loop."""

    def __init__(self, factory: Callable[[Any], Any], window: int) -> None:
        self.factory, self.window = factory, window
        design = LoopDesign(factory, window=window)
        super().__init__(design, window=window, ticks=TICKS, first_request=1, skews=None)

    def fork(self) -> _LoopRunner:
        try:
            return super().fork()  # type: ignore[return-value]
        except Exception:  # noqa: BLE001 - deepcopy of the reader's loop, whatever it raises
            other = _start(self.factory, self.window)
            for step in self.result.steps:
                other.step(step)
            return other

    def step(self, step: Step) -> None:
        try:
            super().step(step)
        except LoopAuditError:
            raise
        except Exception as exc:  # noqa: BLE001 - the reader's loop, whatever it raises
            done = [str(s) for s in self.result.steps] + [str(step)]
            raise LoopAuditError(f"the loop raised {_one_line(exc)} at {'; '.join(done)}") from None
        self.result.steps.append(step)


def _start(factory: Callable[[Any], Any], window: int) -> _LoopRunner:
    try:
        return _LoopRunner(factory, window)
    except LoopAuditError:
        raise
    except Exception as exc:  # noqa: BLE001 - the reader's factory, whatever it raises
        raise LoopAuditError(f"making or starting the loop raised {_one_line(exc)}") from None


def play(factory: Callable[[Any], Any], steps: Sequence[Step | str], *, window: int = 1) -> dict:
    """One schedule on a new loop, as data: the steps, each step's outcome and the head after
    it, the first fall (or None), and the requests sent at the start and after each step."""
    runner = _start(factory, window)
    sends = [sorted(runner.sent)]
    for step in as_steps(steps):
        before = set(runner.sent)
        runner.step(step)
        sends.append(sorted(set(runner.sent) - before))
    res = runner.result
    return {
        "steps": [str(s) for s in res.steps],
        "outcomes": res.labels,
        "heads": res.heads,
        "first_fall": res.first_rewind,
        "sends": sends,
    }


def explore_loop(
    factory: Callable[[Any], Any], n: int, *, window: int = 1, copies: int = 2, timeouts: int = 1
) -> Exploration:
    """Every schedule of `n` deliveries on new loops from `factory`, walked as the
    workbook's explorer walks a design (`arrival_orders.explore_runner`)."""
    return explore_runner(_start(factory, window), n, copies=copies, timeouts=timeouts)
