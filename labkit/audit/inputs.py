"""Reading a reader's own files for the audit: CSV with a header, JSON Lines, a SQLite table, or
a PostgreSQL table named by a DSN (`PgSource`, read through `PgSnapshot`).

Rows stream one at a time (a file of any size costs one row of memory). A column mapping
(`status=state,at=updated_at`) names the reader's columns for the audit's. A bad row raises one
`InputError` naming the file, the row and the column, so the command can exit 2 and write
nothing.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlite_utils

from labkit.db import connect_readonly
from labkit.pg.instance import PgUnavailable, connect, mask_dsn
from labkit.validation import INT64_MAX, INT64_MIN, is_finite_real, is_int, shown

SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
PG_SCHEMES = ("postgresql://", "postgres://")
PG_FETCH_ROWS = 5000  # rows per round trip of a server-side cursor
PG_LOCK_TIMEOUT = "5s"  # a table someone holds ACCESS EXCLUSIVE on fails the read, not hangs it
PG_TIME_TYPES = ("timestamp with time zone", "timestamp without time zone", "date")


class InputError(ValueError):
    """A file the audit cannot read: one line naming the file, the row (1 = first data row;
    0 = the header or the file itself) and the column."""

    def __init__(self, path: str | Path, row: int, column: str, problem: str) -> None:
        self.path, self.row, self.column, self.problem = str(path), row, column, problem
        where = f"row {row}, " if row else ""
        super().__init__(f"{path}: {where}column {column!r}: {problem}")


class UsageError(ValueError):
    """A bad option (a `--map` naming no audit column, an empty `--terminal`): one line."""


@dataclass(frozen=True)
class Source:
    """One input: a CSV or JSON Lines file, or a table of a SQLite file (`table` set)."""

    path: Path
    table: str | None = None


def parse_mapping(text: str | None, known: Sequence[str]) -> dict[str, str]:
    """`--map status=state,at=updated_at` as {audit column: reader's column}; refuses a
    column the audit does not read, so a typo is named instead of ignored."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        ours, sep, theirs = part.partition("=")
        ours, theirs = ours.strip(), theirs.strip()
        if not sep or not ours or not theirs:
            raise UsageError(f"--map: {part.strip()!r} is not COLUMN=YOUR_COLUMN")
        if ours not in known:
            raise UsageError(f"--map: {ours!r} is not one of the columns {', '.join(known)}")
        out[ours] = theirs
    return out


def _is_sqlite(path: Path) -> bool:
    if path.suffix.lower() in SQLITE_SUFFIXES:
        return True
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def read_rows(
    source: Source,
    columns: Sequence[str],
    mapping: Mapping[str, str] | None = None,
    order_by: str | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield `(row number, {audit column: raw value})` for each row of `source`, one at a time.

    Every name in `columns` must be present (under its mapped name): a missing one raises
    `InputError` at row 0 before any row is yielded. A SQLite table is read in `order_by` order
    (an audit column), then by rowid.
    """
    mapping = dict(mapping or {})
    theirs = {c: mapping.get(c, c) for c in columns}
    path = source.path
    if not path.is_file():
        raise InputError(path, 0, "-", "no such file")
    if source.table is not None or _is_sqlite(path):
        yield from _sqlite_rows(source, theirs, order_by)
    elif path.suffix.lower() in JSONL_SUFFIXES:
        yield from _jsonl_rows(path, theirs)
    else:
        yield from _csv_rows(path, theirs)


def _csv_rows(path: Path, theirs: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(path, 0, next(iter(theirs)), "the file is empty (no header)") from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InputError(path, 0, "-", f"unreadable header: {exc}") from None
        position = {name.strip(): i for i, name in enumerate(header)}
        for ours, name in theirs.items():
            if name not in position:
                raise InputError(path, 0, name, f"missing from the header (the {ours} column)")
        index = {ours: position[name] for ours, name in theirs.items()}
        row_no = 0
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except (csv.Error, UnicodeDecodeError) as exc:
                raise InputError(path, row_no + 1, "-", f"unreadable line: {exc}") from None
            row_no += 1
            if not cells:
                continue
            if len(cells) != len(header):
                raise InputError(
                    path, row_no, "-", f"{len(cells)} cells, the header has {len(header)}"
                )
            yield row_no, {ours: cells[i] for ours, i in index.items()}


def _jsonl_rows(path: Path, theirs: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        row_no = 0
        while True:
            try:
                line = f.readline()
            except UnicodeDecodeError as exc:
                raise InputError(path, row_no + 1, "-", f"not UTF-8: {exc}") from None
            if not line:
                return
            if not line.strip():
                continue
            row_no += 1
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(path, row_no, "-", f"not JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise InputError(path, row_no, "-", "not a JSON object")
            yield row_no, {ours: obj.get(name) for ours, name in theirs.items()}


def _sqlite_rows(
    source: Source, theirs: dict[str, str], order_by: str | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    path, table = source.path, source.table
    if table is None:
        raise InputError(path, 0, "-", "a SQLite file needs a table name (--table)")
    try:
        db = sqlite_utils.Database(connect_readonly(path))
    except (sqlite3.Error, FileNotFoundError) as exc:
        raise InputError(path, 0, "-", f"not a readable SQLite file: {exc}") from None
    try:
        t = db.table(table)
        if not t.exists():
            raise InputError(path, 0, "-", f"no table {table!r}")
        present = set(t.columns_dict)
        for ours, name in theirs.items():
            if name not in present:
                raise InputError(path, 0, name, f"missing from table {table!r} (the {ours} column)")
        order = f"[{theirs[order_by]}], rowid" if order_by else "rowid"
        select = ", ".join(f"[{name}]" for name in theirs.values())
        row_no = 0
        for record in t.rows_where(select=select, order_by=order):
            row_no += 1
            yield row_no, {ours: record[name] for ours, name in theirs.items()}
    finally:
        db.conn.close()


# --- PostgreSQL ------------------------------------------------------------------------------


def is_dsn(text: str) -> bool:
    """Whether an input names a PostgreSQL server (a `postgresql://` URI) rather than a file."""
    return text.startswith(PG_SCHEMES)


@dataclass(frozen=True)
class PgSource:
    """A table on a PostgreSQL server: `dsn` and `table` (`schema.table` or a bare name, found
    on the server's search path)."""

    dsn: str
    table: str

    @property
    def label(self) -> str:
        """How messages name it: the DSN, password masked, and the table."""
        return f"{mask_dsn(self.dsn)} table {self.table}"


class PgSnapshot:
    """One read-only REPEATABLE READ transaction on one server, so every table read through it
    comes from one snapshot. Each table is one plain SELECT through a server-side cursor, in
    time order: it takes ACCESS SHARE on the table and nothing else, which blocks no writer
    (only ALTER/DROP/TRUNCATE/VACUUM FULL wait for it). Use it as a context manager."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: Any = None
        self._cursors = 0

    def __enter__(self) -> PgSnapshot:
        import psycopg

        try:
            conn = connect(self.dsn)
        except PgUnavailable as exc:
            raise UsageError(str(exc)) from None
        # psycopg opens the transaction with BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        self.conn = conn
        return self

    def __exit__(self, *exc: object) -> None:
        import psycopg

        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                with contextlib.suppress(psycopg.Error):  # a broken connection: close it anyway
                    conn.rollback()  # a read-only transaction: nothing to keep
            finally:
                conn.close()

    def rows(
        self,
        source: PgSource,
        columns: Sequence[str],
        mapping: Mapping[str, str] | None = None,
        order_by: str | None = None,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """`read_rows` for a table of this server: every cell as text (a timestamp column as
        seconds since the epoch, a time without a zone read as UTC), in `order_by` order, then
        by the row's place in the table. Row numbers count rows in that order."""
        import psycopg
        from psycopg import sql

        if self.conn is None:
            raise RuntimeError("PgSnapshot.rows: use the snapshot inside its `with` block")
        theirs = {c: dict(mapping or {}).get(c, c) for c in columns}
        label = source.label
        try:
            relation, types, kind = self._describe(source)
            for ours, name in theirs.items():
                if name not in types:
                    raise InputError(
                        label, 0, name, f"missing from table {source.table!r} (the {ours} column)"
                    )
            # each cell renamed c0, c1 ..., so ORDER BY below names the stored column, not its text
            cells = [
                sql.SQL(
                    "(extract(epoch FROM {})::float8)::text AS {}"
                    if types[name] in PG_TIME_TYPES
                    else "{}::text AS {}"
                ).format(sql.Identifier(name), sql.Identifier(f"c{i}"))
                for i, name in enumerate(theirs.values())
            ]
            order: list[sql.Composable] = [sql.Identifier(theirs[order_by])] if order_by else []
            if kind in ("r", "m"):  # a table's rows in their stored order, as SQLite's rowid
                order.append(sql.SQL("ctid"))
            query = sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(cells), relation)
            if order:
                query += sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(order))
            self._cursors += 1
            cursor = self.conn.cursor(name=f"labkit_audit_{self._cursors}")
            cursor.itersize = PG_FETCH_ROWS
            cursor.execute(query)
            names = list(theirs)
            row_no = 0
            for record in cursor:
                row_no += 1
                yield row_no, dict(zip(names, record, strict=True))
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise InputError(label, 0, "-", f"the server refused the read: {reason}") from None

    def _describe(self, source: PgSource) -> tuple[Any, dict[str, str], str]:
        """The table's quoted name, its columns' types and its kind (pg_class.relkind);
        `InputError` if there is no such table or it may not be read."""
        from psycopg import sql

        parts = source.table.split(".", 1)
        relation = sql.Identifier(*parts)
        conn = self.conn
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(PG_LOCK_TIMEOUT)))
        found = conn.execute(
            "SELECT c.oid::int8, c.relkind::text, has_table_privilege(c.oid, 'SELECT')"
            " FROM pg_class c WHERE c.oid = to_regclass(%s)",
            (relation.as_string(conn),),
        ).fetchone()
        if found is None:
            raise InputError(source.label, 0, "-", f"no table {source.table!r}")
        oid, kind, readable = found
        if not readable:
            raise InputError(source.label, 0, "-", f"no SELECT privilege on {source.table!r}")
        types = dict(
            conn.execute(
                "SELECT attname::text, format_type(atttypid, NULL) FROM pg_attribute"
                " WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
                (oid,),
            ).fetchall()
        )
        return relation, types, kind


