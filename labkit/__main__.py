"""Command line: `python -m labkit figures [--out DIR]`, `exercises`, `strip PATH...`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit")
    sub = parser.add_subparsers(dest="command", required=True)

    fig = sub.add_parser("figures", help="regenerate every docs figure (SVG + PNG)")
    fig.add_argument("--out", type=Path, default=Path("docs/figures"))

    ex = sub.add_parser("exercises", help="generate student copies of the exercise notebooks")
    ex.add_argument("--src", type=Path, default=Path("exercises/solutions"))
    ex.add_argument("--out", type=Path, default=Path("exercises/student"))

    strip = sub.add_parser("strip", help="strip outputs from notebooks in place")
    strip.add_argument("paths", nargs="+", type=Path)

    args = parser.parse_args(argv)
    if args.command == "figures":
        from labkit.figures import build_all

        build_all(args.out)
    elif args.command == "exercises":
        from labkit.notebooks import make_student_copies

        make_student_copies(args.src, args.out)
    elif args.command == "strip":
        from labkit.notebooks import strip_paths

        strip_paths(args.paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
