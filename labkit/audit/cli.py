"""`python -m labkit audit log | catalog` (the options: labkit/__main__.py): run an audit.

Exit 0 clean, 1 findings; bad input raises `InputError` (or `UsageError` for a bad option),
which the command line turns into one stderr line and exit 2 before anything is printed.
"""

from __future__ import annotations

import argparse

from labkit.audit.catalog import EVENT_COLUMNS, audit_catalog
from labkit.audit.findings import Report, render_json, render_text
from labkit.audit.inputs import Source, UsageError, parse_mapping
from labkit.audit.log import CHECKPOINT_COLUMNS, STATUS_COLUMNS, audit_log


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
    else:
        report = audit_catalog(
            Source(args.events, args.table), mapping=parse_mapping(args.map, EVENT_COLUMNS)
        )
    return report, render_json(report) if args.json else render_text(report)
