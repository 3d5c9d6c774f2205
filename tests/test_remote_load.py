"""Load: 16 loops at once against one planner service with faults on, each bounded in ticks
and time; no commit is lost or doubled and no reader sees a fall. (The 30-second version is
the benchmark's: `benchmarks/remote_vs_sim.py`.)"""

from __future__ import annotations

import pytest

from labkit.remote import serve, status
from labkit.remote.many_loops import load

FAULTS = ["inverted", "duplicate", "stale_body", "retry_after_commit"]


@pytest.mark.slow
def test_sixteen_loops_at_once_lose_and_double_no_commit(tmp_path) -> None:
    ticks = 8
    with serve(faults=FAULTS, seed=5, latency=0.01, span=3) as url:
        # 18 s on a quiet machine; the bound is for a loaded one (two cores, other workers and
        # sixteen reader processes polling: 51 of 128 commits in 60 s once). The readers poll
        # every 50 ms, not load()'s 5 ms: these designs never lower the head, so no write waits
        # on a poll, and sixteen readers at 5 ms starve the loops of a loaded machine (57 of 128
        # commits in 150 s once). Quiet, the run took 36 CPU-seconds at 5 ms and 20 at 50 ms.
        result = load(url, loops=16, seconds=150.0, ticks=ticks, store_dir=tmp_path, poll=0.05)
        served = status(url)
    assert served["requests"] >= 16 * ticks
    assert result.truncated == 0 and result.commits == 16 * ticks
    assert result.ok, result
