"""The low-watermark rule, written once in Python: the gap-free frontier over a log's statuses.

Everything at or below the frontier is finished, with no gap: it is one less than the id of the
first row above the coverage base that is still open (not terminal); with no open row above
the base it is the last row's id; with no row above the base it is the base itself. It is
never `MAX(id) WHERE status = 'delivered'`, which runs past an open row and skips it for good.

The SQL form of the same rule is `labkit.frontier.log.FRONTIER_SQL` (and its lookup and
PostgreSQL variants); the Python callers are the hold of pipelined ballots
(`labkit.catalog.hold.frontier`: fence f is row id f + 1, "answered" is "not open"), the
exhaustive order model (`labkit.frontier.orders`) and the exercises' reference answer
(`labkit.exercises.frontier.reference_frontier`). Each hands its rows to `frontier`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# The checkpoint policies: the rule a summarizer advances a shard's coverage by. Both backends
# run "frontier" (the rule below) and "max" (`MAX(id) WHERE status = 'delivered'`, the wrong
# rule, kept to be shown failing). PostgreSQL alone also runs "id_order", Article 1's rule
# (`labkit.frontier.log.id_order_frontier`), which late commits defeat there (part three).
# The one list: the log's tables (both DDLs), the summarizer, the scenarios and the plots read
# these names from here.
POLICIES: tuple[str, ...] = ("frontier", "max")
PG_ONLY: tuple[str, ...] = ("id_order",)
PG_POLICIES: tuple[str, ...] = POLICIES + PG_ONLY


def policy_check(policies: Sequence[str]) -> str:
    """The DDL constraint that a `policy` column holds one of `policies`."""
    return "CHECK (policy IN (" + ", ".join(f"'{p}'" for p in policies) + "))"


def frontier(base: int, rows: Iterable[tuple[int, bool]]) -> int:
    """The gap-free frontier above the coverage base `base`.

    `rows` are the log's rows above `base` as `(id, still_open)` pairs in ascending id order
    (a generator is fine, even an endless one that reaches an open row: nothing past the first
    open row is read). The frontier is the first open row's id - 1, else the last row's id,
    else `base`.
    """
    reached = base
    for row_id, still_open in rows:
        if still_open:
            return row_id - 1
        reached = row_id
    return reached
