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

The drivers (`labkit.designs.simulator`, `labkit.designs.arrival_orders`) own time and delivery
order; a design only says which requests to send and what a delivery does to the catalog.

Below each design class is its model (`UnguardedModel`, `LwwModel`, `CasModel`, `BallotModel`;
`pipelined`'s is in `labkit.designs.pipelined`): the same loop as a pure function on a small
state (`labkit.designs.model`), which the arrival search plays and `check_model` compares with
the class, step by step, on SQLite. Where a design's rule is plain Python (what `lww` and `cas`
refuse) the model calls the class's own rule. The keys, the names a reader sees and which class
and model each key runs are in one table, `labkit.designs.registry`.
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
from labkit.backend import Connection
from labkit.catalog.loop import Response, WatermarkLoop
from labkit.designs.model import DesignModel, LoopState, ModelOutcome, Sent
from labkit.designs.schedules import Kind

CAS_CONFLICT = "cas_conflict"  # the one reject reason of `cas`: the head is not the body's base
CAS_CONFLICT_WHY = "the head had moved past the version its body was computed from"
OLDER_UPDATED_AT = "older_updated_at"  # the one reject reason of `lww`: not newer than the last


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
    """Design 1 (`callback`): a sequential loop that writes `base + 1` in the response callback,
    whatever the response. `LwwDesign` and `CasDesign` are the same loop with a `refusal` of
    their own.
    """

    name = "callback"

    def __init__(self, *, ticks: int = 20, first_request: int = 1) -> None:
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

    @staticmethod
    def refusal(base: int, head: int, stamp: float, newest: float) -> str | None:
        """Why this design will not write a body computed from version `base`, stamped `stamp`,
        while the head is `head` and the last body written was stamped `newest` (None: it
        writes it). The one statement of the rule: the design's model calls it too. The
        callback writes every body."""
        return None

    def _next_after(self, request: Request, reason: str | None) -> int | None:
        """What the next request replays, after the awaited `request` answered."""
        return None

    def on_response(self, request: Request, response: Response, now: float) -> Decision:
        """Write version `base + 1` unless `refusal` says why not; any 200 is progress."""
        stamp = float("-inf") if response.updated_at is None else response.updated_at
        reason = self.refusal(response.base_version, self.version, stamp, self.updated_at)
        if reason is None:
            self.version = response.base_version + 1
            self.tools = tuple(response.tools)
            self.history[self.version] = self.tools
            self.updated_at = stamp
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


class LwwDesign(UnguardedDesign):
    """Design 2 (`lww`): the same sequential loop, but a response is written only if its
    `updated_at` is newer than the last written one (the timestamp is stored with the catalog,
    so it survives a restart).
    """

    name = "lww"

    @staticmethod
    def refusal(base: int, head: int, stamp: float, newest: float) -> str | None:
        """Last-write-wins: refuse a body not stamped later than the last one written."""
        return OLDER_UPDATED_AT if stamp <= newest else None


class CasDesign(UnguardedDesign):
    """Design 5: the same sequential loop, but the write is a compare-and-set on the version.

    A response is written as `base + 1` only if the head still equals its base (the version
    its body was computed from); otherwise it is a `cas_conflict` and nothing changes. There
    is no ballot: the loop cannot tell one request's answer from another's, so an answer it
    gave up on still commits if it lands while the head is still its base.
    """

    name = "cas"

    @staticmethod
    def refusal(base: int, head: int, stamp: float, newest: float) -> str | None:
        """Compare-and-set: refuse unless the head is still the body's base."""
        return None if base == head else CAS_CONFLICT

    def _next_after(self, request: Request, reason: str | None) -> int | None:
        """A conflict while the head is still the request's base leaves its tick undone: the
        next request redoes it (a replay). If the head moved, the next request is a new tick."""
        undone = reason is not None and request.base_version == self.version
        return request.request_id if undone else None


