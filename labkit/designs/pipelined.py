"""The `pipelined` design: the pipelined loop (`labkit.catalog.pipeline`) on the simulated planner.

The loop owns the protocol (fences head, head+1, ..., the hold, the base-hash check, the flush,
each step one transaction); this adapter only says what to send. The planner's promise that
makes the speculation sound: it builds a pipelined request on its own answer to the request
before it (the workbook's planner answers deterministically, `planner.answer_tools`, so the
loop can send that expected base along with the request), and states the hash of the tool list
it built on. After a crash the bodies of unanswered requests are gone from memory; the loop
then waits for those answers before it pipelines above them.

`PipelinedModel`, below the design, is the same loop as a pure function on a small state
(`labkit.designs.model`): what the arrival search plays and `check_model` compares with the
design, step by step, on SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import labkit.catalog.hold as hold
from labkit.backend import Connection
from labkit.catalog.loop import Ballot, Response, WatermarkLoop
from labkit.catalog.pipeline import ALREADY_HELD, HASH_MISMATCH, HELD, PipelinedLoop, Step
from labkit.designs.design import BallotDesign, Decision, Request
from labkit.designs.model import DesignModel, LoopState, ModelOutcome, Sent
from labkit.designs.planner import answer_tools
from labkit.designs.schedules import Kind

__all__ = ["ALREADY_HELD", "HASH_MISMATCH", "PipelinedDesign", "PipelinedModel"]


class PipelinedDesign(BallotDesign):
    """The `pipelined` design: `PipelinedLoop` with a window of W. Its store is `conn` (SQLite
    or PostgreSQL), the SQLite file `path`, or else SQLite in memory."""

    def __init__(
        self,
        conn: Connection | None = None,
        *,
        window: int = 4,
        ticks: int = 20,
        first_request: int = 1,
        clock: Any = None,
        path: str | Path | None = None,
    ) -> None:
        # Requests this process sent: for these (and for held answers) the loop knows the
        # body the planner builds on, so it can pipeline the next tick on top of them.
        self.mine: dict[int, Request] = {}
        super().__init__(
            conn, window=window, ticks=ticks, first_request=first_request, clock=clock, path=path
        )
        self.name = "pipelined"

    def _open(self) -> WatermarkLoop:
        """Open the pipelined loop (which repairs what a cut left); its ballot store is `loop`."""
        self.pipe = PipelinedLoop(self.conn, self.window, clock=self.clock)
        self._replays = self.pipe.repaired  # ticks the repair took out of flight
        return self.pipe.base

    # --- sending ----------------------------------------------------------------------------

    def _expected_body(self, ballot: Ballot, held: dict[int, hold.Held]) -> tuple[Any, ...] | None:
        """The body `ballot`'s answer will carry if the planner keeps its promise: the held
        answer if it is in, else what this process asked for; None if a crash erased that."""
        if ballot.ballot_id in held:
            return held[ballot.ballot_id].tools
        req = self.mine.get(ballot.ballot_id)
        return None if req is None else answer_tools(req.tools, req.request_id)

    def _fill(self, replay_of: int | None = None, replays: tuple[int, ...] = ()) -> list[Request]:
        """Reserve ballots on the next fences until the window is full; the first ones replay
        the ticks of `replays` (or of `replay_of`, or those the repair at open flushed)."""
        queue = [*self._replays, *replays] if replays or self._replays else []
        if not queue and replay_of is not None:
            queue = [replay_of]
        self._replays = ()
        held = {h.ballot_id: h for h in self.pipe.held()}
        head = self.pipe.head_version()
        inflight = self.pipe.inflight()
        sends = []
        while len(inflight) < self.window:
            fence = inflight[-1].watermark + 1 if inflight else head
            if fence >= self.ticks:
                break
            if fence == head:
                tools = self.tools_at(head)
            else:
                expected = self._expected_body(inflight[-1], held)
                if expected is None:
                    break  # the predecessor's base was lost in a crash: wait for its answer
                tools = expected
            replay = queue.pop(0) if queue else None
            ballot = self.pipe.reserve(fence, head=head, replay_of=replay)
            req = Request(self.ids.take(), ballot.ballot_id, fence, fence, tools, replay)
            self.requests[ballot.ballot_id] = self.mine[ballot.ballot_id] = req
            inflight.append(ballot)
            sends.append(req)
        return sends

    # --- deciding ---------------------------------------------------------------------------

    def _after(self, step: Step) -> Decision:
        """The decision a step made, and the requests that refill the window (replaying the
        ticks it took out of flight)."""
        return Decision(step.committed, step.reason, self._fill(replays=step.replays))

    def on_response(self, request: Request, response: Response, now: float) -> Decision:
        """Commit an answer on the head, hold one that is early, refuse the rest (flushing
        every ballot above a refused one): one step of the loop."""
        self.now = now
        return self._after(self.pipe.answer(response, now))

    def settle(self, now: float) -> tuple[Request, Decision] | None:
        """Commit (or refuse) the held answer on the head, if the frontier says one is ready."""
        self.now = now
        response = self.pipe.ready()
        if response is None:
            return None
        ballot_id, fence = response.ballot_id, response.observed_watermark
        request = self.requests.get(ballot_id) or self._rebuilt(ballot_id, fence)
        return request, self._after(self.pipe.answer(response, now))

    def on_timeout(self, request: Request, now: float) -> list[Request]:
        """Give up a ballot still awaited: flush its successors and replay them all."""
        self.now = now
        if request.ballot_id is None:
            return []
        replays = self.pipe.give_up(request.ballot_id)
        return self._fill(replays=replays) if replays else []

    def crash_restart(self, now: float) -> list[Request]:
        """Reopen the store: ballots and held answers survive; memory, and with it the bodies
        of unanswered requests, does not (the loop then waits for those answers)."""
        self.mine = {}
        return super().crash_restart(now)

    def stalled(self) -> str | None:
        """The loop's own answer (`PipelinedLoop.stalled`): never after its own steps."""
        return self.pipe.stalled()

    def _rebuilt(self, ballot_id: int, fence: int) -> Request:
        req = Request(-ballot_id, ballot_id, fence, fence, self.tools_at(fence))
        self.requests[ballot_id] = req
        return req

    def awaited(self) -> list[Request]:
        """In-flight ballots whose answer is not in yet, as recorded in the store."""
        held = {h.ballot_id for h in self.pipe.held()}
        out = []
        for b in self.loop.inflight():
            if b.ballot_id in held:
                continue
            req = self.requests.get(b.ballot_id) or self._rebuilt(b.ballot_id, b.watermark)
            out.append(req)
        return out


