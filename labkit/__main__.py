"""Command line: `python -m labkit figures [NAME ...] [options]`, `exercises`, `workspace`,
`strip PATH...`.

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

    fig = sub.add_parser("figures", help="regenerate the docs figures (SVG + PNG)")
    fig.add_argument("names", nargs="*", metavar="NAME", help="only these figures (see --list)")
    fig.add_argument("--list", action="store_true", help="print each figure's name and caption")
    fig.add_argument("--out", type=Path, default=Path("docs/figures"))
    fig.add_argument("--format", default="svg,png", help="comma-separated: svg, png")
    fig.add_argument("--dpi", type=int, default=100, help="PNG resolution (pixels per inch)")
    fig.add_argument("--theme", default="light", help="light or dark")
    fig.add_argument("--scenario", type=Path, help="your scenario file, for the part-one figures")
    fig.add_argument("--spec", type=Path, action="append", default=[], help="a saved figure spec")
    fig.add_argument(
        "--spec-dir",
        type=Path,
        default=Path("figures/specs"),
        help="saved specs built with every figure (default figures/specs)",
    )

    ex = sub.add_parser("exercises", help="generate student copies of the exercise notebooks")
    ex.add_argument("--src", type=Path, default=Path("exercises/solutions"))
    ex.add_argument("--out", type=Path, default=Path("exercises/student"))

    ws = sub.add_parser(
        "workspace", help="make the workshop folder make lab opens (keeps files already there)"
    )
    ws.add_argument("--out", type=Path, default=None, help="default: workshop/ in the repository")

    strip = sub.add_parser("strip", help="strip outputs from notebooks in place")
    strip.add_argument("paths", nargs="+", type=Path)
    return parser


def _fail(command: str, message: str) -> int:
    print(f"python -m labkit {command}: {message}", file=sys.stderr)
    return USAGE_ERROR


def _figures(args: argparse.Namespace) -> int:
    """`figures`: a subset or all, in the formats, resolution and theme asked, with saved specs."""
    from labkit.docs.figures import (
        BuildRequest,
        FigureOutputError,
        FigureRequestError,
        build_all,
        figure_list,
        spec_files,
    )

    if args.list:
        print("\n".join(figure_list()))
        return 0
    whole = not args.names and not args.spec
    request = BuildRequest(
        names=None if whole else tuple(args.names),
        specs=tuple(args.spec) or (spec_files(args.spec_dir) if whole else ()),
        formats=tuple(f.strip() for f in args.format.split(",") if f.strip()),
        dpi=args.dpi,
        theme=args.theme,
        scenario=args.scenario,
    )
    try:
        build_all(args.out, request=request)
    except (FigureOutputError, FigureRequestError) as exc:
        return _fail(args.command, str(exc))
    return 0


def _workspace(out: Path | None) -> None:
    """`workspace`: the missing files of the workshop folder, one line on what was made."""
    from labkit.docs.workspace import DEFAULT_OUT, START, make_workspace

    made = make_workspace(out or DEFAULT_OUT)
    print(
        f"workshop folder {made.root}: {len(made.made)} files made, {len(made.kept)} kept "
        f"(yours: delete one to get a fresh copy); start at {START}"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "figures":
            return _figures(args)
        else:
            from labkit.docs.nbfiles import NotebookFileError, make_student_copies, strip_paths

            try:
                if args.command == "exercises":
                    make_student_copies(args.src, args.out)
                elif args.command == "workspace":
                    _workspace(args.out)
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
