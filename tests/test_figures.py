"""The docs figure build is deterministic, and the docs show figures that match the code."""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import pytest

from labkit.docs.figures import DEFAULT_OUT, MANIFEST, build_all, registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FIG_REF = re.compile(r"\(figures/([\w.-]+\.(?:svg|png))\)")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("figures")
    return out, build_all(out)


def test_build_prints_one_line_per_figure(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    build_all(tmp_path, names=["busy_loop", "arrival_explorer"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["[1/2] busy_loop", "[2/2] arrival_explorer"]


@pytest.mark.postgres  # the build draws part three's figures from a live server
def test_a_build_is_byte_identical_to_an_earlier_one(
    fresh: tuple[Path, dict], tmp_path: Path
) -> None:
    """With the matplotlib that drew the committed figures, those are the earlier build (made
    in another process, on another day: a stronger check than a second build now, and free);
    with another matplotlib, a second build here is."""
    first, manifest = fresh
    if json.loads((DEFAULT_OUT / MANIFEST).read_text())["matplotlib"] == manifest["matplotlib"]:
        earlier = DEFAULT_OUT
    else:
        earlier = tmp_path
        build_all(earlier)
    names = sorted(p.name for p in first.iterdir())
    assert names and all((earlier / n).is_file() for n in names), "a figure was not built"
    changed = [n for n in names if (first / n).read_bytes() != (earlier / n).read_bytes()]
    assert not changed, (
        f"differ from the earlier build: {changed} (if test_committed_figures_match_the_code "
        "fails too, the committed figures are out of date: `make figures`)"
    )


def test_every_figure_is_in_the_docs() -> None:
    page = (DOCS / "figures.md").read_text()
    missing = [s.name for s in registry() if f"figures/{s.name}.svg" not in page]
    assert not missing, f"docs/figures.md does not show {missing}"


def test_docs_reference_only_existing_figures() -> None:
    for page in sorted(DOCS.glob("*.md")):
        for ref in FIG_REF.findall(page.read_text()):
            assert (DEFAULT_OUT / ref).is_file(), f"{page.name} shows {ref}, which is missing"


@pytest.mark.postgres  # the build draws part three's figures from a live server
def test_committed_figures_match_the_code(fresh: tuple[Path, dict]) -> None:
    """Data fingerprints always; bytes too when this matplotlib drew the committed ones."""
    _, rebuilt = fresh
    committed = json.loads((DEFAULT_OUT / MANIFEST).read_text())
    stale = [
        name
        for name, entry in rebuilt["figures"].items()
        if committed["figures"].get(name, {}).get("data") != entry["data"]
    ]
    assert not stale, f"out of date with the code (run `make figures`): {stale}"
    if committed["matplotlib"] == metadata.version("matplotlib"):
        for name, entry in rebuilt["figures"].items():
            for fmt in ("svg", "png"):
                assert committed["figures"][name][fmt] == entry[fmt], f"{name}.{fmt} differs"
                assert (DEFAULT_OUT / f"{name}.{fmt}").is_file()


def test_figure_specs_stand_below_the_build() -> None:
    """`FigureSpec` lives in figure_specs, which never imports the build (no cycle)."""
    import subprocess
    import sys

    from labkit.docs import figure_specs, figures

    assert figures.FigureSpec is figure_specs.FigureSpec
    assert figure_specs.FigureSpec.__module__ == "labkit.docs.figure_specs"
    probe = "import sys, labkit.docs.figure_specs; print('labkit.docs.figures' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_committed_benchmark_figures_match_their_csvs(tmp_path: Path) -> None:
    """`python -m benchmarks --replot` redraws each bench figure that has a `plot(rows)` from
    its CSV alone; with the matplotlib that drew the committed figures, the bytes are the
    committed ones."""
    import shutil

    from benchmarks.__main__ import NAMES, main

    for name in NAMES:
        shutil.copy(DEFAULT_OUT / f"bench_{name}.csv", tmp_path)
    assert main(["--replot", "--out", str(tmp_path)]) == 0
    committed = json.loads((DEFAULT_OUT / MANIFEST).read_text())
    same_matplotlib = committed["matplotlib"] == metadata.version("matplotlib")
    redrawn = sorted(p.name for p in tmp_path.glob("bench_*.png"))
    assert "bench_ballot_throughput.png" in redrawn
    for png in redrawn:
        for fmt in ("svg", "png"):
            drawn = tmp_path / png.replace(".png", f".{fmt}")
            assert drawn.is_file(), f"--replot did not write {drawn.name}"
            if same_matplotlib:
                stale = drawn.read_bytes() != (DEFAULT_OUT / drawn.name).read_bytes()
                assert not stale, f"{drawn.name} is out of date (python -m benchmarks --replot)"
