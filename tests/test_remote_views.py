"""Notebook 09's views of a real run: the lanes built row by row, the reader process's own
trace of the head, the lanes figure, and the widget that switches faults while a run goes
(driven without a browser; its runs are real, against a service of its own, a second or two
each, the one at the widget's slow defaults a few seconds until it is stopped)."""

from __future__ import annotations

import time
from dataclasses import replace

import pandas as pd
import pytest

import labkit.remote.head_row as head_row
from labkit.db import connect
from labkit.designs.simulator import COLUMNS
from labkit.plots.remote import lanes_figure, shown_lanes
from labkit.remote.compare import METRICS, WHY, why
from labkit.remote.driver import RemoteRun
from labkit.remote.head_watch import Change, Fall, ReaderProcess
from labkit.remote.service import serve
from labkit.remote.views import COMMIT, Lane, Lanes, LaneView, falls_text, reader_trace
from labkit.widgets.remote import RealPlannerApp, fault_switch_note


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
            reader.sync()  # the reader polled after the write
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


def test_stop_ends_the_run_early_and_says_so() -> None:
    app = RealPlannerApp(design="ballot", ticks=80, latency_ms=20)
    app.start()
    assert app.wait_for_head(2)
    assert app.stop()
    assert app.stop() is False and "Already stopping" in app.message.value
    assert app.why_not("stop") == "the run is stopping"
    result = app.wait()
    assert result is not None and result.trace["event"].iloc[-1] == "truncated"
    assert result.summary.kept < 80
    head = result.summary.final_head
    assert f"Stopped ballot at v{head} of v80" in app.message.value
    assert "Finished" not in app.message.value


def test_a_seed_out_of_range_is_refused_before_any_run() -> None:
    app = RealPlannerApp(design="ballot")
    app.seed.value = 10**30
    assert app.start() is False and not app.running and app.lanes is None
    assert "Not started: the random seed must be a whole number" in app.message.value


def test_a_fault_ticked_while_the_service_starts_reaches_it(monkeypatch) -> None:
    """Ticked before the run's service is up: kept, and switched on as soon as it is."""
    import threading
    from contextlib import contextmanager

    import labkit.widgets.remote as remote_app

    up = threading.Event()

    @contextmanager
    def slow_serve(*args, **kwargs):
        with serve(*args, **kwargs) as url:
            up.wait(10)  # the service runs; the widget does not know its URL yet
            yield url

    monkeypatch.setattr(remote_app, "serve", slow_serve)
    app = RealPlannerApp(design="callback", ticks=12, latency_ms=10, seed=1, span=2)
    assert app.start()
    app.set_faults(["inverted"])
    assert "still starting" in app.message.value and "No run is going" not in app.message.value
    assert "faults on: none" in app.status.value or "no run yet" in app.status.value
    up.set()
    result = app.wait()
    assert result is not None and app.error == ""
    assert app.switches == [(0, ("inverted",))]
    sends = result.trace[result.trace["event"] == "send"]
    assert (sends["fault"] == "inverted").any()  # the service had it
    assert "faults on: inverted" in app.status.value


def test_start_is_given_back_only_after_the_runs_last_picture() -> None:
    app = RealPlannerApp(design="ballot", ticks=5, latency_ms=10)
    assert app.start()
    while app.running:
        time.sleep(0.001)
    first = app.result  # the moment start is allowed again, the run is drawn and judged
    assert first is not None and "Finished ballot" in app.message.value
    assert "finished" in app.status.value and not app.start_button.disabled
    assert app.start()
    second = app.wait()
    assert second is not None and second is not first and app.result is second


