"""Pictures readable projected: every text in an app's picture is at least `MIN_TEXT_PX` tall at
the dpi the app draws it, and every shard name the workbook uses is drawn with real glyphs
(the bundled "Workbook CJK" subset where DejaVu Sans has none)."""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from matplotlib import font_manager
from matplotlib.figure import Figure
from matplotlib.text import Text

from labkit.plots.saved import draw_saved
from labkit.plots.style import FONTS_DIR, MIN_TEXT_PX, new_figure, png_bytes, workbook_style
from labkit.widgets.common import WIDGET_DPI

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "data" / "scenarios"


def _shard_names() -> set[str]:
    """Every shard name the bundled scenarios use (a "shard" value anywhere in a file)."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "shard" and isinstance(value, str):
                    names.add(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(SCENARIOS.glob("*.json")):
        walk(json.loads(path.read_text(encoding="utf-8")))
    return names


def test_the_scenarios_name_a_shard_dejavu_cannot_draw() -> None:
    """The font matters: without it this name would be drawn as boxes."""
    assert any(ord(ch) > 0x2E80 for name in _shard_names() for ch in name)


def test_the_subset_font_ships_with_its_license_and_is_small() -> None:
    fonts = sorted(FONTS_DIR.glob("*.otf"))
    assert fonts and (FONTS_DIR / "OFL.txt").is_file()
    assert sum(f.stat().st_size for f in fonts) < 50_000  # a subset, not a 16 MB CJK font
    found = font_manager.findfont("Workbook CJK", fallback_to_default=False)
    assert Path(found).parent == FONTS_DIR


@pytest.mark.parametrize("fmt", ["png", "svg"])
@pytest.mark.parametrize("weight", ["normal", "bold"])
def test_every_shard_name_renders_without_a_missing_glyph(fmt: str, weight: str) -> None:
    with workbook_style():
        fig = new_figure(4, 0.4 * len(_shard_names()) + 0.4)
        for i, name in enumerate(sorted(_shard_names())):
            fig.text(0.05, 0.1 + i * 0.3 / fig.get_figheight(), name, fontweight=weight)
        fig.suptitle(f"Chained checkpoints of shard {sorted(_shard_names())[-1]!r}")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font.*")
        fig.savefig(io.BytesIO(), format=fmt)


def _apps() -> Iterator[tuple[str, Callable[[], Any]]]:
    """The widget apps whose picture a projector shows, as the notebooks build them."""
    from labkit.designs.registry import ALL_DESIGNS
    from labkit.widgets.catalog import ArrivalWorkbench, FiveDesignsApp, InvertedArrivalStepper
    from labkit.widgets.frontier import EdgeCaseApp, FrontierTimelineApp, PredictOrphansApp
    from labkit.widgets.pipelined import PipelineDepthApp

    def workbench_05() -> ArrivalWorkbench:
        bench = ArrivalWorkbench(preset=None, focus="lww", designs=ALL_DESIGNS)
        bench.fill_shortest()
        return bench

    yield "01 timeline", lambda: FrontierTimelineApp(n=6)

    def predicted() -> PredictOrphansApp:
        app = PredictOrphansApp(seed=0)
        app.reveal()  # the picture appears once an answer is locked in
        return app

    yield "01 predict", predicted
    yield "02 edge cases", lambda: EdgeCaseApp("odd_shard_keys")
    yield "04 stepper", InvertedArrivalStepper
    yield "04 workbench", lambda: ArrivalWorkbench(preset="inverted")
    yield "05 five designs", lambda: FiveDesignsApp(highlight="ballot", preset="inverted")
    yield "05 workbench", workbench_05
    yield "05 pipelined", lambda: PipelineDepthApp(window=4, fault="stall", seed=0)


def _small_texts(fig: Figure, dpi: float) -> list[str]:
    """Visible, non-empty texts under `MIN_TEXT_PX` pixels at `dpi` (tick labels included)."""
    png_bytes(fig, dpi=int(dpi))  # lays the figure out: tick labels exist once drawn
    small = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        px = text.get_fontsize() * dpi / 72
        if px < MIN_TEXT_PX - 0.01:
            small.append(f"{text.get_text()[:30]!r}: {px:.1f} px")
    return sorted(set(small))


@pytest.mark.slow
@pytest.mark.parametrize("name,build", list(_apps()), ids=[n for n, _ in _apps()])
def test_every_text_in_an_app_picture_is_at_least_10_px(name: str, build: Callable) -> None:
    app = build()
    assert app.shown is not None, f"{name} drew nothing"
    small = _small_texts(draw_saved(app.shown), WIDGET_DPI)
    assert not small, f"{name}: texts under {MIN_TEXT_PX} px at {WIDGET_DPI} dpi: {small}"
