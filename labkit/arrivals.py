"""Public face (SPEC section 5) of every arrival order: `explore`, `run_schedule` and friends,
defined in `labkit.designs.arrival_orders`.
"""

from labkit.designs.arrival_orders import (
    CAS_CASES,
    ScheduleResult,
    StepOutcome,
    cas_versus_ballot,
    closing_question,
    explore,
    explore_all,
    explore_by_replay,
    run_schedule,
    verify_model_against_sqlite,
)

__all__ = [
    "CAS_CASES",
    "cas_versus_ballot",
    "closing_question",
    "explore",
    "explore_all",
    "explore_by_replay",
    "run_schedule",
    "verify_model_against_sqlite",
    "ScheduleResult",
    "StepOutcome",
]
