"""The `pipelined` design: the pipelined loop (`labkit.catalog.pipeline`) on the simulated planner.

The loop owns the protocol (fences head, head+1, ..., the hold, the base-hash check, the flush,
each step one transaction); this adapter only says what to send. The planner's promise that
makes the speculation sound: it builds a pipelined request on its own answer to the request
before it (the workbook's planner answers deterministically, `planner.answer_tools`, so the
loop can send that expected base along with the request), and states the hash of the tool list
it built on. After a crash the bodies of unanswered requests are gone from memory; the loop
then waits for those answers before it pipelines above them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import labkit.catalog.hold as hold
from labkit.backend import Connection
from labkit.catalog.loop import Ballot, Response, WatermarkLoop
from labkit.catalog.pipeline import ALREADY_HELD, HASH_MISMATCH, PipelinedLoop, Step
from labkit.designs.design import BallotDesign, Decision, Request
from labkit.designs.planner import answer_tools

__all__ = ["ALREADY_HELD", "HASH_MISMATCH", "PipelinedDesign"]


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
