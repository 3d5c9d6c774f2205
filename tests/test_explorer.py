"""Exhaustive delivery orders: the fast model agrees with SQLite, and only MAX orphans rows."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.frontier import orders as ex
from labkit.frontier import scenarios as sc


def feasible(order: tuple[int, ...], priorities: list[int], workers: int) -> bool:
    """Brute force: can k workers dispatching ORDER BY priority, id finish rows in `order`?"""
    queue = sc.dispatch_order(priorities)
    inflight = set(queue[:workers])
    nxt = workers
    for i in order:
        if i not in inflight:
            return False
        inflight.remove(i)
        if nxt < len(queue):
            inflight.add(queue[nxt])
            nxt += 1
    return True


def test_n3_counts_by_hand() -> None:
    table = ex.explore_delivery_orders([5, 5, 5]).set_index("policy")
    assert table.loc["frontier", "orders"] == 6
    assert table.loc["frontier", "orphaning_orders"] == 0
    # only 1,2,3 is safe under MAX; the other five orders lose 7 rows between them
    assert table.loc["max", "orphaning_orders"] == 5
    assert table.loc["max", "total_orphans"] == 7
    assert table.loc["max", "max_orphans"] == 2


def test_walk_matches_per_order_model() -> None:
    n, failures = 5, [2]
    table = ex.enumerate_orders([5] * n, failures=failures)
    assert set(table["order"]) == set(itertools.permutations(range(1, n + 1)))
    for row in table.itertuples():
        one = ex.model_run(n, row.order, failures)
        assert len(one["frontier"]["orphans"]) == row.orphans_frontier == 0
        assert len(one["max"]["orphans"]) == row.orphans_max


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_workers_restrict_to_dispatchable_orders(workers: int) -> None:
    priorities = [3, 1, 2, 1, 3]
    got = set(ex.enumerate_orders(priorities, workers=workers)["order"])
    every = itertools.permutations(range(1, 6))
    assert got == {o for o in every if feasible(o, priorities, workers)}
    if workers == 1:
        assert got == {tuple(sc.dispatch_order(priorities))}


def test_enough_workers_means_every_order() -> None:
    assert len(ex.enumerate_orders([1, 2, 3, 4], workers=4)) == 24
    assert len(ex.enumerate_orders([1, 2, 3, 4], workers=9)) == 24


def test_single_priority_dispatcher_already_orphans_under_max() -> None:
    table = ex.explore_delivery_orders([5, 5, 1, 5, 5, 5], workers=1).set_index("policy")
    assert table.loc["max", "orders"] == 1 and table.loc["max", "total_orphans"] == 2
    assert table.loc["frontier", "total_orphans"] == 0


def test_n8_every_order() -> None:
    table = ex.explore_delivery_orders([5] * 8, failures=[8]).set_index("policy")
    assert table.loc["max", "orders"] == math.factorial(8)
    assert table.loc["frontier", "orphaning_orders"] == 0
    assert table.loc["max", "orphaning_orders"] > 0.99 * math.factorial(8)


def test_orphan_rates_for_the_chart() -> None:
    rates = ex.orphan_rates(range(3, 6), failures=[4])
    assert rates["n"].tolist() == [3, 3, 4, 4, 5, 5]
    assert rates["orders"].tolist() == [6, 6, 24, 24, 120, 120]
    assert (rates.loc[rates["policy"] == "frontier", "share"] == 0).all()
    assert rates.loc[rates["policy"] == "max", "share"].is_monotonic_increasing


@pytest.mark.parametrize(("priorities", "workers"), [([5] * 9, None), ([], None), ([5], 0)])
def test_out_of_range_is_refused(priorities: list[int], workers: int | None) -> None:
    with pytest.raises(ValueError):
        ex.explore_delivery_orders(priorities, workers=workers)


@st.composite
def delivery(draw):
    n = draw(st.integers(1, ex.MAX_N))
    priorities = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    order = draw(st.permutations(range(1, n + 1)))
    order = order[: draw(st.integers(0, n))]
    failures = draw(st.sets(st.sampled_from(order))) if order else set()
    return priorities, order, failures


@settings(max_examples=50)
@given(case=delivery())
def test_model_agrees_with_sqlite(case) -> None:
    priorities, order, failures = case
    last = sc.run_scenario(sc.scenario_from_order(priorities, order, failures)).iloc[-1]
    model = ex.model_run(len(priorities), order, failures)
    for policy in ("frontier", "max"):
        assert model[policy]["coverage_end"] == last[f"coverage_{policy}"]
        assert tuple(model[policy]["orphans"]) == last[f"orphan_ids_{policy}"]


# --- exhaustive: every order for small n through the real SQLite code (SPEC section 7) --------


def sqlite_vs_model(n: int, order: tuple[int, ...], failures: tuple[int, ...]) -> None:
    """After every finished row, SQLite's coverage and orphans equal the model's, per policy."""
    timeline = sc.run_scenario(sc.scenario_from_order([5] * n, order, failures))
    after = timeline[timeline["op"] == "summarize"].reset_index(drop=True)
    assert len(after) == n
    for k in range(n):
        model = ex.model_run(n, order[: k + 1], failures)
        for policy in ("frontier", "max"):
            got = (after.loc[k, f"coverage_{policy}"], after.loc[k, f"orphan_ids_{policy}"])
            want = (model[policy]["coverage_end"], tuple(model[policy]["orphans"]))
            assert got == want, (order, failures, k + 1, policy)
    assert after.loc[n - 1, "orphan_ids_frontier"] == ()


def test_every_order_up_to_five_agrees_with_sqlite() -> None:
    runs = 0
    for n in range(1, 6):
        for order in itertools.permutations(range(1, n + 1)):
            sqlite_vs_model(n, order, ())
            runs += 1
    assert runs == 1 + 2 + 6 + 24 + 120


def test_every_order_and_failure_set_at_four_agrees_with_sqlite() -> None:
    subsets = [c for k in range(5) for c in itertools.combinations(range(1, 5), k)]
    assert len(subsets) == 16
    for order in itertools.permutations(range(1, 5)):
        for failures in subsets:
            sqlite_vs_model(4, order, failures)


@pytest.mark.parametrize(
    ("n", "failure_sets", "runs"), [(1, False, 1), (3, False, 6), (3, True, 48)]
)
def test_verify_against_sqlite_helper(n: int, failure_sets: bool, runs: int) -> None:
    result = ex.verify_against_sqlite(n, failure_sets=failure_sets)
    assert result.agrees and result.mismatches == ()
    assert (result.n, result.orders, result.runs) == (n, math.factorial(n), runs)


def test_verify_against_sqlite_reports_a_broken_model(monkeypatch) -> None:
    # a model whose frontier ignores open rows (the MAX mistake) must be caught
    monkeypatch.setattr(ex, "_frontier_end", lambda cover_end, done, n: done.bit_length() - 1)
    result = ex.verify_against_sqlite(3)
    assert not result.agrees
    assert "frontier: SQLite (coverage, orphans)" in result.mismatches[0]


@pytest.mark.parametrize("n", [0, ex.SQLITE_MAX_N + 1])
def test_verify_against_sqlite_refuses_out_of_range(n: int) -> None:
    with pytest.raises(ValueError, match="against SQLite"):
        ex.verify_against_sqlite(n)
