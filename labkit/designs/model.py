"""The in-memory model of a design's loop: its state as a small hashable value, and the frame
every design's model shares.

Each design's model sits with the design it models (`labkit.designs.design`: `UnguardedModel`,
`LwwModel`, `CasModel`, `BallotModel`; `labkit.designs.pipelined`: `PipelinedModel`) and the
registry (`labkit.designs.registry.make_model`) pairs each key with its model, so a change to a
design and to its model is made in one module, and the arrival search (`arrival_search`) and
the model-against-SQLite check play the same model. Here: what all of them share, the step
itself (which request a step names, when its response is produced, what a step costs in
logical time) and the hooks a design's model fills in (`_send`, `_answer`, `_give_up`,
`_restart`, `key`).
"""

from __future__ import annotations

from typing import NamedTuple

from labkit.designs.schedules import Kind, ScheduleError, Step, outcome_label

_NEG_INF = float("-inf")


class Sent(NamedTuple):
    """One request the loop sent: the head it was based on, and what became of its response."""

    rid: int
    base: int  # the head when it was sent (for a ballot also its observed watermark)
    delivered: int = 0
    stamp: float | None = None  # updated_at of the produced response; None until delivered
    stale: bool = False  # the produced body is based on `base - 1`
    after: int | None = None  # pipelined: the request whose answer this one is built on


class LoopState(NamedTuple):
    """Everything about one design's loop that affects later steps (hashable).

    `sent[i]` is request `first_request + i`. `awaited` holds the current request (unguarded
    designs) or the in-flight ballots' requests (ballot designs), oldest first; `forgotten`
    are in-flight ballots whose request a crash erased from memory (named `-ballot_id`).
    """

    now: int
    head: int
    sent: tuple[Sent, ...]
    awaited: tuple[int, ...]
    forgotten: frozenset[int] = frozenset()
    updated_at: float = _NEG_INF  # the updated_at of the last body written (`lww` reads it)
    held: tuple[int, ...] = ()  # pipelined: in-flight requests whose answer waits in the hold
    head_by: int | None = None  # pipelined: the request whose answer is the head's body


class ModelOutcome(NamedTuple):
    """What the model says one step did to the loop: `kind` is deliver, timeout or crash, `rid`
    the request it touched. Not `arrival_orders.StepOutcome`, which is what a run on the real
    design recorded (with the head a reader saw and the held answers the step settled); the
    two are compared by `label`, which both word with `schedules.outcome_label`."""

    kind: Kind
    rid: int | None
    committed: bool = False
    reason: str | None = None

    @property
    def label(self) -> str:
        """The outcome as `StepOutcome.label` words it (e.g. ``"2:commit"``)."""
        return outcome_label(self.kind, self.rid, self.committed, self.reason)


