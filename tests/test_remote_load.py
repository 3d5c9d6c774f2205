"""Load: 16 loops at once against one planner service with faults on, each bounded in ticks
and time; no commit is lost or doubled and no reader sees a fall. (The 30-second version is
the benchmark's: `benchmarks/bench_remote.py`.)"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import labkit.catalog.versions as catalog
from labkit.db import connect
from labkit.remote import run, serve, status

LOOPS = 16
DESIGNS = [("ballot", 1), ("fenced", 3), ("pipelined", 3)]


@pytest.mark.slow
def test_sixteen_loops_at_once_lose_and_double_no_commit(tmp_path) -> None:
    ticks = 8
    with serve(
        faults=["inverted", "duplicate", "stale_body", "retry_after_commit"],
        seed=5,
        latency=0.01,
        span=3,
    ) as url:

        def one(i: int):
            design, window = DESIGNS[i % len(DESIGNS)]
            store = tmp_path / f"loop{i}.db"
            return store, run(
                design,
                url,
                ticks=ticks,
                window=window,
                store=store,
                name=f"load-{i}",
                seed=i,
                deadline=60.0,
                poll=0.005,
            )

        with ThreadPoolExecutor(LOOPS) as pool:
            results = list(pool.map(one, range(LOOPS)))
        served = status(url)
    assert served["requests"] >= LOOPS * ticks
    for store, result in results:
        assert "truncated" not in set(result.trace["event"])
        assert result.reader_falls == []
        commits = result.trace[result.trace["committed"].fillna(False).astype(bool)]
        conn = connect(store)
        try:
            assert catalog.verify(conn) == ticks  # nothing lost, nothing appended twice
            stored = [v.ballot_id for v in catalog.history(conn)[1:]]
        finally:
            conn.close()
        assert sorted(commits["ballot_id"].astype(int)) == sorted(stored)  # one commit each
