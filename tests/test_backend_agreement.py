"""The rule is written once, but PostgreSQL takes a shortcut SQLite does not: it tries a commit
before reading (a guarded write, `WatermarkLoop.apply`). Here Hypothesis runs the same random
program of reserves, answers (fresh, stale, forged, with a bad body), abandons and replays on
both backends, one step at a time, and requires the same outcome at every step and the same
rows at the end: the shortcut decides exactly what the read would have (marker `postgres`)."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from backends import rows
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from labkit import db, pg
from labkit.watermark_loop import Response, WatermarkLoop

pytestmark = pytest.mark.postgres

# What an answer echoes, relative to its ballot: (observed, base) shifts and the body.
ANSWERS = {
    "fresh": (0, 0, "good"),
    "claims the next fence": (1, 1, "good"),
    "claims the previous fence": (-1, -1, "good"),
    "stale base": (0, -1, "good"),
    "base from the future": (0, 1, "good"),
    "echo ahead only": (1, 0, "good"),
    "bad body": (0, 0, "bad"),
}
STEP = st.one_of(
    st.tuples(st.just("reserve"), st.integers(0, 1)),
    st.tuples(st.just("apply"), st.integers(0, 1), st.integers(0, 7), st.sampled_from(list(ANSWERS))),
    st.tuples(st.just("apply"), st.integers(0, 1), st.integers(0, 7), st.just("fresh")),
    st.tuples(st.just("abandon"), st.integers(0, 1), st.integers(0, 7)),
    st.tuples(st.just("replay"), st.integers(0, 1), st.integers(0, 7)),
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


def run_program(conns: list[Any], program: list[tuple]) -> tuple[list[str], dict[str, list]]:
    """Two loops on one store (window 3), a fixed clock; each step's outcome as text."""
    ticks = iter(range(1, 10_000))
    loops = [WatermarkLoop(c, window=3, clock=lambda: float(next(ticks))) for c in conns]
    ballots: list[Any] = []
    seen = []
    for step in program:
        kind, who = step[0], loops[step[1]]
        try:
            if kind == "reserve":
                ballots.append(who.reserve())
                got: object = ballots[-1]
            elif not ballots:
                got = "no ballot yet"
            else:
                b = ballots[step[2] % len(ballots)]
                if kind == "apply":
                    d_observed, d_base, body_kind = ANSWERS[step[3]]
                    body = ["tool", b.ballot_id] if body_kind == "good" else [{1, 2}]
                    got = who.apply(Response(b.ballot_id, b.watermark + d_observed,
                                             b.base_version + d_base, body))
                elif kind == "abandon":
                    got = who.abandon(b.ballot_id)
                else:
                    ballots.append(who.replay(b.ballot_id))
                    got = ballots[-1]
        except Exception as exc:  # the same refusal, with the same words, is what must agree
            got = f"{type(exc).__name__}: {exc}"
        seen.append(repr(got))
    state = {name: [tuple(r) for r in rows(conns[0], sql)] for name, sql in TABLES.items()}
    return seen, state


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=st.lists(STEP, min_size=1, max_size=16))
# The cases where a commit tried before reading would go wrong if its guard were weaker:
@example(program=[("reserve", 0), ("reserve", 1), ("apply", 0, 0, "fresh"),
                  ("apply", 1, 1, "claims the next fence")])
@example(program=[("reserve", 0), ("reserve", 1), ("apply", 0, 0, "fresh"),
                  ("apply", 1, 1, "fresh"), ("apply", 1, 1, "stale base")])
@example(program=[("reserve", 0), ("apply", 1, 0, "fresh"), ("apply", 0, 0, "fresh")])
@example(program=[("reserve", 0), ("abandon", 1, 0), ("apply", 0, 0, "fresh")])
@example(program=[("reserve", 0), ("replay", 1, 0), ("apply", 0, 0, "fresh"),
                  ("apply", 1, 1, "fresh"), ("apply", 0, 0, "claims the previous fence")])
def test_postgres_decides_every_step_as_sqlite_does(pg_dsn: str, program: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wm.db"
        lite: list[sqlite3.Connection] = [db.connect(path), db.connect(path)]
        try:
            expected = run_program(lite, program)
        finally:
            for c in lite:
                c.close()
    with pg.scratch_schema(pg_dsn, prefix="agree") as schema:
        conns = [pg.connect(pg_dsn, options=pg.search_path_option(schema)) for _ in range(2)]
        try:
            got = run_program(conns, program)
        finally:
            for c in conns:
                c.close()
    assert got[0] == expected[0]  # every outcome, step by step
    assert got[1] == expected[1]  # and every row the steps left behind
