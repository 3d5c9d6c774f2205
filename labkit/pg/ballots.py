"""Ballots across machines: many workers, one PostgreSQL catalog, and the race the rule prevents.

Two experiments, both on a fresh schema of a real server:

* `lost_update` steps two connections through a scripted interleaving (no sleeps, no threads),
  so it shows the same thing every run: a naive check-then-write (read the head, then write
  "version head+1" into one mutable row, in a second statement, with no lock) lets two workers
  both write version 6 under READ COMMITTED, and one answer vanishes without an error. The same
  interleaving through `WatermarkLoop` refuses the second with `stale_watermark`.
* `run_workers` starts N worker processes (spawn, so it runs the same on every platform), each
  with its own connection and its own `WatermarkLoop` over one catalog: reserve, a seeded
  planner delay, apply, until the head reaches a target. An independent reader connection
  polls the head throughout. `check_invariants` then reads the store back.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import labkit.catalog.versions as catalog
import labkit.pg.instance as pg
from labkit.catalog.loop import WatermarkLoop

START_TIMEOUT_S = 120.0
READER_POLL_S = 0.002

# The naive design: one mutable row holds the catalog, and a worker writes it in two steps.
NAIVE_SCHEMA_SQL = (
    "CREATE TABLE naive_catalog (id integer PRIMARY KEY CHECK (id = 1),"
    " version bigint NOT NULL, tools text NOT NULL)"
)
NAIVE_INIT_SQL = "INSERT INTO naive_catalog (id, version, tools) VALUES (1, %s, %s)"
NAIVE_READ_SQL = "SELECT version FROM naive_catalog WHERE id = 1"
NAIVE_WRITE_SQL = "UPDATE naive_catalog SET version = %s, tools = %s WHERE id = 1"
NAIVE_STATE_SQL = "SELECT version, tools FROM naive_catalog WHERE id = 1"


@dataclass(frozen=True)
class Step:
    """One step of a scripted interleaving: who acted, what they did, and what came back."""

    design: str
    worker: str
    action: str
    result: str


@dataclass(frozen=True)
class LostUpdate:
    """Both designs on the same interleaving, and what each left behind.

    `naive_writes_ok`: how many naive writes reported success; `naive_final` the row's
    (version, body) afterwards. `ballot_outcomes`: (worker, committed, reason) per apply;
    `ballot_log`: (version, body) of every version of the ballot catalog above `start_head`.
    """

    start_head: int
    steps: tuple[Step, ...]
    naive_writes_ok: int
    naive_final: tuple[int, str]
    ballot_outcomes: tuple[tuple[str, bool, str | None], ...]
    ballot_log: tuple[tuple[int, str], ...]

    @property
    def lost_answers(self) -> int:
        """Naive writes that reported success but whose answer is not in the catalog."""
        return self.naive_writes_ok - 1 if self.naive_writes_ok else 0


def _connect(dsn: str, schema: str, autocommit: bool = False):
    """A worker's connection into `schema`, with the server's durable commit settings."""
    return pg.connect(dsn, autocommit=autocommit, options=pg.search_path_option(schema))


def lost_update(dsn: str, start_head: int = 5) -> LostUpdate:
    """Workers A and B both read head `start_head`, then both write `start_head + 1`.

    Script, per design: A reads, B reads, A writes and commits, B writes and commits. Each
    worker has its own connection (READ COMMITTED, PostgreSQL's default). Nothing waits on a
    lock in this order, so the steps run one after another in this thread.
    """
    steps: list[Step] = []
    with pg.scratch_schema(dsn, prefix="lost") as schema:
        a, b = _connect(dsn, schema), _connect(dsn, schema)
        try:
            with a.transaction():
                a.execute(NAIVE_SCHEMA_SQL)
                a.execute(NAIVE_INIT_SQL, (start_head, f"answer {start_head}"))
            naive_ok = _naive_script(a, b, start_head, steps)
            final = a.execute(NAIVE_STATE_SQL).fetchone()
            a.rollback()
            outcomes, log = _ballot_script(a, b, start_head, steps)
        finally:
            a.close()
            b.close()
    return LostUpdate(
        start_head, tuple(steps), naive_ok, (int(final[0]), str(final[1])), outcomes, log
    )


def _naive_script(a: Any, b: Any, head: int, steps: list[Step]) -> int:
    """Read-then-write in two statements, no lock, no condition: returns the writes that 'won'."""
    seen = {}
    for name, conn in (("A", a), ("B", b)):
        seen[name] = int(conn.execute(NAIVE_READ_SQL).fetchone()[0])
        steps.append(Step("naive", name, "read the head", f"head {seen[name]}"))
    ok = 0
    for name, conn in (("A", a), ("B", b)):
        version = seen[name] + 1
        rows = conn.execute(NAIVE_WRITE_SQL, (version, f"answer of {name}")).rowcount
        conn.commit()
        ok += rows == 1
        steps.append(
            Step("naive", name, f"write version {version}, commit", f"{rows} row updated, no error")
        )
    return ok


def _ballot_script(
    a: Any, b: Any, head: int, steps: list[Step]
) -> tuple[tuple[tuple[str, bool, str | None], ...], tuple[tuple[int, str], ...]]:
    """The same interleaving through `WatermarkLoop`: reserve, reserve, apply, apply."""
    loops = {"A": WatermarkLoop(a, window=2), "B": WatermarkLoop(b, window=2)}
    for version in range(head):  # bring the ballot catalog to the same head
        ballot = loops["A"].reserve()
        loops["A"].apply(ballot.answer([f"answer {version + 1}"]))
    ballots = {}
    for name, loop in loops.items():
        ballots[name] = loop.reserve()
        steps.append(
            Step(
                "ballot",
                name,
                "reserve a ballot",
                f"ballot {ballots[name].ballot_id} on watermark {ballots[name].watermark}",
            )
        )
    outcomes = []
    for name, loop in loops.items():
        bl = ballots[name]
        out = loop.apply(bl.answer([f"answer of {name}"]))
        outcomes.append((name, out.committed, out.reason))
        result = f"committed version {out.version}" if out.committed else f"refused: {out.reason}"
        steps.append(Step("ballot", name, f"apply ballot {bl.ballot_id}", result))
    log = tuple((v.version, str(v.tools[-1])) for v in catalog.history(a) if v.version > head)
    return tuple(outcomes), log


# --- N workers, one catalog ---------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    """One worker's reserve-and-apply: when it applied (seconds since the start barrier), the
    watermark its ballot observed, and whether it committed (then `version` is the new head)."""

    worker: int
    ballot_id: int
    watermark: int
    t: float
    committed: bool
    reason: str | None
    version: int


@dataclass(frozen=True)
class BallotRun:
    """What `run_workers` saw: every tick, the reader's samples (t, head), and its rewinds.

    `lost_races`: reserves and decisions whose guarded write found the store changed since
    their read (another worker got there first) and that were decided again from a fresh read.
    `commit_first_misses`: commits tried before reading that did not land (the answer was
    stale by then, almost always), so the worker read and recorded the refusal.
    """

    workers: int
    target: int
    seed: int
    seconds: float
    ticks: tuple[Tick, ...]
    reader: tuple[tuple[float, int], ...]
    rewinds: int
    invariants: Invariants
    lost_races: int
    commit_first_misses: int

    @property
    def commits(self) -> int:
        return sum(t.committed for t in self.ticks)

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Invariants:
    """The four promises, each read back from the store after the run, with its evidence."""

    head: int
    contiguous: bool
    max_commits_per_watermark: int
    accepted_responses: int
    commit_ticks: int
    rewinds: int

    @property
    def ok(self) -> bool:
        return (
            self.contiguous
            and self.max_commits_per_watermark <= 1
            and self.accepted_responses == self.head == self.commit_ticks
            and self.rewinds == 0
        )

    def lines(self) -> list[str]:
        """One plain sentence per invariant, for a notebook or a benchmark log."""
        return [
            f"versions 0..{self.head}, each based on the one before: "
            + ("yes" if self.contiguous else "NO"),
            f"most commits on one watermark: {self.max_commits_per_watermark}",
            f"accepted responses {self.accepted_responses}, versions {self.head}, "
            f"commits the workers saw {self.commit_ticks}",
            f"rewinds seen by the reader: {self.rewinds}",
        ]


# Per watermark, how many ballots the store marked committed (at most one, if the rule holds).
COMMITS_PER_WATERMARK_SQL = (
    "SELECT COALESCE(MAX(n), 0) FROM (SELECT count(*) AS n FROM wm_ballots"
    " WHERE status = 'committed' GROUP BY observed_watermark) AS per"
)
# Versions whose ballot has exactly one accepted response recorded.
ONE_ACCEPTED_SQL = (
    "SELECT count(*) FROM catalog_versions AS c WHERE c.version > 0 AND ("
    "SELECT count(*) FROM wm_responses AS r WHERE r.ballot_id = c.ballot_id AND r.committed = 1"
    ") = 1"
)
ACCEPTED_SQL = "SELECT count(*) FROM wm_responses WHERE committed = 1"


def check_invariants(conn: Any, ticks: tuple[Tick, ...], rewinds: int) -> Invariants:
    """Read the catalog and the responses back and test the promises against the ticks."""
    history = catalog.history(conn)
    contiguous = all(
        v.version == i and (i == 0 or v.base_version == i - 1) for i, v in enumerate(history)
    )
    seen_by_workers = Counter(t.watermark for t in ticks if t.committed)
    with conn.transaction():
        (stored_max,) = conn.execute(COMMITS_PER_WATERMARK_SQL).fetchone()
        (accepted,) = conn.execute(ACCEPTED_SQL).fetchone()
        (one_each,) = conn.execute(ONE_ACCEPTED_SQL).fetchone()
    head = history[-1].version
    return Invariants(
        head=head,
        contiguous=contiguous,
        max_commits_per_watermark=max(int(stored_max), *seen_by_workers.values(), 0),
        accepted_responses=int(accepted) if int(one_each) == head else -1,
        commit_ticks=sum(t.committed for t in ticks),
        rewinds=rewinds,
    )


def _worker(
    dsn: str,
    schema: str,
    wid: int,
    workers: int,
    target: int,
    seed: int,
    max_delay_s: float,
    barrier: Any,
    out: Any,
) -> None:
    """One worker process: reserve, think (seeded delay), apply, until the head reaches `target`."""
    rng = random.Random(seed * 1_000 + wid)
    ticks = []
    with _connect(dsn, schema) as conn:
        loop = WatermarkLoop(conn, window=workers)
        barrier.wait(START_TIMEOUT_S)
        while True:
            ballot = loop.reserve()
            if ballot.watermark >= target:
                loop.abandon(ballot.ballot_id)
                break
            time.sleep(rng.random() * max_delay_s)  # the planner thinking
            body = [f"w{wid}", f"v{ballot.watermark + 1}"]
            got = loop.apply(ballot.answer(body))
            ticks.append(
                Tick(
                    wid,
                    ballot.ballot_id,
                    ballot.watermark,
                    time.time(),
                    got.committed,
                    got.reason,
                    got.version,
                )
            )
    out.put((ticks, loop.lost_races, loop.commit_first_misses))


def run_workers(
    dsn: str, workers: int = 8, target: int = 60, seed: int = 0, max_delay_s: float = 0.01
) -> BallotRun:
    """N worker processes on one catalog (a scratch schema) until the head reaches `target`.

    Each worker has its own connection and loop (window = N, so every worker can hold a
    ballot). They start together at a barrier; an independent reader connection in this
    process polls the head (`CatalogReader`) until they are done. Raises if a worker fails.
    """
    ctx = mp.get_context("spawn")
    with pg.scratch_schema(dsn, prefix="ballots") as schema, _connect(dsn, schema) as setup:
        WatermarkLoop(setup, window=workers)  # create the store once, before anyone races
        barrier, out = ctx.Barrier(workers + 1), ctx.Queue()
        procs = [
            ctx.Process(
                target=_worker,
                args=(dsn, schema, w, workers, target, seed, max_delay_s, barrier, out),
            )
            for w in range(workers)
        ]
        for p in procs:
            p.start()
        try:
            with _connect(dsn, schema, autocommit=True) as rconn:
                reader = catalog.CatalogReader(rconn, "reader")
                barrier.wait(START_TIMEOUT_S)
                start = time.time()
                samples, rewinds, collected = _poll(reader, procs, out, start)
                seconds = time.time() - start
        finally:
            for p in procs:
                p.join(timeout=30)
        failed = [p.exitcode for p in procs if p.exitcode != 0]
        if failed:
            raise RuntimeError(
                f"{len(failed)} of {workers} ballot workers failed (exit codes {failed})"
            )
        ticks = tuple(replace(t, t=t.t - start) for batch, _, _ in collected for t in batch)
        inv = check_invariants(setup, ticks, rewinds)
    ordered = tuple(sorted(ticks, key=lambda t: (t.t, t.worker)))
    lost = sum(n for _, n, _ in collected)
    misses = sum(n for _, _, n in collected)
    return BallotRun(workers, target, seed, seconds, ordered, samples, rewinds, inv, lost, misses)


def _poll(reader: catalog.CatalogReader, procs: list[Any], out: Any, start: float):
    """The reader's loop: sample the head until every worker has exited; count any fall.

    A watcher thread collects each worker's ticks as it finishes (a process cannot exit while
    what it put on the queue is unread) and marks when all have exited.
    """
    samples: list[tuple[float, int]] = []
    collected: list[tuple[list[Tick], int, int]] = []
    rewinds = 0
    done = threading.Event()

    def watch() -> None:
        while len(collected) < len(procs):
            try:
                collected.append(out.get(timeout=0.2))
            except queue.Empty:
                if not any(p.is_alive() for p in procs) and out.empty():
                    break  # a worker died without reporting; run_workers raises
        for p in procs:
            p.join()
        done.set()

    threading.Thread(target=watch, daemon=True).start()
    while True:
        finished = done.is_set()
        try:
            samples.append((time.time() - start, reader.poll()))
        except catalog.RewindError:
            rewinds += 1
        if finished:
            return tuple(samples), rewinds, collected
        time.sleep(READER_POLL_S)
