"""The log, its frontier and the wrong MAX rule: the seed's numbers, edge cases, properties."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.frontier import log as fr

ODD_KEYS = ["main", "o'brien\"; DROP TABLE conversations;--", "频道-é", ""]


def seed_log() -> sqlite3.Connection:
    """The seed's six rows: id 3 urgent (priority 1), the rest priority 5."""
    conn = fr.connect()
    for priority in [5, 5, 1, 5, 5, 5]:
        fr.enqueue(conn, "main", priority)
    return conn


def test_create_schema_is_idempotent_and_keeps_rows() -> None:
    conn = seed_log()
    fr.create_schema(conn)
    fr.create_schema(conn)
    assert conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0] == 6
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {
        "conversations",
        "idx_conv_active",
        "idx_conv_shard_id",
        "checkpoints",
        "summaries",
        "summary_items",
    } <= names


def test_status_column_rejects_unknown_values() -> None:
    conn = fr.connect()
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO conversations (channel_key, direction, status, priority) "
            "VALUES ('main', 'inbound', 'lost', 1)"
        )


def test_dispatch_follows_priority_then_id() -> None:
    conn = seed_log()
    picked = [fr.dispatch_next(conn) for _ in range(7)]
    assert picked == [3, 1, 2, 4, 5, 6, None]
    assert fr.status_of(conn, 3) == "running"


def test_dispatch_can_be_scoped_to_a_shard() -> None:
    conn = fr.connect()
    fr.enqueue(conn, "a", 9)
    fr.enqueue(conn, "b", 1)
    assert fr.dispatch_next(conn, "a") == 1
    assert fr.dispatch_next(conn, "a") is None


def test_seed_experiment_numbers() -> None:
    conn = seed_log()
    fr.mark_delivered(conn, 3)
    fr.mark_delivered(conn, 5)
    assert fr.max_delivered_watermark(conn, "main") == 5
    assert fr.delivered_frontier(conn, "main") == 0
    fr.mark_delivered(conn, 1)
    fr.mark_delivered(conn, 2)
    assert fr.delivered_frontier(conn, "main") == 3
    fr.mark_delivered(conn, 4)
    fr.mark_delivered(conn, 6)
    assert fr.delivered_frontier(conn, "main") == 6
    fr.mark_failed(conn, fr.enqueue(conn, "main", 5))  # id 7, dead-lettered
    assert fr.enqueue(conn, "main", 5) == 8
    assert fr.delivered_frontier(conn, "main") == 7
    assert fr.max_delivered_watermark(conn, "main") == 6


def test_max_rule_is_none_before_any_delivery() -> None:
    conn = seed_log()
    assert fr.max_delivered_watermark(conn, "main") is None


@pytest.mark.parametrize("base", [0, 7, 1000])
def test_empty_shard_stays_at_its_base(base: int) -> None:
    conn = seed_log()
    assert fr.delivered_frontier(conn, "quiet", base) == base


def test_all_terminal_advances_to_max_id() -> None:
    conn = seed_log()
    for i in range(1, 7):
        (fr.mark_failed if i == 4 else fr.mark_delivered)(conn, i)
    assert fr.delivered_frontier(conn, "main") == 6
    assert fr.delivered_frontier(conn, "main", 6) == 6


def test_dead_letter_tail_does_not_hold_the_frontier() -> None:
    conn = seed_log()
    for i in range(1, 6):
        fr.mark_delivered(conn, i)
    fr.mark_failed(conn, 6)
    assert fr.delivered_frontier(conn, "main") == 6
    assert fr.max_delivered_watermark(conn, "main") == 5


def test_small_pending_after_large_delivered() -> None:
    conn = seed_log()
    for i in range(2, 7):
        fr.mark_delivered(conn, i)
    assert fr.max_delivered_watermark(conn, "main") == 6
    assert fr.delivered_frontier(conn, "main") == 0


def test_interleaved_shards_only_see_their_own_rows() -> None:
    conn = fr.connect()
    for key in ["a", "b", "a", "b", "a"]:
        fr.enqueue(conn, key, 5)
    fr.mark_delivered(conn, 1)
    fr.mark_delivered(conn, 5)
    # shard a: 1 delivered, 3 pending -> boundary 2, which is b's id
    assert fr.delivered_frontier(conn, "a") == 2
    assert fr.delivered_frontier(conn, "b") == 1
    fr.mark_delivered(conn, 3)
    assert fr.delivered_frontier(conn, "a") == 5