class Inputs:
    """Opens each input once: files through `read_rows`, tables of one DSN through one
    `PgSnapshot` (so a status table and a checkpoint table come from one snapshot). A context
    manager; every transaction ends when it does."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._snapshots: dict[str, PgSnapshot] = {}

    def __enter__(self) -> Inputs:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def rows(
        self,
        source: Source | PgSource,
        columns: Sequence[str],
        mapping: Mapping[str, str] | None = None,
        order_by: str | None = None,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """`read_rows` for a file, `PgSnapshot.rows` for a table (connecting on first use)."""
        if isinstance(source, Source):
            return read_rows(source, columns, mapping, order_by)
        snapshot = self._snapshots.get(source.dsn)
        if snapshot is None:
            snapshot = self._stack.enter_context(PgSnapshot(source.dsn))
            self._snapshots[source.dsn] = snapshot
        return snapshot.rows(source, columns, mapping, order_by)


def label(source: Source | PgSource) -> str:
    """How messages name an input: a file's path, or a DSN (password masked) and table."""
    return str(source.path) if isinstance(source, Source) else source.label


# --- one cell's value ------------------------------------------------------------------------


def cell_text(
    path: str | Path, row: int, column: str, value: Any, *, optional: bool = False
) -> str:
    """A non-empty text cell (a number is taken as its text); "" when `optional` and empty."""
    if type(value) is str and (text := value.strip()):
        return text
    if value is None or (isinstance(value, str) and not value.strip()):
        if optional:
            return ""
        raise InputError(path, row, column, "missing or empty")
    if isinstance(value, str):
        return value.strip()
    if is_int(value):
        return str(value)
    raise InputError(path, row, column, f"expected text, got {shown(value)}")


