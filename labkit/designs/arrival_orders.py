"""Exhaustive arrival orders for small runs, and a checker for hand-written schedules.

A schedule is a list of steps (`labkit.designs.schedules.Step`) the planner and the loop take,
with no clock; `run_schedule` also reads them as a person writes them:

- ``"deliver N"`` (or ``"N"``, or ``"dup N"``): the planner delivers request N's response; the
  first delivery produces it, a later one is a duplicate with the same body and ``updated_at``;
- ``"stale N"``: the first delivery of N, with a body computed from the version before its base;
- ``"timeout"`` / ``"timeout N"``: the loop gives up on its oldest (or request N's) wait;
- ``"crash"``: the loop dies and restarts from its store.

Requests are numbered in the order the loop sends them, from ``first_request``. Step i happens
at logical time i; a response's ``updated_at`` is the step it was produced at plus its host's
skew (``skews``), which is how last-write-wins gets fooled.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import pandas as pd

from labkit.catalog.loop import Response
from labkit.designs.arrival_search import ModelCheck, check_model, explore_fast
from labkit.designs.design import Design, Request, fork_design
from labkit.designs.planner import HeadReader, respond
from labkit.designs.registry import DESIGNS, check_design, make_design
from labkit.designs.schedules import (
    Exploration,
    Kind,
    ScheduleError,
    Step,
    as_steps,
    format_schedule,
    outcome_label,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Settled:
    """A held answer decided after the step that delivered it, once the head reached its fence
    (`pipelined` only): committed, or refused for `reason`."""

    request_id: int
    ballot_id: int | None
    committed: bool
    reason: str | None = None


@dataclass(frozen=True)
class StepOutcome:
    """What one schedule step did, and the head an independent reader saw after it.

    `kind` is `Kind.DELIVER` (a response landed: `committed`, and `reason` when rejected),
    `Kind.TIMEOUT` (the loop gave up on `request_id`, or on nothing if it awaited nothing) or
    `Kind.CRASH` (the loop died and restarted). `rewind` says the head fell below a version the
    reader had already seen; `settled` lists the held answers this step let the head reach.
    """

    kind: Kind
    head: int
    request_id: int | None = None
    committed: bool | None = None
    reason: str | None = None
    rewind: bool = False
    settled: tuple[Settled, ...] = ()

    @property
    def label(self) -> str:
        """Short text for tables and captions, e.g. ``12:commit`` or ``timeout 12``."""
        return outcome_label(self.kind, self.request_id, self.committed, self.reason)

    def __str__(self) -> str:
        return self.label


@dataclass
class ScheduleResult:
    """What one schedule did to one design, step by step."""

    design: str
    steps: list[Step]
    outcomes: list[StepOutcome] = field(default_factory=list)
    replays: int = 0

    @property
    def heads(self) -> list[int]:
        """The head an independent reader saw after each step."""
        return [o.head for o in self.outcomes]

    @property
    def first_rewind(self) -> int | None:
        """The index of the first step after which the head had fallen, if any."""
        return next((i for i, o in enumerate(self.outcomes) if o.rewind), None)

    @property
    def rewinds(self) -> bool:
        """True if an independent reader saw the catalog head fall at some step."""
        return self.first_rewind is not None

    @property
    def final_head(self) -> int:
        """The head after the last step."""
        return self.outcomes[-1].head if self.outcomes else 0

    @property
    def labels(self) -> list[str]:
        """Each step's outcome as short text (see `StepOutcome.label`)."""
        return [o.label for o in self.outcomes]


