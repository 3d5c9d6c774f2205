"""Every arrival order of a small run, searched on each design's in-memory model.

`labkit.designs.arrival_orders.explore_by_replay` plays each schedule prefix on SQLite. Here each
design's loop is its model (`registry.make_model`: a pure function on a small hashable
`LoopState`, defined beside the design's class), checked step by step against the real design
on SQLite by `check_model` (called as `arrivals.verify_model_against_sqlite`). This module
knows no design: it asks the model for each step and for the state's memo key. `explore_fast`
walks the same schedules depth first and memoises, per state, how many schedules lie below it,
how many of them rewind and the best rewinding suffix, so a state that many prefixes reach is
expanded once while its schedules are still counted once per prefix.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from labkit.designs.model import DesignModel, LoopState, ModelOutcome
from labkit.designs.registry import make_model
from labkit.designs.schedules import Exploration, Kind, Step, as_steps


@dataclass(frozen=True)
class ModelRun:
    """One schedule played on the model: the head and the outcome after every step."""

    design: str
    steps: list[Step]
    heads: list[int]
    outcomes: list[ModelOutcome]
    first_rewind: int | None


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
    model = make_model(design, window=window, ticks=ticks, first_request=first_request, skews=skews)
    played = as_steps(steps)
    state = model.start()
    max_seen, first_rewind = state.head, None
    heads: list[int] = []
    outcomes: list[ModelOutcome] = []
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

    def __init__(self, model: DesignModel, n: int, copies: int, timeouts: int) -> None:
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
    model = make_model(design, window=window, ticks=ticks, first_request=1, skews=skews)
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
    """How `check_model` (called as `arrivals.verify_model_against_sqlite`) went: schedules and
    steps compared, disagreements described."""

    design: str
    n: int
    schedules: int
    steps: int
    mismatches: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        return not self.mismatches


def _schedules(
    model: DesignModel, n: int, copies: int, timeouts: int, crashes: int, stale: bool
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
    kwargs: dict[str, Any] = {"window": window, "ticks": ticks, "skews": skews}
    model = make_model(design, **kwargs)
    found = _schedules(model, n, copies, timeouts, crashes, stale)
    if sample is not None:
        found = _stratified(found, sample, f"{design}-{n}-{copies}-{timeouts}-{crashes}")
    steps = 0
    mismatches: list[str] = []
    for sched, got_real in zip(found, real(design, found, **kwargs), strict=True):
        mine = run_model(design, sched, **kwargs)
        steps += len(sched)
        for i, step in enumerate(sched):
            got = (mine.heads[i], mine.outcomes[i].label)
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
                    f"{design} {[str(s) for s in sched]}: first rewind SQLite "
                    f"{got_real.first_rewind}, model {mine.first_rewind}"
                )
    return ModelCheck(design, n, len(found), steps, tuple(mismatches))
