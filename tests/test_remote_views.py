"""Notebook 09's views of a real run: the lanes built row by row, the reader process's own
trace of the head, the lanes figure, and the widget that switches faults while a run goes
(driven without a browser; its runs are real, against a service of its own, a second or two
each)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

import labkit.catalog.head_row as head_row
from labkit.catalog.head_watch import Change, Fall, ReaderProcess
from labkit.db import connect
from labkit.designs.simulator import COLUMNS
from labkit.plots.part3_remote import lanes_figure, shown_lanes
from labkit.remote.driver import RemoteRun
from labkit.remote.views import COMMIT, Lane, Lanes, LaneView, reader_trace
from labkit.widgets.part3_remote import RealPlannerApp, fault_switch_note


def row(t: float, event: str, rid: int | None = None, head: int = 0, **extra) -> dict:
    base = dict.fromkeys(COLUMNS)
    base.update(t=t, event=event, request_id=rid, head_version=head, wall=1000.0 + t)
    base.update(extra)
    return base


STORY = [  # request 1 is given up and answered late; 2 commits; 2's duplicate is refused
    row(0.00, "send", 1, 0, ballot_id=1, base_version=0, host=2),
    row(0.06, "timeout", 1, 0),
    row(0.06, "send", 2, 0, ballot_id=2, base_version=0, host=0, replay_of=1),
    row(0.08, "deliver", 2, 1, committed=True),
    row(0.09, "send", 3, 1, ballot_id=3, base_version=1, host=1, fault="stall"),
    row(0.10, "deliver", 2, 1, committed=False, reason="unknown_ballot"),
    row(0.20, "deliver", 1, 0, committed=True),  # an unguarded design writes it: the head falls
]


def fed(rows: list[dict]) -> Lanes:
    lanes = Lanes()
    for r in rows:
        lanes.add(r)
    return lanes


def test_lanes_fill_as_answers_arrive() -> None:
    view = fed(STORY[:3]).snapshot()
    assert [lane.request_id for lane in view.lanes] == [1, 2]
    assert view.in_flight == 2 and not view.done
    first = view.lanes[0]
    assert first.gave_up == 0.06 and first.in_flight  # given up, but it may still be answered
    assert view.lanes[1].replay_of == 1 and view.lanes[1].host == 0

    view = fed(STORY).snapshot()
    by_id = {lane.request_id: lane for lane in view.lanes}
    assert by_id[2].answers == [(0.08, COMMIT), (0.10, "unknown_ballot")]
    assert by_id[1].answers == [(0.20, COMMIT)] and by_id[1].committed
    assert by_id[3].in_flight and by_id[3].fault == "stall"
    assert view.in_flight == 1 and view.head == 0 and view.falls == 1


def test_a_snapshot_is_a_copy_and_finish_freezes_the_clock() -> None:
    lanes = fed(STORY[:4])
    before = lanes.snapshot()
    lanes.add(STORY[5])
    assert before.lanes[1].answers == [(0.08, COMMIT)]  # taken before the refusal arrived
    lanes.switched(("inverted",))
    lanes.finish()
    after = lanes.snapshot()
    assert after.done and after.now == 0.10
    assert after.faults_switched[0][1] == ("inverted",)


def test_shown_lanes_keep_the_telling_ones_first() -> None:
    plain = [Lane(i, 0, float(i), answers=[(i + 0.5, COMMIT)]) for i in range(1, 21)]
    stalled = Lane(3, 0, 3.0, fault="stall", answers=[(9.0, COMMIT)])
    lanes = [lane if lane.request_id != 3 else stalled for lane in plain]
    view = LaneView(tuple(lanes), ((0.0, 0),), 10.0, True)
    shown = shown_lanes(view, most=5)
    assert [lane.request_id for lane in shown] == [3, 17, 18, 19, 20]
    assert [lane.request_id for lane in shown_lanes(view, most=30)] == list(range(1, 21))


def _run(trace: pd.DataFrame, first: int, changes: list[Change]) -> RemoteRun:
    falls = [Fall(*vars(c).values()) for c in changes if c.after < c.before]
    return RemoteRun(
        "callback", "http://127.0.0.1:1", None, trace, None, falls, [], 10, first, tuple(changes)
    )


def test_the_reader_trace_is_on_the_loops_clock() -> None:
    trace = pd.DataFrame({"t": [0.0, 0.5, 1.0], "wall": [100.0, 100.5, 101.0]})
    changes = [Change(100.2, 0, 1), Change(100.4, 1, 3), Change(100.6, 3, 2), Change(100.7, 2, 4)]
    got = reader_trace(_run(trace, 0, changes))
    assert got["t"].round(6).tolist() == [0.0, 0.2, 0.4, 0.6, 0.7, 1.0]
    assert got["head_version"].tolist() == [0, 1, 3, 2, 4, 4]
    assert got["rewind"].tolist() == [False, False, False, True, False, False]
    assert set(got["event"]) == {"read"}


def test_a_run_without_rows_has_no_reader_trace() -> None:
    empty = pd.DataFrame({"t": [], "wall": []})
    with pytest.raises(ValueError, match="no trace rows"):
        reader_trace(_run(empty, 0, []))


def test_the_reader_process_records_every_change_not_only_falls(tmp_path) -> None:
    store = tmp_path / "head.db"
    conn = connect(store)
    head_row.create(conn, 0, "h0")
    reader = ReaderProcess("mirror", store, poll=0.001)
    try:
        for version in (1, 3, 2):
            head_row.publish(conn, version, f"h{version}")
            time.sleep(0.2)
    finally:
        falls = reader.stop()
        conn.close()
    assert reader.first == 0
    assert [(c.before, c.after) for c in reader.changes] == [(0, 1), (1, 3), (3, 2)]
    assert [(f.before, f.after) for f in falls] == [(3, 2)]


def _gids(fig) -> set[str]:
    return {a.get_gid() for a in fig.findobj() if a.get_gid()}


def test_the_lanes_figure_marks_flight_answers_and_falls() -> None:
    view = fed(STORY).snapshot()
    fig = lanes_figure(view, "callback")
    gids = _gids(fig)
    assert {"inflight", "answer:commit", "answer:refused", "head", "fall"} <= gids
    assert "reader" not in gids
    reader = pd.DataFrame({"t": [0.0, 0.1, 0.2], "head_version": [0, 1, 0]})
    assert {"reader", "reader-fall"} <= _gids(lanes_figure(view, "callback", reader=reader))
    quiet = fed(STORY[:1]).snapshot()
    assert "fall" in _gids(lanes_figure(quiet, "ballot"))  # drawn, with no point on it
    fall = [a for a in lanes_figure(quiet, "ballot").findobj() if a.get_gid() == "fall"]
    assert len(fall[0].get_offsets()) == 0


@pytest.mark.parametrize(
    ("before", "after", "kw", "says"),
    [
        ((), ("inverted",), {"running": False, "head": 0, "left": 30}, "No run is going"),
        ((), ("inverted",), {"running": True, "head": 7, "left": 23}, "it will get there"),
        ((), ("stall",), {"running": True, "head": 27, "left": 3}, "it may end first"),
        ((), ("duplicate",), {"running": True, "head": 2, "left": 9}, "delivered twice"),
        (("stall",), (), {"running": True, "head": 5, "left": 9}, "still arrive"),
        (("stall",), ("stall",), {"running": True, "head": 5, "left": 9}, "no change"),
    ],
)
def test_the_fault_switch_says_what_it_did(before, after, kw, says) -> None:
    assert says in fault_switch_note(before, after, span=5, **kw)


def test_the_controls_say_when_they_do_nothing() -> None:
    app = RealPlannerApp(design="ballot")
    assert app.why_not("window") and app.window.disabled  # only the hedged design reads it
    assert app.why_not("stop") == "no run is going" and app.stop_button.disabled
    assert not app.why_not("start") and "window" in app.why.value
    app.design.value = "fenced"
    assert not app.why_not("window") and not app.window.disabled
    assert app.stop() is False and "Nothing stopped" in app.message.value
    app.set_faults(["stall"])  # no run: nothing is switched, and the line says so
    assert app.switches == [] and "No run is going" in app.message.value
    assert app.last_png.startswith(b"\x89PNG") and "no run yet" in app.status.value


def test_a_fault_switched_in_the_widget_strikes_the_run_going() -> None:
    app = RealPlannerApp(design="callback", ticks=20, latency_ms=10, seed=1, span=2)
    assert app.start()
    try:
        assert app.wait_for_head(3)
        assert app.start() is False and "Not started" in app.message.value
        assert app.why_not("design") and app.design.disabled and not app.stop_button.disabled
        app.set_faults(["inverted"])
    finally:
        result = app.wait()
    assert result is not None and app.error == ""
    ((switched_at, faults),) = app.switches
    assert faults == ("inverted",) and switched_at >= 3
    sends = result.trace[result.trace["event"] == "send"]
    struck = sends[sends["fault"] == "inverted"]
    assert not struck.empty and (struck["base_version"] >= switched_at).all()
    assert result.summary.rewinds >= 1 and result.reader_falls  # the callback fell
    assert "Finished callback" in app.message.value and "finished" in app.status.value
    assert not app.design.disabled and app.stop_button.disabled


def test_stop_ends_the_run_early() -> None:
    app = RealPlannerApp(design="ballot", ticks=80, latency_ms=20)
    app.start()
    assert app.wait_for_head(2)
    assert app.stop()
    result = app.wait()
    assert result is not None and result.trace["event"].iloc[-1] == "truncated"
    assert result.summary.kept < 80


def test_no_text_of_the_lanes_figure_is_cut_at_its_edge() -> None:
    from test_figure_layout import overflows

    wide = row(0.12, "send", 1234, 1, ballot_id=9, base_version=1, fault="retry_after_commit")
    lanes = fed([*STORY, wide])  # the widest lane label: "retry after commit 1234"
    lanes.switched(("inverted", "retry_after_commit", "stall"))
    reader = pd.DataFrame({"t": [0.0, 0.1, 0.2], "head_version": [0, 1, 0]})
    fig = lanes_figure(lanes.snapshot(), "lww", reader=reader)
    assert overflows(fig) == []


def test_differences_lists_only_the_cells_more_than_the_tolerance_apart() -> None:
    from labkit.remote.compare import METRICS, differences

    def cells(metric: str, sim: float, real: float) -> dict:
        ratio = round(real / sim, 2) if sim else None
        return {f"{metric} sim": sim, f"{metric} real": real, f"{metric} real/sim": ratio}

    values = {  # metric -> (sim, real): near, far, zero against something, both zero
        "throughput": (20.0, 17.0),
        "latency_p50": (0.02, 0.03),
        "latency_p95": (0.1, 0.124),
        "wasted_per_commit": (0.0, 0.5),
        "rewinds": (0.0, 0.0),
    }
    row = {"design": "fenced", "seeds": 1}
    for metric, _ in METRICS:
        row.update(cells(metric, *values[metric]))
    apart = differences(pd.DataFrame([row]), tolerance=0.25)
    assert apart["metric"].tolist() == ["latency_p50", "wasted_per_commit"]
    assert differences(pd.DataFrame([row]), tolerance=0.6)["metric"].tolist() == [
        "wasted_per_commit"
    ]
