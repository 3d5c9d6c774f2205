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

`simulate` returns the trace; `summarize_run` counts what happened in it; `run` returns both.
A run that hits `max_events` before it finishes ends with a ``truncated`` event row, its
summary says ``truncated=True`` and `run` warns.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import numbers
import random
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from labkit.catalog.loop import REASONS, Response
from labkit.designs.design import (
    CAS_CONFLICT,
    DISPLAY_NAMES,
    Design,
    Request,
    check_design,
    make_design,
)
from labkit.designs.planner import HeadReader, respond

FAULTS: tuple[str, ...] = (
    "inverted",
    "duplicate",
    "stale_body",
    "retry_after_commit",
    "stall",
    "crash",
)
TARGETED: tuple[str, ...] = ("inverted", "stale_body", "retry_after_commit", "stall", "crash")

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
REJECT_COLUMNS = (*REASONS, "older_updated_at", CAS_CONFLICT)


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
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if at_least is not None and value < at_least:
        raise ValueError(f"{name} must be >= {at_least}, got {value!r}")
    return int(value)


def _check_number(name: str, value: Any, rule: str, ok: Callable[[float], bool]) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
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
        raise ValueError(f"unknown fault class(es) {', '.join(bad)}; expected some of "
                         f"{', '.join(FAULTS)}")
    return tuple(f for f in FAULTS if f in faults)


class _Run:
    """One simulation: an event heap, the planner's fault injection and an independent reader."""

    def __init__(self, design: Design, faults: frozenset[str], seed: int, cfg: PlannerConfig):
        self.d, self.faults, self.seed, self.cfg = design, faults, seed, cfg
        rng = random.Random(seed)
        self.skews = [rng.uniform(-cfg.clock_skew, cfg.clock_skew) for _ in range(cfg.hosts)]
        self.fast_host = max(range(cfg.hosts), key=lambda h: self.skews[h])
        self.targets = _pick_targets(rng, faults, cfg.ticks)
        self.hit: set[str] = set()
        self.mu = math.log(cfg.latency) - cfg.sigma**2 / 2
        self.heap: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.held: list[tuple[int, Request, Response, str, random.Random]] = []
        self.generation = 0
        self.down_until: float | None = None
        self.rows: list[dict[str, Any]] = []
        self.reader = HeadReader(design)
        self.truncated = False

    # -- event plumbing -------------------------------------------------------------------
    def push(self, t: float, kind: str, payload: Any) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), kind, payload))

    def lat(self, rng: random.Random) -> float:
        return rng.lognormvariate(self.mu, self.cfg.sigma)

    def row(self, t: float, event: str, req: Request | None = None, **extra: Any) -> None:
        seen = self.reader.look()
        rec: dict[str, Any] = dict.fromkeys(COLUMNS)
        rec.update(t=t, design=self.d.name, event=event, committed=None, fault=None)
        if req is not None:
            rec.update(
                request_id=req.request_id,
                ballot_id=req.ballot_id,
                base_version=req.base_version,
                observed_watermark=req.observed_watermark,
                replay_of=req.replay_of,
            )
        rec.update(extra)
        rec.update(head_version=seen.version, rewind=seen.rewind, overwrite=seen.overwrite,
                   head_changed=seen.changed)
        self.rows.append(rec)

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
            self.release(t)
        if self.heap or self.held:
            self.truncated = True
            self.row(self.rows[-1]["t"] if self.rows else 0.0, "truncated")
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


def _pick_targets(rng: random.Random, faults: frozenset[str], ticks: int) -> dict[str, int]:
    """Choose, per targeted fault, the base version whose first request it hits."""
    hi = max(1, ticks - 3)
    pool = list(range(1, hi + 1))
    rng.shuffle(pool)
    targets = {}
    for i, fault in enumerate(TARGETED):
        targets[fault] = pool[i % len(pool)] if fault in faults else 0
    return targets


