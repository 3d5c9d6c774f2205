"""Figure specs: what a widget showed, as a small JSON file that redraws it exactly.

A spec is `{"format": "workbook-figure/1", "figure": KIND, "state": {...}}`. Where the picture
is reproducible (a bundled scenario, a simulated schedule, a delivery order) the state holds
only the inputs and `draw_saved` recomputes the data with the same labkit functions the app
uses; where it is not (a live PostgreSQL lab, a run against the real planner service, whose
timings are wall-clock) the state holds the recorded data the app drew.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import pandas as pd
from matplotlib.figure import Figure

import labkit.frontier.scenario_format as fmt
import labkit.frontier.scenarios as sc
import labkit.frontier.summarizer as sm
from labkit.designs.arrival_orders import run_schedule
from labkit.designs.pipeline_study import DEPTHS, NO_FAULT, depth_table
from labkit.designs.schedule_builder import ScheduleBuilder
from labkit.designs.schedules import parse_step
from labkit.designs.simulator import run
from labkit.files import replace_file
from labkit.frontier.log import POLICIES
from labkit.pg.commit_order import LabState
from labkit.plots.canvases import FiveDesignsCanvas, WorkbenchCanvas
from labkit.plots.catalog import arrival_lanes_figure
from labkit.plots.frontier import TimelineCanvas, checkpoint_ranges_figure
from labkit.plots.pg import commit_order_timeline_figure
from labkit.plots.pipelined import PipelinedCanvas
from labkit.plots.remote import lanes_figure
from labkit.plots.style import png_bytes
from labkit.remote.views import LaneView
from labkit.typed_json import Count, Int64, NonEmptyText, RowId, dotted, refusal

FORMAT = "workbook-figure/1"


class SpecError(ValueError):
    """A figure spec that cannot be read: one line naming the file and the field."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True):
    pass


class CheckpointRanges(_Strict):
    """A bundled scenario's chained checkpoints for one shard (`EdgeCaseApp`)."""

    scenario: NonEmptyText
    shard: NonEmptyText


class ArrivalLanes(_Strict):
    """An arrival schedule played on designs, drawn up to a step (`InvertedArrivalStepper`)."""

    steps: list[NonEmptyText]
    first_request: RowId
    designs: list[NonEmptyText]
    upto: RowId
    ticks: RowId = 1000


class FrontierTimeline(_Strict):
    """MAX against the frontier for priorities and a delivery order, at a step
    (`FrontierTimelineApp`, `PredictOrphansApp`); `order` as `format_delivery_order` writes it."""

    priorities: list[int]
    order: str
    step: Count | None
    width: float
    height: float
    live_text: bool


class PipelineDepth(_Strict):
    """One pipelined run's lanes beside the throughput curve over the depths
    (`PipelineDepthApp`): the window, the fault (or "none"), the seed, the canvas."""

    window: RowId
    fault: NonEmptyText
    seed: Int64
    ticks: RowId
    title: str
    width: float
    height: float
    depth_top: float


class FiveDesigns(_Strict):
    """One simulated run per design on the same faults and seed, one design highlighted
    (`FiveDesignsApp`): each design's knobs, and the axes' floor the app's canvas kept."""

    designs: list[NonEmptyText]
    faults: list[NonEmptyText]
    seed: Int64
    params: dict[str, dict[str, int | float]]
    highlight: NonEmptyText
    at_least: tuple[float, float]
    width: float
    height: float
    live_titles: bool


class Workbench(_Strict):
    """An arrival schedule played on every design, one design's lanes shown
    (`ArrivalWorkbench`): the builder's settings, and the room the app's canvas grew to."""

    designs: list[NonEmptyText]
    window: RowId
    depth: RowId
    ticks: RowId
    steps: list[NonEmptyText]
    focus: NonEmptyText
    rooms: tuple[Count, Count, Count]
    width: float


class Table(_Strict):
    """A recorded DataFrame: its columns and its rows."""

    columns: list[str]
    rows: list[list[Any]]


class CommitOrderTimeline(_Strict):
    """Recorded, not recomputed: the live PostgreSQL lab's state (`CommitOrderApp`)."""

    lab: LabState
    title: str


class RemoteLanes(_Strict):
    """Recorded, not recomputed: the real planner run's lanes (wall-clock timings) and what
    its reader process saw (`RealPlannerApp`)."""

    view: LaneView
    design: NonEmptyText
    title: str
    reader: Table | None = None


State = (
    CheckpointRanges
    | ArrivalLanes
    | FrontierTimeline
    | PipelineDepth
    | FiveDesigns
    | Workbench
    | CommitOrderTimeline
    | RemoteLanes
)


