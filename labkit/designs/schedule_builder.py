"""A schedule composed one step at a time, played on every design side by side.

`ScheduleBuilder` is the model behind the arrival-order workbench (notebooks 04 and 05): the reader
adds steps (`labkit.designs.schedules.Step`, or types a whole schedule as text), undoes them or
starts from a preset, and every design in `labkit.designs.registry.DESIGNS` plays the same steps
through `labkit.designs.arrival_orders`' runner. Designs send their own requests (at the start,
after a commit, after a give-up), so a step can name a request one design sent and another did not:
that design skips the step and says why. A step no design can take is refused.

For each design the builder keeps what a lane diagram needs (`Lane`: every request from its
send to its arrivals or give-up) and a verdict (`DesignRun`: commits, rejects by reason, the
falls an independent reader saw). For `pipelined` a lane also records an answer held until the
head reaches its fence, the step the hold was decided at, and a flush (refused, tick replayed).
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import labkit.designs.registry as design_registry
from labkit.catalog.pipeline import HELD
from labkit.designs.arrival_orders import StepOutcome, _Runner, explore
from labkit.designs.registry import check_design
from labkit.designs.schedules import (
    Exploration,
    Kind,
    ScheduleError,
    Step,
    as_step,
    format_schedule,
    parse_step,
)

ARRIVED, DUPLICATE, GAVE_UP = "arrived", "duplicate", "gave up"
SETTLED = "settled"  # a held answer decided once the head reached its fence (`pipelined`)
FLUSHED = "flushed"  # the status of a request refused because a predecessor was, its tick replayed
LOST = "lost in crash"  # the status of a request the loop forgot when it crashed
EXPLORE_N = 5  # deliveries the "shortest break" search explores (fast: milliseconds)


class StepError(ScheduleError):
    """A schedule step that cannot be read or taken; names the step by number and text."""

    def __init__(self, index: int, text: str, problem: str) -> None:
        self.index = index
        super().__init__(text, problem)

    def where(self) -> str:
        """The step by number and text, e.g. ``step 2 ('deliver 9')``."""
        return f"step {self.index} ({self.shown!r})"


@dataclass(frozen=True)
class Preset:
    """A named starting schedule for the workbench."""

    name: str
    label: str
    steps: tuple[Step, ...]


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "inverted",
            "Article 2's late tick (inverted arrival)",
            (Step.timeout(1), Step.deliver(2), Step.deliver(3), Step.deliver(1)),
        ),
        Preset(
            "duplicate",
            "duplicate delivery (same response twice)",
            (Step.deliver(1), Step.dup(1), Step.deliver(2), Step.dup(2)),
        ),
        Preset(
            "stale_body",
            "stale body (built on an older version)",
            (Step.deliver(1), Step.deliver(2), Step.stale(3), Step.deliver(4)),
        ),
        Preset(
            "retry_after_commit",
            "retry after commit (redelivered later)",
            (Step.deliver(1), Step.deliver(2), Step.dup(1), Step.deliver(3)),
        ),
        Preset(
            "stall",
            "stall, then give up (answer lands late)",
            (
                Step.timeout(1),
                Step.timeout(2),
                Step.deliver(3),
                Step.deliver(4),
                Step.deliver(1),
                Step.deliver(2),
            ),
        ),
        Preset(
            "crash",
            "crash and restart (ballot survives)",
            (Step.crash(), Step.deliver(1), Step.deliver(2), Step.deliver(3)),
        ),
    )
}


def parse_schedule(text: str) -> list[Step]:
    """The steps of a typed schedule, separated by ``;``, ``,`` or line breaks (blank entries
    ignored). Raises `StepError` naming the first entry that is not a step."""
    pieces = [s for s in (p.strip() for p in re.split(r"[;,\n]", text)) if s]
    steps = []
    for i, piece in enumerate(pieces, start=1):
        try:
            steps.append(parse_step(piece))
        except ScheduleError as exc:
            raise StepError(i, piece, exc.problem) from None
    return steps


@dataclass(frozen=True)
class LaneEvent:
    """Something that happened to one request at one step."""

    step: int
    kind: str  # ARRIVED (first delivery), DUPLICATE (a later one), GAVE_UP or SETTLED
    committed: bool | None = None
    reason: str | None = None
    stale: bool = False

    @property
    def held(self) -> bool:
        """The answer arrived early and waits for the head to reach its fence (not refused)."""
        return self.reason == HELD


@dataclass
class Lane:
    """One request from its send (`sent_at`, 0 = at the start) to what became of it."""

    request_id: int
    sent_at: int
    replay_of: int | None = None
    events: list[LaneEvent] = field(default_factory=list)
    lost_at: int | None = None  # the crash after which the restarted loop no longer awaited it
    ballot_id: int | None = None
    flushed_at: int | None = None  # the step a predecessor's refusal flushed it (`pipelined`)

    @property
    def arrived_at(self) -> int | None:
        """The step its response first arrived, if it did."""
        return next((e.step for e in self.events if e.kind == ARRIVED), None)

    @property
    def gave_up_at(self) -> int | None:
        """The step the loop gave up waiting for it, if it did."""
        return next((e.step for e in self.events if e.kind == GAVE_UP), None)

    @property
    def held_at(self) -> int | None:
        """The step its answer arrived and was held, if it was (`pipelined`)."""
        return next((e.step for e in self.events if e.kind == ARRIVED and e.held), None)

    @property
    def settled(self) -> LaneEvent | None:
        """The decision on its held answer, taken when the head reached its fence, if taken."""
        return next((e for e in self.events if e.kind == SETTLED), None)

    @property
    def status(self) -> str:
        """``in flight``, ``delivered``, ``duplicated``, ``given up``, ``lost in crash``,
        ``arrived late`` (after a give-up, a crash or a flush), and for `pipelined` ``held``,
        ``held, committed``, ``held, refused`` or ``flushed``."""
        arrived, gave_up, lost = self.arrived_at, self.gave_up_at, self.lost_at
        flushed = self.flushed_at
        if arrived is None:
            if gave_up is not None:
                return "given up"
            if flushed is not None:
                return FLUSHED
            return "in flight" if lost is None else LOST
        if any(at is not None and at < arrived for at in (gave_up, lost, flushed)):
            return "arrived late"
        if self.held_at is not None:
            settled = self.settled
            if settled is not None:
                return "held, committed" if settled.committed else "held, refused"
            return "held" if flushed is None else FLUSHED
        return "duplicated" if any(e.kind == DUPLICATE for e in self.events) else "delivered"


@dataclass(frozen=True)
class Fall:
    """A step after which the reader saw the head below a version it had already seen."""

    step: int
    seen: int  # the highest version the reader had seen before
    head: int  # the version it saw now


@dataclass
class DesignRun:
    """One design playing the builder's schedule: per step its outcome (None where the step
    did not apply, see `skipped`), the head after it (`heads[0]` is the start) and its lanes."""

    design: str
    heads: list[int] = field(default_factory=lambda: [0])
    outcomes: list[StepOutcome | None] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    lanes: dict[int, Lane] = field(default_factory=dict)
    crashes: list[int] = field(default_factory=list)
    overwrites: int = 0
    replays: int = 0
    # the first answer refused although it came in order: (step, request id, reason)
    in_order_refusal: tuple[int, int, str] | None = None

    @property
    def commits(self) -> int:
        """Responses the design wrote into the catalog (held ones when the head reached them)."""
        return sum(1 for o in self.outcomes if o is not None and o.committed) + sum(
            1 for o in self.outcomes if o is not None for s in o.settled if s.committed
        )

    @property
    def rejects(self) -> Counter[str]:
        """Rejected responses by reason (a held answer is not rejected: it waits)."""
        found = Counter(
            str(o.reason)
            for o in self.outcomes
            if o is not None and o.kind == Kind.DELIVER and not o.committed and o.reason != HELD
        )
        found.update(
            str(s.reason)
            for o in self.outcomes
            if o is not None
            for s in o.settled
            if not s.committed
        )
        return found

    @property
    def held(self) -> int:
        """Answers that arrived early and were held for the head to reach their fence."""
        return sum(1 for lane in self.lanes.values() if lane.held_at is not None)

    @property
    def flushed(self) -> int:
        """Requests refused because a predecessor was, their ticks replayed (`pipelined`)."""
        return sum(1 for lane in self.lanes.values() if lane.flushed_at is not None)

    @property
    def falls(self) -> list[Fall]:
        """Each step at which the reader saw the head drop below what it had seen before."""
        found, seen = [], self.heads[0]
        for step, (before, head) in enumerate(itertools.pairwise(self.heads), start=1):
            if head < before and head < seen:
                found.append(Fall(step, seen, head))
            seen = max(seen, head)
        return found

    @property
    def steps_below(self) -> int:
        """Steps after which the head was below the highest version already seen."""
        return sum(1 for o in self.outcomes if o is not None and o.rewind)

    @property
    def verdict(self) -> str:
        """One line: did a reader see this design's catalog fall on this schedule?"""
        falls = self.falls
        if not falls and self.overwrites:
            return (
                f"head never fell, but {self.overwrites} commit(s) replaced a version's "
                "tools in place (lost update)"
            )
        if not falls:
            return "safe on this schedule: the head never fell"
        f = falls[0]
        more = f" (+{len(falls) - 1} more)" if len(falls) > 1 else ""
        return f"BROKEN: reader saw v{f.seen} \u2192 v{f.head} at step {f.step}{more}"


