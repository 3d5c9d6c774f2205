"""Every arrival order of a small run, searched on an in-memory model of every design.

`labkit.designs.arrival_orders.explore_by_replay` plays each schedule prefix on SQLite. Here each
design's loop is a pure function on a small hashable `LoopState` (`LoopModel.step`), checked
step by step against the real designs on SQLite by `check_model` (called as `arrivals.verify_model_against_sqlite`). `explore_fast`
walks the same schedules depth first and memoises, per state, how many schedules lie below it,
how many of them rewind and the best rewinding suffix, so a state that many prefixes reach is
expanded once while its schedules are still counted once per prefix.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from labkit.catalog.pipeline import HELD
from labkit.designs.design import CAS_CONFLICT
from labkit.designs.pipelined import HASH_MISMATCH
from labkit.designs.registry import check_design
from labkit.designs.schedules import Exploration, Kind, ScheduleError, Step, as_steps

_NEG_INF = float("-inf")


class Sent(NamedTuple):
    """One request the loop sent: the head it was based on, and what became of its response."""

    rid: int
    base: int  # the head when it was sent (for a ballot also its observed watermark)
    delivered: int = 0
    stamp: float | None = None  # updated_at of the produced response; None until delivered
    stale: bool = False  # the produced body is based on `base - 1`
    after: int | None = None  # pipelined: the request whose answer this one is built on


class LoopState(NamedTuple):
    """Everything about one design's loop that affects later steps (hashable).

    `sent[i]` is request `first_request + i`. `awaited` holds the current request (unguarded
    designs) or the in-flight ballots' requests (ballot designs), oldest first; `forgotten`
    are in-flight ballots whose request a crash erased from memory (named `-ballot_id`).
    """

    now: int
    head: int
    sent: tuple[Sent, ...]
    awaited: tuple[int, ...]
    forgotten: frozenset[int] = frozenset()
    updated_at: float = _NEG_INF  # lww: the newest updated_at written
    held: tuple[int, ...] = ()  # pipelined: in-flight requests whose answer waits in the hold
    head_by: int | None = None  # pipelined: the request whose answer is the head's body


class StepOutcome(NamedTuple):
    """What one step did: `kind` is deliver, timeout or crash; `rid` the request it touched."""

    kind: Kind
    rid: int | None
    committed: bool = False
    reason: str | None = None

    @property
    def text(self) -> str:
        """The outcome as `arrivals.run_schedule` words it (e.g. ``"2:commit"``)."""
        if self.kind == Kind.CRASH:
            return "crash+restart"
        if self.kind == Kind.TIMEOUT:
            return "timeout: nothing awaited" if self.rid is None else f"timeout {self.rid}"
        return f"{self.rid}:{'commit' if self.committed else self.reason}"


@dataclass(frozen=True)
class ModelRun:
    """One schedule played on the model: the head and the outcome after every step."""

    design: str
    steps: list[Step]
    heads: list[int]
    outcomes: list[StepOutcome]
    first_rewind: int | None


class LoopModel:
    """One design's loop behaviour on schedule steps, as `labkit.designs.design` + `run_schedule` do.

    Sequential designs (`callback`, `lww`, `cas`) write `base + 1` on every response they
    accept (`cas`: only if the head still equals the body's base) and send the next request
    when the current one answers or times out. Ballot designs (`ballot`, `fenced`) follow
    `WatermarkLoop`: a response commits only if its ballot is in flight, the head still equals
    its watermark and its body is based on the head; then the window refills. `pipelined`
    follows `PipelinedDesign`: fences head, head+1, ...; an early answer is held and decided
    when the head reaches it; a request built on another request's answer passes the base-hash
    check only if that answer is the head (`head_by`); a refusal or give-up flushes every
    ballot above it.
    """

    def __init__(
        self,
        design: str,
        *,
        window: int = 2,
        ticks: int = 1000,
        first_request: int = 1,
        skews: dict[int, float] | None = None,
    ) -> None:
        check_design(design)
        if design == "fenced" and window < 2:
            raise ValueError(f"hedged ballots (key 'fenced') need window >= 2, got {window}")
        self.design = design
        self.guarded = design in ("ballot", "fenced")
        self.pipelined = design == "pipelined"
        self.lww = design == "lww"
        self.cas = design == "cas"
        self.window = window if design in ("fenced", "pipelined") else 1
        self.ticks = ticks
        self.first = first_request
        self.skews = dict(skews or {})

    # --- building blocks ---------------------------------------------------------------------

    def _send(self, state: LoopState) -> LoopState:
        """Send requests as the design does after a step: one current request, or fill the window."""
        if self.pipelined:
            return self._fill(state)
        sent, awaited, head = state.sent, state.awaited, state.head
        while head < self.ticks and len(awaited) < self.window:
            rid = self.first + len(sent)
            sent = (*sent, Sent(rid, head))
            awaited = (*awaited, rid)
        return state._replace(sent=sent, awaited=awaited)

    def awaited_names(self, state: LoopState) -> list[int]:
        """The request ids the loop awaits, as `Design.awaited()` names them."""
        return [self.first - 1 - r if r in state.forgotten else r for r in state.awaited]

    def _drop_awaited(self, state: LoopState, rid: int) -> LoopState:
        awaited = tuple(r for r in state.awaited if r != rid)
        forgotten = state.forgotten - {rid} if rid in state.forgotten else state.forgotten
        return state._replace(awaited=awaited, forgotten=forgotten)

    # --- the steps ---------------------------------------------------------------------------

    def start(self) -> LoopState:
        """The state after the loop sent its first request(s), before any step."""
        return self._send(LoopState(now=0, head=0, sent=(), awaited=()))

    def deliver(self, state: LoopState, step: Step) -> tuple[LoopState, StepOutcome]:
        """Deliver the response `step` names (its first delivery produces it; a `stale` step's
        body is built on base - 1)."""
        rid, stale = step.request, step.kind == Kind.STALE
        assert rid is not None
        now = state.now + 1
        index = rid - self.first
        if not 0 <= index < len(state.sent):
            raise ScheduleError(str(step), f"request {rid} has not been sent")
        req = state.sent[index]
        if req.stamp is None:
            if stale and req.base < 1:
                raise ScheduleError(str(step), f"request {rid} is based on version 0")
            req = req._replace(stamp=now + self.skews.get(rid, 0.0), stale=stale)
        elif stale:
            raise ScheduleError(str(step), f"request {rid}'s response was already produced")
        req = req._replace(delivered=req.delivered + 1)
        state = state._replace(now=now, sent=_put(state.sent, index, req))
        body_base = req.base - 1 if req.stale else req.base
        if self.guarded:
            return self._apply(state, req, body_base)
        if self.pipelined:
            return self._pipelined(state, req)
        if self.lww and req.stamp <= state.updated_at:
            outcome = StepOutcome(Kind.DELIVER, rid, False, "older_updated_at")
        elif self.cas and body_base != state.head:
            outcome = StepOutcome(Kind.DELIVER, rid, False, CAS_CONFLICT)
        else:
            state = state._replace(head=body_base + 1)
            if self.lww:
                state = state._replace(updated_at=max(state.updated_at, req.stamp))
            outcome = StepOutcome(Kind.DELIVER, rid, True)
        if state.awaited and state.awaited[0] == rid:
            state = self._send(state._replace(awaited=()))
        return state, outcome

    def _apply(self, state: LoopState, req: Sent, body_base: int) -> tuple[LoopState, StepOutcome]:
        """`WatermarkLoop.apply` plus `BallotDesign.on_response`: decide, leave flight, refill."""
        if req.rid not in state.awaited:
            return state, StepOutcome(Kind.DELIVER, req.rid, False, "unknown_ballot")
        if req.base != state.head:
            outcome = StepOutcome(Kind.DELIVER, req.rid, False, "stale_watermark")
        elif body_base != state.head:
            outcome = StepOutcome(Kind.DELIVER, req.rid, False, "stale_base")
        else:
            state = state._replace(head=state.head + 1)
            outcome = StepOutcome(Kind.DELIVER, req.rid, True)
        return self._send(self._drop_awaited(state, req.rid)), outcome

    # --- pipelined ballots (`labkit.catalog.pipeline`) -------------------------------------

    def _req(self, state: LoopState, rid: int) -> Sent:
        return state.sent[rid - self.first]

    def _fill(self, state: LoopState) -> LoopState:
        """Reserve the next fences (head, head+1, ...) until the window is full; stop where the
        top ballot's body is unknown (its request was sent before a crash, its answer not in)."""
        sent, awaited = state.sent, state.awaited
        flight = sorted((*awaited, *state.held), key=lambda r: sent[r - self.first].base)
        while len(flight) < self.window:
            top = flight[-1] if flight else None
            fence = state.head if top is None else sent[top - self.first].base + 1
            if fence >= self.ticks:
                break
            after = None
            if fence != state.head:
                if top in state.forgotten and top not in state.held:
                    break
                after = top
            rid = self.first + len(sent)
            sent = (*sent, Sent(rid, fence, after=after))
            awaited = (*awaited, rid)
            flight.append(rid)
        return state._replace(sent=sent, awaited=awaited)

    def _leave(self, state: LoopState, rids: set[int]) -> LoopState:
        """`rids` leave flight (committed, refused or flushed); their held answers go too."""
        return state._replace(
            awaited=tuple(r for r in state.awaited if r not in rids),
            held=tuple(r for r in state.held if r not in rids),
            forgotten=state.forgotten - rids,
        )

    def _refuse(self, state: LoopState, rid: int) -> LoopState:
        """`rid` is refused: it and every ballot fenced above it leave flight; refill."""
        fence = self._req(state, rid).base
        above = {r for r in (*state.awaited, *state.held) if self._req(state, r).base > fence}
        return self._fill(self._leave(state, {rid} | above))

    def _decide(self, state: LoopState, req: Sent) -> tuple[LoopState, bool, str | None]:
        """An answer for the ballot fenced at the head: commit it or refuse it (and flush)."""
        if req.stale:
            return self._refuse(state, req.rid), False, "stale_base"
        if req.after is not None and req.after != state.head_by:
            return self._refuse(state, req.rid), False, HASH_MISMATCH
        state = self._leave(state, {req.rid})._replace(head=state.head + 1, head_by=req.rid)
        return self._fill(state), True, None

    def _settle(self, state: LoopState) -> LoopState:
        """Decide held answers while the head reaches them (the frontier moves)."""
        while True:
            ready = [r for r in state.held if self._req(state, r).base == state.head]
            if not ready:
                return state
            state = self._decide(state, self._req(state, ready[0]))[0]

    def _pipelined(self, state: LoopState, req: Sent) -> tuple[LoopState, StepOutcome]:
        if req.rid not in state.awaited and req.rid not in state.held:
            outcome = StepOutcome(Kind.DELIVER, req.rid, False, "unknown_ballot")
        elif req.base > state.head:
            if req.rid not in state.held:
                state = self._leave(state, {req.rid})
                state = state._replace(held=tuple(sorted((*state.held, req.rid))))
            outcome = StepOutcome(Kind.DELIVER, req.rid, False, HELD)
        else:
            state, committed, reason = self._decide(state, req)
            outcome = StepOutcome(Kind.DELIVER, req.rid, committed, reason)
        return self._settle(self._fill(state)), outcome

    def timeout(self, state: LoopState, step: Step) -> tuple[LoopState, StepOutcome]:
        """The loop gives up on its oldest wait (or on the request `step` names) and sends a
        replacement."""
        rid = step.request
        state = state._replace(now=state.now + 1)
        names = self.awaited_names(state)
        if rid is None and not names:
            return state, StepOutcome(Kind.TIMEOUT, None)
        pos = 0 if rid is None else names.index(rid) if rid in names else -1
        if pos < 0:
            raise ScheduleError(str(step), f"request {rid} is not awaited")
        given_up = state.awaited[pos]
        if self.pipelined:
            return self._settle(self._refuse(state, given_up)), StepOutcome(
                Kind.TIMEOUT, names[pos]
            )
        if self.guarded:
            state = self._drop_awaited(state, given_up)
        else:
            state = state._replace(awaited=())
        return self._send(state), StepOutcome(Kind.TIMEOUT, names[pos])

    def crash(self, state: LoopState) -> tuple[LoopState, StepOutcome]:
        """The loop dies and restarts: ballots in flight survive in SQLite, memory does not."""
        state = state._replace(now=state.now + 1)
        if self.guarded or self.pipelined:
            state = state._replace(forgotten=frozenset(state.awaited))
        else:
            state = state._replace(awaited=())
        state = self._send(state)
        if self.pipelined:
            state = self._settle(state)
        return state, StepOutcome(Kind.CRASH, None)

    def step(self, state: LoopState, step: Step) -> tuple[LoopState, StepOutcome]:
        """Play one schedule step."""
        if step.kind == Kind.CRASH:
            return self.crash(state)
        if step.kind == Kind.TIMEOUT:
            return self.timeout(state, step)
        return self.deliver(state, step)

    # --- what the search needs ---------------------------------------------------------------

    def key(self, state: LoopState, copies: int) -> tuple:
        """`state` with what cannot affect later steps dropped, so equivalent states merge.

        Responses delivered `copies` times can never be chosen again; only `lww` reads the
        clock (the step index and the produced `updated_at` stamps).
        """
        if self.lww:
            live = tuple(s for s in state.sent if s.delivered < copies)
            return (state.now, state.head, state.updated_at, state.awaited, live)
        if self.pipelined:  # who wrote the head matters only to a request built on it
            live = tuple(s[:3] + s[4:] for s in state.sent if s.delivered < copies)
            flight = (*state.awaited, *state.held)
            relevant = any(self._req(state, r).after == state.head_by for r in flight)
            by = state.head_by if relevant else None
            return (state.head, by, state.awaited, state.held, state.forgotten, live)
        live = tuple(s[:3] + s[4:] for s in state.sent if s.delivered < copies)
        return (state.head, state.awaited, state.forgotten, live)


def _put(items: tuple[Sent, ...], index: int, item: Sent) -> tuple[Sent, ...]:
    return (*items[:index], item, *items[index + 1 :])


def run_model(
    design: str,
    steps: Sequence[Step | str],
    *,
    window: int = 2,
    ticks: int = 1000,
    first_request: int = 1,
    skews: dict[int, float] | None = None,
) -> ModelRun:
    """Play a schedule on the model (the in-memory twin of `arrivals.run_schedule`); text
    steps are read as a person writes them."""
    model = LoopModel(design, window=window, ticks=ticks, first_request=first_request, skews=skews)
    played = as_steps(steps)
    state = model.start()
    max_seen, first_rewind = state.head, None
    heads: list[int] = []
    outcomes: list[StepOutcome] = []
    for step in played:
        state, outcome = model.step(state, step)
        heads.append(state.head)
        outcomes.append(outcome)
        if state.head < max_seen and first_rewind is None:
            first_rewind = len(heads) - 1
        max_seen = max(max_seen, state.head)
    return ModelRun(design, played, heads, outcomes, first_rewind)


# --- the search ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchStats:
    """How much work `explore_with_stats` did.

    `prefixes` is how many schedule prefixes a walk without memo visits (what the SQLite
    replay plays, each once); `visited` is how many states this search reached (a memo
    hit included); `distinct` is how many of those were different states.
    """

    prefixes: int
    visited: int
    distinct: int


class _Below(NamedTuple):
    orders: int
    rewinding: int
    best: tuple[Step, ...] | None  # shortest, then smallest, rewinding suffix
    prefixes: int


_GIVE_UP = Step(Kind.TIMEOUT)  # the search's one kind of timeout: give up on the oldest wait


def _better(cand: tuple[Step, ...], best: tuple[Step, ...] | None) -> bool:
    return best is None or (len(cand), cand) < (len(best), best)


class _Search:
    """Depth-first walk of every schedule with one memo entry per distinct state."""

    def __init__(self, model: LoopModel, n: int, copies: int, timeouts: int) -> None:
        self.model, self.n, self.copies, self.timeouts = model, n, copies, timeouts
        self.memo: dict[tuple, _Below] = {}
        self.seen: set[tuple] = set()
        self.visited = 0
        self.deliveries: dict[int, Step] = {}  # one Step per request: made once, not per move

    def delivery(self, rid: int) -> Step:
        step = self.deliveries.get(rid)
        if step is None:
            step = self.deliveries[rid] = Step(Kind.DELIVER, rid)
        return step

    def reach(self, state: LoopState, left: int, t_left: int) -> tuple:
        key = (self.model.key(state, self.copies), left, t_left)
        self.visited += 1
        self.seen.add(key)
        return key

    def below(self, state: LoopState, left: int, t_left: int, key: tuple) -> _Below:
        """Schedules from `state` with `left` deliveries and `t_left` timeouts still allowed."""
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        model = self.model
        moves: list[tuple[Step, LoopState]] = []
        for req in state.sent:
            if req.delivered < self.copies:
                step = self.delivery(req.rid)
                moves.append((step, model.deliver(state, step)[0]))
        if t_left and state.awaited:
            moves.append((_GIVE_UP, model.timeout(state, _GIVE_UP)[0]))
        if not moves:
            result = _Below(1, 0, None, 1)
        else:
            orders = rewinding = 0
            prefixes = 1
            best: tuple[Step, ...] | None = None
            for label, child in moves:
                is_timeout = label is _GIVE_UP
                c_left, c_t_left = left - (not is_timeout), t_left - is_timeout
                c_key = self.reach(child, c_left, c_t_left)
                if child.head < state.head:  # the reader saw the head fall: the schedule ends
                    orders, rewinding, prefixes = orders + 1, rewinding + 1, prefixes + 1
                    if _better((label,), best):
                        best = (label,)
                    continue
                if c_left == 0:
                    orders, prefixes = orders + 1, prefixes + 1
                    continue
                sub = self.below(child, c_left, c_t_left, c_key)
                orders += sub.orders
                rewinding += sub.rewinding
                prefixes += sub.prefixes
                if sub.best is not None and _better((label, *sub.best), best):
                    best = (label, *sub.best)
            result = _Below(orders, rewinding, best, prefixes)
        self.memo[key] = result
        return result


def explore_with_stats(
    design: str,
    n: int = 4,
    *,
    copies: int = 2,
    timeouts: int = 1,
    window: int = 2,
    ticks: int = 1000,
    skews: dict[int, float] | None = None,
) -> tuple[Exploration, SearchStats]:
    """`explore_fast`, plus how many prefixes, reached states and distinct states it took."""
    if n < 0:
        raise ValueError(f"n (deliveries per schedule) must be >= 0, got {n}")
    model = LoopModel(design, window=window, ticks=ticks, first_request=1, skews=skews)
    search = _Search(model, n, copies, timeouts)
    root = model.start()
    key = search.reach(root, n, timeouts)
    found = _Below(1, 0, None, 1) if n == 0 else search.below(root, n, timeouts, key)
    shortest = None if found.best is None else list(found.best)
    return (
        Exploration(design, found.orders, found.rewinding, shortest),
        SearchStats(found.prefixes, search.visited, len(search.seen)),
    )


def explore_fast(design: str, n: int = 4, **limits: Any) -> Exploration:
    """Every schedule of `n` deliveries (each response at most `copies` times, up to `timeouts`
    give-ups; `limits` as `explore_with_stats` takes them), counted as `arrivals.explore`
    counts them, on the model with a memo per state.

    A schedule ends at its first rewind, after `n` deliveries, or when no step is left;
    `shortest` is the shortest schedule ending at a rewind (ties: smallest list of steps, as
    `Step` sorts them).
    """
    return explore_with_stats(design, n, **limits)[0]


# --- the model against the real code ---------------------------------------------------------


@dataclass(frozen=True)
class ModelCheck:
    """How `check_model` (called as `arrivals.verify_model_against_sqlite`) went: schedules and steps compared, disagreements described."""

    design: str
    n: int
    schedules: int
    steps: int
    mismatches: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        return not self.mismatches


def _schedules(
    model: LoopModel, n: int, copies: int, timeouts: int, crashes: int, stale: bool
) -> list[list[Step]]:
    """Every schedule of `n` deliveries that the model allows, without stopping at rewinds.

    Steps: `deliver N` (each response at most `copies` times), `timeout` (up to `timeouts`,
    while something is awaited), and optionally `crash` (up to `crashes`) and `stale N` (a
    first delivery with an older body, for requests not based on version 0).
    """
    out: list[list[Step]] = []

    def walk(state: LoopState, path: list[Step], left: int, t_left: int, c_left: int) -> None:
        if left == 0:  # only the start of a walk for n = 0; below, the loop ends schedules
            out.append(path)
            return
        moves = []
        for req in state.sent:
            if req.delivered < copies:
                moves.append((Step.deliver(req.rid), 1, 0, 0))
            if stale and req.delivered == 0 and req.base >= 1:
                moves.append((Step.stale(req.rid), 1, 0, 0))
        if t_left and state.awaited:
            moves.append((_GIVE_UP, 0, 1, 0))
        if c_left:
            moves.append((Step.crash(), 0, 0, 1))
        if not moves:
            out.append(path)
            return
        for label, d, t, c in moves:
            if d == left:  # the last delivery: the schedule ends here, whatever state it leaves
                out.append([*path, label])
                continue
            child = model.step(state, label)[0]
            walk(child, [*path, label], left - d, t_left - t, c_left - c)

    walk(model.start(), [], n, timeouts, crashes)
    return out


def _stratified(schedules: list[list[Step]], size: int, seed: str) -> list[list[Step]]:
    """A seeded sample of about `size` schedules that keeps every mix of step kinds: schedules
    are grouped by the set of kinds they hold (deliveries only, with a crash, with a stale body
    and a time-out, ...), and each group gives an equal share, all of a group smaller than it."""
    groups: dict[frozenset[Kind], list[list[Step]]] = {}
    for sched in schedules:
        groups.setdefault(frozenset(s.kind for s in sched), []).append(sched)
    share = max(1, size // max(1, len(groups)))
    rng = random.Random(seed)
    picked: list[list[Step]] = []
    for kinds in sorted(groups, key=lambda k: sorted(kind.value for kind in k)):
        group = groups[kinds]
        picked += group if len(group) <= share else rng.sample(group, share)
    return picked


def check_model(
    design: str,
    n: int,
    *,
    real: Callable[..., Any],
    copies: int = 2,
    timeouts: int = 1,
    crashes: int = 0,
    stale: bool = False,
    window: int = 2,
    ticks: int = 1000,
    skews: dict[int, float] | None = None,
    sample: int | None = None,
) -> ModelCheck:
    """Play every schedule of `n` deliveries on the real design (`real`, i.e.
    `arrival_orders.run_schedules`, which plays a list of schedules as `run_schedule` plays one:
    SQLite for the ballot designs) and on the model: the head and the
    outcome after every step, and the first rewind, must match. Schedules do not stop at a
    rewind; besides `deliver N` (at most `copies` times each) and `timeout` (up to `timeouts`)
    they may hold up to `crashes` crashes and, with `stale`, first deliveries of a stale body
    (`stale N`). With `sample`, only about that many schedules are played (`_stratified`).
    """
    kwargs = {"window": window, "ticks": ticks, "skews": skews}
    model = LoopModel(design, **kwargs)
    found = _schedules(model, n, copies, timeouts, crashes, stale)
    if sample is not None:
        found = _stratified(found, sample, f"{design}-{n}-{copies}-{timeouts}-{crashes}")
    steps = 0
    mismatches: list[str] = []
    for sched, got_real in zip(found, real(design, found, **kwargs), strict=True):
        mine = run_model(design, sched, **kwargs)
        steps += len(sched)
        for i, step in enumerate(sched):
            got = (mine.heads[i], mine.outcomes[i].text)
            want = (got_real.heads[i], got_real.outcomes[i].label)
            if got != want:
                mismatches.append(
                    f"{design} {[str(s) for s in sched]}, step {i} ({str(step)!r}): SQLite "
                    f"(head, outcome) = {want}, model = {got}"
                )
                break
        else:
            if mine.first_rewind != got_real.first_rewind:
                mismatches.append(
                    f"{design} {[str(s) for s in sched]}: first rewind SQLite {got_real.first_rewind}, "
                    f"model {mine.first_rewind}"
                )
    return ModelCheck(design, n, len(found), steps, tuple(mismatches))
