"""The instructor page's dry run: execute notebooks headless, time every cell, count the prose.

Run from the repository root: `.venv/bin/python -m harness.dry_run` (every lesson and solution
notebook) or name notebooks. For each it prints the markdown words (whitespace-separated), the
non-blank code lines, the code cells, the kernel time summed over cells (nbclient's per-cell
timestamps, kernel start-up excluded), the slowest cell, and the minutes a projected reading
would take at `--wpm` words a minute plus `--secs-per-line` seconds per code line.
Not a test: `--write` keeps the kernel seconds in docs/measured.json, which the instructor page
reads (`python -m labkit.docs.instructor_page`); timing belongs outside the test suite.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.nbrun import execute_notebook
from labkit.docs.day_plans import save_measured

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted(
    (ROOT / "exercises" / "solutions").glob("*.ipynb")
)


@dataclass(frozen=True)
class DryRun:
    """What one notebook costs a room: prose, code, and the kernel's time per cell."""

    name: str
    words: int
    code_lines: int
    code_cells: int
    cell_seconds: tuple[float, ...]
    slowest_first_line: str

    @property
    def kernel_seconds(self) -> float:
        return sum(self.cell_seconds)

    def minutes(self, wpm: float, secs_per_line: float) -> float:
        """Projected reading time: the prose at `wpm`, plus `secs_per_line` per code line."""
        return self.words / wpm + self.code_lines * secs_per_line / 60


def _seconds(cell: Any) -> float:
    timing = cell.get("metadata", {}).get("execution", {})
    start = timing.get("iopub.execute_input") or timing.get("shell.execute_reply.started")
    end = timing.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def dry_run(path: Path, timeout: int = 300) -> DryRun:
    """Execute `path` in a fresh kernel (outputs not saved) and measure it."""
    nb = execute_notebook(path, timeout=timeout)
    code = [c for c in nb.cells if c.cell_type == "code"]
    seconds = tuple(_seconds(c) for c in code)
    slowest = code[seconds.index(max(seconds))] if code else None
    return DryRun(
        name=path.stem,
        words=sum(len(c.source.split()) for c in nb.cells if c.cell_type == "markdown"),
        code_lines=sum(1 for c in code for line in c.source.splitlines() if line.strip()),
        code_cells=len(code),
        cell_seconds=seconds,
        slowest_first_line=slowest.source.splitlines()[0] if slowest and slowest.source else "",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, default=DEFAULT)
    parser.add_argument("--wpm", type=float, default=130.0, help="projected words a minute")
    parser.add_argument("--secs-per-line", type=float, default=10.0, help="seconds per code line")
    parser.add_argument(
        "--write", action="store_true", help="keep the kernel seconds in docs/measured.json"
    )
    args = parser.parse_args(argv)
    kernel: dict[str, float] = {}
    print("| notebook | words | code lines | code cells | kernel s | slowest cell | minutes |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for path in args.notebooks:
        run = dry_run(path)
        print(
            f"| {run.name} | {run.words:,} | {run.code_lines} | {run.code_cells} "
            f"| {run.kernel_seconds:.1f} | {max(run.cell_seconds, default=0):.1f} s, "
            f"`{run.slowest_first_line[:40]}` | {run.minutes(args.wpm, args.secs_per_line):.0f} |",
            flush=True,
        )
        kernel[run.name] = run.kernel_seconds
    if args.write:
        save_measured("kernel_seconds", kernel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
