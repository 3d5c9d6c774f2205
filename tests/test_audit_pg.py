"""The audit reading PostgreSQL tables (`python -m labkit audit log DSN --table ...`): the sample
twins loaded into tables give the findings the files give; the read is one read-only
REPEATABLE READ transaction that blocks no writer; a missing table or column exits 2 naming
the DSN (password masked), the table and the column."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from labkit.__main__ import main
from labkit.audit.inputs import PgSnapshot, PgSource

pytestmark = pytest.mark.postgres

DATA = Path(__file__).resolve().parent.parent / "data" / "audit"

# Each sample's table: its columns and their SQL types, the audit's names unless mapped.
STATUS_SQL = "id bigint, shard text, status text, at double precision"
CKPT_SQL = 'shard text, start bigint, "end" bigint, at double precision'
EVENTS_SQL = (
    "at timestamptz(3), event text, ballot text, version bigint, base bigint, observer text"
)


def _records(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def load(pg_connect: Callable[..., Any], pg_schema: str) -> Iterator[Callable[..., str]]:
    """Load a sample file into a new table of the test's schema; returns `schema.table`."""
    from psycopg import sql

    conn = pg_connect(autocommit=True)

    def one(
        data: Path | list[dict[str, Any]], table: str, columns: str, reverse: bool = False
    ) -> str:
        names = [part.split()[0].strip('"') for part in columns.split(",")]
        conn.execute(
            sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(table), sql.SQL(columns))
        )
        records = _records(data) if isinstance(data, Path) else data
        insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            sql.Identifier(table),
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join(sql.Placeholder() * len(names)),
        )
        with conn.cursor() as cur:
            rows = [[r.get(n) for n in names] for r in records]
            cur.executemany(insert, rows[::-1] if reverse else rows)
        return f"{pg_schema}.{table}"

    yield one


def _run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, list[dict], str]:
    code = main(["audit", *map(str, argv), "--json"])
    out = capsys.readouterr()
    return code, [json.loads(line) for line in out.out.splitlines()], out.err


def _found(objs: list[dict]) -> set[tuple]:
    return {
        (o["kind"], o.get("shard") or o.get("observer") or o.get("ballot"), o.get("id"))
        for o in objs
        if o["kind"] != "summary"
    }


@pytest.mark.parametrize("name", ["broken", "clean"])
def test_log_tables_give_the_files_findings(
    capsys: pytest.CaptureFixture[str], pg_dsn: str, load: Callable[..., str], name: str
) -> None:
    status, ckpt = (DATA / f"log_{name}_status.csv", DATA / f"log_{name}_checkpoints.csv")
    want = _run(capsys, "log", status, "--checkpoints", ckpt)
    s_table = load(status, "status", STATUS_SQL)
    c_table = load(ckpt, "ckpt", CKPT_SQL)
    got = _run(
        capsys, "log", pg_dsn, "--table", s_table, "--checkpoints", pg_dsn,
        "--checkpoints-table", c_table,
    )  # fmt: skip
    assert got == want and want[0] == (1 if name == "broken" else 0)


@pytest.mark.parametrize("name", ["broken", "clean"])
def test_catalog_table_gives_the_files_findings(
    capsys: pytest.CaptureFixture[str], pg_dsn: str, load: Callable[..., str], name: str
) -> None:
    events = DATA / f"catalog_{name}.jsonl"
    want = _run(capsys, "catalog", events)
    table = load(events, "events", EVENTS_SQL)  # `at` a timestamptz: read as epoch seconds
    got = _run(capsys, "catalog", pg_dsn, "--table", table)
    assert got == want and want[0] == (1 if name == "broken" else 0)


def test_mapped_columns_in_any_stored_order(
    capsys: pytest.CaptureFixture[str], pg_dsn: str, load: Callable[..., str]
) -> None:
    """Rows stored newest first under other column names (`--map`) read as the same history:
    the server orders them by the time column."""
    status, ckpt = DATA / "log_broken_status.csv", DATA / "log_broken_checkpoints.csv"
    _, want, _ = _run(capsys, "log", status, "--checkpoints", ckpt)
    renamed = [
        {"msg": r["id"], "shard": r["shard"], "state": r["status"], "t": r["at"]}
        for r in _records(status)
    ]
    s_table = load(renamed, "status_mapped", "msg bigint, shard text, state text, t float8", True)
    c_table = load(ckpt, "ckpt", CKPT_SQL, reverse=True)
    code, objs, err = _run(
        capsys, "log", pg_dsn, "--table", s_table, "--map", "id=msg,status=state,at=t",
        "--checkpoints", pg_dsn, "--checkpoints-table", c_table,
    )  # fmt: skip
    assert (code, err) == (1, "")
    assert _found(objs) == _found(want) and objs[-1]["rule"] == want[-1]["rule"] == "max"


