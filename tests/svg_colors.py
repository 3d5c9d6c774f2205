"""The colours a built SVG paints, and the pairs of them a colour-blind reader cannot tell apart."""

from __future__ import annotations

import re
from pathlib import Path

from labkit.plots.colorblind import chroma, collisions

SVG_COLOR = re.compile(r"(?:fill|stroke|stop-color)(?::\s*|=\")(#[0-9a-fA-F]{6})")
# Text, ticks, grid, spines and "black" marks are greys (no hue): lightness tells them apart.
GREY_CHROMA = 8.0


def data_colors(svg: str) -> set[str]:
    """The hued colours an SVG paints (fills and strokes), greys left out."""
    return {c.lower() for c in SVG_COLOR.findall(svg) if chroma(c) >= GREY_CHROMA}


def svg_collisions(folder: Path) -> list[str]:
    """Per SVG in `folder` (the benchmark plots too), each pair of its hued colours that
    collapses for some reader."""
    found = []
    for svg in sorted(folder.glob("*.svg")):
        for a, b, vision, gap in collisions(data_colors(svg.read_text())):
            found.append(f"{svg.name}: {a} vs {b} for {vision} (ΔE {gap:.1f})")
    return found
