"""The crash lab for pipelined ballots: kill the loop at any SQL statement, restart it from its file.

`crash_and_resume` runs a pipelined loop on a SQLite file with a planner that answers in a
seeded, shuffled order (so early answers are held), and stops the loop dead inside its k-th
statement: SQLite interrupts the statement, the open transaction is lost as in a kill, and the
process's memory is thrown away. A new loop then opens the same file and finishes the run. An
independent reader on its own connection looks at the head after every step, before and after
the kill, so the reader's promise (never a fall, at most one version per step) is checked
across it. `statement_count` says how many statements an unbroken run takes, so a test can
kill at every one of them.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import labkit.catalog.hold as hold
import labkit.catalog.versions as catalog
from labkit import db
from labkit.designs.design import Request
from labkit.designs.pipelined import PipelinedDesign
from labkit.designs.planner import respond

RESTART_FIRST_REQUEST = 1000  # request ids after the restart (so tool names stay distinct)
MAX_STEPS = 500


@dataclass(frozen=True)
class CrashRun:
    """One run killed at statement `kill_at` (0: never) and finished by a restarted loop.

    `heads` is what the independent reader saw after each step, across the kill; `killed`
    says the kill happened (the run had that many statements); `versions` is the catalog log
    at the end, as (version, base, tools); `held_left` the hold's rows left at the end.
    """

    kill_at: int
    killed: bool
    heads: tuple[int, ...]
    versions: tuple[tuple[int, int, tuple], ...]
    held_left: int
    statements: int


class _Tracer:
    """Counts the statements a connection runs; interrupts the `kill_at`-th (0: never)."""

    def __init__(self, conn: sqlite3.Connection, kill_at: int) -> None:
        self.count, self.kill_at, self.fired = 0, kill_at, False
        conn.set_trace_callback(self.trace)
        conn.set_progress_handler(self.progress, 1)

    def trace(self, sql: str) -> None:
        self.count += 1

    def progress(self) -> int:
        if self.kill_at and self.count >= self.kill_at:
            self.fired = True
            return 1  # SQLite stops the statement: its transaction never commits
        return 0


def _play(
    design: PipelinedDesign,
    rng: random.Random,
    reader: sqlite3.Connection,
    heads: list[int],
    ticks: int,
) -> None:
    """Answer awaited requests in a shuffled order, one per step, until the head is `ticks`;
    held answers are settled after each step. The reader looks after every step."""
    now = 0.0
    answered: set[int] = set()
    for _ in range(MAX_STEPS):
        if catalog.head(reader) >= ticks:
            return
        todo: list[Request] = [r for r in design.awaited() if r.request_id not in answered]
        now += 1.0
        if todo:
            req = rng.choice(todo)
            answered.add(req.request_id)
            design.on_response(req, respond(design, req, now), now)
        else:  # nothing left to answer: give up on the oldest wait, as a timer would
            waiting = design.awaited()
            if waiting:
                design.on_timeout(waiting[0], now)
        heads.append(catalog.head(reader))
        while design.settle(now) is not None:
            heads.append(catalog.head(reader))
    raise RuntimeError(f"the pipelined run did not reach version {ticks} in {MAX_STEPS} steps")


def crash_and_resume(
    path: str | Path, kill_at: int, *, ticks: int = 6, window: int = 3, seed: int = 0
) -> CrashRun:
    """Run pipelined ballots on the new SQLite file `path`, kill the loop inside statement
    `kill_at` (0: never), restart from the file and finish; what the reader saw and the log."""
    if Path(path).exists():
        raise ValueError(f"{path}: crash_and_resume wants a new file, not an old one")
    rng = random.Random(seed)
    heads: list[int] = []
    first = PipelinedDesign(window=window, ticks=ticks, path=path)
    reader = db.connect(path)
    tracer = _Tracer(first.conn, kill_at)
    try:
        first.start(0.0)
        _play(first, rng, reader, heads, ticks)
    except sqlite3.OperationalError:
        if not tracer.fired:
            raise
    finally:
        first.conn.close()  # the process is gone: nothing uncommitted survives
    second = PipelinedDesign(
        window=window, ticks=ticks, path=path, first_request=RESTART_FIRST_REQUEST
    )
    try:
        second.start(0.0)
        heads.append(catalog.head(reader))  # the reader's first look after the restart
        while second.settle(0.0) is not None:
            heads.append(catalog.head(reader))
        _play(second, rng, reader, heads, ticks)
        catalog.verify(second.conn)
        log = tuple(
            (v.version, v.base_version, tuple(v.tools)) for v in catalog.history(second.conn)
        )
        left = len(hold.held(second.conn))
    finally:
        second.conn.close()
        reader.close()
    return CrashRun(kill_at, tracer.fired, tuple(heads), log, left, tracer.count)


def statement_count(path: str | Path, *, ticks: int = 6, window: int = 3, seed: int = 0) -> int:
    """How many statements an unbroken run takes (the kill points `crash_and_resume` offers)."""
    return crash_and_resume(path, 0, ticks=ticks, window=window, seed=seed).statements
