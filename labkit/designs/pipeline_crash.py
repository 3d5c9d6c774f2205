"""The crash lab for pipelined ballots: kill the loop at any SQL statement, restart from its file.

`crash_and_resume` runs a pipelined loop on a SQLite file with a planner that answers in a
seeded, shuffled order (so early answers are held), and stops the loop dead inside its k-th
statement: SQLite interrupts the statement, the open transaction is lost as in a kill, and the
process's memory is thrown away. A new loop then opens the same file and finishes the run. An
independent reader on its own connection looks at the head after every step, before and after
the kill, so the reader's promise (never a fall, at most one version per step) is checked
across it. `statement_count` says how many statements an unbroken run takes, so a test can
kill at every one of them. `kill_and_resume` does the same with a real kill, as notebook 06's
crash lab does: the loop runs in a child process that the operating system kills.
`crash_and_resume_pg` runs the same lab on PostgreSQL: the loop's connection refuses its k-th
statement and is closed, so the server rolls back whatever it had not committed.
"""

from __future__ import annotations

import random
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import labkit.catalog.crash_child as crash_child
import labkit.catalog.hold as hold
import labkit.catalog.versions as catalog
from labkit import db
from labkit.designs.design import Request
from labkit.designs.pipelined import PipelinedDesign
from labkit.designs.planner import respond
from labkit.killable import Verdict, run_child

WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "WITH", "COMMIT"})
RESTART_FIRST_REQUEST = 1000  # request ids after the restart (so tool names stay distinct)
MAX_STEPS = 500


@dataclass(frozen=True)
class CrashRun:
    """One run killed at statement `kill_at` (0: never) and finished by a restarted loop.

    `heads` is what the independent reader saw after each step, across the kill; `killed`
    says the kill happened (the run had that many statements); `versions` is the catalog log
    at the end, as (version, base, tools); `held_left` the hold's rows left at the end;
    `held_at_restart` the held answers the restarted loop found in the store (each is checked
    again before it commits, never applied as it lies there); `writes` the numbers of the
    first life's statements that write (a kill at each cuts between every pair of writes).
    """

    kill_at: int
    killed: bool
    heads: tuple[int, ...]
    versions: tuple[tuple[int, int | None, tuple], ...]  # version 0 is built on nothing
    held_left: int
    statements: int
    held_at_restart: int = 0
    writes: tuple[int, ...] = ()

    @property
    def falls(self) -> int:
        """How many of the reader's looks saw a lower head than the look before."""
        return sum(after < before for before, after in pairwise(self.heads))


def _sqlite(design: PipelinedDesign) -> sqlite3.Connection:
    """The SQLite connection of a design on a file (a statement trace needs SQLite's)."""
    if not isinstance(design.conn, sqlite3.Connection):
        raise TypeError(f"a SQLite store is needed here, not {type(design.conn).__name__}")
    return design.conn


def is_write(sql: str) -> bool:
    """Whether a statement changes the store (a kill just before it cuts between two writes)."""
    return sql.lstrip().split(None, 1)[0].upper() in WRITES


class _Tracer:
    """Counts the statements a connection runs; interrupts the `kill_at`-th (0: never)."""

    def __init__(self, conn: sqlite3.Connection, kill_at: int) -> None:
        self.count, self.kill_at, self.fired = 0, kill_at, False
        self.writes: list[int] = []
        conn.set_trace_callback(self.trace)
        conn.set_progress_handler(self.progress, 1)

    def trace(self, sql: str) -> None:
        self.count += 1
        if is_write(sql):
            self.writes.append(self.count)

    def progress(self) -> int:
        if self.kill_at and self.count >= self.kill_at:
            self.fired = True
            return 1  # SQLite stops the statement: its transaction never commits
        return 0


def _play(
    design: PipelinedDesign,
    rng: random.Random,
    reader: Any,
    look: Callable[[], None],
    ticks: int,
    refusals: bool = False,
) -> None:
    """Answer awaited requests in a shuffled order, one per step, until the head is `ticks`;
    held answers are settled after each step. The reader looks after every step. With
    `refusals`, about one step in five instead gives a request up or answers it with a body
    built on the wrong base (refused by the hash check), so refusals and flushes are cut too."""
    now = 0.0
    answered: set[int] = set()
    for _ in range(MAX_STEPS):
        if catalog.head(reader) >= ticks:
            return
        todo: list[Request] = [r for r in design.awaited() if r.request_id not in answered]
        now += 1.0
        fault = rng.random() if refusals else 1.0
        if todo:
            req = rng.choice(todo)
            answered.add(req.request_id)
            if fault < 0.1:
                design.on_timeout(req, now)
            else:
                wrong = fault < 0.2 and req.base_version >= 1
                answer = respond(design, req, now, stale=wrong, stamped=wrong)
                design.on_response(req, answer, now)
        else:  # nothing left to answer: give up on the oldest wait, as a timer would
            waiting = design.awaited()
            if waiting:
                design.on_timeout(waiting[0], now)
        look()
        while design.settle(now) is not None:
            look()
    raise RuntimeError(f"the pipelined run did not reach version {ticks} in {MAX_STEPS} steps")


