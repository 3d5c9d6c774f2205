"""The site's two editions, checked on the staged sources (no notebook executed, nothing
rendered, so this runs in the ordinary test loop): the student edition stages no worked answer
and no instructor page and leaves no link to either; the instructor edition has both, the
answers in no navigation and each linked from the instructor page. Also the learning path's
numbers (05b after 05) and where its parts come from."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "site"))

import build  # noqa: E402  (site/build.py, importable once its folder is on the path)

# A link in Markdown or HTML: the target of `](...)`, `href="..."` or `src="..."`.
LINK_TARGETS = re.compile(r"\]\(([^)\s]+)\)|(?:href|src)=[\"']([^\"']+)[\"']")


def captions(index: str) -> list[tuple[str, list[str]]]:
    """(caption, entries) of each toctree in the staged index.md, in order."""
    trees = re.findall(r"```\{toctree\}\n:caption: (.*?)\n:hidden:\n\n(.*?)\n```", index, re.DOTALL)
    return [(caption, entries.split("\n")) for caption, entries in trees]


def page_texts(src: Path) -> dict[str, tuple[Path, str]]:
    """Each staged page (Markdown, or a notebook's cells) by its path: its folder and text."""
    texts = {}
    for path in sorted(src.rglob("*.md")):
        texts[path.relative_to(src).as_posix()] = (path.parent, path.read_text(encoding="utf-8"))
    for path in sorted(src.rglob("*.ipynb")):
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        texts[path.relative_to(src).as_posix()] = (path.parent, text)
    return texts


def answer_links(src: Path) -> list[str]:
    """Every link in a staged page whose target is the instructor page or a worked answer."""
    found = []
    for name, (folder, text) in page_texts(src).items():
        for match in LINK_TARGETS.finditer(text):
            target = (match.group(1) or match.group(2)).split("#", 1)[0]
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path = os.path.relpath(os.path.normpath(folder / target), src).replace(os.sep, "/")
            if path.startswith(("exercises/solutions", "docs/instructor")):
                found.append(f"{name}: {match.group(0)}")
    return found


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    src = tmp_path_factory.mktemp("student") / "src"
    return src, build.stage(src)


@pytest.fixture(scope="module")
def instructor(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    src = tmp_path_factory.mktemp("instructor") / "src"
    return src, build.stage(src, instructor=True)


def test_the_student_edition_stages_no_answer_and_no_link_to_one(
    student: tuple[Path, list[Path]],
) -> None:
    src, executed = student
    assert not (src / "exercises" / "solutions").exists()
    assert not (src / "docs" / "instructor.md").exists()
    assert (ROOT / "docs" / "instructor.md").is_file()  # there to leave out
    assert answer_links(src) == []
    index = (src / "index.md").read_text(encoding="utf-8")
    entries = [e for _, tree in captions(index) for e in tree]
    assert not [e for e in entries if "solutions/" in e or "instructor" in e]
    assert {p.parent.name for p in executed} == {"notebooks"}  # the lessons only
    students = sorted(src.glob("exercises/student/*.ipynb"))
    assert len(students) == len(list((ROOT / "exercises" / "solutions").glob("*.ipynb"))) >= 8
    for path in students:
        nb = nbformat.read(path, as_version=4)
        text = "".join(c.source for c in nb.cells)
        assert "BEGIN SOLUTION" not in text and "____" in text, path.name
        assert "solutions/" not in text, path.name


def test_a_student_page_says_how_to_work_it_in_the_workshop_folder(
    student: tuple[Path, list[Path]],
) -> None:
    """The note under each exercise page's title gives the flow `make lab` really has: it makes
    workshop/ with the student copy at exercises/student/NAME and opens JupyterLab on it."""
    src, _ = student
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    lab = makefile.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "labkit workspace" in lab and "--notebook-dir=workshop" in lab
    from labkit.docs import workspace

    assert workspace.DEFAULT_OUT.name == "workshop"
    planned = {inside for inside, _ in workspace._planned(ROOT)}
    for path in sorted(src.glob("exercises/student/*.ipynb")):
        note = nbformat.read(path, as_version=4).cells[1].source
        assert note.startswith("```{note}") and "`make lab`" in note, path.name
        assert f"`exercises/student/{path.name}`" in note and "`workshop/`" in note, path.name
        assert f"exercises/student/{path.name}" in planned, path.name
        assert "make exercises" not in note and "instructor" not in note, path.name


def test_the_instructor_edition_has_the_answers_each_linked_from_the_instructor_page(
    instructor: tuple[Path, list[Path]],
) -> None:
    src, executed = instructor
    trees = captions((src / "index.md").read_text(encoding="utf-8"))
    assert [c for c, _ in trees][-1] == "Reference"
    assert "docs/instructor" in trees[-1][1]
    for caption, entries in trees:
        assert not any(e.startswith("exercises/solutions/") for e in entries), caption
    instructor_page = (src / "docs" / "instructor.md").read_text(encoding="utf-8")
    answers = sorted(src.glob("exercises/solutions/*.ipynb"))
    assert [p.name for p in answers] == sorted(
        p.name for p in (ROOT / "exercises" / "solutions").glob("*.ipynb")
    )
    assert set(answers) <= set(executed)
    assert len(answer_links(src)) >= len(answers)  # the scan sees the links it must not find
    for path in answers:
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata.get("orphan") is True, path.name
        assert nb.cells[0].source.startswith("# Solutions"), path.name
        assert f"(../student/{path.name})" in nb.cells[1].source, path.name
        assert f"(../exercises/solutions/{path.name})" in instructor_page, path.name
    for path in [*src.glob("notebooks/*.ipynb"), *src.glob("exercises/student/*.ipynb")]:
        text = "".join(c.source for c in nbformat.read(path, as_version=4).cells)
        assert "solutions/" not in text, path.name


@pytest.mark.parametrize(
    ("folder", "target", "kept"),
    [
        (".", "docs/instructor.md", False),
        (".", "docs/instructor.md#the-day-before", False),
        ("docs", "instructor.md", False),
        ("docs", "../exercises/solutions/ex01_max_and_orphans.ipynb", False),
        ("exercises/student", "../solutions/ex01_max_and_orphans.ipynb", False),
        ("docs", "glossary.md#ballot", True),
        ("notebooks", "../docs/glossary.md", True),
        (".", "https://example.org/docs/instructor.md", True),
        (".", "#instructor", True),
    ],
)
def test_unlink_answers_keeps_the_text_of_a_link_to_an_answer_only(
    folder: str, target: str, kept: bool
) -> None:
    text = f"See [the page]({target}), and ![a figure](figures/x.svg)."
    out = build.unlink_answers(text, Path(folder))
    assert out == (text if kept else "See the page, and ![a figure](figures/x.svg).")


def fake_notebooks(folder: Path, names: list[str]) -> dict[str, Path]:
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text("{}", encoding="utf-8")
    return build.numbered(folder)


def test_numbers_take_a_letter_and_05b_follows_05_and_its_exercises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    lessons = fake_notebooks(
        src / "notebooks",
        ["06_c.ipynb", "05b_pipelined.ipynb", "05_five.ipynb", "04_a.ipynb", "notes.ipynb"],
    )
    exercises = fake_notebooks(
        src / "exercises" / "student", ["ex05_lww.ipynb", "ex04_b.ipynb", "ex06_r.ipynb"]
    )
    assert list(lessons) == ["04", "05", "05b", "06"]
    assert list(exercises) == ["04", "05", "06"]
    part = ("Part two", ("04_a", "05_five", "05b_pipelined", "06_c", "07_not_written_yet"))
    monkeypatch.setattr(build, "learning_path", lambda: (part,))
    ((caption, entries),) = captions(build._toctrees(src, lessons, exercises))[:1]
    assert caption == "Part two"
    assert entries == [
        "notebooks/04_a",
        "exercises/student/ex04_b",
        "notebooks/05_five",
        "exercises/student/ex05_lww",
        "notebooks/05b_pipelined",
        "notebooks/06_c",
        "exercises/student/ex06_r",
    ]
    monkeypatch.setattr(build, "learning_path", lambda: (("Two", ("04_a", "05_five", "06_c")),))
    with pytest.raises(build.BuildError, match=r"\['05b'\]"):
        build._toctrees(src, lessons, exercises)
    monkeypatch.setattr(build, "learning_path", lambda: (part, ("Again", ("05_five",))))
    with pytest.raises(build.BuildError, match="twice"):
        build._toctrees(src, lessons, exercises)


def test_the_navigation_is_the_outlines_learning_path(student: tuple[Path, list[Path]]) -> None:
    """Every lesson of notebooks/ is placed, in the outline's parts and order."""
    from labkit.docs.outline import PARTS

    src, _ = student
    trees = captions((src / "index.md").read_text(encoding="utf-8"))
    assert [c for c, _ in trees] == [*(c for c, _ in PARTS), "Reference"]
    lessons = [e.split("/")[1] for _, tree in trees for e in tree if e.startswith("notebooks/")]
    assert lessons == [s for _, stems in PARTS for s in stems if s in lessons]
    assert sorted(lessons) == sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))


def test_the_front_page_is_the_landing_page_when_there_is_one() -> None:
    landing = ROOT / "site" / "pages" / "index.md"
    assert build.front_page() == (landing if landing.is_file() else ROOT / "README.md")
