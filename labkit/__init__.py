"""labkit: the real code behind the Watermark Workbook.

Part one, the gap-free delivery frontier: `frontier` (schema, the log and its status
transitions, the frontier and the wrong MAX rule), `summarizer` (chained checkpoints and
summaries, orphan audit), `triggers` (every trigger query, the busy-loop worker, trigger cost
and query plans), `scenarios` (JSON scenarios and the step runner; files in `scenario_files`),
`explorer` (every delivery order).
Part two, the catalog watermark: `catalog` (append-only versions, the monotonic reader),
`watermark_loop` (WatermarkLoop, the safe commit rule), `ballot` (the public face:
the loop's names and `simulate`), `designs`, `planner` and `planner_model` (the five designs on
a simulated planner), `schedules` (the arrival-step grammar), `arrivals` (a schedule played on
SQLite, every arrival order), `arrival_search` (the fast in-memory search of arrival orders),
`schedule_builder` (the workbench's step-by-step schedule), `crashlab` and `crash_child` (real
killed loops).
Part three, PostgreSQL: `pg` (a server with no set-up), `frontier_pg` (the log on PostgreSQL),
`commit_order` (two writers stepped by hand, the fixes compared), `pg_stress` (the concurrent
stress run), `catalog_pg` and `watermark_pg` (the catalog and the ballot store on PostgreSQL),
`pg_ballots` (the lost update stepped live, worker processes on one catalog).
Figures and widgets, one module per part: `plots.part1_frontier`, `plots.part2_catalog`,
`plots.part3_postgres`, `widgets.part1_frontier`, `widgets.part2_catalog`,
`widgets.part3_postgres` (shared: `plots.style`, `widgets.common`).
Shared: `db` (opening SQLite, write-locking transactions), `storeview` (what is on disk),
`figures` and `figure_specs` (the docs build), `exercises` (workshops: `kit`, `sandbox`, one
module per exercise set), `nbfiles` (strip outputs, student copies); `python -m labkit` is the
command line (`__main__`).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