def test_one_read_only_snapshot_that_blocks_no_writer(
    pg_dsn: str, pg_connect: Callable[..., Any], load: Callable[..., str]
) -> None:
    """Mid-read (rows streaming from a server-side cursor), a writer locks both tables IN
    EXCLUSIVE MODE and inserts without waiting; the reader holds only ACCESS SHARE; the table
    read after the write still shows the snapshot taken before it; the reader cannot write."""
    import psycopg
    from psycopg import sql

    def named(statement: str, table: str) -> sql.Composed:
        return sql.SQL(statement).format(sql.Identifier(*table.split(".")))

    s_table = load(DATA / "log_broken_status.csv", "status", STATUS_SQL)
    c_table = load(DATA / "log_broken_checkpoints.csv", "ckpt", CKPT_SQL)
    with PgSnapshot(pg_dsn) as snap:
        status = snap.rows(PgSource(pg_dsn, s_table), ("id", "shard", "status", "at"), None, "at")
        assert next(status) == (1, {"id": "1", "shard": "eu", "status": "pending", "at": "0"})
        settings = snap.conn.execute(
            "SELECT current_setting('transaction_read_only'),"
            " current_setting('transaction_isolation'), pg_backend_pid()"
        ).fetchone()
        assert settings[:2] == ("on", "repeatable read")
        cursors = snap.conn.execute("SELECT name FROM pg_cursors").fetchall()
        assert cursors == [("labkit_audit_1",)]  # the rows stream from a server-side cursor
        locks = pg_connect(autocommit=True).execute(
            "SELECT DISTINCT mode FROM pg_locks WHERE pid = %s AND locktype = 'relation'"
            " AND relation = %s::regclass",
            (settings[2], s_table),
        )
        assert [m for (m,) in locks] == ["AccessShareLock"]
        writer = pg_connect()
        writer.execute("SET lock_timeout = '2s'")
        for table in (s_table, c_table):  # lock_timeout fails these if the reader blocks them
            writer.execute(named("LOCK TABLE {} IN EXCLUSIVE MODE", table))
        writer.execute(named("INSERT INTO {} VALUES ('eu', 8, 9, 17)", c_table))
        writer.execute(named("INSERT INTO {} VALUES (99, 'eu', 'pending', 0)", s_table))
        writer.commit()
        ckpts = snap.rows(PgSource(pg_dsn, c_table), ("shard", "start", "end", "at"), None, "at")
        assert [r["end"] for _, r in ckpts] == ["7", "8", "105", "107"]  # not the new "9"
        assert "99" not in [r["id"] for _, r in status]
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            snap.conn.execute(named("INSERT INTO {} VALUES ('eu', 9, 10, 18)", c_table))


def _bad(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(["audit", *argv]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1
    return out.err


def test_a_missing_table_or_column_exits_2_naming_dsn_table_and_column(
    capsys: pytest.CaptureFixture[str], pg_dsn: str, load: Callable[..., str]
) -> None:
    s_table = load(DATA / "log_broken_status.csv", "status", STATUS_SQL)
    c_table = load(DATA / "log_broken_checkpoints.csv", "ckpt", CKPT_SQL)
    # the embedded server trusts local connections, so a password changes nothing but the DSN
    secret = pg_dsn.replace("postgres:@", "postgres:hunter2@", 1)
    assert secret != pg_dsn
    log = ["log", secret, "--table", s_table, "--checkpoints", secret]
    err = _bad(capsys, [*log, "--checkpoints-table", c_table + "_nope"])
    assert "hunter2" not in err and "postgres:***@" in err and f"no table '{c_table}_nope'" in err
    err = _bad(capsys, [*log, "--checkpoints-table", c_table, "--map", "status=state"])
    assert "hunter2" not in err and f"table {s_table}: column 'state'" in err
    err = _bad(capsys, [*log])
    assert "--checkpoints-table" in err and "hunter2" not in err
    nowhere = "postgresql://postgres:hunter2@/postgres?host=/nonexistent-labkit-socket-dir"
    tables = ["--table", "s", "--checkpoints-table", "c"]
    err = _bad(capsys, ["log", nowhere, "--checkpoints", nowhere, *tables])
    assert "refused the connection" in err and "postgres:***@" in err and "hunter2" not in err
    events = load(DATA / "catalog_broken.jsonl", "events", EVENTS_SQL.replace("observer", "who"))
    err = _bad(capsys, ["catalog", secret, "--table", events])
    assert f"table {events}: column 'observer'" in err and "hunter2" not in err
