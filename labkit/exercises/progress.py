"""Each check, hint and solution a participant asks for, kept as one JSON line in a local file,
so an instructor can gather the room's files and see where it is stuck (`python -m labkit
progress DIR`). Nothing goes over the network.

The file is `LABKIT_PROGRESS` if set ("" or "off": no file), else
`workshop/progress/<participant>.jsonl` when the kernel runs inside the workshop folder `make
lab` opens, else `progress.jsonl` in the user's data folder. Lines are only ever appended; a
line cut short by a crash is skipped with a warning when read. Recording never stops a check:
a failed write is reported once, as a warning, and the feedback still shows.
"""

from __future__ import annotations

import csv
import functools
import getpass
import inspect
import io
import json
import os
import re
import secrets
import statistics
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar, cast, get_args

from labkit.files import check_target, replace_file
from labkit.paths import WORKSHOP

PATH_VARIABLE = "LABKIT_PROGRESS"
PARTICIPANT_VARIABLE = "LABKIT_PARTICIPANT"
OFF = ("", "off")
NAME_FILE = "participant.txt"  # beside the progress file: the generated participant id
DATA_FOLDER = "watermark-workbook"

Kind = Literal["check", "hint", "solution"]
KINDS: tuple[str, ...] = get_args(Kind)
State = Literal["solved", "trying", "not started"]
TRIED = ("correct", "incorrect")  # check statuses of an attempt: an answer judged, not a blank


class ProgressWarning(UserWarning):
    """A progress file could not be written, or a line of one was cut short and skipped."""


class ProgressFileError(ValueError):
    """A progress file entry that cannot be read: one line naming the file, the line, why."""


@dataclass(frozen=True)
class Event:
    """One check, hint or solution: who, which exercise, what it said, when (UTC)."""

    participant: str
    exercise: str
    kind: Kind
    status: str  # a check's "correct" / "incorrect" / "not_attempted"; "hint"; "solution"
    hint_level: int | None
    at: datetime

    def line(self) -> str:
        """The event as the one JSON line the progress file holds (no newline)."""
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        doc["at"] = self.at.astimezone(UTC).isoformat(timespec="milliseconds")
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


# --- where the file is, and who is writing it --------------------------------------------------


def _safe_name(text: str) -> str:
    """`text` as a file-name part: letters, digits, '.', '_' and '-', at most 40 characters."""
    return re.sub(r"[^\w.-]+", "-", text.strip()).strip(".-")[:40]


