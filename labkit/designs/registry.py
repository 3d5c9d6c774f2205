"""Every design a driver can run: the five notebook 05 compares, plus `pipelined`.

`labkit.designs.design.DESIGNS` stays the five that notebook 05, its widgets and the figures
lay side by side; `pipelined` is registered here, next to them, so that `simulate`,
`run_schedule` and `explore` run it without any of those changing until it joins them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit.designs.design import DESIGNS, Design
from labkit.designs.design import make_design as make_compared
from labkit.designs.pipelined import PipelinedDesign

EXTRA_DESIGNS: tuple[str, ...] = ("pipelined",)
ALL_DESIGNS: tuple[str, ...] = (*DESIGNS, *EXTRA_DESIGNS)


def check_design(name: object) -> str:
    """`name` if a driver can run it (`ALL_DESIGNS`); otherwise the one error all raise."""
    if not isinstance(name, str) or name not in ALL_DESIGNS:
        raise ValueError(f"unknown design {name!r}; expected one of {', '.join(ALL_DESIGNS)}")
    return name


# The designs whose run the window changes (hedge width or pipeline depth); every other design
# ignores it, so a cache of runs may leave the window out of their keys.
WINDOWED: tuple[str, ...] = ("fenced", "pipelined")


def make_design(
    name: str,
    *,
    window: int = 3,
    ticks: int = 20,
    first_request: int = 1,
    path: str | Path | None = None,
    conn: Any = None,
) -> Design:
    """Build any design by name; `window` is the hedge width of `fenced` and the pipeline depth
    of `pipelined` (`WINDOWED`) (any W >= 1: W = 1 is `ballot` with the hash check); `path` or `conn` hold
    the ballot designs' store."""
    check_design(name)
    if name == "pipelined":
        return PipelinedDesign(
            conn, window=window, ticks=ticks, first_request=first_request, path=path
        )
    return make_compared(
        name, window=window, ticks=ticks, first_request=first_request, path=path, conn=conn
    )
