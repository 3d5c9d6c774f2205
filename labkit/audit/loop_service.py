"""`audit loop --service VERSIONS`: a reader's own loop run for real, Article 2's denominator.

The search (`labkit.audit.loop`) proves which arrival orders drop the head; it cannot say how
often a real run meets one. Here the loop (`LoopDesign`, the same driver) runs against the
planner service of part three (`labkit.remote.serve`, every planner fault on, as notebook 09
runs it) until its head reaches VERSIONS, and a second reader process
(`labkit.remote.head_watch`) polls the head the whole time: the falls it saw, counted against
its number of reads. The loop keeps its head where it likes, so the driver copies it to one
head row after every answer (`labkit.remote.head_row`), and waits for the reader around any
write that lowers it, so no fall slips between two reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from labkit.audit.findings import Finding
from labkit.audit.loop_design import LoopDesign
from labkit.remote.driver import run
from labkit.remote.faults import SERVICE_FAULTS
from labkit.remote.service import serve

LATENCY_S = 0.02  # the service's mean latency (notebook 09's); a loop gives up at three of them
MAX_VERSIONS = 1000
MIN_DEADLINE_S = 1.0  # the least the real run is given, whatever the search left
OBSERVER = "reader process"


def run_on_service(
    factory: Callable[[Any], Any],
    versions: int,
    *,
    window: int,
    seed: int,
    until: float,
) -> dict[str, Any]:
    """In the walled child: a new loop from `factory` run against a new service until its head
    reaches `versions` (or the monotonic time `until`), as data: the reads, the falls (seconds
    since the start, head before, head after), the head reached and how the run ended."""

    def design() -> LoopDesign:  # made in the driver's thread, which then owns its connections
        return LoopDesign(factory, window=window, ticks=versions)

    deadline = max(until - time.monotonic(), MIN_DEADLINE_S)
    with serve(SERVICE_FAULTS, seed=seed, latency=LATENCY_S) as url:
        done = run(design, url, ticks=versions, seed=seed, deadline=deadline, name="audit-loop")
    start = float(done.trace["wall"].min()) if len(done.trace) else 0.0
    ends = done.trace["event"].tolist()[-1:] if len(done.trace) else []
    return {
        "versions": versions,
        "seed": seed,
        "faults": list(SERVICE_FAULTS),
        "head": int(done.trace["head_version"].iloc[-1]) if len(done.trace) else 0,
        "reads": done.reader_polls,
        "falls": [[round(f.wall - start, 6), f.before, f.after] for f in done.reader_falls],
        "changes": [[round(c.wall - start, 6), c.before, c.after] for c in done.reader_changes],
        "first": done.reader_first,
        "truncated": ends == ["truncated"],
        "reader_failure": done.reader_failure,
    }


def findings(target: str, ran: dict[str, Any]) -> list[Finding]:
    """One `fall` per fall the reader process saw, each against its number of reads."""
    falls, reads = ran["falls"], ran["reads"]
    return [
        Finding(
            "fall",
            float(at),
            f"{target}: on the service the {OBSERVER} saw the head fall from {before} to {after} "
            f"{at:.3f} s into the run (fall {i} of {len(falls)} in {reads:,} reads)",
            observer=OBSERVER,
            details={"before": before, "after": after, "reads": reads, "service": True},
        )
        for i, (at, before, after) in enumerate(falls, start=1)
    ]


def summary(ran: dict[str, Any]) -> dict[str, Any]:
    """The real run's measurements for the report's summary (`service`)."""
    falls = len(ran["falls"])
    return {
        "versions": ran["versions"],
        "seed": ran["seed"],
        "faults": ran["faults"],
        "head": ran["head"],
        "reads": ran["reads"],
        "falls": falls,
        "falls_per_1000_reads": round(1000 * falls / ran["reads"], 3) if ran["reads"] else None,
        "finished": not ran["truncated"],
        "reader_failure": ran["reader_failure"],
        "changes": ran["changes"],
        "first": ran["first"],
    }