@dataclass(frozen=True)
class Availability:
    """Whether a step can be added now, and if not, why (in words for the reader)."""

    ok: bool
    why: str = ""


def current_designs() -> tuple[str, ...]:
    """The designs registered right now (read at call time: new designs join by themselves)."""
    return tuple(design_registry.DESIGNS)


class ScheduleBuilder:
    """Steps added one at a time (or loaded), played on every design at once.

    `steps` is the schedule, `runs` maps design -> `DesignRun`. `add`, `load`, `undo`,
    `reset` and `use_preset` change it; `availability` says whether a step can be added.
    Requests are numbered from 1 in the order each design sends them. `window` is `fenced`'s
    hedge width, `depth` (default: `window`) the ticks `pipelined` keeps in flight; `set_depth`
    changes the depth and plays the schedule again. `designs` may be any of `ALL_DESIGNS`.
    """

    def __init__(
        self,
        designs: Sequence[str] | None = None,
        *,
        window: int = 2,
        ticks: int = 1000,
        depth: int | None = None,
    ) -> None:
        self.designs = tuple(designs) if designs is not None else current_designs()
        for d in self.designs:
            check_design(d)
        self.window, self.ticks = window, ticks
        self.depth = window if depth is None else depth
        self.steps: list[Step] = []
        self._start()

    def window_of(self, design: str) -> int:
        """The window `design` runs with here: `depth` for `pipelined`, else `window`."""
        return self.depth if design == "pipelined" else self.window

    # --- playing -----------------------------------------------------------------------

    def _start(self) -> None:
        self._thread = threading.get_ident()
        self._runners = {
            d: _Runner(d, window=self.window_of(d), ticks=self.ticks, first_request=1, skews=None)
            for d in self.designs
        }
        self.runs = {d: DesignRun(d) for d in self.designs}
        for d in self.designs:
            self._note_sends(d, 0)
        self._digest = {d: self._runners[d].d.read_head()[1] for d in self.designs}

    def _note_sends(self, design: str, step: int) -> None:
        runner, run = self._runners[design], self.runs[design]
        for rid, req in runner.sent.items():
            if rid not in run.lanes:
                run.lanes[rid] = Lane(rid, step, req.replay_of, ballot_id=req.ballot_id)
                if req.replay_of is not None:
                    _flush(run, req.replay_of, step)
        run.replays = runner.result.replays

    def _play(self, design: str, played: Step) -> None:
        runner, run = self._runners[design], self.runs[design]
        step = len(run.outcomes) + 1
        try:
            runner.step(played)
        except ScheduleError as exc:
            run.outcomes.append(None)
            run.skipped[step] = exc.problem
            run.heads.append(run.heads[-1])
            return
        outcome = runner.result.outcomes[-1]
        run.outcomes.append(outcome)
        run.heads.append(outcome.head)
        version, digest = runner.d.read_head()
        if version == run.heads[-2] and digest != self._digest[design]:
            run.overwrites += 1
        self._digest[design] = digest
        if outcome.kind == Kind.CRASH:
            run.crashes.append(step)
            awaited = {r.request_id for r in runner.d.awaited()}
            for lane in run.lanes.values():
                if lane.status == "in flight" and lane.request_id not in awaited:
                    lane.lost_at = step
        elif outcome.kind == Kind.TIMEOUT and outcome.request_id is not None:
            # after a restart a ballot design names a request it forgot by -ballot_id
            given_up = run.lanes.get(abs(outcome.request_id))
            if given_up is not None:
                given_up.events.append(LaneEvent(step, GAVE_UP))
        elif outcome.kind == Kind.DELIVER and outcome.request_id in run.lanes:
            lane = run.lanes[outcome.request_id]
            kind = DUPLICATE if lane.arrived_at is not None else ARRIVED
            in_order = (
                kind == ARRIVED and played.kind == Kind.DELIVER and lane.status == "in flight"
            )
            refused = not outcome.committed and outcome.reason != HELD
            if in_order and refused and run.in_order_refusal is None:
                run.in_order_refusal = (step, lane.request_id, str(outcome.reason))
            lane.events.append(
                LaneEvent(
                    step, kind, outcome.committed, outcome.reason, stale=played.kind == Kind.STALE
                )
            )
        for decided in outcome.settled:
            held = _lane_of(run, decided.request_id, decided.ballot_id)
            if held is not None:
                held.events.append(LaneEvent(step, SETTLED, decided.committed, decided.reason))
        self._note_sends(design, step)

    def _here(self) -> None:
        """Replay the schedule if this thread did not build the designs' SQLite stores.

        A notebook kernel may run widget callbacks on another thread than the cell that built
        the app, and a sqlite3 connection refuses to be used across threads.
        """
        if threading.get_ident() != self._thread:
            self._replay(list(self.steps))

    def _replay(self, steps: Sequence[Step]) -> None:
        self.steps = []
        self._start()
        for i, step in enumerate(steps, start=1):
            self._take(i, step)

    def _take(self, index: int, step: Step) -> None:
        """Play one step on every design; refuse it (raising) if no design could take it."""
        for d in self.designs:
            self._play(d, step)
        self.steps.append(step)
        if all(self.runs[d].outcomes[-1] is None for d in self.designs):
            reasons = {d: self.runs[d].skipped[index] for d in self.designs}
            raise StepError(index, str(step), _no_design(reasons))

    # --- editing -----------------------------------------------------------------------

    def add(self, step: Step | str) -> None:
        """Append one step (a `Step`, or its text); raises `StepError` (and changes nothing)
        if it is not a step or cannot be taken."""
        self._here()
        index = len(self.steps) + 1
        try:
            step = as_step(step)
        except ScheduleError as exc:
            raise StepError(index, exc.text, exc.problem) from None
        ok = self.availability(step, useful=step.kind == Kind.TIMEOUT and step.request is None)
        if not ok.ok:  # the same test the workbench's buttons pass, so typing accepts no more
            raise StepError(index, str(step), ok.why)
        previous = list(self.steps)
        try:
            self._take(index, step)
        except StepError:
            self._replay(previous)
            raise

    def load(self, schedule: str | Sequence[Step | str]) -> None:
        """Replace the schedule (typed text, or a list of steps); on a bad step raise
        `StepError` naming it and keep the schedule as it was."""
        steps = parse_schedule(schedule) if isinstance(schedule, str) else list(schedule)
        previous = list(self.steps)
        try:
            self._replay([])
            for step in steps:
                self.add(step)
        except StepError:
            self._replay(previous)
            raise

    def undo(self) -> Step | None:
        """Remove the last step (None if there was none)."""
        if not self.steps:
            return None
        last = self.steps[-1]
        self._replay(self.steps[:-1])
        return last

    def set_depth(self, depth: int) -> int | None:
        """Play the schedule again with `pipelined` keeping `depth` ticks in flight (the other
        designs do not read it). Returns the number of the first step no design can take any
        more (the schedule is cut before it), or None if every step still applies."""
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        steps, self.depth = list(self.steps), depth
        self._replay([])
        for i, step in enumerate(steps, start=1):
            try:
                self.add(step)
            except StepError:
                return i
        return None

    def reset(self) -> None:
        """Back to an empty schedule: every design has only sent its first request(s)."""
        self._replay([])

    def use_preset(self, name: str) -> None:
        """Load one of `PRESETS` by name."""
        if name not in PRESETS:
            raise KeyError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
        self.load(PRESETS[name].steps)

    @property
    def text(self) -> str:
        """The schedule as one line, as `load` reads it."""
        return format_schedule(self.steps)

    # --- what can be added -------------------------------------------------------------

    @property
    def requests(self) -> list[int]:
        """Every request id some design has sent so far."""
        return sorted({rid for run in self.runs.values() for rid in run.lanes})

    def _why_not(self, design: str, step: Step, useful: bool) -> str | None:
        runner, rid = self._runners[design], step.request
        if step.kind == Kind.CRASH:
            return None
        if step.kind == Kind.TIMEOUT:
            awaited = [r.request_id for r in runner.d.awaited()]
            if rid is None:
                return None if awaited or not useful else "it waits on nothing"
            return None if rid in awaited else f"it is not waiting on request {rid}"
        if rid not in runner.sent:
            return f"it has not sent request {rid}"
        if step.kind == Kind.DUP and not runner.delivered.get(rid):
            return f"request {rid}'s response has not arrived yet"
        if step.kind == Kind.DELIVER and runner.delivered.get(rid):
            return f"request {rid}'s response already arrived (a second arrival is 'dup {rid}')"
        if step.kind == Kind.STALE:
            if rid in runner.produced:
                return f"request {rid}'s response already arrived (a stale body comes first)"
            if runner.sent[rid].base_version < 1:
                return f"request {rid} was built on version 0: nothing older to be stale from"
        return None

    def availability(self, step: Step, *, useful: bool = False) -> Availability:
        """Can `step` be added now for at least one design? A `deliver` step here is a first
        delivery (a later one is `dup`); with `useful`, a bare `timeout` counts only where it
        finds something to give up on."""
        self._here()
        reasons = {d: self._why_not(d, step, useful) for d in self.designs}
        if any(r is None for r in reasons.values()):
            return Availability(True)
        return Availability(False, _no_design({d: str(r) for d, r in reasons.items()}))


