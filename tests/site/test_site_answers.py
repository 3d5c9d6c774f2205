"""The site's page list keeps the worked answers out of a learner's path (issue 23): they are in
no navigation (orphan pages), the instructor page links each of them, and no lesson or student
page does.
Checked on the staged sources, without executing or rendering anything, so it runs in the
ordinary test loop."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "site"))

import build  # noqa: E402  (site/build.py, importable once its folder is on the path)


def captions(index: str) -> list[tuple[str, list[str]]]:
    """(caption, entries) of each toctree in the staged index.md, in order."""
    trees = re.findall(r"```\{toctree\}\n:caption: (.*?)\n:hidden:\n\n(.*?)\n```", index, re.DOTALL)
    return [(caption, entries.split("\n")) for caption, entries in trees]


def test_answers_come_last_and_no_learner_page_links_to_them(tmp_path: Path) -> None:
    src = tmp_path / "src"
    build.stage(src)
    trees = captions((src / "index.md").read_text(encoding="utf-8"))
    assert [c for c, _ in trees][-1] == "Reference"
    for caption, entries in trees:
        assert not any(e.startswith("exercises/solutions/") for e in entries), caption
    instructor = (src / "docs" / "instructor.md").read_text(encoding="utf-8")
    for path in src.glob("exercises/solutions/*.ipynb"):
        assert nbformat.read(path, as_version=4).metadata.get("orphan") is True, path.name
        assert f"(../exercises/solutions/{path.name})" in instructor, path.name
    learner_pages = [*src.glob("notebooks/*.ipynb"), *src.glob("exercises/student/*.ipynb")]
    assert len(learner_pages) >= 12
    for path in learner_pages:
        text = "".join(c.source for c in nbformat.read(path, as_version=4).cells)
        assert "solutions/" not in text, path.name
    for path in src.glob("exercises/solutions/*.ipynb"):
        first = nbformat.read(path, as_version=4).cells[1].source
        assert f"(../student/{path.name})" in first and "for instructors" in first