def _second_life(
    second: PipelinedDesign,
    rng: random.Random,
    reader: Any,
    look: Callable[[], None],
    *,
    ticks: int,
    refusals: bool = False,
) -> tuple[tuple[tuple[int, int | None, tuple], ...], int, int]:
    """The restarted loop `second`, a new one on the same store, finishes the run; the
    catalog log, the hold's rows left and the held answers it found when it opened. Its
    connection is closed at the end."""
    try:
        found = len(hold.held(second.conn))
        second.start(0.0)
        look()  # the reader's first look after the restart
        while second.settle(0.0) is not None:
            look()
        _play(second, rng, reader, look, ticks, refusals)
        catalog.verify(second.conn)
        log = tuple(
            (v.version, v.base_version, tuple(v.tools)) for v in catalog.history(second.conn)
        )
        return log, len(hold.held(second.conn)), found
    finally:
        second.conn.close()


def _restarted(path: str | Path, ticks: int, window: int) -> PipelinedDesign:
    """A new loop on the SQLite file `path`, numbering its requests apart from the first's."""
    return PipelinedDesign(
        window=window, ticks=ticks, path=path, first_request=RESTART_FIRST_REQUEST
    )


def crash_and_resume(
    path: str | Path,
    kill_at: int,
    *,
    ticks: int = 6,
    window: int = 3,
    seed: int = 0,
    refusals: bool = False,
) -> CrashRun:
    """Run pipelined ballots on the new SQLite file `path`, kill the loop inside statement
    `kill_at` (0: never), restart from the file and finish; what the reader saw and the log.
    `refusals`: some answers are refused and some requests given up (see `_play`)."""
    if Path(path).exists():
        raise ValueError(f"{path}: crash_and_resume wants a new file, not an old one")
    rng = random.Random(seed)
    heads: list[int] = []
    first = PipelinedDesign(window=window, ticks=ticks, path=path)
    reader = db.connect(path)

    def look() -> None:
        heads.append(catalog.head(reader))

    tracer = _Tracer(_sqlite(first), kill_at)
    try:
        first.start(0.0)
        _play(first, rng, reader, look, ticks, refusals)
    except sqlite3.OperationalError:
        if not tracer.fired:
            raise
    finally:
        first.conn.close()  # the process is gone: nothing uncommitted survives
    try:
        second = _restarted(path, ticks, window)
        log, left, found = _second_life(second, rng, reader, look, ticks=ticks, refusals=refusals)
    finally:
        reader.close()
    return CrashRun(
        kill_at, tracer.fired, tuple(heads), log, left, tracer.count, found, tuple(tracer.writes)
    )


def statement_count(
    path: str | Path, *, ticks: int = 6, window: int = 3, seed: int = 0, refusals: bool = False
) -> int:
    """How many statements an unbroken run takes (the kill points `crash_and_resume` offers)."""
    run = crash_and_resume(path, 0, ticks=ticks, window=window, seed=seed, refusals=refusals)
    return run.statements


# --- the same on PostgreSQL: the loop's connection stops dead before its k-th statement -------


class _Killed(Exception):
    """The loop's process is gone: raised instead of running the statement it was killed at."""


def _count_statements(conn: Any, kill_at: int) -> tuple[list[int], list[int]]:
    """Make every statement `conn` runs (through a cursor, as each of the store's does) count
    in the first list returned, and the number of each write go into the second; the
    `kill_at`-th raises `_Killed` instead (0: never)."""
    import psycopg

    count: list[int] = [0]
    writes: list[int] = []

    class Counting(psycopg.Cursor):
        def _tick(self, query: Any) -> None:
            count[0] += 1
            if kill_at and count[0] >= kill_at:
                raise _Killed(f"killed at statement {kill_at}")
            if is_write(str(query)):
                writes.append(count[0])

        def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
            self._tick(query)
            return super().execute(query, params, **kw)

        def executemany(self, query: Any, params_seq: Any, **kw: Any) -> None:
            self._tick(query)
            super().executemany(query, params_seq, **kw)

    conn.cursor_factory = Counting
    return count, writes


