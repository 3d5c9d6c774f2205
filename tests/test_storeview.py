"""storeview reads what is on disk, read-only, and never splices an unknown table name."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.ballot import WatermarkLoop
from labkit.catalog import storeview
from labkit.db import connect


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    loop = WatermarkLoop(connect(path))
    b = loop.reserve()
    loop.apply(b.answer(["search"]))
    loop.reserve()  # left in flight, as a crash would leave it
    loop.conn.close()
    return path


def test_overview_counts_rows_per_table(db: Path) -> None:
    counts = storeview.overview(db).set_index("table")["rows"]
    assert counts["catalog_versions"] == 2 and counts["wm_ballots"] == 2
    assert counts["wm_responses"] == 1
    assert not any(name.startswith("sqlite_") for name in counts.index)


def test_table_shows_the_inflight_ballot(db: Path) -> None:
    ballots = storeview.table(db, "wm_ballots").set_index("ballot_id")["status"]
    assert ballots.to_dict() == {1: "committed", 2: "inflight"}


def test_reading_is_read_only(db: Path) -> None:
    before = db.read_bytes()
    storeview.overview(db)
    storeview.table(db, "catalog_versions")
    assert db.read_bytes() == before


def test_unknown_table_and_missing_file_are_named(db: Path, tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="no table .*wm_ballots"):
        storeview.table(db, "wm_ballots; DROP TABLE wm_ballots")
    with pytest.raises(FileNotFoundError, match="nope.db"):
        storeview.overview(tmp_path / "nope.db")


@pytest.mark.parametrize("name", ["run#1.db", "what?.db", "100%.db"])
def test_odd_file_names_open_that_file_read_only(db: Path, tmp_path: Path, name: str) -> None:
    odd = tmp_path / name
    odd.write_bytes(db.read_bytes())
    names = {p.name for p in tmp_path.iterdir()}
    assert storeview.table(odd, "wm_ballots")["status"].tolist() == ["committed", "inflight"]
    sidecars = {f"{name}-wal", f"{name}-shm"}  # WAL's own files of that same database
    assert {p.name for p in tmp_path.iterdir()} - sidecars == names  # no 'run', no 'what'
    assert odd.read_bytes() == db.read_bytes()


def test_uncut_shows_every_column_name_in_full(db: Path) -> None:
    frame = storeview.overview(db)
    widest = max(frame["columns"], key=len)
    assert len(widest) > 50 and widest not in repr(frame)  # pandas' default cuts it
    with storeview.uncut():
        assert widest in repr(frame) and widest in frame.to_html()
    assert widest not in repr(frame)  # the option does not leak out of the block
