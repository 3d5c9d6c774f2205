"""`run`: one design against a real planner service, with real concurrency and timeouts.

The design (`labkit.designs.registry.make_design`: the same objects the simulator drives) says
what to send and what an answer does; this driver sends each request to the service over
HTTP, arms a real timer per request, and feeds the answers the service posts back (late,
twice, stale) and the timers that fire into the design one at a time, on one asyncio loop.
The safe designs write through `WatermarkLoop` on a SQLite file (or PostgreSQL with a DSN);
the unguarded ones overwrite one head row (`labkit.remote.head_row`). A separate reader process
(`labkit.remote.head_watch`) polls the store the whole time. Before and after a write that
lowers the row, the loop waits until the reader has polled once (`ReaderProcess.sync`), so the
reader has read the head before the fall and the fall itself: on a busy machine a poll can come
tens of milliseconds late, and a fall undone by the next answer would slip between two polls.
A loop that never lowers its head never waits; one whose reader dies, or stays silent until
the deadline or a stop, ends there (a `truncated` row) and says so in `reader_failure`, with
the trace so far. A loop that awaits nothing and has nothing left to settle while its design
says it cannot move (`Design.stalled`) ends with a `truncated` row whose reason says why
(`stalled: ...`), never as if it had finished. The trace has the simulator's
columns (times in seconds since the start) plus `wall`; the summary is the simulator's
(`labkit.designs.run_stats.summarize_rows`), so throughput is kept versions per second.

A run on a store that already holds ballots is a restart: ballots in flight survive, and the
answers to calls a dead process made are judged by them when the service redelivers them. One
run drives a store at a time (`labkit.remote.store_claim`); a run that reaches its deadline or
is stopped ends with a `truncated` row saying which (`deadline`, `stopped`).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pandas as pd

import labkit.remote.head_row as head_row
import labkit.remote.knobs as knobs
import labkit.remote.store_claim as store_claim
from labkit import db, validation
from labkit.designs.design import BallotDesign, Design, Request
from labkit.designs.planner import HeadReader
from labkit.designs.registry import check_design, make_design
from labkit.designs.run_stats import RunSummary, summarize_rows
from labkit.designs.simulator import COLUMNS, STALLED, trace_row
from labkit.remote.control import PlannerUnreachable, check_loopback, config
from labkit.remote.head_watch import STOP_GRACE_S, Change, Fall, ReaderFailure, ReaderProcess
from labkit.remote.inbox import Inbox
from labkit.remote.wire import Answer, request_body

TRACE_COLUMNS = [*COLUMNS, "wall"]
T = TypeVar("T")
LOOP_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # a path segment of the service's URLs
BAD_ANSWER = "bad_answer"  # the reason on a trace row for an answer refused before any decision
READER_FAILED = "reader_failed"  # the reason on the `truncated` row of a run its reader failed
DEADLINE = "deadline"  # ... of a run still going at its deadline
STOPPED = "stopped"  # ... of a run stopped early (`stop`, an interrupt)
READER_STOP_S = 5.0  # how long a reader that was told to end may take before it is killed
# What the driver calls on a design (`Design`); a design object given to `run` needs them all.
DESIGN_METHODS = ("start", "on_response", "on_timeout", "awaited", "settle", "stalled", "read_head")


@dataclass(frozen=True)
class RemoteRun:
    """One `run`: the trace, its summary, the falls the reader process saw, and the answers
    refused unread (one line each). `store` is the SQLite file (None if it was temporary);
    `reader_first` and `reader_changes` are the head the reader process read first and every
    change it saw after (its own trace of the head, by wall clock). `reader_failure` says, in
    one line, how the reader process failed (dead, or silent for so long), None if it did not:
    then the run ended there and its falls are only the ones it saw until then."""

    design: str
    url: str
    store: str | None
    trace: pd.DataFrame
    summary: RunSummary
    reader_falls: list[Fall]
    refused: list[str]
    reader_polls: int
    reader_first: int = 0
    reader_changes: tuple[Change, ...] = ()
    reader_failure: str | None = None


def check_loop_name(name: Any) -> str:
    """`name` if it can name a loop to the service (a segment of its URLs)."""
    if not isinstance(name, str) or not LOOP_NAME.fullmatch(name):
        raise ValueError(f"loop name {name!r}: use letters, digits, '.', '_' or '-' (1-100)")
    return name


def _build(
    name: str | Callable[[], Design], window: int, ticks: int, store: Path | None, dsn: str | None
) -> tuple[Design, Any]:
    """The design, and for an unguarded one (or one a callable makes) the connection its head
    row is written through. A SQLite store that cannot be opened is named in the error."""
    conn = None
    if dsn is not None:
        from labkit.pg.instance import connect

        conn = connect(dsn, autocommit=True)
    try:
        if isinstance(name, str):
            design = make_design(name, window=window, ticks=ticks, path=store, conn=conn)
        else:
            design = name()
            _design_object(design)
        if isinstance(design, BallotDesign) and isinstance(name, str):
            return design, None
        if conn is not None:
            return design, conn
        assert store is not None, "run() makes a store when it is given no dsn"
        return design, db.connect(store)
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        if store is None or str(store) in str(exc):
            raise
        raise type(exc)(f"run(): store {store} cannot be opened: {exc}") from exc
    except BaseException:
        if conn is not None:
            conn.close()
        raise


def _design_object(design: Any) -> None:
    """Refuse, in one line, a design object `run`'s callable made (a reader's own loop,
    `labkit.audit.loop_design.LoopDesign`) that lacks a method a driver calls."""
    missing = [m for m in DESIGN_METHODS if not callable(getattr(design, m, None))]
    if missing or not isinstance(getattr(design, "name", None), str):
        raise TypeError(
            f"run(): the design made must have a str `name` and {', '.join(DESIGN_METHODS)}; "
            f"{type(design).__name__} lacks {', '.join(missing) or 'name'}"
        )


def _close(design: Design, mirror_conn: Any) -> None:
    """Close the run's connections (the store stays on disk for a restart or a check)."""
    for conn in (getattr(design, "conn", None), mirror_conn):
        if conn is not None:
            conn.close()


