"""The one seam between SQLite and PostgreSQL: a dialect chosen from the connection, once.

A function that takes a connection asks `dialect(conn)` when it is entered (an object when it is
made) and from then on talks to the dialect, never to the connection's type. Statements are
written once, in SQLite's placeholder style (`?` or `:name`); `Dialect.sql` renders them for
the connection's driver. Only what truly differs (DDL, locks, the snapshot fence, guarded
writes) is written per backend, side by side, in the module that owns it. psycopg is imported
only when a psycopg connection is seen, so SQLite-only work never loads it.
"""

from __future__ import annotations

import math
import numbers
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol

BackendName = Literal["sqlite", "postgres"]
BACKENDS: tuple[BackendName, ...] = ("sqlite", "postgres")


class Connection(Protocol):
    """What every public function here accepts: a `sqlite3.Connection` or a psycopg one."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


class UnsupportedBackend(TypeError):
    """A function was handed a connection of a backend it does not support (one line)."""


# A statement's tokens: string literals and quoted names keep their `?` and `:name`, `?` and
# `:name` elsewhere are placeholders, and every `%` (in a literal too: psycopg reads the whole
# text for placeholders, quotes or not) is doubled.
_TOKENS = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")|(\?)|(?<![:\w]):([A-Za-z_]\w*)|(%)""")


@lru_cache(maxsize=512)
def _to_pyformat(sql: str) -> str:
    """`sql` in SQLite's placeholder style rendered in psycopg's (`%s`, `%(name)s`, `%%`)."""

    def one(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1).replace("%", "%%")
        if m.group(2):
            return "%s"
        if m.group(3):
            return f"%({m.group(3)})s"
        return "%%"

    return _TOKENS.sub(one, sql)


def by_position(statement: str, names: Sequence[str]) -> str:
    """`statement` (SQLite's style) with each `:name` written `?N`, N its place in `names`
    (from 1), so that SQLite binds a tuple: the sqlite3 module binds a dict name by name, which
    cost a hot lookup about a tenth of its time. Nothing else changes (literals and quoted
    names are kept), so neither does the plan; a bare `?` or a name not in `names` is refused."""
    place = {name: f"?{i}" for i, name in enumerate(names, 1)}

    def one(m: re.Match[str]) -> str:
        if m.group(2) or (m.group(3) and m.group(3) not in place):
            raise ValueError(
                f"by_position: {m.group(0)!r} in the statement is not one of :{', :'.join(names)}"
            )
        return place[m.group(3)] if m.group(3) else m.group(0)

    return _TOKENS.sub(one, statement)


@dataclass(frozen=True)
class Dialect:
    """How one backend runs the workbook's statements; `name` is "sqlite" or "postgres"."""

    name: BackendName
    _placeholders: str = field(repr=False)
    # a field, not a property: hot paths ask it on every call
    is_postgres: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_postgres", self.name == "postgres")

    def sql(self, statement: str) -> str:
        """`statement` (written once, SQLite placeholder style) as this backend runs it."""
        return statement if self._placeholders == "qmark" else _to_pyformat(statement)

    def execute(self, conn: Any, statement: str, params: Any = ()) -> Any:
        """Run one statement written in SQLite's style on `conn`; returns the cursor."""
        return conn.execute(self.sql(statement), params)

    def executemany(self, conn: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run `statement` once per row (psycopg has `executemany` on cursors only)."""
        if self.is_postgres:
            with conn.cursor() as cur:
                cur.executemany(self.sql(statement), list(rows))
        else:
            conn.executemany(statement, rows)

    def insert_returning_id(self, conn: Any, statement: str, params: Any = ()) -> int:
        """Run an INSERT and return the new row's id (`RETURNING id` is valid on both)."""
        return int(self.execute(conn, statement + " RETURNING id", params).fetchone()[0])

    @contextmanager
    def atomic(self, conn: Any) -> Iterator[Any]:
        """One write transaction: SQLite's BEGIN IMMEDIATE (or a savepoint inside a caller's),
        psycopg's `transaction()` (a savepoint inside a caller's transaction)."""
        if self.is_postgres:
            with conn.transaction():
                yield conn
        else:
            from labkit.db import atomic

            with atomic(conn):
                yield conn

    @contextmanager
    def reading(self, conn: Any) -> Iterator[Any]:
        """Reads outside a write. On PostgreSQL, if no transaction was open, the one the reads
        opened is ended, so the session never sits idle in a transaction."""
        if not self.is_postgres:
            yield conn
            return
        from psycopg.pq import TransactionStatus

        idle = conn.info.transaction_status == TransactionStatus.IDLE
        try:
            yield conn
        finally:
            if idle and conn.info.transaction_status != TransactionStatus.IDLE:
                conn.rollback()  # only reads ran: nothing to keep


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


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def shown(value: Any) -> str:
    """A caller's value in an error message: short, and never an int too long to print."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit int"
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


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
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # numpy ints too
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
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
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


SQLITE = Dialect("sqlite", "qmark")
POSTGRES = Dialect("postgres", "pyformat")


# Each connection type's dialect, found once: `dialect` is asked on every hot call.
_DIALECT_OF_TYPE: dict[type, Dialect] = {}


def dialect(conn: object) -> Dialect:
    """The dialect of `conn`: SQLite for a `sqlite3.Connection`, PostgreSQL for psycopg's.

    Anything else is refused in one line naming its type.
    """
    try:
        return _DIALECT_OF_TYPE[type(conn)]
    except KeyError:
        found = _DIALECT_OF_TYPE[type(conn)] = _dialect_of_type(type(conn))
        return found


def _dialect_of_type(kind: type) -> Dialect:
    """`dialect` for a connection of type `kind`, worked out the first time one is seen."""
    if issubclass(kind, sqlite3.Connection):
        return SQLITE
    module = kind.__module__ or ""
    if module.split(".")[0] == "psycopg":
        return POSTGRES
    raise UnsupportedBackend(
        f"expected a sqlite3 or psycopg connection, got {kind.__module__}.{kind.__qualname__}"
    )


def require(conn: object, function: str, *supported: BackendName) -> Dialect:
    """`dialect(conn)` if `function` supports it, else `UnsupportedBackend` in one line."""
    found = dialect(conn)
    if found.name not in supported:
        raise UnsupportedBackend(
            f"{function} works on {' and '.join(supported)} only; it was handed a "
            f"{found.name} connection"
        )
    return found
