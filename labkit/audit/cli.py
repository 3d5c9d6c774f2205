"""`python -m labkit audit log | catalog | loop` (the options: labkit/__main__.py): run an audit.

Exit 0 clean, 1 findings; bad input raises `InputError` (or `UsageError` for a bad option),
which the command line turns into one stderr line and exit 2 before anything is printed; so
does a loop that cannot be imported, raises or runs past its limits (`LoopAuditError`).
"""

from __future__ import annotations

import argparse

from labkit.audit.catalog import EVENT_COLUMNS, audit_catalog, parse_events
from labkit.audit.findings import Report, render_json, render_text
from labkit.audit.inputs import Source, UsageError, parse_mapping, read_rows
from labkit.audit.log import CHECKPOINT_COLUMNS, STATUS_COLUMNS, audit_log
from labkit.audit.loop import audit_loop


def run(args: argparse.Namespace) -> tuple[Report, str]:
    """The report and its rendering; raises `InputError` or `UsageError` on bad input."""
    if args.audit == "log":
        terminal = tuple(t.strip() for t in args.terminal.split(",") if t.strip())
        if not terminal:
            raise UsageError("--terminal: name at least one terminal status")
        report = audit_log(
            Source(args.status, args.table),
            Source(args.checkpoints, args.checkpoints_table),
            status_map=parse_mapping(args.map, STATUS_COLUMNS),
            checkpoint_map=parse_mapping(args.checkpoints_map, CHECKPOINT_COLUMNS),
            terminal=terminal,
            delivered=args.delivered,
        )
    elif args.audit == "loop":
        report = audit_loop(args.target, n=args.n, window=args.window, seconds=args.seconds)
    else:
        report = audit_catalog(
            Source(args.events, args.table), mapping=parse_mapping(args.map, EVENT_COLUMNS)
        )
    return report, render_json(report) if args.json else render_text(report)


# Head reads drawn per observer in `audit catalog --figure`; the falls are drawn whatever this.
READS_DRAWN = 20_000


def figure_inputs(args: argparse.Namespace) -> list[tuple[str, float, int]] | None:
    """What an audit's figure needs beyond its report: for `catalog`, each observer's head reads
    (observer, at, version), read again from the file, the first `READS_DRAWN` of each."""
    if args.audit != "catalog":
        return None
    source = Source(args.events, args.table)
    rows = read_rows(source, EVENT_COLUMNS, parse_mapping(args.map, EVENT_COLUMNS), order_by="at")
    kept: dict[str, int] = {}
    reads = []
    for e in parse_events(rows, str(source.path)):
        if e.event == "head" and e.version is not None and kept.get(e.observer, 0) < READS_DRAWN:
            kept[e.observer] = kept.get(e.observer, 0) + 1
            reads.append((e.observer, e.at, e.version))
    return reads
