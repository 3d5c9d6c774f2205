"""How far apart two colours look for readers with colour-vision deficiency.

Simulation by Machado, Oliveira and Fernandes (2009) at full severity, applied to linear sRGB;
distance is CIELAB ΔE76 (D65). Below `MIN_DELTA_E` two marks read as the same colour.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from itertools import combinations

from matplotlib.colors import to_rgb

# ΔE76 under which two marks side by side in a small figure look alike (issue 38: about 10).
MIN_DELTA_E = 10.0

Matrix = tuple[tuple[float, float, float], ...]

# Machado et al. 2009, severity 1.0, for linear RGB.
DEFICIENCIES: dict[str, Matrix] = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}
VISIONS = ("normal", *DEFICIENCIES)

Lab = tuple[float, float, float]


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _lab_of_linear(r: float, g: float, b: float) -> Lab:
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x), f(y), f(z)
    return (116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz))


def lab(color: str, vision: str = "normal") -> Lab:
    """CIELAB of a matplotlib colour as a reader with `vision` (one of `VISIONS`) sees it."""
    rgb = [_linear(c) for c in to_rgb(color)]
    if vision != "normal":
        m = DEFICIENCIES[vision]
        rgb = [min(1.0, max(0.0, sum(m[i][j] * rgb[j] for j in range(3)))) for i in range(3)]
    return _lab_of_linear(*rgb)


def delta_e(a: str, b: str, vision: str = "normal") -> float:
    """CIELAB ΔE76 between colours `a` and `b` as seen with `vision`."""
    return math.dist(lab(a, vision), lab(b, vision))


def worst_delta_e(a: str, b: str) -> tuple[float, str]:
    """The smallest ΔE76 between `a` and `b` over normal vision and the three deficiencies."""
    return min((delta_e(a, b, v), v) for v in VISIONS)


def chroma(color: str) -> float:
    """CIELAB chroma under normal vision: near 0 for greys, black and white."""
    _, a, b = lab(color)
    return math.hypot(a, b)


def collisions(
    colors: Iterable[str], min_delta: float = MIN_DELTA_E
) -> Iterator[tuple[str, str, str, float]]:
    """Each pair of `colors` closer than `min_delta` for some reader: (a, b, vision, ΔE)."""
    for a, b in combinations(sorted(set(colors)), 2):
        worst, vision = worst_delta_e(a, b)
        if worst < min_delta:
            yield a, b, vision, worst
