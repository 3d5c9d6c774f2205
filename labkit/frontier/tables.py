"""The message log's tables, one spec each (`labkit.schema`): both backends' DDL comes from here.

`labkit.frontier.log.SCHEMA_SQL` (SQLite) and `labkit.frontier.log_pg.SCHEMA_SQL` (PostgreSQL,
which adds the id triggers and the horizon wait's precondition test) render them. Where the
backends differ, the spec says so: ids are handed out by an AUTOINCREMENT key on SQLite and an
identity on PostgreSQL, PostgreSQL's `priority` is a 32-bit `integer`, its rows record the
transaction that inserted them (`xact_id`), its checkpoints also accept Article 1's policy, and
its dispatcher has an index of pending rows.
"""

from __future__ import annotations

import labkit.frontier.rule as rule
from labkit.schema import INT32, INTEGER, SERIAL_KEY, TEXT, XID8, Both, Column, Index, Table

NON_TERMINAL = ("pending", "running")
TERMINAL = ("delivered", "failed")
STATUSES = NON_TERMINAL + TERMINAL

# The open rows, as the frontier's statements test them (`log.FRONTIER_SQL`): a partial index
# serves a statement only if its WHERE clause is the statement's.
OPEN_ROWS = "status IN (" + ",".join(f"'{s}'" for s in NON_TERMINAL) + ")"
# The policies a checkpoint may be kept under, on each backend (`labkit.frontier.rule`).
POLICY = Both(rule.policy_check(rule.POLICIES), rule.policy_check(rule.PG_POLICIES))

CONVERSATIONS = Table(
    "conversations",
    (
        Column("id", INTEGER, (SERIAL_KEY,)),
        Column("channel_key", TEXT, ("NOT NULL",)),
        Column("direction", TEXT, ("NOT NULL",)),
        Column(
            "status",
            TEXT,
            ("NOT NULL", "CHECK (status IN (" + ", ".join(f"'{s}'" for s in STATUSES) + "))"),
        ),
        Column("priority", INT32, ("NOT NULL",)),
        Column("redrive_of", INTEGER, ("REFERENCES conversations(id)",)),
        # PostgreSQL: the transaction that took the row's id (the horizon wait, `log_pg`).
        Column("xact_id", XID8, ("NOT NULL", "DEFAULT pg_current_xact_id()")),
    ),
    indexes=(
        # `status` too, so the frontier's seek reads the index alone (a covering index: SQLite
        # opens no table cursor for it, a tenth of the lookup).
        Index("idx_conv_active", "channel_key, id, status", where=OPEN_ROWS),
        Index("idx_conv_shard_id", "channel_key, id"),
        # PostgreSQL's dispatch locks the pending row it picks (`log_pg.SKIP_LOCKED`).
        Index("idx_conv_pending", "priority, id", where="status = 'pending'", only="postgres"),
    ),
)
CHECKPOINTS = Table(
    "checkpoints",
    (
        Column("channel_key", TEXT, ("NOT NULL",)),
        Column("policy", TEXT, ("NOT NULL", POLICY)),
        Column("coverage_end", INTEGER, ("NOT NULL",)),
    ),
    ("PRIMARY KEY (channel_key, policy)",),
)
SUMMARIES = Table(
    "summaries",
    (
        Column("id", INTEGER, (SERIAL_KEY,)),
        Column("channel_key", TEXT, ("NOT NULL",)),
        Column("policy", TEXT, ("NOT NULL", POLICY)),
        Column("start_id", INTEGER, ("NOT NULL",)),
        Column("end_id", INTEGER, ("NOT NULL",)),
    ),
    ("CHECK (start_id <= end_id)",),
    (Index("idx_summaries_shard", "channel_key, policy, start_id"),),
)
SUMMARY_ITEMS = Table(
    "summary_items",
    (
        Column("summary_id", INTEGER, ("NOT NULL", "REFERENCES summaries(id)")),
        Column("conversation_id", INTEGER, ("NOT NULL", "REFERENCES conversations(id)")),
    ),
    ("PRIMARY KEY (summary_id, conversation_id)",),
    (Index("idx_summary_items_conv", "conversation_id"),),
)

# The log's tables in the order they are made (a table after those it references).
LOG = (CONVERSATIONS, CHECKPOINTS, SUMMARIES, SUMMARY_ITEMS)
