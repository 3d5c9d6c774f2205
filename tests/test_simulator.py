"""The simulated planner: deterministic traces; unguarded designs rewind, ballots never do."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.ballot import simulate, summarize
from labkit.db import connect
from labkit.planner import COLUMNS, FAULTS

SAFE = ("ballot", "fenced")
UNSAFE = ("callback", "lww")


def test_trace_shape_and_summary_keys() -> None:
    trace = simulate("ballot", ["duplicate"], seed=3, ticks=10)
    assert list(trace.columns) == COLUMNS
    assert {"send", "deliver"} <= set(trace["event"])
    summary = summarize(trace)
    assert summary.items() <= trace.attrs["summary"].items()
    for key in ("commits", "accepted", "rejects", "replays", "rewinds", "throughput"):
        assert key in summary
    assert summary["commits"] == 10 and summary["final_head"] == 10


@pytest.mark.parametrize("design", [*SAFE, *UNSAFE])
def test_same_seed_same_trace(design: str) -> None:
    a = simulate(design, FAULTS, seed=11, ticks=12)
    b = simulate(design, FAULTS, seed=11, ticks=12)
    assert a.equals(b)


@pytest.mark.parametrize("design", UNSAFE)
@pytest.mark.parametrize("seed", range(8))
def test_unguarded_designs_rewind_on_the_inverted_trace(design: str, seed: int) -> None:
    trace = simulate(design, ["inverted"], seed=seed)
    assert trace.attrs["summary"]["rewinds"] >= 1
    fall = trace[trace["rewind"]].iloc[0]
    assert fall["event"] == "deliver" and fall["fault"] == "inverted"


@pytest.mark.parametrize("design", SAFE)
def test_safe_designs_reject_the_inverted_response(design: str) -> None:
    trace = simulate(design, ["inverted"], seed=0)
    late = trace[(trace["event"] == "deliver") & (trace["fault"] == "inverted")]
    assert len(late) == 1 and not late["committed"].iloc[0]
    assert late["reason"].iloc[0] in ("unknown_ballot", "stale_watermark")


@settings(max_examples=40, deadline=None)
@given(
    design=st.sampled_from(SAFE),
    faults=st.sets(st.sampled_from(FAULTS)),
    seed=st.integers(0, 10_000),
    window=st.integers(2, 4),
    skew=st.floats(0, 5),
)
def test_safe_designs_never_rewind(
    design: str, faults: set[str], seed: int, window: int, skew: float
) -> None:
    trace = simulate(design, faults, seed, ticks=12, window=window, clock_skew=skew)
    s = trace.attrs["summary"]
    assert s["rewinds"] == 0 and s["overwrites"] == 0
    assert trace["head_version"].is_monotonic_increasing
    # commits are head changes the reader saw; each is exactly one accepted response, +1 each
    assert s["commits"] == s["accepted"] == s["final_head"] == 12
    assert int(trace["head_changed"].sum()) == 12


def test_commits_are_what_the_reader_saw_not_what_the_design_claimed() -> None:
    """Callback accepts bodies identical to the head (duplicates): accepted, yet no commit."""
    s = simulate("callback", FAULTS, seed=0).attrs["summary"]
    assert s["accepted"] > s["commits"] > 0


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_class_shows_up_in_the_trace(fault: str) -> None:
    trace = simulate("ballot", [fault], seed=5)
    assert (trace["fault"] == fault).any()


def test_stale_body_is_rejected_as_stale_base() -> None:
    trace = simulate("ballot", ["stale_body"], seed=2)
    assert trace.attrs["summary"]["rejects"]["stale_base"] == 1
    assert trace.attrs["summary"]["replays"] >= 1


def test_crash_keeps_the_inflight_ballot() -> None:
    trace = simulate("ballot", ["crash"], seed=4)
    crash_row = trace.index[trace["event"] == "crash"][0]
    before = trace.loc[:crash_row]
    last_sent = before[before["event"] == "send"].iloc[-1]
    after = trace.loc[crash_row:]
    landed = after[(after["event"] == "deliver") & (after["ballot_id"] == last_sent["ballot_id"])]
    assert bool(landed["committed"].iloc[0])  # the ballot reserved before the crash committed


def test_callback_corrupts_on_retry_after_commit_but_ballot_does_not() -> None:
    bad = simulate("callback", ["retry_after_commit"], seed=1).attrs["summary"]
    good = simulate("ballot", ["retry_after_commit"], seed=1).attrs["summary"]
    assert bad["rewinds"] >= 1
    assert good["rewinds"] == 0 and good["rejects"]["unknown_ballot"] >= 1


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="design"):
        simulate("nope", [], 0)
    with pytest.raises(ValueError, match="fault"):
        simulate("ballot", ["gremlins"], 0)


def test_summary_table_splits_rejects_by_reason() -> None:
    from labkit.planner import summary_table

    traces = {d: simulate(d, ["stale_body"], seed=2) for d in ("callback", "ballot")}
    table = summary_table({d: t.attrs["summary"] for d, t in traces.items()}).set_index("design")
    assert table.loc["ballot", "rejected: stale base"] == 1
    assert table.loc["callback", "rejected: stale base"] == 0
    assert table.loc["ballot", "commits"] == traces["ballot"].attrs["summary"]["commits"]


@pytest.mark.parametrize("design", ["ballot", "fenced"])
def test_crash_restarts_from_the_sqlite_file(design: str, tmp_path) -> None:
    """On a file, a crash closes the store and the restart reopens it; the run is the same."""
    on_file = simulate(design, ["crash", "inverted"], seed=3, db_path=tmp_path / "store.db")
    in_memory = simulate(design, ["crash", "inverted"], seed=3)
    assert on_file.attrs["summary"]["crashes"] == 1
    cols = ["t", "event", "ballot_id", "committed", "reason", "head_version"]
    assert on_file[cols].equals(in_memory[cols])
    from labkit import catalog

    assert catalog.verify(connect(tmp_path / "store.db")) == 20  # the log is on disk
    with pytest.raises(ValueError, match="new file"):
        simulate(design, ["crash"], seed=3, db_path=tmp_path / "store.db")
