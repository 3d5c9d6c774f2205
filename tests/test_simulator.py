"""The simulated planner: deterministic traces; unguarded designs rewind, ballots never do."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.ballot import simulate
from labkit.db import connect
from labkit.designs.run_stats import RunSummary, summarize_run
from labkit.designs.simulator import COLUMNS, FAULTS, PlannerConfig, _Run, run, trace_frame

SAFE = ("ballot", "fenced")
UNSAFE = ("callback", "lww")
NEVER_REWIND = (*SAFE, "cas")


def test_trace_shape_and_summary_keys() -> None:
    trace = simulate("ballot", ["duplicate"], seed=3, ticks=10)
    assert list(trace.columns) == COLUMNS
    assert {"send", "deliver"} <= set(trace["event"])
    assert not trace.attrs  # no side channel: the summary is a function of the trace
    summary = summarize_run(trace)
    assert isinstance(summary, RunSummary) and summary.design == "ballot"
    for key in ("commits", "accepted", "rejects", "replays", "rewinds", "throughput"):
        assert key in summary.as_dict()
    assert summary.commits == 10 and summary.final_head == 10 and not summary.truncated


def test_run_returns_the_trace_and_its_summary_explicitly() -> None:
    done = run("fenced", ["duplicate", "inverted"], seed=3, ticks=10, window=2)
    assert done.trace.equals(simulate("fenced", ["inverted", "duplicate"], 3, ticks=10, window=2))
    assert done.summary == summarize_run(done.trace)
    assert done.faults == ("inverted", "duplicate") and done.seed == 3
    assert (done.config.ticks, done.config.window) == (10, 2)


@settings(max_examples=30, deadline=None)
@given(
    design=st.sampled_from(["callback", "lww", "ballot", "fenced", "cas", "pipelined"]),
    faults=st.sets(st.sampled_from(FAULTS)),
    seed=st.integers(0, 10_000),
    max_events=st.sampled_from([20, 5000]),
)
def test_the_trace_frame_is_the_one_pandas_builds_from_the_rows(
    design: str, faults: set[str], seed: int, max_events: int
) -> None:
    """Built column by column for speed, the trace is exactly `pd.DataFrame(rows)`: values,
    dtypes (None as NaN or None alike) and index; truncated runs and no rows included."""
    from labkit.designs.registry import make_design

    cfg = PlannerConfig(ticks=8, window=2, max_events=max_events)
    made = make_design(design, window=cfg.window, ticks=cfg.ticks)
    rows = _Run(made, frozenset(faults), seed, cfg).run()
    for some in (rows, []):
        pd.testing.assert_frame_equal(
            trace_frame(some), pd.DataFrame(some, columns=COLUMNS), check_exact=True
        )


@pytest.mark.parametrize("design", [*NEVER_REWIND, *UNSAFE])
def test_same_seed_same_trace(design: str) -> None:
    a = simulate(design, FAULTS, seed=11, ticks=12)
    b = simulate(design, FAULTS, seed=11, ticks=12)
    assert a.equals(b)


@pytest.mark.parametrize("design", UNSAFE)
@pytest.mark.parametrize("seed", range(8))
def test_unguarded_designs_rewind_on_the_inverted_trace(design: str, seed: int) -> None:
    trace = simulate(design, ["inverted"], seed=seed)
    assert summarize_run(trace).rewinds >= 1
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
    s = summarize_run(trace)
    assert s.rewinds == 0 and s.overwrites == 0
    assert trace["head_version"].is_monotonic_increasing
    # commits are head changes the reader saw; each is exactly one accepted response, +1 each
    assert s.commits == s.accepted == s.final_head == 12
    assert int(trace["head_changed"].sum()) == 12


def test_commits_are_what_the_reader_saw_not_what_the_design_claimed() -> None:
    """Callback accepts bodies identical to the head (duplicates): accepted, yet no commit."""
    s = summarize_run(simulate("callback", FAULTS, seed=0))
    assert s.accepted > s.commits > 0


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_class_shows_up_in_the_trace(fault: str) -> None:
    trace = simulate("ballot", [fault], seed=5)
    assert (trace["fault"] == fault).any()


def test_stale_body_is_rejected_as_stale_base() -> None:
    trace = simulate("ballot", ["stale_body"], seed=2)
    assert summarize_run(trace).rejects["stale_base"] == 1
    assert summarize_run(trace).replays >= 1


def test_crash_keeps_the_inflight_ballot() -> None:
    trace = simulate("ballot", ["crash"], seed=4)
    crash_row = trace.index[trace["event"] == "crash"][0]
    before = trace.loc[:crash_row]
    last_sent = before[before["event"] == "send"].iloc[-1]
    after = trace.loc[crash_row:]
    landed = after[(after["event"] == "deliver") & (after["ballot_id"] == last_sent["ballot_id"])]
    assert bool(landed["committed"].iloc[0])  # the ballot reserved before the crash committed


def test_callback_corrupts_on_retry_after_commit_but_ballot_does_not() -> None:
    bad = run("callback", ["retry_after_commit"], seed=1).summary
    good = run("ballot", ["retry_after_commit"], seed=1).summary
    assert bad.rewinds >= 1
    assert good.rewinds == 0 and good.rejects["unknown_ballot"] >= 1


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="design"):
        simulate("nope", [], 0)
    with pytest.raises(ValueError, match="fault"):
        simulate("ballot", ["gremlins"], 0)


@pytest.mark.parametrize("design", ["ballot", "fenced"])
def test_crash_restarts_from_the_sqlite_file(design: str, tmp_path) -> None:
    """On a file, a crash closes the store and the restart reopens it; the run is the same."""
    on_file = simulate(design, ["crash", "inverted"], seed=3, db_path=tmp_path / "store.db")
    in_memory = simulate(design, ["crash", "inverted"], seed=3)
    assert summarize_run(on_file).crashes == 1
    cols = ["t", "event", "ballot_id", "committed", "reason", "head_version"]
    assert on_file[cols].equals(in_memory[cols])
    from labkit.catalog import versions as catalog

    assert catalog.verify(connect(tmp_path / "store.db")) == 20  # the log is on disk
    with pytest.raises(ValueError, match="new file"):
        simulate(design, ["crash"], seed=3, db_path=tmp_path / "store.db")


def test_a_bare_string_of_faults_is_refused_not_read_letter_by_letter() -> None:
    with pytest.raises(ValueError, match=r"faults must be a collection .*\['crash'\].*string"):
        simulate("ballot", "crash", 0)
    with pytest.raises(ValueError, match="faults must be a collection"):
        simulate("ballot", None, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown fault class"):
        simulate("ballot", [3], 0)  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        ("timeout", 0),
        ("timeout", -1.0),
        ("latency", float("nan")),
        ("latency", 0),
        ("latency", float("inf")),
        ("sigma", -0.1),
        ("duplicate_rate", 1.5),
        ("duplicate_rate", float("nan")),
        ("clock_skew", -1),
        ("stall_time", -2),
        ("restart_delay", float("nan")),
        ("hosts", 0),
        ("window", 0),
        ("ticks", 0),
        ("ticks", 2.5),
        ("ticks", True),
        ("max_events", 0),
        ("latency", "1"),
    ],
)
def test_bad_knobs_raise_one_line_naming_knob_and_value(knob: str, value: object) -> None:
    with pytest.raises(ValueError) as err:
        simulate("ballot", [], 0, **{knob: value})
    message = str(err.value)
    assert "\n" not in message and message.startswith(knob) and repr(value) in message


def test_bad_seed_and_unknown_knobs_are_named() -> None:
    with pytest.raises(ValueError, match="seed must be an integer, got 1.5"):
        simulate("ballot", [], 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"unknown simulator knob\(s\) \['latancy'\]"):
        simulate("ballot", [], 0, latancy=2.0)


def test_reaching_max_events_is_flagged_and_warned_not_silent() -> None:
    with pytest.warns(RuntimeWarning, match="max_events=30.*truncated"):
        cut = run("ballot", FAULTS, seed=0, max_events=30)
    assert cut.summary.truncated and cut.trace["event"].iloc[-1] == "truncated"
    assert summarize_run(cut.trace).truncated and cut.summary.final_head < 20
    full = run("ballot", FAULTS, seed=0)
    assert not full.summary.truncated and "truncated" not in set(full.trace["event"])


# --- compare-and-set on the version ------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(faults=st.sets(st.sampled_from(FAULTS)), seed=st.integers(0, 10_000), skew=st.floats(0, 5))
def test_cas_never_rewinds_and_each_commit_is_one_accepted_response(
    faults: set[str], seed: int, skew: float
) -> None:
    trace = simulate("cas", faults, seed, ticks=12, clock_skew=skew)
    s = summarize_run(trace)
    assert s.rewinds == 0 and s.overwrites == 0
    assert trace["head_version"].is_monotonic_increasing
    assert s.commits == s.accepted == s.kept == s.final_head == 12


def test_cas_rejects_late_and_stale_responses_as_cas_conflicts() -> None:
    for fault in ("inverted", "stale_body", "retry_after_commit"):
        trace = simulate("cas", [fault], seed=0)
        hit = trace[(trace["event"] == "deliver") & (trace["fault"] == fault)]
        assert not hit.empty and (hit["reason"] == "cas_conflict").any(), fault
        assert summarize_run(trace).rejects["cas_conflict"] >= 1


def test_a_design_in_memory_starts_from_a_store_like_a_fresh_one_and_its_own() -> None:
    """`empty_memory_store` copies one store made once per thread: the copy holds what a fresh
    store holds, and each design writes only into its own."""
    import threading

    from labkit.catalog.loop import WatermarkLoop
    from labkit.designs.design import BallotDesign, empty_memory_store
    from labkit.designs.planner import respond

    fresh = connect(":memory:")
    WatermarkLoop(fresh, clock=lambda: 0.0)
    assert list(empty_memory_store().iterdump()) == list(fresh.iterdump())
    first, second = BallotDesign(window=1, ticks=3), BallotDesign(window=1, ticks=3)
    (req,) = first.start(0.0)
    first.on_response(req, respond(first, req, None), 1.0)
    assert first.loop.head_version() == 1 and second.loop.head_version() == 0
    assert list(empty_memory_store().iterdump()) == list(fresh.iterdump())
    clocked = BallotDesign(clock=lambda: 5.0)  # its genesis is stamped by its own clock
    assert clocked.conn.execute("SELECT committed_at FROM catalog_versions").fetchone()[0] == 5.0
    made: list[int] = []
    other = threading.Thread(target=lambda: made.append(BallotDesign().loop.head_version()))
    other.start()
    other.join()
    assert made == [0]  # a thread of its own gets a template of its own (sqlite3 stays put)
