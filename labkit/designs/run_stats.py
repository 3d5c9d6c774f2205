"""Run statistics: what one simulated run did, counted from its trace.

`summarize_run` reads a trace of `labkit.designs.simulator.simulate` (one row per event) and
returns a `RunSummary` (commits, accepted responses, rejects by reason, replays, rewinds, kept
versions, latency and wasted planner calls); `summary_table` lays several side by side for a
reader. The counts come from what an independent reader saw, not from what a design claims.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from labkit.catalog.pipeline import HELD
from labkit.catalog.rule import REASONS
from labkit.designs.design import CAS_CONFLICT
from labkit.designs.registry import DISPLAY_NAMES

REJECT_COLUMNS = (*REASONS, "older_updated_at", CAS_CONFLICT)


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
    held: int = 0  # answers a pipelined loop held until the head reached their fence

    def as_dict(self) -> dict[str, Any]:
        """The counts as a plain dict (one row of a table)."""
        return dataclasses.asdict(self)


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
    # column names are text: the keys `summarize_rows` reads
    return summarize_rows([{str(k): v for k, v in r.items()} for r in trace.to_dict("records")])


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


def summarize_rows(rows: Sequence[Mapping[str, Any]]) -> RunSummary:
    """`summarize_run` over the trace's rows before they become a DataFrame (one pass, no
    pandas: a widget pays for this on every change)."""
    reasons = {r: 0 for r in REJECT_COLUMNS}
    counts = {"send": 0, "deliver": 0, "timeout": 0, "crash": 0, "truncated": 0}
    accepted = commits = replays = rewinds = overwrites = held = 0
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
        if event in ("deliver", "settle") and not _missing(row["committed"]):
            if bool(row["committed"]):
                accepted += 1
            elif row["reason"] == HELD:
                held += 1
            else:
                reason = str(row["reason"])
                reasons[reason] = reasons.get(reason, 0) + 1
        head = int(row["head_version"])
        if bool(row["head_changed"]):
            commits += 1
            kept.seen(
                head,
                t,
                rewind=bool(row["rewind"]),
                overwrite=bool(row["overwrite"]),
                new=head > max_head,
            )
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
        held=held,
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
        rows.append(
            {
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
            }
        )
    return pd.DataFrame(rows)
