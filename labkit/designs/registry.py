"""Every design a driver can run, in one table: its key, the name a reader sees, the class that
runs it on a store, the model the arrival search plays it on, and the window it takes.

`DESIGNS` (the five notebook 05, its widgets and the figures lay side by side), `ALL_DESIGNS`
(those five and `pipelined`), `WINDOWED` (the designs whose run the window changes) and
`DISPLAY_NAMES` are read off the table; `check_design`, `make_design` and `make_model` are the
one check of a key and the one way to build a design or its model, so a driver, the arrival
search and the model-against-SQLite check all take the same class and model for a key. A new
design is one row here, its class and its model beside each other in its own module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.designs.design import (
    BallotDesign,
    BallotModel,
    CasDesign,
    CasModel,
    Design,
    LwwDesign,
    LwwModel,
    UnguardedDesign,
    UnguardedModel,
)
from labkit.designs.model import DesignModel
from labkit.designs.pipelined import PipelinedDesign, PipelinedModel
from labkit.validation import int_arg


@dataclass(frozen=True)
class DesignSpec:
    """One design: `key` (stable, for code), `display` (what a reader sees), `design` (its class)
    and `model` (its in-memory model). `compared`: one of the designs notebook 05 compares.
    `stored`: it keeps ballots in a durable store (SQLite or PostgreSQL: `path` or `conn`).
    `min_window`: None for a design the window does not change (it runs with one request or
    ballot in flight, whatever window it is given); else the least window it takes."""

    key: str
    display: str
    design: type[Any]
    model: type[DesignModel]
    compared: bool = True
    stored: bool = False
    min_window: int | None = None

    @property
    def windowed(self) -> bool:
        """Whether the window changes this design's run (hedge width or pipeline depth)."""
        return self.min_window is not None

    def accepts(self, window: int) -> bool:
        """Whether this design runs with `window` (a design the window does not change takes
        any)."""
        return self.min_window is None or window >= self.min_window

    def window(self, window: Any) -> int:
        """The window this design runs with when given `window`: 1 for a design the window does
        not change; else `window` itself, checked (an int, at least `min_window`)."""
        if self.min_window is None:
            return 1
        named = f"{self.display} (key {self.key!r})"
        window = int_arg(window, "window", named)
        if not self.accepts(window):
            raise ValueError(f"{named} need window >= {self.min_window}, got {window}")
        return window


SPECS: tuple[DesignSpec, ...] = (
    DesignSpec("callback", "write in callback", UnguardedDesign, UnguardedModel),
    DesignSpec("lww", "last-write-wins", LwwDesign, LwwModel),
    DesignSpec("ballot", "single ballot", BallotDesign, BallotModel, stored=True),
    DesignSpec("fenced", "hedged ballots", BallotDesign, BallotModel, stored=True, min_window=2),
    DesignSpec("cas", "compare-and-set", CasDesign, CasModel),
    # Notebook 05b; not one of the five notebook 05 lays side by side.
    DesignSpec(
        "pipelined",
        "pipelined ballots",
        PipelinedDesign,
        PipelinedModel,
        compared=False,
        stored=True,
        min_window=1,
    ),
)
REGISTRY: dict[str, DesignSpec] = {spec.key: spec for spec in SPECS}

ALL_DESIGNS: tuple[str, ...] = tuple(REGISTRY)
DESIGNS: tuple[str, ...] = tuple(s.key for s in SPECS if s.compared)
# The designs whose run the window changes (hedge width or pipeline depth); every other design
# ignores it, so a cache of runs may leave the window out of their keys.
WINDOWED: tuple[str, ...] = tuple(s.key for s in SPECS if s.windowed)
# What a reader sees for each key (the keys stay stable for code; these are the names).
DISPLAY_NAMES: dict[str, str] = {s.key: s.display for s in SPECS}


def check_design(name: object, among: Iterable[str] = ALL_DESIGNS) -> str:
    """`name` if it is one of `among` (by default every design a driver can run); otherwise the
    one error every driver raises."""
    keys = tuple(among)
    if not isinstance(name, str) or name not in keys:
        raise ValueError(f"unknown design {name!r}; expected one of {', '.join(keys)}")
    return name


def spec(name: object) -> DesignSpec:
    """The row of design `name` (`check_design`'s error for an unknown key)."""
    return REGISTRY[check_design(name)]


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
    of `pipelined` (`WINDOWED`; `DesignSpec.window`); `path` or `conn` hold the store of the
    designs that keep one (`stored`), and are not used by the others."""
    row = spec(name)
    w = row.window(window)
    if row.stored:
        return row.design(conn, window=w, ticks=ticks, first_request=first_request, path=path)
    return row.design(ticks=ticks, first_request=first_request)


def make_model(
    name: str,
    *,
    window: int = 2,
    ticks: int = 1000,
    first_request: int = 1,
    skews: dict[int, float] | None = None,
) -> DesignModel:
    """The in-memory model of design `name`, run as `make_design` runs the design (the same
    window rule); `skews` offsets each request's `updated_at` (host clocks)."""
    row = spec(name)
    return row.model(
        window=row.window(window),
        ticks=ticks,
        first_request=first_request,
        skews=skews,
        name=row.key,
    )
