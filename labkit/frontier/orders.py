"""Exhaustive check of every delivery order for small n, on a fast pure-Python model.

The model applies the same rules as `labkit.frontier.log` + `labkit.frontier.summarizer` to one
shard with ids 1..n, summarizing under both policies after every finished row.
`verify_against_sqlite` runs every order for small n through the real SQLite code and compares
(a test does it for n <= 5, and a Hypothesis test samples up to n = 8). Orders are walked as a
prefix tree so shared prefixes are computed once (about e * n! steps: n = 8 takes well under a
second).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd

import labkit.frontier.rule as rule
from labkit.frontier.rule import POLICIES
from labkit.frontier.scenarios import POLICY_COLUMNS, run_scenario, scenario_from_order

MAX_N = 8
SQLITE_MAX_N = 6  # n = 6 is 720 SQLite runs, a few seconds; the exhaustive test stops at 5


@dataclass(frozen=True)
class _Cover:
    """Checkpoint state of one policy: coverage end and the ids it passed while still open."""

    end: int = 0
    skipped: int = 0  # bitmask; a skipped id is an orphan once it is terminal


def _bits(lo: int, hi: int) -> int:
    """Bitmask of ids in (lo, hi]."""
    return ((1 << (hi + 1)) - 1) & ~((1 << (lo + 1)) - 1) if hi > lo else 0


def _advance(cover: _Cover, end: int, done: int) -> _Cover:
    """Summarize (cover.end, end]: open ids in that range are skipped for good."""
    if end <= cover.end:
        return cover
    return _Cover(end, cover.skipped | (_bits(cover.end, end) & ~done))


@lru_cache(maxsize=8192)  # n <= 8: at most 9 bases x 512 masks per n, each asked many times
def _frontier_end(cover_end: int, done: int, n: int) -> int:
    """Gap-free frontier over ids 1..n above `cover_end` (`done` = bitmask of terminal ids):
    part one's rule (`labkit.frontier.rule`) on the model's rows."""
    return rule.frontier(cover_end, ((i, not done >> i & 1) for i in range(cover_end + 1, n + 1)))


def _step(
    state: tuple[int, int, _Cover, _Cover], i: int, failed: int, n: int
) -> tuple[int, int, _Cover, _Cover]:
    """Finish id `i` (delivered unless in `failed`), then summarize under both policies."""
    done, max_delivered, front, mx = state
    done |= 1 << i
    if not failed >> i & 1:
        max_delivered = max(max_delivered, i)
    front = _advance(front, _frontier_end(front.end, done, n), done)
    mx = _advance(mx, max(mx.end, max_delivered), done)
    return done, max_delivered, front, mx


def _ids(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def _mask(ids: Iterable[int]) -> int:
    out = 0
    for i in ids:
        out |= 1 << i
    return out


def model_run(n: int, order: Sequence[int], failures: Iterable[int] = ()) -> dict[str, dict]:
    """Run one (possibly partial) order on the model; per policy its coverage end and orphans.

    Mirrors `run_scenario(scenario_from_order(...))`: orphans are terminal ids that a policy's
    coverage passed while they were still open.
    """
    failed = _mask(failures)
    state = (0, 0, _Cover(), _Cover())
    for i in order:
        state = _step(state, i, failed, n)
    done, _, front, mx = state
    return {
        policy: {"coverage_end": c.end, "orphans": _ids(c.skipped & done)}
        for policy, c in zip(POLICIES, (front, mx), strict=True)
    }


def _walk(
    priorities: Sequence[int], failures: Iterable[int], workers: int | None
) -> Iterator[tuple[tuple[int, ...], int, int]]:
    """Yield (order, frontier orphan mask, max orphan mask) for every feasible full order.

    With `workers=k`, only orders a dispatcher `ORDER BY priority, id` with k concurrent
    workers can produce: any in-flight row may finish next, and a freed worker takes the
    next row in dispatch order.
    """
    n = len(priorities)
    if not 1 <= n <= MAX_N:
        raise ValueError(f"explore 1..{MAX_N} messages, got {n}")
    k = n if workers is None else workers
    if k < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    queue = sorted(range(1, n + 1), key=lambda i: (priorities[i - 1], i))
    failed = _mask(failures)

    def walk(state, inflight: tuple[int, ...], nxt: int, path: tuple[int, ...]):
        if not inflight:
            yield path, state[2].skipped, state[3].skipped
            return
        for pos, i in enumerate(inflight):
            rest = inflight[:pos] + inflight[pos + 1 :]
            refill = (*rest, queue[nxt]) if nxt < n else rest
            yield from walk(_step(state, i, failed, n), refill, nxt + (nxt < n), (*path, i))

    start = min(k, n)
    yield from walk((0, 0, _Cover(), _Cover()), tuple(queue[:start]), start, ())


def enumerate_orders(
    priorities: Sequence[int], failures: Iterable[int] = (), workers: int | None = None
) -> pd.DataFrame:
    """One row per feasible delivery order: `order`, and per policy the rows it orphaned, in
    the timeline's column (`orphans_frontier`, `orphans_max`)."""
    rows = [
        (order, f.bit_count(), m.bit_count())
        for order, f, m in _walk(priorities, tuple(failures), workers)
    ]
    counts = [POLICY_COLUMNS[p].orphans for p in POLICIES]  # _walk yields them in this order
    return pd.DataFrame(rows, columns=["order", *counts])


