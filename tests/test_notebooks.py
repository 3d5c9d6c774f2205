"""Every notebook runs top to bottom headless without an error, shows what it set out to show,
and is stored without outputs. (How long a run takes is a benchmark's business, not a test's.)"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbrun import cell_errors, cell_text, execute_notebook, starts_postgres

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# The notebooks the repository stores: not the ones `make site`, `make exercises` or a test
# run write into git-ignored folders (build/, exercises/student/, artifacts/).
NOT_STORED = {".venv", ".ipynb_checkpoints", "student", "artifacts", "build"}
STORED = sorted(
    p for p in ROOT.glob("**/*.ipynb") if not NOT_STORED & set(p.relative_to(ROOT).parts)
)
# What each notebook states as its result, as it appears in the outputs of a run (regexes).
SHOWS = {
    # two figures; the final cell must draw one (checked below); Bug 1's carries its alt text
    "00_start_here": [
        r"MAX\(delivered\) line jumps to 5 while ids 1, 2 and 4 are open",
    ],
    "01_max_is_not_a_watermark": [
        r"MAX\(delivered\) watermark: 5\ngap-free frontier: +0\n",
        r"max: claims \[1, 5\], holds ids \[3, 5\]\nfrontier: no summary",
        r"orphans under max: +\[1, 2, 4\]\norphans under frontier: \[\]",
        r"orphans under MAX: ids 1, 2, 4; under the frontier: none",  # the timeline's alt text
        r"orphan_ids_max +\(1, 2\)",
    ],
    "02_gap_free_frontier": [
        r"refusing 'failed' -> 'delivered'",
        r"the model agrees with SQLite on all n! orders for n <= 5",
        r"max: \[\(1, 5, \[3, 5\]\), \(6, 6, \[6\]\)\] chain problems: none",
        r"\(40,319 of 40,320 orders at n = 8\), the frontier 0%",
    ],
    "03_triggers_shards_indexes": [
        r"SEARCH conversations USING INDEX idx_conv_active",
        # Article 1's scale check: still a SEARCH on the partial index at 50,000 settled rows
        r"50,000 settled rows \+ 2 open, one shard:\n +SCAN CONSTANT ROW\n +SCALAR SUBQUERY 1\n"
        r" +SEARCH conversations USING INDEX idx_conv_active",
        r"VM steps per lookup: \d{1,3} with idx_conv_active, \d{3},\d{3} without it",
        # the partial index stays at one page while 50,000 rows settle
        r"\n50000 +2 +\d{3,} +1 +\d{3,}",
        # K = 8 workers: the per-shard steps are the same for 20, 100 and 400 shards
        r"\n8(?: +\d+){3} +(\d+) +\1 +\1\n",
    ],
    "04_late_tick_rewinds": [
        r"refused: UNIQUE constraint failed: catalog_versions.version",
        r"window of 1 in-flight ballot\(s\) is full",
        r"1:unknown_ballot → v2",  # the story on run_schedule: ballot 1 lands late, head stays 2
        r"now late +stale_watermark",  # a fenced-out ballot is refused when its answer arrives
        r"pass +FAIL +stale_base",  # each check alone lets one wrong response through
        r"FAIL +pass +stale_watermark",
        # the workbench on Article 2's late tick: callback falls, ballot does not
        r"'callback': 'BROKEN: reader saw v2 → v1 at step 4'",
        r"'ballot': 'safe on this schedule: the head never fell'",
    ],
    "05_five_designs": [
        # over eight random seeds: no rewinds for the three guarded designs
        r"\nsingle ballot +0 +[\d.]+ +[\d.]+ +[\d.]+\nhedged ballots +0 +[\d.]+ +[\d.]+ +[\d.]+"
        r"\ncompare-and-set +0 +[\d.]+",
        r"throughput \(kept commits per time unit\)",
        # CAS commits the answer the loop abandoned; the ballot refuses it
        r"\n6 +timeout ; deliver 1 ; deliver 2 +timeout 1 1:commit 2:cas_conflict",
        r"\n7 +timeout ; deliver 1 ; deliver 2 +timeout 1 1:unknown_ballot 2:commit",
        # shortest counterexample per design over every order of 4 deliveries
        r"callback: deliver 1 ; deliver 2 ; deliver 1\n +lww: timeout ; deliver 2 ; deliver 3 ; "
        r"deliver 1\n +ballot: no order of 4 deliveries breaks it",
        # the workbench's "shortest break" button for lww
        r"timeout; deliver 2; deliver 3; deliver 1 -> BROKEN: reader saw v2 → v1 at step 4",
        # pipelined ballots: at W = 4 at least 2.5x the single ballot's kept versions per unit
        r"W = 4: pipelined ballots keep [\d.]+ versions per time unit, (?:2\.[5-9]|[3-9]\.\d)x "
        r"the single ballot",
        # throughput grows with W, less than in proportion
        r"pipelined ballots against W = 1: [\d.]+x at W = 2, [\d.]+x at W = 4, [\d.]+x at W = 8 "
        r"\| less than W each time: True",
        # without the hash check the stale answer commits and v2 loses v1's tool
        r"read v0, claims v1, no hash check: ballot 2: commit → head v2; .*"
        r"v1's tool kept at v2: False",
        # the base-hash check is real: the honest held answer commits, the stale one is refused
        r"honest: request 2 \(fence 1\) lands first: held, stored in the hold: ballots \[2\]",
        r"held answer of request 2: commit \| head v2 \| replays \(request, of ballot\): \[\]",
        r"held answer of request 2: refused base_hash_mismatch \| head v1 \| replays "
        r"\(request, of ballot\): \[\(4, 2\), \(5, 3\)\]",
        # the hold's frontier and part one's, computed apart, agree before and after fence 1
        r"fence 1 in flight: the head may reach v1; part one's frontier: row 1\n"
        r"fence 1 answered: the head may reach v4; part one's frontier: row 4\n",
        # the flush: giving up on 1 replays 1, 2 and 3; 1's late answer is refused
        r"ticks replayed: 3\n",
        r"timeout 1 +timeout 1 +0\n.*deliver 1 +1:unknown_ballot +0\n",
        r"falls the reader saw over all 21 runs: 0; versions kept per run: \[20\]",
        # seed 0: one lost tick costs the single ballot one replay, the pipeline (W = 4) four
        r"single ballot -> pipelined: inverted 1 -> 4, stall 1 -> 4, stale_body 1 -> 4\n",
        r"lowest over the fault classes here: (?:2\.[1-9]|[3-9]\.\d)x",
        # the widget's first table: the flush costs four replays against one
        r"pipelined ballots against the single ballot, throughput [\d.]+ against [\d.]+; "
        r"ticks replayed 4 against 1; latency p95 [\d.]+ against [\d.]+",
        r"n = 6: [\d,]+ orders, 0 rewind, shortest counterexample: None",
    ],
    "06_crashes_and_restarts": [
        r"killed outright by the OS: True",
        r"after the restart: head version 3, log verified up to version 3",
        r"reserved_at, decided_at",  # the on-disk overview lists every column, none cut
        r"RewindError: catalog rewound",
        r"final_head",
        # pipelined ballots killed at every fifth statement, then once for real with answers held
        r"kills after which the restart found answers held: [1-9]",
        r"reader falls across \d+ kills: 0\n",
        r"every run ends at version 6 with an empty hold: True",
        r"killed outright at statement \d+: True; held answers the restart found: [1-9]",
    ],
    # Part three needs a server (the embedded one in CI); the late id is orphaned by id order
    # and never by the xmin horizon wait, in the scripted run and under real concurrency.
    "07_postgres_commit_order": [
        r"orphans under id order: \[1\] \| under the horizon wait: \[\]",
        r"A still open  frontier 0  settled False",
        r"xmin horizon wait +\d+ rows,  0 orphans",
        r"horizon +\d+ rows, 0 orphans",
        r"lock +\d+ rows, 0 orphans",
    ],
    # The naive check-then-write loses A's answer without an error; the ballot refuses B; eight
    # workers keep every promise (server needed, as for 07).
    "08_ballots_across_machines": [
        r"naive +B +write version 6, commit +1 row updated, no error",
        r"catalog after the naive run: version 6, answer of B \(1 answer lost\)",
        r"ballot +B +apply ballot \d+ +refused: stale_watermark",
        r"catalog after the ballot run: version 6, answer of A\n",
        r"versions 0\.\.60, each based on the one before: yes",
        r"most commits on one watermark: 1\n",
        r"accepted responses 60, versions 60, commits the workers saw 60",
        r"rewinds seen by the reader: 0",
        r"every refusal: stale_watermark: True",
        r"\d+ guarded writes found the store changed since their read, wrote nothing",
        r"\d+ answers tried their commit before reading and were refused by the database",
        r"AND observed_watermark = %s RETURNING 1\),\nversion AS \(INSERT INTO catalog_versions",
    ],
    # The live service with every fault on: the unguarded designs fall, for the loop and for
    # the reader process; the guarded ones never, and the ballot logs read back chained. The
    # killed loop loses nothing; the live simulator-vs-real table agrees on the falls.
    "09_a_real_planner": [
        r"\nwrite in callback +\d+ +[1-9]\d* +[1-9]\d* +\d+\b",
        r"\nlast-write-wins +\d+ +[1-9]\d* +[1-9]\d* +\d+\b",
        r"\nsingle ballot +20 +0 +0 +[1-9]\d*\b",
        r"\nhedged ballots +20 +0 +0 +[1-9]\d*\b",
        r"\ncompare-and-set +20 +0 +0 +[1-9]\d*\b",
        # the stores read back (wrapped or not): logs chained, cas's row only climbed, others fell
        r"\nwrite in callback +(\d+ +){0,4}row at v20; fell [1-9]\d* times?",
        r"\nlast-write-wins +(\d+ +){0,4}row at v20; fell [1-9]\d* times?",
        r"\nsingle ballot +(\d+ +){0,4}1\.\.20 chained",
        r"\nhedged ballots +(\d+ +){0,4}1\.\.20 chained",
        r"\ncompare-and-set +(\d+ +){0,4}row at v20; (steps of 1|climbs only)",
        r"single ballot: none +\([\d,]+ polls in about [\d.]+ s: one every [\d.]+ ms\)",
        r"killed outright by the OS: True",
        r"ballots in flight in the store when it died: \[\d+(, \d+)*\]",
        # every owed ballot has a fate in the store and a line of what the restart saw
        r"ballot +status +reason +the restarted loop saw",
        r"log 1\.\.8 chained, reported commits lost: 0, falls the reader process saw: 0",
        r"throughput real/sim",
        r"rewinds of the guarded designs \([^)]*\), simulated and real: 0 0",
        r"rewinds of the unguarded designs \([^)]*\), simulated and real: [1-9]\d* \d+",
        r"Finished callback: \d+ versions kept of \d+ commits; the reader process saw [1-9]",
    ],
}


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 7, [p.name for p in NOTEBOOKS]
    assert sorted(SHOWS) == [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("path", STORED, ids=lambda p: str(p.relative_to(ROOT)))
def test_stored_without_outputs(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [
        i for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; run `make strip`"


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
    nb = run(path, tmp_path)
    assert cell_errors(nb) == [], f"{path.name}: cells raised"
    code = [c for c in nb.cells if c.cell_type == "code"]
    final = code[-1].outputs
    assert final, f"{path.name}: the final cell shows nothing"
    if path.stem == "00_start_here":
        assert any("image/png" in out.get("data", {}) for out in final)
    text = "\n".join(cell_text(c) for c in code)
    missing = [rule for rule in SHOWS[path.stem] if not re.search(rule, text)]
    assert not missing, f"{path.name}: outputs do not show {missing}"


@pytest.mark.notebooks
def test_a_failing_cell_is_reported_not_hidden(tmp_path: Path) -> None:
    """The harness the test above relies on: an error output is recorded and listed."""
    nb = new_notebook(cells=[new_code_cell("1 / 0"), new_code_cell("print('after')")])
    path = tmp_path / "src" / "broken.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    ran = run(path, tmp_path)
    assert cell_errors(ran) == ["ZeroDivisionError: division by zero"]
    assert cell_text(ran.cells[1]) == "after\n"


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
        ("exercises/solutions/ex02_frontier_sql.ipynb", "delivered_frontier` makes two index seeks"),
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
    prose = "\n".join(text(c) for c in cells_of(str(path.relative_to(ROOT)))
                      if c["cell_type"] == "markdown")
    assert "](../docs/glossary.md)" in prose
    stale = re.findall(r"the seed scenario|source article|seed (?:one|two)|the seed\b", prose, re.I)
    assert not stale, f"{path.name}: call them Article 1 / Article 2 ({stale})"


def test_start_here_names_both_articles_with_their_titles() -> None:
    prose = text(cells_of("notebooks/00_start_here.ipynb")[0])
    assert '**Article 1, "Gap-Free Delivery Frontiers"**' in prose
    assert ('**Article 2, "Make Shared Catalog Version a Watermark Before a Late Loop Tick '
            'Rewinds"**') in prose.replace("\n  ", " ")
