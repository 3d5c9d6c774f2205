"""The workshop folder `make lab` opens: the lessons, the student exercises, the docs they link
to and the bundled scenario files, laid out as in the repository so every relative link works,
and apart from the tracked files so a participant's edits and autosaves never change them.

Made once and then kept: a file already there is the participant's work and is never
overwritten (delete it to get a fresh copy).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from labkit.docs.nbfiles import NotebookFileError, stripped_copy, student_copy
from labkit.files import UnsafeTarget, check_target, replace_file
from labkit.paths import REPO, WORKSHOP

DEFAULT_OUT = WORKSHOP
START = "notebooks/00_start_here.ipynb"


@dataclass(frozen=True)
class Workspace:
    """A workshop folder: the files this call wrote and those it found and kept."""

    root: Path
    made: tuple[Path, ...]
    kept: tuple[Path, ...]


def _planned(repo: Path) -> Iterator[tuple[str, Path]]:
    """Each file of the workshop (its path inside it) and the repository file it comes from."""
    for path in sorted((repo / "notebooks").glob("*.ipynb")):
        yield f"notebooks/{path.name}", path
    for path in sorted((repo / "exercises" / "solutions").glob("*.ipynb")):
        yield f"exercises/student/{path.name}", path
    for path in sorted((repo / "docs").glob("*.md")):
        if path.name != "instructor.md":  # the day plans and answer links are not the room's
            yield f"docs/{path.name}", path
    for path in sorted((repo / "docs" / "figures").glob("*.*")):
        yield f"docs/figures/{path.name}", path
    for path in sorted((repo / "data").rglob("*")):  # 01's and 02's scenarios, 10's samples
        if path.is_file():
            yield path.relative_to(repo).as_posix(), path


def _content(inside: str, source: Path) -> str | bytes:
    if inside.startswith("exercises/student/"):
        return student_copy(source)
    if source.suffix == ".ipynb":
        return stripped_copy(source)
    return source.read_bytes()


def make_workspace(out: Path = DEFAULT_OUT, repo: Path = REPO) -> Workspace:
    """Create the files of the workshop folder `out` that are missing; keep those present."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotebookFileError(out, "exists and is not a directory")
    if out.resolve() == Path(repo).resolve():
        raise NotebookFileError(out, "is the repository itself; the workshop needs its own folder")
    made: list[Path] = []
    kept: list[Path] = []
    for inside, source in _planned(Path(repo)):
        target = out / inside
        try:
            check_target(target)  # a link planted in the folder would write elsewhere
        except UnsafeTarget as exc:
            raise NotebookFileError(target, exc.problem) from exc
        if target.exists():
            kept.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_file(target, _content(inside, source))
        made.append(target)
    return Workspace(out, tuple(made), tuple(kept))
