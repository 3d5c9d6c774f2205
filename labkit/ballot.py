"""The public face of part two (SPEC section 5): the safe loop, its types, and the simulator.

The loop lives in `labkit.catalog.loop`, the simulator in `labkit.designs.simulator` and its
run statistics in `labkit.designs.run_stats`; this module only gathers their names for
notebooks and outside callers. Nothing inside `labkit` imports it, so reaching the simulator
from here closes no import cycle. `simulate`, `run` and `summarize_run` are loaded on first
use: a process that only runs the loop (a crash child, a worker) does not pay for importing
pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labkit.catalog.loop import (
    INFLIGHT_SQL,
    Ballot,
    ContentionError,
    Outcome,
    Response,
    ResponseError,
    WatermarkLoop,
    WindowFullError,
)
from labkit.catalog.rule import REASONS, Reason
from labkit.catalog.versions_pg import DurabilityError

if TYPE_CHECKING:  # for type checkers and linters; at run time see `__getattr__` below
    from labkit.designs.run_stats import summarize_run
    from labkit.designs.simulator import run, simulate

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


def __getattr__(name: str) -> Any:
    """`simulate` and `run` (`labkit.designs.simulator`) and `summarize_run`
    (`labkit.designs.run_stats`), imported when first asked for."""
    if name in ("simulate", "run"):
        import labkit.designs.simulator as simulator

        return getattr(simulator, name)
    if name == "summarize_run":
        import labkit.designs.run_stats as run_stats

        return run_stats.summarize_run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
