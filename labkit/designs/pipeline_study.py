"""What notebook 05b (pipelined ballots) measures and draws: a run read as lanes (one
per request, from its send to its commit, refusal, give-up or flush), the depth comparison of
`ballot`, `fenced` and `pipelined` as W grows, and part one's frontier beside the hold's.

The figure (`labkit.plots.pipelined`), the widget (`labkit.widgets.pipelined`) and
the notebook all read the same functions, so the numbers they show agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

import labkit.catalog.hold as hold
import labkit.frontier.log as part_one
from labkit.catalog.loop import Response
from labkit.designs.design import Decision, Request
from labkit.designs.pipelined import PipelinedDesign
from labkit.designs.planner import respond
from labkit.designs.registry import DISPLAY_NAMES, spec
from labkit.designs.run_stats import RunSummary
from labkit.designs.simulator import FAULTS, run

COMPARED: tuple[str, ...] = ("ballot", "fenced", "pipelined")
DEPTHS: tuple[int, ...] = (1, 2, 4, 8)
PIPELINED_NAME = DISPLAY_NAMES["pipelined"]
NO_FAULT = "none"
FAULT_CASES: tuple[str, ...] = (NO_FAULT, *FAULTS)  # the rows of `fault_table`
# What became of a request, as a lane's end says it.
COMMITTED, REFUSED, GAVE_UP, FLUSHED, IN_FLIGHT = (
    "committed",
    "refused",
    "gave up",
    "flushed",
    "in flight",
)


@dataclass(frozen=True)
class Lane:
    """One request of a run: its ballot and fence, when it was sent and answered, whether its
    answer was held, and how and when it ended (`end` is one of the five outcomes above)."""

    request_id: int
    ballot_id: int
    fence: int
    sent: float
    answered: float | None
    held: bool
    end: str
    ended: float | None
    reason: str | None = None
    replay_of: int | None = None


def _num(value: object) -> int | None:
    """An id from a trace cell, None where the cell is empty (NaN or None)."""
    if value is None or value != value:  # NaN is the one value unequal to itself
        return None
    return int(value)  # type: ignore[call-overload]


def lanes(trace: pd.DataFrame) -> list[Lane]:
    """The requests of a `simulate` trace of a ballot design, in the order they were sent.

    A lane ends at its commit (the deliver or settle row that committed it), at the first
    refusal of its answer, at the loop's give-up, or, for `pipelined`, at the flush that
    replayed its ballot although its own answer was not refused (its base was). The trace
    writes each decision before the replays it sends, so a replay finds its lane decided.
    """
    rows = trace.to_dict("records")
    found: dict[int, dict] = {}
    by_ballot: dict[int, int] = {}
    for row in rows:
        rid = _num(row["request_id"])
        if rid is None:
            continue
        if rid < 0:  # a request rebuilt after a crash is named by -ballot_id
            rid = by_ballot.get(-rid, rid)
        event, t = row["event"], float(row["t"])
        if event == "send":
            replay_of = _num(row["replay_of"])
            found[rid] = {
                "request_id": rid,
                "ballot_id": _num(row["ballot_id"]) or 0,
                "fence": int(row["observed_watermark"]),
                "sent": t,
                "answered": None,
                "held": False,
                "end": IN_FLIGHT,
                "ended": None,
                "reason": None,
                "replay_of": replay_of,
            }
            by_ballot[found[rid]["ballot_id"]] = rid
            lost = found.get(by_ballot.get(replay_of, 0)) if replay_of is not None else None
            if lost is not None and lost["end"] == IN_FLIGHT:  # replayed, not refused: flushed
                lost.update(end=FLUSHED, ended=t)
            continue
        lane = found.get(rid)
        if lane is None:
            continue
        if event == "deliver" and lane["answered"] is None:
            lane["answered"] = t
        if lane["end"] != IN_FLIGHT:
            continue  # a late or duplicate arrival: the lane already ended
        if event in ("deliver", "settle"):
            if row["reason"] == "held":
                lane["held"] = True
            elif _num(row["committed"]) == 1:
                lane.update(end=COMMITTED, ended=t)
            elif isinstance(row["reason"], str):
                lane.update(end=REFUSED, ended=t, reason=row["reason"])
        elif event == "timeout":
            lane.update(end=GAVE_UP, ended=t)
    return [Lane(**lane) for lane in found.values()]


def summary_row(design: str, window: int, s: RunSummary) -> dict[str, object]:
    """One row of the comparison tables: `design`'s run at depth `window`, rounded for reading."""
    return {
        "design": design,
        "name": DISPLAY_NAMES[design],
        "W": window,
        "throughput": round(s.throughput, 2),
        "latency p50": round(s.latency_p50, 2),
        "latency p95": round(s.latency_p95, 2),
        "wasted calls / commit": round(s.wasted_per_commit, 2),
        "answers refused": sum(s.rejects.values()),
        "ticks replayed": s.replays,
        "answers held": s.held,
        "rewinds": s.rewinds,
        "kept": s.kept,
    }