class _Driver:
    """The asyncio side of one run (see the module docstring)."""

    def __init__(
        self,
        design: Design,
        mirror_conn: Any,
        url: str,
        *,
        name: str,
        seed: int,
        ticks: int,
        timeout: float,
        deadline: float,
        connect_timeout: float,
        drain: float,
        progress: Callable[[dict[str, Any]], None] | None,
        restart: bool,
        stop: threading.Event,
        reader: ReaderProcess,
    ) -> None:
        self.d, self.mirror, self.url, self.name, self.seed = design, mirror_conn, url, name, seed
        self.ticks = ticks
        self.timeout, self.deadline, self.drain = timeout, deadline, drain
        self.connect_timeout, self.progress = connect_timeout, progress
        self.restart = restart
        self.reader = reader
        self.published = design.read_head()[0]  # the version on the head row now
        self.rows: list[dict[str, Any]] = []
        self.sent: dict[int, Request] = {}
        self.timers: list[asyncio.TimerHandle] = []
        self.head = HeadReader(design)
        self.stop = stop
        self.refused: list[str] = []
        self.t0 = time.monotonic()
        self.end = self.t0 + deadline

    def now(self) -> float:
        return time.monotonic() - self.t0

    def row(self, t: float, event: str, req: Request | None = None, **extra: Any) -> None:
        rec = trace_row(
            TRACE_COLUMNS,
            t,
            self.d.name,
            event,
            req,
            self.head.look(),
            {"wall": time.time(), **extra},
        )
        self.rows.append(rec)
        if self.progress is not None:
            self.progress(rec)

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """One call to the service; `PlannerUnreachable` in one line if it does not answer."""
        try:
            async with self.session.post(self.url + path, json=body) as reply:
                if reply.status >= 400:
                    text = (await reply.text()).strip()
                    raise ValueError(f"planner at {self.url} refused {path}: {text}")
                return await reply.json() if reply.status != 204 else None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise PlannerUnreachable(
                f"planner at {self.url} did not answer within {self.connect_timeout:g} s "
                f"({type(exc).__name__})"
            ) from None

    async def goodbye(self) -> None:
        """Tell the service this loop is gone, so it stops trying to deliver to it (a killed
        loop never says it: the service keeps its answers for a restart)."""
        try:
            async with self.session.delete(f"{self.url}/loops/{self.name}"):
                pass
        except (TimeoutError, aiohttp.ClientError, OSError):
            pass  # the service is gone too: nothing is owed any more

    async def send_all(self, reqs: list[Request]) -> None:
        """Send `reqs` at once (W hedged calls are W requests in flight), one timer each."""
        if not reqs:
            return
        t = self.now()
        drawn = await asyncio.gather(
            *(self.post("/plan", request_body(self.name, r)) for r in reqs)
        )
        loop = asyncio.get_running_loop()
        for req, reply in zip(reqs, drawn, strict=True):
            self.sent[req.request_id] = req
            self.row(t, "send", req, host=reply["host"], fault=reply["fault"])
            self.arm(loop, req)

    def arm(self, loop: asyncio.AbstractEventLoop, req: Request) -> None:
        self.timers.append(loop.call_later(self.timeout, self.events.put_nowait, ("timeout", req)))

    def match(self, answer: Answer) -> Request:
        """The request `answer` answers: one this process sent, a ballot still awaited (sent
        before a restart), or else a request rebuilt from the answer itself."""
        resp = answer.response
        req = self.sent.get(answer.request_id)
        if req is not None and req.ballot_id in (None, resp.ballot_id):
            return req
        for awaited in self.d.awaited():
            if awaited.ballot_id == resp.ballot_id:
                return awaited
        ballot = resp.ballot_id if isinstance(self.d, BallotDesign) else None
        return Request(answer.request_id, ballot, resp.observed_watermark, resp.base_version, ())

    async def publish(self) -> None:
        """Write the design's head to its row; a write that lowers it is witnessed (see the
        module docstring)."""
        if self.mirror is None:
            return
        version, digest = self.d.read_head()
        lowers = version < self.published
        if lowers:  # the reader has read the head this write takes back
            await self.witness()
        head_row.publish(self.mirror, version, digest)
        self.published = version
        if lowers:  # and it has read the fall
            await self.witness()

    async def witness(self) -> None:
        """Wait for the reader to poll once (`ReaderFailure` if it is dead, or silent until
        the deadline, with a short grace, or a stop)."""
        timeout = max(self.end - time.monotonic(), STOP_GRACE_S)
        await asyncio.to_thread(self.reader.sync, timeout, self.stop)

    async def on_deliver(self, answer: Answer) -> None:
        req, resp = self.match(answer), answer.response
        t = self.now()
        decision = self.d.on_response(req, resp, t)  # `parse_answer` let only storable ones in
        try:
            await self.publish()
        finally:  # the design decided, witnessed or not
            self.row(
                t,
                "deliver",
                req,
                ballot_id=req.ballot_id,
                base_version=resp.base_version,
                host=answer.host,
                updated_at=resp.updated_at,
                fault=answer.fault,
                committed=decision.committed,
                reason=decision.reason,
            )
        await self.send_all(decision.sends)

    async def on_timeout(self, req: Request) -> None:
        if all(a.request_id != req.request_id for a in self.d.awaited()):
            return
        t = self.now()
        sends = self.d.on_timeout(req, t)
        self.row(t, "timeout", req)
        await self.send_all(sends)

    async def settle(self) -> None:
        while (settled := self.d.settle(self.now())) is not None:
            req, decision = settled
            try:
                await self.publish()
            finally:
                self.row(
                    self.now(), "settle", req, committed=decision.committed, reason=decision.reason
                )
            await self.send_all(decision.sends)

    async def main(self) -> list[dict[str, Any]]:
        self.events: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        inbox = Inbox(self.events)
        timeout = aiohttp.ClientTimeout(total=self.connect_timeout)
        self.session = aiohttp.ClientSession(timeout=timeout)
        try:
            callback = await inbox.start()
            await self.post(
                f"/loops/{self.name}",
                {"callback": callback, "seed": self.seed, "fresh": not self.restart},
            )
            await self.loop_until_done()
        finally:
            inbox.close()
            if self.drain > 0:
                await asyncio.sleep(self.drain)
            for timer in self.timers:
                timer.cancel()
            await self.goodbye()
            await inbox.stop()
            await self.session.close()
        self.refused = inbox.refused
        return self.rows

    async def loop_until_done(self) -> None:
        self.t0 = time.monotonic()  # the clock starts at the first send, as the simulator's
        if self.restart:
            self.row(self.now(), "restart", fault="crash")
        loop = asyncio.get_running_loop()
        sends = self.d.start(self.now())
        for req in self.d.awaited():
            if req not in sends:  # in flight before a restart: its answer may still come
                self.arm(loop, req)
        await self.send_all(sends)
        self.end = self.t0 + self.deadline
        while True:
            try:
                if not self.d.awaited():
                    await self.settle()  # a held answer a restart left may still be ready
                if not self.d.awaited():
                    break
                if self.stop.is_set() or time.monotonic() > self.end:
                    self.row(
                        self.now(), "truncated", reason=STOPPED if self.stop.is_set() else DEADLINE
                    )
                    return
                try:
                    event = await asyncio.wait_for(self.events.get(), timeout=0.1)
                except TimeoutError:
                    continue
                if event[0] == "deliver":
                    await self.on_deliver(event[1])
                elif event[0] == "timeout":
                    await self.on_timeout(event[1])
                else:
                    self.row(self.now(), "refused", reason=BAD_ANSWER)
                await self.settle()
            except ReaderFailure:  # the reason is on the reader (`RemoteRun.reader_failure`)
                self.row(self.now(), "truncated", reason=READER_FAILED)
                return
        why = self.d.stalled()  # nothing awaited, nothing to settle: done, unless it says not
        if why is not None:
            self.row(self.now(), "truncated", reason=f"{STALLED}: {why}")


