"""The workbook's colours stay apart for colour-blind readers, on both themes (issue 38)."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
from svg_colors import data_colors, svg_collisions

from labkit.docs.figures import DEFAULT_OUT
from labkit.plots.colorblind import MIN_DELTA_E, VISIONS, collisions, delta_e
from labkit.plots.style import (
    COLORS,
    DESIGN_MARKS,
    MIN_BACKGROUND_DELTA_E,
    SHOWN_TOGETHER,
    THEMES,
)


def test_the_simulation_reproduces_the_issue_measure() -> None:
    """Issue 38 measured the old fenced green against callback red at 120 normal, 7 deutan."""
    assert delta_e("#2ca02c", "#d62728") == pytest.approx(120, abs=2)
    assert delta_e("#2ca02c", "#d62728", "deuteranopia") == pytest.approx(7.3, abs=0.5)
    assert collisions(["#2ca02c", "#d62728"]).__next__()[2] == "deuteranopia"


@pytest.mark.parametrize("group", sorted(SHOWN_TOGETHER))
def test_meanings_shown_together_stay_apart_for_every_reader(group: str) -> None:
    for a, b in combinations(SHOWN_TOGETHER[group], 2):
        for vision in VISIONS:
            gap = delta_e(COLORS[a], COLORS[b], vision)
            assert gap >= MIN_DELTA_E, f"{group}: {a} vs {b} for {vision}: ΔE {gap:.1f}"


@pytest.mark.parametrize("theme", sorted(THEMES))
def test_every_colour_stands_out_from_the_background(theme: str) -> None:
    background = THEMES[theme].background
    for name, color in COLORS.items():
        for vision in VISIONS:
            gap = delta_e(color, background, vision)
            assert gap >= MIN_BACKGROUND_DELTA_E, f"{name} on {theme} for {vision}: ΔE {gap:.1f}"


def test_each_design_has_its_own_marker_and_line_style() -> None:
    marks = [DESIGN_MARKS[d]["marker"] for d in SHOWN_TOGETHER["designs"] if d in DESIGN_MARKS]
    lines = [str(DESIGN_MARKS[d]["ls"]) for d in DESIGN_MARKS]
    assert len(marks) == len(set(marks)) == len(DESIGN_MARKS)
    assert len(lines) == len(set(lines))


def test_no_committed_figure_has_colours_that_collapse() -> None:
    """The committed SVGs are the build's (test_figures checks their bytes against the code)."""
    assert sorted(DEFAULT_OUT.glob("*.svg")), "no committed figures"
    assert not svg_collisions(DEFAULT_OUT)


def test_the_svg_check_sees_a_collapse(tmp_path: Path) -> None:
    svg = '<path style="fill: #2ca02c; stroke: #000000"/><path style="stroke: #d62728"/>'
    (tmp_path / "old.svg").write_text(svg)
    assert data_colors(svg) == {"#2ca02c", "#d62728"}
    assert len(svg_collisions(tmp_path)) == 1
