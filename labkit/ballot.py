"""The public face of part two (SPEC section 5): the safe loop, its types, and the simulator.

The loop lives in `labkit.catalog.loop` and the simulator in `labkit.designs.simulator`; this module
only gathers their names for notebooks and outside callers. Nothing inside `labkit` imports
it, so reaching the simulator from here closes no import cycle. `simulate` and `summarize`
are loaded on first use: a process that only runs the loop (a crash child, a worker) does not
pay for importing pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labkit.catalog.loop import (
    INFLIGHT_SQL,
    REASONS,
    Ballot,
    ContentionError,
    Outcome,
    Reason,
    Response,
    ResponseError,
    WatermarkLoop,
    WindowFullError,
)
from labkit.catalog.versions_pg import DurabilityError

if TYPE_CHECKING:  # for type checkers and linters; at run time see `__getattr__` below
    from labkit.designs.simulator import run, simulate, summarize_run

__all__ = [
    "INFLIGHT_SQL",
    "REASONS",
    "Ballot",
    "ContentionError",
    "DurabilityError",
    "Outcome",
    "Reason",
    "Response",
    "ResponseError",
    "WatermarkLoop",
    "WindowFullError",
    "simulate",
    "summarize_run",
    "run",
]

_FROM_PLANNER = ("simulate", "summarize_run", "run")


def __getattr__(name: str) -> Any:
    """`labkit.designs.simulator.simulate` / `summarize_run` / `run`, imported when first asked for."""
    if name in _FROM_PLANNER:
        import labkit.designs.simulator as planner

        return getattr(planner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