def _lane_of(run: DesignRun, request_id: int, ballot_id: int | None) -> Lane | None:
    """The lane of a request, also when a restarted loop names it by its ballot
    (``-ballot_id``)."""
    if request_id in run.lanes:
        return run.lanes[request_id]
    return next(
        (ln for ln in run.lanes.values() if ballot_id is not None and ln.ballot_id == ballot_id),
        None,
    )


def _flush(run: DesignRun, ballot_id: int, step: int) -> None:
    """A replay of `ballot_id` was sent at `step`: if that ballot's request had not ended by
    itself (no refusal, give-up or decided hold), it was flushed."""
    lane = next((ln for ln in run.lanes.values() if ln.ballot_id == ballot_id), None)
    if lane is not None and lane.status in ("in flight", "held"):
        lane.flushed_at = step


def _no_design(reasons: dict[str, str]) -> str:
    """'no design can take it: <why>', with the reason per design where they differ."""
    distinct = list(dict.fromkeys(reasons.values()))
    if len(distinct) == 1:
        return f"no design can take it: {distinct[0]}"
    return "no design can take it: " + "; ".join(f"{d}: {r}" for d, r in reasons.items())


@functools.lru_cache(maxsize=64)
def _explored(design: str, n: int, window: int) -> Exploration:
    return explore(design, n, window=window)


