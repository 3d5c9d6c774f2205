"""The commit rule, written once: a pure decision over what the store holds and a response says.

A response commits only if its ballot is still in flight, the ballot's fence (the watermark it
observed) is still the head, the response echoes that fence, and its body is based on the head.
`check` answers for one response, with no store and no backend: `WatermarkLoop.checks` shows its
answer and `WatermarkLoop.apply` acts on it, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Reason = Literal["unknown_ballot", "stale_watermark", "stale_base"]
# The refusals in the order `Checks.reason` tests their conditions (exercises rank them by it).
REASONS: tuple[str, ...] = ("unknown_ballot", "stale_watermark", "stale_base")
# Why each refusal befalls an answer, in `REASONS` order, in the words the widgets show.
REASON_WHY: dict[str, str] = dict(
    zip(
        REASONS,
        (
            "the loop no longer knew its ballot (given up, or forgotten in a crash)",
            "its ballot was reserved on the same head as one that committed first, so the loop "
            "fenced it out and refills the window on the new head (hedged ballots keep one "
            "version per head)",
            "its body was built on an older version than the head",
        ),
        strict=True,
    )
)


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

    @property
    def fenced_out(self) -> bool:
        """The ballot is in flight on a fence the head has passed: it can never commit, so
        whatever its response says, it leaves flight (its tick is replayed as a new ballot)."""
        return self.fence is not None and self.fence != self.head


def check(fence: int | None, echo: int, base: int, head: int) -> Checks:
    """The rule for one response: `fence` is its ballot's (None unless in flight), `echo` the
    watermark the response says it observed, `base` the version its body is based on."""
    in_flight = fence is not None
    watermark_current = in_flight and fence == head and echo == fence
    return Checks(in_flight, watermark_current, base == head, fence, head)