class _Runner:
    """Drives one design through schedule steps, tracking what a reader sees."""

    def __init__(
        self,
        design: str | Design,
        *,
        window: int,
        ticks: int,
        first_request: int,
        skews: dict[int, float] | None,
    ) -> None:
        """`design` by name, or a design object already made (a reader's loop, in the audit)."""
        self.d: Design = (
            make_design(design, window=window, ticks=ticks, first_request=first_request)
            if isinstance(design, str)
            else design
        )
        self.skews = skews or {}
        self.sent: dict[int, Request] = {}
        self.produced: dict[int, Response] = {}
        self.delivered: dict[int, int] = {}
        self.result = ScheduleResult(self.d.name, steps=[])
        self.reader = HeadReader(self.d)
        self.now = 0
        self._send(self.d.start(0.0))

    def fork(self) -> _Runner:
        """A runner that goes on from here independently of this one (`fork_design`): the
        searches play a prefix once for all the schedules that share it."""
        other = copy.copy(self)
        other.d = fork_design(self.d)
        other.sent, other.produced = dict(self.sent), dict(self.produced)
        other.delivered = dict(self.delivered)
        other.result = replace(
            self.result, steps=list(self.result.steps), outcomes=list(self.result.outcomes)
        )
        other.reader = copy.copy(self.reader)
        other.reader.design = other.d
        return other

    def _send(self, reqs: Iterable[Request]) -> None:
        for req in reqs:
            self.sent[req.request_id] = req
            if req.replay_of is not None:
                self.result.replays += 1

    def step(self, step: Step) -> None:
        self.now += 1
        committed: bool | None = None
        reason: str | None = None
        kind: Kind
        if step.kind == Kind.CRASH:
            self._send(self.d.crash_restart(self.now))
            kind, rid = Kind.CRASH, None
        elif step.kind == Kind.TIMEOUT:
            req = self._pick(self.d.awaited(), step)
            kind, rid = Kind.TIMEOUT, None if req is None else req.request_id
            if req is not None:
                self._send(self.d.on_timeout(req, self.now))
        else:
            req = self._sent(step)
            rid = req.request_id
            stale = step.kind == Kind.STALE
            if stale:
                self._check_stale(step, req)
            resp = self.produced.get(req.request_id) or self._produce(req, stale=stale)
            self.delivered[req.request_id] = self.delivered.get(req.request_id, 0) + 1
            decision = self.d.on_response(req, resp, self.now)
            self._send(decision.sends)
            kind, committed, reason = Kind.DELIVER, decision.committed, decision.reason
        settled = []
        while (ready := self.d.settle(self.now)) is not None:  # held answers the head reached
            req, decision = ready
            settled.append(
                Settled(req.request_id, req.ballot_id, decision.committed, decision.reason)
            )
            self._send(decision.sends)
        glance = self.reader.look()
        self.result.outcomes.append(
            StepOutcome(kind, glance.version, rid, committed, reason, glance.rewind, tuple(settled))
        )

    def _sent(self, step: Step) -> Request:
        if step.request not in self.sent:
            raise ScheduleError(
                str(step),
                f"request {step.request} has not been sent",
                f" (sent: {sorted(self.sent)})",
            )
        return self.sent[step.request]

    def _check_stale(self, step: Step, req: Request) -> None:
        if req.request_id in self.produced:
            raise ScheduleError(
                str(step),
                f"request {req.request_id}'s response was already produced; "
                "'stale N' must be its first delivery (later ones are duplicates: 'deliver N')",
            )
        if req.base_version < 1:
            raise ScheduleError(
                str(step),
                f"request {req.request_id} is based on version 0; there is no "
                "older version for a stale body to come from",
            )

    def _pick(self, awaited: list[Request], step: Step) -> Request | None:
        if step.request is None:
            return awaited[0] if awaited else None
        for req in awaited:
            if req.request_id == step.request:
                return req
        raise ScheduleError(str(step), f"request {step.request} is not awaited")

    def _produce(self, req: Request, *, stale: bool, stamped: bool = False) -> Response:
        stamp = self.now + self.skews.get(req.request_id, 0.0)
        resp = respond(self.d, req, stamp, stale=stale, stamped=stamped)
        self.produced[req.request_id] = resp
        return resp

    def settle(self, limit: int = 20) -> None:
        """Deliver each awaited, never-delivered request once (replays land and commit)."""
        for _ in range(limit):
            awaited = (self._as_sent(r) for r in self.d.awaited())
            todo = [r for r in awaited if r.request_id not in self.delivered]
            if not todo:
                return
            self.step(Step.deliver(todo[0].request_id))

    def _as_sent(self, req: Request) -> Request:
        """The request that was sent for what the loop awaits. After a crash the loop rebuilds
        what it awaits from its store, under a number of its own (`-ballot`): the planner's
        answer still comes for the call the dead process made, the sent request of that ballot."""
        if req.request_id in self.sent or req.ballot_id is None:
            return req
        same = [r for r in self.sent.values() if r.ballot_id == req.ballot_id]
        return same[-1] if same else req


def run_schedule(
    design: str,
    steps: Sequence[Step | str],
    *,
    window: int = 2,
    ticks: int = 1000,
    first_request: int = 1,
    skews: dict[int, float] | None = None,
    settle: bool = False,
) -> ScheduleResult:
    """Play a (learner-proposed) schedule against a design; `.rewinds` says if the head fell.

    Steps are `Step`s or their text as a person writes it (``"deliver 2"``, ``"timeout"``).
    Raises `ScheduleError` naming the bad step.
    """
    check_design(design)
    played = as_steps(steps)
    runner = _Runner(design, window=window, ticks=ticks, first_request=first_request, skews=skews)
    for step in played:
        runner.step(step)
    if settle:
        runner.settle()
    runner.result.steps = played
    return runner.result


