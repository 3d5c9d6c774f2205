"""The five catalog-update designs behind one small interface, so one driver can run them all.

1. `callback` writes each planner response into the catalog as it arrives (no guard).
2. `lww` applies a response only if the planner host's `updated_at` is newer (skewed clocks).
3. `ballot` is `WatermarkLoop(window=1)`: single in-flight ballot, the safe baseline.
4. `fenced` is `WatermarkLoop(window=W)`, shown to readers as "hedged ballots": W ballots are
   reserved on the same head, at most one of them commits per version, and the loop gains by
   taking the fastest of W planner calls (hedged requests), not by having versions in flight.
5. `cas` is compare-and-set on the catalog version, with no ballot and no watermark store: a
   response is written as `base + 1` only if the head still equals the base it was computed
   from, else it is rejected as `cas_conflict`.

The drivers (`labkit.designs.simulator`, `labkit.designs.arrival_orders`) own time and delivery order; a design only
says which requests to send and what a delivery does to the catalog.
"""

from __future__ import annotations

import copy
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import labkit.catalog.versions as catalog
from labkit import db
from labkit.catalog.loop import Response, WatermarkLoop

DESIGNS: tuple[str, ...] = ("callback", "lww", "ballot", "fenced", "cas")
# What a reader sees for each key (the keys stay stable for code; these are the names).
DISPLAY_NAMES: dict[str, str] = {
    "callback": "write in callback",
    "lww": "last-write-wins",
    "ballot": "single ballot",
    "fenced": "hedged ballots",
    "cas": "compare-and-set",
    "pipelined": "pipelined ballots",  # notebook 05's last section; not one of the five `DESIGNS`
}
CAS_CONFLICT = "cas_conflict"  # the one reject reason of `cas`: the head is not the body's base
CAS_CONFLICT_WHY = "the head had moved past the version its body was computed from"


def check_design(name: object) -> str:
    """`name` if it is one of `DESIGNS`; otherwise the one error every driver raises."""
    if not isinstance(name, str) or name not in DESIGNS:
        raise ValueError(f"unknown design {name!r}; expected one of {', '.join(DESIGNS)}")
    return name


@dataclass(frozen=True)
class Request:
    """One planner call: the ballot (None for unguarded designs), its fence and its base."""

    request_id: int
    ballot_id: int | None
    observed_watermark: int
    base_version: int
    tools: tuple[Any, ...]
    replay_of: int | None = None


@dataclass(frozen=True)
class Decision:
    """What a design did with one delivery, and the requests it sends in reaction."""

    committed: bool
    reason: str | None
    sends: list[Request] = field(default_factory=list)


class Design(Protocol):
    """The interface every design offers to a driver."""

    name: str

    def start(self, now: float) -> list[Request]:
        """Send the first request(s); also called after a restart."""
        ...

    def on_response(self, request: Request, response: Response, now: float) -> Decision:
        """Handle one delivered response (possibly late, duplicated or stale)."""
        ...

    def on_timeout(self, request: Request, now: float) -> list[Request]:
        """The loop gave up waiting for `request`; return what it sends instead."""
        ...

    def crash_restart(self, now: float) -> list[Request]:
        """Lose all in-memory state and come back from the durable store."""
        ...

    def awaited(self) -> list[Request]:
        """Requests the loop is still waiting on (timers are re-armed for them)."""
        ...

    def settle(self, now: float) -> tuple[Request, Decision] | None:
        """Decide one answer the loop held back, now that the head reached it (None: nothing
        is ready). Drivers call it until None after every step; only `pipelined` holds any."""
        ...

    def stalled(self) -> str | None:
        """Why the loop cannot move although it has not finished (nothing awaited, nothing to
        settle), in one line; None while it can. Drivers end such a run `truncated`."""
        ...

    def read_head(self) -> tuple[int, str]:
        """What an independent reader sees: the head version and its tools' hash."""
        ...

    def tools_at(self, version: int) -> tuple[Any, ...]:
        """The tool list stored at `version` (for building stale bodies)."""
        ...


