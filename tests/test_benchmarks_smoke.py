"""Every benchmark still runs at tiny sizes: the structure of its CSV, ratios, files; no timing."""

from __future__ import annotations

import csv
import importlib
import math
import os
from pathlib import Path

import pytest

from benchmarks.__main__ import NAMES, main
from benchmarks.common import FIGURES, time_interleaved
from labkit.designs.registry import DESIGNS
from labkit.designs.simulator import FAULTS

EXPECTED_ROWS = {
    # frontier: 2 smoke sizes x 2 shapes x (with, without partial index)
    "frontier_lookup": 8,
    "trigger_poll": 2,
    # one tick row + one simulate row per design
    "ballot_throughput": 1 + len(DESIGNS),
    # delivery orders for n = 4, 5; arrival orders for n = 2 on each design
    "explorers": 2 + len(DESIGNS),
    # memoised arrival explorer: n = 2, 3 on each design
    "arrival_search": 2 * len(DESIGNS),
    # W = 1, 2, 4, 8 for ballot and pipelined, 2, 4, 8 for fenced; no fault and each fault
    # class for ballot and pipelined; Article 2's table (six designs); the explorer at n = 3
    "pipelined_throughput": 4 + 3 + 4 + 2 * (1 + 6) + 6 + 1,
    # one stress run per rule: id order, lock, xmin horizon wait
    "pg_commit_order": 3,
    # the PostgreSQL frontier lookup: 2 smoke sizes x 2 shapes
    "pg_frontier_lookup": 4,
    # a safe tick, the floor, and one run of the workers
    "pg_ballots": 4,
    # six designs with every planner fault (smoke: no fault-free set), then one load row
    "remote_vs_sim": 6 + 1,
    # the audit of a generated log, and the frontier lookup it is compared with
    "audit": 2,
    # ballot and pipelined against the real planner, each on SQLite and on PostgreSQL
    "pg_remote": 2 * 2,
}


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _run(name: str, out: Path):
    module = importlib.import_module(f"benchmarks.{name}")
    if name == "widget_latency" and not module.available():
        pytest.skip("the widget apps are not in labkit.widgets yet")
    from labkit.pg.instance import PgUnavailable

    try:
        return module.run(smoke=True, out=out)
    except PgUnavailable as exc:  # only the pg_* benchmarks need a server
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server: {exc}")


# The pg_* benchmarks start their own PostgreSQL server (labkit.pg.server). widget_browser's
# smoke is tests/browser/test_widget_browser_smoke.py: it presses the controls of the notebooks
# the browser tests already opened and ran, in their JupyterLab and Chromium.
SMOKE_RUNS = [
    pytest.param(name, marks=[pytest.mark.postgres] if name.startswith("pg_") else [])
    for name in NAMES
    if name != "widget_browser"
]


@pytest.mark.parametrize("name", SMOKE_RUNS)
@pytest.mark.slow
def test_benchmark_runs_small_and_writes_its_files(name: str, tmp_path: Path) -> None:
    result = _run(name, tmp_path)
    assert result.name == name
    assert sorted(p.name for p in result.files) == sorted(
        f"bench_{name}.{ext}" for ext in ("csv", "png", "svg")
    )
    for path in result.files:
        assert path.parent == tmp_path and path.stat().st_size > 0
    rows = _read(tmp_path / f"bench_{name}.csv")
    assert len(rows) == len(result.rows) > 0
    if name in EXPECTED_ROWS:
        assert len(rows) == EXPECTED_ROWS[name]
    assert result.ratios and result.targets
    assert all(math.isfinite(v) and v > 0 for v in result.ratios.values()), result.ratios
    assert set(result.targets.values()) <= {True, False}
    assert (tmp_path / f"bench_{name}.svg").read_text().lstrip().startswith("<?xml")


def test_frontier_rows_carry_the_floor_ratio(tmp_path: Path) -> None:
    rows = _read(_run("frontier_lookup", tmp_path).files[0])
    assert {r["shape"] for r in rows} == {"active", "settled"}
    assert {r["index"] for r in rows} == {"with_partial_index", "without_partial_index"}
    for r in rows:
        ratio = float(r["lookup_s"]) / float(r["floor_s"])
        assert math.isclose(float(r["ratio_to_floor"]), ratio, rel_tol=1e-9)
        # the cheapest honest floor too: a seek that returns the key alone
        key_ratio = float(r["lookup_s"]) / float(r["key_floor_s"])
        assert math.isclose(float(r["ratio_to_key_floor"]), key_ratio, rel_tol=1e-9)


def test_ballot_floor_uses_the_loops_durability(tmp_path: Path) -> None:
    tick = _read(_run("ballot_throughput", tmp_path).files[0])[0]
    assert tick["kind"] == "tick"
    assert tick["journal_mode"] == "wal" and tick["synchronous"] not in ("", "OFF")
    assert int(tick["commits"]) > 0


def test_runner_only_and_smoke_never_write_docs_figures(tmp_path: Path, capsys) -> None:
    before = sorted(FIGURES.glob("bench_*")) if FIGURES.exists() else []
    assert main(["--smoke", "--only", "explorers", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "bench_explorers.csv").exists()
    assert not (tmp_path / "bench_frontier_lookup.csv").exists()
    text = capsys.readouterr().out
    assert "SQLite" in text and "Python" in text
    with pytest.raises(SystemExit):
        main(["--smoke", "--only", "explorers", "--out", str(FIGURES)])
    after = sorted(FIGURES.glob("bench_*")) if FIGURES.exists() else []
    assert before == after


def test_time_interleaved_takes_per_callable_numbers() -> None:
    calls = {"a": 0, "b": 0}

    def bump(key: str):
        return lambda: calls.__setitem__(key, calls[key] + 1)

    out = time_interleaved({"a": bump("a"), "b": bump("b")}, repeats=3, number={"a": 2, "b": 5})
    assert calls == {"a": 1 + 3 * 2, "b": 1 + 3 * 5}
    assert len(out["a"].samples) == len(out["b"].samples) == 3


def test_pipelined_rows_cover_every_depth_fault_and_design(tmp_path: Path) -> None:
    rows = _read(_run("pipelined_throughput", tmp_path).files[0])
    depth = {(r["design"], r["window"]) for r in rows if r["kind"] == "depth"}
    assert {("pipelined", w) for w in ("1", "2", "4", "8")} <= depth
    faults = {r["faults"] for r in rows if r["kind"] == "fault" and r["design"] == "pipelined"}
    assert faults == {"none", *FAULTS}  # every fault the simulator knows, and none
    assert {r["design"] for r in rows if r["kind"] == "table"} == {
        "callback",
        "lww",
        "ballot",
        "fenced",
        "pipelined",
        "cas",
    }
    guarded = [r for r in rows if r["design"] in ("ballot", "fenced", "pipelined", "cas")]
    assert all(r["rewinds"] in ("", "0") for r in guarded)
