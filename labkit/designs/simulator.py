"""A seeded discrete-event simulation of a remote planner: at-least-once, unordered, slow.

Every request's fate (host, latency, duplicate) comes from its own `Random(f"{seed}:{id}")`,
so the n-th planner call meets the same planner in every design. Targeted faults hit the first
request carrying a base version the random seed picked. Fault classes (`FAULTS`):

- ``inverted``: the planner sits on the request and finishes it only once the catalog head is
  two past the request's base; the body is still computed from that old base, and the host
  with the fastest clock stamps ``updated_at`` when it finishes (Article 2's tick-12 story).
- ``duplicate``: each response is delivered a second time with probability ``duplicate_rate``
  (independent latency, same body and stamp).
- ``stale_body``: the planner computes the body from the version *before* the request's base.
- ``retry_after_commit``: the response is delivered normally, then redelivered (same body and
  stamp) once the head is two past its base, i.e. after it committed and a later tick did.
- ``stall``: the response is produced on time but its delivery stalls for ``stall_time``.
- ``crash``: half a latency after sending the request, the loop process dies; it restarts
  ``restart_delay`` later from its store (deliveries during the outage are redelivered then).

A design that holds answers back (`pipelined`) decides them after each event, once the head
reaches them: one ``settle`` row per decision, so a reader sees one commit per row.

`simulate` returns the trace; `labkit.designs.run_stats.summarize_run` counts what happened
in it; `run` returns both. A run that hits `max_events` before it finishes ends with a
``truncated`` event row, its summary says ``truncated=True`` and `run` warns; so does a run
whose design cannot move although it has not finished (`Design.stalled`), the row's reason
``stalled: <why>``.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import random
import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from labkit import validation
from labkit.catalog.loop import Response
from labkit.designs.design import Design, Request
from labkit.designs.planner import Glance, HeadReader, draw_latency, host_skews, respond
from labkit.designs.registry import check_design, make_design
from labkit.designs.run_stats import RunSummary, summarize_rows

FAULTS: tuple[str, ...] = (
    "inverted",
    "duplicate",
    "stale_body",
    "retry_after_commit",
    "stall",
    "crash",
)
TARGETED: tuple[str, ...] = ("inverted", "stale_body", "retry_after_commit", "stall", "crash")

STALLED = "stalled"  # the reason on the `truncated` row of a run its design could not move
COLUMNS = [
    "t",
    "design",
    "event",
    "request_id",
    "ballot_id",
    "base_version",
    "observed_watermark",
    "host",
    "updated_at",
    "fault",
    "committed",
    "reason",
    "replay_of",
    "head_version",
    "rewind",
    "overwrite",
    "head_changed",
]


def trace_row(
    columns: list[str],
    t: float,
    design: str,
    event: str,
    req: Request | None,
    seen: Glance,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """One row of a run's trace: the event, its request's fields, `extra`, then what the
    reader saw right after (`seen`); the simulator and the real loop write the same rows."""
    rec: dict[str, Any] = dict.fromkeys(columns)
    rec.update(t=t, design=design, event=event, committed=None, fault=None)
    if req is not None:
        rec.update(
            request_id=req.request_id,
            ballot_id=req.ballot_id,
            base_version=req.base_version,
            observed_watermark=req.observed_watermark,
            replay_of=req.replay_of,
        )
    rec.update(extra)
    rec.update(
        head_version=seen.version,
        rewind=seen.rewind,
        overwrite=seen.overwrite,
        head_changed=seen.changed,
    )
    return rec


@dataclass(frozen=True)
class PlannerConfig:
    """Knobs of the simulated planner and loop (times are in units of mean latency = 1)."""

    ticks: int = 20
    latency: float = 1.0
    sigma: float = 0.5
    duplicate_rate: float = 0.25
    clock_skew: float = 0.5
    hosts: int = 3
    window: int = 3
    timeout: float | None = None
    stall_time: float | None = None
    restart_delay: float | None = None
    max_events: int = 5000

    def __post_init__(self) -> None:
        """Refuse a knob that would make the run meaningless, naming it and its value."""
        for name in ("ticks", "hosts", "window", "max_events"):
            _check_int(name, getattr(self, name), at_least=1)
        _check_number("latency", self.latency, "> 0", lambda x: x > 0)
        _check_number("sigma", self.sigma, ">= 0", lambda x: x >= 0)
        _check_number("duplicate_rate", self.duplicate_rate, "in [0, 1]", lambda x: 0 <= x <= 1)
        _check_number("clock_skew", self.clock_skew, ">= 0", lambda x: x >= 0)
        if self.timeout is not None:
            _check_number("timeout", self.timeout, "> 0", lambda x: x > 0)
        for name in ("stall_time", "restart_delay"):
            if getattr(self, name) is not None:
                _check_number(name, getattr(self, name), ">= 0", lambda x: x >= 0)

    @property
    def timeout_(self) -> float:
        return 3.0 * self.latency if self.timeout is None else self.timeout

    @property
    def stall_(self) -> float:
        return 8.0 * self.latency if self.stall_time is None else self.stall_time

    @property
    def restart_(self) -> float:
        return 0.5 * self.latency if self.restart_delay is None else self.restart_delay


KNOBS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(PlannerConfig))


def _check_int(name: str, value: Any, *, at_least: int | None = None) -> int:
    if not validation.is_integral(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if at_least is not None and value < at_least:
        raise ValueError(f"{name} must be >= {at_least}, got {value!r}")
    return int(value)


def _check_number(name: str, value: Any, rule: str, ok: Callable[[float], bool]) -> None:
    if not validation.is_real(value):
        raise ValueError(f"{name} must be a number {rule}, got {value!r}")
    if not math.isfinite(value) or not ok(value):
        raise ValueError(f"{name} must be a finite number {rule}, got {value!r}")


def check_faults(faults: Any) -> tuple[str, ...]:
    """The fault classes in `faults`, in `FAULTS` order; a clear error for anything else.

    A bare string is refused rather than read letter by letter.
    """
    if isinstance(faults, str | bytes):
        raise ValueError(
            f"faults must be a collection of fault class names, e.g. [{faults!r}], "
            f"not the string {faults!r}"
        )
    if not isinstance(faults, Collection):
        raise ValueError(f"faults must be a collection of fault class names, got {faults!r}")
    bad = sorted({repr(f) for f in faults if not isinstance(f, str) or f not in FAULTS})
    if bad:
        raise ValueError(
            f"unknown fault class(es) {', '.join(bad)}; expected some of {', '.join(FAULTS)}"
        )
    return tuple(f for f in FAULTS if f in faults)


class _Run:
    """One simulation: an event heap, the planner's fault injection and an independent reader."""

    def __init__(self, design: Design, faults: frozenset[str], seed: int, cfg: PlannerConfig):
        self.d, self.faults, self.seed, self.cfg = design, faults, seed, cfg
        rng = random.Random(seed)
        self.skews = host_skews(rng, cfg.hosts, cfg.clock_skew)
        self.fast_host = max(range(cfg.hosts), key=lambda h: self.skews[h])
        self.targets = pick_targets(rng, faults, cfg.ticks)
        self.hit: set[str] = set()
        self.heap: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.held: list[tuple[int, Request, Response, str, random.Random]] = []
        self.generation = 0
        self.down_until: float | None = None
        self.rows: list[dict[str, Any]] = []
        self.reader = HeadReader(design)
        self.truncated = False
        self.stalled: str | None = None

    # -- event plumbing -------------------------------------------------------------------
    def push(self, t: float, kind: str, payload: Any) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), kind, payload))

    def lat(self, rng: random.Random) -> float:
        return draw_latency(rng, self.cfg.latency, self.cfg.sigma)

    def row(self, t: float, event: str, req: Request | None = None, **extra: Any) -> None:
        self.rows.append(trace_row(COLUMNS, t, self.d.name, event, req, self.reader.look(), extra))

    # -- the planner ----------------------------------------------------------------------
    def target(self, fault: str, req: Request) -> bool:
        if fault not in self.faults or fault in self.hit:
            return False
        if req.base_version < self.targets[fault]:
            return False
        self.hit.add(fault)
        return True

    def send(self, t: float, req: Request) -> None:
        rng = random.Random(f"{self.seed}:{req.request_id}")
        host = rng.randrange(self.cfg.hosts)
        latency, latency2 = self.lat(rng), self.lat(rng)
        dup = "duplicate" in self.faults and rng.random() < self.cfg.duplicate_rate
        stale = req.base_version >= 1 and self.target("stale_body", req)
        fault = "stale_body" if stale else None
        if self.target("inverted", req):
            resp = respond(self.d, req, None, stale=stale)
            self.held.append((resp.base_version + 2, req, resp, "inverted", rng))
            fault = "inverted"
        else:
            done = t + latency
            resp = respond(self.d, req, done + self.skews[host], stale=stale)
            if self.target("stall", req):
                fault = "stall"
                self.push(done + self.cfg.stall_, "deliver", (req, resp, host, "stall"))
            else:
                self.push(done, "deliver", (req, resp, host, fault))
            if dup:
                self.push(t + latency2, "deliver", (req, resp, host, "duplicate"))
            if self.target("retry_after_commit", req):
                fault = fault or "retry_after_commit"
                self.held.append((resp.base_version + 2, req, resp, "retry_after_commit", rng))
        self.push(t + self.cfg.timeout_, "timeout", (req, self.generation))
        if self.target("crash", req):
            self.push(t + latency / 2, "crash", None)
            fault = fault or "crash"
        self.row(t, "send", req, host=host, fault=fault)

    def release(self, t: float, force: bool = False) -> None:
        if not self.held:
            return
        version = self.d.read_head()[0]
        keep = []
        for item in self.held:
            until, req, resp, fault, rng = item
            if not force and version < until:
                keep.append(item)
                continue
            done = t + self.lat(rng)
            if fault == "inverted":  # finished late, stamped late by the fastest clock
                resp = dataclasses.replace(resp, updated_at=done + self.skews[self.fast_host])
                host = self.fast_host
            else:
                host = None
            self.push(done, "deliver", (req, resp, host, fault))
        self.held = keep

    # -- the driver -----------------------------------------------------------------------
    def run(self) -> list[dict[str, Any]]:
        """Play every event until nothing is left or `max_events`; the trace's rows."""
        for req in self.d.start(0.0):
            self.send(0.0, req)
        events = 0
        while events < self.cfg.max_events:
            if not self.heap:
                if not self.held:
                    break
                self.release(self.rows[-1]["t"] if self.rows else 0.0, force=True)
                continue
            t, _, kind, payload = heapq.heappop(self.heap)
            events += 1
            if self.down_until is not None and kind == "deliver":
                self.push(self.down_until + 1e-6, kind, payload)  # redelivered after restart
                continue
            getattr(self, f"on_{kind}")(t, payload)
            if self.down_until is None:
                self.settle(t)
            self.release(t)
        end = self.rows[-1]["t"] if self.rows else 0.0
        if self.heap or self.held:
            self.truncated = True
            self.row(end, "truncated")
        elif (why := self.d.stalled()) is not None:  # nothing left to happen, yet not done
            self.truncated = True
            self.stalled = why
            self.row(end, "truncated", reason=f"{STALLED}: {why}")
        return self.rows

    def on_deliver(self, t: float, payload: Any) -> None:
        req, resp, host, fault = payload
        decision = self.d.on_response(req, resp, t)
        self.row(
            t,
            "deliver",
            req,
            ballot_id=req.ballot_id,
            base_version=resp.base_version,
            host=host,
            updated_at=resp.updated_at,
            fault=fault,
            committed=decision.committed,
            reason=decision.reason,
        )
        for nxt in decision.sends:
            self.send(t, nxt)

    def settle(self, t: float) -> None:
        """Held answers the head has reached are decided, one row (one commit) each."""
        while (settled := self.d.settle(t)) is not None:
            req, decision = settled
            self.row(t, "settle", req, committed=decision.committed, reason=decision.reason)
            for nxt in decision.sends:
                self.send(t, nxt)

    def on_timeout(self, t: float, payload: Any) -> None:
        req, generation = payload
        if generation != self.generation or self.down_until is not None:
            return
        if all(a.request_id != req.request_id for a in self.d.awaited()):
            return
        sends = self.d.on_timeout(req, t)
        self.row(t, "timeout", req)
        for nxt in sends:
            self.send(t, nxt)

    def on_crash(self, t: float, payload: Any) -> None:
        self.generation += 1
        self.down_until = t + self.cfg.restart_
        self.row(t, "crash", fault="crash")
        self.push(self.down_until, "restart", None)

    def on_restart(self, t: float, payload: Any) -> None:
        self.down_until = None
        sends = self.d.crash_restart(t)
        self.row(t, "restart", fault="crash")
        for req in self.d.awaited():
            if req not in sends:
                self.push(t + self.cfg.timeout_, "timeout", (req, self.generation))
        for req in sends:
            self.send(t, req)