class _Ids:
    """Request numbering shared by the designs, so schedules can name requests."""

    def __init__(self, first: int) -> None:
        self.next = first

    def take(self) -> int:
        rid = self.next
        self.next += 1
        return rid


class UnguardedDesign:
    """Designs 1 and 2: a sequential loop that writes `base + 1` in the response callback.

    With `lww=True` a response is written only if its `updated_at` is newer than the last
    written one (the timestamp is stored with the catalog, so it survives a restart).
    """

    name = "callback"

    def __init__(self, *, lww: bool = False, ticks: int = 20, first_request: int = 1) -> None:
        self.name = "lww" if lww else self.name
        self.lww = lww
        self.ticks = ticks
        self.ids = _Ids(first_request)
        self.version = 0
        self.tools: tuple[Any, ...] = ()
        self.updated_at = float("-inf")
        self.history: dict[int, tuple[Any, ...]] = {0: ()}
        self.current: Request | None = None

    def _send(self, replay_of: int | None = None) -> list[Request]:
        if self.version >= self.ticks:
            self.current = None
            return []
        self.current = Request(
            self.ids.take(), None, self.version, self.version, self.tools, replay_of
        )
        return [self.current]

    def start(self, now: float) -> list[Request]:
        """Send the request for the current head."""
        return self._send()

    def _refusal(self, response: Response, stamp: float) -> str | None:
        """Why this design will not write `response` (None: it writes it)."""
        if self.lww and stamp <= self.updated_at:
            return "older_updated_at"
        return None

    def _next_after(self, request: Request, reason: str | None) -> int | None:
        """What the next request replays, after the awaited `request` answered."""
        return None

    def on_response(self, request: Request, response: Response, now: float) -> Decision:
        """Write version `base + 1` unless `_refusal` says why not; any 200 is progress."""
        stamp = float("-inf") if response.updated_at is None else response.updated_at
        reason = self._refusal(response, stamp)
        if reason is None:
            self.version = response.base_version + 1
            self.tools = tuple(response.tools)
            self.history[self.version] = self.tools
            self.updated_at = max(self.updated_at, stamp) if self.lww else stamp
        sends: list[Request] = []
        if self.current is not None and request.request_id == self.current.request_id:
            sends = self._send(replay_of=self._next_after(request, reason))
        return Decision(reason is None, reason, sends)

    def on_timeout(self, request: Request, now: float) -> list[Request]:
        """Resend the current tick if this request is still the one being awaited."""
        if self.current is None or request.request_id != self.current.request_id:
            return []
        return self._send(replay_of=request.request_id)

    def crash_restart(self, now: float) -> list[Request]:
        """Forget the awaited request and start over from the stored head."""
        self.current = None
        return self._send()

    def awaited(self) -> list[Request]:
        """The single outstanding request, if any."""
        return [] if self.current is None else [self.current]

    def settle(self, now: float) -> tuple[Request, Decision] | None:
        """Nothing is ever held back: each answer is decided when it lands."""
        return None

    def stalled(self) -> str | None:
        """Never: the loop awaits its one request until the head reaches its ticks."""
        return None

    def read_head(self) -> tuple[int, str]:
        """The mutable head as any reader would see it."""
        return self.version, catalog.tools_hash(self.tools)

    def tools_at(self, version: int) -> tuple[Any, ...]:
        """The tools last written at `version` (empty if never written)."""
        return self.history.get(version, ())


