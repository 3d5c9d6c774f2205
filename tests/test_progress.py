"""A view of the room: each check, hint and solution is one line in a local progress file, and
`python -m labkit progress DIR` turns a folder of them into a table, a CSV and a figure."""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.exercises import progress as pr
from labkit.exercises.kit import BLANK, Exercise, Wrong
from labkit.paths import REPO

T0 = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
EXERCISES = ("MAX's orphans", 'Fool last-write-wins, "skewed" clocks', "The guarded write")


def _event(who: str, ex: str, kind: str, status: str, level: int | None, minute: float):
    return pr.Event(who, ex, kind, status, level, T0 + timedelta(minutes=minute))


@dataclass
class _Script:
    """What one synthetic participant did on one exercise, and what the table must count."""

    events: list[pr.Event]
    expected: pr.Standing


def _script(rng: random.Random, who: str, ex: str, start: float) -> _Script:
    """A seeded participant on one exercise: not started, still trying, or solved, with wrong
    tries, hints, maybe the solution, blank runs before and re-runs after the ✓ (not counted)."""
    state = rng.choice(["solved", "solved", "trying", "not started"])
    events = [_event(who, ex, "check", "not_attempted", None, start)] if rng.random() < 0.7 else []
    if state == "not started":
        return _Script(events, pr.Standing(who, ex, "not started", 0, 0, False, None))
    first = start + rng.randint(1, 5)
    t, wrong, levels = first, rng.randint(0, 6), sorted(rng.sample([1, 2, 3], rng.randint(0, 3)))
    seen = rng.random() < 0.2
    for i in range(wrong):
        events.append(_event(who, ex, "check", "incorrect", None, t))
        t += rng.randint(1, 4)
        if i < len(levels):
            events.append(_event(who, ex, "hint", "hint", levels[i], t))
            events.append(_event(who, ex, "hint", "hint", levels[i], t + 0.5))  # asked twice
            t += 1
    for level in levels[wrong:]:
        events.append(_event(who, ex, "hint", "hint", level, t))
        t += 1
    if seen:
        events.append(_event(who, ex, "solution", "solution", None, t))
        t += 1
    if wrong == 0 and not levels and not seen and state == "trying":
        events.append(_event(who, ex, "check", "incorrect", None, t))
        wrong = 1
    if state == "trying":
        expected = pr.Standing(who, ex, "trying", wrong, len(levels), seen, None)
        return _Script(events, expected)
    events.append(_event(who, ex, "check", "correct", None, t))
    after = t + 2  # Run All again, a hint out of curiosity: after the ✓, so not counted
    events.append(_event(who, ex, "check", "incorrect", None, after))
    events.append(_event(who, ex, "hint", "hint", 3, after + 1))
    events.append(_event(who, ex, "solution", "solution", None, after + 2))
    minutes = round(t - first, 2)  # the first try, hint or solution was at `first`
    expected = pr.Standing(who, ex, "solved", wrong + 1, len(levels), seen, minutes)
    return _Script(events, expected)


def synthetic_room(folder: Path, seed: int, people: int = 9) -> list[pr.Standing]:
    """Write one progress file per participant into `folder` (a seeded room working through
    EXERCISES in order); return the standings they must produce, in the table's order."""
    rng = random.Random(seed)
    expected: dict[tuple[str, str], pr.Standing] = {}
    for p in range(people):
        who = f"p{p:02d}-{rng.randrange(16**4):04x}"
        lines = []
        for x, ex in enumerate(EXERCISES):
            script = _script(rng, who, ex, start=60.0 * x + p)
            if not script.events:  # a Run All's blank check, so every participant is seen
                script.events.append(_event(who, ex, "check", "not_attempted", None, 60.0 * x))
            lines += [e.line() for e in script.events]
            expected[who, ex] = script.expected
        (folder / f"{who}.jsonl").write_text("".join(f"{line}\n" for line in lines))
    people_sorted = sorted({who for who, _ in expected})
    return [expected[who, ex] for ex in EXERCISES for who in people_sorted]


def test_a_seeded_room_gives_each_participant_the_counts_their_events_imply(tmp_path) -> None:
    for seed in range(5):
        folder = tmp_path / f"room{seed}"
        folder.mkdir()
        expected = synthetic_room(folder, seed)
        assert pr.standings(pr.gather(folder)) == expected
        states = {row.state for row in expected}
        assert states == {"solved", "trying", "not started"}, "the seed covers every state"


