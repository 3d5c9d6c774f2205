"""Ballots and the catalog watermark: the safe commit rule for a remote, unreliable planner.

A tick reserves a ballot (persisted before the planner call) that records the watermark it
observed and the catalog version it is based on. A response commits only if its ballot is
still in flight, the watermark has not moved, and its body is based on the current head.
The watermark *is* the catalog head (`labkit.catalog`): one committed version, no drift.
This is the core the simulator and the designs build on; `labkit.ballot` is its public face.
"""

from __future__ import annotations

import math
import numbers
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from labkit import catalog
from labkit.db import FileIdentity, immediate

Reason = Literal["unknown_ballot", "stale_watermark", "stale_base"]
REASONS: tuple[str, ...] = ("unknown_ballot", "stale_watermark", "stale_base")

SQLITE_INT_MIN, SQLITE_INT_MAX = -(2**63), 2**63 - 1
# Stored as a rejected response's tools_hash when its body could not be serialised.
INVALID_BODY_HASH = "invalid"

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

INFLIGHT_SQL = (
    "SELECT ballot_id, observed_watermark, base_version FROM wm_ballots"
    " WHERE status = 'inflight' ORDER BY ballot_id"
)

# The watermark an in-flight ballot observed (its fence); no row if it is not in flight.
FENCE_SQL = "SELECT observed_watermark FROM wm_ballots WHERE ballot_id = ? AND status = 'inflight'"


class WindowFullError(RuntimeError):
    """`reserve()` was called while `window` ballots are already in flight."""

    def __init__(self, window: int, inflight_ids: Sequence[int]) -> None:
        self.window = window
        self.inflight_ids = list(inflight_ids)
        super().__init__(
            f"window of {window} in-flight ballot(s) is full (in flight: {self.inflight_ids});"
            " wait for a response, or abandon() a stalled ballot first"
        )


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


def _body_problem(tools: Any) -> str | None:
    """Why `tools` cannot be stored as a catalog body, or None if it can."""
    if not isinstance(tools, (list, tuple)):
        return f"response tools must be a list or tuple, got {type(tools).__name__}"
    try:
        catalog.tools_json(tools)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"response tools are not storable as standard JSON: {exc}"
    return None


class WatermarkLoop:
    """The safe design: reserve a ballot, then commit its response only if it still owns the watermark.

    `window=1` is the single in-flight baseline; `window > 1` pipelines up to `window` ballots,
    each fenced by the watermark it observed (once one commits, the rest are stale). State
    lives entirely in SQLite, so a new loop over the same database resumes where one died.
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
        self._identity = FileIdentity.of(conn)
        catalog.create_schema(conn, genesis_tools, now=clock())
        catalog.verify(conn)
        with self._writing():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT OR IGNORE INTO wm_store (id, next_ballot) VALUES (1, 1)")

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the file this loop opened (refused if it was deleted/replaced)."""
        with immediate(self.conn):
            if self._identity is not None:
                self._identity.check()
            yield self.conn

    def head_version(self) -> int:
        """The committed version: the catalog head, which is also the watermark."""
        return catalog.head(self.conn)

    def inflight(self) -> list[Ballot]:
        """Ballots reserved and not yet decided or abandoned, oldest first."""
        return [Ballot(*row) for row in self.conn.execute(INFLIGHT_SQL).fetchall()]

    def reserve(self, *, replay_of: int | None = None) -> Ballot:
        """Persist a new in-flight ballot and the next ballot id, then return it.

        Raises `WindowFullError` if `window` ballots are already in flight.
        """
        with self._writing():
            inflight = [b.ballot_id for b in self.inflight()]
            if len(inflight) >= self.window:
                raise WindowFullError(self.window, inflight)
            (ballot_id,) = self.conn.execute(
                "SELECT next_ballot FROM wm_store WHERE id = 1"
            ).fetchone()
            watermark = catalog.head(self.conn)
            self.conn.execute(
                "INSERT INTO wm_ballots (ballot_id, observed_watermark, base_version, replay_of,"
                " status, reserved_at) VALUES (?, ?, ?, ?, 'inflight', ?)",
                (ballot_id, watermark, watermark, replay_of, self.clock()),
            )
            self.conn.execute("UPDATE wm_store SET next_ballot = ? WHERE id = 1", (ballot_id + 1,))
        return Ballot(ballot_id, watermark, watermark)

    def checks(self, response: Response) -> Checks:
        """Test each commit condition for `response` on its own; read-only, nothing is decided.

        `watermark_current`: the ballot's fence is the head and the response echoes that fence.
        `base_current`: the body is based on the head. Malformed fields raise `ResponseError`.
        """
        ballot_id, observed, base = _check_envelope(response)
        head = catalog.head(self.conn)
        row = self.conn.execute(FENCE_SQL, (ballot_id,)).fetchone()
        fence = None if row is None else int(row[0])
        watermark_current = fence is not None and fence == head and observed == fence
        return Checks(fence is not None, watermark_current, base == head, fence, head)

    def apply(self, response: Response) -> Outcome:
        """Decide and, if the ballot still owns the watermark, commit, all in one transaction.

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
        problem = _body_problem(response.tools)
        now = self.clock()
        with self._writing():
            current = catalog.head(self.conn)
            row = self.conn.execute(FENCE_SQL, (ballot_id,)).fetchone()
            reason: Reason | None
            fenced_out = row is not None and row[0] != current
            if row is None:
                reason = "unknown_ballot"
            elif fenced_out or observed != row[0]:
                reason = "stale_watermark"
            elif base != current:
                reason = "stale_base"
            else:
                reason = None
            if reason is None:
                if problem is not None:
                    raise ResponseError(f"ballot {ballot_id}: {problem}")
                current = catalog.append(self.conn, response.tools, ballot_id, base, now=now)
            if reason is None or fenced_out:
                self.conn.execute(
                    "UPDATE wm_ballots SET status = ?, reason = ?, decided_at = ?"
                    " WHERE ballot_id = ?",
                    ("committed" if reason is None else "rejected", reason, now, ballot_id),
                )
            body_hash = INVALID_BODY_HASH if problem else catalog.tools_hash(response.tools)
            self.conn.execute(
                "INSERT INTO wm_responses (ballot_id, observed_watermark, base_version, tools_hash,"
                " committed, reason, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (ballot_id, observed, base, body_hash, int(reason is None), reason, now),
            )
        return Outcome(ballot_id, reason is None, reason, current)

    def abandon(self, ballot_id: int) -> bool:
        """Give up an in-flight ballot (e.g. stalled); a later response for it is unknown.

        Returns False if the ballot was not in flight.
        """
        with self._writing():
            cur = self.conn.execute(
                "UPDATE wm_ballots SET status = 'abandoned', decided_at = ?"
                " WHERE ballot_id = ? AND status = 'inflight'",
                (self.clock(), ballot_id),
            )
        return cur.rowcount == 1

    def replay(self, old: Outcome | Ballot | int) -> Ballot:
        """Reserve a fresh ballot for the same tick as `old` (never re-apply the old one).

        If `old` is still in flight it is abandoned first, so its late response is refused.
        """
        old_id = old if isinstance(old, int) else old.ballot_id
        self.abandon(old_id)
        return self.reserve(replay_of=old_id)
