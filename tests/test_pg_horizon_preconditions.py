"""The xmin horizon wait checks what it relies on (issue 20.3): every id is taken from an
uncached sequence inside the transaction that inserts it. A cached sequence, a missing id
trigger or an id taken earlier is refused in one line, never turned into an orphan."""

from __future__ import annotations

import psycopg
import pytest

from labkit.frontier import log as fr
from labkit.frontier import log_pg as fpg

pytestmark = pytest.mark.postgres


def test_a_cached_sequence_is_refused_by_create_schema_and_the_frontier(pg_connect) -> None:
    conn = pg_connect(autocommit=True)
    fr.delivered_frontier(conn, "a")  # a sound log: checked once, passes
    conn.execute("ALTER TABLE conversations ALTER COLUMN id SET CACHE 50")
    with pytest.raises(fpg.PreconditionError, match=r"sequence \S*conversations_id_seq caches 50"):
        fr.delivered_frontier(conn, "a")  # the connection that passed before sees the change
    with pytest.raises(fpg.PreconditionError, match=r"sequence \S*conversations_id_seq caches 50"):
        fr.create_schema(conn)
    fresh = pg_connect(autocommit=True)
    with pytest.raises(fpg.PreconditionError, match="ALTER SEQUENCE .* CACHE 1$") as info:
        fr.delivered_frontier(fresh, "a")
    assert "\n" not in str(info.value)


def test_a_missing_id_trigger_is_refused(pg_connect) -> None:
    conn = pg_connect(autocommit=True)
    conn.execute("DROP TRIGGER conversations_xact_id_first ON conversations")
    with pytest.raises(fpg.PreconditionError, match="missing or disabled"):
        fr.delivered_frontier(conn, "a")
    fr.create_schema(conn)  # puts it back
    assert fr.delivered_frontier(conn, "a") == 0


def test_an_id_taken_before_its_insert_is_refused_by_the_schema(pg_connect) -> None:
    early = pg_connect()
    (taken,) = early.execute(
        "SELECT nextval(pg_get_serial_sequence('conversations', 'id'))"
    ).fetchone()
    early.commit()
    later = pg_connect()
    fr.enqueue(later, "a", 1)  # another row takes a larger id meanwhile
    later.commit()
    with pytest.raises(
        psycopg.errors.CheckViolation,
        match=f"id {taken} was not taken from the sequence by this INSERT",
    ):
        early.execute(
            "INSERT INTO conversations (id, channel_key, direction, status, priority)"
            " OVERRIDING SYSTEM VALUE VALUES (%s, 'a', 'inbound', 'pending', 1)",
            (taken,),
        )
    early.rollback()


def test_ids_from_the_sequence_still_insert_one_by_one_and_many_at_once(pg_connect) -> None:
    conn = pg_connect()
    first = fr.enqueue(conn, "a", 1)
    conn.execute(
        "INSERT INTO conversations (channel_key, direction, status, priority)"
        " SELECT 'a', 'inbound', 'pending', 1 FROM generate_series(1, 5)"
    )
    second = fr.enqueue(conn, "a", 1)
    conn.commit()
    assert second == first + 6


def test_without_the_statement_trigger_the_row_trigger_refuses_every_insert(pg_connect) -> None:
    conn = pg_connect()
    conn.execute("DROP TRIGGER conversations_xact_id_first ON conversations")
    conn.commit()
    with pytest.raises(psycopg.errors.CheckViolation, match="did not run"):
        fr.enqueue(conn, "a", 1)
    conn.rollback()


@pytest.mark.parametrize("explicit", [10**6, 1])
def test_an_explicit_id_is_refused_above_the_sequence_too(pg_connect, explicit: int) -> None:
    conn = pg_connect()
    fr.enqueue(conn, "a", 1)
    conn.commit()
    fresh = pg_connect()  # a session that never took an id itself
    for c in (conn, fresh):
        with pytest.raises(psycopg.errors.CheckViolation, match="was not taken from the sequence"):
            c.execute(
                "INSERT INTO conversations (id, channel_key, direction, status, priority)"
                " OVERRIDING SYSTEM VALUE VALUES (%s, 'a', 'inbound', 'pending', 1)",
                (explicit,),
            )
        c.rollback()
