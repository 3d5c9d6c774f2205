"""The catalog-update designs on a simulated planner. This face is the designs themselves:
the five notebook 05 compares (`design`, `DESIGNS`) and `pipelined` (`pipelined`, with its
durable hold in `labkit.catalog.hold`), each with its in-memory model beside it (`model` holds
what the models share), all six listed once and built by `make_design` / `make_model`
(`registry`, `ALL_DESIGNS`); beside them: `planner` (the simulated planner and reader),
`simulator` (the discrete-event run), `run_stats` (what a run did, counted), `lessons` (the
seeds and faults the lessons show), `schedules` (arrival steps as a type, and their text),
`arrival_orders` (a schedule played on SQLite, every arrival order), `arrival_search` (the fast
search on the models), `schedule_builder` (the workbench's step-by-step schedule),
`pipeline_crash` (pipelined ballots killed at any statement and restarted) and `pipeline_study`
(what notebook 05's section on pipelined ballots measures: lanes, depth and fault comparisons,
the two frontiers).
"""

from labkit.designs.design import (
    CAS_CONFLICT,
    BallotDesign,
    CasDesign,
    Decision,
    Design,
    LwwDesign,
    Request,
    UnguardedDesign,
)
from labkit.designs.pipelined import PipelinedDesign
from labkit.designs.registry import (
    ALL_DESIGNS,
    DESIGNS,
    DISPLAY_NAMES,
    check_design,
    make_design,
    make_model,
)

__all__ = [
    "ALL_DESIGNS",
    "CAS_CONFLICT",
    "DESIGNS",
    "DISPLAY_NAMES",
    "check_design",
    "make_design",
    "make_model",
    "BallotDesign",
    "CasDesign",
    "Decision",
    "Design",
    "LwwDesign",
    "Request",
    "PipelinedDesign",
    "UnguardedDesign",
]
