"""`WatermarkLoop.checks` tests each commit condition on its own, changes nothing, and agrees
with `apply` on every boundary: ballot in flight / fenced out / committed / abandoned /
never reserved, echo below / equal / above its fence, base below / equal / above the head."""

from __future__ import annotations

import itertools

import pytest
from backends import BACKENDS, Store, open_store, rows

from labkit.catalog.loop import Response, ResponseError, WatermarkLoop


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Store:
    return open_store(request, request.param)


TABLES = ("catalog_versions", "wm_store", "wm_ballots", "wm_responses")


def _snapshot(conn) -> list[list[tuple]]:
    return [rows(conn, f"SELECT * FROM {t} ORDER BY 1") for t in TABLES]


def _loop(store: Store) -> WatermarkLoop:
    """Head 2; ballot 3 committed v2, 4 fenced out (fence 1), 5 owns the watermark, 6 abandoned."""
    loop = WatermarkLoop(store.connect(), window=3)
    loop.apply(Response(1, 0, 0, ["a"]))  # unknown ballot: nothing changes
    b1 = loop.reserve()
    loop.apply(Response(b1.ballot_id, 0, 0, ["v1"]))
    b2, b3, b4 = loop.reserve(), loop.reserve(), loop.reserve()  # ballots 2, 3, 4 fence 1
    loop.abandon(b2.ballot_id)
    loop.apply(Response(b3.ballot_id, 1, 1, ["v2"]))
    b5 = loop.reserve()
    assert (b4.watermark, b5.watermark, loop.head_version()) == (1, 2, 2)
    loop.abandon(loop.reserve().ballot_id)  # ballot 6
    return loop


BALLOTS = {"committed": 3, "fenced out": 4, "owns the watermark": 5, "abandoned": 6, "never": 9}


@pytest.mark.parametrize(
    ("which", "echo_offset", "base_offset"),
    list(itertools.product(BALLOTS, (-1, 0, 1), (-1, 0, 1))),
)
def test_checks_agree_with_apply_and_change_nothing(
    store: Store, which: str, echo_offset: int, base_offset: int
) -> None:
    loop = _loop(store)
    head = loop.head_version()
    fences = {b.ballot_id: b.watermark for b in loop.inflight()}
    ballot = BALLOTS[which]
    echo = fences.get(ballot, head) + echo_offset
    resp = Response(ballot, echo, head + base_offset, ["body"])
    before = _snapshot(loop.conn)
    got = loop.checks(resp)
    assert _snapshot(loop.conn) == before
    assert got.head == head and got.fence == fences.get(ballot)
    assert got.in_flight == (ballot in fences)
    assert got.base_current == (base_offset == 0)
    assert got.watermark_current == (got.fence == head and echo_offset == 0)
    assert got.reason == loop.apply(resp).reason


def test_each_condition_alone_lets_one_wrong_response_through(store: Store) -> None:
    """The two cases notebook 04 shows: only the base check, or only the fence, refuses."""
    loop = _loop(store)
    old_body = loop.checks(Response(5, 2, 1, ["built on v1"]))
    assert (old_body.watermark_current, old_body.base_current, old_body.reason) == (
        True,
        False,
        "stale_base",
    )
    stale_fence = loop.checks(Response(4, 1, 2, ["built on v2"]))
    assert (stale_fence.watermark_current, stale_fence.base_current, stale_fence.reason) == (
        False,
        True,
        "stale_watermark",
    )


def test_checks_refuses_a_malformed_fence_like_apply(store: Store) -> None:
    with pytest.raises(ResponseError, match="ballot_id must be an int"):
        _loop(store).checks(Response("5", 2, 2, []))  # type: ignore[arg-type]