def crash_and_resume_pg(
    connect: Callable[[], Any],
    kill_at: int,
    *,
    ticks: int = 6,
    window: int = 3,
    seed: int = 0,
    refusals: bool = False,
) -> CrashRun:
    """`crash_and_resume` on PostgreSQL: `connect()` opens a new psycopg connection to an empty
    store (a fresh schema). The loop's connection refuses its `kill_at`-th statement (0:
    never) and is closed at once, so a transaction it had open is rolled back by the server as
    in a kill; a loop on a new connection then finishes the run. The reader has its own."""
    rng = random.Random(seed)
    heads: list[int] = []
    first = PipelinedDesign(connect(), window=window, ticks=ticks)
    reader = connect()

    def look() -> None:
        heads.append(catalog.head(reader))

    try:
        if catalog.head(reader) != 0 or first.loop.inflight():
            raise ValueError("crash_and_resume_pg wants an empty store, not one with a history")
        count, writes = _count_statements(first.conn, kill_at)
        try:
            first.start(0.0)
            _play(first, rng, reader, look, ticks, refusals)
        except _Killed:
            pass
        finally:
            first.conn.close()  # the process is gone: what it had not committed is lost
        second = PipelinedDesign(
            connect(), window=window, ticks=ticks, first_request=RESTART_FIRST_REQUEST
        )
        log, left, found = _second_life(second, rng, reader, look, ticks=ticks, refusals=refusals)
    finally:
        first.conn.close()
        reader.close()
    killed = bool(kill_at) and count[0] >= kill_at
    return CrashRun(kill_at, killed, tuple(heads), log, left, count[0], found, tuple(writes))


# --- the same with a real kill: a child process, killed by the operating system ---------------


def _child(path: str, kill_at: int, ticks: int, window: int, seed: int) -> None:
    """The first life, in a child process: print every head the reader sees; stop before
    statement `kill_at` runs and wait there to be killed."""
    first = PipelinedDesign(window=window, ticks=ticks, path=path)
    reader = db.connect(path)
    count = 0

    def trace(sql: str) -> None:
        nonlocal count
        count += 1
        if count == kill_at:
            crash_child.wait_to_be_killed(f"statement {kill_at}")

    def look() -> None:
        print(f"head {catalog.head(reader)}", flush=True)

    _sqlite(first).set_trace_callback(trace)
    first.start(0.0)
    _play(first, random.Random(seed), reader, look, ticks)
    print("finished", flush=True)


def kill_and_resume(
    path: str | Path,
    kill_at: int,
    *,
    ticks: int = 6,
    window: int = 3,
    seed: int = 0,
    timeout: float = 60.0,
) -> CrashRun:
    """`crash_and_resume` with a real kill: a child process runs the loop on the new file
    `path` and is killed (`Popen.kill()`: no cleanup, no COMMIT) as statement `kill_at` starts;
    this process then restarts the loop from the file and finishes the run."""
    if Path(path).exists():
        raise ValueError(f"{path}: kill_and_resume wants a new file, not an old one")
    heads: list[int] = []

    def on_line(line: str) -> Verdict:
        if line.startswith("head "):
            heads.append(int(line.split()[1]))
        elif line.strip() == f"at statement {kill_at}":
            return "kill"
        elif line.strip() == "finished":
            return "stop"
        return None

    end = run_child(
        "labkit.designs.pipeline_crash",
        [str(path), str(kill_at), str(ticks), str(window), str(seed)],
        on_line,
        timeout=timeout,
    )
    killed = end.killed
    if not killed and end.returncode != 0:
        raise RuntimeError(f"child loop on {path} failed (exit {end.returncode}): {end.last_error}")
    reader = db.connect(path)
    try:
        log, left, found = _second_life(
            _restarted(path, ticks, window),
            random.Random(seed + 1),
            reader,
            lambda: heads.append(catalog.head(reader)),
            ticks=ticks,
        )
    finally:
        reader.close()
    return CrashRun(kill_at, killed, tuple(heads), log, left, kill_at if killed else 0, found)


if __name__ == "__main__":
    _child(sys.argv[1], *(int(a) for a in sys.argv[2:6]))
