"""`--figure PATH` on each audit command (`labkit.plots.audit`): the file is written, twice the
same bytes, with every orphan, chain gap and fall marked (each mark an SVG element id) and none
on a clean twin."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.audit.catalog import audit_catalog
from labkit.audit.inputs import Source
from labkit.audit.loop import audit_loop
from labkit.plots.audit import loop_figure

DATA = Path(__file__).resolve().parent.parent / "data" / "audit"

CALLBACK_LOOP = '''
from types import SimpleNamespace as NS


class CallbackLoop:
    """Writes each answer into the catalog as it arrives."""

    def __init__(self, conn):
        self.head, self.next = 0, 1

    def reserve(self):
        self.next += 1
        return NS(ballot_id=self.next - 1, watermark=self.head, base_version=self.head)

    def apply(self, r):
        self.head = r.base_version + 1
        return NS(committed=True, reason=None)

    def head_version(self):
        return self.head

    def abandon(self, ballot_id):
        return True
'''


def _figure(tmp_path: Path, name: str, *argv: str) -> tuple[int, bytes]:
    """Run the command twice, each time to a new file: its exit code and the bytes (equal)."""
    first, second = tmp_path / f"one_{name}", tmp_path / f"two_{name}"
    code = main(["audit", *argv, "--figure", str(first)])
    assert main(["audit", *argv, "--figure", str(second)]) == code
    assert first.read_bytes() == second.read_bytes()  # fixed metadata: byte-stable
    return code, first.read_bytes()


def _ids(svg: bytes, prefix: str) -> set[str]:
    return set(re.findall(rf'id="({prefix}[^"]*)"', svg.decode("utf-8")))


def _log(name: str) -> list[str]:
    return [
        "log",
        str(DATA / f"log_{name}_status.csv"),
        "--checkpoints",
        str(DATA / f"log_{name}_checkpoints.csv"),
    ]


def test_the_log_figure_marks_each_orphan_and_chain_gap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, svg = _figure(tmp_path, "log.svg", *_log("broken"), "--json")
    found = [line for line in capsys.readouterr().out.splitlines() if '"orphan"' in line]
    assert code == 1 and found
    orphans = {f"orphan-{o['shard']}-{o['id']}" for o in map(json.loads, found)}
    assert _ids(svg, "orphan-") == orphans
    assert _ids(svg, "chain_gap-") == {"chain_gap-us-106"}
    assert _figure(tmp_path, "clean.svg", *_log("clean"))[0] == 0
    clean = (tmp_path / "one_clean.svg").read_bytes()
    assert not _ids(clean, "orphan-") and not _ids(clean, "chain_gap-")


def test_the_catalog_figure_marks_each_fall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, svg = _figure(tmp_path, "cat.svg", "catalog", str(DATA / "catalog_broken.jsonl"))
    report = audit_catalog(Source(DATA / "catalog_broken.jsonl"))
    falls = [f for f in report.findings if f.kind == "fall"]
    assert code == 1 and falls
    assert _ids(svg, "fall-") == {f"fall-{f.observer}-{k + 1}" for k, f in enumerate(falls)}
    clean_code, clean = _figure(tmp_path, "c.svg", "catalog", str(DATA / "catalog_clean.jsonl"))
    assert clean_code == 0 and not _ids(clean, "fall-")


@pytest.fixture
def callback_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "figloops.py").write_text(CALLBACK_LOOP)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "figloops:CallbackLoop"
    sys.modules.pop("figloops", None)


def test_the_loop_figure_draws_the_fall_as_lanes_and_a_sequence(
    tmp_path: Path, callback_loop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, svg = _figure(tmp_path, "loop.svg", "loop", callback_loop, "--n", "3")
    assert code == 1
    assert _ids(svg, "loop-fall") == {"loop-fall", "loop-fall-lane"}
    fig = loop_figure(audit_loop(callback_loop, n=3))
    texts = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert {"loop", "store", "planner", "reader"} <= texts
    assert "head v1 (fell from v2)" in texts
    png_code, png = _figure(tmp_path, "loop.png", "loop", callback_loop, "--n", "3")
    assert png_code == 1 and png.startswith(b"\x89PNG")


def test_a_loop_that_holds_draws_the_fixture_unmarked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = "labkit.catalog.loop:WatermarkLoop"
    code, svg = _figure(tmp_path, "ok.svg", "loop", target, "--n", "2")
    assert code == 0 and not _ids(svg, "loop-fall")
    fig = loop_figure(audit_loop(target, n=2))
    assert "inverted-arrival fixture" in fig.get_suptitle()


def test_a_figure_that_is_not_svg_or_png_is_refused_before_the_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "fig.pdf"
    assert main(["audit", *_log("broken"), "--figure", str(target)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "must end in .svg or .png" in out.err
    assert not target.exists()
