"""Chained checkpoints: one summary per terminal row under "frontier", orphans under "max"."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import example, find, given, settings
from hypothesis import strategies as st

from labkit.frontier import log as fr
from labkit.frontier import summarizer as sm

SHARDS = ["main", "o'brien\"; DROP", "频道-é"]


def seed_log() -> sqlite3.Connection:
    conn = fr.connect()
    for priority in [5, 5, 1, 5, 5, 5]:
        fr.enqueue(conn, "main", priority)
    return conn


def deliver(conn: sqlite3.Connection, *ids: int) -> None:
    for i in ids:
        fr.mark_delivered(conn, i)


def summarize_both(conn: sqlite3.Connection, key: str = "main") -> None:
    for policy in fr.POLICIES:
        sm.summarize_range(conn, key, policy)


def test_seed_max_policy_orphans_rows_frontier_does_not() -> None:
    conn = seed_log()
    deliver(conn, 3, 5)
    summarize_both(conn)
    deliver(conn, 1, 2)
    summarize_both(conn)
    deliver(conn, 4, 6)
    summarize_both(conn)
    assert sm.orphans(conn, "main", "max") == [1, 2, 4]
    assert sm.orphans(conn, "main", "frontier") == []
    frontier_ranges = [
        (s.start_id, s.end_id, s.item_ids) for s in sm.summaries(conn, "main", "frontier")
    ]
    assert frontier_ranges == [(1, 3, (1, 2, 3)), (4, 6, (4, 5, 6))]
    max_ranges = [(s.start_id, s.end_id, s.item_ids) for s in sm.summaries(conn, "main", "max")]
    assert max_ranges == [(1, 5, (3, 5)), (6, 6, (6,))]
    assert sm.chain_problems(conn, "main", "frontier") == []


def test_summarize_with_nothing_new_writes_nothing() -> None:
    conn = seed_log()
    assert sm.summarize_range(conn, "main") is None
    deliver(conn, 2)
    assert sm.summarize_range(conn, "main") is None  # id 1 blocks
    assert sm.coverage_end(conn, "main") == 0
    assert conn.execute("SELECT COUNT(*) FROM summaries").fetchone()[0] == 0


def test_next_summary_starts_at_previous_end_plus_one() -> None:
    conn = seed_log()
    deliver(conn, 1, 2)
    first = sm.summarize_range(conn, "main")
    deliver(conn, 3, 4, 5, 6)
    second = sm.summarize_range(conn, "main")
    assert first is not None and second is not None
    assert (first.start_id, first.end_id) == (1, 2)
    assert second.start_id == first.end_id + 1 and second.end_id == 6


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        sm.summarize_range(seed_log(), "main", "latest")


def test_summary_and_coverage_commit_together() -> None:
    conn = seed_log()
    deliver(conn, 1, 2)
    conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON summary_items BEGIN SELECT RAISE(ABORT, 'disk'); END"
    )
    with pytest.raises(sqlite3.IntegrityError, match="disk"):
        sm.summarize_range(conn, "main")
    assert sm.coverage_end(conn, "main") == 0
    assert conn.execute("SELECT COUNT(*) FROM summaries").fetchone()[0] == 0
    conn.execute("DROP TRIGGER boom")
    assert sm.summarize_range(conn, "main") is not None
    assert sm.coverage_end(conn, "main") == 2


def test_policies_keep_separate_checkpoints() -> None:
    conn = seed_log()
    deliver(conn, 3)
    summarize_both(conn)
    assert sm.coverage_end(conn, "main", "max") == 3
    assert sm.coverage_end(conn, "main", "frontier") == 0


# --- property: random interleavings --------------------------------------------------------

op_strategy = st.one_of(
    st.tuples(st.just("enqueue"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("dispatch"), st.integers(0, 2), st.just(0)),
    st.tuples(st.sampled_from(["deliver", "fail"]), st.integers(0, 50), st.just(0)),
    st.tuples(st.just("summarize"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("redrive"), st.integers(0, 50), st.just(0)),
)


def test_interleavings_include_redrive() -> None:
    assert find(op_strategy, lambda op: op[0] == "redrive")[0] == "redrive"


# a failed row summarized, redriven, and the new row summarized later under the same chain
REDRIVE_STORY = [
    ("enqueue", 0, 1),
    ("enqueue", 0, 2),
    ("fail", 0, 0),
    ("summarize", 0, 0),
    ("redrive", 0, 0),
    ("deliver", 0, 0),
    ("summarize", 0, 0),
    ("deliver", 0, 0),
    ("summarize", 0, 0),
]


def apply_op(conn: sqlite3.Connection, op: str, a: int, b: int) -> None:
    """Apply one random op; deliver/fail pick among open rows, redrive among failed ones."""
    if op == "enqueue":
        fr.enqueue(conn, SHARDS[a], b)
    elif op == "dispatch":
        fr.dispatch_next(conn, SHARDS[a])
    elif op == "summarize":
        summarize_both(conn, SHARDS[a])
    elif op == "redrive":
        failed = [
            r[0] for r in conn.execute("SELECT id FROM conversations WHERE status = 'failed'")
        ]
        if failed:
            old = failed[a % len(failed)]
            new = fr.redrive(conn, old)
            assert new > old and fr.status_of(conn, new) == "pending"
            assert fr.status_of(conn, old) == "failed"
    else:
        open_ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM conversations WHERE status IN ('pending','running') ORDER BY id"
            )
        ]
        if open_ids:
            (fr.mark_delivered if op == "deliver" else fr.mark_failed)(
                conn, open_ids[a % len(open_ids)]
            )


def assert_frontier_invariants(conn: sqlite3.Connection) -> None:
    """Every terminal row up to coverage_end sits in exactly one frontier summary; none beyond."""
    for key in SHARDS:
        end = sm.coverage_end(conn, key, "frontier")
        assert sm.chain_problems(conn, key, "frontier") == []
        assert sm.orphans(conn, key, "frontier") == []
        counts = dict(
            conn.execute(
                "SELECT c.id, COUNT(s.id) FROM conversations AS c "
                "LEFT JOIN summary_items AS si ON si.conversation_id = c.id "
                "LEFT JOIN summaries AS s ON s.id = si.summary_id AND s.policy = 'frontier' "
                "WHERE c.channel_key = ? GROUP BY c.id",
                (key,),
            ).fetchall()
        )
        for row_id, status in conn.execute(
            "SELECT id, status FROM conversations WHERE channel_key = ?", (key,)
        ):
            if row_id <= end:
                assert status in fr.TERMINAL and counts[row_id] == 1, (key, row_id)
            else:
                assert counts[row_id] == 0, (key, row_id)


@settings(max_examples=40)
@given(ops=st.lists(op_strategy, max_size=40))
@example(ops=REDRIVE_STORY)
def test_frontier_policy_covers_every_terminal_row_exactly_once(ops) -> None:
    conn = fr.connect()
    for op in ops:
        apply_op(conn, *op)
        assert_frontier_invariants(conn)
    # finish everything still open; then one more pass must cover every row
    for (row_id,) in conn.execute(
        "SELECT id FROM conversations WHERE status IN ('pending','running')"
    ).fetchall():
        fr.mark_delivered(conn, row_id)
    for key in SHARDS:
        summarize_both(conn, key)
    assert_frontier_invariants(conn)
    unsummarized = conn.execute(
        "SELECT COUNT(*) FROM conversations AS c WHERE NOT EXISTS (SELECT 1 FROM summary_items "
        "AS si JOIN summaries AS s ON s.id = si.summary_id "
        "WHERE si.conversation_id = c.id AND s.policy = 'frontier')"
    ).fetchone()[0]
    assert unsummarized == 0


def test_describe_says_what_a_summary_claims_and_holds() -> None:
    s = sm.Summary(1, "main", "max", 1, 5, (3, 5))
    assert sm.describe(s) == "claims [1, 5], holds ids [3, 5]" == str(s)
    assert sm.describe(None) == "no summary (nothing can be claimed yet)"
