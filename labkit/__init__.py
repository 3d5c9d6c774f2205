"""labkit: the real code behind the Watermark Workbook, one subpackage per domain; the parts are
the notebooks' grouping (one: 01-03, two: 04-06, three: 07-09).

- `labkit.frontier`: part one, the gap-free delivery frontier (log, summarizer, triggers,
  scenarios, delivery orders).
- `labkit.catalog`: part two, the catalog watermark (versions, WatermarkLoop and its rule, crash
  lab, store view).
- `labkit.designs`: part two, the five designs on a simulated planner (simulator, run
  statistics, arrival steps and orders, their search, schedule builder).
- `labkit.remote`: part three, part two's designs against a real planner service on 127.0.0.1
  (service, loop driver, crash, load, simulator vs real).
- `labkit.pg`: part three on a real PostgreSQL server (the server, commit order, stress, ballots
  across machines).
- `labkit.docs`: the docs build (figures, figure specs, notebook file chores).
- `labkit.plots`, `labkit.widgets`, `labkit.exercises`: figures, ipywidgets apps and workshop
  checks, one module per domain, named as the subpackage whose work it shows.
- shared: `db` (opening SQLite), `backend` (the one SQLite/PostgreSQL seam), `files` (writing by
  replace), `killable` (a child to kill mid-work); faces: `ballot`, `arrivals`.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
