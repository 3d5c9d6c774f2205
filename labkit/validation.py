"""Every argument check in one place: what a caller, a file or a wire may hand the labkit.

One home per rule (issue 32): the 64-bit integer range both backends store, "an int, never a
bool", a finite real number, a bounded text, a response's `updated_at` stamp. Everything that
checks an argument calls in here; nothing else in labkit writes these rules again (the test
tests/test_one_home.py scans the source for second copies).

The hot checks keep a fast path that builds no message for a value they accept: `int_arg`
returns a plain in-range int before anything else (tests/test_argument_fast_paths.py pins it).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

# The 64-bit signed range both SQLite and PostgreSQL (bigint) store, written once.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def shown(value: Any) -> str:
    """A caller's value in an error message: short, and never an int too long to print."""
    if is_int(value) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit int"
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def is_int(value: Any) -> bool:
    """True for a Python int that is not a bool (a bool is an int to Python, never to labkit):
    what JSON and plain Python hand over. `is_integral` also takes numpy's."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_integral(value: Any) -> bool:
    """True for an integer of any kind that is not a bool: a Python int or a numpy one
    (`numbers.Integral`)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """True for a real number that is not a bool: an int or a float, numpy's too (not checked
    for finiteness; `number_arg` and `is_finite_real` do that)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_finite_real(value: Any) -> bool:
    """True for a real number that is not a bool and is finite (no NaN, no infinity)."""
    return is_real(value) and math.isfinite(value)


def is_int64(value: Any) -> bool:
    """True for a Python int (not a bool) that both backends store: in [INT64_MIN, INT64_MAX]."""
    return is_int(value) and INT64_MIN <= value <= INT64_MAX


def text_arg(value: Any, name: str, where: str, max_bytes: int = 1024) -> str:
    """A text argument checked the same way for both backends before a driver sees it: a str
    of at most `max_bytes` UTF-8 bytes, with no NUL (PostgreSQL text cannot hold one) and no
    lone surrogate (not encodable). One line naming `where` and `name` otherwise."""
    # Fast path (hot lookups pass short keys): an ASCII str is one byte per character and holds
    # no surrogate, so only its length and NUL are left to check. Anything else is checked in
    # full; either way a message is built only when the value is refused.
    if type(value) is str and value.isascii() and len(value) <= max_bytes and "\x00" not in value:
        return value
    return _text_checked(value, name, where, max_bytes)


def _text_checked(value: Any, name: str, where: str, max_bytes: int) -> str:
    """`text_arg`'s rules in full, for any value: the reference its fast path must agree with."""
    if not isinstance(value, str):
        raise TypeError(f"{where}: {name} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(
            f"{where}: {name} contains a NUL character, which PostgreSQL text cannot hold"
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(
            f"{where}: {name} contains a lone surrogate, not valid Unicode text"
        ) from None
    if size > max_bytes:
        raise ValueError(f"{where}: {name} is {size} bytes; at most {max_bytes}")
    return value


def int_arg(
    value: Any,
    name: str,
    where: str = "",
    *,
    low: int = INT64_MIN,
    wrong_type: type[Exception] = TypeError,
    out_of_range: type[Exception] = ValueError,
) -> int:
    """An integer argument checked the same way for both backends: an int (a bool, float or
    str is refused, never coerced) in [low, the 64-bit maximum both store]. One line naming
    `name` (after `where: ` when given) otherwise."""
    # Fast path: a plain int in range is returned as it is, with no message built.
    if type(value) is int and low <= value <= INT64_MAX:
        return value
    return _int_checked(value, name, where, low, wrong_type, out_of_range)


def _int_checked(
    value: Any,
    name: str,
    where: str,
    low: int,
    wrong_type: type[Exception],
    out_of_range: type[Exception],
) -> int:
    """`int_arg`'s rules in full, for any value: the reference its fast path must agree with."""
    if not is_integral(value):  # numpy ints too
        named = f"{where}: {name}" if where else name
        raise wrong_type(f"{named} must be an int, got {type(value).__name__} {shown(value)}")
    value = int(value)
    if not low <= value <= INT64_MAX:
        named = f"{where}: {name}" if where else name
        raise out_of_range(f"{named} {shown(value)} is outside [{low}, {INT64_MAX}]")
    return value


def number_arg(
    value: Any,
    name: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> float:
    """A real-number argument (a time, a rate) checked the same way everywhere: an int or a
    float (numpy's too; a bool or str is refused, never coerced), finite, and `> above`,
    `>= at_least`, `<= at_most` where given. Returned as a float; one line naming `name`
    otherwise."""
    rules = [
        f"{op} {bound:g}"
        for op, bound in ((">", above), (">=", at_least), ("<=", at_most))
        if bound is not None
    ]
    wanted = " ".join(["a finite number", " and ".join(rules)]).strip()
    if not is_real(value):
        raise TypeError(f"{name} must be {wanted}, got {type(value).__name__} {shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.inf
    if (
        not math.isfinite(number)
        or (above is not None and not number > above)
        or (at_least is not None and not number >= at_least)
        or (at_most is not None and not number <= at_most)
    ):
        raise ValueError(f"{name} must be {wanted}, got {shown(value)}")
    return number


def stamp_arg(value: Any, name: str, *, error: type[Exception] = ValueError) -> float | None:
    """A response's `updated_at` stamp: None, or a finite real number (a bool, a str, NaN or an
    infinity is refused) returned as a float. `error` naming `name` otherwise."""
    if value is None:
        return None
    if not is_finite_real(value):
        raise error(f"{name} must be None or a finite number, got {shown(value)}")
    return float(value)
