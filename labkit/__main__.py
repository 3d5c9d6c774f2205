"""Command line: `python -m labkit figures [NAME ...] [options]`, `exercises`, `workspace`,
`strip PATH...`, `progress DIR`, `audit log|catalog FILE|DSN`, `audit loop MODULE:FACTORY`.

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

    prog = sub.add_parser(
        "progress", help="gather participants' progress files: where the room is stuck"
    )
    prog.add_argument("folder", type=Path, metavar="DIR", help="the collected *.jsonl files")
    prog.add_argument("--csv", type=Path, help="also write one row per participant and exercise")
    prog.add_argument(
        "--figure", type=Path, help="the picture, .svg or .png (default DIR/room.svg)"
    )

    _audit_parser(sub)

    strip = sub.add_parser("strip", help="strip outputs from notebooks in place")
    strip.add_argument("paths", nargs="+", type=Path)
    return parser


def _audit_parser(sub: argparse._SubParsersAction) -> None:
    """`audit log STATUS --checkpoints CKPT`, `audit catalog EVENTS` and `audit loop
    MODULE:FACTORY` (labkit.audit.cli)."""
    audit = sub.add_parser("audit", help="audit your own message log, catalog events or loop")
    which = audit.add_subparsers(dest="audit", required=True)
    log = which.add_parser("log", help="part one: orphans, chain gaps, lag behind the frontier")
    log.add_argument(
        "status",
        metavar="STATUS",
        help="status rows (id,shard,status,at): a file or a DSN",
    )
    log.add_argument(
        "--checkpoints",
        required=True,
        metavar="CKPT",
        help="checkpoints: a file or a DSN",
    )
    log.add_argument("--terminal", default="delivered,failed,cancelled", help="comma-separated")
    log.add_argument("--delivered", default="delivered", help="the status MAX(id) reads")
    log.add_argument("--map", help="your status columns: id=msg_id,at=updated_at,...")
    log.add_argument("--checkpoints-map", help="your checkpoint columns: start=lo,end=hi,...")
    log.add_argument("--table", help="the status table, when STATUS is a SQLite file or a DSN")
    log.add_argument(
        "--checkpoints-table", help="the checkpoint table, when CKPT is a SQLite file or a DSN"
    )
    cat = which.add_parser("catalog", help="part two: falls each observer saw, bad commits")
    cat.add_argument("events", metavar="EVENTS", help="catalog events: a file or a DSN")
    cat.add_argument("--map", help="your event columns: at=ts,event=kind,...")
    cat.add_argument("--table", help="the event table, when EVENTS is a SQLite file or a DSN")
    loop = which.add_parser(
        "loop", help="your loop: the shortest arrival order that drops its head"
    )
    loop.add_argument(
        "target", metavar="MODULE:FACTORY", help="FACTORY(conn) makes your loop (conn: SQLite)"
    )
    loop.add_argument("--n", type=int, default=4, help="deliveries per schedule (default 4)")
    loop.add_argument("--window", type=int, default=1, help="ballots kept in flight (default 1)")
    loop.add_argument("--seconds", type=float, default=60.0, help="time limit of the whole audit")
    loop.add_argument(
        "--service",
        type=int,
        metavar="VERSIONS",
        help="also run the loop for real against the planner service until its head reaches "
        "VERSIONS, a second reader process counting falls against its reads",
    )
    loop.add_argument("--seed", type=int, default=0, help="the service's random seed (default 0)")
    for one in (log, cat, loop):
        one.add_argument("--json", action="store_true", help="JSON Lines, then a summary")
        one.add_argument("--figure", type=Path, help="also draw the audit, .svg or .png")


def _audit(args: argparse.Namespace) -> int:
    """`audit`: 0 clean, 1 findings; bad input is one stderr line and 2, nothing printed."""
    from labkit.audit.cli import run
    from labkit.audit.inputs import InputError, UsageError

    figure = args.figure
    if figure is not None and figure.suffix not in (".svg", ".png"):
        return _fail(args.command, f"{figure}: the figure must end in .svg or .png")
    try:
        report, text = run(args)
        if figure is not None:
            from labkit.audit.cli import figure_inputs
            from labkit.files import UnsafeTarget
            from labkit.plots.audit import audit_figure, save_audit_figure

            try:
                save_audit_figure(audit_figure(report, figure_inputs(args)), figure)
            except UnsafeTarget as exc:
                return _fail(args.command, str(exc))
    except (InputError, UsageError) as exc:
        return _fail(args.command, str(exc))
    sys.stdout.write(text)
    return report.exit_code


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


def _progress(args: argparse.Namespace) -> int:
    """`progress`: the room's table printed, its figure and optionally the CSV written; a torn
    line is a warning on stderr, a bad entry one line naming the file and line."""
    import warnings

    from labkit.exercises import progress as pr

    folder, figure = args.folder, args.figure or args.folder / "room.svg"
    if not folder.is_dir():
        return _fail(args.command, f"{folder}: no such directory")
    if figure.suffix not in (".svg", ".png"):
        return _fail(args.command, f"{figure}: the figure must end in .svg or .png")
    files = pr.progress_files(folder)
    if not files:
        return _fail(args.command, f"{folder}: no progress files (*.jsonl) in it")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pr.ProgressWarning)
        try:
            events = [e for path in files for e in pr.read_events(path)]
        except pr.ProgressFileError as exc:
            return _fail(args.command, str(exc))
    for warning in caught:
        print(f"python -m labkit progress: warning: {warning.message}", file=sys.stderr)
    rows = pr.standings(events)
    rooms = pr.room(rows)
    people = len({r.participant for r in rows})
    print(f"{people} participants, {len(files)} files, {len(events)} events\n")
    print(pr.table_text(rooms))
    from labkit.files import UnsafeTarget
    from labkit.plots.room import room_figure
    from labkit.plots.style import save_figure

    try:
        if args.csv:
            pr.write_csv(args.csv, rows)
            print(f"\nCSV: {args.csv}")
        title = f"Where the room is: {people} participants"
        save_figure(
            room_figure(rooms, title), figure, formats=(figure.suffix[1:],)
        )  # keeps its name
    except UnsafeTarget as exc:
        return _fail(args.command, str(exc))
    print(f"figure: {figure}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "figures":
            return _figures(args)
        if args.command == "progress":
            return _progress(args)
        if args.command == "audit":
            return _audit(args)
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
