"""The argument checks' fast paths (issue 37): a value that is already right is returned at once,
with no message built, and every value gets exactly what the full check gives it: the same
result, or the same error type and the same one-line message."""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from labkit import backend, validation
from labkit.frontier import log as fr
from labkit.validation import INT64_MAX, INT64_MIN


def outcome(check: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """What a check did with a value: its result (and the result's type), or its refusal."""
    try:
        result = check(*args, **kwargs)
    except Exception as exc:  # any refusal: its type and message are what is compared
        return ("refused", type(exc), str(exc))
    return ("accepted", type(result), result)


class Count(int):
    """An int subclass: not the fast path's plain int, but an int all the same."""


class Level(enum.IntEnum):
    LOW = 1


class Key(str):
    """A str subclass: not the fast path's plain str, but a str all the same."""


NUMPY_INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64)

near_limits = st.one_of(
    st.integers(INT64_MIN - 3, INT64_MIN + 3),
    st.integers(INT64_MAX - 3, INT64_MAX + 3),
    st.integers(-3, 3),
    st.integers(),
    st.sampled_from([2**5000, -(2**5000), 2**64, -(2**64)]),
)
numpy_ints = st.sampled_from(NUMPY_INTS).flatmap(
    lambda kind: st.integers(int(np.iinfo(kind).min), int(np.iinfo(kind).max)).map(kind)
)
int_like = st.one_of(
    near_limits,
    near_limits.map(lambda v: Count(v)),
    numpy_ints,
    st.booleans(),
    st.sampled_from([np.bool_(True), Level.LOW, Fraction(3, 1), np.float64(2.0)]),
    st.floats(allow_nan=True, allow_infinity=True),
    near_limits.map(str),
    st.none(),
    st.binary(max_size=3),
)

# Text around every rule: NUL, lone surrogates, other non-ASCII, and lengths at the byte limit.
TAILS = ("", "\x00", "\ud800", "\udfff", "é", "€", "🙂", "x")
any_text = st.text(st.characters(exclude_categories=()), max_size=6)


def near(limit: int) -> st.SearchStrategy[str]:
    """Strings whose UTF-8 size is within a few bytes of `limit`, ending in any tail."""
    return st.builds(
        lambda n, tail: "x" * n + tail,
        st.integers(max(0, limit - 5), limit + 2),
        st.sampled_from(TAILS),
    )


def text_like(limit: int) -> st.SearchStrategy[Any]:
    return st.one_of(
        any_text,
        near(limit),
        any_text.map(Key),
        near(limit).map(Key),
        st.binary(max_size=3),
        st.integers(-2, 2),
        st.none(),
    )


@given(value=int_like, low=st.sampled_from([INT64_MIN, 0, 1]))
@example(value=INT64_MIN, low=INT64_MIN)
@example(value=INT64_MAX + 1, low=INT64_MIN)
@example(value=True, low=0)
@example(value=np.uint64(2**64 - 1), low=0)
def test_int_arg_fast_path_agrees_with_the_full_check(value: Any, low: int) -> None:
    for wrong_type, out_of_range in ((TypeError, ValueError), (LookupError, OverflowError)):
        kinds = {"low": low, "wrong_type": wrong_type, "out_of_range": out_of_range}
        full = outcome(
            validation._int_checked, value, "ballot_id", "abandon()", low, wrong_type, out_of_range
        )
        assert outcome(validation.int_arg, value, "ballot_id", "abandon()", **kinds) == full
        # the name alone, as the callers that format their own name pass it
        alone = outcome(
            validation._int_checked,
            value,
            "abandon(): ballot_id",
            "",
            low,
            wrong_type,
            out_of_range,
        )
        assert alone == full
        assert outcome(validation.int_arg, value, "abandon(): ballot_id", **kinds) == full


@given(value=int_like)
@example(value=-(2**63) - 1)
@example(value=2**63)
def test_whole_agrees_with_the_full_check_and_names_where(value: Any) -> None:
    full = outcome(
        validation._int_checked,
        value,
        "coverage_base",
        "delivered_frontier",
        INT64_MIN,
        TypeError,
        ValueError,
    )
    assert outcome(fr.whole, value, "coverage_base", "delivered_frontier") == full
    # the message is the one the call site used to format itself: "where: name ..."
    assert full == outcome(
        validation._int_checked,
        value,
        "delivered_frontier: coverage_base",
        "",
        INT64_MIN,
        TypeError,
        ValueError,
    )


