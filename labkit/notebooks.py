"""Notebook housekeeping: strip outputs, make student copies, execute headless.

nbformat/nbclient are imported inside the functions: they are slow to import
(jupyter_server#1559) and labkit's own import path must stay light.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SOLUTION_START = "# BEGIN SOLUTION"
SOLUTION_END = "# END SOLUTION"
_SOLUTION_RE = re.compile(
    r"^(?P<indent>[ \t]*)# BEGIN SOLUTION\n.*?^[ \t]*# END SOLUTION[ \t]*\n?",
    re.DOTALL | re.MULTILINE,
)


def strip_notebook(nb: Any) -> Any:
    """Remove outputs, execution counts and volatile metadata from a notebook node."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    return nb


def strip_paths(paths: Iterable[Path]) -> list[Path]:
    """Strip every notebook under `paths` in place; return the files that changed."""
    import nbformat

    changed = []
    for root in paths:
        files = sorted(root.rglob("*.ipynb")) if root.is_dir() else [root]
        for path in files:
            if ".ipynb_checkpoints" in path.parts:
                continue
            before = path.read_text(encoding="utf-8")
            nb = strip_notebook(nbformat.reads(before, as_version=4))
            after = nbformat.writes(nb) + "\n"
            if after != before:
                path.write_text(after, encoding="utf-8")
                changed.append(path)
                print(f"stripped {path}")
    return changed


_TARGET_RE = re.compile(
    r"^(?P<indent>[ \t]*)(?:def[ \t]+(?P<func>[A-Za-z_]\w*)|(?P<name>[A-Za-z_]\w*)[ \t]*=(?!=))",
    re.MULTILINE,
)


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


def make_student_copies(src: Path, out: Path) -> list[Path]:
    """Write a stripped student copy of every solution notebook in `src` into `out`."""
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(src.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and SOLUTION_START in cell.source:
                cell.source = studentize_source(cell.source)
        strip_notebook(nb)
        target = out / path.name
        nbformat.write(nb, target)
        written.append(target)
        print(f"student copy {target}")
    return written


POLL_SLICE_S = 1.0


def _patch_zmq_get_msg() -> None:
    """Poll kernel channels in slices of `POLL_SLICE_S` so a lost wake-up cannot stall a run.

    Under CPU load nbclient was seen parked in `get_msg` although the kernel had replied
    (voila#1428); re-polling in short slices until the real deadline avoids the hang. Like
    the original, a deadline that passes with no message raises `queue.Empty`, which is what
    jupyter_client's callers catch.
    """
    from queue import Empty

    from jupyter_client.channels import AsyncZMQSocketChannel

    if getattr(AsyncZMQSocketChannel.get_msg, "_sliced", False):
        return
    original = AsyncZMQSocketChannel.get_msg

    async def get_msg(self: Any, timeout: float | None = None) -> dict[str, Any]:
        slice_s = POLL_SLICE_S
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_s if deadline is None else deadline - time.monotonic()
            try:
                return await original(self, timeout=max(0.0, min(slice_s, left)))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    get_msg._sliced = True  # type: ignore[attr-defined]
    AsyncZMQSocketChannel.get_msg = get_msg  # type: ignore[method-assign]


def execute_notebook(path: Path, timeout: int = 60, cwd: Path | None = None) -> Any:
    """Run a notebook top to bottom in a fresh kernel; return the executed node (not saved)."""
    import nbformat
    from nbclient import NotebookClient

    _patch_zmq_get_msg()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd or path.parent)}},
    )
    client.execute()
    return nb


def cell_text_outputs(nb: Any) -> list[str]:
    """All stream and text/plain outputs of an executed notebook, in order."""
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                texts.append(out.get("text", ""))
            elif "data" in out and "text/plain" in out["data"]:
                texts.append(out["data"]["text/plain"])
    return texts


def cell_errors(nb: Any) -> list[str]:
    """`ename: evalue` of every error output of an executed notebook, in order."""
    return [
        f"{out.get('ename')}: {out.get('evalue')}"
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
