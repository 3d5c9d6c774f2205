"""Embedded servers start from a copy of one initialised data directory (`labkit.pg.template`):
a copy is a server of its own, the template never changes, and a template that is not one this
code finished, that others could change, or that lost files since is never trusted."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.pg import instance as pg
from labkit.pg import template as pg_template

pytestmark = pytest.mark.postgres


@pytest.fixture
def template_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "template"
    monkeypatch.setattr(pg_template, "template_dir", lambda: where)
    return where


@pytest.fixture(scope="module")
def one_made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A template this code made (initdb, a start, its mark), once for the module's tests that
    need one as a starting point rather than to watch it being made."""
    where = tmp_path_factory.mktemp("made") / "template"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pg_template, "template_dir", lambda: where)
        with pg.server():
            pass
    assert (where / pg_template.MARK).is_file()
    yield where


def _as_made(one_made: Path, template_at: Path) -> None:
    """Put a copy of `one_made` where the code looks (modes kept: a template is 0700)."""
    shutil.copytree(one_made, template_at, symlinks=True)
    template_at.chmod(one_made.stat().st_mode & 0o777)


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _count_rows(dsn: str) -> int:
    with pg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (a int)")
        conn.execute("INSERT INTO t VALUES (1)")
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])


def test_copies_are_servers_of_their_own_and_the_template_never_changes(template_at: Path) -> None:
    with pg.server() as first:
        assert (template_at / pg_template.MARK).is_file()
        before = _listing(template_at)
        with pg.server() as second:
            assert first != second
            assert _count_rows(first) == 1
            assert _count_rows(second) == 1  # the first server's table is not here
        assert _count_rows(first) == 2
    assert _listing(template_at) == before
    if hasattr(os, "geteuid"):  # as root too, only this user owns it (not the server's user)
        assert template_at.stat().st_uid == os.geteuid()
        assert all(p.stat().st_uid == os.geteuid() for p in template_at.rglob("*"))


def test_the_template_keeps_its_wal_in_one_megabyte_segments(one_made: Path) -> None:
    """A server start copies the template; initdb's one 16 MB WAL segment was most of it."""
    segments = [p for p in (one_made / "pg_wal").iterdir() if p.is_file()]
    assert segments and {p.stat().st_size for p in segments} == {2**20}
    total = sum(p.stat().st_size for p in one_made.rglob("*") if p.is_file())
    assert total < 30 * 2**20, total


def test_a_directory_others_can_write_is_left_alone_and_not_used(template_at: Path) -> None:
    template_at.mkdir()
    (template_at / pg_template.MARK).write_text("planted\n")
    template_at.chmod(0o777)
    with pg.server() as dsn:
        assert _count_rows(dsn) == 1
    assert sorted(p.name for p in template_at.iterdir()) == [pg_template.MARK]  # as found


def test_one_of_ours_that_lost_its_mark_is_made_again(template_at: Path) -> None:
    template_at.mkdir(mode=0o700)
    (template_at / "PG_VERSION").write_text("half a template\n")
    with pg.server() as dsn:
        assert _count_rows(dsn) == 1
    assert (template_at / pg_template.MARK).is_file()
    assert (template_at / "global" / "pg_control").is_file()


@pytest.mark.parametrize(
    "lost", ["PG_VERSION", "base/5/1259"], ids=["fails to start", "starts, cannot serve"]
)
def test_a_template_that_lost_files_is_discarded_and_the_start_still_works(
    template_at: Path, one_made: Path, lost: str
) -> None:
    _as_made(one_made, template_at)
    (template_at / lost).unlink()  # as a temp cleaner might
    with pg.server() as dsn:
        assert _count_rows(dsn) == 1
    assert not template_at.exists()  # discarded; the next start makes a new one


def test_a_template_owned_by_another_user_is_refused(
    template_at: Path, one_made: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as_made(one_made, template_at)
    assert pg_template.template(None) == template_at
    monkeypatch.setattr(pg_template, "_my_ids", lambda: (4242, 4242))
    assert pg_template.template(None) is None