class UnguardedModel(DesignModel):
    """`UnguardedDesign`'s loop on `LoopState`: one request at a time; a response is written as
    `base + 1` unless the design's `refusal` (the class's own function) says why not; the next
    request goes out when the current one answers, times out or the loop restarts (nothing
    survives a crash but the head, and for `lww` the last stamp written)."""

    name = "callback"
    refusal = staticmethod(UnguardedDesign.refusal)

    def _send(self, state: LoopState) -> LoopState:
        if state.awaited or state.head >= self.ticks:
            return state
        rid = self.first + len(state.sent)
        return state._replace(sent=(*state.sent, Sent(rid, state.head)), awaited=(rid,))

    def _answer(
        self, state: LoopState, req: Sent, body_base: int
    ) -> tuple[LoopState, ModelOutcome]:
        assert req.stamp is not None  # a delivered request's response was produced
        reason = self.refusal(body_base, state.head, req.stamp, state.updated_at)
        if reason is None:
            state = state._replace(head=body_base + 1, updated_at=req.stamp)
        if state.awaited and state.awaited[0] == req.rid:
            state = self._send(state._replace(awaited=()))
        return state, ModelOutcome(Kind.DELIVER, req.rid, reason is None, reason)

    def _give_up(self, state: LoopState, rid: int) -> LoopState:
        return self._send(state._replace(awaited=()))

    def _restart(self, state: LoopState) -> LoopState:
        return self._send(state._replace(awaited=()))


class LwwModel(UnguardedModel):
    """`LwwDesign`'s loop on `LoopState`: `UnguardedModel` with `LwwDesign.refusal`. The only
    model whose later steps read the clock (the step index and the stamps written)."""

    name = "lww"
    refusal = staticmethod(LwwDesign.refusal)

    def key(self, state: LoopState, copies: int) -> tuple:
        """`DesignModel.key`, keeping the clock and every field of a live request."""
        live = tuple(s for s in state.sent if s.delivered < copies)
        return (state.now, state.head, state.updated_at, state.awaited, live)


class CasModel(UnguardedModel):
    """`CasDesign`'s loop on `LoopState`: `UnguardedModel` with `CasDesign.refusal`."""

    name = "cas"
    refusal = staticmethod(CasDesign.refusal)


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
        conn: Connection | None = None,
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
        stale = out.reason == "stale_base"  # a fenced-out ballot's version was committed: a refill
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


class BallotModel(DesignModel):
    """`BallotDesign`'s loop on `LoopState` (`ballot`, and `fenced` with its window W): ballots
    are reserved on the head until W are in flight; a response commits only if its ballot is
    in flight, the head still equals its watermark and its body is built on the head
    (`WatermarkLoop.apply`); every answer to a ballot in flight takes it out of flight and the
    window refills. A time-out abandons the ballot; a crash keeps the ballots in flight (they
    are in the store) but forgets which request carried which."""

    name = "ballot"

    def _send(self, state: LoopState) -> LoopState:
        sent, awaited, head = state.sent, state.awaited, state.head
        while head < self.ticks and len(awaited) < self.window:
            rid = self.first + len(sent)
            sent = (*sent, Sent(rid, head))
            awaited = (*awaited, rid)
        return state._replace(sent=sent, awaited=awaited)

    def _drop_awaited(self, state: LoopState, rid: int) -> LoopState:
        awaited = tuple(r for r in state.awaited if r != rid)
        forgotten = state.forgotten - {rid} if rid in state.forgotten else state.forgotten
        return state._replace(awaited=awaited, forgotten=forgotten)

    def _answer(
        self, state: LoopState, req: Sent, body_base: int
    ) -> tuple[LoopState, ModelOutcome]:
        """`WatermarkLoop.apply` plus `BallotDesign.on_response`: decide, leave flight, refill."""
        if req.rid not in state.awaited:
            return state, ModelOutcome(Kind.DELIVER, req.rid, False, "unknown_ballot")
        if req.base != state.head:
            outcome = ModelOutcome(Kind.DELIVER, req.rid, False, "stale_watermark")
        elif body_base != state.head:
            outcome = ModelOutcome(Kind.DELIVER, req.rid, False, "stale_base")
        else:
            state = state._replace(head=state.head + 1)
            outcome = ModelOutcome(Kind.DELIVER, req.rid, True)
        return self._send(self._drop_awaited(state, req.rid)), outcome

    def _give_up(self, state: LoopState, rid: int) -> LoopState:
        return self._send(self._drop_awaited(state, rid))

    def _restart(self, state: LoopState) -> LoopState:
        return self._send(state._replace(forgotten=frozenset(state.awaited)))


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