def _branches(runner: _Runner, items: Sequence[T]) -> Iterator[tuple[_Runner, T]]:
    """Each item with a runner of its own to play it on: copies of `runner`, and `runner`
    itself for the last (nothing needs it after), so a walk copies only where it branches."""
    for k, item in enumerate(items):
        yield (runner if k == len(items) - 1 else runner.fork()), item


def run_schedules(
    design: str,
    schedules: Sequence[Sequence[Step | str]],
    *,
    window: int = 2,
    ticks: int = 1000,
    first_request: int = 1,
    skews: dict[int, float] | None = None,
) -> list[ScheduleResult]:
    """`run_schedule` for each of `schedules`, in order, each prefix played once: where
    schedules part, the runner is copied (`_Runner.fork`) rather than replayed. A bad step
    raises `ScheduleError` as `run_schedule` does, though not always the one of the earliest
    schedule in the list (the walk goes prefix by prefix)."""
    check_design(design)
    parsed = [as_steps(s) for s in schedules]
    if not parsed:
        return []
    results: list[ScheduleResult | None] = [None] * len(parsed)

    def play(runner: _Runner, group: list[int], depth: int) -> None:
        branches: dict[Step, list[int]] = {}
        for i in group:
            if len(parsed[i]) == depth:
                results[i] = replace(
                    runner.result, steps=list(parsed[i]), outcomes=list(runner.result.outcomes)
                )
            else:
                branches.setdefault(parsed[i][depth], []).append(i)
        for child, (step, below) in _branches(runner, list(branches.items())):
            child.step(step)
            play(child, below, depth + 1)

    start = _Runner(design, window=window, ticks=ticks, first_request=first_request, skews=skews)
    play(start, list(range(len(parsed))), 0)
    return results  # type: ignore[return-value]


def _choices(runner: _Runner, copies: int, timeouts_left: int) -> list[Step]:
    out = [
        Step.deliver(rid) for rid in sorted(runner.sent) if runner.delivered.get(rid, 0) < copies
    ]
    if timeouts_left and runner.d.awaited():
        out.append(Step.timeout())
    return out


def explore(
    design: str,
    n: int = 4,
    *,
    copies: int = 2,
    timeouts: int = 1,
    window: int = 2,
    ticks: int = 1000,
    skews: dict[int, float] | None = None,
) -> Exploration:
    """Every schedule of `n` deliveries (each response at most `copies` times, up to `timeouts`
    give-ups), counting those where a reader sees the catalog head fall.

    `shortest` is a shortest schedule prefix ending at a rewind (ties broken as `Step` sorts).
    Runs the memoised search on the loop model (`arrival_search`), which
    `verify_model_against_sqlite` checks against the real designs; `explore_by_replay` gives
    the same answer the slow way.
    """
    return explore_fast(
        design, n, copies=copies, timeouts=timeouts, window=window, ticks=ticks, skews=skews
    )


def verify_model_against_sqlite(design: str, n: int, **kwargs: Any) -> ModelCheck:
    """Every schedule of `n` deliveries, played on the loop model and on the real design (SQLite
    for the ballot designs): the head and outcome after every step must agree."""
    return check_model(design, n, real=run_schedules, **kwargs)


def explore_by_replay(
    design: str,
    n: int = 4,
    *,
    copies: int = 2,
    timeouts: int = 1,
    window: int = 2,
    ticks: int = 1000,
    skews: dict[int, float] | None = None,
) -> Exploration:
    """`explore` the slow way: every schedule prefix played on the real designs, each once
    (where the walk branches, the runner is copied: `_Runner.fork`).

    The reference `explore` is tested against; exponential in `n` (fenced, n = 5: 1.5 s).
    """
    start = _Runner(design, window=window, ticks=ticks, first_request=1, skews=skews)
    return explore_runner(start, n, copies=copies, timeouts=timeouts)


def explore_runner(start: _Runner, n: int, *, copies: int = 2, timeouts: int = 1) -> Exploration:
    """Every schedule of `n` deliveries from `start`, each prefix played once and the runner
    forked where schedules part; `shortest` is a shortest schedule ending at a fall."""
    orders = rewinding = 0
    shortest: list[Step] | None = None

    def walk(runner: _Runner, prefix: list[Step], delivered: int, timeouts_left: int) -> None:
        nonlocal orders, rewinding, shortest
        first = runner.result.first_rewind
        if first is not None or delivered == n:
            orders += 1
            if first is not None:
                rewinding += 1
                cand = prefix[: first + 1]
                if shortest is None or (len(cand), cand) < (len(shortest), shortest):
                    shortest = cand
            return
        choices = _choices(runner, copies, timeouts_left)
        if not choices:
            orders += 1
            return
        for child, c in _branches(runner, choices):
            child.step(c)
            gave_up = c.kind == Kind.TIMEOUT
            walk(child, [*prefix, c], delivered + (not gave_up), timeouts_left - gave_up)

    walk(start, [], 0, timeouts)
    return Exploration(start.d.name, orders, rewinding, shortest)


