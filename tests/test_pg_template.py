"""Embedded servers start from a copy of one initialised data directory (`instance._template`):
a copy is a server of its own, the template never changes, and a template that is not one this
code finished, or that lost files since, is never trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.pg import instance as pg

pytestmark = pytest.mark.postgres


@pytest.fixture
def template_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "template"
    monkeypatch.setattr(pg, "template_dir", lambda: where)
    return where


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
        assert (template_at / pg.TEMPLATE_MARK).is_file()
        before = _listing(template_at)
        with pg.server() as second:
            assert first != second
            assert _count_rows(first) == 1
            assert _count_rows(second) == 1  # the first server's table is not here
        assert _count_rows(first) == 2
    assert _listing(template_at) == before


def test_a_directory_without_the_mark_is_not_used(template_at: Path) -> None:
    template_at.mkdir(mode=0o700)
    (template_at / "PG_VERSION").write_text("planted\n")
    with pg.server() as dsn:
        assert _count_rows(dsn) == 1
    assert sorted(p.name for p in template_at.iterdir()) == ["PG_VERSION"]  # left as found


def test_a_template_that_lost_files_is_replaced(template_at: Path) -> None:
    with pg.server():
        pass
    (template_at / "PG_VERSION").unlink()  # as a temp cleaner might
    with pg.server() as dsn:
        assert _count_rows(dsn) == 1
    assert not template_at.exists() or (template_at / "PG_VERSION").is_file()


def test_a_template_owned_by_another_user_is_refused(
    template_at: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pg.server():
        pass
    if not hasattr(pg.os, "geteuid"):
        pytest.skip("no POSIX owners on this platform")
    monkeypatch.setattr(pg.os, "geteuid", lambda: 4242)
    import pwd

    monkeypatch.setattr(pwd, "getpwnam", lambda name: (_ for _ in ()).throw(KeyError(name)))
    assert pg._template(None) is None