class CasDesign(UnguardedDesign):
    """Design 5: the same sequential loop, but the write is a compare-and-set on the version.

    A response is written as `base + 1` only if the head still equals its base (the version
    its body was computed from); otherwise it is a `cas_conflict` and nothing changes. There
    is no ballot: the loop cannot tell one request's answer from another's, so an answer it
    gave up on still commits if it lands while the head is still its base.
    """

    name = "cas"

    def __init__(self, *, ticks: int = 20, first_request: int = 1) -> None:
        super().__init__(ticks=ticks, first_request=first_request)

    def _refusal(self, response: Response, stamp: float) -> str | None:
        """Compare-and-set: refuse unless the head is still the body's base."""
        return None if response.base_version == self.version else CAS_CONFLICT

    def _next_after(self, request: Request, reason: str | None) -> int | None:
        """A conflict while the head is still the request's base leaves its tick undone: the
        next request redoes it (a replay). If the head moved, the next request is a new tick."""
        undone = reason is not None and request.base_version == self.version
        return request.request_id if undone else None


_templates = threading.local()  # per thread: a sqlite3 connection stays in its own thread


def empty_memory_store() -> sqlite3.Connection:
    """A new in-memory ballot store as `WatermarkLoop` leaves it when it opens one at time 0: a
    copy of one made so once per thread, which costs half of making it anew (the workbench and
    the order searches make tens of thousands)."""
    template = getattr(_templates, "store", None)
    if template is None:
        template = db.connect(":memory:")
        WatermarkLoop(template, clock=lambda: 0.0)
        _templates.store = template
    return _memory_copy(template)


def _memory_copy(conn: sqlite3.Connection) -> sqlite3.Connection:
    """A new in-memory connection holding what `conn` holds now."""
    copied = db.connect(":memory:")
    conn.backup(copied)
    return copied


class BallotDesign:
    """Designs 3 and 4: the real `WatermarkLoop` on SQLite; stale ballots are replayed anew.

    With `window` W > 1 (`fenced`, "hedged ballots") the loop keeps W ballots in flight, all
    reserved on the current head: the first valid answer commits, the others are fenced out
    when they land and replaced by ballots on the new head.
    """

    def __init__(
        self,
        conn: sqlite3.Connection | None = None,
        *,
        window: int = 1,
        ticks: int = 20,
        first_request: int = 1,
        clock: Any = None,
        path: str | Path | None = None,
    ) -> None:
        """Store in `conn`, or in the SQLite file `path` (a crash then closes and reopens it),
        or by default in memory (fast enough for a widget to rerun on every change)."""
        self.name = "ballot" if window == 1 else "fenced"
        self.path = path
        if conn is None:
            if path is None and clock is None:
                conn = empty_memory_store()  # what `WatermarkLoop` makes at time 0, copied
            else:
                conn = db.connect(path if path is not None else ":memory:")
        self.conn = conn
        self.window = window
        self.ticks = ticks
        self.now = 0.0
        self.clock = clock or self._logical_now  # a method, so a copy reads its own `now`
        self.ids = _Ids(first_request)
        self.requests: dict[int, Request] = {}
        self.loop = self._open()

    def _open(self) -> WatermarkLoop:
        """The loop over this design's store, as a new process opens it."""
        return WatermarkLoop(self.conn, self.window, clock=self.clock)

    def _logical_now(self) -> float:
        return self.now

    def _fill(self, replay_of: int | None = None) -> list[Request]:
        sends = []
        while self.loop.head_version() < self.ticks and len(self.loop.inflight()) < self.window:
            ballot = self.loop.reserve(replay_of=replay_of)
            req = Request(
                self.ids.take(),
                ballot.ballot_id,
                ballot.watermark,
                ballot.base_version,
                self.tools_at(ballot.base_version),
                replay_of,
            )
            self.requests[ballot.ballot_id] = req
            sends.append(req)
            replay_of = None
        return sends

    def start(self, now: float) -> list[Request]:
        """Reserve ballots until the window is full (or the run's ticks are committed)."""
        self.now = now
        return self._fill()

    def on_response(self, request: Request, response: Response, now: float) -> Decision:
        """Apply through the watermark rule; a stale ballot is replayed as a new ballot.

        A stale body leaves its ballot in flight (the loop changes nothing on a rejection);
        this design chooses not to wait for a better body and replays the tick at once.
        """
        self.now = now
        out = self.loop.apply(response)
        if out.reason == "stale_base":
            self.loop.abandon(response.ballot_id)
        stale = out.reason in ("stale_watermark", "stale_base")
        sends = self._fill(replay_of=response.ballot_id if stale else None)
        return Decision(out.committed, out.reason, sends)

    def on_timeout(self, request: Request, now: float) -> list[Request]:
        """Abandon the ballot if it is still in flight and replay its tick as a new ballot."""
        self.now = now
        if request.ballot_id is None or not self.loop.abandon(request.ballot_id):
            return []
        return self._fill(replay_of=request.ballot_id)

    def crash_restart(self, now: float) -> list[Request]:
        """A new `WatermarkLoop` over the same database: in-flight ballots survive.

        Everything in memory is lost, including which request carried which ballot; what is
        still awaited is rebuilt from SQLite alone (see `awaited`).
        """
        self.now = now
        self.requests = {}
        if self.path is not None:  # a real restart: the old process's connection is gone
            self.conn.close()
            self.conn = db.connect(self.path)
        self.loop = self._open()
        return self._fill()

    def awaited(self) -> list[Request]:
        """In-flight ballots, as recorded in SQLite."""
        out = []
        for b in self.loop.inflight():
            req = self.requests.get(b.ballot_id)
            if req is None:  # reserved before a restart: rebuild it from the durable store
                tools = self.tools_at(b.base_version)
                req = Request(-b.ballot_id, b.ballot_id, b.watermark, b.base_version, tools)
                self.requests[b.ballot_id] = req
            out.append(req)
        return out

    def settle(self, now: float) -> tuple[Request, Decision] | None:
        """Nothing is held back here: each answer is decided when it lands."""
        return None

    def stalled(self) -> str | None:
        """Never: every ballot in flight is awaited, so its answer or its timer moves the loop."""
        return None

    def read_head(self) -> tuple[int, str]:
        """An independent read of the catalog log's head."""
        return catalog.head_hash(self.conn)

    def tools_at(self, version: int) -> tuple[Any, ...]:
        """The tools committed at `version`."""
        rec = catalog.read_version(self.conn, version)
        return () if rec is None else tuple(rec.tools)


