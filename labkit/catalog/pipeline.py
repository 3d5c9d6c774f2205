"""The pipelined loop: up to W ballots in flight on fences head, head+1, ...; a step, a transaction.

Ballot k of a full window is fenced at head + k: it may only commit once the head has reached
that fence, and only if its body is built on the version that is there. The planner promises to
build a pipelined request on its own answer to the request before it and to state the hash of
the tool list it built on (`Response.base_hash`); the loop checks that hash against the version
that really committed below the fence, so an answer built on anything else is refused.

An answer whose fence is still ahead of the head is held (`labkit.catalog.hold`) and committed
later, in fence order, once the head reaches it. When the ballot on the head is refused or given
up, every ballot above it was built on an answer that will never be the head: all of them leave
flight too (a flush) and their ticks are replayed.

Each protocol step below (`reserve`, `answer`, `give_up`, `repair`) is one transaction of the
store (`WatermarkLoop.transaction`): a crash keeps all of a step or none of it. The invariant a
step keeps: the ballots in flight sit on the fences head, head+1, ... with no gap, and a held
answer belongs to a ballot in flight on its fence. Opening a store restores it (`repair`), so a
store an older version or a cut left in any other state never stalls: a ballot in flight above
a fence that has none is flushed, its tick to be replayed. One loop drives a pipelined store at
a time (its fences are reserved from what it reads).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import labkit.catalog.hold as hold
import labkit.catalog.rule as rule
import labkit.catalog.versions as catalog
from labkit import store
from labkit.backend import Connection
from labkit.catalog.loop import (
    ABANDON_SQL,
    DECIDE_SQL,
    DECISION_READ_SQL,
    INVALID_BODY_HASH,
    RESPONSE_SQL,
    Ballot,
    Response,
    ResponseError,
    WatermarkLoop,
    check_envelope,
    tools_body,
)

HASH_MISMATCH = "base_hash_mismatch"  # built on a tool list that is not the committed base
ALREADY_HELD = "already_held"  # a second, different answer for a ballot whose answer is held
HELD = "held"  # not a refusal: the answer waits for the head to reach its fence

# The ballots in flight in fence order: what a step reads to find the fences above one.
FENCES_SQL = (
    "SELECT ballot_id, observed_watermark FROM wm_ballots"
    " WHERE status = 'inflight' ORDER BY observed_watermark, ballot_id"
)
HEAD_HASH_SQL = catalog.HEAD_HASH_SQL
HELD_ONE_SQL = "SELECT base_version, base_hash, tools FROM wm_held WHERE ballot_id = ?"
# A held answer is kept only while its ballot is in flight on the answer's fence.
DROP_STALE_HOLDS_SQL = (
    "DELETE FROM wm_held WHERE NOT EXISTS (SELECT 1 FROM wm_ballots b"
    " WHERE b.ballot_id = wm_held.ballot_id AND b.status = 'inflight'"
    " AND b.observed_watermark = wm_held.fence)"
)


@dataclass(frozen=True)
class Step:
    """What one step did with an answer: committed, or why not (`HELD`: kept for later), the
    head after it, and the ballots it took out of flight whose ticks must be replayed (the
    answer's own first, then the flushed ones in fence order)."""

    committed: bool
    reason: str | None
    head: int
    replays: tuple[int, ...] = ()


class PipelinedLoop:
    """`WatermarkLoop(window=W)` with fences head, head+1, ..., a durable hold for early
    answers, the base-hash check and a flush on every refusal, each step one transaction.

    `base` is the ballot store underneath (its reads, `reserve` and the commit rule). Opening
    repairs what a cut or an older version left (`repaired`: the ballots it flushed)."""

    def __init__(
        self,
        conn: Connection | store.Store,
        window: int,
        *,
        clock: Callable[[], float] = time.time,
        genesis_tools: Sequence[Any] = (),
    ) -> None:
        s = store.of(conn)
        hold.HELD_TABLE.require_own(s)  # a foreign hold: refused before anything is made
        self.base = WatermarkLoop(s, window, clock=clock, genesis_tools=genesis_tools)
        self.store = s
        self.conn = s.conn
        hold.create(s)
        self.repaired = self.repair()

    # --- reads --------------------------------------------------------------------------------

    def head_version(self) -> int:
        """The committed head, which is the watermark."""
        return self.base.head_version()

    def inflight(self) -> list[Ballot]:
        """Ballots in flight, lowest fence first."""
        return sorted(self.base.inflight(), key=lambda b: (b.watermark, b.ballot_id))

    def held(self) -> list[hold.Held]:
        """Every held answer, lowest fence first."""
        return hold.held(self.store)

    def ready(self) -> Response | None:
        """The held answer on the head's fence, as the response `answer` decides (None: the
        head's fence has no held answer yet). Part one's rule on fences says which is next."""
        head = self.head_version()
        live = {b.ballot_id: b.watermark for b in self.base.inflight()}
        on_fence = {h.fence: h for h in self.held() if live.get(h.ballot_id) == h.fence}
        if hold.frontier(head, on_fence) == head:
            return None
        h = on_fence[head]
        return Response(h.ballot_id, h.fence, h.base_version, h.tools, None, h.base_hash)

    def stalled(self) -> str | None:
        """Why this store cannot move (ballots in flight, none on the head's fence), else None.
        `repair` clears it; it cannot arise from this loop's own steps."""
        fences = [b.watermark for b in self.base.inflight()]
        head = self.head_version()
        if fences and head not in fences:
            return (
                f"ballots in flight on fences {sorted(fences)} but none on the head's fence {head}"
            )
        return None

    # --- steps, each one transaction ----------------------------------------------------------

    def reserve(
        self, fence: int, *, head: int | None = None, replay_of: int | None = None
    ) -> Ballot:
        """Reserve a ballot on `fence` (the head, or one above the highest fence in flight);
        `head` is the head the caller read, if it read it."""
        head = self.head_version() if head is None else head
        return self.base.reserve(replay_of=replay_of, ahead=fence - head)

    def answer(self, response: Response, now: float | None = None) -> Step:
        """Decide one answer, in one transaction: commit it if its ballot is on the head's
        fence and it passes the rule and the base-hash check; hold it if its fence is ahead
        (refused if it echoes another fence, or another answer is held for its ballot);
        otherwise refuse it, and if its ballot was in flight, flush every ballot above it."""
        ballot_id, observed, base = check_envelope(response)
        body, problem = tools_body(response.tools)
        at = self.base.clock() if now is None else now
        s = self.store
        with self.base.transaction():
            head, head_hash = s.execute(HEAD_HASH_SQL).fetchone()
            _, fence = s.execute(DECISION_READ_SQL, (ballot_id,)).fetchone()
            fence = None if fence is None else int(fence)
            if fence is not None and fence > head:
                early = rule.check(fence, observed, base, fence)
                if early.watermark_current:  # its echo is the fence: keep it for later
                    if body is None:
                        raise ResponseError(f"ballot {ballot_id}: {problem}")
                    return self._hold(response, fence, body, at, head)
            if fence == head and body is not None:
                kept = s.execute(HELD_ONE_SQL, (ballot_id,)).fetchone()
                if kept is not None and tuple(kept) != (base, response.base_hash, body):
                    return self._refuse_second(response, body, at, head)  # the held one decides
            verdict = rule.check(fence, observed, base, head)
            reason: str | None = verdict.reason
            if fence == head and base == fence and response.base_hash != head_hash:
                reason = HASH_MISMATCH  # built on a body that is not the committed base
            elif reason is None:
                if body is None:
                    raise ResponseError(f"ballot {ballot_id}: {problem}")
                if not self.base.commit_write(ballot_id, head, body, at):
                    raise RuntimeError(f"ballot {ballot_id}: the commit's guard matched nothing")
                s.execute(DROP_STALE_HOLDS_SQL)
                return Step(True, None, head + 1)
            body_hash = INVALID_BODY_HASH if body is None else catalog.json_hash(body)
            s.execute(RESPONSE_SQL, (ballot_id, observed, base, body_hash, 0, reason, at))
            if fence is None:
                return Step(False, reason, head)
            if verdict.fenced_out:  # recorded as the rule's decision, as `apply` records it
                s.execute(DECIDE_SQL, ("rejected", reason, at, ballot_id))
            else:
                s.execute(ABANDON_SQL, (at, ballot_id))
            return Step(False, reason, head, (ballot_id, *self._flush(fence, at)))

    def _hold(self, response: Response, fence: int, body: str, at: float, head: int) -> Step:
        """Inside `answer`'s transaction: store an early answer, or say why it is not stored."""
        s = self.store
        params = (response.ballot_id, fence, response.base_version, response.base_hash, body, at)
        if s.execute(hold.HOLD_SQL, (*params, response.ballot_id)).rowcount == 1:
            return Step(False, HELD, head)
        first = tuple(s.execute(HELD_ONE_SQL, (response.ballot_id,)).fetchone())
        if first == (response.base_version, response.base_hash, body):
            return Step(False, HELD, head)  # the held answer delivered again
        return self._refuse_second(response, body, at, head)

    def _refuse_second(self, response: Response, body: str, at: float, head: int) -> Step:
        """Inside a step's transaction: a second, different answer for a ballot whose answer is
        held is logged as refused; the held one stays, and decides the ballot."""
        row = (response.ballot_id, response.observed_watermark, response.base_version)
        params = (*row, catalog.json_hash(body), 0, ALREADY_HELD, at)
        self.store.execute(RESPONSE_SQL, params)
        return Step(False, ALREADY_HELD, head)

    def _flush(self, fence: int, at: float) -> list[int]:
        """Inside a step's transaction: every ballot in flight above `fence` leaves flight, and
        held answers whose ballot left flight are dropped. The flushed ids, in fence order."""
        s = self.store
        above = [b for b, f in s.execute(FENCES_SQL).fetchall() if f > fence]
        s.executemany(ABANDON_SQL, [(at, b) for b in above])
        s.execute(DROP_STALE_HOLDS_SQL)
        return above

    def give_up(self, ballot_id: int) -> tuple[int, ...]:
        """Give up a ballot still awaited (its answer is neither in nor held), in one
        transaction: it and every ballot above it leave flight. Their ids, to replay in this
        order; () if the ballot is not in flight or its answer is held."""
        s, at = self.store, self.base.clock()
        with self.base.transaction():
            _, fence = s.execute(DECISION_READ_SQL, (ballot_id,)).fetchone()
            if fence is None or s.execute(HELD_ONE_SQL, (ballot_id,)).fetchone():
                return ()
            s.execute(ABANDON_SQL, (at, ballot_id))
            return (ballot_id, *self._flush(int(fence), at))

    def repair(self) -> tuple[int, ...]:
        """Restore the invariant in one transaction: ballots in flight below the head, on a
        fence another ballot already holds, or above a fence with none, leave flight, and held
        answers whose ballot is not in flight on their fence are dropped. The ids that left
        flight, in fence order (their ticks are to be replayed); () on a sound store."""
        s, at = self.store, self.base.clock()
        with self.base.transaction():
            (head,) = s.execute(catalog.HEAD_SQL).fetchone()
            head = catalog.head_of(head)
            gone, expected, chain = [], head, True
            for ballot_id, fence in s.execute(FENCES_SQL).fetchall():
                # Below the head it can never commit; past a gap or a second ballot on one
                # fence, it was built on an answer that may never be the head.
                if fence < head or not chain or fence != expected:
                    gone.append(ballot_id)
                    chain = chain and fence < head
                else:
                    expected += 1
            s.executemany(ABANDON_SQL, [(at, b) for b in gone])
            s.execute(DROP_STALE_HOLDS_SQL)
        return tuple(gone)