@dataclass(frozen=True)
class _Kind:
    state: type[State]
    figure: Callable[[Any], Figure]
    png: Callable[[Any, int], bytes] | None = None  # the widget's own rendering, where it differs


def checkpoint_ranges_of(
    scenario: fmt.Scenario, shard: str, timeline: pd.DataFrame | None = None
) -> Figure:
    """Replay `scenario` and draw `shard`'s chained checkpoint ranges per policy
    (`timeline`, its `run_scenario` output, when the caller has it already)."""
    state = sc.run_scenario(scenario) if timeline is None else timeline
    conn = sc.replay_scenario(scenario)
    try:
        ranges = {p: sm.summaries(conn, shard, p) for p in POLICIES}
        lost = {p: sm.orphans(conn, shard, p) for p in POLICIES}
        ids = [i for s in state[state["shard"] == shard]["statuses"] for i in s]
    finally:
        conn.close()
    title = f"Chained checkpoints of shard {shard!r}"
    return checkpoint_ranges_figure(ranges, lost, last_id=max(ids, default=None), title=title)


def _checkpoint_ranges(state: CheckpointRanges) -> Figure:
    return checkpoint_ranges_of(fmt.load_scenario(state.scenario), state.shard)


def _arrival_lanes(state: ArrivalLanes) -> Figure:
    steps = [parse_step(s) for s in state.steps]
    results = [
        run_schedule(d, steps, first_request=state.first_request, ticks=state.ticks)
        for d in state.designs
    ]
    return arrival_lanes_figure(results, upto=state.upto)


def _timeline_canvas(state: FrontierTimeline) -> TimelineCanvas:
    n = len(state.priorities)
    steps = sc.parse_delivery_order(state.order, n)
    timeline = sc.run_scenario(sc.scenario_from_steps(state.priorities, steps))
    canvas = TimelineCanvas(state.width, state.height, live_text=state.live_text)
    canvas.render(timeline, step=state.step)
    return canvas


def _drawn(fig: Figure | None) -> Figure:
    """A canvas's figure once it has drawn (a canvas builds its figure at its first draw)."""
    assert fig is not None, "the canvas has drawn"
    return fig


def _frontier_timeline(state: FrontierTimeline) -> Figure:
    return _drawn(_timeline_canvas(state).fig)


def _pipeline_canvas(state: PipelineDepth) -> PipelinedCanvas:
    faults = () if state.fault == NO_FAULT else (state.fault,)
    trace = run("pipelined", faults, state.seed, ticks=state.ticks, window=state.window).trace
    depth = depth_table(DEPTHS, faults, state.seed, ticks=state.ticks)
    canvas = PipelinedCanvas(state.width, state.height, legend=False, depth_top=state.depth_top)
    canvas.update(trace, depth, state.window, state.title)
    return canvas


def _five_designs(state: FiveDesigns, dpi: int = 80) -> tuple[FiveDesignsCanvas, bytes]:
    faults, traces = tuple(state.faults), {}
    for d in state.designs:
        knobs: dict[str, Any] = state.params.get(d, {})
        traces[d] = run(d, faults, state.seed, **knobs).trace
    canvas = FiveDesignsCanvas(
        state.designs, width=state.width, height=state.height, live_titles=state.live_titles
    )
    png = canvas.png(traces, state.highlight, dpi=dpi, at_least=state.at_least)
    return canvas, png


def _workbench(state: Workbench, dpi: int) -> tuple[WorkbenchCanvas, bytes]:
    builder = ScheduleBuilder(
        state.designs, window=state.window, ticks=state.ticks, depth=state.depth
    )
    builder.load(state.steps)
    canvas = WorkbenchCanvas(state.designs, width=state.width, rooms=state.rooms)
    return canvas, canvas.png(builder.runs, builder.steps, state.focus, dpi=dpi)


def _commit_order(state: CommitOrderTimeline) -> Figure:
    return commit_order_timeline_figure(state.lab, title=state.title)


def _remote_lanes(state: RemoteLanes) -> Figure:
    reader = None
    if state.reader is not None:
        reader = pd.DataFrame(state.reader.rows, columns=state.reader.columns)
    return lanes_figure(state.view, state.design, reader=reader, title=state.title)


