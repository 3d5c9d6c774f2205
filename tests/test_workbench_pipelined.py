"""`pipelined` in the arrival-order workbench: a held answer is shown waiting (not refused), its
commit is recorded at the step the head reaches its fence, a flush is a refusal with a replay,
the W picker changes pipelined only, and the break search says how far it looked.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from labkit.catalog.pipeline import HELD
from labkit.designs.arrival_orders import Settled, run_schedule
from labkit.designs.registry import ALL_DESIGNS, DESIGNS
from labkit.designs.schedule_builder import (
    EXPLORE_N,
    FLUSHED,
    SETTLED,
    DesignRun,
    ScheduleBuilder,
    StepError,
    break_search,
)
from labkit.designs.schedules import Step
from labkit.plots.canvases import WorkbenchCanvas
from labkit.widgets.catalog import ArrivalWorkbench


def builder(text: str, depth: int = 2) -> ScheduleBuilder:
    b = ScheduleBuilder(ALL_DESIGNS, depth=depth)
    b.load(text)
    return b


def marks(canvas: WorkbenchCanvas, kind: str) -> set[tuple[float, float]]:
    """The (step, lane row) points of one kind of lane marker."""
    xs, ys = canvas.marks[kind].get_data()
    return set(zip(np.asarray(xs, float).tolist(), np.asarray(ys, float).tolist(), strict=True))


def row_of(run: DesignRun, rid: int) -> int:
    """The row the canvas draws request `rid` on (lanes in the order they were sent)."""
    order = sorted(run.lanes.values(), key=lambda ln: (ln.sent_at, ln.request_id))
    return [ln.request_id for ln in order].index(rid)


def test_the_runner_records_the_commit_of_a_held_answer() -> None:
    res = run_schedule("pipelined", ["deliver 2", "deliver 1"], window=2)
    assert [o.reason for o in res.outcomes] == [HELD, None]
    assert res.outcomes[0].settled == ()
    assert res.outcomes[1].settled == (Settled(2, 2, True, None),)
    # the five designs never hold, so they never settle anything
    for design in DESIGNS:
        done = run_schedule(design, ["deliver 1", "deliver 2", "deliver 1"], window=2)
        assert all(o.settled == () for o in done.outcomes)


def test_a_held_answer_waits_then_commits_at_the_step_the_head_reaches_it() -> None:
    b = builder("deliver 2")
    run = b.runs["pipelined"]
    lane = run.lanes[2]
    assert lane.status == "held" and lane.held_at == 1 and lane.settled is None
    assert run.rejects == {} and run.held == 1 and run.commits == 0
    assert run.in_order_refusal is None  # held is not refused
    b.add("deliver 1")
    run = b.runs["pipelined"]
    lane = run.lanes[2]
    assert lane.status == "held, committed"
    assert (lane.settled.step, lane.settled.kind, lane.settled.committed) == (2, SETTLED, True)
    assert run.commits == 2 and run.heads == [0, 0, 2] and run.rejects == {}

    canvas = WorkbenchCanvas(b.designs)
    canvas.update(b.runs, b.steps, "pipelined")
    y = row_of(run, 2)
    assert (1.0, y) in marks(canvas, "held")
    assert (2.0, y) in marks(canvas, "commit")  # drawn where the commit happens, not at arrival
    assert (1.0, y) not in marks(canvas, "reject")
    waits = [seg.tolist() for seg in canvas.waits.get_segments()]
    assert [[1.0, y], [2.0, y]] in waits


def test_a_give_up_flushes_the_held_successor_and_replays_both() -> None:
    b = builder("deliver 2; timeout 1")
    run = b.runs["pipelined"]
    assert run.lanes[1].status == "given up"
    assert run.lanes[2].status == FLUSHED and run.lanes[2].flushed_at == 2
    replays = {ln.replay_of for ln in run.lanes.values() if ln.sent_at == 2}
    assert replays == {run.lanes[1].ballot_id, run.lanes[2].ballot_id}
    assert run.flushed == 1 and run.rejects == {}  # a flush refuses no answer that arrived

    canvas = WorkbenchCanvas(b.designs)
    canvas.update(b.runs, b.steps, "pipelined")
    assert (2.0, row_of(run, 2)) in marks(canvas, "flushed")
    assert (2.0, row_of(run, 1)) not in marks(canvas, "flushed")


def test_a_stale_held_answer_is_refused_at_its_fence_and_flushes_the_rest() -> None:
    b = builder("stale 2; deliver 1", depth=3)
    run = b.runs["pipelined"]
    assert run.lanes[2].status == "held, refused"
    assert run.lanes[2].settled.reason == "stale_base" and run.lanes[2].settled.step == 2
    assert run.lanes[3].status == FLUSHED
    assert run.rejects == {"stale_base": 1} and run.commits == 1 and run.heads[-1] == 1


@pytest.mark.parametrize("seed", range(6))
def test_every_commit_is_counted_once_and_the_head_never_falls(seed: int) -> None:
    rng = random.Random(seed)
    b = ScheduleBuilder(ALL_DESIGNS, depth=rng.choice([1, 2, 3]))
    for _ in range(12):
        k = rng.choice(b.requests)
        step = rng.choice(
            [
                Step.deliver(k),
                Step.deliver(k),
                Step.dup(k),
                Step.stale(k),
                Step.timeout(),
                Step.crash(),
            ]
        )
        try:
            b.add(step)
        except StepError:
            pass
    run = b.runs["pipelined"]
    assert run.commits == run.heads[-1]  # +1 per commit, held ones included
    assert run.heads == sorted(run.heads) and not run.falls
    assert run.held == sum(1 for ln in run.lanes.values() if ln.held_at is not None)


def test_the_five_designs_play_alike_with_pipelined_beside_them() -> None:
    text = "timeout 1; deliver 2; deliver 3; deliver 1; dup 2; crash; deliver 4"
    alone = ScheduleBuilder()
    alone.load(text)
    joined = builder(text, depth=4)
    for design in DESIGNS:
        a, j = alone.runs[design], joined.runs[design]
        assert (a.heads, a.commits, a.rejects, a.skipped) == (
            j.heads,
            j.commits,
            j.rejects,
            j.skipped,
        )
        assert {k: ln.status for k, ln in a.lanes.items()} == {
            k: ln.status for k, ln in j.lanes.items()
        }


def test_set_depth_changes_pipelined_only_and_cuts_what_no_longer_applies() -> None:
    b = builder("deliver 3", depth=3)  # only pipelined at W = 3 has sent request 3
    before = {d: list(b.runs[d].heads) for d in DESIGNS}
    assert b.runs["pipelined"].lanes[3].status == "held"
    assert b.set_depth(2) == 1 and b.steps == []
    assert sorted(b.runs["pipelined"].lanes) == [1, 2]
    b.load("deliver 1")
    assert b.set_depth(4) is None and len(b.runs["pipelined"].lanes) == 5
    assert {d: b.runs[d].heads for d in DESIGNS} == {d: [0, 1] for d in before}
    with pytest.raises(ValueError):
        b.set_depth(0)


def test_the_workbench_w_picker_and_its_note() -> None:
    wb = ArrivalWorkbench(preset=None, focus="lww", designs=ALL_DESIGNS, depth=2)
    assert "pipelined only" in wb.depth_note.value and "lww" in wb.depth_note.value
    others = {d: dict(wb.builder.runs[d].lanes) for d in DESIGNS}
    wb.depth.value = 4
    assert wb.builder.depth == 4 and len(wb.builder.runs["pipelined"].lanes) == 4
    assert {d: wb.builder.runs[d].lanes for d in DESIGNS} == others
    wb.focus.value = "pipelined"
    assert "up to 4 tick(s) in flight" in wb.depth_note.value
    # a workbench of the five designs shows no W picker
    five = ArrivalWorkbench(preset=None)
    assert "pipelined" not in five.designs
    assert not any(
        wb_row is five.depth for row in five.ui.children for wb_row in getattr(row, "children", ())
    )


def test_the_workbench_draws_and_tables_a_hold() -> None:
    wb = ArrivalWorkbench(preset=None, focus="pipelined", designs=ALL_DESIGNS)
    wb.type_schedule("deliver 2; deliver 1")
    assert wb.error.value == ""
    row = wb.verdicts.value.split("<b>pipelined</b>")[1].split("</tr>")[0]
    assert "held \u00d71 (1 committed" in row and "<td>2</td>" in row
    assert "held \u00d7" not in wb.verdicts.value.split("<b>pipelined</b>")[0]
    assert wb.builder.runs["pipelined"].lanes[2].status == "held, committed"


@pytest.mark.parametrize("depth", [1, 3])
def test_shortest_break_says_none_exists_for_pipelined_up_to_its_bound(depth: int) -> None:
    wb = ArrivalWorkbench(preset=None, focus="pipelined", designs=ALL_DESIGNS, depth=depth)
    wb.type_schedule("deliver 1")
    searched = break_search("pipelined", EXPLORE_N, depth)
    assert searched.shortest is None and searched.orders > 0
    wb.fill_shortest()
    assert "No schedule breaks pipelined" in wb.message.value
    assert f"W = {depth}" in wb.message.value
    assert f"{searched.orders:,} orders of up to {EXPLORE_N} deliveries" in wb.message.value
    assert wb.builder.text == "deliver 1" and wb.broke["pipelined"] is None