@given(value=st.one_of(text_like(1024), text_like(4)), limit=st.sampled_from([0, 1, 3, 4, 1024]))
@example(value="x" * 1024, limit=1024)
@example(value="x" * 1025, limit=1024)
@example(value="a\x00", limit=1024)
@example(value="a\ud800", limit=1024)
@example(value="é", limit=1)
def test_text_arg_fast_path_agrees_with_the_full_check(value: Any, limit: int) -> None:
    full = outcome(validation._text_checked, value, "name", "CatalogReader", limit)
    assert outcome(validation.text_arg, value, "name", "CatalogReader", limit) == full


@given(value=text_like(fr.MAX_SHARD_KEY_BYTES))
@example(value='o\'brien "x" ✓ 🙂')
@example(value="x" * 1021 + "🙂")  # 1025 bytes in 1022 characters
def test_shard_key_agrees_with_the_full_check(value: Any) -> None:
    full = outcome(
        validation._text_checked, value, "channel_key", "delivered_frontier", fr.MAX_SHARD_KEY_BYTES
    )
    assert outcome(fr.shard_key, value, "delivered_frontier") == full


def test_a_right_value_never_reaches_the_full_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object) -> None:
        raise AssertionError(f"the full check ran for {args[0]!r}")

    monkeypatch.setattr(validation, "_int_checked", never)
    monkeypatch.setattr(validation, "_text_checked", never)
    for value in (0, 1, INT64_MIN, INT64_MAX):
        assert validation.int_arg(value, "row_id", "redrive") is value
        assert fr.whole(value, "row_id", "redrive") is value
    assert validation.int_arg(1, "window", low=1) == 1
    for key in ("", "main", "shard-7", "x" * fr.MAX_SHARD_KEY_BYTES):
        assert validation.text_arg(key, "channel_key", "enqueue", fr.MAX_SHARD_KEY_BYTES) is key
        assert fr.shard_key(key, "enqueue") is key
    conn = fr.connect()
    fr.enqueue(conn, "main", 1)
    assert fr.delivered_frontier(conn, "main", 0) == 0
    # a refusal still gets its message: the full check is the one that builds it
    with pytest.raises(AssertionError, match="the full check ran for 2.0"):
        fr.whole(2.0, "row_id", "redrive")


def test_the_dialect_of_a_connection_type_is_found_once_and_a_stranger_refused_each_time() -> None:
    class Traced(sqlite3.Connection):
        pass

    conn = sqlite3.connect(":memory:", factory=Traced)
    assert backend.dialect(conn) is backend.SQLITE
    assert backend.dialect(conn) is backend.SQLITE  # now from the per-type table
    fr.create_schema(conn)
    assert fr.delivered_frontier(conn, "main", 7) == 7
    for _ in range(2):
        with pytest.raises(backend.UnsupportedBackend, match=r"got builtins\.dict$"):
            backend.dialect({})
    assert not backend.SQLITE.is_postgres and backend.POSTGRES.is_postgres


class _Slow(sqlite3.Connection):
    """A SQLite connection of another type: `delivered_frontier` takes its long way for it."""


_FAST = fr.connect()
_SLOW = sqlite3.connect(":memory:", factory=_Slow)
fr.create_schema(_SLOW)
for _conn in (_FAST, _SLOW):
    for _key in ("main", "x" * fr.MAX_SHARD_KEY_BYTES, "é"):
        fr.enqueue(_conn, _key, 1)


@given(key=text_like(fr.MAX_SHARD_KEY_BYTES), base=int_like)
@example(key="main", base=0)
@example(key="x" * fr.MAX_SHARD_KEY_BYTES, base=INT64_MAX)
@example(key="x" * (fr.MAX_SHARD_KEY_BYTES + 1), base=0)
@example(key="a\x00", base=0)
@example(key="é", base=-1)
@example(key="main", base=INT64_MAX + 1)
def test_the_inline_lookup_agrees_with_its_long_way(key: Any, base: Any) -> None:
    """`delivered_frontier`'s inline fast path (a plain SQLite connection) answers or refuses
    exactly as the checked path every other connection type takes."""
    slow = outcome(fr.delivered_frontier, _SLOW, key, base)
    assert outcome(fr.delivered_frontier, _FAST, key, base) == slow
