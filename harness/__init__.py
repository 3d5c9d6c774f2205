"""The harness that tests/, benchmarks/ and site/ share, kept apart from all three so that none
imports another: `nbrun` runs a notebook headless in a fresh kernel (nbclient), `lab` serves
the workbook in JupyterLab and drives it in headless Chromium (Playwright), and `dry_run` times
every notebook for docs/instructor.md (`python -m harness.dry_run`).

Not part of the labkit package or its wheel: it needs the `dev` extra (nbclient, Playwright),
and it imports neither tests/ nor benchmarks/ (`make lint`: lint-imports).
"""
