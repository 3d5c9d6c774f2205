"""Commit rules a learner might hand in for the apply-rule exercise: the right one, and a
catalogue of wrong ones, each wrong in one way a reader of Article 2 could plausibly be.

Every rule has the exercise's shape: `rule(inflight, head, response)` returns None to commit
or a reject reason, and deletes from `inflight` a ballot that the response takes out of flight.
"""

from __future__ import annotations

from collections.abc import Callable

from labkit.ballot import Response

Rule = Callable[[dict[int, int], int, Response], "str | None"]


def decide(inflight: dict[int, int], head: int, response: Response) -> str | None:
    """The rule WatermarkLoop.apply follows."""
    b = response.ballot_id
    if b not in inflight:
        return "unknown_ballot"
    observed = inflight[b]
    if observed != head:
        del inflight[b]
        return "stale_watermark"
    if response.observed_watermark != observed:
        return "stale_watermark"
    if response.base_version != head:
        return "stale_base"
    del inflight[b]
    return None


def _rule(
    *,
    check_inflight: bool = True,
    check_fence: bool = True,
    check_echo: bool = True,
    echo_ok: Callable[[int, int], bool] = lambda echo, observed: echo == observed,
    base_ok: Callable[[int, int], bool] = lambda base, head: base == head,
    base_first: bool = False,
    evict_fenced: bool = True,
    evict_on_any_stale_watermark: bool = False,
    evict_on_stale_base: bool = False,
    evict_on_commit: bool = True,
) -> Rule:
    """The right rule with one part switched off or bent; each wrong rule below is one switch."""

    def rule(inflight: dict[int, int], head: int, response: Response) -> str | None:
        b = response.ballot_id
        if check_inflight and b not in inflight:
            return "unknown_ballot"
        observed = inflight.get(b, response.observed_watermark)
        base_bad = not base_ok(response.base_version, head)
        if base_first and base_bad:
            return "stale_base"
        fenced = check_fence and observed != head
        forged = check_echo and not echo_ok(response.observed_watermark, observed)
        if fenced or forged:
            if b in inflight and ((fenced and evict_fenced) or evict_on_any_stale_watermark):
                del inflight[b]
            return "stale_watermark"
        if base_bad:
            if evict_on_stale_base:
                inflight.pop(b, None)
            return "stale_base"
        if evict_on_commit:
            inflight.pop(b, None)
        return None

    return rule


def article_sketch(inflight: dict[int, int], head: int, response: Response) -> str | None:
    """The starter: refuses only a body whose proposed head is behind the current one."""
    return "stale_base" if response.base_version + 1 < head else None


WRONG_RULES: dict[str, Rule] = {
    "the starter sketch": article_sketch,
    "base >= head accepted (a body from the future commits)": _rule(
        base_ok=lambda base, head: base >= head
    ),
    "base <= head accepted (an old body commits)": _rule(base_ok=lambda base, head: base <= head),
    "base unchecked": _rule(base_ok=lambda base, head: True),
    "echo unchecked": _rule(check_echo=False),
    "echo <= observed accepted": _rule(echo_ok=lambda echo, observed: echo <= observed),
    "echo >= observed accepted": _rule(echo_ok=lambda echo, observed: echo >= observed),
    "no in-flight check": _rule(check_inflight=False),
    "fence unchecked (only the echo is compared)": _rule(check_fence=False),
    "base checked before the watermark": _rule(base_first=True),
    "evicts on stale_base": _rule(evict_on_stale_base=True),
    "evicts on every stale_watermark (a forged echo too)": _rule(evict_on_any_stale_watermark=True),
    "never evicts a fenced ballot": _rule(evict_fenced=False),
    "never evicts a committed ballot": _rule(evict_on_commit=False),
}
