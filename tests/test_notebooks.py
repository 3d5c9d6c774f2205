"""Every notebook runs top to bottom headless, fast, and is stored without outputs."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from labkit.notebooks import execute_notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
STORED = sorted(
    p for p in ROOT.glob("**/*.ipynb")
    if ".venv" not in p.parts and ".ipynb_checkpoints" not in p.parts
    and "student" not in p.parts and "artifacts" not in p.parts
)
BUDGET_S = 60.0


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 7, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", STORED, ids=lambda p: str(p.relative_to(ROOT)))
def test_stored_without_outputs(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [
        i for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; run `make strip`"


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_headless(path: Path, tmp_path: Path) -> None:
    work = tmp_path / path.name
    shutil.copy(path, work)
    start = time.monotonic()
    nb = execute_notebook(work, timeout=60, cwd=tmp_path)
    elapsed = time.monotonic() - start
    errors = [
        out for cell in nb.cells for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    assert elapsed < BUDGET_S, f"{path.name} took {elapsed:.1f}s (budget {BUDGET_S:.0f}s)"


# --- prose that names a query must match the statement that runs ------------------------------


def cells_of(relpath: str) -> list[dict]:
    return json.loads((ROOT / relpath).read_text(encoding="utf-8"))["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def test_notebook_02_shows_the_statement_delivered_frontier_runs() -> None:
    cells = cells_of("notebooks/02_gap_free_frontier.ipynb")
    (k,) = [i for i, c in enumerate(cells) if "Here is the text" in text(c)]
    assert "FRONTIER_LOOKUP_SQL" in text(cells[k]) and "COALESCE" in text(cells[k])
    shown = text(cells[k + 1])
    assert "fr.FRONTIER_LOOKUP_SQL" in shown
    assert "fr.FRONTIER_SQL" not in shown and "fr.FALLBACK_SQL" not in shown


@pytest.mark.parametrize(
    ("relpath", "stale"),
    [
        ("exercises/solutions/ex1_frontier.ipynb", "delivered_frontier` makes two index seeks"),
        ("notebooks/03_triggers_shards_indexes.ipynb", "trigger walks the whole id range"),
    ],
)
def test_no_stale_claim_about_what_runs(relpath: str, stale: str) -> None:
    assert not [i for i, c in enumerate(cells_of(relpath)) if stale in text(c)]


def test_notebook_03_explains_the_frontier_lookup_plan() -> None:
    cells = cells_of("notebooks/03_triggers_shards_indexes.ipynb")
    prose = " ".join(text(c) for c in cells if c["cell_type"] == "markdown")
    assert "FRONTIER_LOOKUP_SQL" in prose and "SCALAR SUBQUERY" in prose
    assert "(coverage_end, frontier]" in prose and "every shard" in prose
