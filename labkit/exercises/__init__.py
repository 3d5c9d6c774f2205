"""Workshop exercises, each checked against the real code: SQLite, the scenario runner, the
explorer, `WatermarkLoop` and the arrival-order player.

In a notebook::

    from labkit.exercises import ____, frontier_sql_ex
    frontier_sql = ____          # your answer
    frontier_sql_ex.check(frontier_sql)

One module per part (`ex1_frontier`, `ex2_ballots`); `kit` holds the machinery (`Exercise`,
`Feedback`, `Wrong`, the `____` placeholder) and `sandbox` runs learner SQL (part three's on
PostgreSQL runs in `ex3_postgres`). `part1`, `part2` and `part3` list each part's exercises;
`by_lesson` maps a notebook number (1-8) to the exercises that practise it, in the order its
notebook `exercises/solutions/ex0N_*.ipynb` asks them.
"""

from __future__ import annotations

from labkit.exercises import ex1_frontier, ex2_ballots, ex3_postgres
from labkit.exercises.ex1_frontier import (
    frontier_sql_ex,
    max_orphans_ex,
    partial_index_ex,
    predict_frontier_ex,
)
from labkit.exercises.ex2_ballots import (
    apply_rule_ex,
    closing_question_ex,
    crash_verdicts_ex,
    lww_rewind_ex,
    rejection_reasons_ex,
)
from labkit.exercises.ex3_postgres import (
    condition_ex,
    guarded_write_ex,
    interleaving_ex,
    tenant_write_ex,
)
from labkit.exercises.kit import BLANK, Exercise, Feedback, ____

__all__ = [
    "BLANK",
    "Exercise",
    "Feedback",
    "____",
    "apply_rule_ex",
    "by_lesson",
    "closing_question_ex",
    "condition_ex",
    "crash_verdicts_ex",
    "frontier_sql_ex",
    "guarded_write_ex",
    "interleaving_ex",
    "lww_rewind_ex",
    "max_orphans_ex",
    "part1",
    "part2",
    "part3",
    "partial_index_ex",
    "predict_frontier_ex",
    "rejection_reasons_ex",
    "tenant_write_ex",
]

part1: list[Exercise] = ex1_frontier.exercises
part2: list[Exercise] = ex2_ballots.exercises
part3: list[Exercise] = ex3_postgres.exercises  # checked on a PostgreSQL server
by_lesson: dict[int, list[Exercise]] = {
    **ex1_frontier.by_lesson,
    **ex2_ballots.by_lesson,
    **ex3_postgres.by_lesson,
}
