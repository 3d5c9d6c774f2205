"""A real run seen from outside: its requests as lanes, built row by row while `run` reports
them, and the head as the independent reader process saw it, on the trace's clock.

`Lanes` takes the rows `labkit.remote.run` passes to its `progress` callback (from the loop's
thread) and answers, at any moment, which requests are in flight, which were given up and which
were answered, and how; a widget draws `Lanes.snapshot()` while the run goes. `reader_trace`
turns a finished run's reader-process changes into a trace the part-two panels draw.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from labkit import validation
from labkit.remote.driver import RemoteRun
from labkit.remote.head_watch import Fall

COMMIT = "commit"


@dataclass
class Lane:
    """One request: when it was sent (seconds since the run's start), what it carried, the
    fault the service drew for it, when the loop gave up on it, and every answer it got as
    (t, outcome), outcome "commit" or the refusal's reason."""

    request_id: int
    base_version: int
    sent: float
    ballot_id: int | None = None
    host: int | None = None
    fault: str | None = None
    replay_of: int | None = None
    gave_up: float | None = None
    answers: list[tuple[float, str]] = field(default_factory=list)

    @property
    def in_flight(self) -> bool:
        """Sent, not answered yet (a request the loop gave up on may still be answered)."""
        return not self.answers

    @property
    def committed(self) -> bool:
        return any(outcome == COMMIT for _, outcome in self.answers)


@dataclass(frozen=True)
class LaneView:
    """What `Lanes.snapshot` hands a drawing: the lanes, the head after each event as the
    loop's reader read it (t, version), the run's clock now, and whether the run ended."""

    lanes: tuple[Lane, ...]
    heads: tuple[tuple[float, int], ...]
    now: float
    done: bool
    faults_switched: tuple[tuple[float, tuple[str, ...]], ...] = ()

    @property
    def in_flight(self) -> int:
        return sum(lane.in_flight for lane in self.lanes)

    @property
    def head(self) -> int:
        return self.heads[-1][1] if self.heads else 0

    @property
    def falls(self) -> int:
        """Falls of the head after an event (what the trace counts as rewinds)."""
        return sum(b[1] < a[1] for a, b in zip(self.heads, self.heads[1:], strict=False))


def _opt_int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


class Lanes:
    """The requests of one run so far, fed one trace row at a time (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lanes: dict[int, Lane] = {}
        self._heads: list[tuple[float, int]] = []
        self._switched: list[tuple[float, tuple[str, ...]]] = []
        self._t0_wall: float | None = None
        self._last_t = 0.0
        self.done = False

    def add(self, row: dict[str, Any]) -> None:
        """Take one trace row (the `progress` callback of `labkit.remote.run`)."""
        with self._lock:
            t = float(row["t"])
            self._last_t = max(self._last_t, t)
            if self._t0_wall is None and row.get("wall") is not None:
                self._t0_wall = float(row["wall"]) - t
            rid = _opt_int(row.get("request_id"))
            event = row["event"]
            if event == "send" and rid is not None:
                self._lanes[rid] = Lane(
                    rid,
                    int(row["base_version"]),
                    t,
                    ballot_id=_opt_int(row.get("ballot_id")),
                    host=_opt_int(row.get("host")),
                    fault=row.get("fault"),
                    replay_of=_opt_int(row.get("replay_of")),
                )
            elif rid is not None and rid in self._lanes:
                lane = self._lanes[rid]
                if event == "timeout" and lane.gave_up is None:
                    lane.gave_up = t
                elif event in ("deliver", "settle") and row.get("committed") is not None:
                    outcome = COMMIT if row["committed"] else str(row.get("reason"))
                    lane.answers.append((t, outcome))
            self._heads.append((t, int(row["head_version"])))

    def switched(self, faults: tuple[str, ...]) -> None:
        """Note that the faults were switched to `faults` now (drawn as a mark on the head)."""
        with self._lock:
            self._switched.append((self._clock(), tuple(faults)))

    def finish(self) -> None:
        with self._lock:
            self.done = True

    def _clock(self) -> float:
        if self._t0_wall is None:
            return self._last_t
        return max(self._last_t, time.time() - self._t0_wall)

    def snapshot(self) -> LaneView:
        """A copy of everything so far, safe to draw while rows keep arriving."""
        with self._lock:
            lanes = tuple(
                Lane(**{**lane.__dict__, "answers": list(lane.answers)})
                for lane in self._lanes.values()
            )
            now = self._last_t if self.done else self._clock()
            return LaneView(lanes, tuple(self._heads), now, self.done, tuple(self._switched))


def falls_text(falls: Sequence[Fall], most: int | None = None) -> str:
    """The falls a reader process saw, as "v5 → v2, v7 → v6" ("none" if it saw none); with
    `most`, the first `most` and how many more."""
    if most is not None:
        most = validation.int_arg(most, "falls_text(): most", low=0)
    shown = falls if most is None else falls[:most]
    text = ", ".join(f"v{f.before} → v{f.after}" for f in shown) or "none"
    return text + (f" and {len(falls) - len(shown)} more" if len(falls) > len(shown) else "")


def reader_trace(result: RemoteRun) -> pd.DataFrame:
    """The head as the reader process saw it, as a trace (`t`, `design`, `event`, `committed`,
    `head_version`, `rewind`) on the run's clock: its wall-clock changes moved by the offset
    between the trace's `wall` and `t` columns. What `rewind_panels_figure` draws."""
    trace = result.trace
    if trace.empty:
        raise ValueError(f"run of {result.design!r} has no trace rows to put the reader on")
    offset = statistics.median((trace["wall"] - trace["t"]).astype(float))
    rows = [(0.0, result.reader_first, False)]
    seen = result.reader_first
    for change in result.reader_changes:
        rows.append((max(0.0, change.wall - offset), change.after, change.after < seen))
        seen = max(seen, change.after)
    end = float(trace["t"].max())
    rows.append((max(end, rows[-1][0]), rows[-1][1], False))
    return pd.DataFrame(
        {
            "t": [r[0] for r in rows],
            "design": result.design,
            "event": "read",
            "committed": None,
            "head_version": [r[1] for r in rows],
            "rewind": [r[2] for r in rows],
        }
    )
