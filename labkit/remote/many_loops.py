"""Load: many loops at once against one planner service, each on its own SQLite store,
bounded in ticks and in seconds; then every store is read back and checked against what its
loop reported: no commit lost, none doubled, no fall seen by any reader process."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import labkit.catalog.versions as catalog
import labkit.remote.knobs as knobs
from labkit import validation
from labkit.db import connect
from labkit.designs.registry import check_design
from labkit.remote.control import check_loopback
from labkit.remote.driver import RemoteRun, run

MIX: tuple[tuple[str, int], ...] = (("ballot", 1), ("fenced", 3), ("pipelined", 3))
LOAD_CONNECT_S = 10.0  # how long each loop waits for one answer from the service here


@dataclass(frozen=True)
class LoadResult:
    """What `load` saw: commits in the stores, commits the loops reported, and the damage."""

    loops: int
    seconds: float  # the longest run, first send to last event
    commits: int  # versions in the stores (each checked contiguous)
    reported: int  # commits the loops' traces report
    lost: int  # reported commits whose ballot is in no stored version
    doubled: int  # ballots stored at more than one version, or reported twice
    falls: int  # falls the reader processes saw
    truncated: int  # loops stopped by their time bound before their ticks were done

    @property
    def ok(self) -> bool:
        return self.lost == self.doubled == self.falls == 0 and self.commits == self.reported


def _check(store: Path, result: RemoteRun) -> tuple[int, int, int, int]:
    conn = connect(store)
    try:
        catalog.verify(conn)
        stored = [v.ballot_id for v in catalog.history(conn)[1:]]
    finally:
        conn.close()
    trace = result.trace
    reported = trace[trace["committed"].fillna(False).astype(bool)]["ballot_id"].astype(int)
    doubled = sum(n - 1 for n in Counter(stored).values())
    doubled += sum(n - 1 for n in Counter(reported).values())
    lost = len(set(reported) - set(stored))
    return len(stored), len(reported), lost, doubled


def _check_mix(mix: Any) -> tuple[tuple[str, int], ...]:
    """`mix` as (design, window) pairs, at least one; one line naming the bad entry if not."""
    pairs = knobs.sequence(mix, "load(): mix")
    if not pairs:
        raise ValueError("load(): mix names no (design, window) pair")
    out = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, str | bytes) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise TypeError(
                f"load(): mix[{i}] must be a (design, window) pair, got {validation.shown(pair)}"
            )
        window = knobs.count(pair[1], f"load(): mix[{i}] window", high=knobs.MAX_WINDOW)
        out.append((check_design(pair[0]), window))
    return tuple(out)


def load(
    url: str,
    *,
    loops: int = 16,
    seconds: float = 30.0,
    ticks: int = 10**6,
    mix: Sequence[tuple[str, int]] = MIX,
    poll: float = 0.005,
    store_dir: str | Path | None = None,
    connect_timeout: float = LOAD_CONNECT_S,
) -> LoadResult:
    """Run `loops` loops at once (designs and windows taken in turn from `mix`), each until
    `ticks` commits or `seconds` seconds; check every store and trace afterwards. Every
    argument is checked before the first loop starts. The loops run as threads of this
    process, beside a service started here, so each call to the service gets
    `connect_timeout` (not `run`'s 2 s): on a loaded machine of two cores, one of sixteen
    loops once waited longer than 2 s for an answer and stopped as if the service were gone."""
    url = check_loopback(url)
    loops = knobs.count(loops, "load(): loops", high=knobs.MAX_LOOPS)
    seconds = knobs.seconds(seconds, "load(): seconds")
    ticks = validation.int_arg(ticks, "load(): ticks", low=1)
    mix = _check_mix(mix)
    poll = knobs.interval(poll, "load(): poll")
    connect_timeout = knobs.seconds(connect_timeout, "load(): connect_timeout")
    if store_dir is not None:
        store_dir = knobs.path(store_dir, "load(): store_dir")
    with tempfile.TemporaryDirectory(prefix="labkit-load-") as tmp:
        where = Path(store_dir) if store_dir is not None else Path(tmp)

        def one(i: int) -> tuple[Path, RemoteRun]:
            design, window = mix[i % len(mix)]
            store = where / f"load-{i}.db"
            result = run(
                design,
                url,
                ticks=ticks,
                window=window,
                store=store,
                seed=i,
                name=f"load-{i}",
                deadline=seconds,
                poll=poll,
                connect_timeout=connect_timeout,
            )
            return store, result

        with ThreadPoolExecutor(loops) as pool:
            runs = list(pool.map(one, range(loops)))
        checked = [_check(store, result) for store, result in runs]
    return LoadResult(
        loops=loops,
        seconds=max(float(r.trace["t"].max()) for _, r in runs),
        commits=sum(c[0] for c in checked),
        reported=sum(c[1] for c in checked),
        lost=sum(c[2] for c in checked),
        doubled=sum(c[3] for c in checked),
        falls=sum(len(r.reader_falls) for _, r in runs),
        truncated=sum("truncated" in set(r.trace["event"]) for _, r in runs),
    )
