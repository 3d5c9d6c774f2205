"""The workshop folder `make lab` opens: every lesson link resolves inside it, a participant's
files are kept, and the tracked notebooks never change."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.docs.nbfiles import NotebookFileError
from labkit.docs.workspace import REPO, START, make_workspace

LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?:#[^)]*)?\)")


def _links(notebook: Path) -> list[str]:
    """The relative link targets in the markdown cells of `notebook`."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return [m["target"] for m in LINK.finditer(text) if "://" not in m["target"]]


def _tracked_hashes() -> dict[Path, str]:
    paths = [*(REPO / "notebooks").glob("*.ipynb"), *(REPO / "exercises/solutions").glob("*.ipynb")]
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_every_lesson_and_exercise_link_opens_its_target_inside_the_workshop(tmp_path) -> None:
    made = make_workspace(tmp_path / "workshop")
    root = made.root.resolve()
    assert (root / START).is_file() and made.kept == ()
    notebooks = sorted(root.glob("notebooks/*.ipynb")) + sorted(root.glob("exercises/student/*"))
    assert len(notebooks) >= 10 + 8
    checked = 0
    for notebook in notebooks:
        for target in _links(notebook):
            resolved = (notebook.parent / target).resolve()
            assert resolved.is_relative_to(root), f"{notebook.name}: {target} leaves the folder"
            assert resolved.exists(), f"{notebook.name}: {target} does not exist in the workshop"
            checked += 1
    assert checked >= 32  # the lessons' links to the exercises and the glossary among them


def test_a_participants_files_are_kept_and_the_tracked_notebooks_never_change(tmp_path) -> None:
    before = _tracked_hashes()
    out = tmp_path / "workshop"
    make_workspace(out)
    mine = out / "exercises/student/ex01_max_and_orphans.ipynb"
    mine.write_text(mine.read_text(encoding="utf-8").replace("____", "42"), encoding="utf-8")
    worked = mine.read_bytes()
    (out / "notebooks/01_max_is_not_a_watermark.ipynb").unlink()  # asked for a fresh copy
    again = make_workspace(out)
    assert mine.read_bytes() == worked and mine in again.kept
    assert again.made == (out / "notebooks/01_max_is_not_a_watermark.ipynb",)
    assert _tracked_hashes() == before


def test_student_copies_have_blanks_and_lessons_no_outputs(tmp_path) -> None:
    made = make_workspace(tmp_path / "w")
    student = (made.root / "exercises/student/ex01_max_and_orphans.ipynb").read_text("utf-8")
    assert "____" in student
    for nb in (made.root / "notebooks").glob("*.ipynb"):
        cells = json.loads(nb.read_text("utf-8"))["cells"]
        assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code"), nb.name


def test_a_link_planted_in_the_folder_is_refused_before_writing_through_it(tmp_path) -> None:
    out = tmp_path / "workshop"
    (out / "notebooks").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.ipynb"
    elsewhere.write_text("mine", encoding="utf-8")
    (out / "notebooks/00_start_here.ipynb").symlink_to(elsewhere)
    with pytest.raises(NotebookFileError, match="symbolic link"):
        make_workspace(out)
    assert elsewhere.read_text(encoding="utf-8") == "mine"


def test_the_repository_itself_is_refused(tmp_path) -> None:
    with pytest.raises(NotebookFileError, match="repository itself"):
        make_workspace(REPO)


def test_the_command_says_what_it_made_and_kept(tmp_path) -> None:
    def run() -> subprocess.CompletedProcess[str]:
        args = [sys.executable, "-m", "labkit", "workspace", "--out", str(tmp_path / "w")]
        return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)

    first, second = run(), run()
    assert first.returncode == 0 and " 0 kept" in first.stdout, first.stderr
    assert second.returncode == 0 and " 0 files made" in second.stdout
    assert START in second.stdout
    blocked = tmp_path / "file"
    blocked.write_text("x", encoding="utf-8")
    args = [sys.executable, "-m", "labkit", "workspace", "--out", str(blocked)]
    bad = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and "exists and is not a directory" in bad.stderr
