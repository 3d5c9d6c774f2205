"""Chained per-shard checkpoints and the summarizer, under policies side by side, on SQLite or
PostgreSQL.

`"frontier"` advances a shard's `coverage_end` to the gap-free frontier (on PostgreSQL the
commit-order-safe one, behind the xmin horizon); `"max"` advances it to
`MAX(id) WHERE status = 'delivered'` (the wrong rule); on PostgreSQL `"id_order"` advances it by
Article 1's rule over the rows visible now (part three's wrong rule). Each summary records the
terminal rows in (coverage_end, end] and moves coverage in the same transaction; `orphans`
audits what a policy skipped for good.
"""

from __future__ import annotations

from dataclasses import dataclass

import labkit.backend as backend
import labkit.frontier.log as fr
import labkit.frontier.rule as rule
from labkit import store

COVERAGE_SQL = "SELECT coverage_end FROM checkpoints WHERE channel_key = ? AND policy = ?"
TERMINAL_IN_RANGE_SQL = (
    "SELECT id FROM conversations WHERE channel_key = ? AND id > ? AND id <= ? "
    "AND status IN ('delivered','failed') ORDER BY id"
)
INSERT_SUMMARY_SQL = (
    "INSERT INTO summaries (channel_key, policy, start_id, end_id) VALUES (?, ?, ?, ?)"
)
INSERT_ITEM_SQL = "INSERT INTO summary_items (summary_id, conversation_id) VALUES (?, ?)"
UPSERT_CHECKPOINT_SQL = (
    "INSERT INTO checkpoints (channel_key, policy, coverage_end) VALUES (?, ?, ?) "
    "ON CONFLICT (channel_key, policy) DO UPDATE SET coverage_end = excluded.coverage_end"
)
SUMMARIES_SQL = (
    "SELECT id, start_id, end_id FROM summaries WHERE channel_key = ? AND policy = ? "
    "ORDER BY start_id, id"
)
SUMMARY_ITEMS_SQL = (
    "SELECT conversation_id FROM summary_items WHERE summary_id = ? ORDER BY conversation_id"
)
ORPHANS_SQL = (
    "SELECT c.id FROM conversations AS c "
    "WHERE c.channel_key = ? AND c.id <= ? AND c.status IN ('delivered','failed') "
    "AND NOT EXISTS (SELECT 1 FROM summary_items AS si JOIN summaries AS s "
    "  ON s.id = si.summary_id "
    "  WHERE si.conversation_id = c.id AND s.policy = ?) "
    "ORDER BY c.id"
)


@dataclass(frozen=True)
class Summary:
    """One digest: the rows of `channel_key` it covered, for range [start_id, end_id]."""

    summary_id: int
    channel_key: str
    policy: str
    start_id: int
    end_id: int
    item_ids: tuple[int, ...]

    def __str__(self) -> str:
        """One line for learner output: the range it claims and the rows it really holds."""
        return f"claims [{self.start_id}, {self.end_id}], holds ids {list(self.item_ids)}"


def describe(summary: Summary | None) -> str:
    """A `summarize_range` result in words; None means the checkpoint could not move."""
    return "no summary (nothing can be claimed yet)" if summary is None else str(summary)


# The policies each backend's checkpoint table accepts, side by side.
_POLICIES_ON = {"sqlite": rule.POLICIES, "postgres": rule.PG_POLICIES}


def _check_policy(s: store.Store, policy: str) -> None:
    """Refuse a policy the store's checkpoint table does not accept."""
    known = s.pick(_POLICIES_ON)
    if policy not in known:
        raise ValueError(f"unknown policy {policy!r}; expected one of {known}")


def coverage_end(
    conn: backend.Connection | store.Store, channel_key: str, policy: str = "frontier"
) -> int:
    """The shard's stored checkpoint under `policy` (0 before its first summary)."""
    s = store.of(conn)
    _check_policy(s, policy)
    rows = fr.fetch(s, COVERAGE_SQL, (fr.shard_key(channel_key, "coverage_end"), policy))
    return int(rows[0][0]) if rows else 0