def test_stopping_the_live_runs_stops_every_run_going_and_joins_its_threads() -> None:
    """What the interpreter's exit does (next test): three runs going are stopped, and each
    thread of theirs has ended when `_stop_live_runs` returns."""
    import labkit.widgets.remote as remote_app

    # the slowest runs the widget allows (80 versions, 150 ms a call: some 12 s), so all three
    # are still going when stopped, however loaded the machine
    apps = [RealPlannerApp(design=d, ticks=80, latency_ms=150) for d in ("ballot", "lww", "ballot")]
    for app in apps:
        assert app.start()
    assert all(app.wait_for_head(2) for app in apps)
    runs = [app._run_now for app in apps]
    threads = [t for run in runs for t in run.threads]
    assert len(threads) == 6 and all(t.is_alive() for t in threads)
    remote_app._stop_live_runs()
    assert not any(t.is_alive() for t in threads)
    assert all(run.stop.is_set() and run.done.is_set() for run in runs)
    assert all(run.lanes.snapshot().head < 80 for run in runs)  # stopped, not finished


@pytest.mark.slow  # a Python that imports the widgets and runs one
def test_the_interpreters_exit_stops_the_live_runs(tmp_path) -> None:
    """Once, leaving Python with a widget run going aborted in C++ ("terminate called without an
    active exception"): a thread was cut off inside the loop's sockets or SQLite. So the module
    has atexit run `_stop_live_runs`. Python exits here with a real run going and a stand-in
    beside it, whose thread waits for its stop and then prints: the line comes out only if the
    exit stopped the runs and waited for their threads (the real run alone cannot tell: the
    abort was a race, and such an exit passed with the handler removed too)."""
    import subprocess
    import sys

    script = tmp_path / "leave.py"
    script.write_text(
        "import threading, types\n"
        "import labkit.widgets.remote as remote_app\n"
        "app = remote_app.RealPlannerApp(design='ballot', ticks=80, latency_ms=150)\n"
        "assert app.start() and app.wait_for_head(1)\n"
        "run = types.SimpleNamespace(stop=threading.Event())\n"
        "def loop():\n"
        "    run.stop.wait()\n"
        "    print('stopped and joined', flush=True)\n"
        "run.threads = [threading.Thread(target=loop, daemon=True)]\n"
        "run.threads[0].start()\n"
        "remote_app._LIVE = [app._run_now, run]\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr
    assert done.stdout == "stopped and joined\n"


def test_no_text_of_the_lanes_figure_is_cut_at_its_edge() -> None:
    from test_figure_layout import overflows

    wide = row(0.12, "send", 1234, 1, ballot_id=9, base_version=1, fault="retry_after_commit")
    lanes = fed([*STORY, wide])  # the widest lane label: "retry after commit 1234"
    lanes.switched(("inverted", "retry_after_commit", "stall"))
    reader = pd.DataFrame({"t": [0.0, 0.1, 0.2], "head_version": [0, 1, 0]})
    fig = lanes_figure(lanes.snapshot(), "lww", reader=reader)
    assert overflows(fig) == []


def test_differences_lists_only_the_cells_more_than_the_tolerance_apart() -> None:
    from labkit.remote.compare import differences

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
    assert apart["why"].tolist() == [  # real above simulated: the reasons for "higher"
        WHY[("latency_p50", "higher")],
        WHY[("wasted_per_commit", "higher")],
    ]


@pytest.mark.parametrize(
    ("design", "metric", "sim", "real", "says"),
    [
        ("fenced", "latency_p95", 0.03, 0.06, "just inside the timeout"),
        ("fenced", "latency_p95", 0.06, 0.03, "the other way"),
        ("ballot", "throughput", 20.0, 12.0, "durable SQLite write"),
        ("callback", "wasted_per_commit", 1.5, 0.8, "simulator only"),
        ("callback", "rewinds", 3, 0, "near-tie"),
        ("cas", "rewinds", 0, 1, "bug"),
    ],
)
def test_each_difference_gets_the_reason_for_its_direction(design, metric, sim, real, says):
    from labkit.remote.compare import differences

    row = {"design": design, "seeds": 1}
    for m, _ in METRICS:
        row.update({f"{m} sim": 1.0, f"{m} real": 1.0, f"{m} real/sim": 1.0})
    row.update({f"{metric} sim": sim, f"{metric} real": real})
    row[f"{metric} real/sim"] = round(real / sim, 2) if sim else None
    (got,) = differences(pd.DataFrame([row]))["why"]
    assert says in got and got == why(design, metric, sim, real)


def test_a_store_reads_back_as_a_chained_log_or_a_head_row_that_only_climbed(tmp_path) -> None:
    from labkit.remote.crash import Crash, fates, lost_commits
    from labkit.remote.driver import run
    from labkit.remote.readback import read_back

    with serve(latency=0.005, seed=3) as url:
        runs = {
            d: run(d, url, ticks=4, seed=3, store=tmp_path / f"{d}.db", name=f"rb-{d}")
            for d in ("ballot", "cas")
        }
    log, row = read_back(runs["ballot"]), read_back(runs["cas"])
    assert (log.kind, log.head, log.whole, log.text) == ("log", 4, True, "1..4 chained")
    assert (row.kind, row.head, row.whole) == ("head row", 4, True)
    assert row.text.startswith("row at v4; ")

    fell = replace(runs["cas"], reader_changes=(Change(1.0, 0, 2), Change(2.0, 2, 1)))
    assert not read_back(fell).whole and read_back(fell).text == "row at v4; fell 1 time"
    assert "climbs only" in read_back(replace(fell, reader_changes=(Change(1.0, 0, 2),))).text

    conn = connect(tmp_path / "ballot.db")  # a body that is not what its hash says: broken
    conn.execute("UPDATE catalog_versions SET tools_hash = 'x' WHERE version = 3")
    conn.commit()
    conn.close()
    broken = read_back(runs["ballot"])
    assert not broken.whole and "version 3" in broken.text
    with pytest.raises(ValueError, match="no store file"):
        read_back(replace(runs["ballot"], store=None))

    trace = runs["ballot"].trace
    done = trace[(trace["event"] == "deliver") & (trace["committed"] == True)]  # noqa: E712
    commits = {int(r.head_version): int(r.ballot_id) for r in done.itertuples()}
    store = tmp_path / "ballot.db"
    assert lost_commits(store, Crash(-9, commits, ())) == []
    wrong = {**commits, 2: commits[2] + 100, 9: 1}  # another ballot at v2; v9 never written
    assert lost_commits(store, Crash(-9, wrong, ())) == [2, 9]

    ballots = sorted(int(b) for b in trace["ballot_id"].dropna().unique())
    got = fates(store, ballots, trace).set_index("ballot")
    assert list(got.index) == ballots  # every ballot asked about has a row, seen or not
    for ballot in commits.values():
        assert got.at[ballot, "status"] == "committed" and got.at[ballot, "reason"] == ""
        assert ": commit" in got.at[ballot, "the restarted loop saw"]
    quiet = fates(store, ballots[:1], trace.iloc[:0])  # a trace that shows none of them
    assert quiet["the restarted loop saw"].tolist() == ["nothing"]


def test_falls_are_written_one_way_everywhere() -> None:
    falls = [Fall(1.0, 5, 2), Fall(2.0, 7, 6), Fall(3.0, 8, 5)]
    assert falls_text([]) == "none"
    assert falls_text(falls) == "v5 → v2, v7 → v6, v8 → v5"
    assert falls_text(falls, most=2) == "v5 → v2, v7 → v6 and 1 more"


def test_the_head_panels_legend_lists_rejections_only_where_drawn() -> None:
    from labkit.plots.catalog import rewind_panels_figure

    def labels(fig) -> list[str]:
        return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts]

    trace = pd.DataFrame({"t": [0.0, 0.1, 0.2], "head_version": [0, 1, 2]})
    read = trace.assign(design="ballot", event="read", committed=None, rewind=False)
    assert "response rejected" not in labels(rewind_panels_figure({"ballot": read}))
    refused = read.assign(event=["read", "deliver", "deliver"], committed=[None, True, False])
    assert "response rejected" in labels(rewind_panels_figure({"ballot": refused}))


