"""Notebook file chores for the command line: strip outputs, write student copies.

Each public function checks every path before it writes anything, and reports a bad path as a
`NotebookFileError` whose message is one line naming the path and what is wrong. What stripping
removes is nbstripout's (the git filter's too); the writing is ours: nbstripout rewrites a file
in place, and on a full disk that left a notebook cut short (4,096 of 212,411 bytes), where
`replace_file` leaves it whole. nbformat and nbstripout are imported inside the functions: they
are slow to import and labkit's own import must stay light.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from labkit.files import UnsafeTarget, check_target, replace_file

SOLUTION_START = "# BEGIN SOLUTION"
SOLUTION_END = "# END SOLUTION"
_SOLUTION_RE = re.compile(
    r"^(?P<indent>[ \t]*)# BEGIN SOLUTION\n.*?^[ \t]*# END SOLUTION[ \t]*\n?",
    re.DOTALL | re.MULTILINE,
)
_TARGET_RE = re.compile(
    r"^(?P<indent>[ \t]*)(?:def[ \t]+(?P<func>[A-Za-z_]\w*)|(?P<name>[A-Za-z_]\w*)[ \t]*=(?!=))",
    re.MULTILINE,
)


class NotebookFileError(ValueError):
    """A notebook path that cannot be used; the message names the path and the problem."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        super().__init__(f"{path}: {problem}")


# What nbstripout's command line strips besides outputs and counts (its defaults, which the git
# filter runs with), so a notebook stripped here is stored byte for byte as the filter would
# store it; tests/test_notebooks.py compares the two.
NBSTRIPOUT_KEYS = (
    "metadata.signature",
    "metadata.widgets",
    "cell.metadata.collapsed",
    "cell.metadata.ExecuteTime",
    "cell.metadata.execution",
    "cell.metadata.heading_collapsed",
    "cell.metadata.hidden",
    "cell.metadata.scrolled",
)


def strip_notebook(nb: Any) -> Any:
    """Strip a notebook node as nbstripout does with its defaults: outputs, execution counts,
    volatile metadata, and cell ids numbered from 0 (so a re-run changes no id)."""
    from nbstripout import strip_output

    return strip_output(
        nb, keep_output=False, keep_count=False, keep_id=False, extra_keys=list(NBSTRIPOUT_KEYS)
    )


def read_notebook(path: Path) -> tuple[str, Any]:
    """The text of a notebook file and its parsed node; `NotebookFileError` if either fails."""
    import nbformat

    try:
        check_target(path)  # a FIFO would block the read forever; a link names another file
    except UnsafeTarget as exc:
        raise NotebookFileError(path, exc.problem) from exc
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise NotebookFileError(path, "no such file") from exc
    except UnicodeDecodeError as exc:
        raise NotebookFileError(path, f"not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise NotebookFileError(path, f"cannot read: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f" (line {exc.lineno} column {exc.colno})"
        raise NotebookFileError(path, f"not a notebook: invalid JSON{where}") from exc
    except RecursionError as exc:  # nested too deep to parse
        raise NotebookFileError(path, "not a notebook: invalid JSON") from exc
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookFileError(path, "not a notebook: no 'cells' list at the top level")
    try:
        return text, nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types for a malformed node
        raise NotebookFileError(path, f"not a valid notebook: {exc}".splitlines()[0]) from exc


def _write(path: Path, text: str) -> None:
    """Write by replace (LF line ends on every platform); on failure `path` is untouched."""
    try:
        replace_file(path, text)
    except UnsafeTarget as exc:
        raise NotebookFileError(path, exc.problem) from exc
    except OSError as exc:
        raise NotebookFileError(
            path, f"cannot write: {exc.strerror}; the file is unchanged"
        ) from exc


def _notebooks_under(root: Path) -> list[Path]:
    if root.is_dir():
        return [p for p in sorted(root.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts]
    if not root.exists():
        raise NotebookFileError(root, "no such file or directory")
    return [root]


def strip_paths(paths: Iterable[Path]) -> list[Path]:
    """Strip every notebook under `paths` in place; return the files that changed.

    Every file is read and parsed before the first one is written, so a bad path changes nothing.
    """
    import nbformat

    pending = []
    found = [p for root in paths for p in _notebooks_under(Path(root))]
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)  # a file named twice is written once
    for path in unique.values():
        before, nb = read_notebook(path)
        after = nbformat.writes(strip_notebook(nb)) + "\n"
        if after != before:
            pending.append((path, after))
    for path, after in pending:
        _write(path, after)
        print(f"stripped {path}")
    return [path for path, _ in pending]


def studentize_source(source: str) -> str:
    """Replace each `# BEGIN SOLUTION ... # END SOLUTION` block with `name = ____`.

    `name` is the first variable the block assigns or function it defines at the block's own
    indentation (not one inside a function body), so the check line after it still runs.
    """

    def blank(match: re.Match[str]) -> str:
        indent = match.group("indent")
        name = "answer"
        for target in _TARGET_RE.finditer(match.group(0)):
            if target.group("indent") == indent:
                name = target.group("func") or target.group("name")
                break
        return f"{indent}{name} = ____  # your answer here\n"

    return _SOLUTION_RE.sub(blank, source)


def _check_copy_paths(src: Path, out: Path) -> list[Path]:
    """The solution notebooks in `src`, after refusing any `src`/`out` pair that would clobber."""
    if not src.is_dir():
        problem = "not a directory" if src.exists() else "no such directory"
        raise NotebookFileError(src, f"{problem} (expected the solution notebooks here)")
    sources = sorted(src.glob("*.ipynb"))
    if not sources:
        raise NotebookFileError(src, "no *.ipynb solution notebooks in this directory")
    if out.exists() and not out.is_dir():
        raise NotebookFileError(out, "exists and is not a directory")
    if out.resolve() == src.resolve():
        raise NotebookFileError(out, "is the solutions directory; the copies would overwrite them")
    for path in sources:
        target = out / path.name
        if target.exists() and target.samefile(path):
            raise NotebookFileError(target, f"is the solution notebook {path} itself")
        try:
            check_target(target)  # a link inside the output folder would write elsewhere
        except UnsafeTarget as exc:
            raise NotebookFileError(target, exc.problem) from exc
    return sources


def student_copy(path: Path) -> str:
    """The text of the student copy of solution notebook `path`: outputs stripped, each
    solution block left as a blank for the learner."""
    import nbformat

    _, nb = read_notebook(path)
    for cell in nb.cells:
        if cell.cell_type == "code" and SOLUTION_START in cell.source:
            cell.source = studentize_source(cell.source)
    return str(nbformat.writes(strip_notebook(nb))) + "\n"


def stripped_copy(path: Path) -> str:
    """The text of notebook `path` with its outputs stripped (what a reader starts from)."""
    import nbformat

    _, nb = read_notebook(path)
    return str(nbformat.writes(strip_notebook(nb))) + "\n"


def make_student_copies(src: Path, out: Path) -> list[Path]:
    """Write a stripped student copy of every solution notebook in `src` into `out`.

    All notebooks are read and rewritten in memory before anything is written; `out` may not be
    `src` (the blanks would overwrite the solutions).
    """
    src, out = Path(src), Path(out)
    copies = [(out / path.name, student_copy(path)) for path in _check_copy_paths(src, out)]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NotebookFileError(out, f"cannot create the directory: {exc.strerror}") from exc
    for target, text in copies:
        _write(target, text)
        print(f"student copy {target}")
    return [target for target, _ in copies]