def proposed_end(conn: backend.Connection | store.Store, channel_key: str, policy: str) -> int:
    """Where `policy` would move the checkpoint now (never below the current one)."""
    s = store.of(conn)
    current = coverage_end(s, channel_key, policy)
    if policy == "frontier":
        return fr.delivered_frontier(s, channel_key, current)
    if policy == "id_order":
        return fr.id_order_frontier(s, channel_key, current)
    return max(current, fr.max_delivered_watermark(s, channel_key) or 0)


def summarize_range(
    conn: backend.Connection | store.Store,
    channel_key: str,
    policy: str = "frontier",
    end: int | None = None,
) -> Summary | None:
    """Write one summary of the shard's terminal rows in (coverage_end, end]; advance to end.

    `end` is where `policy` would move now (`proposed_end`), asked before the write (the xmin
    horizon wait may not run in a transaction that wrote); a caller that already read its rule
    (part three shows the horizon's evidence) passes it. Both writes commit in one transaction.
    Returns None (and writes nothing) when no terminal row of the shard lies in the range. Under
    "max" the range may hold still-open rows: they are skipped here and, once they finish, sit
    below coverage in no summary (orphans).
    """
    s = store.of(conn)
    _check_policy(s, policy)
    channel_key = fr.shard_key(channel_key, "summarize_range")
    if end is None:
        end = proposed_end(s, channel_key, policy)
    end = fr.whole(end, "end", "summarize_range")
    with s.atomic():
        start = coverage_end(s, channel_key, policy)
        if end <= start:  # nothing to claim (or another summarizer got there first)
            return None
        items = tuple(
            int(r[0]) for r in fr.fetch(s, TERMINAL_IN_RANGE_SQL, (channel_key, start, end))
        )
        if not items:
            return None
        summary_id = s.insert_returning_id(
            INSERT_SUMMARY_SQL, (channel_key, policy, start + 1, end)
        )
        s.executemany(INSERT_ITEM_SQL, [(summary_id, i) for i in items])
        s.execute(UPSERT_CHECKPOINT_SQL, (channel_key, policy, end))
    return Summary(summary_id, channel_key, policy, start + 1, end, items)


def summaries(
    conn: backend.Connection | store.Store, channel_key: str, policy: str
) -> list[Summary]:
    """Every summary of the shard under `policy`, oldest first."""
    s = store.of(conn)
    _check_policy(s, policy)
    channel_key = fr.shard_key(channel_key, "summaries")
    out = []
    for sid, start, end in fr.fetch(s, SUMMARIES_SQL, (channel_key, policy)):
        items = tuple(int(r[0]) for r in fr.fetch(s, SUMMARY_ITEMS_SQL, (sid,)))
        out.append(Summary(int(sid), channel_key, policy, int(start), int(end), items))
    return out


def orphans(
    conn: backend.Connection | store.Store, channel_key: str, policy: str = "frontier"
) -> list[int]:
    """Audit: terminal rows at or below coverage_end that no summary of `policy` covered."""
    s = store.of(conn)
    end = coverage_end(s, channel_key, policy)
    return [int(r[0]) for r in fr.fetch(s, ORPHANS_SQL, (channel_key, end, policy))]


def chain_problems(
    conn: backend.Connection | store.Store, channel_key: str, policy: str
) -> list[str]:
    """Audit the chain: each summary must start at the previous end + 1 and items must not repeat.

    An empty list means the ranges tile (0, coverage_end] with no overlap and no hole.
    """
    s = store.of(conn)
    problems: list[str] = []
    expected_start = 1
    seen: set[int] = set()
    for one in summaries(s, channel_key, policy):
        if one.start_id != expected_start:
            problems.append(
                f"summary {one.summary_id} starts at {one.start_id}, not {expected_start}"
            )
        repeated = seen.intersection(one.item_ids)
        if repeated:
            problems.append(f"summary {one.summary_id} repeats ids {sorted(repeated)}")
        seen.update(one.item_ids)
        expected_start = one.end_id + 1
    if expected_start - 1 != coverage_end(s, channel_key, policy):
        problems.append(f"last summary ends at {expected_start - 1}, not at coverage_end")
    return problems