@pytest.mark.parametrize("broken", ["draw", "verdict"])
@pytest.mark.slow
def test_a_drawing_that_fails_is_said_and_gives_the_controls_back(monkeypatch, broken) -> None:
    """A redraw or the verdict raising: the message line says so, the run counts as drawn
    and start works again (before, the widget said "a run is going" for ever)."""

    def boom(self, cur=None):
        raise ValueError(f"{broken} failed")

    app = RealPlannerApp(design="ballot", ticks=3, latency_ms=5)  # it draws its first picture
    monkeypatch.setattr(RealPlannerApp, broken, boom)
    assert app.start()
    result = app.wait(timeout=60)
    assert result is not None and not app.running
    assert f"could not be drawn: ValueError: {broken} failed" in app.message.value
    assert not app.start_button.disabled and app.stop_button.disabled
    monkeypatch.undo()
    assert app.start()
    assert app.wait(timeout=60) is not None and "Finished ballot" in app.message.value


def test_the_verdict_says_when_the_reader_process_failed() -> None:
    from labkit.designs.run_stats import summarize_rows
    from labkit.widgets.remote import _Run

    rows = [*STORY, row(0.3, "truncated", None, 0, reason="reader_failed")]
    failure = "reader process on /x/s.db is alive but did not answer a sync for 1.2 s"
    result = replace(
        _run(pd.DataFrame(rows), 0, [Change(1000.1, 0, 1), Change(1000.2, 1, 0)]),
        summary=summarize_rows(rows),
        reader_failure=failure,
    )
    cur = _Run("callback", 20, (), result=result)
    said = RealPlannerApp(design="callback").verdict(cur)
    assert f"the reader process failed, so the run ended ({failure}); until then it saw 1 fall" in (
        said
    )
    assert said.startswith("Cut off callback") and "v0 of v20" in said
    assert "failed" not in RealPlannerApp(design="callback").verdict(
        replace(cur, result=replace(result, reader_failure=None))
    )


