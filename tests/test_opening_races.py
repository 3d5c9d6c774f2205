"""Opening a SQLite file that another process is creating at that very moment (issue 35): the
check for a file emptied from outside never mistakes a creation for one, while a file really
emptied behind its log is still refused.

A creator passes through these states, each under SQLite's own locks: the file made empty, its
first page written (the switch to WAL), an empty log opened, commits in the log. `connect`
looks at the files without a lock (SQLite's first lock on an empty file deletes the log), so
the deterministic tests here put every pair of those states under its two looks; the stress
test opens fresh files from many processes at once under CPU load, as notebook 08's workers do.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from labkit import db
from labkit.ballot import WatermarkLoop


class Creator:
    """Another connection creating the store at `path`, one state at a time (as another process
    would, under SQLite's locks); `stage` is how far it got."""

    STAGES = ("nothing", "empty file", "first page", "empty log", "commits in the log")

    def __init__(self, path: Path) -> None:
        self.path, self.stage, self.conn = path, 0, None

    def advance(self, to: int) -> None:
        while self.stage < to:
            self.stage += 1
            if self.stage == 1:
                self.conn = sqlite3.connect(self.path, isolation_level=None)
            elif self.stage == 2:
                self.conn.execute("PRAGMA journal_mode = WAL").fetchall()
            elif self.stage == 3:
                self.conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
            else:
                WatermarkLoop(self.conn)

    def sizes(self) -> tuple[int | None, int | None]:
        return tuple(_size(Path(f"{self.path}{s}")) for s in ("", "-wal"))  # type: ignore[return-value]


def _size(path: Path) -> int | None:
    return path.stat().st_size if path.exists() else None


@pytest.fixture
def between_looks(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[str]]:
    """`between_looks(path, event)`: run `event` right after the first look `connect` takes at
    `path` or its log (a stat), whether that look found the file or not; returns the files
    looked at, in order."""
    real_stat = os.stat
    looked: list[str] = []

    def arm(path: Path, event: Callable[[], None]) -> list[str]:
        watched = {str(path), f"{path}-wal"}

        def stat(target: object, *args: object, **kwargs: object) -> os.stat_result:
            name = os.fspath(target) if isinstance(target, (str, os.PathLike)) else None
            first = name in watched and not looked
            if name in watched:
                looked.append(name)
            try:
                return real_stat(target, *args, **kwargs)  # type: ignore[arg-type]
            finally:
                if first:
                    event()

        monkeypatch.setattr(os, "stat", stat)  # undone by monkeypatch when the test ends
        return looked

    return arm


PAIRS = [(a, b) for a in range(len(Creator.STAGES)) for b in range(a, len(Creator.STAGES))]


@pytest.mark.parametrize(
    ("before", "after"),
    PAIRS,
    ids=[f"{Creator.STAGES[a]}->{Creator.STAGES[b]}" for a, b in PAIRS],
)
def test_a_creation_seen_mid_way_is_never_refused(
    tmp_path: Path, between_looks: Callable[..., list[str]], before: int, after: int
) -> None:
    path = tmp_path / "fresh.db"
    creator = Creator(path)
    creator.advance(before)
    looked = between_looks(path, lambda: creator.advance(after))
    conn = db.connect(path)  # the creator moves from `before` to `after` between its looks
    assert looked, "connect no longer looks at the files with os.stat: update this test"
    creator.advance(len(Creator.STAGES) - 1)
    loop = WatermarkLoop(conn)
    b = loop.reserve()
    assert loop.apply(b.answer(["t"])).committed
    assert WatermarkLoop(creator.conn).head_version() == 1  # one store, both see the commit


def test_a_creator_writes_the_first_page_before_its_log_exists(tmp_path: Path) -> None:
    """What makes the check exact, as SQLite does it: once the log exists the file is never
    empty, so a log seen with commits and then an empty file means an emptying from outside.
    (Looked at the other way round, the file empty at stage 1 and the log with commits at
    stage 4 was the refusal of issue 35.)"""
    creator = Creator(tmp_path / "fresh.db")
    seen = []
    for stage in range(len(Creator.STAGES)):
        creator.advance(stage)
        seen.append(creator.sizes())
    assert seen[:2] == [(None, None), (0, None)]
    assert all(main > 0 for main, _ in seen[2:])
    assert [wal for _, wal in seen[2:4]] == [None, 0] and seen[4][1] > 32


def _store_with_commits(path: Path) -> WatermarkLoop:
    loop = WatermarkLoop(db.connect(path))
    for _ in range(3):
        b = loop.reserve()
        assert loop.apply(b.answer(["t"])).committed
    return loop


@pytest.mark.parametrize("when", ["before the looks", "between the looks"])
def test_a_file_emptied_behind_its_log_is_still_refused(
    tmp_path: Path, between_looks: Callable[..., list[str]], when: str
) -> None:
    path = tmp_path / "c.db"
    holder = _store_with_commits(path)  # keeps the log, with its commits, open
    wal = Path(f"{path}-wal").stat().st_size
    assert wal > 32
    if when == "before the looks":
        os.truncate(path, 0)
    else:
        between_looks(path, lambda: os.truncate(path, 0))
    with pytest.raises(db.DatabaseReplacedError, match="empty but its write-ahead log") as info:
        db.connect(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert Path(f"{path}-wal").stat().st_size == wal  # the log is untouched, for a rescue
    holder.conn.close()


def test_a_log_deleted_before_the_loop_opens_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    conn = db.connect(path)
    conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()  # the log is open now
    Path(f"{path}-wal").unlink()
    with pytest.raises(db.WalLostError, match=r"c\.db-wal: the write-ahead log .* is gone"):
        WatermarkLoop(conn)


# --- many processes, one fresh file, under load ----------------------------------------------

OPENERS, ROUNDS = 8, 250  # 2,000 opens beside a busy loop


def _hog(stop: object) -> None:
    """Keep one core busy until `stop` is set, so the openers are preempted at random points;
    at the lowest priority, so on a machine already busy (the other workers of `make test`) it
    takes little of it."""
    if hasattr(os, "nice"):
        os.nice(19)
    x = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        for i in range(50_000):
            x += i


def _open_fresh_files(directory: str, barrier: object, errors: object) -> None:
    """Each round, open the same fresh store as every other opener at once."""
    for r in range(ROUNDS):
        barrier.wait()  # type: ignore[attr-defined]
        try:
            WatermarkLoop(db.connect(Path(directory) / f"round{r}.db")).conn.close()
        except Exception as exc:  # reported to the parent, which fails the test with it
            errors.put(f"round {r}: {type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


@pytest.mark.slow
def test_many_processes_opening_fresh_files_under_load_are_never_refused(
    tmp_path: Path,
) -> None:
    """2,000 opens (8 processes at once on each of 250 fresh files) beside a busy loop. Before
    the fix, 1 open in about 3,000 was refused under load, so a failure here is by chance;
    `test_a_creation_seen_mid_way_is_never_refused` puts the refused case under the check
    every time."""
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    stop, barrier, errors = ctx.Event(), ctx.Barrier(OPENERS, timeout=120), ctx.Queue()
    hogs = [ctx.Process(target=_hog, args=(stop,))]
    openers = [
        ctx.Process(target=_open_fresh_files, args=(str(tmp_path), barrier, errors))
        for _ in range(OPENERS)
    ]
    try:
        for p in hogs + openers:
            p.start()
        for p in openers:
            p.join(240)
    finally:
        stop.set()
        for p in hogs + openers:
            p.join(10)
            if p.is_alive():
                p.kill()
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    assert [p.exitcode for p in openers] == [0] * OPENERS
    for r in range(ROUNDS):  # each file is one whole store: the genesis and the ballot counter
        conn = sqlite3.connect(tmp_path / f"round{r}.db")
        assert conn.execute("SELECT COUNT(*) FROM catalog_versions").fetchone()[0] == 1
        assert conn.execute("SELECT next_ballot FROM wm_store").fetchall() == [(1,)]
        conn.close()
