"""The learner-SQL sandbox: one statement, read-only unless a checker says otherwise, bounded
in SQLite steps, wall time and memory; every way it can fail becomes a one-line `Wrong`.

Only the learner's statement runs under the guard. Checkers run their own SQL outside it, so
an error there is a labkit bug and surfaces as one.
"""

from __future__ import annotations

import ctypes
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from typing import Any

from labkit.exercises.kit import Wrong

# A right answer needs a few thousand SQLite VM steps; these bound a wrong one. The step
# budget stops a runaway loop deterministically; the deadline catches steps that are each
# slow (big DISTINCTs, huge printf padding); the value cap and the heap limit keep one query
# from taking the kernel's memory (a padded answer once peaked at 1 GB).
STEP_BUDGET = 5_000_000
SECONDS = 2.0
VALUE_BYTES = 1_000_000
HEAP_BYTES = 64 * 2**20
MAX_ROWS = 10

_READ_ONLY = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
_READ_ONLY.add(getattr(sqlite3, "SQLITE_RECURSIVE", 33))


def read_only(action: int, *_: Any) -> int:
    """SQLite authorizer: allow reading and functions, deny every write, PRAGMA or ATTACH."""
    return sqlite3.SQLITE_OK if action in _READ_ONLY else sqlite3.SQLITE_DENY


def code_only(text: str) -> str:
    """`text` with the contents of string literals blanked, for keyword and `?` checks."""
    return re.sub(r"'(?:[^']|'')*'", "''", text)


def strip_sql(sql: Any, what: str) -> str:
    """The learner's SQL without comments and trailing `;`; refuses non-strings and batches."""
    if not isinstance(sql, str):
        raise Wrong(f"give {what} as a Python string of SQL (you gave a {type(sql).__name__})")
    text = re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.DOTALL).strip()
    text = text.rstrip(";").strip()
    if not text:
        raise Wrong(f"{what} is empty")
    if ";" in code_only(text):
        raise Wrong(f"{what} must be a single statement; yours has more than one")
    return text


def run(
    conn: sqlite3.Connection,
    sql: str,
    params: tuple | Mapping = (),
    what: str = "your query",
    *,
    writes: bool = False,
) -> list[tuple]:
    """Run the learner's `sql` under every limit; return at most `MAX_ROWS + 1` of its rows.

    Read-only unless `writes`. Whatever SQLite refuses or stops becomes a `Wrong` naming
    `what`; the connection's limits, handlers and the process heap limit are restored after.
    """
    deadline = time.monotonic() + SECONDS
    steps = 0
    tripped = ""

    def stop() -> bool:  # SQLite calls this between VM steps; True interrupts the statement
        nonlocal steps, tripped
        steps += 1
        if steps > STEP_BUDGET:
            tripped = "steps"
        elif time.monotonic() > deadline:
            tripped = "time"
        return bool(tripped)

    old_length = conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_BYTES)
    conn.set_progress_handler(stop, 1)
    if not writes:
        conn.set_authorizer(read_only)
    try:
        with _heap_limit(HEAP_BYTES), closing(conn.execute(sql, params)) as cursor:
            return cursor.fetchmany(MAX_ROWS + 1)
    except (sqlite3.Error, ValueError, MemoryError) as exc:
        raise _explain_failure(exc, what, tripped) from exc
    finally:
        conn.set_progress_handler(None, 0)
        if not writes:
            conn.set_authorizer(None)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, old_length)


def _explain_failure(exc: Exception, what: str, tripped: str) -> Wrong:
    """One line for the learner: which limit stopped `what`, or what SQLite said."""
    if tripped == "steps":
        return Wrong(
            f"{what} ran too long: SQLite stopped it after {STEP_BUDGET:,} steps "
            "(a recursive CTE with no stopping condition?)"
        )
    if tripped == "time":
        return Wrong(f"{what} ran longer than {SECONDS:g} s, so SQLite stopped it")
    if isinstance(exc, MemoryError):
        return Wrong(f"{what} needed more than {HEAP_BYTES // 2**20} MB of memory; stopped")
    msg = str(exc)
    if "too big" in msg:
        return Wrong(f"{what} built a string or blob over {VALUE_BYTES:,} bytes; stopped")
    if "one statement at a time" in msg:
        return Wrong(f"{what} must be a single statement; yours has more than one")
    if "not authorized" in msg:
        return Wrong(f"{what} may only read: SQLite refused it ({msg})")
    return Wrong(f"SQLite could not run {what}: {msg}")


# --- the process-wide heap limit -------------------------------------------------------------
# `PRAGMA hard_heap_limit` can only lower the limit, never lift it again, and it drags the
# soft limit down with it; the C calls behind it can do both, so they are used when the SQLite
# library Python loaded exports them (and the limit is simply skipped when it does not).

_HeapCalls = tuple[Callable[[int], int], Callable[[int], int], Callable[[], int]]


def _heap_calls() -> _HeapCalls | None:
    """(hard_heap_limit64, soft_heap_limit64, memory_used) of Python's SQLite, if reachable."""
    import _sqlite3

    names = [getattr(_sqlite3, "__file__", None)]
    if sys.platform == "win32":
        names.append("sqlite3.dll")
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            calls = (
                lib.sqlite3_hard_heap_limit64,
                lib.sqlite3_soft_heap_limit64,
                lib.sqlite3_memory_used,
            )
        except (OSError, AttributeError, TypeError):
            continue
        for call in calls:
            call.restype = ctypes.c_int64
        calls[0].argtypes = calls[1].argtypes = [ctypes.c_int64]
        return calls
    return None


_HEAP = _heap_calls()


@contextmanager
def _heap_limit(extra: int) -> Iterator[None]:
    """Let SQLite allocate at most `extra` more bytes, process-wide, inside the block."""
    if _HEAP is None:
        yield
        return
    hard, soft, used = _HEAP
    old_hard, old_soft = hard(-1), soft(-1)  # a negative argument only reads
    limit = used() + extra
    hard(min(limit, old_hard) if old_hard > 0 else limit)
    try:
        yield
    finally:
        hard(old_hard)
        soft(old_soft)