@dataclass(frozen=True)
class RunSummary:
    """The counts of one simulated run (see `summarize_run`).

    Times are in simulated time units (the planner's mean latency is 1 unit). `kept` counts
    the versions a reader saw appear for the first time and never saw taken back;
    `throughput` is kept versions per unit of simulated time; `latency_p50`/`latency_p95`
    are the median and 95th percentile, over kept versions, of the time from the loop's first
    request for that version to its commit; `wasted_per_commit` is planner calls that did not
    end in a kept version, per kept version.
    """

    design: str
    requests: int
    responses: int
    accepted: int
    commits: int
    rejects: Mapping[str, int]
    replays: int
    timeouts: int
    crashes: int
    rewinds: int
    overwrites: int
    final_head: int
    max_head: int
    sim_time: float
    throughput: float
    truncated: bool = False
    kept: int = 0
    latency_p50: float = 0.0
    latency_p95: float = 0.0
    wasted_per_commit: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The counts as a plain dict (one row of a table)."""
        return dataclasses.asdict(self)


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
    if sim.truncated:
        warnings.warn(
            f"simulate({design!r}) stopped at max_events={cfg.max_events} before the run "
            "finished; the trace is truncated (raise max_events)",
            RuntimeWarning,
            stacklevel=2,
        )
    trace = pd.DataFrame(rows, columns=COLUMNS)
    return SimulationRun(design, chosen, seed, cfg, trace, _summarize_rows(rows))


def simulate(
    design: str,
    faults: Collection[str] = (),
    seed: int = 0,
    *,
    db_path: str | Path | None = None,
    **knobs: Any,
) -> pd.DataFrame:
    """The trace of `run(design, faults, seed, **knobs)`: one row per event (`COLUMNS`).

    Count it with `summarize_run`.
    """
    return run(design, faults, seed, db_path=db_path, **knobs).trace


def summarize_run(trace: pd.DataFrame) -> RunSummary:
    """Counts of one run: commits, accepted responses, rejects by reason, replays, rewinds...

    `rewinds` counts the falls an independent reader saw: events at which the head it reads is
    lower than at the event before (the trace's `rewind` column marks every event at which it
    is still below the highest version it has seen).

    `commits` counts the head changes an independent reader saw, not what the design said it
    did, so "each commit is exactly one accepted response" is a real check (a design that
    accepts a body identical to the head commits nothing). `kept` leaves out every change
    that went down (a rewind), wrote over a version already seen (an overwrite) or was later
    taken back by one; `throughput` is `kept` per unit of simulated time, up to the moment the
    last kept version appeared. Latency runs from the first request the loop sent on version
    v - 1 to the commit of v; wasted calls are planner calls (`send` events) beyond one per kept
    version.
    """
    return _summarize_rows(trace.to_dict("records"))


@dataclass
class _Kept:
    """Versions seen for the first time and not taken back, with their latency, in order."""

    first_ask: dict[int, float] = dataclasses.field(default_factory=dict)
    versions: list[tuple[int, float, float]] = dataclasses.field(default_factory=list)

    def asked(self, base: int, t: float) -> None:
        """A request based on version `base` was sent at `t` (a request for `base + 1`)."""
        self.first_ask.setdefault(base, t)

    def seen(self, version: int, t: float, *, rewind: bool, overwrite: bool, new: bool) -> None:
        """The reader saw the head at `version` at `t` after a change."""
        if rewind or overwrite:  # take back every kept version at or above what was undone
            floor = version if overwrite else version + 1
            while self.versions and self.versions[-1][0] >= floor:
                self.versions.pop()
        elif new:
            ask = self.first_ask.get(version - 1, t)
            self.versions.append((version, t, t - ask))

    @property
    def last_time(self) -> float:
        return self.versions[-1][1] if self.versions else 0.0

    @property
    def latencies(self) -> list[float]:
        return [lat for _, _, lat in self.versions]


def _nearest_rank(values: Sequence[float], q: float) -> float:
    """The `q` quantile by nearest rank (an observed value, so a small trace checks by hand)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _summarize_rows(rows: Sequence[Mapping[str, Any]]) -> RunSummary:
    """`summarize_run` over the trace's rows before they become a DataFrame (one pass, no
    pandas: a widget pays for this on every change)."""
    reasons = {r: 0 for r in REJECT_COLUMNS}
    counts = {"send": 0, "deliver": 0, "timeout": 0, "crash": 0, "truncated": 0}
    accepted = commits = replays = rewinds = overwrites = 0
    sim_time = 0.0
    max_head = previous = 0
    kept = _Kept()
    for row in rows:
        event, t = row["event"], float(row["t"])
        if event in counts:
            counts[event] += 1
        if event == "send":
            kept.asked(int(row["base_version"]), t)
            replays += not _missing(row["replay_of"])
        if event == "deliver" and not _missing(row["committed"]):
            if bool(row["committed"]):
                accepted += 1
            else:
                reason = str(row["reason"])
                reasons[reason] = reasons.get(reason, 0) + 1
        head = int(row["head_version"])
        if bool(row["head_changed"]):
            commits += 1
            kept.seen(head, t, rewind=bool(row["rewind"]), overwrite=bool(row["overwrite"]),
                      new=head > max_head)
        rewinds += head < previous  # a fall the reader saw, counted once, not per event below
        previous = head
        overwrites += bool(row["overwrite"])
        sim_time = max(sim_time, t)
        max_head = max(max_head, head)
    n_kept = len(kept.versions)
    return RunSummary(
        design=str(rows[0]["design"]) if rows else "",
        requests=counts["send"],
        responses=counts["deliver"],
        accepted=accepted,
        commits=commits,
        rejects=reasons,
        replays=replays,
        timeouts=counts["timeout"],
        crashes=counts["crash"],
        rewinds=rewinds,
        overwrites=overwrites,
        final_head=int(rows[-1]["head_version"]) if rows else 0,
        max_head=max_head,
        sim_time=sim_time,
        throughput=n_kept / kept.last_time if kept.last_time > 0 else 0.0,
        truncated=counts["truncated"] > 0,
        kept=n_kept,
        latency_p50=_nearest_rank(kept.latencies, 0.5),
        latency_p95=_nearest_rank(kept.latencies, 0.95),
        wasted_per_commit=(counts["send"] - n_kept) / n_kept if n_kept else float(counts["send"]),
    )


def _missing(value: Any) -> bool:
    """None or NaN (a DataFrame turns a missing int into NaN)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def summary_table(summaries: Mapping[str, RunSummary]) -> pd.DataFrame:
    """One row per design from `summarize_run` results, rejects split by reason, for reading.

    Times are in simulated time units (mean planner latency = 1); throughput is kept versions
    per unit; latencies run from a version's first request to its commit (p50 = median).
    """
    rows = []
    for design, s in summaries.items():
        rows.append({
            "design": design,
            "name": DISPLAY_NAMES.get(design, design),
            "commits": s.commits,
            "accepted": s.accepted,
            "kept": s.kept,
            **{f"rejected: {r.replace('_', ' ')}": s.rejects.get(r, 0) for r in REJECT_COLUMNS},
            "replays": s.replays,
            "rewinds": s.rewinds,
            "overwrites": s.overwrites,
            "final head": s.final_head,
            "throughput (kept commits per time unit)": round(s.throughput, 2),
            "latency p50": round(s.latency_p50, 2),
            "latency p95": round(s.latency_p95, 2),
            "wasted calls / commit": round(s.wasted_per_commit, 2),
        })
    return pd.DataFrame(rows)
