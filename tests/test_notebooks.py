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