def pick_targets(rng: random.Random, faults: frozenset[str], ticks: int) -> dict[str, int]:
    """Choose, per targeted fault, the base version whose first request it hits."""
    hi = max(1, ticks - 3)
    pool = list(range(1, hi + 1))
    rng.shuffle(pool)
    targets = {}
    for i, fault in enumerate(TARGETED):
        targets[fault] = pool[i % len(pool)] if fault in faults else 0
    return targets


@dataclass(frozen=True)
class SimulationRun:
    """One `run`: what was asked (design, faults, seed, knobs), the trace and its summary."""

    design: str
    faults: tuple[str, ...]
    seed: int
    config: PlannerConfig
    trace: pd.DataFrame
    summary: RunSummary


def run(
    design: str,
    faults: Collection[str] = (),
    seed: int = 0,
    *,
    db_path: str | Path | None = None,
    **knobs: Any,
) -> SimulationRun:
    """Run `design` until its catalog reaches version `ticks` and every message has landed.

    `knobs` are `PlannerConfig` fields (ticks, latency, window, ...), each checked. The trace
    has one row per event (`COLUMNS`); deterministic for a given seed and knobs. The ballot
    designs keep their store in memory unless `db_path` names a new SQLite file; then a
    `crash` closes the connection and the restarted loop reopens it. Hitting `max_events`
    before the run is over warns and flags the trace and summary as truncated.
    """
    check_design(design)
    chosen = check_faults(faults)
    seed = _check_int("seed", seed)
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise TypeError(f"unknown simulator knob(s) {unknown}; expected some of {', '.join(KNOBS)}")
    cfg = PlannerConfig(**knobs)
    if db_path is not None and Path(db_path).exists():
        raise ValueError(f"{db_path}: simulate wants a new file for its store, not an old one")
    made = make_design(design, window=cfg.window, ticks=cfg.ticks, path=db_path)
    sim = _Run(made, frozenset(chosen), seed, cfg)
    rows = sim.run()
    if sim.stalled is not None:
        warnings.warn(
            f"simulate({design!r}) stalled before the run finished: {sim.stalled}",
            RuntimeWarning,
            stacklevel=2,
        )
    elif sim.truncated:
        warnings.warn(
            f"simulate({design!r}) stopped at max_events={cfg.max_events} before the run "
            "finished; the trace is truncated (raise max_events)",
            RuntimeWarning,
            stacklevel=2,
        )
    return SimulationRun(design, chosen, seed, cfg, trace_frame(rows), summarize_rows(rows))


def trace_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The trace as a DataFrame (`COLUMNS`): the same frame as `pd.DataFrame(rows)`, built
    column by column, which costs a third less (a widget simulates five designs per seed)."""
    if not rows:  # no values to infer a dtype from: pandas' own empty frame
        return pd.DataFrame(rows, columns=COLUMNS)
    return pd.DataFrame({c: [row[c] for row in rows] for c in COLUMNS}, columns=COLUMNS)


def simulate(
    design: str,
    faults: Collection[str] = (),
    seed: int = 0,
    *,
    db_path: str | Path | None = None,
    **knobs: Any,
) -> pd.DataFrame:
    """The trace of `run(design, faults, seed, **knobs)`: one row per event (`COLUMNS`).

    Count it with `labkit.designs.run_stats.summarize_run`.
    """
    return run(design, faults, seed, db_path=db_path, **knobs).trace