def test_the_table_counts_and_medians_of_known_events() -> None:
    a, b, c, d = "ana", "bo", "cy", "dee"
    x, y = "Predict the frontier", "The guarded write"
    events = [
        # ana: blank run, wrong, hint 1, hint 1 again, hint 2, right at minute 12 (first try at 2)
        _event(a, x, "check", "not_attempted", None, 0),
        _event(a, x, "check", "incorrect", None, 2),
        _event(a, x, "hint", "hint", 1, 3),
        _event(a, x, "hint", "hint", 1, 4),
        _event(a, x, "hint", "hint", 2, 5),
        _event(a, x, "check", "correct", None, 12),
        _event(a, x, "check", "incorrect", None, 13),  # after the ✓: not counted
        # bo: right at the first try (0 minutes); three wrong tries on y, then the solution
        _event(b, x, "check", "correct", None, 6),
        _event(b, y, "check", "incorrect", None, 20),
        _event(b, y, "check", "incorrect", None, 21),
        _event(b, y, "check", "incorrect", None, 22),
        _event(b, y, "solution", "solution", None, 23),
        # cy: only blank runs (Run All): not started on both
        _event(c, x, "check", "not_attempted", None, 1),
        _event(c, y, "check", "not_attempted", None, 1.5),
        # dee: hint 1 on x, then wrong, wrong, right at minute 30 (first event at 10)
        _event(d, x, "hint", "hint", 1, 10),
        _event(d, x, "check", "incorrect", None, 11),
        _event(d, x, "check", "incorrect", None, 12),
        _event(d, x, "check", "correct", None, 30),
        _event(d, y, "check", "incorrect", None, 31),
    ]
    rooms = pr.room(pr.standings(reversed(events)))  # the file order does not matter
    assert [r.exercise for r in rooms] == [x, y]
    first, second = rooms
    assert (first.solved, first.trying, first.not_started) == (3, 0, 1)
    assert first.attempts_to_solve == 2  # ana 2, bo 1, dee 3
    assert first.attempts_so_far is None
    assert first.hints == 1  # ana 2, bo 0, dee 1
    assert first.minutes_to_solve == 10  # ana 10, bo 0, dee 20
    assert first.solutions_seen == 0
    assert (second.solved, second.trying, second.not_started) == (0, 2, 2)
    assert second.attempts_so_far == 2  # bo 3, dee 1
    assert second.attempts_to_solve is None and second.minutes_to_solve is None
    assert second.solutions_seen == 1 and second.hints == 0
    text = pr.table_text(rooms)
    assert text.splitlines()[1].split()[-8:] == ["3", "0", "1", "2", "-", "1", "0", "10"]
    assert text.splitlines()[2].split()[-8:] == ["0", "2", "2", "-", "2", "0", "1", "-"]


def test_the_csv_round_trips(tmp_path) -> None:
    folder = tmp_path / "room"
    folder.mkdir()
    synthetic_room(folder, seed=7)
    rows = pr.standings(pr.gather(folder))
    assert any(r.minutes_to_solve for r in rows) and any(r.minutes_to_solve is None for r in rows)
    path = pr.write_csv(tmp_path / "room.csv", rows)
    assert pr.read_csv(path) == rows
    assert path.read_text().splitlines()[0] == ",".join(pr.CSV_COLUMNS)