def cell_int(
    path: str | Path, row: int, column: str, value: Any, *, optional: bool = False
) -> int | None:
    """A whole number in the 64-bit range both backends store (text or JSON number)."""
    if type(value) is str:
        try:
            number = int(value)
        except ValueError:
            pass
        else:
            if INT64_MIN <= number <= INT64_MAX:
                return number
    if value is None or (isinstance(value, str) and not value.strip()):
        if optional:
            return None
        raise InputError(path, row, column, "missing or empty")
    if isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            raise InputError(path, row, column, f"not a whole number: {shown(value)}") from None
    elif is_int(value):
        number = value
    else:
        raise InputError(path, row, column, f"not a whole number: {shown(value)}")
    if not INT64_MIN <= number <= INT64_MAX:
        raise InputError(path, row, column, f"outside the 64-bit range: {shown(number)}")
    return number


def cell_time(path: str | Path, row: int, column: str, value: Any) -> float:
    """A timestamp as seconds: a number, or ISO-8601 text (a time without a zone is UTC)."""
    if type(value) is str:
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
    if is_finite_real(value):
        return float(value)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
            raise InputError(path, row, column, f"not a finite time: {shown(value)}")
        try:
            stamp = datetime.fromisoformat(text)
        except ValueError:
            raise InputError(
                path, row, column, f"not a number or an ISO-8601 time: {shown(value)}"
            ) from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp.timestamp()
    raise InputError(path, row, column, f"not a number or an ISO-8601 time: {shown(value)}")
