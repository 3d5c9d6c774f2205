"""The hold of a pipelined loop: answers that arrived before the head reached their fence.

Pipelined ballots (`labkit.catalog.pipeline`) keep several ticks in flight, each fenced on the
version its predecessor will commit. An answer whose fence is still ahead of the head is not
refused: the loop stores it here, in the same transaction as its decision to hold it, and
commits it later, in fence order, once the head reaches it, after the same checks as an answer
that arrived on time. A crash loses nothing: the rows outlive the process, and a restarted loop
checks each one again before it commits it; it never applies one blindly.

Which held answers are next is part one's low-watermark rule: fence f is row id f + 1,
"answered" is "delivered", the head is the coverage base the rule starts from, and the frontier
(`frontier`) is how far the head may move, one commit per fence.

This module holds the table (its spec, both backends' DDL, is `labkit.catalog.tables.WM_HELD`),
its statements and its reads; the writes run inside the pipelined loop's steps.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import labkit.catalog.tables as tables
import labkit.catalog.versions as catalog
import labkit.catalog.versions_pg as versions_pg
import labkit.frontier.rule as rule
from labkit import store
from labkit.backend import Connection
from labkit.store import Store

# The hold's table (a spec, `labkit.catalog.tables`), beside the ballot store's.
HELD_TABLE = catalog.Schema((tables.WM_HELD,), lock="labkit.hold:")
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


@dataclass(frozen=True)
class Held:
    """One held answer: its ballot and fence, and the base it says it was built on."""

    ballot_id: int
    fence: int
    base_version: int
    base_hash: str | None
    tools: tuple[Any, ...]


def create(conn: Connection | Store) -> None:
    """Make the hold's table if it is missing (next to the ballot store's tables). On
    PostgreSQL a session whose commits are not durable when reported (`synchronous_commit =
    off`) or a table that would not survive a crash (UNLOGGED, TEMPORARY) is refused."""
    s = store.of(conn)
    s.pick(_CREATE_ON)(s)


def _create_on_sqlite(s: Store) -> None:
    with catalog.making(s, HELD_TABLE):
        pass


def _create_on_postgres(s: Store) -> None:
    versions_pg.require_durable_commits(s.conn, "hold.create")
    with catalog.making(s, HELD_TABLE):
        pass
    versions_pg.require_logged_tables(s.conn, ["wm_held"], "hold.create")


# How each backend makes the hold, side by side: PostgreSQL also refuses a session or a table
# on which a reported commit could be lost.
_CREATE_ON = {"sqlite": _create_on_sqlite, "postgres": _create_on_postgres}


def held(conn: Connection | Store) -> list[Held]:
    """Every held answer, lowest fence first."""
    rows = store.of(conn).fetchall(HELD_SQL)
    return [Held(b, f, base, h, tuple(json.loads(t))) for b, f, base, h, t in rows]


def frontier(head: int, answered: Iterable[int]) -> int:
    """Part one's rule on fences: one past the highest fence f such that every fence from
    `head` to f is answered, else `head` (the next fence still waits for its answer).

    Fence f is row id f + 1, "answered" is "delivered", the head is the coverage base, and the
    result is the frontier: the head can move to it, one commit per fence, if each held answer
    passes its check.
    """
    done = set(answered)
    return rule.frontier(head, ((fence + 1, fence not in done) for fence in itertools.count(head)))
