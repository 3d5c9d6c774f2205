"""The workbench draws less without showing anything else: its frame drawn in parts (the base
per figure height, then ticks and spines, the lanes' title with the texts), whole pictures kept
by what they show, and taller frames drawn ahead while the kernel is idle. Each picture is
compared byte for byte with one drawn without that shortcut."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from matplotlib.axis import XTick
from matplotlib.backends.backend_agg import FigureCanvasAgg

from labkit.designs.schedule_builder import ScheduleBuilder
from labkit.plots.canvases import AHEAD_HEIGHTS, WorkbenchCanvas
from labkit.widgets.catalog import ArrivalWorkbench

SCHEDULE_14 = (
    "timeout 1; deliver 2; deliver 3; deliver 1; dup 2; deliver 4; timeout; deliver 5; "
    "deliver 6; dup 5; crash; deliver 7; stale 8; deliver 9"
)
LONGER = SCHEDULE_14 + "; deliver 10; deliver 11; timeout; deliver 13; deliver 12; dup 13"
DESIGN_SETS = [None, ["ballot", "pipelined", "fenced"]]
pytestmark = pytest.mark.slow  # each draws whole workbench pictures: a second of CPU or more


def whole_frames(canvas: WorkbenchCanvas) -> WorkbenchCanvas:
    """`canvas` drawing as before the frame came in parts: each frame drawn whole, with the
    lanes' title in it (keyed by what the title says), every data artist drawn (empty or not),
    and no picture kept."""
    canvas.kept_pngs = 0
    png = canvas._frames.png

    def whole(fig, _drawn, key, dpi, texts=(), **_parts):
        title = canvas.lanes_title
        for framed in (title, canvas.suptitle):
            framed.set_animated(False)  # in the frame (a canvas that drew the new way marked it)
        rest = [t for t in texts if t is not title and t is not canvas.suptitle]
        every = canvas._dynamic
        return png(fig, every, (key, title.get_text(), title.get_color()), dpi, rest)

    canvas._frames.png = whole
    return canvas


def sessions(designs: list[str] | None) -> Iterator[tuple[ScheduleBuilder, str, bool]]:
    """A builder's states in a session (steps added, undone, retyped, a longer schedule) with
    the focus shown and whether the axes were rescaled first, as the workbench does."""
    b = ScheduleBuilder(designs)
    focus = b.designs[0]
    b.use_preset("inverted")
    yield b, focus, False
    for schedule in (SCHEDULE_14, "timeout; deliver 2; deliver 1", LONGER, SCHEDULE_14):
        b.load(schedule)
        yield b, focus, True
        b.undo()
        yield b, focus, False
        for other in (b.designs[-1], focus):
            yield b, other, False
        b.undo()
        yield b, focus, False


@pytest.mark.parametrize("designs", DESIGN_SETS)
def test_a_frame_in_parts_and_kept_pictures_show_what_whole_frames_do(designs) -> None:
    b = ScheduleBuilder(designs)
    fast, before = WorkbenchCanvas(b.designs), whole_frames(WorkbenchCanvas(b.designs))
    shown = 0
    for builder, focus, rescaled in sessions(designs):
        if rescaled:
            fast.rescale()
            before.rescale()
        got = fast.png(builder.runs, builder.steps, focus)
        assert got == before.png(builder.runs, builder.steps, focus)
        shown += 1
    assert 0 < len(fast.pngs) < shown  # states came back, and each was kept once


def test_a_tall_figure_whose_titles_meet_draws_them_as_a_whole_frame_does() -> None:
    """24 lanes of `pipelined` (its long lanes' title): the figure's title, placed by a fraction
    of the height, comes down onto the lanes' title, and the two are drawn in a whole frame's
    order (the lanes' first)."""
    b = ScheduleBuilder(["ballot", "pipelined", "fenced", "cas"], depth=3)
    b.load(
        "deliver 1; stale 2; deliver 3; timeout; deliver 8; timeout; deliver 12; timeout; "
        "timeout 16; timeout"
    )
    fast, before = WorkbenchCanvas(b.designs), whole_frames(WorkbenchCanvas(b.designs))
    got = fast.png(b.runs, b.steps, "pipelined")
    assert fast._rooms[0] == 24
    assert got == before.png(b.runs, b.steps, "pipelined")


def test_a_kept_picture_is_served_only_for_exactly_what_it_showed(monkeypatch) -> None:
    b = ScheduleBuilder()
    b.load(SCHEDULE_14)
    canvas = WorkbenchCanvas(b.designs)
    canvas.kept_pngs = 3
    drawn = []
    frames_png = canvas._frames.png
    monkeypatch.setattr(
        canvas._frames, "png", lambda *a, **k: drawn.append(1) or frames_png(*a, **k)
    )

    def shown(focus: str = "callback", dpi: int = 80) -> bytes:
        drawn.clear()
        return canvas.png(b.runs, b.steps, focus, dpi=dpi)

    first = shown()
    assert drawn and shown() == first and not drawn  # the same state: no drawing
    others = {"focus": shown("lww"), "dpi": shown(dpi=60)}
    assert drawn and len(set(others.values()) | {first}) == 3
    b.undo()  # other runs and steps: drawn, not served
    assert shown() != first and drawn
    assert len(canvas.pngs) == 3  # bounded: the oldest (the first state) was dropped
    b.load(SCHEDULE_14)
    assert shown() == first and drawn  # drawn again, the same picture
    canvas.rescale()  # the same state on the axes sized afresh would be new; here they match
    assert shown() == first
    b.load("timeout; deliver 2; deliver 1")
    small = shown()
    canvas.rescale()  # smaller axes than the long schedule left: a new picture, not the kept one
    assert shown() != small and drawn


@pytest.mark.parametrize("designs", DESIGN_SETS)
def test_frames_drawn_ahead_leave_every_picture_as_it_was(designs, monkeypatch) -> None:
    b = ScheduleBuilder(designs)
    b.use_preset("inverted")
    ahead, before = WorkbenchCanvas(b.designs), whole_frames(WorkbenchCanvas(b.designs))
    focus = b.designs[0]
    assert ahead.png(b.runs, b.steps, focus) == before.png(b.runs, b.steps, focus)
    height = ahead.fig.get_size_inches()[1]
    done = [ahead.draw_ahead() for _ in range(AHEAD_HEIGHTS + 2)]
    assert done == [True] * (AHEAD_HEIGHTS + 1) + [False]  # the tick marks, the bases
    assert ahead.fig.get_size_inches()[1] == height  # the figure was put back
    assert ahead.png(b.runs, b.steps, focus) == before.png(b.runs, b.steps, focus)
    full_draws, ticks_made = [], []
    draw, make_tick = FigureCanvasAgg.draw, XTick.__init__
    monkeypatch.setattr(FigureCanvasAgg, "draw", lambda c: full_draws.append(1) or draw(c))
    monkeypatch.setattr(
        XTick, "__init__", lambda *a, **k: ticks_made.append(1) or make_tick(*a, **k)
    )
    b.load(SCHEDULE_14)  # 12 lanes: the second taller figure, whose base was drawn ahead
    ahead.rescale()
    got = ahead.png(b.runs, b.steps, focus)
    assert ahead.fig.get_size_inches()[1] > height and not full_draws and not ticks_made
    before.rescale()
    assert got == before.png(b.runs, b.steps, focus)


def test_an_idle_kernel_draws_taller_frames_ahead_and_a_script_does_not() -> None:
    async def in_a_kernel() -> ArrivalWorkbench:
        bench = ArrivalWorkbench(preset="inverted")
        # the loop idles until the work ahead is done (however long a busy machine takes)
        for _ in range(100_000):
            if not bench._ahead:
                break
            await asyncio.sleep(0.001)
        return bench

    assert asyncio.run(in_a_kernel()).done_ahead == AHEAD_HEIGHTS + 1  # bases, tick marks
    assert ArrivalWorkbench(preset="inverted").done_ahead == 0


@pytest.mark.parametrize("designs", DESIGN_SETS)
def test_the_workbench_shows_what_it_showed_before_clicks_came_back(designs) -> None:
    """Clicks, focus, depth, presets and typed schedules on two workbenches, one whose canvas
    draws whole frames and keeps no picture: every picture is the same."""
    fast, before = (ArrivalWorkbench(preset="inverted", designs=designs) for _ in range(2))
    whole_frames(before.canvas).pngs.clear()
    before.canvas.rescale()  # its first picture was drawn the new way: draw it again
    before.update()
    assert fast.last_png == before.last_png

    def both(act) -> None:
        for bench in (fast, before):
            act(bench)
        assert fast.last_png == before.last_png

    for name in (
        "deliver",
        "undo",
        "deliver",
        "dup",
        "undo",
        "undo",
        "deliver",
        "stale",
        "oldest",
        "crash",
        "undo",
        "give_up",
        "deliver",
        "undo",
    ):
        if not fast.buttons[name].disabled:
            both(lambda bench, name=name: bench.buttons[name].click())
    for design in (*fast.designs, fast.designs[0]):
        both(lambda bench, design=design: setattr(bench.focus, "value", design))
    both(lambda bench: bench.type_schedule(SCHEDULE_14))
    if "pipelined" in fast.designs:
        for depth in (3, 1, 2):
            both(lambda bench, depth=depth: setattr(bench.depth, "value", depth))
    both(lambda bench: bench.buttons["reset"].click())
    both(lambda bench: setattr(bench.preset, "value", "stall"))
    both(lambda bench: bench.type_schedule(LONGER))
    assert fast.canvas.pngs and not before.canvas.pngs