def fork_design(design: Design) -> Design:
    """A copy of `design` that goes on independently of it: its SQLite store in memory copied
    (`backup`), every other field copied deep. What the order searches use to play a schedule
    prefix once for every schedule that shares it, rather than once each. A design on a file
    or on PostgreSQL is refused: its store is not the process's to copy. A clock the caller
    passed is a function, which a deep copy shares: it keeps reading what it read before."""
    conn = getattr(design, "conn", None)
    memo: dict[int, Any] = {}
    if conn is not None:
        if not isinstance(conn, sqlite3.Connection) or db.FileIdentity.of(conn) is not None:
            raise ValueError(f"fork_design: {design.name}'s store is not SQLite in memory")
        memo[id(conn)] = _memory_copy(conn)
    return copy.deepcopy(design, memo)


def make_design(
    name: str,
    *,
    window: int = 3,
    ticks: int = 20,
    first_request: int = 1,
    path: str | Path | None = None,
    conn: Any = None,
) -> Design:
    """Build a design by name; `window` only matters for `fenced`; `path` (a SQLite file for
    the durable store) or `conn` (an open connection, e.g. PostgreSQL) only for the ballot
    designs."""
    check_design(name)
    if name == "callback":
        return UnguardedDesign(ticks=ticks, first_request=first_request)
    if name == "cas":
        return CasDesign(ticks=ticks, first_request=first_request)
    if name == "lww":
        return UnguardedDesign(lww=True, ticks=ticks, first_request=first_request)
    if name == "ballot":
        return BallotDesign(conn, window=1, ticks=ticks, first_request=first_request, path=path)
    if window < 2:  # fenced
        raise ValueError(f"hedged ballots (key 'fenced') need window >= 2, got {window}")
    return BallotDesign(conn, window=window, ticks=ticks, first_request=first_request, path=path)