def test_a_run_at_the_widgets_defaults_lasts_long_enough_to_switch_by_hand() -> None:
    """At the defaults (30 versions, the slow default latency) a person has time to tick a
    fault mid-run: seconds after the start the run still goes, its progress in the status
    line; a tick then switches the run going, not the next one."""
    from labkit.widgets.remote import DEADLINE_CALLS, LATENCY_MS

    app = RealPlannerApp(design="callback")
    assert app.latency.value == LATENCY_MS and app.ticks.value == 30
    assert app.start()
    try:
        assert app.wait_for_head(2)
        time.sleep(4.0)  # a person reads the lanes, then reaches for a box
        assert app.running and app.lanes is not None and app.lanes.snapshot().head < 30
        app.draw()
        assert "running: head v" in app.status.value and "of v30" in app.status.value
        app.set_faults(["inverted"])
        assert "Switched at head" in app.message.value and "No run is going" not in (
            app.message.value
        )
        assert app._run_now is not None
        assert app._run_now.deadline >= DEADLINE_CALLS * 30 * LATENCY_MS / 1000
    finally:
        app.stop()
        result = app.wait()
    assert result is not None and [f for _, f in app.switches] == [("inverted",)]
    assert "Stopped callback at v" in app.message.value


def test_a_scripted_start_can_go_fast_and_leaves_the_slider_alone() -> None:
    app = RealPlannerApp(design="ballot", ticks=5)
    with pytest.raises(ValueError, match="latency_ms"):
        app.start(latency_ms=0)  # refused in one line, before any run
    assert not app.running and app.lanes is None
    assert app.start(latency_ms=10)
    assert "10 ms" in app.message.value
    result = app.wait()
    assert result is not None and not result.summary.truncated
    # five versions at 10 ms a call; at the slider's latency they would take seconds
    assert result.trace["t"].max() < 2.0 and app.latency.value > 100
