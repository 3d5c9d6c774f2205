"""Read-only views of a workbook SQLite file through sqlite-utils: what is actually on disk.

Notebooks use these to show the durable state a restarted process resumes from, rather
than trusting an object's word for it. SQLite only: a PostgreSQL connection is refused in one
line (`labkit.backend.require`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import sqlite_utils

from labkit import backend
from labkit.db import connect_readonly


def _database(source: sqlite3.Connection | str | Path, function: str) -> sqlite_utils.Database:
    """The file at `source` opened read-only, or the SQLite connection `source` itself."""
    if isinstance(source, str | Path):
        return sqlite_utils.Database(connect_readonly(source))
    backend.require(source, f"storeview.{function}", "sqlite")
    return sqlite_utils.Database(source)


def overview(source: sqlite3.Connection | str | Path) -> pd.DataFrame:
    """Every table in the file: its row count and columns (internal sqlite_ tables skipped)."""
    db = _database(source, "overview")
    rows = [
        {"table": t.name, "rows": t.count, "columns": ", ".join(c.name for c in t.columns)}
        for t in db.tables
        if not t.name.startswith("sqlite_")
    ]
    return pd.DataFrame(rows, columns=["table", "rows", "columns"])


def table(source: sqlite3.Connection | str | Path, name: str) -> pd.DataFrame:
    """All rows of one table. `name` must be a table in the file (never spliced unchecked)."""
    db = _database(source, "table")
    if name not in db.table_names():
        raise KeyError(f"no table {name!r}; the file has: {', '.join(sorted(db.table_names()))}")
    columns = [c.name for c in db[name].columns]
    return pd.DataFrame(list(db[name].rows), columns=columns)


@contextmanager
def uncut(width: int = 160) -> Iterator[None]:
    """Inside the block, tables display every cell in full: pandas otherwise cuts text longer
    than 50 characters to `...` (the `columns` of `overview`), and wraps wide tables early."""
    with pd.option_context("display.max_colwidth", None, "display.width", width):
        yield