class DesignModel:
    """One design's loop as a pure function on `LoopState`: `step(state, step)` is the next
    state and what the step did, as the design's real class does it on its store.

    The frame is shared: a delivery names a sent request, produces its response on first
    delivery (stamped with the step's time plus the host's skew) and counts copies; a
    time-out gives up the oldest wait or the one it names; every step advances the logical
    clock by one. What the loop then does is the design's own (`_answer`, `_give_up`,
    `_restart`, `_send`), and so is which parts of a state can change later steps (`key`).
    `window` is the one the design runs with (the registry's rule, `DesignSpec.window`).
    """

    name: str = ""  # the registry key of the design this models (`BallotModel`: two keys)

    def __init__(
        self,
        *,
        window: int = 1,
        ticks: int = 1000,
        first_request: int = 1,
        skews: dict[int, float] | None = None,
        name: str | None = None,
    ) -> None:
        self.name = name or self.name
        self.window = window
        self.ticks = ticks
        self.first = first_request
        self.skews = dict(skews or {})

    # --- what each design's model says ------------------------------------------------------

    def _send(self, state: LoopState) -> LoopState:
        """Send requests as the design does after a step (one current request, or fill the
        window)."""
        raise NotImplementedError

    def _answer(
        self, state: LoopState, req: Sent, body_base: int
    ) -> tuple[LoopState, ModelOutcome]:
        """What the loop does with the response to `req` (its body built on `body_base`),
        already counted as delivered in `state`."""
        raise NotImplementedError

    def _give_up(self, state: LoopState, rid: int) -> LoopState:
        """The loop gives up waiting on `rid` (one of `state.awaited`) and sends what it sends."""
        raise NotImplementedError

    def _restart(self, state: LoopState) -> LoopState:
        """The loop dies and restarts: what survives in its store stays, memory does not."""
        raise NotImplementedError

    def key(self, state: LoopState, copies: int) -> tuple:
        """`state` with what cannot affect later steps dropped, so equivalent states merge.

        Responses delivered `copies` times can never be chosen again; by default the clock
        (the step index and the produced `updated_at` stamps) is dropped too: only a design
        that reads it (`lww`) keeps it.
        """
        live = tuple(s[:3] + s[4:] for s in state.sent if s.delivered < copies)
        return (state.head, state.awaited, state.forgotten, live)

    # --- the shared frame ---------------------------------------------------------------------

    def awaited_names(self, state: LoopState) -> list[int]:
        """The request ids the loop awaits, as `Design.awaited()` names them."""
        return [self.first - 1 - r if r in state.forgotten else r for r in state.awaited]

    def start(self) -> LoopState:
        """The state after the loop sent its first request(s), before any step."""
        return self._send(LoopState(now=0, head=0, sent=(), awaited=()))

    def step(self, state: LoopState, step: Step) -> tuple[LoopState, ModelOutcome]:
        """Play one schedule step."""
        if step.kind == Kind.CRASH:
            return self.crash(state)
        if step.kind == Kind.TIMEOUT:
            return self.timeout(state, step)
        return self.deliver(state, step)

    def deliver(self, state: LoopState, step: Step) -> tuple[LoopState, ModelOutcome]:
        """Deliver the response `step` names (its first delivery produces it; a `stale` step's
        body is built on base - 1)."""
        rid, stale = step.request, step.kind == Kind.STALE
        assert rid is not None
        now = state.now + 1
        index = rid - self.first
        if not 0 <= index < len(state.sent):
            raise ScheduleError(str(step), f"request {rid} has not been sent")
        req = state.sent[index]
        if req.stamp is None:
            if stale and req.base < 1:
                raise ScheduleError(str(step), f"request {rid} is based on version 0")
            req = req._replace(stamp=now + self.skews.get(rid, 0.0), stale=stale)
        elif stale:
            raise ScheduleError(str(step), f"request {rid}'s response was already produced")
        req = req._replace(delivered=req.delivered + 1)
        sent = state.sent
        state = state._replace(now=now, sent=(*sent[:index], req, *sent[index + 1 :]))
        return self._answer(state, req, req.base - 1 if req.stale else req.base)

    def timeout(self, state: LoopState, step: Step) -> tuple[LoopState, ModelOutcome]:
        """The loop gives up on its oldest wait (or on the request `step` names) and sends a
        replacement."""
        rid = step.request
        state = state._replace(now=state.now + 1)
        names = self.awaited_names(state)
        if rid is None and not names:
            return state, ModelOutcome(Kind.TIMEOUT, None)
        pos = 0 if rid is None else names.index(rid) if rid in names else -1
        if pos < 0:
            raise ScheduleError(str(step), f"request {rid} is not awaited")
        return self._give_up(state, state.awaited[pos]), ModelOutcome(Kind.TIMEOUT, names[pos])

    def crash(self, state: LoopState) -> tuple[LoopState, ModelOutcome]:
        """The loop dies and restarts from its store."""
        return self._restart(state._replace(now=state.now + 1)), ModelOutcome(Kind.CRASH, None)