class PipelinedModel(DesignModel):
    """`PipelinedDesign`'s loop on `LoopState`: fences head, head+1, ... until W are in flight;
    an early answer is held and decided when the head reaches it; a request built on another
    request's answer passes the base-hash check only if that answer is the head (`head_by`); a
    refusal or give-up flushes every ballot above it. A crash keeps ballots and held answers
    (they are in the store) but forgets the bodies of unanswered requests: the window then
    stops below a ballot whose body is unknown."""

    name = "pipelined"

    def _req(self, state: LoopState, rid: int) -> Sent:
        return state.sent[rid - self.first]

    def _send(self, state: LoopState) -> LoopState:
        """Reserve the next fences (head, head+1, ...) until the window is full; stop where the
        top ballot's body is unknown (its request was sent before a crash, its answer not in)."""
        sent, awaited = state.sent, state.awaited
        flight = sorted((*awaited, *state.held), key=lambda r: sent[r - self.first].base)
        while len(flight) < self.window:
            top = flight[-1] if flight else None
            fence = state.head if top is None else sent[top - self.first].base + 1
            if fence >= self.ticks:
                break
            after = None
            if fence != state.head:
                if top in state.forgotten and top not in state.held:
                    break
                after = top
            rid = self.first + len(sent)
            sent = (*sent, Sent(rid, fence, after=after))
            awaited = (*awaited, rid)
            flight.append(rid)
        return state._replace(sent=sent, awaited=awaited)

    def _leave(self, state: LoopState, rids: set[int]) -> LoopState:
        """`rids` leave flight (committed, refused or flushed); their held answers go too."""
        return state._replace(
            awaited=tuple(r for r in state.awaited if r not in rids),
            held=tuple(r for r in state.held if r not in rids),
            forgotten=state.forgotten - rids,
        )

    def _refuse(self, state: LoopState, rid: int) -> LoopState:
        """`rid` is refused: it and every ballot fenced above it leave flight; refill."""
        fence = self._req(state, rid).base
        above = {r for r in (*state.awaited, *state.held) if self._req(state, r).base > fence}
        return self._send(self._leave(state, {rid} | above))

    def _decide(self, state: LoopState, req: Sent) -> tuple[LoopState, bool, str | None]:
        """An answer for the ballot fenced at the head: commit it or refuse it (and flush)."""
        if req.stale:
            return self._refuse(state, req.rid), False, "stale_base"
        if req.after is not None and req.after != state.head_by:
            return self._refuse(state, req.rid), False, HASH_MISMATCH
        state = self._leave(state, {req.rid})._replace(head=state.head + 1, head_by=req.rid)
        return self._send(state), True, None

    def _settle(self, state: LoopState) -> LoopState:
        """Decide held answers while the head reaches them (the frontier moves)."""
        while True:
            ready = [r for r in state.held if self._req(state, r).base == state.head]
            if not ready:
                return state
            state = self._decide(state, self._req(state, ready[0]))[0]

    def _answer(
        self, state: LoopState, req: Sent, body_base: int
    ) -> tuple[LoopState, ModelOutcome]:
        """Commit an answer on the head, hold one that is early, refuse the rest."""
        if req.rid not in state.awaited and req.rid not in state.held:
            outcome = ModelOutcome(Kind.DELIVER, req.rid, False, "unknown_ballot")
        elif req.base > state.head:
            if req.rid not in state.held:
                state = self._leave(state, {req.rid})
                state = state._replace(held=tuple(sorted((*state.held, req.rid))))
            outcome = ModelOutcome(Kind.DELIVER, req.rid, False, HELD)
        else:
            state, committed, reason = self._decide(state, req)
            outcome = ModelOutcome(Kind.DELIVER, req.rid, committed, reason)
        return self._settle(self._send(state)), outcome

    def _give_up(self, state: LoopState, rid: int) -> LoopState:
        return self._settle(self._refuse(state, rid))

    def _restart(self, state: LoopState) -> LoopState:
        return self._settle(self._send(state._replace(forgotten=frozenset(state.awaited))))

    def key(self, state: LoopState, copies: int) -> tuple:
        """`DesignModel.key`, plus the held answers, and who wrote the head where a request in
        flight is built on it (only then can it matter)."""
        live = tuple(s[:3] + s[4:] for s in state.sent if s.delivered < copies)
        flight = (*state.awaited, *state.held)
        relevant = any(self._req(state, r).after == state.head_by for r in flight)
        by = state.head_by if relevant else None
        return (state.head, by, state.awaited, state.held, state.forgotten, live)