KINDS: dict[str, _Kind] = {
    "checkpoint_ranges": _Kind(CheckpointRanges, _checkpoint_ranges),
    "arrival_lanes": _Kind(ArrivalLanes, _arrival_lanes),
    "frontier_timeline": _Kind(
        FrontierTimeline,
        _frontier_timeline,
        lambda state, dpi: _timeline_canvas(state).png(dpi=dpi),
    ),
    "pipeline_depth": _Kind(
        PipelineDepth,
        lambda state: _pipeline_canvas(state).fig,
        lambda state, dpi: _pipeline_canvas(state).png(dpi),
    ),
    "five_designs": _Kind(
        FiveDesigns,
        lambda state: _five_designs(state)[0].fig,
        lambda state, dpi: _five_designs(state, dpi)[1],
    ),
    "workbench": _Kind(
        Workbench,
        lambda state: _drawn(_workbench(state, 80)[0].fig),
        lambda state, dpi: _workbench(state, dpi)[1],
    ),
    "commit_order_timeline": _Kind(CommitOrderTimeline, _commit_order),
    "remote_lanes": _Kind(RemoteLanes, _remote_lanes),
}
_NAMES = {kind.state: name for name, kind in KINDS.items()}


class Spec(_Strict):
    """A checked figure spec: which figure, and the state that redraws it."""

    format: Literal["workbook-figure/1"]
    figure: str  # one of `KINDS`
    state: dict[str, Any]


@dataclass(frozen=True)
class SavedFigure:
    """A spec read and checked: its kind's name and its typed state."""

    figure: str
    state: State


def table_of(frame: pd.DataFrame) -> Table:
    """A DataFrame as a recorded `Table` (plain Python values, so JSON can hold it)."""
    rows = [[v.item() if hasattr(v, "item") else v for v in row] for row in frame.to_numpy()]
    return Table(columns=[str(c) for c in frame.columns], rows=rows)


def spec_bytes(state: State) -> bytes:
    """The spec file's bytes for `state`: sorted keys, two-space indent, one final newline."""
    doc = {"format": FORMAT, "figure": _NAMES[type(state)], "state": msgspec.to_builtins(state)}
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def write_spec(path: Path | str, state: State) -> Path:
    """Write `state` as a figure spec at `path` (beside and renamed: `labkit.files`)."""
    path = Path(path)
    replace_file(path, spec_bytes(state))
    return path


def load_spec(path: Path | str) -> SavedFigure:
    """Read and check a figure spec; `SpecError` (one line: the file, the field) if it is bad."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read it ({exc.__class__.__name__})") from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        spec = msgspec.convert(data, Spec)
    except msgspec.ValidationError as exc:
        raise _refused(path, exc, data, ()) from None
    if spec.figure not in KINDS:
        raise SpecError(f"{path}: figure: expected one of {list(KINDS)}, got {spec.figure!r}")
    try:
        state = msgspec.convert(spec.state, KINDS[spec.figure].state)
    except msgspec.ValidationError as exc:
        raise _refused(path, exc, spec.state, ("state",)) from None
    for field, problem in _text_problems(state):
        raise SpecError(f"{path}: {dotted(('state', *field))}: {problem}")
    return SavedFigure(spec.figure, state)


def _text_problems(state: State) -> list[tuple[tuple[str | int, ...], str]]:
    """What the state's text fields say that their own parsers refuse, before anything runs."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(state, CheckpointRanges):
        names = [p.stem for p in fmt.list_scenarios()]
        if state.scenario not in names:
            found.append((("scenario",), f"no bundled scenario {state.scenario!r} ({names})"))
    if isinstance(state, (ArrivalLanes, Workbench)):
        for i, text in enumerate(state.steps):
            try:
                parse_step(text)
            except ValueError as exc:
                found.append((("steps", i), str(exc)))
    if isinstance(state, FrontierTimeline):
        try:
            sc.parse_delivery_order(state.order, len(state.priorities))
        except ValueError as exc:
            found.append((("order",), str(exc)))
    return found


def _refused(path: Path, exc: msgspec.ValidationError, data: Any, under: tuple) -> SpecError:
    said = refusal(exc, data, choices={"figure": list(KINDS), "format": [FORMAT]})
    where = dotted((*under, *said.path)) or "the document"
    return SpecError(f"{path}: {where}: {said.problem}")


def _saved(spec: SavedFigure | State | Path | str) -> SavedFigure:
    if isinstance(spec, SavedFigure):
        return spec
    if isinstance(spec, (Path, str)):
        return load_spec(spec)
    return SavedFigure(_NAMES[type(spec)], spec)


def draw_saved(spec: SavedFigure | State | Path | str) -> Figure:
    """Redraw a saved figure (a spec file, or one already read) with the app's plot function."""
    saved = _saved(spec)
    return KINDS[saved.figure].figure(saved.state)


def saved_png(spec: SavedFigure | State | Path | str, dpi: int) -> bytes:
    """The PNG the app itself showed for the spec's state at `dpi` (its own rendering path)."""
    saved = _saved(spec)
    kind = KINDS[saved.figure]
    if kind.png is not None:
        return kind.png(saved.state, dpi)
    return png_bytes(kind.figure(saved.state), dpi=dpi)
