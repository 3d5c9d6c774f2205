"""The end-to-end widget benchmark (`benchmarks/widget_browser.py`) still runs at its smoke size:
one press per control and one typed schedule, on the notebooks the tests before it already ran
in this JupyterLab and tab (`python -m benchmarks --only widget_browser` starts its own). Checks
the structure of its CSV, ratios and files, never the timing."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from benchmarks import widget_browser

NAME = "widget_browser"
# one row per control (nine), and the typed schedule cold and warm
ROWS = len(widget_browser.CONTROLS) + 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_benchmark_runs_small_and_writes_its_files(lab, tmp_path: Path) -> None:
    lab.page.set_viewport_size(widget_browser.VIEWPORT)

    def measured(smoke: bool) -> list[dict[str, object]]:
        return widget_browser.drive(lab.page, lab.notebook, smoke)

    result = widget_browser.run(smoke=True, out=tmp_path, measured=measured)
    assert result.name == NAME
    assert sorted(p.name for p in result.files) == sorted(
        f"bench_{NAME}.{ext}" for ext in ("csv", "png", "svg")
    )
    for path in result.files:
        assert path.parent == tmp_path and path.stat().st_size > 0
    with (tmp_path / f"bench_{NAME}.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(result.rows) == ROWS == 11
    assert all(int(r["presses"]) == 1 for r in rows)
    assert result.ratios and result.targets
    assert all(math.isfinite(v) and v > 0 for v in result.ratios.values()), result.ratios
    assert set(result.targets.values()) <= {True, False}
    assert (tmp_path / f"bench_{NAME}.svg").read_text().lstrip().startswith("<?xml")
