"""The child `labkit.catalog.crashlab.kill_loop` starts and kills: one step of a loop on a file.

Run as ``python -m labkit.catalog.crash_child DB POINT WINDOW TOOLS_JSON``. It prints the ballot it
reserved (a JSON list), then ``at POINT`` once it reaches the kill point, and waits there for
the parent to kill it. Kill points: ``after_reserve`` (the ballot is durable, the planner
call is "in flight") and ``mid_commit`` (inside `apply`'s transaction, after the catalog row
was inserted and before COMMIT: SQLite's trace callback fires as the last statement starts).
If it is not killed (its stdin closes instead), it exits with `NOT_KILLED` and never commits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from labkit.catalog.loop import WatermarkLoop
from labkit.db import connect

POINTS = ("after_reserve", "mid_commit")
NOT_KILLED = 3
# The last statement of `apply`'s transaction; the child stops as it starts.
_LAST_COMMIT_STATEMENT = "INSERT INTO WM_RESPONSES"


def wait_to_be_killed(point: str) -> None:
    """Tell the parent we are at `point`, then block until it kills us."""
    print(f"at {point}", flush=True)
    sys.stdin.readline()
    os._exit(NOT_KILLED)  # the parent went away without killing us: leave, commit nothing


def run(db: str, point: str, window: int, tools: list[object]) -> None:
    """Reserve a ballot on `db`, report it, and stop at `point`."""
    loop = WatermarkLoop(connect(db), window=window)
    ballot = loop.reserve()
    print(json.dumps([ballot.ballot_id, ballot.watermark, ballot.base_version]), flush=True)
    if point == "after_reserve":
        wait_to_be_killed(point)

    def stop_before_commit(sql: str) -> None:
        if sql.lstrip().upper().startswith(_LAST_COMMIT_STATEMENT):
            wait_to_be_killed(point)

    loop.conn.set_trace_callback(stop_before_commit)
    loop.apply(ballot.answer(tools))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m labkit.catalog.crash_child")
    parser.add_argument("db")
    parser.add_argument("point", choices=POINTS)
    parser.add_argument("window", type=int)
    parser.add_argument("tools", type=json.loads)
    args = parser.parse_args(argv)
    run(args.db, args.point, args.window, args.tools)


if __name__ == "__main__":
    main()