def explore_all(n: int = 4, **kwargs: Any) -> pd.DataFrame:
    """`explore` for every design, one row each."""
    rows = []
    for design in DESIGNS:
        ex = explore(design, n, **kwargs)
        rows.append(
            {
                "design": design,
                "orders": ex.orders,
                "rewinding": ex.rewinding,
                "shortest_counterexample": (
                    None if ex.shortest is None else format_schedule(ex.shortest, " ; ")
                ),
            }
        )
    return pd.DataFrame(rows)


def closing_question() -> pd.DataFrame:
    """Article 2's closing question: ticks 12 and 14 both retry after tick 13 committed.

    Request 12 is in flight; 13 commits (for single-flight designs, after the loop gave up
    on 12; `fenced` sent 12 and 13 together); 14 is then sent. Every distinct order of two
    deliveries each of 12 and 14 is played against every design, then outstanding replays
    are settled. One row per (order, design).
    """
    rows = []
    orders = sorted(set(itertools.permutations([12, 12, 14, 14])))
    for order in orders:
        for design in DESIGNS:
            gave_up = [] if design == "fenced" else [Step.timeout()]
            prefix = [*gave_up, Step.deliver(13)]
            steps = [*prefix, *map(Step.deliver, order)]
            res = run_schedule(design, steps, window=2, ticks=2, first_request=12, settle=True)
            rows.append(
                {
                    "order": ",".join(map(str, order)),
                    "design": design,
                    "rewinds": res.rewinds,
                    "outcomes": " ".join(res.labels[len(prefix) :]),
                    "replays": res.replays,
                    "final_head": res.final_head,
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Stamped:
    """Not a schedule step: request N's planner read the version before its base and still
    stamps the response with N's base, so no check on the base can see the body is old; then
    the response is delivered (see `cas_versus_ballot`)."""

    request: int

    def __str__(self) -> str:
        return f"stamped {self.request}"


# What compare-and-set on the version accepts, next to the ballot: (case, steps), requests
# numbered from 1.
CAS_CASES: tuple[tuple[str, tuple[Step | Stamped, ...]], ...] = (
    (
        "late answer after its replacement committed",
        (Step.timeout(), Step.deliver(2), Step.deliver(1)),
    ),
    ("duplicate after commit", (Step.deliver(1), Step.deliver(2), Step.deliver(1))),
    ("stale body that names its old base", (Step.deliver(1), Step.stale(2))),
    (
        "abandoned answer lands before its replacement",
        (Step.timeout(), Step.deliver(1), Step.deliver(2)),
    ),
    ("stale body stamped with the current head", (Step.deliver(1), Stamped(2))),
)


def _play_case(design: str, steps: Sequence[Step | Stamped]) -> tuple[ScheduleResult, str]:
    """Play one `CAS_CASES` schedule; the tools at the head afterwards, as text."""
    runner = _Runner(design, window=2, ticks=1000, first_request=1, skews=None)
    played = []
    for step in steps:
        if isinstance(step, Stamped):
            runner._produce(runner.sent[step.request], stale=True, stamped=True)
            step = Step.deliver(step.request)
        runner.step(step)
        played.append(step)
    runner.result.steps = played
    head = runner.d.read_head()[0]
    return runner.result, ", ".join(map(str, runner.d.tools_at(head))) or "(none)"


def cas_versus_ballot(designs: Sequence[str] = ("cas", "ballot")) -> pd.DataFrame:
    """Each of `CAS_CASES` played on `cas` and on `ballot`: outcomes, final head and the tools
    at the head (each planner answer adds ``tool-rN``, N its request), one row per case and
    design. Shows what a compare-and-set on the version refuses and what it lets through.
    """
    rows = []
    for case, steps in CAS_CASES:
        for design in designs:
            res, tools = _play_case(design, steps)
            rows.append(
                {
                    "case": case,
                    "design": design,
                    "steps": " ; ".join(map(str, steps)),
                    "outcomes": " ".join(res.labels),
                    "rewinds": res.rewinds,
                    "final_head": res.final_head,
                    "tools at head": tools,
                }
            )
    return pd.DataFrame(rows)
