"""The commit-order stress test: N writer processes, a dispatcher and a summarizer on one server.

Each writer process has its own connection and inserts rows one transaction at a time,
committing after a seeded random delay, so ids commit out of order. A dispatcher delivers
whatever it can see; a summarizer advances its checkpoint by the rule under test. At the end
every row is terminal, and an audit counts the rows that are terminal but in no summary.

Rules: "id_order" (Article 1's rule, plain writers), "lock" (writers serialise on a
transaction-level advisory lock taken before the insert; Article 1's rule is then safe) and
"horizon" (plain writers, the xmin horizon wait of `delivered_frontier`).
"""

from __future__ import annotations

import multiprocessing as mp
import random
import threading
import time
from dataclasses import dataclass

import labkit.catalog.versions_pg as versions_pg
import labkit.frontier.log as fr
import labkit.frontier.summarizer as sm
import labkit.pg.instance as pg

RULES = ("id_order", "lock", "horizon")
# The summarizer policy each rule advances: the lock makes Article 1's rule safe.
POLICY = {"id_order": "id_order", "lock": "id_order", "horizon": "frontier"}
SHARD = "main"
LOCK_KEY = 7_000_002
LOCK_SQL = "SELECT pg_advisory_xact_lock(%s)"
# How long the dispatcher and the summarizer wait when they found nothing to do: a quarter of a
# late commit's window (`Delays.slow_s`, 40 ms by default) at most, so the summarizer still runs
# inside it, and long enough that two pollers do not keep the server busy. Measured at 10 ms
# against 2 ms: tests/test_pg_stress.py cost the machine 13 s of CPU instead of 24, Article 1's
# rule still orphaned 380-410 of its 2,000 rows (slow_s 80 ms) in each of four seeded runs, and
# notebook 07's run (3 writers x 100 rows, default delays) 31-40 of 300 in eight (31-42 at 2 ms).
IDLE_S = 0.01
BATCH = 50


@dataclass(frozen=True)
class Delays:
    """How long a writer waits between its insert and its commit: mostly `fast_s` at most,
    and a `slow_share` of transactions take `slow_s` (the late commits)."""

    fast_s: float = 0.004
    slow_share: float = 0.1
    slow_s: float = 0.04

    def draw(self, rng: random.Random) -> float:
        """One delay, from the writer's seeded generator."""
        if rng.random() < self.slow_share:
            return self.slow_s
        return rng.random() * self.fast_s


@dataclass(frozen=True)
class StressResult:
    """One rule's run: rows written, orphans found, and rows/s committed and summarized."""

    rule: str
    writers: int
    rows: int
    orphans: int
    committed_per_s: float
    summarized_per_s: float
    seconds: float


def _writer(dsn: str, schema: str, rule: str, wid: int, n: int, delays: Delays, seed: int):
    rng = random.Random(seed * 1_000 + wid)
    with pg.connect(dsn, options=pg.search_path_option(schema)) as conn:
        for _ in range(n):
            if rule == "lock":
                conn.execute(LOCK_SQL, (LOCK_KEY,))
            fr.enqueue(conn, SHARD, rng.randint(1, 5))
            time.sleep(delays.draw(rng))
            conn.commit()


def _dispatcher(dsn: str, schema: str, writers_done, done) -> None:
    """Claim and deliver rows, a batch per commit, until the writers are done and none is left."""
    with pg.connect(dsn, options=pg.search_path_option(schema)) as conn:
        while True:
            finished = writers_done.is_set()  # read BEFORE looking: rows committed later count
            delivered = 0
            with conn.transaction():  # everything visible now, in one commit
                while delivered < BATCH and (row := fr.dispatch_next(conn, SHARD)) is not None:
                    fr.mark_delivered(conn, row)
                    delivered += 1
            if not delivered:
                if finished:
                    done.set()
                    return
                time.sleep(IDLE_S)


def _summarizer(conn, rule: str, dispatched, total: int) -> int:
    """Advance the checkpoint until the dispatcher is done and coverage reaches the last id."""
    policy, summarized = POLICY[rule], 0
    while True:
        finished = dispatched.is_set()
        summary = sm.summarize_range(conn, SHARD, policy)
        summarized += len(summary.item_ids) if summary else 0
        if summary is None:
            if finished and sm.coverage_end(conn, SHARD, policy) >= total:
                return summarized
            time.sleep(IDLE_S)


def can_run() -> bool:
    """True where the stress test can start its processes (it forks: Linux and macOS)."""
    return "fork" in mp.get_all_start_methods()


def run_stress(
    dsn: str,
    rule: str,
    writers: int = 4,
    rows_per_writer: int = 500,
    delays: Delays = Delays(),
    seed: int = 0,
) -> StressResult:
    """Run one rule on a fresh schema of the server at `dsn`; see the module docstring."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; expected one of {RULES}")
    if not can_run():
        raise RuntimeError(
            "the stress test forks its writer processes, and this platform cannot fork"
            " (Windows); run it on Linux or macOS"
        )
    ctx = mp.get_context("fork")
    total = writers * rows_per_writer
    with pg.scratch_schema(dsn, prefix="stress") as schema:
        with pg.connect(dsn, options=pg.search_path_option(schema)) as sconn:
            versions_pg.pin_settings(
                sconn, versions_pg.READ_COMMITTED
            )  # the horizon wait's level, kept
            fr.create_schema(sconn)
            writers_done, dispatched = ctx.Event(), ctx.Event()
            procs = [
                ctx.Process(
                    target=_writer, args=(dsn, schema, rule, w, rows_per_writer, delays, seed)
                )
                for w in range(writers)
            ]
            disp = ctx.Process(target=_dispatcher, args=(dsn, schema, writers_done, dispatched))
            start = time.perf_counter()
            for p in (*procs, disp):
                p.start()
            try:
                summarized = _summarizer_until(sconn, rule, procs, writers_done, dispatched, total)
            finally:
                for p in (*procs, disp):
                    p.join(timeout=30)
            seconds = time.perf_counter() - start
            if any(p.exitcode != 0 for p in (*procs, disp)):
                raise RuntimeError(f"stress run {rule!r}: a writer or the dispatcher failed")
            committed_s = summarized.committed_s
            lost = len(sm.orphans(sconn, SHARD, POLICY[rule]))
    return StressResult(
        rule, writers, total, lost, total / committed_s, summarized.rows / seconds, seconds
    )


@dataclass(frozen=True)
class _Summed:
    rows: int
    committed_s: float


def _summarizer_until(conn, rule, procs, writers_done, dispatched, total) -> _Summed:
    """Run the summarizer in this process; a watcher thread marks when every writer is done."""
    start = time.perf_counter()
    committed: list[float] = []

    def watch() -> None:
        for p in procs:
            p.join()
        committed.append(time.perf_counter() - start)
        writers_done.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rows = _summarizer(conn, rule, dispatched, total)
    watcher.join()
    return _Summed(rows, committed[0])