def progress_path(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path | None:
    """The progress file checks append to now, or None when recording is switched off."""
    env = os.environ if env is None else env
    chosen = env.get(PATH_VARIABLE)
    if chosen is not None:
        return None if chosen.strip().lower() in OFF else Path(chosen).expanduser()
    workshop = WORKSHOP.resolve()
    here = (cwd or Path.cwd()).resolve()
    if here == workshop or workshop in here.parents:
        folder = workshop / "progress"
        return folder / f"{participant_id(folder, env)}.jsonl"
    data = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / DATA_FOLDER / "progress.jsonl"


def participant_id(folder: Path, env: Mapping[str, str] | None = None) -> str:
    """`LABKIT_PARTICIPANT`, else the name kept in `folder`/participant.txt, made once (the
    login name and a random suffix, so two laptops with the same login stay apart)."""
    env = os.environ if env is None else env
    given = _safe_name(env.get(PARTICIPANT_VARIABLE, ""))
    if given:
        return given
    path = folder / NAME_FILE
    kept = _kept_name(path)
    if kept:
        return kept
    try:
        login = _safe_name(getpass.getuser()) or "participant"
    except (OSError, KeyError, ImportError):  # no login name in some containers
        login = "participant"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{NAME_FILE}.{secrets.token_hex(4)}.tmp"
    replace_file(tmp, f"{login}-{secrets.token_hex(2)}\n")
    try:
        os.link(tmp, path)  # made whole or not at all; a second kernel racing here reads ours
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links (a FAT stick)
        if not path.exists():
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return _kept_name(path) or login


def _kept_name(path: Path) -> str:
    try:
        return _safe_name(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ""


# --- writing -----------------------------------------------------------------------------------


def append_event(path: Path, event: Event) -> None:
    """Append `event` as one line with one write (append mode: kernels sharing the file never
    interleave); a line a crash cut short is first ended, so this one starts whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    check_target(path)  # a link planted there would append somewhere else
    data = (event.line() + "\n").encode("utf-8")
    if _ends_unfinished(path):
        data = b"\n" + data
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o666)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _ends_unfinished(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


_warned: list[str] = []


def record(
    exercise: str,
    kind: Kind,
    status: str,
    hint_level: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Path | None:
    """Append one event to this participant's progress file; the file, or None if recording is
    off or failed. A failure is a warning, once per process: it must never stop a check."""
    try:
        path = progress_path(env)
        if path is None:
            return None
        who = participant_id(path.parent, env)
        append_event(path, Event(who, exercise, kind, status, hint_level, _now()))
        return path
    except (OSError, ValueError) as exc:  # ValueError: a link planted there, a NUL in the path
        if not _warned:
            _warned.append(str(exc))
            warnings.warn(
                f"progress not recorded ({exc}); checks work as before. Set {PATH_VARIABLE} "
                "to a writable file, or to off",
                ProgressWarning,
                stacklevel=3,
            )
        return None


def _now() -> datetime:
    return datetime.now(UTC)


P = ParamSpec("P")
R = TypeVar("R")


def recorded(kind: Kind) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator for `Exercise.check` / `hint` / `solution`: record what the call said (a hint
    with its level, if the exercise has that hint), then return it unchanged."""

    def wrap(method: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            feedback = method(*args, **kwargs)
            exercise: Any = args[0]
            level = None
            if kind == "hint":
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                level = bound.arguments.get("level")
                if type(level) is not int or not 1 <= level <= len(exercise.hints):
                    return feedback  # "there are 3 hints": no hint was given
            record(exercise.name, kind, str(getattr(feedback, "status", kind)), level)
            return feedback

        return wrapper

    return wrap


# --- reading -----------------------------------------------------------------------------------


def read_events(path: Path) -> list[Event]:
    """The events of one progress file. A line cut short (by a crash mid-write) is skipped with
    a `ProgressWarning`; any other bad line is a `ProgressFileError` naming file and line."""
    path = Path(path)
    lines = path.read_bytes().split(b"\n")
    events = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            last = number == len(lines)  # no newline after it: the write never finished
            if last or not raw.rstrip().endswith(b"}"):
                warnings.warn(
                    f"{path}:{number}: skipped a line cut short (a write a crash interrupted)",
                    ProgressWarning,
                    stacklevel=2,
                )
                continue
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
            raise ProgressFileError(f"{path}:{number}: not a JSON line ({reason})") from None
        try:
            events.append(event_of(doc))
        except ValueError as exc:
            raise ProgressFileError(f"{path}:{number}: {exc}") from None
    return events


def event_of(doc: Any) -> Event:
    """An `Event` from one decoded line; `ValueError` naming the first field that is wrong."""
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object, got {type(doc).__name__}")
    names = [f.name for f in fields(Event)]
    for name in doc:
        if name not in names:
            raise ValueError(f"unknown field {name!r} (fields: {', '.join(names)})")
    for name in names:
        if name not in doc:
            raise ValueError(f"missing field {name!r}")
    for name in ("participant", "exercise", "status"):
        if not isinstance(doc[name], str) or not doc[name].strip():
            raise ValueError(f"{name}: expected non-empty text, got {doc[name]!r}")
    if doc["kind"] not in KINDS:
        raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {doc['kind']!r}")
    level = doc["hint_level"]
    if doc["kind"] == "hint":
        if type(level) is not int or level < 1:
            raise ValueError(f"hint_level: expected a whole number from 1, got {level!r}")
    elif level is not None:
        raise ValueError(f"hint_level: expected null for a {doc['kind']}, got {level!r}")
    return Event(
        doc["participant"], doc["exercise"], doc["kind"], doc["status"], level, _stamp(doc["at"])
    )


def _stamp(value: Any) -> datetime:
    try:
        at = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise ValueError(f"at: expected an ISO 8601 time with its UTC offset, got {value!r}")
    return at.astimezone(UTC)


def progress_files(folder: Path) -> list[Path]:
    """The progress files (`*.jsonl`) in `folder` and its subfolders, in name order."""
    return sorted(p for p in Path(folder).rglob("*.jsonl") if p.is_file())


def gather(folder: Path) -> list[Event]:
    """Every event of every progress file in `folder` (one per participant, as collected)."""
    return [event for path in progress_files(folder) for event in read_events(path)]


# --- where each participant stands -------------------------------------------------------------


@dataclass(frozen=True)
class Standing:
    """One participant on one exercise, counted up to the first ✓ (later re-runs add nothing):
    attempts (answers checked; a blank ____ is none), distinct hints asked, whether the solution
    was shown, and the minutes from the first attempt, hint or solution to the ✓. One CSV row."""

    participant: str
    exercise: str
    state: State
    attempts: int
    hints: int
    solution_seen: bool
    minutes_to_solve: float | None


def standings(events: Iterable[Event]) -> list[Standing]:
    """Every participant on every exercise anyone reached ("not started" where they have not),
    exercises in the order the room reached them, participants in name order."""
    events = sorted(events, key=lambda e: e.at)
    people = sorted({e.participant for e in events})
    order = _exercise_order(events)
    by_pair: dict[tuple[str, str], list[Event]] = {}
    for e in events:
        by_pair.setdefault((e.participant, e.exercise), []).append(e)
    return [_standing(p, x, by_pair.get((p, x), [])) for x in order for p in people]


def _exercise_order(events: Sequence[Event]) -> list[str]:
    """Exercises by the median time participants first reached them (the notebooks' order,
    whatever the names), then by name."""
    first: dict[str, dict[str, datetime]] = {}
    for e in events:
        first.setdefault(e.exercise, {}).setdefault(e.participant, e.at)
    when = {x: statistics.median(t.timestamp() for t in ts.values()) for x, ts in first.items()}
    return sorted(when, key=lambda x: (when[x], x))


def _standing(participant: str, exercise: str, events: Sequence[Event]) -> Standing:
    solved_at = next((e.at for e in events if e.status == "correct"), None)
    counted = [e for e in events if solved_at is None or e.at <= solved_at]
    started = [e for e in counted if e.kind != "check" or e.status in TRIED]
    attempts = sum(1 for e in counted if e.kind == "check" and e.status in TRIED)
    hints = len({e.hint_level for e in counted if e.kind == "hint"})
    seen = any(e.kind == "solution" for e in counted)
    state: State = "solved" if solved_at else "trying" if started else "not started"
    minutes = None
    if solved_at is not None:
        minutes = round((solved_at - started[0].at).total_seconds() / 60, 2)
    return Standing(participant, exercise, state, attempts, hints, seen, minutes)


@dataclass(frozen=True)
class ExerciseRoom:
    """The room on one exercise: how many solved, are still trying or have not started; the
    median attempts to ✓ (of those who solved), attempts so far (of those still trying), hints
    (of everyone who started) and minutes to ✓; how many were shown the solution."""

    exercise: str
    solved: int
    trying: int
    not_started: int
    attempts_to_solve: float | None
    attempts_so_far: float | None
    hints: float | None
    solutions_seen: int
    minutes_to_solve: float | None


def room(rows: Iterable[Standing]) -> list[ExerciseRoom]:
    """One `ExerciseRoom` per exercise of `rows`, in their order."""
    by_exercise: dict[str, list[Standing]] = {}
    for row in rows:
        by_exercise.setdefault(row.exercise, []).append(row)
    return [_exercise_room(x, group) for x, group in by_exercise.items()]


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _exercise_room(exercise: str, rows: Sequence[Standing]) -> ExerciseRoom:
    solved = [r for r in rows if r.state == "solved"]
    trying = [r for r in rows if r.state == "trying"]
    return ExerciseRoom(
        exercise=exercise,
        solved=len(solved),
        trying=len(trying),
        not_started=sum(1 for r in rows if r.state == "not started"),
        attempts_to_solve=_median([r.attempts for r in solved]),
        attempts_so_far=_median([r.attempts for r in trying]),
        hints=_median([r.hints for r in solved + trying]),
        solutions_seen=sum(1 for r in rows if r.solution_seen),
        minutes_to_solve=_median(
            [r.minutes_to_solve for r in solved if r.minutes_to_solve is not None]
        ),
    )


_HEAD = ("exercise", "solved", "trying", "not started", "attempts to ✓", "attempts so far",
         "hints", "saw solution", "min to ✓")  # fmt: skip


def table_text(rooms: Sequence[ExerciseRoom]) -> str:
    """The room as a plain-text table, one exercise a line (medians; '-' where nobody counts)."""

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:g}"

    body = [
        (r.exercise, str(r.solved), str(r.trying), str(r.not_started), num(r.attempts_to_solve),
         num(r.attempts_so_far), num(r.hints), str(r.solutions_seen), num(r.minutes_to_solve))
        for r in rooms
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in [_HEAD, *body]) for i in range(len(_HEAD))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [_HEAD, *body]
    ]
    return "\n".join(line.rstrip() for line in lines)


# --- the CSV a course tool reads ---------------------------------------------------------------

CSV_COLUMNS = tuple(f.name for f in fields(Standing))


def csv_text(rows: Iterable[Standing]) -> str:
    """`rows` as CSV: a header of `CSV_COLUMNS`, one participant and exercise a line, booleans
    as true/false, a missing number as an empty cell."""
    lines: list[list[str]] = [list(CSV_COLUMNS)]
    for r in rows:
        minutes = "" if r.minutes_to_solve is None else f"{r.minutes_to_solve:g}"
        seen = "true" if r.solution_seen else "false"
        lines.append(
            [r.participant, r.exercise, r.state, str(r.attempts), str(r.hints), seen, minutes]
        )
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(lines)
    return out.getvalue()


def write_csv(path: Path, rows: Iterable[Standing]) -> Path:
    """Write the CSV (`csv_text`) to `path`, beside and renamed (`labkit.files`)."""
    replace_file(Path(path), csv_text(rows))
    return Path(path)


def read_csv(path: Path) -> list[Standing]:
    """The rows of a CSV `write_csv` wrote (what a course tool would read back)."""
    with Path(path).open(newline="", encoding="utf-8") as f:
        return [_standing_of(row) for row in _rows(csv.DictReader(f))]


def _rows(reader: csv.DictReader[str]) -> Iterator[dict[str, str]]:
    if tuple(reader.fieldnames or ()) != CSV_COLUMNS:
        raise ValueError(f"expected the columns {', '.join(CSV_COLUMNS)}")
    yield from reader


def _standing_of(row: dict[str, str]) -> Standing:
    minutes = row["minutes_to_solve"]
    if row["state"] not in get_args(State):
        raise ValueError(
            f"state: expected one of {', '.join(get_args(State))}, got {row['state']!r}"
        )
    return Standing(
        participant=row["participant"],
        exercise=row["exercise"],
        state=cast(State, row["state"]),
        attempts=int(row["attempts"]),
        hints=int(row["hints"]),
        solution_seen=row["solution_seen"] == "true",
        minutes_to_solve=float(minutes) if minutes else None,
    )
