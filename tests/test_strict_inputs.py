"""Strict types at every public entry (issue 20.7): ballot ids, windows, shard keys, ids and
bases are refused in one line naming the argument, never coerced, and nothing changes."""

from __future__ import annotations

import pytest

from labkit.ballot import Response, ResponseError, WatermarkLoop
from labkit.db import connect
from labkit.frontier import log as fr
from labkit.frontier import summarizer as sm


@pytest.mark.parametrize("bad", ["1", 1.0, True, None])
def test_abandon_and_replay_refuse_what_is_not_an_int(bad: object) -> None:
    loop = WatermarkLoop(connect())
    b = loop.reserve()
    with pytest.raises(TypeError, match=r"^abandon\(\): ballot_id must be an int"):
        loop.abandon(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^replay\(\): ballot_id must be an int"):
        loop.replay(bad)  # type: ignore[arg-type]
    assert [x.ballot_id for x in loop.inflight()] == [b.ballot_id]  # nothing abandoned


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, 10**5000], ids=["2^63", "-2^63-1", "10^5000"])
def test_ids_out_of_range_are_named_without_printing_them_whole(bad: int) -> None:
    loop = WatermarkLoop(connect())
    with pytest.raises(ValueError, match="^abandon\\(\\): ballot_id .* is outside") as info:
        loop.abandon(bad)
    assert len(str(info.value)) < 200
    with pytest.raises(ResponseError, match="response ballot_id .* is outside"):
        loop.apply(Response(bad, 0, 0, []))


@pytest.mark.parametrize(
    ("window", "error"), [("2", TypeError), (2.0, TypeError), (True, TypeError), (0, ValueError)]
)
def test_a_window_must_be_a_positive_int(window: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="^window"):
        WatermarkLoop(connect(), window=window)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "match"),
    [
        ("a\x00b", "NUL character"),
        ("a\ud800", "lone surrogate"),
        ("x" * 1025, "is 1025 bytes"),
        (b"main", "must be a str"),
        (7, "must be a str"),
    ],
)
def test_shard_keys_are_checked_before_any_driver_sees_them(key: object, match: str) -> None:
    conn = fr.connect()
    for call in (
        lambda: fr.enqueue(conn, key, 1),  # type: ignore[arg-type]
        lambda: fr.delivered_frontier(conn, key),  # type: ignore[arg-type]
        lambda: fr.max_delivered_watermark(conn, key),  # type: ignore[arg-type]
        lambda: sm.summarize_range(conn, key),  # type: ignore[arg-type]
    ):
        with pytest.raises((TypeError, ValueError), match=match) as info:
            call()
        assert "\n" not in str(info.value)
    assert conn.execute("SELECT COUNT(*) FROM conversations").fetchone() == (0,)


def test_quotes_and_unicode_stay_welcome() -> None:
    conn = fr.connect()
    row = fr.enqueue(conn, 'o\'brien "x" ✓ 🙂', 1)
    fr.mark_delivered(conn, row)
    assert fr.delivered_frontier(conn, 'o\'brien "x" ✓ 🙂') == row


@pytest.mark.parametrize("base", ["5", 5.0, True])
def test_a_base_or_a_row_id_must_be_an_int(base: object) -> None:
    conn = fr.connect()
    with pytest.raises(TypeError, match="coverage_base must be an int"):
        fr.delivered_frontier(conn, "a", base)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="row_id must be an int"):
        fr.mark_delivered(conn, base)  # type: ignore[arg-type]


@pytest.mark.postgres
@pytest.mark.parametrize("key", ["a\x00b", "a\ud800", "x" * 1_000_000])
def test_on_postgres_a_bad_key_is_one_line_not_a_driver_error(pg_connect, key: str) -> None:
    conn = pg_connect()
    with pytest.raises(ValueError, match="^enqueue: channel_key"):
        fr.enqueue(conn, key, 1)
    with pytest.raises(TypeError, match="coverage_base must be an int"):
        fr.delivered_frontier(conn, "a", "5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^enqueue: priority 1099511627776 is outside"):
        fr.enqueue(conn, "a", 2**40)  # PostgreSQL's column is a 32-bit integer
    assert conn.execute("SELECT COUNT(*) FROM conversations").fetchone() == (0,)


def test_direction_priority_and_reader_names_are_checked_too() -> None:
    from labkit.catalog import CatalogReader
    from labkit.frontier import scenarios as sc

    conn = fr.connect()
    with pytest.raises(ValueError, match="^enqueue: direction contains a NUL"):
        fr.enqueue(conn, "a", 1, "in\x00")
    with pytest.raises(ValueError, match="^CatalogReader: name contains a lone surrogate"):
        CatalogReader(connect(), "r\ud800")
    with pytest.raises(sc.OrderTokenError):
        sc.parse_delivery_order("１", 5)  # a full-width digit is not an id
    assert conn.execute("SELECT COUNT(*) FROM conversations").fetchone() == (0,)
