"""`python -m labkit audit log | catalog | loop` (the options: labkit/__main__.py): run an audit.

An input is a file, or a PostgreSQL DSN with `--table` (`--checkpoints-table`); the tables of
one DSN are read in one read-only transaction (`labkit.audit.inputs.Inputs`). Exit 0 clean, 1
findings; bad input raises `InputError` (or `UsageError` for a bad option), which the command
line turns into one stderr line and exit 2 before anything is printed; so does a loop that
cannot be imported, raises or runs past its limits (`LoopAuditError`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from labkit.audit.catalog import EVENT_COLUMNS, audit_events, parse_events
from labkit.audit.findings import Report, render_json, render_text
from labkit.audit.inputs import (
    Inputs,
    PgSource,
    Source,
    UsageError,
    is_dsn,
    label,
    parse_mapping,
)
from labkit.audit.log import (
    CHECKPOINT_COLUMNS,
    STATUS_COLUMNS,
    audit_rows,
    parse_checkpoints,
    parse_status,
)
from labkit.audit.loop import audit_loop
from labkit.pg.instance import mask_dsn


def source(given: str | Path, table: str | None, option: str = "--table") -> Source | PgSource:
    """An input as the command line names it: a `postgresql://` DSN (which needs `option`, its
    table) or a file."""
    text = str(given)
    if not is_dsn(text):
        return Source(Path(given), table)
    if not table:
        raise UsageError(f"{mask_dsn(text)}: a PostgreSQL input needs its table ({option} NAME)")
    return PgSource(text, table)


def run(args: argparse.Namespace) -> tuple[Report, str]:
    """The report and its rendering; raises `InputError` or `UsageError` on bad input."""
    if args.audit == "log":
        terminal = tuple(t.strip() for t in args.terminal.split(",") if t.strip())
        if not terminal:
            raise UsageError("--terminal: name at least one terminal status")
        status = source(args.status, args.table)
        ckpt = source(args.checkpoints, args.checkpoints_table, "--checkpoints-table")
        status_map = parse_mapping(args.map, STATUS_COLUMNS)
        ckpt_map = parse_mapping(args.checkpoints_map, CHECKPOINT_COLUMNS)
        with Inputs() as inputs:  # what `audit_log` does, with a DSN's tables in one snapshot
            rows = inputs.rows(status, STATUS_COLUMNS, status_map, order_by="at")
            ckpts = inputs.rows(ckpt, CHECKPOINT_COLUMNS, ckpt_map, order_by="at")
            report = audit_rows(
                parse_status(rows, label(status)),
                parse_checkpoints(ckpts, label(ckpt)),
                terminal,
                args.delivered,
            )
    elif args.audit == "loop":
        report = audit_loop(
            args.target,
            n=args.n,
            window=args.window,
            seconds=args.seconds,
            service=args.service,
            seed=args.seed,
        )
    else:
        events = source(args.events, args.table)
        mapping = parse_mapping(args.map, EVENT_COLUMNS)
        with Inputs() as inputs:
            rows = inputs.rows(events, EVENT_COLUMNS, mapping, order_by="at")
            report = audit_events(parse_events(rows, label(events)))
    return report, render_json(report) if args.json else render_text(report)


# Head reads drawn per observer in `audit catalog --figure`; the falls are drawn whatever this.
READS_DRAWN = 20_000


def figure_inputs(args: argparse.Namespace) -> list[tuple[str, float, int]] | None:
    """What an audit's figure needs beyond its report: for `catalog`, each observer's head reads
    (observer, at, version), read again from the file, the first `READS_DRAWN` of each."""
    if args.audit != "catalog":
        return None
    events = source(args.events, args.table)
    kept: dict[str, int] = {}
    reads = []
    with Inputs() as inputs:
        rows = inputs.rows(events, EVENT_COLUMNS, parse_mapping(args.map, EVENT_COLUMNS), "at")
        for e in parse_events(rows, label(events)):
            if e.event != "head" or e.version is None or kept.get(e.observer, 0) >= READS_DRAWN:
                continue
            kept[e.observer] = kept.get(e.observer, 0) + 1
            reads.append((e.observer, e.at, e.version))
    return reads
