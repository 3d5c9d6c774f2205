"""Every notebook runs top to bottom headless without an error, shows what it set out to show,
and is stored without outputs. (How long a run takes is a benchmark's business, not a test's.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from notebook_results import SHOWS, check_shows_its_result

from harness.lab import browser_missing
from harness.nbrun import cell_errors, cell_text, execute_notebook, starts_postgres
from labkit.docs.nbfiles import strip_notebook, strip_paths

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# The notebooks the repository stores: not the ones `make site`, `make exercises` or a test
# run write into git-ignored folders (build/, exercises/student/, artifacts/).
NOT_STORED = {".venv", ".ipynb_checkpoints", "student", "artifacts", "build"}
STORED = sorted(
    p for p in ROOT.glob("**/*.ipynb") if not NOT_STORED & set(p.relative_to(ROOT).parts)
)


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 7, [p.name for p in NOTEBOOKS]
    assert sorted(SHOWS) == [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("path", STORED, ids=lambda p: str(p.relative_to(ROOT)))
def test_stored_without_outputs(path: Path) -> None:
    """Stored as nbstripout leaves it (no outputs, counts or volatile metadata)."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    dirty = [
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; run `make strip`"
    stripped = nbformat.writes(strip_notebook(nbformat.reads(text, as_version=4))) + "\n"
    assert stripped == text, f"{path.name} is not stored stripped; run `make strip`"


@pytest.mark.slow  # a Python that imports nbformat and nbstripout
def test_make_strip_stores_what_the_nbstripout_git_filter_stores(tmp_path: Path) -> None:
    """`python -m labkit strip` (make strip) and the git filter (`python -m nbstripout`, reading
    the notebook on stdin as git's clean filter does) give the same bytes for an executed
    notebook: outputs, counts, widget state, execution metadata and ids alike."""
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    for i, cell in enumerate(nb.cells):
        cell.id = f"random-{i}"
        cell.metadata["execution"] = {"iopub.status.busy": "2026-12-07T00:00:00Z"}
        if cell.cell_type == "code":
            cell.execution_count = i
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="out\n")]
    nb.metadata["widgets"] = {"state": {}}
    executed = nbformat.writes(nb) + "\n"
    filtered = subprocess.run(
        [sys.executable, "-m", "nbstripout"],
        input=executed,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # no git repository here: nbstripout's own defaults, no local config
    ).stdout
    path = tmp_path / "nb.ipynb"
    path.write_text(executed, encoding="utf-8")
    assert strip_paths([path]) == [path]
    assert path.read_text(encoding="utf-8") == filtered
    stored = json.loads(filtered)
    assert "widgets" not in stored["metadata"] and stored["cells"][0]["id"] == "0"
    assert all(not c.get("outputs") and not c["metadata"] for c in stored["cells"])


def run(path: Path, tmp_path: Path) -> nbformat.NotebookNode:
    """Execute a copy in `tmp_path`, going on past a failing cell so its error is recorded."""
    work = tmp_path / path.name
    shutil.copy(path, work)
    return execute_notebook(work, timeout=60, cwd=tmp_path, allow_errors=True)


# 07 and 08 start PostgreSQL in their kernel (pg.server_or_reason), so their runs are `postgres`.
NOTEBOOK_RUNS = [
    pytest.param(p, id=p.name, marks=[pytest.mark.postgres] if starts_postgres(p) else [])
    for p in NOTEBOOKS
]


def test_the_part_three_notebooks_are_the_ones_marked_postgres() -> None:
    marked = [p.values[0].stem for p in NOTEBOOK_RUNS if p.marks]
    assert marked == [p.stem for p in NOTEBOOKS if p.stem.startswith(("07_", "08_"))]


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOK_RUNS)
def test_notebook_runs_headless_and_shows_its_result(path: Path, tmp_path: Path) -> None:
    check_shows_its_result(path.stem, run(path, tmp_path))


def collected(*args: str) -> list[str]:
    """The node ids pytest collects from this repository with `args` (no test runs)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if "::" in line]


@pytest.mark.slow  # three pytest processes
def test_a_notebook_the_browser_checks_is_not_also_run_headless() -> None:
    """With the browser check collected (and Chromium here) each notebook runs once: those the
    browser tests Run All (tests/browser/test_notebook_results.py's list) in JupyterLab, the rest
    headless; asked for alone, or with the browser tests deselected, all run headless."""
    files = ("tests/test_notebooks.py", "tests/browser/test_notebook_results.py")
    headless = "test_notebook_runs_headless_and_shows_its_result["
    alone = [i for i in collected(files[0]) if headless in i]
    assert len(alone) == len(NOTEBOOKS)
    without_browser = [i for i in collected(*files, "-m", "not browser") if headless in i]
    assert without_browser == alone
    both = collected(*files)
    if browser_missing() is not None:
        pytest.skip(f"the headless runs stay: {browser_missing()}")
    kept = sorted(number(i) for i in both if headless in i)
    in_browser = sorted(number(i) for i in both if "test_run_all_shows_its_result" in i)
    assert in_browser and not set(kept) & set(in_browser), (kept, in_browser)
    assert sorted(kept + in_browser) == sorted(p.name.split("_")[0] for p in NOTEBOOKS)


def number(node_id: str) -> str:
    """A notebook's number ("05", "05b") from a node id naming it: by file name (headless) or
    by number (the browser's)."""
    return node_id.split("[")[1].rstrip("]").split("_")[0]


@pytest.mark.notebooks
def test_a_failing_cell_is_reported_not_hidden(tmp_path: Path) -> None:
    """The harness the test above relies on: an error output is recorded and listed."""
    transport = (
        "import os\nfrom ipykernel.kernelapp import IPKernelApp\n"
        "print(IPKernelApp.instance().transport, os.getpid())"
    )
    nb = new_notebook(
        cells=[new_code_cell("1 / 0"), new_code_cell("print('after')"), new_code_cell(transport)]
    )
    path = tmp_path / "src" / "broken.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    ran = run(path, tmp_path)
    assert cell_errors(ran) == ["ZeroDivisionError: division by zero"]
    assert cell_text(ran.cells[1]) == "after\n"
    said, pid = cell_text(ran.cells[2]).split()
    assert said == "ipc"  # no TCP port another process could take first
    with pytest.raises(ProcessLookupError):  # and the kernel was shut down, not left running
        os.kill(int(pid), 0)


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
        (
            "exercises/solutions/ex02_frontier_sql.ipynb",
            "delivered_frontier` makes two index seeks",
        ),
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


PART_ONE = sorted((ROOT / "notebooks").glob("0[0-3]_*.ipynb"))


@pytest.mark.parametrize("path", PART_ONE, ids=lambda p: p.name)
def test_part_one_links_the_glossary_and_names_articles_not_seeds(path: Path) -> None:
    prose = "\n".join(
        text(c) for c in cells_of(str(path.relative_to(ROOT))) if c["cell_type"] == "markdown"
    )
    assert "](../docs/glossary.md)" in prose
    stale = re.findall(r"the seed scenario|source article|seed (?:one|two)|the seed\b", prose, re.I)
    assert not stale, f"{path.name}: call them Article 1 / Article 2 ({stale})"


def test_start_here_names_both_articles_with_their_titles() -> None:
    prose = text(cells_of("notebooks/00_start_here.ipynb")[0])
    assert '**Article 1, "Gap-Free Delivery Frontiers"**' in prose
    assert (
        '**Article 2, "Make Shared Catalog Version a Watermark Before a Late Loop Tick Rewinds"**'
    ) in prose.replace("\n  ", " ")