@pytest.mark.parametrize("key", ODD_KEYS)
def test_odd_shard_keys_are_plain_values(key: str) -> None:
    conn = fr.connect()
    fr.enqueue(conn, "other", 5)
    ids = [fr.enqueue(conn, key, p) for p in (5, 1)]
    fr.mark_delivered(conn, ids[1])
    assert fr.delivered_frontier(conn, key) == ids[0] - 1
    assert fr.max_delivered_watermark(conn, key) == ids[1]
    fr.mark_delivered(conn, ids[0])
    assert fr.delivered_frontier(conn, key) == ids[1]
    assert conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0] == 3


# --- terminal is forever --------------------------------------------------------------------


@pytest.mark.parametrize("first", [fr.mark_delivered, fr.mark_failed])
@pytest.mark.parametrize("then", [fr.mark_running, fr.mark_delivered, fr.mark_failed])
def test_terminal_is_forever(first, then) -> None:
    conn = seed_log()
    first(conn, 2)
    before = fr.status_of(conn, 2)
    with pytest.raises(fr.TerminalStateError) as info:
        then(conn, 2)
    message = str(info.value)
    assert "conversation 2" in message and repr(before) in message and "terminal" in message
    assert info.value.row_id == 2 and info.value.current == before
    assert fr.status_of(conn, 2) == before


def test_running_cannot_be_started_again_and_unknown_rows_are_refused() -> None:
    conn = seed_log()
    fr.mark_running(conn, 1)
    with pytest.raises(fr.TransitionError, match="'running'"):
        fr.mark_running(conn, 1)
    with pytest.raises(fr.TransitionError, match="does not exist"):
        fr.mark_delivered(conn, 99)


def test_redrive_is_a_new_pending_row() -> None:
    conn = seed_log()
    fr.mark_running(conn, 3)
    fr.mark_failed(conn, 3)
    new_id = fr.redrive(conn, 3)
    assert new_id == 7
    row = conn.execute(
        "SELECT channel_key, direction, status, priority, redrive_of FROM conversations "
        "WHERE id = ?",
        (new_id,),
    ).fetchone()
    assert row == ("main", "inbound", "pending", 1, 3)
    assert fr.status_of(conn, 3) == "failed"


@pytest.mark.parametrize("status_step", [None, fr.mark_running, fr.mark_delivered])
def test_only_failed_rows_can_be_redriven(status_step) -> None:
    conn = seed_log()
    if status_step:
        status_step(conn, 1)
    with pytest.raises(fr.TransitionError, match="only a 'failed' row"):
        fr.redrive(conn, 1)
    with pytest.raises(fr.TransitionError, match="does not exist"):
        fr.redrive(conn, 42)


def test_redrive_after_frontier_passed_keeps_frontier_monotone() -> None:
    conn = seed_log()
    for i in range(1, 6):
        fr.mark_delivered(conn, i)
    fr.mark_failed(conn, 6)
    assert fr.delivered_frontier(conn, "main") == 6
    fr.redrive(conn, 6)
    assert fr.delivered_frontier(conn, "main") == 6  # the new row 7 is above, not below


# --- property: the frontier equals a brute-force oracle --------------------------------------


def oracle(rows: list[tuple[int, str, str]], key: str, base: int) -> int:
    """Largest f >= base such that every row of `key` in (base, f] is terminal, within ids."""
    mine = sorted((i, s) for i, k, s in rows if k == key and i > base)
    best = base
    for i, status in mine:
        if status in fr.NON_TERMINAL:
            return i - 1
        best = i
    return best


rows_strategy = st.lists(
    st.tuples(st.sampled_from(ODD_KEYS[:3]), st.sampled_from(fr.STATUSES)), max_size=25
)


@given(rows=rows_strategy, base=st.integers(0, 30))
def test_frontier_matches_oracle(rows: list[tuple[str, str]], base: int) -> None:
    conn = fr.connect()
    conn.executemany(
        "INSERT INTO conversations (channel_key, direction, status, priority) "
        "VALUES (?, 'inbound', ?, 5)",
        rows,
    )
    stored = conn.execute("SELECT id, channel_key, status FROM conversations").fetchall()
    for key in ODD_KEYS[:3]:
        got = fr.delivered_frontier(conn, key, base)
        assert got == oracle(stored, key, base)
        # the defining property: (base, got] all terminal, and got is maximal
        window = [s for i, k, s in stored if k == key and base < i <= got]
        assert all(s in fr.TERMINAL for s in window)
        assert got >= base
