"""The rule is written once, but PostgreSQL takes a shortcut SQLite does not: it tries a commit
before reading (a guarded write, `WatermarkLoop.apply`). Here Hypothesis runs the same random
program of reserves, answers (fresh, stale, forged, with a bad body), abandons and replays on
both backends, one step at a time, and requires the same outcome at every step and the same
rows at the end: the shortcut decides exactly what the read would have (marker `postgres`)."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backends import rows
from hypothesis import example, given, settings
from hypothesis import strategies as st

from labkit import backend, db
from labkit.catalog.loop import Response, WatermarkLoop
from labkit.pg import instance as pg

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # 157 programs on two backends: 4-5 s alone

TOP = 2**63 - 1  # the largest fence either backend can store
# What an answer echoes, relative to its ballot: (observed, base) shifts or fixed values, and
# the body; "unknown ballot" answers for an id nobody reserved.
ANSWERS = {
    "fresh": (0, 0, "good"),
    "claims the next fence": (1, 1, "good"),
    "claims the previous fence": (-1, -1, "good"),
    "stale base": (0, -1, "good"),
    "base from the future": (0, 1, "good"),
    "echo ahead only": (1, 0, "good"),
    "bad body": (0, 0, "bad"),
    "largest fence": ("top", "top", "good"),
    "negative fence": ("-5", "-5", "good"),
    "unknown ballot": (0, 0, "good"),
}
ANSWER = st.sampled_from(list(ANSWERS))
WHO, WHICH = st.integers(0, 1), st.integers(0, 7)
STEP = st.one_of(
    st.tuples(st.just("reserve"), WHO),
    st.tuples(st.just("apply"), WHO, WHICH, ANSWER),
    st.tuples(st.just("apply"), WHO, WHICH, st.just("fresh")),
    st.tuples(st.just("checks"), WHO, WHICH, ANSWER),
    st.tuples(st.just("abandon"), WHO, WHICH),
    st.tuples(st.just("replay"), WHO, WHICH),
    st.tuples(st.just("head goes back"), WHO),  # a restore from an older backup
)
# Everything but the PostgreSQL-only sequence numbers (a refused insert may use one up there).
TABLES = {
    "catalog": "SELECT version, tools, tools_hash, ballot_id, base_version, committed_at"
    " FROM catalog_versions ORDER BY version",
    "ballots": "SELECT ballot_id, observed_watermark, base_version, replay_of, status, reason,"
    " reserved_at, decided_at FROM wm_ballots ORDER BY ballot_id",
    "responses": "SELECT ballot_id, observed_watermark, base_version, tools_hash, committed,"
    " reason, received_at FROM wm_responses ORDER BY seq",
    "store": "SELECT next_ballot FROM wm_store",
}


def shifted(value: int, shift: int | str) -> int:
    if isinstance(shift, str):
        return {"top": TOP, "-5": -5}[shift]
    return value + shift


def answer(b: Any, kind: str) -> Response:
    d_observed, d_base, body_kind = ANSWERS[kind]
    body = ["tool", b.ballot_id] if body_kind == "good" else [{1, 2}]
    ballot_id = 10_000 if kind == "unknown ballot" else b.ballot_id
    return Response(
        ballot_id, shifted(b.watermark, d_observed), shifted(b.base_version, d_base), body
    )


def drop_head(conn: Any) -> None:
    """Delete the newest version above genesis, as restoring an older backup would."""
    sql = (
        "DELETE FROM catalog_versions WHERE version > 0"
        " AND version = (SELECT MAX(version) FROM catalog_versions)"
    )
    d = backend.dialect(conn)
    with d.atomic(conn):
        d.execute(conn, sql)


def run_program(
    conns: list[Any], program: list[tuple], window: int
) -> tuple[list[str], dict[str, list]]:
    """Two loops on one store, a fixed clock; each step's outcome as text. Only the loop's own
    calls are inside the `try`: an error the harness makes is not an outcome."""
    ticks = iter(range(1, 10_000))
    loops = [WatermarkLoop(c, window=window, clock=lambda: float(next(ticks))) for c in conns]
    ballots: list[Any] = []
    seen = []
    for step in program:
        kind, who = step[0], loops[step[1]]
        if kind == "head goes back":
            drop_head(conns[step[1]])
        elif kind != "reserve" and not ballots:
            seen.append("no ballot yet")
            continue
        b = ballots[step[2] % len(ballots)] if len(step) > 2 else None
        resp = answer(b, step[3]) if len(step) > 3 else None
        try:
            if kind == "head goes back":
                got: object = who.head_version()
            elif kind == "reserve":
                got = who.reserve()
            elif kind == "apply":
                got = who.apply(resp)
            elif kind == "checks":
                got = who.checks(resp)
            elif kind == "abandon":
                got = who.abandon(b.ballot_id)
            else:
                got = who.replay(b.ballot_id)
        except Exception as exc:  # the same refusal, with the same words, is what must agree
            got = f"{type(exc).__name__}: {exc}"
        if kind in ("reserve", "replay") and not isinstance(got, str):
            ballots.append(got)
        seen.append(repr(got))
    state = {name: [tuple(r) for r in rows(conns[0], sql)] for name, sql in TABLES.items()}
    return seen, state


@pytest.fixture(scope="module")
def pg_two(pg_dsn: str) -> Iterator[list[Any]]:
    """Two sessions on one scratch schema, for every program: a schema and two connections
    made for each of the 157 programs cost more than the programs (the tables are emptied
    between them instead, `emptied`)."""
    with pg.scratch_schema(pg_dsn, prefix="agree") as schema:
        conns = [pg.connect(pg_dsn, options=pg.search_path_option(schema)) for _ in range(2)]
        try:
            yield conns
        finally:
            for c in conns:
                c.close()


def emptied(conns: list[Any]) -> None:
    """Empty every table of the sessions' schema and restart its sequences, so the next
    program starts with the tables as the first one made them: the loops then add the genesis
    and store rows again, as on a schema just made. (Making the tables is covered by every
    test that starts from a fresh schema.) A session an earlier program broke fails here, by
    name, rather than in every program after it."""
    from psycopg import sql

    for i, c in enumerate(conns):
        if c.closed or c.broken:
            pytest.fail(f"session {i} was broken by an earlier program; see its failure above")
        c.rollback()  # a read the last program left open would hold TRUNCATE's lock off
    conn = conns[0]
    names = [
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    ]
    if names:
        tables = sql.SQL(", ").join(sql.Identifier(n) for n in names)
        conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY").format(tables))
    conn.commit()


@settings(max_examples=150, deadline=None)
@given(program=st.lists(STEP, min_size=1, max_size=16), window=st.sampled_from([1, 2, 3]))
# The cases where a commit tried before reading would go wrong if its guard were weaker:
@example(
    program=[
        ("reserve", 0),
        ("reserve", 1),
        ("apply", 0, 0, "fresh"),
        ("apply", 1, 1, "claims the next fence"),
    ],
    window=3,
)
@example(
    program=[
        ("reserve", 0),
        ("reserve", 1),
        ("apply", 0, 0, "fresh"),
        ("apply", 1, 1, "fresh"),
        ("apply", 1, 1, "stale base"),
    ],
    window=3,
)
@example(program=[("reserve", 0), ("apply", 1, 0, "fresh"), ("apply", 0, 0, "fresh")], window=3)
@example(program=[("reserve", 0), ("abandon", 1, 0), ("apply", 0, 0, "fresh")], window=3)
@example(
    program=[
        ("reserve", 0),
        ("apply", 0, 0, "fresh"),
        ("reserve", 1),
        ("head goes back", 1),
        ("apply", 1, 1, "fresh"),
        ("reserve", 1),
        ("apply", 1, 2, "fresh"),
    ],
    window=3,
)
@example(
    program=[
        ("reserve", 0),
        ("apply", 0, 0, "largest fence"),
        ("apply", 1, 0, "unknown ballot"),
        ("checks", 1, 0, "negative fence"),
    ],
    window=1,
)
@example(
    program=[
        ("reserve", 0),
        ("replay", 1, 0),
        ("apply", 0, 0, "fresh"),
        ("apply", 1, 1, "fresh"),
        ("apply", 0, 0, "claims the previous fence"),
    ],
    window=3,
)
def test_postgres_decides_every_step_as_sqlite_does(
    pg_two: list[Any], program: list[tuple], window: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wm.db"
        lite: list[sqlite3.Connection] = [db.connect(path), db.connect(path)]
        try:
            expected = run_program(lite, program, window)
        finally:
            for c in lite:
                c.close()
    emptied(pg_two)
    got = run_program(pg_two, program, window)
    assert got[0] == expected[0]  # every outcome, step by step
    assert got[1] == expected[1]  # and every row the steps left behind
