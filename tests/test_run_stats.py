"""Run statistics: what a simulated run did, counted from its trace as an independent reader
saw it (kept versions, latency, wasted calls), and the table that lays runs side by side."""

from __future__ import annotations

import pandas as pd
import pytest

from labkit.designs.run_stats import summarize_run, summary_table
from labkit.designs.simulator import COLUMNS, FAULTS, simulate


def test_summary_table_splits_rejects_by_reason() -> None:
    traces = {d: simulate(d, ["stale_body"], seed=2) for d in ("callback", "ballot")}
    table = summary_table({d: summarize_run(t) for d, t in traces.items()}).set_index("design")
    assert table.loc["ballot", "rejected: stale base"] == 1
    assert table.loc["callback", "rejected: stale base"] == 0
    assert table.loc["ballot", "commits"] == summarize_run(traces["ballot"]).commits


# --- the trade-off table's columns, on a trace small enough to check by hand ------------------


def _row(t: float, event: str, head: int, **extra: object) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(
        t=t,
        design="hand",
        event=event,
        head_version=head,
        rewind=False,
        overwrite=False,
        head_changed=False,
    )
    row.update(extra)
    return row


def _hand_trace() -> pd.DataFrame:
    """Five planner calls. Request 1 (base 0) commits v1 at t=1. Requests 2 and 3 are both
    based on v1 (sent at 1 and 2); 2 commits v2 at 4, 3 lands at 5 and is rejected. Request 4
    (base 2, sent at 4) commits v3 at 6. A late write then rewinds the head to 2 at 7 (v3 is
    taken back), request 5 (base 2, sent at 7) commits v3 again at 9: a version seen before."""
    deliver = {"event": "deliver"}
    rows = [
        _row(0, "send", 0, request_id=1, base_version=0),
        _row(1, **deliver, head=1, request_id=1, committed=True, head_changed=True),
        _row(1, "send", 1, request_id=2, base_version=1),
        _row(2, "send", 1, request_id=3, base_version=1, replay_of=2),
        _row(4, **deliver, head=2, request_id=2, committed=True, head_changed=True),
        _row(4, "send", 2, request_id=4, base_version=2),
        _row(5, **deliver, head=2, request_id=3, committed=False, reason="cas_conflict"),
        _row(6, **deliver, head=3, request_id=4, committed=True, head_changed=True),
        _row(7, **deliver, head=2, request_id=1, committed=True, head_changed=True, rewind=True),
        _row(7, "send", 2, request_id=5, base_version=2),
        _row(9, **deliver, head=3, request_id=5, committed=True, head_changed=True),
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def test_kept_commits_leave_out_rewinds_and_what_they_took_back() -> None:
    s = summarize_run(_hand_trace())
    assert (s.accepted, s.commits, s.rewinds) == (5, 5, 1)
    assert s.kept == 2  # v1 and v2; v3 was taken back by the rewind and only seen again later
    assert s.throughput == pytest.approx(2 / 4)  # 2 kept versions by t=4 (v2 appeared at 4)


def test_latency_runs_from_the_first_request_for_a_version_to_its_commit() -> None:
    s = summarize_run(_hand_trace())
    # kept: v1 asked at 0, committed at 1 -> 1; v2 first asked at 1 (request 2), at 4 -> 3
    assert (s.latency_p50, s.latency_p95) == (1.0, 3.0)
    trimmed = summarize_run(_hand_trace().iloc[:8])  # before the rewind: v3 asked at 4, at 6
    assert trimmed.kept == 3
    assert (trimmed.latency_p50, trimmed.latency_p95) == (2.0, 3.0)


def test_wasted_calls_are_calls_beyond_one_per_kept_commit() -> None:
    s = summarize_run(_hand_trace())
    assert s.requests == 5 and s.wasted_per_commit == pytest.approx((5 - 2) / 2)
    trimmed = summarize_run(_hand_trace().iloc[:8])
    assert trimmed.wasted_per_commit == pytest.approx((4 - 3) / 3)


def test_an_overwrite_takes_back_the_version_it_wrote_over() -> None:
    rows = _hand_trace().iloc[:5].to_dict("records")
    rows.append(
        _row(5, "deliver", 2, request_id=3, committed=True, head_changed=True, overwrite=True)
    )
    s = summarize_run(pd.DataFrame(rows, columns=COLUMNS))
    assert (s.commits, s.overwrites, s.kept) == (3, 1, 1)


def test_summary_table_has_the_new_columns_rounded_and_names_each_design() -> None:
    runs = {d: summarize_run(simulate(d, FAULTS, seed=0)) for d in ("callback", "fenced")}
    table = summary_table(runs).set_index("design")
    assert table.loc["fenced", "name"] == "hedged ballots"
    for col, field in [
        ("throughput (kept commits per time unit)", "throughput"),
        ("latency p50", "latency_p50"),
        ("latency p95", "latency_p95"),
        ("wasted calls / commit", "wasted_per_commit"),
    ]:
        for design, s in runs.items():
            assert table.loc[design, col] == round(getattr(s, field), 2)
    # hedged ballots pay in planner calls; the callback keeps fewer versions than it accepted
    assert table.loc["fenced", "wasted calls / commit"] > 1
    assert table.loc["callback", "kept"] < table.loc["callback", "commits"]
    assert table.loc["callback", "commits"] < table.loc["callback", "accepted"]
