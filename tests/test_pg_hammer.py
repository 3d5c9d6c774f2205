"""Many loops hammering one PostgreSQL store at once, with every kind of call and answer
(markers `postgres`, `slow`). The scripted races in test_pg_ballots step one interleaving each;
here seeded threads produce thousands, and the store is read back against the promises: a
contiguous log, each version made by the ballot that owned its fence, at most one commit per
watermark, one response row per answer, the window never exceeded, an abandoned ballot never
decided afterwards, and no stale, forged or malformed answer ever committed."""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import pytest

from labkit.catalog import versions as catalog
from labkit.catalog.loop import Response, ResponseError, WatermarkLoop, WindowFullError
from labkit.pg import instance as pg

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

THREADS, STEPS, WINDOW = 6, 120, 3
# (observed, base) shifts of an answer relative to its ballot; only "fresh" may commit.
KINDS = {
    "fresh": (0, 0),
    "next": (1, 1),
    "previous": (-1, -1),
    "stale base": (0, -1),
    "future base": (0, 1),
    "echo ahead": (1, 0),
    "bad body": (0, 0),
}


def hammer(dsn: str, schema: str, seed: int) -> tuple[list[Any], set[int], list[str], int]:
    """Run THREADS loops for STEPS random calls each; return (answers, ballots abandoned,
    errors, most in flight)."""
    ballots: list[Any] = []
    abandoned: set[int] = set()
    answers: list[tuple[str, str, Any, Any]] = []  # (nonce, kind, ballot, outcome or error)
    errors: list[str] = []
    shared = threading.Lock()
    done = threading.Event()
    most_in_flight = [0]

    def connect():
        return pg.connect(dsn, options=pg.search_path_option(schema))

    def monitor() -> None:
        with pg.connect(dsn, autocommit=True, options=pg.search_path_option(schema)) as m:
            while not done.is_set():
                (n,) = m.execute(
                    "SELECT count(*) FROM wm_ballots WHERE status = 'inflight'"
                ).fetchone()
                most_in_flight[0] = max(most_in_flight[0], n)

    def worker(wid: int, conn: Any) -> None:
        rng = random.Random(seed * 100 + wid)
        loop = WatermarkLoop(conn, window=WINDOW)
        try:
            for i in range(STEPS):
                roll = rng.random()
                with shared:
                    recent = ballots[-4:]
                if roll < 0.35 or not recent:
                    try:
                        got = loop.reserve()
                    except WindowFullError:
                        continue
                    with shared:
                        ballots.append(got)
                elif roll < 0.88:
                    b, kind = rng.choice(recent), rng.choice(["fresh"] * 5 + list(KINDS))
                    nonce = f"w{wid}-{i}"
                    d_observed, d_base = KINDS[kind]
                    tools = [{1}] if kind == "bad body" else [nonce]
                    answer = Response(
                        b.ballot_id, b.watermark + d_observed, b.base_version + d_base, tools
                    )
                    try:
                        out: Any = loop.apply(answer)
                    except ResponseError as exc:
                        out = exc
                    with shared:
                        answers.append((nonce, kind, b, out))
                elif roll < 0.94:
                    victim = rng.choice(recent).ballot_id
                    if loop.abandon(victim):
                        with shared:
                            abandoned.add(victim)
                else:
                    try:
                        got = loop.replay(rng.choice(recent).ballot_id)
                    except WindowFullError:
                        continue
                    with shared:
                        ballots.append(got)
        except Exception as exc:  # reported with the others, so one failure shows them all
            errors.append(f"worker {wid}: {type(exc).__name__}: {exc}")

    conns = [connect() for _ in range(THREADS)]
    WatermarkLoop(conns[0], window=WINDOW)  # create the store before anyone races
    watcher = threading.Thread(target=monitor)
    threads = [threading.Thread(target=worker, args=(w, c)) for w, c in enumerate(conns)]
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    done.set()
    watcher.join(10)
    for c in conns:
        c.close()
    return answers, abandoned, errors, most_in_flight[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_many_loops_on_one_store_keep_every_promise(pg_dsn: str, pg_schema: str, seed: int) -> None:
    answers, abandoned, errors, most_in_flight = hammer(pg_dsn, pg_schema, seed)
    assert errors == []
    with pg.connect(pg_dsn, autocommit=True, options=pg.search_path_option(pg_schema)) as c:
        head = catalog.verify(c)  # contiguous, each version based on the one before
        versions = c.execute(
            "SELECT version, ballot_id, tools FROM catalog_versions WHERE version > 0"
        ).fetchall()
        ballots = {
            r[0]: r[1:]
            for r in c.execute(
                "SELECT ballot_id, observed_watermark, status FROM wm_ballots"
            ).fetchall()
        }
        responses = c.execute("SELECT tools_hash, committed FROM wm_responses").fetchall()
        (next_ballot,) = c.execute("SELECT next_ballot FROM wm_store").fetchone()
    assert head > 10, "too few commits for the run to mean anything"
    for version, ballot_id, _ in versions:  # made by the ballot that owned its fence
        assert ballots[ballot_id] == (version - 1, "committed"), version
    assert abandoned and {ballots[b][1] for b in abandoned} == {"abandoned"}  # none decided later
    per_watermark = Counter(fence for fence, status in ballots.values() if status == "committed")
    assert max(per_watermark.values()) == 1
    assert sum(committed for _, committed in responses) == head
    assert next_ballot == max(ballots) + 1 and most_in_flight <= WINDOW
    decided = [a for a in answers if not isinstance(a[3], ResponseError)]
    assert len(responses) == len(decided)  # one row per answer the loop decided
    recorded = Counter(h for h, _ in responses)
    by_version = {v: (b, t) for v, b, t in versions}
    commits = 0
    for nonce, kind, ballot, out in decided:
        if kind != "bad body":
            assert recorded[catalog.tools_hash([nonce])] == 1, nonce
        if out.committed:
            commits += 1
            assert kind == "fresh", (kind, out)
            assert by_version[out.version] == (ballot.ballot_id, catalog.tools_json([nonce]))
    assert commits == head
