"""Ballots and the catalog watermark: the safe commit rule for a remote, unreliable planner.

A tick reserves a ballot (persisted before the planner call) that records the watermark it
observed and the catalog version it is based on. A response commits only if its ballot is
still in flight, the watermark has not moved, and its body is based on the current head
(`labkit.catalog.rule`, the rule written once). The watermark *is* the catalog head
(`labkit.catalog.versions`): one committed version, no drift. This is the core the simulator
and the designs build on; `labkit.ballot` is its public face.

`WatermarkLoop` takes a sqlite3 or a psycopg connection (or a store handle, `labkit.store`) and
picks its dialect once, when it is made. Every statement of the ballot store is written here
once, in SQLite's placeholder style; its tables are specs, each written once for both backends
(`BALLOTS`, from `labkit.catalog.tables`); where the backends differ, both are here side by
side: the form of a guarded write (`Guarded`: statements in one BEGIN IMMEDIATE on SQLite, one
statement of data-modifying CTEs on PostgreSQL) and how a loop runs a decision (`LoopOnSQLite`,
`LoopOnPostgres`). The PostgreSQL parts of the latter, where many processes share one store
(decisions committed statement by statement, a lost race told from a failure, the connection
checked when a loop opens), are in `labkit.catalog.loop_pg`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any, NoReturn, TypeVar

import labkit.catalog.loop_pg as loop_pg
import labkit.catalog.rule as rule
import labkit.catalog.tables as tables
import labkit.catalog.versions as catalog
import labkit.catalog.versions_pg as versions_pg
from labkit import store, validation
from labkit.backend import Connection, Dialect
from labkit.catalog.rule import Reason
from labkit.db import FileIdentity, WalLostError, immediate
from labkit.store import Store

# The tables a loop's promises live in (a crash must not empty any of them).
STORE_TABLES = ["catalog_versions", "wm_store", "wm_ballots", "wm_responses"]
# Stored as a rejected response's tools_hash when its body could not be serialised.
INVALID_BODY_HASH = "invalid"
# How often a decision may lose the race to other loops in a row before giving up (each loss
# means another loop made progress, so this is only reached under pathological contention).
MAX_ATTEMPTS = 1000
T = TypeVar("T")


@dataclass(frozen=True)
class Guarded:
    """One guarded write, written once: its guard, an UPDATE that only changes a row that still
    holds what the decision read, and the rows (name, INSERT ... SELECT) that go with it.

    If the guard matches no row, nothing of the write is kept. SQLite runs the guard and then
    each insert, inside the one BEGIN IMMEDIATE transaction its read ran in (so the guard always
    matches there); PostgreSQL runs one statement whose guard is a data-modifying CTE that every
    insert selects FROM, with the parameters in the same order, so the database itself checks
    the guard against the newest committed row at the moment it writes.
    """

    guard: str
    rows: tuple[tuple[str, str], ...]

    def statements(self, d: Dialect) -> tuple[str, ...]:
        """The write as `d` runs it, rendered for its driver: the guard first."""
        return _GUARDED_ON[d.name].statements(self, d)

    def bound(self, d: Dialect, parts: Sequence[tuple[Any, ...]]) -> list[tuple[str, Any]]:
        """Each statement of the write as `d` runs it, with its parameters, from each part's
        parameters (the guard's first)."""
        return _GUARDED_ON[d.name].bound(self, d, parts)


class _GuardedOnSQLite:
    """SQLite: the guard, then each insert, inside the BEGIN IMMEDIATE its read ran in."""

    @staticmethod
    def statements(write: Guarded, d: Dialect) -> tuple[str, ...]:
        return (write.guard, *(row for _, row in write.rows))

    @staticmethod
    def bound(write: Guarded, d: Dialect, parts: Sequence[Any]) -> list[tuple[str, Any]]:
        return list(zip(_GuardedOnSQLite.statements(write, d), parts, strict=True))


class _GuardedOnPostgres:
    """PostgreSQL: one statement, the guard a data-modifying CTE that every insert selects
    FROM, taking every part's parameters in order."""

    @staticmethod
    def statements(write: Guarded, d: Dialect) -> tuple[str, ...]:
        *middle, (_, last) = write.rows
        ctes = [f"guard AS ({write.guard} RETURNING 1)"]
        ctes += [f"{name} AS ({row} FROM guard)" for name, row in middle]
        return (d.sql("WITH " + ",\n".join(ctes) + f"\n{last} FROM guard"),)

    @staticmethod
    def bound(write: Guarded, d: Dialect, parts: Sequence[Any]) -> list[tuple[str, Any]]:
        (one,) = _GuardedOnPostgres.statements(write, d)
        return [(one, tuple(chain.from_iterable(parts)))]


_GUARDED_ON: dict[str, type[_GuardedOnSQLite | _GuardedOnPostgres]] = {
    "sqlite": _GuardedOnSQLite,
    "postgres": _GuardedOnPostgres,
}


# The ballot store's tables (specs, `labkit.catalog.tables`, with their indexes).
BALLOTS = catalog.Schema(
    (tables.WM_STORE, tables.WM_BALLOTS, tables.WM_RESPONSES), lock="labkit.wm:"
)
STORE_INIT_SQL = "INSERT INTO wm_store (id, next_ballot) VALUES (1, 1) ON CONFLICT (id) DO NOTHING"
INFLIGHT_SQL = (
    "SELECT ballot_id, observed_watermark, base_version FROM wm_ballots"
    " WHERE status = 'inflight' ORDER BY ballot_id"
)

# Each read is one statement, so one snapshot: what it returns belongs together.
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
# Inserts are written INSERT ... SELECT, so that a guarded write can make them select FROM its
# guard (as `catalog.APPEND_SQL` is).
BALLOT_SQL = (
    "INSERT INTO wm_ballots (ballot_id, observed_watermark, base_version, replay_of, status,"
    " reserved_at)\n    SELECT ?, ?, ?, ?, 'inflight', ?"
)
RESPONSE_SQL = (
    "INSERT INTO wm_responses (ballot_id, observed_watermark, base_version, tools_hash,"
    " committed, reason, received_at)\n    SELECT ?, ?, ?, ?, ?, ?, ?"
)
DECIDE_SQL = (
    "UPDATE wm_ballots SET status = ?, reason = ?, decided_at = ?\n"
    "    WHERE ballot_id = ? AND status = 'inflight'"
)
# The next ballot id if it is still the one read (new, read), then the ballot (id, watermark,
# base, replay_of, reserved_at).
RESERVE = Guarded(
    "UPDATE wm_store SET next_ballot = ? WHERE id = 1 AND next_ballot = ?",
    (("ballot", BALLOT_SQL),),
)
# The ballot's decision if it is still in flight (status, reason, decided_at, id), then the
# response.
DECIDE = Guarded(DECIDE_SQL, (("response", RESPONSE_SQL),))
# The decision if the ballot is still in flight on the fence the commit is for (status, reason,
# decided_at, id, fence), the new catalog version (`catalog.version_row`), the response.
# Because the guard names the fence, PostgreSQL can try this write before any read
# (`WatermarkLoop.apply`): it lands only if the ballot is in flight on that fence and version
# fence+1 is free, and the log's keys make that mean "the head is the fence": the primary key
# refuses a second fence+1, and each version's base must exist, so nothing can sit above a
# free fence+1.
COMMIT = Guarded(
    DECIDE_SQL + " AND observed_watermark = ?",
    (("version", catalog.APPEND_SQL), ("response", RESPONSE_SQL)),
)
ABANDON_SQL = (
    "UPDATE wm_ballots SET status = 'abandoned', decided_at = ?"
    " WHERE ballot_id = ? AND status = 'inflight'"
)


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

    def answer(self, tools: Sequence[Any], updated_at: float | None = None) -> Response:
        """The response that answers this ballot with `tools`: its id, the fence it observed
        and the version it read, as a planner echoes them back."""
        return Response(self.ballot_id, self.watermark, self.base_version, tools, updated_at)


@dataclass(frozen=True)
class Response:
    """What the planner sends back: the ballot, its fence, the body's base and the tools."""

    ballot_id: int
    observed_watermark: int
    base_version: int
    tools: Sequence[Any]
    updated_at: float | None = None
    # The hash of the tool list the body was built on, when the planner states it (pipelined
    # ballots check it against the committed base; the commit rule itself does not read it).
    base_hash: str | None = None

    def __iter__(self) -> NoReturn:
        """A Response looks like a tuple but is read by field name; unpacking it says so."""
        raise TypeError(
            "a Response is not a tuple: read its fields by name: r.ballot_id, "
            "r.observed_watermark, r.base_version, r.tools"
        )


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


def _ballot_id(value: Any, where: str) -> int:
    """A ballot id handed to `where` by a caller: an int in range, else `TypeError`."""
    return validation.int_arg(value, f"{where}: ballot_id")


def _fence_int(response: Response, name: str) -> int:
    """One of the three fence fields as a Python int in SQLite's range, or `ResponseError`."""
    return validation.int_arg(
        getattr(response, name),
        f"response {name}",
        wrong_type=ResponseError,
        out_of_range=ResponseError,
    )


def check_envelope(response: Response) -> tuple[int, int, int]:
    """Validate what a decision reads (and `updated_at`); return the three fence ints.
    `ResponseError`, naming the field, for anything else."""
    if not isinstance(response, Response):
        raise ResponseError(f"apply() takes a Response, got {type(response).__name__}")
    fence = (
        _fence_int(response, "ballot_id"),
        _fence_int(response, "observed_watermark"),
        _fence_int(response, "base_version"),
    )
    validation.stamp_arg(response.updated_at, "response updated_at", error=ResponseError)
    return fence


def tools_body(tools: Any) -> tuple[str, None] | tuple[None, str]:
    """`tools` as a catalog body (canonical JSON) and None, or None and why it cannot be one."""
    if not isinstance(tools, (list, tuple)):
        return None, f"response tools must be a list or tuple, got {type(tools).__name__}"
    try:
        return catalog.tools_json(tools), None
    except (TypeError, ValueError, RecursionError) as exc:
        return None, f"response tools are not storable as standard JSON: {exc}"


class LoopOnSQLite:
    """How a loop runs on SQLite, where one writer at a time holds the file: each decision is one
    BEGIN IMMEDIATE transaction on the file the loop opened (refused if it was deleted or
    replaced since), so nothing interleaves and a guard always matches."""

    # A response is decided from a read, inside the transaction that writes it.
    commits_first = False

    def __init__(self, s: Store) -> None:
        self.conn = s.conn
        self.identity = FileIdentity.of(s.conn)  # the file opened, checked before every write

    def opened(self) -> None:
        """Nothing more to check once the schema is made."""

    @contextmanager
    def deciding(self) -> Iterator[Any]:
        try:
            with immediate(self.conn):
                if self.identity is not None:
                    self.identity.check()
                yield self.conn
        except WalLostError:
            FileIdentity.rescue(self.conn)  # the commits already reported, into the main file
            raise

    def transaction(self) -> AbstractContextManager[Any]:
        return self.deciding()

    @staticmethod
    def lost_race(exc: BaseException) -> bool:
        """Nothing SQLite raises means another loop got there first."""
        return False


class LoopOnPostgres:
    """How a loop runs on PostgreSQL, where many processes share one store: each statement
    commits on its own and a write's guard catches a race (`labkit.catalog.loop_pg`). Opening
    refuses a connection the loop cannot keep its promises on, and tables a crash would empty."""

    # A response that asks to commit is first tried as the guarded write, before any read: the
    # guard and the log's keys let it land only when the read would decide "commit" (`COMMIT`).
    commits_first = True

    def __init__(self, s: Store) -> None:
        self.conn = s.conn
        loop_pg.check_connection(s.conn)

    def opened(self) -> None:
        versions_pg.require_logged_tables(self.conn, STORE_TABLES, "WatermarkLoop")

    def deciding(self) -> AbstractContextManager[Any]:
        return loop_pg.deciding(self.conn)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with loop_pg.deciding(self.conn) as conn, conn.transaction():
            yield conn

    lost_race = staticmethod(loop_pg.lost_race)


_LOOP_ON: dict[str, type[LoopOnSQLite | LoopOnPostgres]] = {
    "sqlite": LoopOnSQLite,
    "postgres": LoopOnPostgres,
}


class WatermarkLoop:
    """The safe design: reserve a ballot, then commit its response only if it still owns the
    watermark.

    `window=1` is the single in-flight baseline (`ballot`); `window > 1` hedges (`fenced`, shown
    as "hedged ballots"): up to `window` ballots in flight, all reserved on the same head, each
    fenced by the watermark it observed (once one commits, the rest are stale); ballots on
    successive versions are `labkit.catalog.pipeline` (`pipelined`). State
    lives entirely in the database, so a new loop over the same database resumes where one died.
    `conn` is a sqlite3 connection or a psycopg one, or a `labkit.store.Store` around one; the
    loop's handle is `store` (PostgreSQL at READ COMMITTED, no
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
        conn: Connection | Store,
        window: int = 1,
        *,
        clock: Callable[[], float] = time.time,
        genesis_tools: Sequence[Any] = (),
    ) -> None:
        window = validation.int_arg(window, "window", low=1)
        self.store = s = store.of(conn)
        self.conn = s.conn
        self.window = window
        self.clock = clock
        self._d = s.dialect
        # This backend's way of running a decision: it checks the connection (PostgreSQL) or
        # notes the file (SQLite) now.
        self._on: LoopOnSQLite | LoopOnPostgres = s.pick(_LOOP_ON)(s)
        # Reserves and decisions whose guarded write found that what they read had changed
        # (another loop got there first), so they read and decided again.
        self.lost_races = 0
        # PostgreSQL: commits tried before reading that did not land (the read then decided).
        self.commit_first_misses = 0
        BALLOTS.require_own(s)  # a foreign ballot table: refused before the catalog is made
        catalog.create_schema(s, genesis_tools, now=clock())
        catalog.verify(s)
        with catalog.making(s, BALLOTS):
            s.execute(STORE_INIT_SQL)
        self._on.opened()

    def _deciding(self) -> AbstractContextManager[Any]:
        """One read-decide-write. SQLite: one BEGIN IMMEDIATE transaction on the file this loop
        opened (refused if it was deleted/replaced), so nothing interleaves. PostgreSQL: each
        statement commits on its own and the write's guard catches a race
        (`loop_pg.deciding`)."""
        return self._on.deciding()

    def transaction(self) -> AbstractContextManager[Any]:
        """One durable transaction on this store, committed when the block ends and rolled back
        whole on an error: `_deciding` on SQLite (BEGIN IMMEDIATE on the file this loop
        opened); on PostgreSQL a transaction of its own on a connection with none open. What a
        protocol step of more than one write runs in (`labkit.catalog.pipeline`), so a crash
        keeps all of the step or none of it."""
        return self._on.transaction()

    def _try(self, attempt: Callable[[], T | None]) -> T | None:
        """Run `attempt` (read, decide, guarded write) once. None if its guard matched nothing
        or, on PostgreSQL, it raised a `lost_race` error: nothing of it was written."""
        try:
            with self._deciding():
                return attempt()
        except Exception as exc:
            if not self._on.lost_race(exc):
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

    def _write(self, write: Guarded, *parts: tuple[Any, ...]) -> bool:
        """Run one guarded write with each part's parameters (the guard's first), as this
        backend runs it. Returns False, having written nothing, if the guard matched no row."""
        (guard, guard_params), *rest = write.bound(self._d, parts)
        if self.conn.execute(guard, guard_params).rowcount == 0:
            return False
        for statement, params in rest:
            self.conn.execute(statement, params)
        return True

    @property
    def dialect(self) -> Dialect:
        """How this loop's connection runs statements, chosen when the loop opened."""
        return self._d

    def head_version(self) -> int:
        """The committed version: the catalog head, which is also the watermark."""
        return catalog.head(self.store)

    def inflight(self) -> list[Ballot]:
        """Ballots reserved and not yet decided or abandoned, oldest first."""
        return [Ballot(*row) for row in self.store.fetchall(INFLIGHT_SQL)]

    def reserve(self, *, replay_of: int | None = None, ahead: int = 0) -> Ballot:
        """Persist a new in-flight ballot and the next ballot id, then return it.

        The ballot's fence (and base) is the head plus `ahead`: 0 for a tick on the head; a
        pipelined loop reserves `ahead` = k for the tick its k-th predecessor will make room
        for. Raises `WindowFullError` if `window` ballots are already in flight.
        """
        ahead = validation.int_arg(ahead, "reserve(): ahead", low=0)

        def attempt() -> Ballot | None:
            count, ballot_id, head = self.store.execute(RESERVE_READ_SQL).fetchone()
            if count >= self.window:
                raise WindowFullError(self.window, [b.ballot_id for b in self.inflight()])
            watermark = catalog.head_of(head) + ahead
            taken = self._write(
                RESERVE,
                (ballot_id + 1, ballot_id),
                (ballot_id, watermark, watermark, replay_of, self.clock()),
            )
            return Ballot(ballot_id, watermark, watermark) if taken else None

        return self._decide(attempt)

    def _decision_read(self, ballot_id: int) -> tuple[int, int | None]:
        """The head and the ballot's fence (None unless it is in flight), in one read."""
        head, fence = self.store.execute(DECISION_READ_SQL, (ballot_id,)).fetchone()
        return catalog.head_of(head), None if fence is None else int(fence)

    def checks(self, response: Response) -> rule.Checks:
        """Test each commit condition for `response` on its own; read-only, nothing is decided.

        `watermark_current`: the ballot's fence is the head and the response echoes that fence.
        `base_current`: the body is based on the head. Malformed fields raise `ResponseError`.
        """
        ballot_id, observed, base = check_envelope(response)
        with self.store.reading():
            head, fence = self._decision_read(ballot_id)
        return rule.check(fence, observed, base, head)

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
        ballot_id, observed, base = check_envelope(response)
        body, problem = tools_body(response.tools)
        now = self.clock()
        if self._on.commits_first and body is not None and observed == base < validation.INT64_MAX:
            # PostgreSQL: try the commit this response asks for before reading anything. Its
            # guard and the log's keys only let it land when the read below would decide
            # "commit" (see `COMMIT`); when it does not land, nothing was written.
            if self._try(lambda: self.commit_write(ballot_id, observed, body, now) or None):
                return Outcome(ballot_id, True, None, observed + 1)
            self.commit_first_misses += 1

        def attempt() -> Outcome | None:
            current, fence = self._decision_read(ballot_id)
            verdict = rule.check(fence, observed, base, current)
            if verdict.reason is None:
                if body is None:
                    raise ResponseError(f"ballot {ballot_id}: {problem}")
                if not self.commit_write(ballot_id, observed, body, now):
                    return None
                return Outcome(ballot_id, True, None, observed + 1)
            body_hash = INVALID_BODY_HASH if body is None else catalog.json_hash(body)
            answer = (ballot_id, observed, base, body_hash, 0, verdict.reason, now)
            if verdict.fenced_out:
                decision = ("rejected", verdict.reason, now, ballot_id)
                if not self._write(DECIDE, decision, answer):
                    return None
            else:
                self.store.execute(RESPONSE_SQL, answer)
            return Outcome(ballot_id, False, verdict.reason, current)

        return self._decide(attempt)

    def refuse(self, response: Response, reason: str) -> None:
        """Log `response` as refused for `reason`, a check its caller makes beyond the commit
        rule (pipelined ballots' base hash), so the response log keeps every refusal. Nothing
        else changes: the ballot stays in flight and the head where it is."""
        ballot_id, observed, base = check_envelope(response)
        body, _ = tools_body(response.tools)
        body_hash = INVALID_BODY_HASH if body is None else catalog.json_hash(body)
        now = self.clock()
        with self._deciding():
            self.store.execute(RESPONSE_SQL, (ballot_id, observed, base, body_hash, 0, reason, now))

    def commit_write(self, ballot_id: int, fence: int, body: str, now: float) -> bool:
        """The guarded write of version `fence` + 1 with `body`, for a ballot whose fence, echo
        and base are all `fence`. Writes nothing and returns False unless the ballot is still
        in flight on that fence and the version is still free (the head is still `fence`)."""
        decision = ("committed", None, now, ballot_id, fence)
        version = catalog.version_row(body, ballot_id, fence, now)
        answer = (ballot_id, fence, fence, version[2], 1, None, now)
        return self._write(COMMIT, decision, version, answer)

    def abandon(self, ballot_id: int) -> bool:
        """Give up an in-flight ballot (e.g. stalled); a later response for it is unknown.

        Returns False if the ballot was not in flight. A `ballot_id` that is not an int (a bool,
        float or str is refused, not coerced) raises `TypeError` and changes nothing.
        """
        ballot_id = _ballot_id(ballot_id, "abandon()")
        with self._deciding():
            cur = self.store.execute(ABANDON_SQL, (self.clock(), ballot_id))
        return cur.rowcount == 1

    def replay(self, old: Outcome | Ballot | int) -> Ballot:
        """Reserve a fresh ballot for the same tick as `old` (never re-apply the old one).

        If `old` is still in flight it is abandoned first, so its late response is refused.
        """
        old_id = old.ballot_id if isinstance(old, Outcome | Ballot) else _ballot_id(old, "replay()")
        self.abandon(old_id)
        return self.reserve(replay_of=old_id)
