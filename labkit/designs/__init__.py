"""The five catalog-update designs on a simulated planner. This face is the designs themselves
(`design`); beside them: `planner` (the simulated planner and reader), `simulator` (the
discrete-event run), `run_stats` (what a run did, counted), `lessons` (the seeds and faults the
lessons show), `schedules` (arrival steps as a type, and their text), `arrival_orders` (a
schedule played on SQLite, every arrival order), `arrival_search` (the fast in-memory search)
and `schedule_builder` (the workbench's step-by-step schedule).
"""

from labkit.designs.design import (
    CAS_CONFLICT,
    DESIGNS,
    DISPLAY_NAMES,
    BallotDesign,
    CasDesign,
    Decision,
    Design,
    Request,
    UnguardedDesign,
    check_design,
    make_design,
)

__all__ = [
    "CAS_CONFLICT",
    "DESIGNS",
    "DISPLAY_NAMES",
    "check_design",
    "make_design",
    "BallotDesign",
    "CasDesign",
    "Decision",
    "Design",
    "Request",
    "UnguardedDesign",
]
