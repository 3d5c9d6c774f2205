"""labkit: the real code behind the Watermark Workbook.

Part one, the gap-free delivery frontier: `frontier` (schema, log operations, the frontier and
the wrong MAX rule, trigger queries), `summarizer` (chained checkpoints, orphan audit),
`scenarios` (JSON scenarios and the step runner), `explorer` (every delivery order),
`triggers` (trigger cost, busy loop, query plans).
Part two, the catalog watermark: `catalog` (append-only versions, the monotonic reader),
`watermark_loop` (WatermarkLoop, the safe commit rule), `ballot` (the public face:
the loop's names and `simulate`), `designs` and `planner` (four designs on a simulated planner),
`arrivals` (every arrival order), `crashlab` and `crash_child` (real SIGKILLed loops).
Shared: `db` (opening SQLite, write-locking transactions), `storeview` (what is on disk), and
`plots`, `widgets`, `figures`, `exercises`, `notebooks` for the notebooks, the docs build and
workshops.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
