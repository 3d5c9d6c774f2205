"""The hold of a pipelined loop: answers that arrived before the head reached their fence.

Pipelined ballots (`labkit.designs.pipelined`) keep several ticks in flight, each fenced on the
version its predecessor will commit. An answer whose fence is still ahead of the head is not
refused: it is stored here (durably, on SQLite, before the loop says "held") and committed
later, in fence order, once the head reaches it, after the same checks as an answer that
arrived on time. A crash loses nothing: the rows outlive the process, and a restarted loop
checks each one again before it commits it; it never applies one blindly.

Which held answers are next is part one's low-watermark rule: the fences are the row ids,
"answered" is "delivered", and the head is the frontier (`frontier`). SQLite only for now: a
PostgreSQL connection is refused in one line (`backend.UnsupportedBackend`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import labkit.catalog.versions as catalog
from labkit import backend
from labkit.db import immediate

HELD_TABLE = """CREATE TABLE IF NOT EXISTS wm_held (
    ballot_id    INTEGER PRIMARY KEY,
    fence        INTEGER NOT NULL,
    base_version INTEGER NOT NULL,
    base_hash    TEXT,
    tools        TEXT    NOT NULL,
    received_at  REAL    NOT NULL
)"""
# Held only while the ballot is in flight; a duplicate delivery of a held answer changes nothing.
HOLD_SQL = (
    "INSERT INTO wm_held (ballot_id, fence, base_version, base_hash, tools, received_at)\n"
    "    SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM wm_ballots\n"
    "        WHERE ballot_id = ? AND status = 'inflight')\n"
    "    ON CONFLICT (ballot_id) DO NOTHING"
)
HELD_SQL = (
    "SELECT ballot_id, fence, base_version, base_hash, tools FROM wm_held ORDER BY fence, ballot_id"
)
RELEASE_SQL = "DELETE FROM wm_held WHERE ballot_id = ?"


@dataclass(frozen=True)
class Held:
    """One held answer: its ballot and fence, and the base it says it was built on."""

    ballot_id: int
    fence: int
    base_version: int
    base_hash: str | None
    tools: tuple[Any, ...]


def create(conn: sqlite3.Connection) -> None:
    """Make the hold's table if it is missing (next to the ballot store's tables)."""
    backend.require(conn, "hold.create", "sqlite")
    with immediate(conn):
        conn.execute(HELD_TABLE)


def hold(
    conn: sqlite3.Connection,
    ballot_id: int,
    fence: int,
    base_version: int,
    base_hash: str | None,
    tools: Iterable[Any],
    now: float,
) -> bool:
    """Store an early answer for the in-flight `ballot_id`; False if its ballot is not in
    flight (nothing stored) or the answer was already held."""
    backend.require(conn, "hold.hold", "sqlite")
    body = catalog.tools_json(tuple(tools))
    params = (ballot_id, fence, base_version, base_hash, body, now, ballot_id)
    with immediate(conn):
        return conn.execute(HOLD_SQL, params).rowcount == 1


def held(conn: sqlite3.Connection) -> list[Held]:
    """Every held answer, lowest fence first."""
    backend.require(conn, "hold.held", "sqlite")
    rows = conn.execute(HELD_SQL).fetchall()
    return [Held(b, f, base, h, tuple(json.loads(t))) for b, f, base, h, t in rows]


def release(conn: sqlite3.Connection, ballot_ids: Iterable[int]) -> None:
    """Forget the held answers of `ballot_ids` (committed, refused or flushed)."""
    backend.require(conn, "hold.release", "sqlite")
    with immediate(conn):
        conn.executemany(RELEASE_SQL, [(b,) for b in ballot_ids])


def frontier(head: int, answered: Iterable[int]) -> int:
    """Part one's rule on fences: one past the highest fence f such that every fence from
    `head` to f is answered, else `head` (the next fence still waits for its answer).

    A fence is a row id, "answered" is "delivered", and the head is the frontier: the head can
    move to this value, one commit per fence, if each held answer passes its check.
    """
    done = set(answered)
    reach = head
    while reach in done:
        reach += 1
    return reach
