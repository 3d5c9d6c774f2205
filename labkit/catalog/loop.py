"""Ballots and the catalog watermark: the safe commit rule for a remote, unreliable planner.

A tick reserves a ballot (persisted before the planner call) that records the watermark it
observed and the catalog version it is based on. A response commits only if its ballot is
still in flight, the watermark has not moved, and its body is based on the current head.
The watermark *is* the catalog head (`labkit.catalog.versions`): one committed version, no drift.
This is the core the simulator and the designs build on; `labkit.ballot` is its public face.
Handed a psycopg connection, the same rule runs on PostgreSQL, where many processes share one
store: there each write is guarded (a conditional write the database checks), and decided
again from a fresh read when another loop won the race (`labkit.catalog.loop_pg`, imported on
first use).
"""

from __future__ import annotations

import math
import numbers
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from itertools import chain
from typing import Any, Literal, TypeVar

import labkit.catalog.versions as catalog
from labkit.db import FileIdentity, immediate

Reason = Literal["unknown_ballot", "stale_watermark", "stale_base"]
REASONS: tuple[str, ...] = ("unknown_ballot", "stale_watermark", "stale_base")

SQLITE_INT_MIN, SQLITE_INT_MAX = -(2**63), 2**63 - 1
# Stored as a rejected response's tools_hash when its body could not be serialised.
INVALID_BODY_HASH = "invalid"
# How often a decision may lose the race to other loops in a row before giving up (each loss
# means another loop made progress, so this is only reached under pathological contention).
MAX_ATTEMPTS = 1000
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS wm_store (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    next_ballot INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS wm_ballots (
    ballot_id          INTEGER PRIMARY KEY,
    observed_watermark INTEGER NOT NULL,
    base_version       INTEGER NOT NULL,
    replay_of          INTEGER,
    status             TEXT    NOT NULL
        CHECK (status IN ('inflight', 'committed', 'rejected', 'abandoned')),
    reason             TEXT,
    reserved_at        REAL    NOT NULL,
    decided_at         REAL
);
CREATE INDEX IF NOT EXISTS wm_ballots_inflight ON wm_ballots (ballot_id)
    WHERE status = 'inflight';
CREATE TABLE IF NOT EXISTS wm_responses (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    ballot_id          INTEGER NOT NULL,
    observed_watermark INTEGER NOT NULL,
    base_version       INTEGER NOT NULL,
    tools_hash         TEXT    NOT NULL,
    committed          INTEGER NOT NULL CHECK (committed IN (0, 1)),
    reason             TEXT,
    received_at        REAL    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS wm_responses_one_commit ON wm_responses (ballot_id)
    WHERE committed = 1;
"""
STORE_INIT_SQL = "INSERT OR IGNORE INTO wm_store (id, next_ballot) VALUES (1, 1)"
INFLIGHT_SQL = (
    "SELECT ballot_id, observed_watermark, base_version FROM wm_ballots"
    " WHERE status = 'inflight' ORDER BY ballot_id"
)

# Each step of the rule is one constant, with the same name in `labkit.catalog.loop_pg`. A write
# that is a tuple here is one statement there (data-modifying CTEs, parameters in the same
# order): `WatermarkLoop._write` runs either form. The first part of a write is its guard: it
# only changes a row that still holds what the read saw, and if it matches nothing the rest is
# not written. On SQLite the reads and the write share one BEGIN IMMEDIATE transaction, so the
# guard always matches; on PostgreSQL it is what stops a loop that lost a race.

# What a reserve reads, one row: ballots in flight, the next ballot id, the head.
RESERVE_READ_SQL = (
    "SELECT (SELECT COUNT(*) FROM wm_ballots WHERE status = 'inflight'),"
    " (SELECT next_ballot FROM wm_store WHERE id = 1),"
    " (SELECT MAX(version) FROM catalog_versions)"
)
# What a decision reads, one row: the head and the ballot's fence (the watermark it observed;
# NULL unless it is in flight).
DECISION_READ_SQL = (
    "SELECT (SELECT MAX(version) FROM catalog_versions),"
    " (SELECT observed_watermark FROM wm_ballots WHERE ballot_id = ? AND status = 'inflight')"
)
# Parts: the next ballot id if it is still the one read (new, read), then the ballot (id,
# watermark, base, replay_of, reserved_at).
RESERVE_SQL = (
    "UPDATE wm_store SET next_ballot = ? WHERE id = 1 AND next_ballot = ?",
    "INSERT INTO wm_ballots (ballot_id, observed_watermark, base_version, replay_of,"
    " status, reserved_at) VALUES (?, ?, ?, ?, 'inflight', ?)",
)
RESPONSE_SQL = (
    "INSERT INTO wm_responses (ballot_id, observed_watermark, base_version, tools_hash,"
    " committed, reason, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_DECIDE = (
    "UPDATE wm_ballots SET status = ?, reason = ?, decided_at = ?"
    " WHERE ballot_id = ? AND status = 'inflight'"
)
# Parts: the ballot's decision if it is still in flight (status, reason, decided_at, id), then
# the response.
DECIDE_SQL = (_DECIDE, RESPONSE_SQL)
# Parts: the decision if the ballot is still in flight on the fence the commit is for (status,
# reason, decided_at, id, fence), the new catalog version (`catalog.version_row`), the response.
COMMIT_SQL = (_DECIDE + " AND observed_watermark = ?", catalog.APPEND_SQL, RESPONSE_SQL)
ABANDON_SQL = (
    "UPDATE wm_ballots SET status = 'abandoned', decided_at = ?"
    " WHERE ballot_id = ? AND status = 'inflight'"
)

def _pg(conn: object):
    """`labkit.catalog.loop_pg` when `conn` is not a sqlite3 connection (psycopg), else None."""
    if isinstance(conn, sqlite3.Connection):
        return None
    import labkit.catalog.loop_pg as watermark_pg

    return watermark_pg


class WindowFullError(RuntimeError):
    """`reserve()` was called while `window` ballots are already in flight."""

    def __init__(self, window: int, inflight_ids: Sequence[int]) -> None:
        self.window = window
        self.inflight_ids = list(inflight_ids)
        super().__init__(
            f"window of {window} in-flight ballot(s) is full (in flight: {self.inflight_ids});"
            " wait for a response, or abandon() a stalled ballot first"
        )


class ContentionError(RuntimeError):
    """A decision lost the race to other loops `MAX_ATTEMPTS` times in a row."""


class ResponseError(ValueError):
    """A response `apply()` cannot decide or commit; names the field. Nothing was changed."""


@dataclass(frozen=True)
class Ballot:
    """A reserved tick: its id, the watermark it observed and the catalog version it reads."""

    ballot_id: int
    watermark: int
    base_version: int

    def __str__(self) -> str:
        """One line for a reader: `ballot 3 (fence 2, base v2)`."""
        return f"ballot {self.ballot_id} (fence {self.watermark}, base v{self.base_version})"


@dataclass(frozen=True)
class Response:
    """What the planner sends back: the ballot, its fence, the body's base and the tools."""

    ballot_id: int
    observed_watermark: int
    base_version: int
    tools: Sequence[Any]
    updated_at: float | None = None


@dataclass(frozen=True)
class Outcome:
    """The decision on one response; `version` is the head after the decision."""

    ballot_id: int
    committed: bool
    reason: Reason | None
    version: int

    def __str__(self) -> str:
        """One line for a reader, e.g. `ballot 4: commit → head v4`."""
        return f"ballot {self.ballot_id}: {self.reason or 'commit'} → head v{self.version}"


@dataclass(frozen=True)
class Checks:
    """The commit rule's three conditions for one response, each tested on its own.

    `WatermarkLoop.checks` builds it without deciding or recording anything, so a notebook can
    show which condition a response fails. `fence` is the watermark the ballot observed (None
    when the ballot is not in flight) and `head` the current head, which is the watermark.
    """

    in_flight: bool
    watermark_current: bool
    base_current: bool
    fence: int | None
    head: int

    @property
    def reason(self) -> Reason | None:
        """What `apply` answers: the first condition that fails, in the order it tests them."""
        if not self.in_flight:
            return "unknown_ballot"
        if not self.watermark_current:
            return "stale_watermark"
        if not self.base_current:
            return "stale_base"
        return None


def _fence_int(response: Response, name: str) -> int:
    """One of the three fence fields as a Python int in SQLite's range, or `ResponseError`."""
    value = getattr(response, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ResponseError(f"response {name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if not SQLITE_INT_MIN <= value <= SQLITE_INT_MAX:
        raise ResponseError(f"response {name} {value} is outside SQLite's 64-bit integer range")
    return value


def _check_envelope(response: Response) -> tuple[int, int, int]:
    """Validate what the decision reads (and `updated_at`); return the three fence ints."""
    if not isinstance(response, Response):
        raise ResponseError(f"apply() takes a Response, got {type(response).__name__}")
    fence = (
        _fence_int(response, "ballot_id"),
        _fence_int(response, "observed_watermark"),
        _fence_int(response, "base_version"),
    )
    stamp = response.updated_at
    if stamp is not None and (
        isinstance(stamp, bool) or not isinstance(stamp, numbers.Real) or not math.isfinite(stamp)
    ):
        raise ResponseError(f"response updated_at must be None or a finite number, got {stamp!r}")
    return fence


def _body(tools: Any) -> tuple[str, None] | tuple[None, str]:
    """`tools` as a catalog body (canonical JSON) and None, or None and why it cannot be one."""
    if not isinstance(tools, (list, tuple)):
        return None, f"response tools must be a list or tuple, got {type(tools).__name__}"
    try:
        return catalog.tools_json(tools), None
    except (TypeError, ValueError, RecursionError) as exc:
        return None, f"response tools are not storable as standard JSON: {exc}"


class WatermarkLoop:
    """The safe design: reserve a ballot, then commit its response only if it still owns the watermark.

    `window=1` is the single in-flight baseline; `window > 1` pipelines up to `window` ballots,
    each fenced by the watermark it observed (once one commits, the rest are stale). State
    lives entirely in the database, so a new loop over the same database resumes where one died.
    `conn` is a sqlite3 connection or a psycopg one (PostgreSQL at READ COMMITTED, no
    transaction open, both checked when the loop opens: many loops in many processes may share
    one store, each write guarded, see `labkit.catalog.loop_pg`). `lost_races` counts the reserves
    and decisions this loop had to redo after another loop got there first;
    `commit_first_misses` the commits PostgreSQL tried before reading that did not land.
    Opening verifies the catalog log (`CatalogCorruptError` if it is broken: nothing is ever
    appended on top of a bad log), and every write first checks that the database file is
    still the one that was opened (`DatabaseReplacedError` otherwise).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        window: int = 1,
        *,
        clock: Callable[[], float] = time.time,
        genesis_tools: Sequence[Any] = (),
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.conn = conn
        self.window = window
        self.clock = clock
        self._pg = _pg(conn)
        if self._pg is not None:
            self._pg.check_connection(conn)
        # Reserves and decisions whose guarded write found that what they read had changed
        # (another loop got there first), so they read and decided again.
        self.lost_races = 0
        # PostgreSQL: commits tried before reading that did not land (the read then decided).
        self.commit_first_misses = 0
        # The backend's statements: this module's constants, or the same names in watermark_pg.
        self._sql = sys.modules[__name__] if self._pg is None else self._pg
        self._identity = None if self._pg else FileIdentity.of(conn)
        catalog.create_schema(conn, genesis_tools, now=clock())
        catalog.verify(conn)
        if self._pg is not None:
            self._pg.create_schema(conn)
            return
        with self._deciding():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute(STORE_INIT_SQL)

    def _reading(self):
        """Reads outside a write: on PostgreSQL they end the transaction they open."""
        return nullcontext(self.conn) if self._pg is None else self._pg.reading(self.conn)

    @contextmanager
    def _deciding(self) -> Iterator[sqlite3.Connection]:
        """One read-decide-write. SQLite: one BEGIN IMMEDIATE transaction on the file this loop
        opened (refused if it was deleted/replaced), so nothing interleaves. PostgreSQL: each
        statement commits on its own and the write's guard catches a race
        (`watermark_pg.deciding`)."""
        if self._pg is not None:
            with self._pg.deciding(self.conn):
                yield self.conn
            return
        with immediate(self.conn):
            if self._identity is not None:
                self._identity.check()
            yield self.conn

    def _try(self, attempt: Callable[[], T | None]) -> T | None:
        """Run `attempt` (read, decide, guarded write) once. None if its guard matched nothing
        or, on PostgreSQL, it raised a `lost_race` error: nothing of it was written."""
        try:
            with self._deciding():
                return attempt()
        except Exception as exc:
            if self._pg is None or not self._pg.lost_race(exc):
                raise
            return None

    def _decide(self, attempt: Callable[[], T | None]) -> T:
        """Run `attempt` until its write lands: each time it does not, another loop changed
        what it read, so it reads again (counted in `lost_races`)."""
        for _ in range(MAX_ATTEMPTS):
            result = self._try(attempt)
            if result is not None:
                return result
            self.lost_races += 1
        raise ContentionError(
            f"{MAX_ATTEMPTS} attempts in a row lost the race to other loops on this store"
        )

    def _write(self, sql: str | tuple[str, ...], *parts: tuple[Any, ...]) -> bool:
        """Run one write step: one statement per part (SQLite's tuples), or one statement
        taking every part's parameters in order (PostgreSQL's data-modifying CTEs).

        Returns False, having written nothing, if the guard (the first part) matched no row.
        """
        if isinstance(sql, str):
            return self.conn.execute(sql, tuple(chain.from_iterable(parts))).rowcount > 0
        (guard, guard_params), *rest = zip(sql, parts, strict=True)
        if self.conn.execute(guard, guard_params).rowcount == 0:
            return False
        for statement, params in rest:
            self.conn.execute(statement, params)
        return True

    def head_version(self) -> int:
        """The committed version: the catalog head, which is also the watermark."""
        return catalog.head(self.conn)

    def inflight(self) -> list[Ballot]:
        """Ballots reserved and not yet decided or abandoned, oldest first."""
        with self._reading():
            rows = self.conn.execute(self._sql.INFLIGHT_SQL).fetchall()
        return [Ballot(*row) for row in rows]

    def reserve(self, *, replay_of: int | None = None) -> Ballot:
        """Persist a new in-flight ballot and the next ballot id, then return it.

        Raises `WindowFullError` if `window` ballots are already in flight.
        """

        def attempt() -> Ballot | None:
            count, ballot_id, head = self.conn.execute(self._sql.RESERVE_READ_SQL).fetchone()
            if count >= self.window:
                raise WindowFullError(self.window, [b.ballot_id for b in self.inflight()])
            watermark = catalog.head_of(head)
            taken = self._write(
                self._sql.RESERVE_SQL,
                (ballot_id + 1, ballot_id),
                (ballot_id, watermark, watermark, replay_of, self.clock()),
            )
            return Ballot(ballot_id, watermark, watermark) if taken else None

        return self._decide(attempt)

    def _decision_read(self, ballot_id: int) -> tuple[int, int | None]:
        """The head and the ballot's fence (None unless it is in flight), in one read."""
        head, fence = self.conn.execute(self._sql.DECISION_READ_SQL, (ballot_id,)).fetchone()
        return catalog.head_of(head), None if fence is None else int(fence)

    def checks(self, response: Response) -> Checks:
        """Test each commit condition for `response` on its own; read-only, nothing is decided.

        `watermark_current`: the ballot's fence is the head and the response echoes that fence.
        `base_current`: the body is based on the head. Malformed fields raise `ResponseError`.
        """
        ballot_id, observed, base = _check_envelope(response)
        with self._reading():
            head, fence = self._decision_read(ballot_id)
        watermark_current = fence is not None and fence == head and observed == fence
        return Checks(fence is not None, watermark_current, base == head, fence, head)

    def apply(self, response: Response) -> Outcome:
        """Decide and, if the ballot still owns the watermark, commit: one read, one guarded
        write (retried from a fresh read if another loop changed what was read first). On
        PostgreSQL a response that asks to commit (echo == base) first tries that guarded write
        with no read; only if it does not land does the loop read and decide.

        Commit needs: ballot in flight, observed watermark == current, base == current head.
        Otherwise the response is rejected (`unknown_ballot`, `stale_watermark`, `stale_base`)
        and the catalog and watermark are untouched. The one piece of bookkeeping a rejection
        may change: a ballot whose fence the head has passed can never commit, so it leaves
        flight (replay its tick as a new ballot). A bad body or a forged echo for a ballot that
        still owns the watermark leaves that ballot in flight, so its real answer can commit.

        Malformed input: the fence fields must be ints in SQLite's 64-bit range and
        `updated_at` None or a finite number, else `ResponseError` before the store is read.
        The fence decides before the body is looked at: a response the fence rejects is
        recorded as rejected whatever its `tools`; one that would commit but whose `tools` is
        not a list/tuple of standard JSON raises `ResponseError`, and nothing changes.
        """
        ballot_id, observed, base = _check_envelope(response)
        body, problem = _body(response.tools)
        now = self.clock()
        if self._pg is not None and body is not None and observed == base < SQLITE_INT_MAX:
            # PostgreSQL: try the commit this response asks for before reading anything. Its
            # guard and the log's keys only let it land when the read below would decide
            # "commit" (see `watermark_pg`); when it does not land, nothing was written.
            if self._try(lambda: self._commit(ballot_id, observed, body, now) or None):
                return Outcome(ballot_id, True, None, observed + 1)
            self.commit_first_misses += 1

        def attempt() -> Outcome | None:
            current, fence = self._decision_read(ballot_id)
            reason: Reason | None
            fenced_out = fence is not None and fence != current
            if fence is None:
                reason = "unknown_ballot"
            elif fenced_out or observed != fence:
                reason = "stale_watermark"
            elif base != current:
                reason = "stale_base"
            else:
                reason = None
            if reason is None and body is None:
                raise ResponseError(f"ballot {ballot_id}: {problem}")
            if reason is None:
                if not self._commit(ballot_id, observed, body, now):
                    return None
                return Outcome(ballot_id, True, None, observed + 1)
            body_hash = INVALID_BODY_HASH if body is None else catalog.json_hash(body)
            answer = (ballot_id, observed, base, body_hash, 0, reason, now)
            if fenced_out:
                decision = ("rejected", reason, now, ballot_id)
                if not self._write(self._sql.DECIDE_SQL, decision, answer):
                    return None
            else:
                self._write(self._sql.RESPONSE_SQL, answer)
            return Outcome(ballot_id, False, reason, current)

        return self._decide(attempt)

    def _commit(self, ballot_id: int, fence: int, body: str, now: float) -> bool:
        """The guarded write of version `fence` + 1 with `body`, for a ballot whose fence, echo
        and base are all `fence`. Writes nothing and returns False unless the ballot is still
        in flight on that fence and the version is still free (the head is still `fence`)."""
        decision = ("committed", None, now, ballot_id, fence)
        version = catalog.version_row(body, ballot_id, fence, now)
        answer = (ballot_id, fence, fence, version[2], 1, None, now)
        return self._write(self._sql.COMMIT_SQL, decision, version, answer)

    def abandon(self, ballot_id: int) -> bool:
        """Give up an in-flight ballot (e.g. stalled); a later response for it is unknown.

        Returns False if the ballot was not in flight.
        """
        with self._deciding():
            cur = self.conn.execute(self._sql.ABANDON_SQL, (self.clock(), ballot_id))
        return cur.rowcount == 1

    def replay(self, old: Outcome | Ballot | int) -> Ballot:
        """Reserve a fresh ballot for the same tick as `old` (never re-apply the old one).

        If `old` is still in flight it is abandoned first, so its late response is refused.
        """
        old_id = old if isinstance(old, int) else old.ballot_id
        self.abandon(old_id)
        return self.reserve(replay_of=old_id)
