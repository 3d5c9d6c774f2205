"""Benchmarks for every scaling claim the workbook makes (`make bench`; not timed tests)."""
