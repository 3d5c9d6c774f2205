"""A finished run's store read back from disk, after the loop closed it.

The ballot designs (`ballot`, `fenced`, `pipelined`) keep the catalog log: it must run 0, 1,
2, ... with each version built on the one before (`labkit.catalog.versions.verify`). The
others (`callback`, `lww`, `cas`) keep one head row that each write overwrites, so no history
is left on disk to read: what can be read back is that row, and the reader process's record of
every change it saw; a store that stayed whole only ever climbed.
"""

from __future__ import annotations

from dataclasses import dataclass

import labkit.catalog.versions as catalog
import labkit.remote.head_row as head_row
from labkit.db import connect_readonly
from labkit.designs.registry import SPECS
from labkit.remote.driver import RemoteRun

# One overwritten head row, no log: the designs with no ballot store (`callback`, `lww`, `cas`).
ROW_DESIGNS: tuple[str, ...] = tuple(s.key for s in SPECS if not s.stored)


@dataclass(frozen=True)
class ReadBack:
    """What a run's store read back as: `kind` "log" or "head row", its head, whether it is
    whole (a chained log; a head row the reader never saw fall), and one line saying so."""

    design: str
    kind: str
    head: int
    whole: bool
    text: str


def read_back(result: RemoteRun) -> ReadBack:
    """Open `result.store` read-only and check it (see the module docstring). `ValueError` if
    the run kept no store file (a temporary one, or PostgreSQL)."""
    if result.store is None:
        raise ValueError(f"the {result.design!r} run kept no store file to read back")
    conn = connect_readonly(result.store)
    try:
        if result.design not in ROW_DESIGNS:
            try:
                head = catalog.verify(conn)
            except catalog.CatalogCorruptError as exc:
                return ReadBack(result.design, "log", catalog.head(conn), False, f"broken: {exc}")
            return ReadBack(result.design, "log", head, True, f"1..{head} chained")
        head, _ = head_row.read(conn)
    finally:
        conn.close()
    changes = result.reader_changes
    falls = sum(c.after < c.before for c in changes)
    if falls:
        text = f"row at v{head}; fell {falls} time{'s' if falls != 1 else ''}"
        return ReadBack(result.design, "head row", head, False, text)
    steps = "steps of 1" if all(c.after == c.before + 1 for c in changes) else "climbs only"
    return ReadBack(result.design, "head row", head, True, f"row at v{head}; {steps}")
