"""Widget update latency: the notebook 01 and 05 apps and the arrival-order workbench (04/05),
recompute + redraw per control change.

Each app is built with its defaults (the scenario the notebook opens on), then a control is
moved UPDATES times so every update recomputes: notebook 01's timeline app gets a new priority
for message 1 (the scenario reruns on a fresh SQLite log and the timeline is redrawn), notebook
05's five-designs app a new seed (all five designs are simulated afresh, no memo hit, and the
canvas redrawn); the workbench alternates "deliver response k" (every design plays one more
step, lanes and heads redrawn) with "undo" (every design replays the schedule).
Latency is wall time around setting the control, observers included.
"""

from __future__ import annotations

import gc
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import FIGURES, BenchResult, finish, fmt_s, percentile, print_table

NAME = "widget_latency"
UPDATES = 50
SMOKE_UPDATES = 3
TARGET_P95_S = 0.100
APPS = ("01 FrontierTimelineApp", "05 FiveDesignsApp", "04 ArrivalWorkbench")


def available() -> bool:
    """True once the widget modules are importable (they are written alongside this one)."""
    return all(
        importlib.util.find_spec(m) is not None
        for m in ("labkit.widgets.frontier", "labkit.widgets.catalog")
    )


def _frontier_app() -> tuple[object, Callable[[int], None]]:
    from labkit.widgets.frontier import FrontierTimelineApp

    app = FrontierTimelineApp()
    slider = app.priority_sliders[0]
    values = [v for v in range(slider.min, slider.max + 1) if v != slider.value]

    def change(i: int) -> None:
        # a different value every time, so the inputs differ from the last run and it recomputes
        current = slider.value
        choices = [v for v in values if v != current]
        slider.value = choices[i % len(choices)]

    return app, change


def _catalog_app() -> tuple[object, Callable[[int], None]]:
    from labkit.widgets.catalog import FiveDesignsApp

    app = FiveDesignsApp()
    first = int(app.seed.value)

    def change(i: int) -> None:
        app.seed.value = first + 1 + i  # a seed not seen before: every design is re-simulated

    return app, change


def _workbench_app() -> tuple[object, Callable[[int], None]]:
    from labkit.widgets.catalog import ArrivalWorkbench

    app = ArrivalWorkbench(preset="inverted")

    def change(i: int) -> None:
        # deliver the request the picker offers (one in flight), then undo it: one update each
        app.buttons["undo" if i % 2 else "deliver"].click()

    return app, change


_BUILDERS = {"01": _frontier_app, "05": _catalog_app, "04": _workbench_app}


def measure(app_name: str, updates: int) -> dict[str, object]:
    """Move one control `updates` times; p50/p95 of the wall time and of the app's own timing."""
    build = _BUILDERS[app_name[:2]]
    # Start from a collected heap, as a notebook kernel would: earlier benchmarks in this
    # process leave garbage whose collection would otherwise land inside the updates.
    gc.collect()
    start = time.perf_counter()
    app, change = build()
    built = time.perf_counter() - start
    timings = app.timings  # type: ignore[attr-defined]
    wall = []
    for i in range(updates):
        before = len(timings)
        start = time.perf_counter()
        change(i)
        wall.append(time.perf_counter() - start)
        if len(timings) != before + 1:
            raise AssertionError(
                f"{app_name}: one control change ran {len(timings) - before} updates"
            )
    own = timings[-updates:]
    return {
        "app": app_name,
        "updates": updates,
        "build_s": built,
        "p50_s": percentile(wall, 0.50),
        "p95_s": percentile(wall, 0.95),
        "max_s": max(wall),
        "update_p50_s": percentile(own, 0.50),
        "update_p95_s": percentile(own, 0.95),
        "samples": " ".join(f"{w:.5f}" for w in wall),
    }


def plot(rows: list[dict[str, object]]):
    """Each update's latency per app, with p50, p95 and the 100 ms line."""
    from labkit.plots.style import COLORS, new_figure

    fig = new_figure(7.0, 3.8, layout="constrained")
    ax = fig.add_subplot()
    colors = (COLORS["frontier"], COLORS["fenced"], COLORS["lww"])
    for row, color in zip(rows, colors, strict=True):
        ms = [float(x) * 1e3 for x in str(row["samples"]).split()]
        ax.plot(range(1, len(ms) + 1), ms, "o", ms=3, color=color, label=f"{row['app']}")
        ax.axhline(float(row["p95_s"]) * 1e3, color=color, ls="--", lw=1)
    ax.axhline(TARGET_P95_S * 1e3, color=COLORS["max"], lw=1.5, label="100 ms")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("update (control change)")
    ax.set_ylabel("ms (dashed: p95)")
    ax.set_title("Widget update latency: recompute + redraw")
    ax.legend(loc="upper right", fontsize=8)
    return fig


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure both apps, print p50/p95, write CSV and figure."""
    if not available():
        raise RuntimeError("labkit.widgets.frontier / labkit.widgets.catalog are not there yet")
    import matplotlib

    matplotlib.use("Agg")
    updates = SMOKE_UPDATES if smoke else UPDATES
    rows = [measure(name, updates) for name in APPS]
    print_table(
        [
            {
                **r,
                "build": fmt_s(float(r["build_s"])),
                "p50": fmt_s(float(r["p50_s"])),
                "p95": fmt_s(float(r["p95_s"])),
                "max": fmt_s(float(r["max_s"])),
            }
            for r in rows
        ],
        ("app", "updates", "build", "p50", "p95", "max"),
    )
    ratios = {f"{r['app']}: p95 / 100 ms": float(r["p95_s"]) / TARGET_P95_S for r in rows}
    targets = {f"{r['app']}: p95 under 100 ms": float(r["p95_s"]) < TARGET_P95_S for r in rows}
    return finish(NAME, rows, ratios, targets, plot(rows), out)
