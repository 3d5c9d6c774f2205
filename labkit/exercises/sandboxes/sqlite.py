"""The learner-SQL sandbox: one statement, run in a child process behind walls enforced from
outside (`walls`: killed at the time limit, capped in memory), read-only unless a checker says
otherwise, with SQL functions allow-listed; every way it can fail becomes a one-line `Wrong`.

The learner's statement runs on a copy of the checker's database (serialised into the child);
a statement the checker lets write hands its copy back. Checkers run their own SQL outside, so
an error there is a labkit bug and surfaces as one.
"""

from __future__ import annotations

import ctypes
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from typing import Any

import labkit.walls as walls
from labkit.exercises.kit import Wrong

# A right answer needs a few thousand SQLite VM steps; these bound a wrong one. The step
# budget stops a runaway loop deterministically; the deadline stops steps that are each slow
# (big DISTINCTs) from inside; one call SQLite cannot interrupt (a huge printf padding) is
# ended from outside by `walls`. The value cap and the heap limit keep one query from taking
# the machine's memory (a padded answer once peaked at 1 GB).
STEP_BUDGET = 5_000_000
SECONDS = walls.SECONDS
VALUE_BYTES = 1_000_000
HEAP_BYTES = 64 * 2**20
MAX_ROWS = 10

# The SQL functions a learner's statement may call: SQLite's core scalar, aggregate, window,
# math and JSON functions. Anything else (fts3_tokenizer, load_extension, ...) is refused.
ALLOWED_FUNCTIONS = frozenset(
    """abs changes char coalesce concat concat_ws format glob hex ifnull iif instr last_insert_rowid
    length like likelihood likely lower ltrim max min nullif octet_length printf quote random
    randomblob replace round rtrim sign soundex substr substring total_changes trim typeof
    unhex unicode unlikely upper zeroblob
    avg count group_concat string_agg sum total
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
    nth_value
    acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10
    log2 mod pi pow power radians sin sinh sqrt tan tanh trunc
    date time datetime julianday unixepoch strftime timediff
    json json_array json_array_length json_extract json_insert json_object json_patch
    json_remove json_replace json_set json_type json_valid json_quote json_group_array
    json_group_object json_each json_tree""".split()
)
_READ_ONLY = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
_NEVER = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH, sqlite3.SQLITE_PRAGMA}


def read_only(action: int, arg1: Any = None, arg2: Any = None, *_: Any) -> int:
    """SQLite authorizer: reading and allow-listed functions; every write, PRAGMA or ATTACH and
    any other function denied."""
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_OK if str(arg2).lower() in ALLOWED_FUNCTIONS else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _READ_ONLY else sqlite3.SQLITE_DENY


def schema_writes(action: int, arg1: Any = None, arg2: Any = None, *_: Any) -> int:
    """SQLite authorizer for a statement a checker lets write (on the child's copy): anything
    but PRAGMA, ATTACH and functions off the allow-list."""
    if action == sqlite3.SQLITE_FUNCTION:
        return read_only(action, arg1, arg2)
    return sqlite3.SQLITE_DENY if action in _NEVER else sqlite3.SQLITE_OK


def code_only(text: str) -> str:
    """`text` with the contents of string literals blanked, for keyword and `?` checks."""
    return re.sub(r"'(?:[^']|'')*'", "''", text)


def require_params(
    text: str,
    names: Iterable[str],
    what: str,
    optional: Iterable[str] = (),
    advice: Mapping[str, str] | None = None,
) -> None:
    """`Wrong` unless `text` uses every `:name` of `names` as a parameter: a name written in
    quotes (':seen' is text; `optional` ones too) or with another prefix ($shard, @shard) is
    named as that mistake; a missing one gets `advice[name]`, if given, on where it goes."""
    code = code_only(text)
    names = tuple(names)
    for name in (*names, *optional):
        if re.search(rf"'\s*:{name}\s*'", text):
            raise Wrong(
                f"{what} writes ':{name}' in quotes: that is the text ':{name}', not the "
                f"parameter; drop the quotes"
            )
        other = re.search(rf"(?<!\w)[$@]{name}\b", code)
        if other:
            raise Wrong(f"{what} writes {other.group(0)}; a parameter here is written :{name}")
        if name in names and not re.search(rf"(?<![:\w]):{name}\b", code):
            where = (advice or {}).get(name, f"use the parameter :{name} where its value belongs")
            raise Wrong(f"{what} never uses :{name}; {where}")


def strip_comments(sql: str) -> str:
    """`sql` with its `--` and `/* */` comments replaced by a space, in one pass (linear time);
    comment markers inside string literals or quoted names are text and stay."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`[":
            close = "]" if ch == "[" else ch
            j = sql.find(close, i + 1)
            while j != -1 and close != "]" and sql.startswith(close * 2, j):
                j = sql.find(close, j + 2)  # a doubled quote is an escaped quote
            j = n - 1 if j == -1 else j
            out.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            out.append(" ")
            i = n if j == -1 else j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            out.append(" ")
            i = n if j == -1 else j + 2
        else:
            j = i
            while j < n and sql[j] not in "'\"`[-/":
                j += 1
            out.append(sql[i : max(j, i + 1)])
            i = max(j, i + 1)
    return "".join(out)


def strip_sql(sql: Any, what: str) -> str:
    """The learner's SQL without comments and trailing `;`; refuses non-strings and batches."""
    if not isinstance(sql, str):
        raise Wrong(f"give {what} as a Python string of SQL (you gave a {type(sql).__name__})")
    text = strip_comments(sql).strip()
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
    """Run the learner's `sql` once behind every wall; return at most `MAX_ROWS + 1` rows.

    Read-only unless `writes` (then `conn` receives what the statement wrote). Whatever stops
    it becomes a `Wrong` naming `what`; `conn` is otherwise left exactly as it was.
    """
    return run_each(conn, sql, [params], what, writes=writes)[0]


