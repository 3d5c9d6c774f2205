"""labkit: the real code behind the Watermark Workbook.

Part one, the gap-free delivery frontier: `frontier` (schema, the log and its status
transitions, the frontier and the wrong MAX rule), `summarizer` (chained checkpoints and
summaries, orphan audit), `triggers` (every trigger query, the busy-loop worker, trigger cost
and query plans), `scenarios` (JSON scenarios and the step runner), `explorer` (every delivery
order).
Part two, the catalog watermark: `catalog` (append-only versions, the monotonic reader),
`watermark_loop` (WatermarkLoop, the safe commit rule), `ballot` (the public face:
the loop's names and `simulate`), `designs`, `planner` and `planner_model` (the designs on a
simulated planner), `arrivals` (every arrival order), `crashlab` and `crash_child` (real killed
loops).
Figures and widgets, one module per part: `plots.part1_frontier`, `plots.part2_catalog`,
`widgets.part1_frontier`, `widgets.part2_catalog` (shared: `plots.style`, `widgets.common`).
Shared: `db` (opening SQLite, write-locking transactions), `storeview` (what is on disk),
`figures` and `figure_specs` (the docs build), `exercises` (workshops: `kit`, `sandbox`, one
module per exercise set), `nbfiles` (strip outputs, student copies).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
