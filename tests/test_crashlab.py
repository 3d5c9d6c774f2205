"""What notebook 06 teaches about real kills, asserted: nothing half-written, nothing lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labkit.ballot import WatermarkLoop
from labkit.catalog import crash_child, crashlab
from labkit.catalog import versions as catalog
from labkit.catalog.versions import CatalogReader, RewindError
from labkit.db import connect


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.db"
    WatermarkLoop(connect(path)).conn.close()
    return path


def test_kill_after_reserve_leaves_the_ballot_in_flight(db: Path) -> None:
    killed = crashlab.kill_loop(db, "after_reserve")
    assert killed.killed_outright and killed.ballot is not None
    loop = WatermarkLoop(connect(db))
    assert loop.inflight() == [killed.ballot]
    assert loop.apply(killed.response(["late"])).committed  # the late answer still commits
    assert catalog.verify(loop.conn) == 1


def test_kill_mid_commit_leaves_no_half_written_version(db: Path) -> None:
    killed = crashlab.kill_loop(db, "mid_commit", tools=["search"])
    assert killed.killed_outright
    loop = WatermarkLoop(connect(db))
    assert loop.head_version() == 0 and catalog.verify(loop.conn) == 0
    assert loop.inflight() == [killed.ballot]
    answer = killed.response(["search"])
    outcomes = [loop.apply(answer), loop.apply(answer)]  # at-least-once redelivery
    assert [o.reason for o in outcomes] == [None, "unknown_ballot"]
    assert catalog.verify(loop.conn) == 1


def test_naive_restore_is_caught_by_the_reader(db: Path, tmp_path: Path) -> None:
    backup = crashlab.snapshot(db, tmp_path / "backup.db")
    killed = crashlab.kill_loop(db, "after_reserve")
    loop = WatermarkLoop(connect(db))
    loop.apply(killed.response(["v1"]))
    state = tmp_path / "reader.db"
    assert CatalogReader(connect(db), "r", state=connect(state)).poll() == 1
    loop.conn.close()
    crashlab.restore_naively(backup, db)
    with pytest.raises(RewindError):
        CatalogReader(connect(db), "r", state=connect(state)).poll()


def test_unknown_kill_point_is_named(db: Path) -> None:
    with pytest.raises(ValueError, match="'sometime'"):
        crashlab.kill_loop(db, "sometime")


@pytest.mark.parametrize("point", crashlab.POINTS)
def test_the_child_is_a_module_that_never_commits_past_its_point(db: Path, point: str) -> None:
    """`python -m labkit.catalog.crash_child` with nobody to kill it stops and commits nothing."""
    proc = subprocess.run(
        [sys.executable, "-m", "labkit.catalog.crash_child", str(db), point, "1", '["never"]'],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == crash_child.NOT_KILLED, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"at {point}"
    loop = WatermarkLoop(connect(db))
    assert loop.head_version() == 0 and [b.ballot_id for b in loop.inflight()] == [1]


def test_a_child_that_fails_early_is_reported_with_its_error(tmp_path: Path) -> None:
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("plain text, not SQLite\n" * 100)
    one_line = r"notes\.txt did not reach 'after_reserve' \(exit 1\): .*notes\.txt: file is not a"
    with pytest.raises(RuntimeError, match=one_line + " database$"):
        crashlab.kill_loop(not_a_db, "after_reserve")