def _in_thread(work: Callable[[threading.Event], T], stop: threading.Event, bound: float) -> T:
    """Run `work` in a thread of its own (its connections and event loop live there: a
    notebook's kernel already runs a loop); an interrupt sets `stop` so it closes cleanly,
    and is passed on once it has, or after `bound` seconds if it has not."""
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["result"] = work(stop)
        except BaseException as exc:  # re-raised in the caller's thread
            out["error"] = exc

    worker = threading.Thread(target=body, name="labkit-remote-loop", daemon=True)
    try:  # an interrupt that lands while the thread starts sets `stop` too
        worker.start()
        while worker.is_alive():  # short waits, so an interrupt is handled at once
            worker.join(0.1)
    except KeyboardInterrupt:
        stop.set()
        if worker.ident is not None:  # started (a join before that would raise)
            worker.join(bound)
        raise
    if "error" in out:
        raise out["error"]
    return out["result"]


def run(
    design: str | Callable[[], Design],
    url: str,
    *,
    ticks: int,
    window: int = 1,
    seed: int = 0,
    store: str | Path | None = None,
    dsn: str | None = None,
    timeout: float | None = None,
    name: str | None = None,
    deadline: float = 60.0,
    poll: float = 0.001,
    connect_timeout: float = 2.0,
    drain: float = 0.0,
    progress: Callable[[dict[str, Any]], None] | None = None,
    stop: threading.Event | None = None,
) -> RemoteRun:
    """Run `design` against the planner at `url` until `ticks` versions are committed and
    nothing is awaited (or `deadline` seconds pass, or the loop stalls: a `truncated` row).

    `window` is the hedge width of `fenced` and the depth of `pipelined`; `seed` seeds each
    request's fate at the service as the simulator's `seed` does; `timeout` defaults to the
    service's (3 mean latencies). The store is the SQLite file `store` (a temporary one if
    None) or PostgreSQL at `dsn`; a store that holds ballots already is restarted from. `name`
    identifies the loop to the service (a restart must reuse it to be owed the old answers).
    `drain` keeps the closed loop listening, refusing late answers, that many seconds.
    `progress` is called with each trace row as it is written (in the loop's thread); setting
    `stop` ends the run early, as an interrupt does (a `truncated` row). Every argument is
    checked before the first call, and a bad one refused in one line naming it; a store another
    run is driving is refused too (`store_claim.StoreBusy`).

    `design` may also be a callable that makes a design object (a reader's own loop,
    `labkit.audit.loop_design.LoopDesign`), called in the loop's thread, whose connections it
    then owns. The object keeps its head where it likes (`window` is its own), so the driver
    writes that head to the head row after every answer, as for an unguarded design, and the
    reader process watches the row.
    """
    if isinstance(design, str):
        check_design(design)
    elif not callable(design):
        raise TypeError(
            f"run(): design must be a design's name or a callable that makes one, "
            f"got {type(design).__name__}"
        )
    url = check_loopback(url)
    ticks = validation.int_arg(ticks, "run(): ticks", low=1)
    window = knobs.count(window, "run(): window", high=knobs.MAX_WINDOW)
    seed = validation.int_arg(seed, "run(): seed")
    deadline = knobs.seconds(deadline, "run(): deadline")
    connect_timeout = knobs.seconds(connect_timeout, "run(): connect_timeout")
    if timeout is not None:
        timeout = knobs.seconds(timeout, "run(): timeout")
    poll = knobs.interval(poll, "run(): poll")
    drain = knobs.seconds(drain, "run(): drain", zero=True)
    slug = design if isinstance(design, str) else "own"
    name = check_loop_name(f"loop-{slug}-{seed}" if name is None else name)
    if store is not None:
        store = knobs.path(store, "run(): store")
    if dsn is not None:
        dsn = validation.text_arg(dsn, "dsn", "run()")
    if store is not None and dsn is not None:
        raise ValueError("run() takes a SQLite store or a PostgreSQL dsn, not both")
    progress = knobs.callback(progress, "run(): progress")
    if stop is not None and not isinstance(stop, threading.Event):
        raise TypeError(f"run(): stop must be a threading.Event or None, got {type(stop).__name__}")
    reported = config(url, timeout=connect_timeout)  # the service answers, or one line now
    if timeout is None:  # the service's own, checked as a caller's would be
        said = reported.get("timeout") if isinstance(reported, dict) else reported
        timeout = knobs.seconds(said, f"the planner at {url} reported a timeout that")
    tmp = (
        tempfile.TemporaryDirectory(prefix="labkit-remote-")
        if store is None and dsn is None
        else None
    )
    path = Path(tmp.name) / "store.db" if tmp is not None else None
    path = store if store is not None else path

    def work(stop: threading.Event) -> RemoteRun:
        with store_claim.claim(path, dsn) as held:
            return drive(stop, held.restart)

    def drive(stop: threading.Event, restart: bool) -> RemoteRun:
        made, mirror_conn = _build(design, window, ticks, path, dsn)
        if mirror_conn is not None:
            head_row.create(mirror_conn, *made.read_head())
        kind = "catalog" if mirror_conn is None else "mirror"
        reader = ReaderProcess(kind, path, dsn=dsn, poll=poll)
        driver = _Driver(
            made,
            mirror_conn,
            url,
            name=name,
            seed=seed,
            ticks=ticks,
            timeout=timeout,
            deadline=deadline,
            connect_timeout=connect_timeout,
            drain=drain,
            progress=progress,
            restart=restart,
            stop=stop,
            reader=reader,
        )
        try:
            rows = asyncio.run(driver.main())
        finally:
            falls = reader.stop(READER_STOP_S)
            _close(made, mirror_conn)
        return RemoteRun(
            made.name,
            url,
            None if tmp is not None else str(path),
            pd.DataFrame(rows, columns=TRACE_COLUMNS),
            summarize_rows(rows),
            falls,
            driver.refused,
            reader.polls,
            reader.first,
            tuple(reader.changes),
            reader.failure,
        )

    # an interrupted loop: a sync's grace, its drain, its goodbye, then its reader's end
    bound = STOP_GRACE_S + drain + connect_timeout + READER_STOP_S + 1.0
    try:
        return _in_thread(work, threading.Event() if stop is None else stop, bound)
    finally:
        if tmp is not None:
            tmp.cleanup()