def explore_delivery_orders(
    priorities: Sequence[int], failures: Iterable[int] = (), workers: int | None = None
) -> pd.DataFrame:
    """Every feasible order, summarizing after each finished row; one row per policy.

    Columns: policy, n, workers, orders, orphaning_orders (orders that orphan >= 1 row),
    share, total_orphans, max_orphans.
    """
    n = len(priorities)
    orders = 0
    counts = {p: [0, 0, 0] for p in POLICIES}  # orphaning orders, total, worst
    for _, front, mx in _walk(priorities, tuple(failures), workers):
        orders += 1
        for policy, mask in zip(POLICIES, (front, mx), strict=True):
            lost = mask.bit_count()
            c = counts[policy]
            c[0] += lost > 0
            c[1] += lost
            c[2] = max(c[2], lost)
    return pd.DataFrame(
        [
            {
                "policy": p,
                "n": n,
                "workers": workers,
                "orders": orders,
                "orphaning_orders": c[0],
                "share": c[0] / orders,
                "total_orphans": c[1],
                "max_orphans": c[2],
            }
            for p, c in counts.items()
        ]
    )


def orphan_rates(
    ns: Iterable[int] = range(3, MAX_N + 1),
    priorities_for: Callable[[int], Sequence[int]] | None = None,
    failures: Iterable[int] = (),
    workers: int | None = None,
) -> pd.DataFrame:
    """`explore_delivery_orders` for each n (default 3..8) stacked, for the MAX-vs-frontier chart.

    `priorities_for(n)` gives the priorities (default: all equal, so every order is feasible
    without a `workers` limit).
    """
    frames = []
    for n in ns:
        priorities = [5] * n if priorities_for is None else priorities_for(n)
        frames.append(explore_delivery_orders(priorities, [f for f in failures if f <= n], workers))
    return pd.concat(frames, ignore_index=True)


# --- the model against the real code ---------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """How `verify_against_sqlite` went: runs compared and any disagreement, described."""

    n: int
    orders: int
    runs: int
    mismatches: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        return not self.mismatches


def _compare_run(n: int, order: Sequence[int], failures: Sequence[int]) -> list[str]:
    """Disagreements between SQLite and the model, after every summarize of one run."""
    timeline = run_scenario(scenario_from_order([5] * n, order, failures))
    after = timeline[timeline["op"] == "summarize"]
    problems = []
    for k, row in enumerate(after.itertuples(index=False), start=1):
        model = model_run(n, order[:k], failures)
        for policy in POLICIES:
            cols = POLICY_COLUMNS[policy]
            sql = (getattr(row, cols.coverage), list(getattr(row, cols.orphan_ids)))
            mine = (model[policy]["coverage_end"], model[policy]["orphans"])
            if sql != mine:
                problems.append(
                    f"order {tuple(order)}, failed {tuple(failures)}, after {k} finished, "
                    f"{policy}: SQLite (coverage, orphans) = {sql}, model = {mine}"
                )
    return problems


def verify_against_sqlite(n: int, failure_sets: bool = False) -> Agreement:
    """Run every order of ids 1..n through SQLite (`run_scenario`) and through the model.

    Coverage ends and orphan ids must match per policy after every finished row. With
    `failure_sets`, every order is also run with every subset of its ids dead-lettered.
    """
    if not 1 <= n <= SQLITE_MAX_N:
        raise ValueError(f"verify 1..{SQLITE_MAX_N} messages against SQLite, got {n}")
    ids = range(1, n + 1)
    subsets: list[tuple[int, ...]] = [()]
    if failure_sets:
        subsets = [c for size in range(n + 1) for c in itertools.combinations(ids, size)]
    orders = runs = 0
    mismatches: list[str] = []
    for order in itertools.permutations(ids):
        orders += 1
        for failures in subsets:
            runs += 1
            mismatches.extend(_compare_run(n, order, failures))
    return Agreement(n, orders, runs, tuple(mismatches))