def break_search(design: str, n: int = EXPLORE_N, window: int = 2) -> Exploration:
    """Every schedule of `n` deliveries (each response at most twice, one give-up) on `design`
    with `window` (`fenced`'s hedge, `pipelined`'s depth): how many, how many rewind, the
    shortest that does. Memoised: do not change what it returns."""
    check_design(design)
    return _explored(design, n, window)


def shortest_break(design: str, n: int = EXPLORE_N, window: int = 2) -> list[Step] | None:
    """The shortest schedule (of up to `n` deliveries, each response at most twice, one
    give-up) after which a reader sees `design`'s head fall; None if there is none."""
    found = break_search(design, n, window).shortest
    return None if found is None else list(found)


def as_first_and_again(steps: Sequence[Step]) -> list[Step]:
    """The same schedule with every repeat arrival written as `dup k`, as `ScheduleBuilder`
    takes it (the explorer writes `deliver k` twice; the runner plays both alike)."""
    arrived: set[int] = set()
    out = []
    for step in steps:
        k = step.request  # every arrival names its request
        if step.kind == Kind.DELIVER and k is not None and k in arrived:
            step = Step.dup(k)
        if step.kind in (Kind.DELIVER, Kind.DUP, Kind.STALE) and k is not None:
            arrived.add(k)
        out.append(step)
    return out
