"""SQLite files changed from outside while a loop has them open: every change that would make
a reported commit disappear is refused before the write, in one line, and reports no commit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import db
from labkit.ballot import WatermarkLoop
from labkit.catalog import versions as catalog


def _loop_with_commits(path: Path, n: int) -> WatermarkLoop:
    loop = WatermarkLoop(db.connect(path))
    for _ in range(n):
        b = loop.reserve()
        assert loop.apply(b.answer(["t"])).committed
    return loop


def _refuses_the_next_commit(loop: WatermarkLoop, match: str) -> None:
    head = loop.head_version()
    with pytest.raises(db.DatabaseReplacedError, match=match) as info:
        b = loop.reserve()
        loop.apply(b.answer(["u"]))
    assert "\n" not in str(info.value)
    assert loop.head_version() == head  # nothing reported, nothing moved


def test_a_wal_file_deleted_while_open_stops_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    loop = _loop_with_commits(path, 3)
    Path(f"{path}-wal").unlink()
    _refuses_the_next_commit(loop, "write-ahead log was deleted")


def test_a_wal_file_replaced_while_open_stops_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    loop = _loop_with_commits(path, 3)
    wal = Path(f"{path}-wal")
    copy = tmp_path / "copy"
    copy.write_bytes(wal.read_bytes())
    os.replace(copy, wal)
    _refuses_the_next_commit(loop, "write-ahead log was replaced")


def test_a_catalog_emptied_while_open_stops_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    loop = _loop_with_commits(path, 3)
    os.truncate(path, 0)
    _refuses_the_next_commit(loop, "emptied after it was opened")


CHILD = """
import os, sys
from labkit import db
from labkit.ballot import Response, WatermarkLoop
loop = WatermarkLoop(db.connect(sys.argv[1]))
for _ in range(60):
    b = loop.reserve()
    loop.apply(b.answer(["t"]))
os._exit(0)  # like a kill: no checkpoint, the commits stay in the -wal file
"""


def test_a_catalog_emptied_after_a_crash_is_not_opened_as_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True, timeout=120)
    assert Path(f"{path}-wal").stat().st_size > 0
    os.truncate(path, 0)
    with pytest.raises(db.DatabaseReplacedError, match="emptied from outside"):
        WatermarkLoop(db.connect(path))
    assert Path(f"{path}-wal").stat().st_size > 0  # the log is still there for a rescue


def test_an_untouched_file_still_opens_and_commits(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    _loop_with_commits(path, 2).conn.close()
    loop = WatermarkLoop(db.connect(path))
    assert loop.head_version() == 2
    _loop_with_commits(path, 1)
    assert catalog.head(db.connect(path)) == 3


WAL_DELETED = """
import os, sys
from pathlib import Path
from labkit import db
from labkit.ballot import Response, WatermarkLoop
loop = WatermarkLoop(db.connect(sys.argv[1]))
for _ in range(5):
    b = loop.reserve()
    loop.apply(b.answer(["t"]))
Path(sys.argv[1] + "-wal").unlink()
try:
    loop.reserve()
except db.WalLostError:
    pass
os._exit(0)  # like a kill, right after the refusal
"""


def test_commits_reported_before_the_wal_was_deleted_survive_the_refusal(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    subprocess.run([sys.executable, "-c", WAL_DELETED, str(path)], check=True, timeout=120)
    assert catalog.head(db.connect(path)) == 5  # all five were reported, all five are there
