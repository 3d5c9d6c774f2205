"""FiveDesignsApp's work ahead: while the kernel's event loop is idle after an update, the app
simulates and draws the seeds one step away; a press then shows, byte for byte, what an app
that did nothing ahead shows after the same moves."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import labkit.widgets.catalog as catalog
from labkit.widgets.catalog import FiveDesignsApp

Move = Callable[[FiveDesignsApp], None]


def _seed(step: int) -> Move:
    return lambda app: setattr(app.seed, "value", app.seed.value + step)


def _set(control: str, value: object) -> Move:
    return lambda app: setattr(getattr(app, control), "value", value)


def _shown(app: FiveDesignsApp) -> tuple[bytes, str]:
    return app.last_png, app.metrics.value


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch) -> None:
    monkeypatch.setattr(catalog, "AHEAD_DELAY_S", 0.0)
    monkeypatch.setattr(catalog, "AHEAD_STEP_S", 0.0)


async def _idle(app: FiveDesignsApp) -> None:
    """Let the loop run until the work ahead is done, as a kernel between two presses."""
    for _ in range(10_000):
        if not app._ahead:
            return
        await asyncio.sleep(0)
    raise AssertionError("the work ahead never finished")


def _no_run(*args, **kwargs):
    raise AssertionError("simulated although it was prepared ahead")


# (start seed, fault preset, a knob moved between presses and its new value)
CASES = [
    (0, "inverted", "window", 5),
    (7, "all", "latency", 1.6),
    (3, "duplicate", "duplicate_rate", 0.6),
    (12, "stall", "clock_skew", 2.0),
]


# (move, idle time before it?, its runs simulated ahead?, its picture drawn ahead?)
Play = list[tuple[Move, bool, bool, bool]]


def _play(seed: int, preset: str, moves: Play, monkeypatch) -> None:
    """Make `moves` in a running event loop, checking what each found prepared, then make them
    again in an app without a loop: every picture and table must be the same bytes."""
    calls: list[str] = []
    real_run = catalog.run

    def counted(design: str, *args, **kwargs):
        calls.append(design)
        return real_run(design, *args, **kwargs)

    async def session() -> list[tuple[bytes, str]]:
        app = FiveDesignsApp(highlight="ballot", preset=preset, seed=seed)
        shown = [_shown(app)]
        for move, idle, runs_ready, picture_ready in moves:
            if idle:
                await _idle(app)
            used, simulated = app.pictures_used, len(calls)
            with monkeypatch.context() as patched:
                patched.setattr(catalog, "run", _no_run if runs_ready else counted)
                move(app)
            assert app.pictures_used == used + picture_ready
            assert runs_ready or len(calls) > simulated  # never served runs of an old knob
            shown.append(_shown(app))
        assert app.done_ahead > 0
        return shown

    ahead = asyncio.run(session())
    plain = FiveDesignsApp(highlight="ballot", preset=preset, seed=seed)  # no loop: no work ahead
    expected = [_shown(plain)]
    for move, *_ in moves:
        move(plain)
        expected.append(_shown(plain))
    assert plain.done_ahead == 0 and plain.pictures_used == 0
    assert len({png for png, _ in expected}) > 3  # the moves change the picture
    for k, (got, want) in enumerate(zip(ahead, expected, strict=True)):
        assert got[0] == want[0], f"picture after move {k} differs"
        assert got[1] == want[1], f"table after move {k} differs"


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "preset", "knob", "value"), CASES)
def test_a_press_after_idle_time_shows_what_an_app_without_work_ahead_shows(
    seed: int, preset: str, knob: str, value: object, monkeypatch
) -> None:
    """Seed moves find their runs and picture prepared; a knob or highlight moved just before a
    press makes the prepared ones stale, and the press simulates and draws afresh."""
    moves: Play = [
        (_seed(+1), True, True, True),
        (_seed(+1), True, True, True),
        (_seed(-1), True, True, True),
        (_set(knob, value), True, False, False),
        (_seed(+1), False, False, False),  # the knob's work ahead had no time: simulated now
        (_seed(+1), True, True, True),  # prepared with the new knob
        (_set("design", "callback"), True, True, False),
        (_seed(-1), False, True, False),  # runs kept from before; the picture had no time
        (_seed(-1), True, True, True),
    ]
    _play(seed, preset, moves, monkeypatch)


@pytest.mark.slow
def test_pictures_drawn_ahead_follow_axes_that_grow(monkeypatch) -> None:
    """Seed 125 of the `inverted` preset outlasts the time axis that seed 124 starts with, and
    the axes keep that room afterwards: drawing 125 ahead must not grow what 123 shows, and a
    picture drawn ahead on the old axes is not shown once they have grown."""
    assert _axis_after(124, 0) < _axis_after(124, +1)  # else this test tests nothing
    moves: Play = [
        (_seed(-1), True, True, True),  # 124's work ahead drew 125 (grown) and this one
        (_seed(+1), True, True, True),
        (_seed(+1), True, True, True),  # 125, grown
        (_seed(-1), False, True, False),
        (_seed(-1), False, True, False),  # 123 was drawn ahead on the old axes: not reused
        (_seed(-1), True, True, True),
    ]
    _play(124, "inverted", moves, monkeypatch)


def _axis_after(seed: int, step: int) -> float:
    app = FiveDesignsApp(preset="inverted", seed=seed)
    app.seed.value += step
    return app.canvas.axes["ballot"].get_xlim()[1]


def test_without_an_event_loop_nothing_is_done_ahead() -> None:
    app = FiveDesignsApp(highlight="ballot", preset="inverted", seed=4)
    app.seed.value = 5
    assert not app._ahead and app.done_ahead == 0 and app.frames_drawn_ahead == 0
    assert {key[2] for key in app._memo} == {4, 5} and not app._pictures


def test_work_ahead_goes_to_the_next_seed_first_one_design_at_a_time() -> None:
    app = FiveDesignsApp(designs=("callback", "ballot"), seed=9)
    assert app._work_ahead(9) == [
        ("run", "callback", 10), ("run", "ballot", 10), ("picture", 10), ("frame",),
        ("run", "callback", 8), ("run", "ballot", 8), ("picture", 8),
    ]  # fmt: skip


def test_a_press_during_the_work_ahead_drops_what_is_left_of_it() -> None:
    """A press arriving mid-way waits for one step at most, and its update starts the work for
    its own neighbours: the old seed's remaining steps are never done."""
    done: list[tuple] = []

    async def session() -> FiveDesignsApp:
        app = FiveDesignsApp(highlight="ballot", preset="inverted", seed=20)
        step = app._ahead._do
        app._ahead._do = lambda s: done.append(s) or step(s)
        while not done:  # the first step runs, then the press arrives
            await asyncio.sleep(0)
        assert done == [("run", "callback", 21)]
        app.seed.value = 30
        await _idle(app)
        return app

    asyncio.run(session())
    assert ("run", "lww", 21) not in done and ("run", "callback", 31) in done
    assert done[1:3] == [("run", "callback", 31), ("run", "lww", 31)]