def plan_at(window: int, designs: Sequence[str] = COMPARED) -> list[tuple[str, int]]:
    """The runs that compare `designs` at depth `window`, as (design, the window it runs with),
    by the registry's window rule (`DesignSpec.window`): `fenced` needs W >= 2 and is left out
    at W = 1; `ballot` keeps one ballot whatever W is."""
    rows = [spec(design) for design in designs]
    return [(row.key, row.window(window)) for row in rows if row.accepts(window)]


def runs_at(
    window: int,
    faults: Collection[str] = (),
    seed: int = 0,
    *,
    ticks: int = 20,
    designs: Sequence[str] = COMPARED,
) -> list[tuple[str, RunSummary]]:
    """One simulated run per design of `plan_at(window, designs)`: (design, its summary)."""
    return [
        (design, run(design, tuple(faults), seed, ticks=ticks, window=w).summary)
        for design, w in plan_at(window, designs)
    ]


def compare_at(
    window: int,
    faults: Collection[str] = (),
    seed: int = 0,
    *,
    ticks: int = 20,
    designs: Sequence[str] = COMPARED,
) -> pd.DataFrame:
    """`runs_at` as a table, one `summary_row` per design, `W` = `window`."""
    found = runs_at(window, faults, seed, ticks=ticks, designs=designs)
    return pd.DataFrame([summary_row(design, window, s) for design, s in found])


def fault_table(
    window: int = 4, seed: int = 0, *, ticks: int = 20, designs: Sequence[str] = COMPARED
) -> pd.DataFrame:
    """`compare_at` with no fault and with each fault class on its own (`FAULT_CASES`),
    stacked, a `fault` column naming the case: the price of each fault, design by design."""
    return pd.concat(
        [
            compare_at(
                window, () if f == NO_FAULT else (f,), seed, ticks=ticks, designs=designs
            ).assign(fault=f)
            for f in FAULT_CASES
        ],
        ignore_index=True,
    )


def depth_table(
    windows: Iterable[int] = DEPTHS,
    faults: Collection[str] = (),
    seed: int = 0,
    *,
    ticks: int = 20,
) -> pd.DataFrame:
    """`compare_at` for each W in `windows`, stacked: the trade-off as the window grows."""
    return pd.concat([compare_at(w, faults, seed, ticks=ticks) for w in windows], ignore_index=True)


@dataclass
class EarlyAnswer:
    """Notebook 05b's hash-check experiment at W = 2, after request 1's answer has landed."""

    loop: PipelinedDesign
    first: Request  # fenced at the head
    second: Request  # fenced one ahead, built on request 1's answer
    early: Response  # request 2's answer, which landed first
    said: str | None  # what the loop said of it: held
    held: list[int]  # the ballots in the hold after it landed
    landed: Decision  # what request 1's answer did when it landed next


def two_answers_in(stale: bool) -> EarlyAnswer:
    """W = 2: request 2's answer lands first (held), then request 1's (it commits v1). With
    `stale`, request 2's planner read v0 but stamps its answer as built on v1."""
    loop = PipelinedDesign(window=2, ticks=10)
    first, second = loop.start(0.0)
    early = respond(loop, second, 1.0, stale=stale, stamped=True)
    said = loop.on_response(second, early, 1.0).reason
    held = [h.ballot_id for h in hold.held(loop.conn)]
    landed = loop.on_response(first, respond(loop, first, 2.0), 2.0)
    return EarlyAnswer(loop, first, second, early, said, held, landed)


def frontier_side_by_side(head: int, answered: Iterable[int], fences: int) -> pd.DataFrame:
    """Fences 0..`fences`-1 with the head at `head` and `answered` held, beside part one's log
    with the same rows: row id = fence + 1, delivered = answered, coverage base = head.

    The last two columns are the hold's frontier (`labkit.catalog.hold.frontier`) and part one's
    (`labkit.frontier.log.delivered_frontier` on a real SQLite log); they agree on every row.
    """
    done = set(answered)
    conn = part_one.connect()
    rows = []
    for fence in range(fences):
        row_id = part_one.enqueue(conn, "ballots", 0)
        if fence < head or fence in done:
            part_one.mark_delivered(conn, row_id)
        rows.append(
            {
                "fence": fence,
                "ballot": "committed" if fence < head else "held" if fence in done else "waiting",
                "row id": row_id,
                "row status": part_one.status_of(conn, row_id),
            }
        )
    table = pd.DataFrame(rows)
    table["head may reach"] = hold.frontier(head, done)
    table["part one's frontier"] = part_one.delivered_frontier(conn, "ballots", coverage_base=head)
    conn.close()
    return table
