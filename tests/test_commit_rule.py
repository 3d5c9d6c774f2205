"""The commit rule, written once (`labkit.catalog.rule.check`), as a table: every combination of
ballot in flight or not, its fence the head or not, the echo its fence or not, the base the head
or not, with the reason `apply` answers and whether the ballot must leave flight. Then that
`WatermarkLoop.checks` and `apply` both act on this one function, on either backend."""

from __future__ import annotations

import itertools

import pytest
from backends import BACKENDS, Store, open_store, rows

from labkit.catalog import rule
from labkit.catalog.loop import Response, WatermarkLoop

HEAD = 5
# (in flight, fence == head, echo == fence, base == head) -> (reason, fenced out)
TABLE = {
    (True, True, True, True): (None, False),
    (True, True, True, False): ("stale_base", False),
    (True, True, False, True): ("stale_watermark", False),  # a forged echo: the owner stays
    (True, True, False, False): ("stale_watermark", False),
    (True, False, True, True): ("stale_watermark", True),  # the head passed the fence
    (True, False, True, False): ("stale_watermark", True),
    (True, False, False, True): ("stale_watermark", True),
    (True, False, False, False): ("stale_watermark", True),
    **{
        (False, *rest): ("unknown_ballot", False)
        for rest in itertools.product((True, False), repeat=3)
    },
}


def test_the_table_has_every_combination() -> None:
    assert sorted(TABLE) == sorted(itertools.product((True, False), repeat=4))


@pytest.mark.parametrize("off", [-1, 1], ids=["below", "above"])
@pytest.mark.parametrize(("case", "expected"), TABLE.items(), ids=str)
def test_the_rule_answers_as_the_table_says(
    case: tuple[bool, bool, bool, bool], expected: tuple[str | None, bool], off: int
) -> None:
    """`off`: how a value that is not equal differs (below or above what it is compared with).
    A ballot not in flight has a fence in the store, but the decision reads None for it."""
    in_flight, fence_is_head, echo_is_fence, base_is_head = case
    fence = HEAD if fence_is_head else HEAD + 2 * off
    echo = fence if echo_is_fence else fence + off
    base = HEAD if base_is_head else HEAD + off
    got = rule.check(fence if in_flight else None, echo, base, HEAD)
    assert (got.reason, got.fenced_out) == expected
    assert (got.in_flight, got.base_current) == (in_flight, base_is_head)
    assert got.watermark_current == (in_flight and fence_is_head and echo_is_fence)
    assert (got.fence, got.head) == (fence if in_flight else None, HEAD)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Store:
    return open_store(request, request.param)


def test_checks_and_apply_both_act_on_the_one_rule(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replace the rule by one that calls every in-flight ballot unknown: `checks` shows it,
    and `apply` records it and leaves the ballot in flight (unknown does not fence it out), on
    each backend. A second copy of the rule inside either would ignore the replacement."""
    loop = WatermarkLoop(store.connect(), window=2)
    b = loop.reserve()
    stale = Response(b.ballot_id, b.watermark, b.base_version - 1, ["old"])  # stale_base
    assert loop.checks(stale).reason == "stale_base"
    seen = []

    def unknown(fence: int | None, echo: int, base: int, head: int) -> rule.Checks:
        seen.append((fence, echo, base, head))
        return rule.Checks(False, False, False, None, head)

    monkeypatch.setattr(rule, "check", unknown)
    assert loop.checks(stale).reason == "unknown_ballot"
    out = loop.apply(stale)
    assert (out.committed, out.reason, out.version) == (False, "unknown_ballot", 0)
    assert seen == [(0, 0, -1, 0)] * 2
    assert loop.inflight() == [b]
    assert rows(loop.conn, "SELECT reason FROM wm_responses") == [("unknown_ballot",)]


def test_reasons_are_listed_in_the_order_the_rule_tests_them() -> None:
    """`REASONS` is the rule's order (the exercises rank a wrong verdict by it): a response
    failing several conditions gets the reason listed first."""
    from labkit.catalog.rule import REASONS, Checks

    for failing in range(1, 8):  # every non-empty set of failed conditions
        flags = [not (failing >> i) & 1 for i in range(3)]
        got = Checks(*flags, fence=0, head=0).reason
        first = next(r for r, ok in zip(REASONS, flags, strict=True) if not ok)
        assert got == first
