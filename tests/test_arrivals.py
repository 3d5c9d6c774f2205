"""Exhaustive arrival orders, the schedule checker, and seed two's closing question."""

from __future__ import annotations

import pytest

from labkit.arrivals import (
    CRASH,
    DELIVER,
    TIMEOUT,
    ScheduleError,
    StepOutcome,
    closing_question,
    explore,
    run_schedule,
)

SEED_INVERTED = ["timeout", "deliver 2", "deliver 3", "deliver 1"]


@pytest.mark.parametrize("design", ["callback", "lww"])
def test_seed_inverted_schedule_rewinds_unguarded(design: str) -> None:
    res = run_schedule(design, SEED_INVERTED)
    assert res.rewinds and res.heads == [0, 1, 2, 1] and res.first_rewind == 3


@pytest.mark.parametrize("design", ["ballot", "fenced"])
def test_seed_inverted_schedule_is_rejected_by_ballots(design: str) -> None:
    res = run_schedule(design, SEED_INVERTED)
    assert not res.rewinds
    last = res.outcomes[-1]
    assert (last.kind, last.request_id, last.committed) == (DELIVER, 1, False)
    assert last.reason == "unknown_ballot" and last.label == "1:unknown_ballot"


def test_exhaustive_counts() -> None:
    found = {d: explore(d, 3) for d in ("callback", "lww", "ballot", "fenced")}
    assert found["ballot"].rewinding == found["fenced"].rewinding == 0
    assert found["ballot"].orders > 0 and found["fenced"].orders > 0
    assert found["callback"].rewinding > 0 and found["lww"].rewinding > 0
    assert found["callback"].shortest == ["deliver 1", "deliver 2", "deliver 1"]
    assert found["lww"].shortest == SEED_INVERTED


def test_closing_question() -> None:
    table = closing_question()
    rewinds = table.groupby("design")["rewinds"].sum().to_dict()
    assert rewinds == {"ballot": 0, "fenced": 0, "callback": 5, "lww": 3}
    lww_bad = set(table[(table["design"] == "lww") & table["rewinds"]]["order"])
    assert lww_bad == {o for o in table["order"] if o.startswith("14")}
    assert (table[table["design"].isin(["ballot", "fenced"])]["final_head"] == 2).all()
    fenced = table[table["design"] == "fenced"]
    assert fenced["outcomes"].str.contains("12:stale_watermark").all()


def test_schedule_errors_name_the_step() -> None:
    with pytest.raises(ScheduleError, match="'deliver 7'.*not been sent"):
        run_schedule("ballot", ["deliver 7"])
    with pytest.raises(ScheduleError, match="'jump 1'"):
        run_schedule("ballot", ["jump 1"])


def test_stale_and_crash_steps() -> None:
    res = run_schedule("ballot", ["1", "stale 2", "crash", "3"])
    assert res.outcomes == [
        StepOutcome(DELIVER, 1, request_id=1, committed=True),
        StepOutcome(DELIVER, 1, request_id=2, committed=False, reason="stale_base"),
        StepOutcome(CRASH, 1),
        StepOutcome(DELIVER, 2, request_id=3, committed=True),
    ]
    assert res.labels == ["1:commit", "2:stale_base", "crash+restart", "3:commit"]
    assert res.replays == 1 and res.final_head == 2


def test_outcomes_are_typed_and_carry_the_head_and_rewind() -> None:
    res = run_schedule("callback", SEED_INVERTED)
    gave_up, *_, late = res.outcomes
    assert (gave_up.kind, gave_up.request_id, gave_up.committed) == (TIMEOUT, 1, None)
    assert str(gave_up) == "timeout 1"
    assert late.rewind and late.head == 1 and late.committed
    assert [o.rewind for o in res.outcomes] == [False, False, False, True]
    assert res.first_rewind == 3 and res.heads == [0, 1, 2, 1]
    idle = run_schedule("callback", ["1", "timeout"], ticks=1).outcomes[-1]
    assert (idle.kind, idle.request_id, idle.label) == (TIMEOUT, None, "timeout: nothing awaited")


def test_unknown_design_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown design 'nope'; expected one of callback"):
        run_schedule("nope", ["1"])


def test_stale_must_be_a_first_delivery_on_a_real_base() -> None:
    with pytest.raises(ScheduleError, match="'stale 1'.*based on version 0"):
        run_schedule("ballot", ["stale 1"])
    with pytest.raises(ScheduleError, match="'stale 2'.*already produced"):
        run_schedule("callback", ["1", "2", "stale 2"])


def test_dup_is_a_documented_alias_of_deliver() -> None:
    plain = run_schedule("callback", ["1", "2", "deliver 1"])
    assert run_schedule("callback", ["1", "2", "dup 1"]).outcomes == plain.outcomes
