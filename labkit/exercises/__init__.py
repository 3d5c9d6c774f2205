"""Workshop exercises, each checked against the real code: SQLite, the scenario runner, the
explorer, `WatermarkLoop`, the arrival-order player and, in part three, a PostgreSQL server.

In a notebook::

    from labkit.exercises import ____, frontier_sql_ex
    frontier_sql = ____          # your answer
    frontier_sql_ex.check(frontier_sql)

One module per domain, named as labkit's own subpackages: `frontier` (part one, notebooks
01-03), `catalog` (part two, 04-06), on PostgreSQL `frontier_pg` (07) and `catalog_pg` (08),
and `audit` (10). `kit` holds the machinery (`Exercise`, `Feedback`, `Wrong`, the `____`
placeholder); `sandboxes/` runs the learner's SQL and code behind walls. `part1`, `part2` and
`part3` list each part's exercises; `by_lesson` maps a notebook number (1-8, 10) to the
exercises that practise it, in the order its notebook `exercises/solutions/exNN_*.ipynb` asks
them. The other names
here are what those notebooks read besides the exercises.
"""

from __future__ import annotations

from labkit.exercises import audit, catalog, catalog_pg, frontier, frontier_pg
from labkit.exercises.audit import audit_orphans_ex, fall_log_ex
from labkit.exercises.catalog import (
    HOST_SKEWS,
    apply_rule_ex,
    closing_question_ex,
    crash_verdicts_ex,
    lww_rewind_ex,
    rejection_reasons_ex,
)
from labkit.exercises.catalog_pg import guarded_write_ex, tenant_write_ex
from labkit.exercises.frontier import (
    INDEX_QUERY,
    frontier_sql_ex,
    max_orphans_ex,
    partial_index_ex,
    predict_frontier_ex,
)
from labkit.exercises.frontier_pg import SCRIPTS, condition_ex, interleaving_ex, run_script
from labkit.exercises.kit import BLANK, Exercise, Feedback, ____

__all__ = [
    "BLANK",
    "HOST_SKEWS",
    "INDEX_QUERY",
    "SCRIPTS",
    "Exercise",
    "Feedback",
    "____",
    "apply_rule_ex",
    "audit_orphans_ex",
    "by_lesson",
    "closing_question_ex",
    "condition_ex",
    "crash_verdicts_ex",
    "fall_log_ex",
    "frontier_sql_ex",
    "guarded_write_ex",
    "interleaving_ex",
    "lww_rewind_ex",
    "max_orphans_ex",
    "part1",
    "part2",
    "part3",
    "part4",
    "partial_index_ex",
    "predict_frontier_ex",
    "rejection_reasons_ex",
    "run_script",
    "tenant_write_ex",
]

part1: list[Exercise] = frontier.exercises
part2: list[Exercise] = catalog.exercises
part3: list[Exercise] = frontier_pg.exercises + catalog_pg.exercises  # on a PostgreSQL server
part4: list[Exercise] = audit.exercises  # on a reader's own logs
by_lesson: dict[int, list[Exercise]] = {
    **frontier.by_lesson,
    **catalog.by_lesson,
    **frontier_pg.by_lesson,
    **catalog_pg.by_lesson,
    **audit.by_lesson,
}
