"""`audit loop MODULE:FACTORY`: a reader's own catalog loop played through Article 2's
inverted-arrival fixture and every arrival order of up to `n` deliveries.

FACTORY is called with one argument, a new in-memory SQLite connection (`labkit.db.connect`),
as `WatermarkLoop(conn)` is built; a loop that keeps its state in Python may ignore it. The loop
needs `WatermarkLoop`'s methods: `reserve()` returning a ballot (`ballot_id`, `watermark`,
`base_version`), `apply(response)` returning an outcome (`committed`, `reason`), `head_version()`
and `abandon(ballot_id)`. The driver (`LoopDesign`) plays the single-ballot design on it and
the workbook's replay explorer (`arrival_orders`: its runner, choices and branches) walks the
orders; the head an independent reader sees after every step is `head_version()`. Everything
runs in a child process behind a time and memory limit (`labkit.walls`).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import labkit.catalog.versions as catalog
from labkit import db, validation
from labkit.audit.findings import Finding, Report
from labkit.audit.inputs import UsageError
from labkit.catalog.loop import Response
from labkit.designs.arrival_orders import _Runner, explore_runner
from labkit.designs.design import Decision, Request
from labkit.designs.schedules import Exploration, ScheduleError, Step, as_steps
from labkit.walls import Raised, Stopped, run_walled

# Article 2's own fixture (`invert_late_tick`): the loop gives up on ballot 1 and reserves
# ballot 2, whose answer commits; then ballot 1's late answer lands. One commit fewer than the
# late tick (`PRESETS["inverted"]`), which the explorer's search covers.
FIXTURE: tuple[Step, ...] = (Step.timeout(), Step.deliver(2), Step.deliver(1))
SECONDS = 60.0  # the wall around the whole search
MEMORY_BYTES = 1024 * 2**20
MAX_N = 8  # deliveries per schedule; the replay walk is exponential in it
MAX_WINDOW = 4  # ballots in flight; each one more multiplies the orders
TICKS = 1000  # versions the driver asks for: more than any schedule of MAX_N deliveries reaches


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
    that timed out, and reserve anew. Which ballots are in flight is kept here, since the
    loop's interface does not list them."""

    name = "your loop"

    def __init__(self, factory: Callable[[Any], Any], *, window: int = 1) -> None:
        self.conn = db.connect(":memory:")  # copied by `fork_design` with the loop
        self.loop = factory(self.conn)
        self.window = window
        self.next_request = 1
        self.flight: dict[int, Request] = {}  # ballot id -> its request, oldest first
        self.bodies: dict[int, tuple[Any, ...]] = {}  # version -> the body that made it

    def _fill(self, replay_of: int | None = None) -> list[Request]:
        sends = []
        while self._head() < TICKS and len(self.flight) < self.window:
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


def _search(target: str, n: int, window: int) -> dict:
    """In the walled child: the fixture, the search and the shortest fall replayed, as data."""
    factory = load_factory(target)
    fixture = play(factory, FIXTURE, window=window)
    found = explore_loop(factory, n, window=window)
    fall = None if found.shortest is None else play(factory, found.shortest, window=window)
    return {"fixture": fixture, "orders": found.orders, "rewinding": found.rewinding, "fall": fall}


def audit_loop(
    target: str,
    *,
    n: int = 4,
    window: int = 1,
    seconds: float = SECONDS,
    memory: int = MEMORY_BYTES,
) -> Report:
    """Audit the loop `target` (``MODULE:FACTORY``) in a walled child process: a finding of kind
    `fall` holding the shortest falling schedule, or none. `LoopAuditError` (one line) when the
    loop cannot be imported, raises, or runs past `seconds` or `memory`. What the loop prints
    goes to stderr."""
    if not validation.is_int(n) or not 1 <= n <= MAX_N:
        raise UsageError(f"--n: deliveries per schedule, from 1 to {MAX_N}, got {n!r}")
    if not validation.is_int(window) or not 1 <= window <= MAX_WINDOW:
        raise UsageError(f"--window: ballots in flight, from 1 to {MAX_WINDOW}, got {window!r}")
    try:
        with contextlib.redirect_stdout(sys.stderr):
            found = run_walled(lambda: _search(target, n, window), seconds=seconds, memory=memory)
    except Raised as exc:
        if exc.type_name == LoopAuditError.__name__:
            raise LoopAuditError(exc.message) from None
        raise LoopAuditError(f"{target}: the audit raised {exc}") from None
    except Stopped as exc:
        raise LoopAuditError(f"{target}: the loop {exc} (n = {n})") from None
    return _report(target, n, window, found)


def _report(target: str, n: int, window: int, found: dict) -> Report:
    fixture, fall = found["fixture"], found["fall"]
    findings = []
    if fall is not None:
        at = fall["first_fall"]
        heads = fall["heads"]
        before = max([0, *heads[:at]])
        findings.append(
            Finding(
                "fall",
                float(at + 1),
                f"{target}: the head falls from {before} to {heads[at]} at step {at + 1} of "
                f"'{'; '.join(fall['steps'])}' (outcomes: {' '.join(fall['outcomes'])})",
                details={
                    "schedule": fall["steps"],
                    "outcomes": fall["outcomes"],
                    "heads": fall["heads"],
                    "sends": fall["sends"],
                },
            )
        )
    summary = {
        "loop": target,
        "n": n,
        "window": window,
        "fixture": "falls" if fixture["first_fall"] is not None else "holds",
        "fixture_schedule": fixture["steps"],
        "fixture_outcomes": fixture["outcomes"],
        "fixture_heads": fixture["heads"],
        "fixture_sends": fixture["sends"],
        "orders": found["orders"],
        "rewinding": found["rewinding"],
    }
    return Report("loop", tuple(findings), summary)