def run_each(
    conn: sqlite3.Connection,
    sql: str,
    params_list: Sequence[tuple | Mapping],
    what: str = "your query",
    *,
    writes: bool = False,
) -> list[list[tuple]]:
    """`run` for each parameter set in turn, all in one child and under one time limit."""
    try:
        image: bytes | None = conn.serialize()
    except sqlite3.OperationalError:  # a database with no page yet has nothing to copy
        image = None

    def task() -> tuple[list[list[tuple]] | str, bytes | None]:
        child = sqlite3.connect(":memory:", isolation_level=None)
        if image is not None:
            child.deserialize(image)
        if sys.version_info >= (3, 12):  # setconfig: switch the FTS3 tokenizer interface off
            child.setconfig(sqlite3.SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, False)
        _cap_heap(HEAP_BYTES)
        try:
            rows = _run_guarded(child, sql, params_list, what, writes)
        except Wrong as exc:
            return str(exc), None
        return rows, child.serialize() if writes else None

    try:
        rows, written = walls.run_walled(task, seconds=SECONDS + 0.25)
    except walls.TimeLimit:
        raise Wrong(
            f"{what} ran longer than {SECONDS:g} s in one call SQLite could not interrupt, "
            "so the check stopped it"
        ) from None
    except walls.MemoryLimit:
        raise Wrong(
            f"{what} needed more than {walls.MEMORY_BYTES // 2**20} MB of memory; stopped"
        ) from None
    if isinstance(rows, str):
        raise Wrong(rows)
    if written is not None:
        conn.deserialize(written)
    return rows


def _run_guarded(
    conn: sqlite3.Connection,
    sql: str,
    params_list: Sequence[tuple | Mapping],
    what: str,
    writes: bool,
) -> list[list[tuple]]:
    """In the child: the statement for each parameter set under the in-SQLite limits."""
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

    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_BYTES)
    conn.set_progress_handler(stop, 1)
    conn.set_authorizer(schema_writes if writes else read_only)
    out = []
    for params in params_list:
        try:
            with closing(conn.execute(sql, params)) as cursor:
                out.append(cursor.fetchmany(MAX_ROWS + 1))
        except (sqlite3.Error, ValueError, OverflowError, MemoryError) as exc:
            raise _explain_failure(exc, what, tripped) from exc
    return out


def _explain_failure(exc: Exception, what: str, tripped: str) -> Wrong:
    """One line for the learner: which limit stopped `what`, or what SQLite said."""
    if tripped == "steps":
        return Wrong(
            f"{what} ran too long: SQLite stopped it after {STEP_BUDGET:,} steps "
            "(a recursive CTE with no stopping condition?)"
        )
    if tripped == "time":
        return Wrong(f"{what} ran longer than {SECONDS:g} s, so SQLite stopped it")
    msg = str(exc)
    if isinstance(exc, MemoryError) or "out of memory" in msg:
        return Wrong(f"{what} needed more than {HEAP_BYTES // 2**20} MB of memory; stopped")
    if "too big" in msg:
        return Wrong(f"{what} built a string or blob over {VALUE_BYTES:,} bytes; stopped")
    if "one statement at a time" in msg:
        return Wrong(f"{what} must be a single statement; yours has more than one")
    if "prohibited" in msg or "not authorized" in msg:
        return Wrong(
            f"{what} may only read and call SQLite's built-in functions: SQLite refused it ({msg})"
        )
    return Wrong(f"SQLite could not run {what}: {msg if len(msg) <= 300 else msg[:299] + '…'}")


# --- the heap limit, in the child ----------------------------------------------------------
# `PRAGMA hard_heap_limit` drags the soft limit down with it; the C call behind it sets the hard
# limit alone. It is used when the SQLite library Python loaded exports it (else skipped: the
# child's address-space cap in `walls` still holds).

_HeapCalls = tuple[Callable[[int], int], Callable[[], int]]  # (set the hard limit, bytes used)


def _heap_calls() -> _HeapCalls | None:
    """(hard_heap_limit64, memory_used) of Python's SQLite, if reachable."""
    import _sqlite3

    names = [getattr(_sqlite3, "__file__", None)]
    if sys.platform == "win32":
        names.append("sqlite3.dll")
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            calls = (lib.sqlite3_hard_heap_limit64, lib.sqlite3_memory_used)
        except (OSError, AttributeError, TypeError):
            continue
        for call in calls:
            call.restype = ctypes.c_int64
        calls[0].argtypes = [ctypes.c_int64]
        return calls
    return None


_HEAP = _heap_calls()


def _cap_heap(extra: int) -> None:
    """In the child: let SQLite allocate at most `extra` more bytes (the child exits after)."""
    if _HEAP is not None:
        hard, used = _HEAP
        hard(used() + extra)