def test_a_torn_line_is_skipped_with_a_warning_and_the_next_record_starts_whole(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    good = _event("ana", "MAX's orphans", "check", "incorrect", None, 1)
    path.write_text(good.line() + "\n" + good.line()[:25])  # a crash mid-write
    with pytest.warns(pr.ProgressWarning, match=r"p\.jsonl:2: skipped a line cut short"):
        assert pr.read_events(path) == [good]
    later = _event("ana", "MAX's orphans", "check", "correct", None, 5)
    pr.append_event(path, later)  # ends the torn line first: the new record is whole
    with pytest.warns(pr.ProgressWarning, match=r"p\.jsonl:2:"):
        assert pr.read_events(path) == [good, later]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"participant":"a","exercise":"x","kind":"peek","status":"s","hint_level":null,'
         '"at":"2026-12-08T09:00:00+00:00"}', "kind: expected one of check, hint, solution"),
        ('{"participant":"a","exercise":"x","kind":"hint","status":"hint","hint_level":0,'
         '"at":"2026-12-08T09:00:00+00:00"}', "hint_level: expected a whole number from 1"),
        ('{"participant":"a","exercise":"x","kind":"check","status":"correct","hint_level":null,'
         '"at":"yesterday"}', "at: expected an ISO 8601 time"),
        ('{"participant":"a","exercise":"x","kind":"check","status":"correct"}',
         "missing field 'hint_level'"),
        ('{"participant":"a", "exercise": x}', "not a JSON line"),
    ],
)  # fmt: skip
def test_a_bad_entry_is_one_line_naming_the_file_and_line(
    tmp_path, capsys, line: str, problem: str
) -> None:
    good = _event("ana", "x", "check", "correct", None, 1).line()
    path = tmp_path / "ana.jsonl"
    path.write_text(f"{good}\n{line}\n{good}\n")
    with pytest.raises(pr.ProgressFileError, match=f"ana.jsonl:2: {problem}"):
        pr.read_events(path)
    assert main(["progress", str(tmp_path), "--figure", str(tmp_path / "r.svg")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:2: {problem}" in err
    assert not (tmp_path / "r.svg").exists()


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_the_command_prints_the_table_writes_the_csv_and_draws_the_room(
    tmp_path, capsys, fmt: str
) -> None:
    folder = tmp_path / "collected"
    folder.mkdir()
    expected = synthetic_room(folder, seed=3)
    (folder / "late.jsonl").write_text(_event("zed", EXERCISES[0], "check", "correct", None, 1)
                                       .line()[:40])  # fmt: skip
    csv_path, figure = tmp_path / "room.csv", tmp_path / f"room.v1.{fmt}"
    assert main(["progress", str(folder), "--csv", str(csv_path), "--figure", str(figure)]) == 0
    out, err = capsys.readouterr()
    assert "late.jsonl:1: skipped a line cut short" in err
    assert out.startswith("9 participants, 10 files,")
    rooms = pr.room(expected)
    for room, line in zip(rooms, out.split("\n\n")[1].splitlines()[1:], strict=True):
        assert line.startswith(room.exercise)
        counts = [int(c) for c in line[len(room.exercise) :].split()[:3]]
        assert counts == [room.solved, room.trying, room.not_started]
    assert pr.read_csv(csv_path) == expected
    head = figure.read_bytes()[:8]
    assert head.startswith(b"\x89PNG") if fmt == "png" else b"<svg" in figure.read_bytes()[:400]
    assert figure.stat().st_size > 5_000
    assert main(["progress", str(folder), "--figure", str(tmp_path / "room.pdf")]) == 2
    assert main(["progress", str(tmp_path / "missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["progress", str(tmp_path / "empty")]) == 2


def _exercise() -> Exercise:
    def checker(answer: object) -> str | None:
        if answer != 42:
            raise Wrong("not the answer")
        return None

    return Exercise("Toy", "What is it?", checker, ("nudge", "method", "gap"), "42")


def test_checks_hints_and_solutions_are_recorded_in_order(tmp_path, monkeypatch) -> None:
    path = tmp_path / "mine.jsonl"
    monkeypatch.setenv(pr.PATH_VARIABLE, str(path))
    monkeypatch.setenv(pr.PARTICIPANT_VARIABLE, "Ana María/1")
    ex = _exercise()
    assert ex.check(BLANK).status == "not_attempted"
    assert ex.check(41).status == "incorrect"
    ex.hint(2)
    ex.hint(9)  # "there are 3 hints": nothing was given, nothing recorded
    ex.solution()
    assert ex.check(42).passed
    events = pr.read_events(path)
    assert [(e.kind, e.status, e.hint_level) for e in events] == [
        ("check", "not_attempted", None),
        ("check", "incorrect", None),
        ("hint", "hint", 2),
        ("solution", "solution", None),
        ("check", "correct", None),
    ]
    assert {e.participant for e in events} == {"Ana-María-1"}
    assert {e.exercise for e in events} == {"Toy"}
    assert all(a.at <= b.at for a, b in zip(events, events[1:], strict=False))


def test_off_records_nothing(tmp_path, monkeypatch) -> None:
    for off in ("", "off", "OFF"):
        monkeypatch.setenv(pr.PATH_VARIABLE, off)
        assert pr.progress_path() is None
        assert _exercise().check(42).passed
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_is_one_warning_and_the_feedback_still_shows(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(pr.PATH_VARIABLE, str(blocker / "progress.jsonl"))  # its folder is a file
    monkeypatch.setattr(pr, "_warned", [])
    ex = _exercise()
    with pytest.warns(pr.ProgressWarning, match="progress not recorded") as caught:
        assert ex.check(41).status == "incorrect"
        assert ex.check(42).passed
        assert ex.hint(1).status == "hint"
    assert len([w for w in caught if w.category is pr.ProgressWarning]) == 1


def test_the_file_is_in_the_workshop_folder_inside_it_else_in_the_data_folder(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.delenv(pr.PATH_VARIABLE)
    monkeypatch.delenv(pr.PARTICIPANT_VARIABLE, raising=False)
    shop = tmp_path / "workshop"
    (shop / "exercises" / "student").mkdir(parents=True)
    monkeypatch.setattr(pr, "WORKSHOP", shop)
    monkeypatch.chdir(shop / "exercises" / "student")
    path = pr.progress_path()
    assert path is not None and path.parent == (shop / "progress").resolve()
    name = (shop / "progress" / pr.NAME_FILE).read_text().strip()
    assert path.name == f"{name}.jsonl" and len(name) > 5
    assert pr.progress_path() == path  # the name is made once, then kept
    assert _exercise().check(42).passed and pr.read_events(path)[0].participant == name
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert pr.progress_path() == tmp_path / "data" / pr.DATA_FOLDER / "progress.jsonl"


def test_this_test_session_records_outside_the_repository_and_home() -> None:
    """conftest points LABKIT_PROGRESS at a temporary file; notebook kernels inherit it."""
    path = pr.progress_path()
    assert path is not None
    for kept in (REPO, Path.home()):
        assert not path.resolve().is_relative_to(kept.resolve())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pr.record("Toy", "check", "correct") == path
