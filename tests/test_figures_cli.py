"""`python -m labkit figures`: a subset, the list, formats, resolution, theme and scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from svg_colors import svg_collisions

from labkit.__main__ import main
from labkit.docs.figures import MANIFEST, rebuild_table, registry
from labkit.frontier.scenario_format import DATA_DIR
from labkit.plots.style import THEMES

ROOT = Path(__file__).resolve().parent.parent
QUICK = "busy_loop"  # the quickest figure to draw


def figures(*args: str) -> int:
    return main(["figures", *args])


def test_a_name_writes_that_figure_alone(tmp_path: Path) -> None:
    assert figures(QUICK, "--out", str(tmp_path)) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        MANIFEST,
        f"{QUICK}.png",
        f"{QUICK}.svg",
    ]
    entry = json.loads((tmp_path / MANIFEST).read_text())["figures"][QUICK]
    assert (entry["theme"], entry["dpi"], entry["formats"]) == ("light", 100, ["svg", "png"])


def test_list_prints_a_line_per_figure(capsys: pytest.CaptureFixture) -> None:
    assert figures("--list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [s.name for s in registry()]
    assert all(s.caption in line for s, line in zip(registry(), lines, strict=True))


def test_format_and_dpi(tmp_path: Path) -> None:
    small, large = tmp_path / "small", tmp_path / "large"
    assert figures(QUICK, "--format", "png", "--dpi", "100", "--out", str(small)) == 0
    assert figures(QUICK, "--format", "png", "--dpi", "200", "--out", str(large)) == 0
    assert not (small / f"{QUICK}.svg").exists()
    w1, h1 = Image.open(small / f"{QUICK}.png").size
    w2, h2 = Image.open(large / f"{QUICK}.png").size
    assert (w2, h2) == (2 * w1, 2 * h1)
    assert json.loads((large / MANIFEST).read_text())["figures"][QUICK]["dpi"] == 200


@pytest.mark.parametrize("theme", sorted(THEMES))
def test_theme_paints_the_background(tmp_path: Path, theme: str) -> None:
    assert figures(QUICK, "--theme", theme, "--format", "png", "--out", str(tmp_path)) == 0
    corner = Image.open(tmp_path / f"{QUICK}.png").convert("RGB").getpixel((0, 0))
    want = THEMES[theme].background
    assert corner == tuple(int(want[i : i + 2], 16) for i in (1, 3, 5))
    assert json.loads((tmp_path / MANIFEST).read_text())["figures"][QUICK]["theme"] == theme


@pytest.mark.slow
def test_dark_theme_repaints_black_marks_in_its_ink(tmp_path: Path) -> None:
    """A plot's own black lines (the pipelined head) would vanish on the dark background."""
    name = "pipelined_ballots"
    for theme in THEMES:
        out = str(tmp_path / theme)
        assert figures(name, "--theme", theme, "--format", "svg", "--out", out) == 0
    assert "#000000" in (tmp_path / "light" / f"{name}.svg").read_text()
    dark = (tmp_path / "dark" / f"{name}.svg").read_text()
    assert "#000000" not in dark and THEMES["dark"].ink in dark


@pytest.mark.slow
@pytest.mark.parametrize("theme", sorted(THEMES))
def test_two_builds_are_byte_identical(tmp_path: Path, theme: str) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        assert figures(QUICK, "five_designs", "--theme", theme, "--out", str(out)) == 0
    built = sorted(p.name for p in first.iterdir())
    assert len(built) == 5
    for name in built:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_scenario_file_draws_the_readers_scenario(tmp_path: Path) -> None:
    mine = json.loads((DATA_DIR / "seed.json").read_text())
    mine["name"] = "mine"
    mine["events"] = mine["events"][: len(mine["events"]) // 2]
    scenario = tmp_path / "mine.json"
    scenario.write_text(json.dumps(mine))
    bundled, own = tmp_path / "bundled", tmp_path / "own"
    assert figures("frontier_timeline", "--format", "svg", "--out", str(bundled)) == 0
    args = ("frontier_timeline", "--format", "svg", "--scenario", str(scenario))
    assert figures(*args, "--out", str(own)) == 0
    svg = "frontier_timeline.svg"
    assert (bundled / svg).read_bytes() != (own / svg).read_bytes()
    data = [
        json.loads((d / MANIFEST).read_text())["figures"]["frontier_timeline"]["data"]
        for d in (bundled, own)
    ]
    assert data[0] != data[1]


@pytest.mark.parametrize(
    "args",
    [
        ("no_such_figure",),
        (QUICK, "--format", "gif"),
        (QUICK, "--theme", "sepia"),
        (QUICK, "--dpi", "0"),
        ("frontier_timeline", "--scenario", "missing.json"),
        ("frontier_timeline", "--scenario", "BAD"),
        ("--spec", "missing.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: tuple[str, ...]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x"}')
    args = tuple(
        str(bad) if a == "BAD" else str(tmp_path / a) if a == "missing.json" else a for a in args
    )
    out = tmp_path / "out"
    assert figures(*args, "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m labkit figures: ")
    assert not out.exists()


def _saved_spec(path: Path) -> Path:
    from labkit.plots.saved import CheckpointRanges, write_spec

    return write_spec(path, CheckpointRanges(scenario="seed", shard="main"))


@pytest.mark.slow
def test_a_saved_spec_rebuilds_byte_identically(tmp_path: Path) -> None:
    spec = _saved_spec(tmp_path / "mine.json")
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        assert figures("--spec", str(spec), "--out", str(out)) == 0
    assert sorted(p.name for p in first.iterdir()) == [MANIFEST, "mine.png", "mine.svg"]
    for name in ("mine.svg", "mine.png"):
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_a_whole_build_picks_up_the_spec_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make figures` (no name) builds every docs figure and every spec in the folder."""
    import labkit.docs.figures as build

    quick = [s for s in registry() if s.name == QUICK]
    monkeypatch.setattr(build, "registry", lambda: quick)
    (tmp_path / "specs").mkdir()
    _saved_spec(tmp_path / "specs" / "mine.json")
    out = tmp_path / "out"
    assert figures("--spec-dir", str(tmp_path / "specs"), "--format", "svg", "--out", str(out)) == 0
    assert sorted(p.name for p in out.glob("*.svg")) == ["busy_loop.svg", "mine.svg"]


def test_the_figures_page_lists_every_figure_with_its_command() -> None:
    assert rebuild_table() in (ROOT / "docs" / "figures.md").read_text()


@pytest.mark.slow
def test_dark_figures_keep_their_colours_apart(tmp_path: Path) -> None:
    """Every SQLite-drawn docs figure in the dark theme (the PostgreSQL two use the same
    palette): no two hued colours collapse for a colour-blind reader."""
    names = [s.name for s in registry() if "PostgreSQL" not in s.caption]
    assert figures(*names, "--theme", "dark", "--format", "svg", "--out", str(tmp_path)) == 0
    assert len(list(tmp_path.glob("*.svg"))) == len(names)
    assert not svg_collisions(tmp_path)