@pytest.mark.slow
def test_the_memo_and_the_pictures_drawn_ahead_stay_bounded(monkeypatch) -> None:
    monkeypatch.setattr(catalog, "_MEMO_SIZE", 7)
    monkeypatch.setattr(catalog, "PICTURES_KEPT", 1)

    async def session() -> tuple[FiveDesignsApp, list[tuple[bytes, str]]]:
        app = FiveDesignsApp(highlight="lww", preset="all", seed=40)
        shown = []
        for _ in range(4):
            await _idle(app)
            assert len(app._memo) <= 7 and len(app._pictures) <= 1
            app.seed.value += 1
            shown.append(_shown(app))
        return app, shown

    app, shown = asyncio.run(session())
    assert app.done_ahead > 0 and len(app._memo) == 7
    plain = FiveDesignsApp(highlight="lww", preset="all", seed=40)
    for got in shown:
        plain.seed.value += 1
        assert got == _shown(plain)


def test_the_window_is_in_the_key_of_every_design_that_reads_it() -> None:
    app = FiveDesignsApp(designs=("ballot", "fenced", "pipelined"), highlight="pipelined")
    before = dict(app.traces)
    app.window.value = 5
    assert app.traces["ballot"] is before["ballot"]
    assert app.traces["pipelined"] is not before["pipelined"]
    assert app.traces["fenced"] is not before["fenced"]


@pytest.mark.slow
def test_the_in_process_benchmark_runs_small(capsys) -> None:
    """benchmarks.seed_ahead (not one of `python -m benchmarks`) still runs and reports both
    sides, and the app with work ahead spent CPU ahead while idle."""
    from benchmarks import seed_ahead

    assert seed_ahead.main(["--presses", "2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "ahead: press CPU median" in out and "plain: press CPU median" in out
