"""Pipelined ballots: up to W ticks in flight, each fenced at the version its predecessor commits.

Ballot k of a full window is fenced at head + k: it may only commit once the head has reached
that fence, and only if its body is built on the version that is there. The planner's promise
that makes this speculation sound: it builds a pipelined request on its own answer to the
request before it, and every answer states the hash of the tool list it was built on
(`Response.base_hash`). (The workbook's planner answers a request deterministically,
`planner.answer_tools`, so the loop can send that expected base along with the request.) The
loop checks the stated hash against the version that really committed below the fence: an
answer built on anything else is refused, whatever base version it names.

An answer that lands before the head reaches its fence is held (`labkit.catalog.hold`, stored
before the loop answers) and committed in fence order by part one's frontier rule. Only an
answer that echoes its ballot's fence is held; one that echoes anything else is refused at
once, as it would be on time. A ballot holds one answer: a different second one is refused.
When a ballot is refused, abandoned or fenced out, every ballot above it was built on an answer
that will never be the head, so all of them are refused too and their ticks replayed (a flush).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import labkit.catalog.hold as hold
import labkit.catalog.rule as rule
import labkit.catalog.versions as catalog
from labkit.backend import Connection
from labkit.catalog.loop import Ballot, Response
from labkit.designs.design import HELD, BallotDesign, Decision, Request
from labkit.designs.planner import answer_tools

HASH_MISMATCH = "base_hash_mismatch"  # built on a tool list that is not the committed base
ALREADY_HELD = "already_held"  # a second, different answer for a ballot whose answer is held


class PipelinedDesign(BallotDesign):
    """The `pipelined` design: `WatermarkLoop(window=W)` with fences head, head+1, ..., a
    durable hold for early answers, a base-hash check and a flush on every refusal. Its store
    is `conn` (SQLite or PostgreSQL), the SQLite file `path`, or else SQLite in memory."""

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
        super().__init__(
            conn, window=window, ticks=ticks, first_request=first_request, clock=clock, path=path
        )
        self.name = "pipelined"
        hold.create(self.conn)
        # Requests this process sent: for these (and for held answers) the loop knows the
        # body the planner builds on, so it can pipeline the next tick on top of them.
        self.mine: dict[int, Request] = {}

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
        the ticks of `replays` (or of `replay_of`), in order."""
        queue = list(replays) if replays else [] if replay_of is None else [replay_of]
        held = {h.ballot_id: h for h in hold.held(self.conn)}
        head = self.loop.head_version()
        inflight = sorted(self.loop.inflight(), key=lambda b: b.watermark)
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
            ballot = self.loop.reserve(replay_of=replay, ahead=fence - head)
            req = Request(self.ids.take(), ballot.ballot_id, fence, fence, tools, replay)
            self.requests[ballot.ballot_id] = self.mine[ballot.ballot_id] = req
            inflight.append(ballot)
            sends.append(req)
        return sends

    # --- deciding ---------------------------------------------------------------------------

    def _fence(self, ballot_id: int) -> int | None:
        return next((b.watermark for b in self.loop.inflight() if b.ballot_id == ballot_id), None)

    def _check(self, fence: int, base_version: int, base_hash: str | None) -> str | None:
        """Why an answer for the ballot fenced at the head cannot commit (None: it can)."""
        if base_version != fence:
            return "stale_base"
        if base_hash != catalog.tools_hash(self.tools_at(fence)):
            return HASH_MISMATCH
        return None

    def _flush(self, fence: int) -> list[int]:
        """Abandon every in-flight ballot above `fence` (its base can never be the head)."""
        above = sorted(
            (b for b in self.loop.inflight() if b.watermark > fence), key=lambda b: b.watermark
        )
        for b in above:
            self.loop.abandon(b.ballot_id)
        hold.release(self.conn, [b.ballot_id for b in above])
        return [b.ballot_id for b in above]

    def _refuse(self, ballot_id: int, fence: int) -> list[Request]:
        """`ballot_id` leaves flight: flush its successors and replay every tick lost."""
        self.loop.abandon(ballot_id)
        hold.release(self.conn, [ballot_id])
        return self._fill(replays=(ballot_id, *self._flush(fence)))

    def _decide(self, response: Response, fence: int) -> Decision:
        """An answer for the ballot fenced at the head: commit it, or refuse it and flush."""
        reason = self._check(fence, response.base_version, response.base_hash)
        if reason == "stale_base":
            reason = self.loop.apply(response).reason  # recorded as the rule words it
        elif reason == HASH_MISMATCH:
            self.loop.refuse(response, reason)  # in the response log, as every refusal is
        if reason is None:
            out = self.loop.apply(response)
            if out.committed:
                hold.release(self.conn, [response.ballot_id])
                return Decision(True, None, self._fill())
            reason = out.reason
        return Decision(False, reason, self._refuse(response.ballot_id, fence))

    def on_response(self, request: Request, response: Response, now: float) -> Decision:
        """Decide an answer on the head, hold one that is early (unless its echo is not its
        fence, or another answer is held for its ballot: refused), refuse one whose ballot is
        gone (`unknown_ballot`, recorded by the loop)."""
        self.now = now
        fence = self._fence(response.ballot_id)
        if fence is None:
            out = self.loop.apply(response)
            return Decision(out.committed, out.reason, self._fill())
        head = self.loop.head_version()
        if fence < head:  # fenced out: the loop records it and takes it out of flight
            out = self.loop.apply(response)
            return Decision(False, out.reason, self._refuse(response.ballot_id, fence))
        if fence > head:
            # The echo is checked now, as the rule will check it once the head is at the fence
            # (settle rebuilds the answer from its fence): a forged echo is never held.
            at_fence = rule.check(fence, response.observed_watermark, response.base_version, fence)
            if not at_fence.watermark_current:
                out = self.loop.apply(response)  # refused and logged, as it is on time
                return Decision(False, out.reason, self._refuse(response.ballot_id, fence))
            if hold.hold(
                self.conn,
                response.ballot_id,
                fence,
                response.base_version,
                response.base_hash,
                response.tools,
                now,
            ):
                return Decision(False, HELD, self._fill())
            return self._not_held(response)
        return self._decide(response, fence)

    def _not_held(self, response: Response) -> Decision:
        """`hold` stored nothing: the held answer delivered again is still held; a different
        answer for the same ballot is refused (logged), the first one stays held."""
        first = next((h for h in hold.held(self.conn) if h.ballot_id == response.ballot_id), None)
        if first is None:  # its ballot left flight meanwhile (another loop on the same store)
            out = self.loop.apply(response)
            return Decision(out.committed, out.reason, self._fill())
        same = (first.base_version, first.base_hash, catalog.tools_json(first.tools)) == (
            response.base_version,
            response.base_hash,
            catalog.tools_json(tuple(response.tools)),
        )
        if not same:
            self.loop.refuse(response, ALREADY_HELD)
            return Decision(False, ALREADY_HELD, self._fill())
        return Decision(False, HELD, self._fill())

    def settle(self, now: float) -> tuple[Request, Decision] | None:
        """Commit (or refuse) the held answer on the head, if the frontier says one is ready.

        Held rows whose ballot left flight (a crash between a commit and its release) are
        dropped first: they are never applied.
        """
        self.now = now
        live = {b.ballot_id: b.watermark for b in self.loop.inflight()}
        held = hold.held(self.conn)
        gone = [h.ballot_id for h in held if live.get(h.ballot_id) != h.fence]
        if gone:
            hold.release(self.conn, gone)
        ready = {h.fence: h for h in held if live.get(h.ballot_id) == h.fence}
        head = self.loop.head_version()
        if hold.frontier(head, ready) == head:
            return None
        h = ready[head]
        response = Response(h.ballot_id, h.fence, h.base_version, h.tools, None, h.base_hash)
        request = self.requests.get(h.ballot_id) or self._rebuilt(h.ballot_id, h.fence)
        return request, self._decide(response, h.fence)

    def on_timeout(self, request: Request, now: float) -> list[Request]:
        """Give up a ballot still awaited: flush its successors and replay them all."""
        self.now = now
        fence = None if request.ballot_id is None else self._fence(request.ballot_id)
        if fence is None or request.ballot_id in {h.ballot_id for h in hold.held(self.conn)}:
            return []
        return self._refuse(request.ballot_id, fence)

    def crash_restart(self, now: float) -> list[Request]:
        """Reopen the store: ballots and held answers survive; memory, and with it the bodies
        of unanswered requests, does not (the loop then waits for those answers)."""
        self.mine = {}
        return super().crash_restart(now)

    def _rebuilt(self, ballot_id: int, fence: int) -> Request:
        req = Request(-ballot_id, ballot_id, fence, fence, self.tools_at(fence))
        self.requests[ballot_id] = req
        return req

    def awaited(self) -> list[Request]:
        """In-flight ballots whose answer is not in yet, as recorded in the store."""
        held = {h.ballot_id for h in hold.held(self.conn)}
        out = []
        for b in self.loop.inflight():
            if b.ballot_id in held:
                continue
            req = self.requests.get(b.ballot_id) or self._rebuilt(b.ballot_id, b.watermark)
            out.append(req)
        return out
