"""Command line: `python -m labkit figures [--out DIR]`, `exercises`, `strip PATH...`.

A bad path ends with one line on stderr naming the path and what is wrong, exit status 2, and
nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

USAGE_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m labkit")
    sub = parser.add_subparsers(dest="command", required=True)

    fig = sub.add_parser("figures", help="regenerate every docs figure (SVG + PNG)")
    fig.add_argument("--out", type=Path, default=Path("docs/figures"))

    ex = sub.add_parser("exercises", help="generate student copies of the exercise notebooks")
    ex.add_argument("--src", type=Path, default=Path("exercises/solutions"))
    ex.add_argument("--out", type=Path, default=Path("exercises/student"))

    strip = sub.add_parser("strip", help="strip outputs from notebooks in place")
    strip.add_argument("paths", nargs="+", type=Path)
    return parser


def _fail(command: str, message: str) -> int:
    print(f"python -m labkit {command}: {message}", file=sys.stderr)
    return USAGE_ERROR


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "figures":
            from labkit.docs.figures import FigureOutputError, build_all

            try:
                build_all(args.out)
            except FigureOutputError as exc:
                return _fail(args.command, str(exc))
        else:
            from labkit.docs.nbfiles import NotebookFileError, make_student_copies, strip_paths

            try:
                if args.command == "exercises":
                    make_student_copies(args.src, args.out)
                else:
                    strip_paths(args.paths)
            except NotebookFileError as exc:
                return _fail(args.command, str(exc))
    except OSError as exc:  # past the checks, e.g. the disk filled up half way through
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(args.command, f"{where}{exc.strerror or exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
