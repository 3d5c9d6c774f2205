"""The catalog store's tables, one spec each (`labkit.schema`): both backends' DDL comes from here.

The catalog log and a reader's mark (`labkit.catalog.versions`), the ballot store
(`labkit.catalog.loop`) and the hold of pipelined ballots (`labkit.catalog.hold`) make their
tables from these specs. Where the backends differ, the spec says so: SQLite's 64-bit INTEGER
is PostgreSQL's `bigint` (its `integer` for the store's one-row key, `smallint` for a 0/1
flag), REAL is `double precision`, a response's sequence number is an AUTOINCREMENT key on
SQLite and an identity on PostgreSQL, and PostgreSQL's log also refuses a version whose base is
missing: a commit tried before any read relies on it (`labkit.catalog.loop.COMMIT`).
"""

from __future__ import annotations

from labkit.catalog.versions_pg import BASE_KEY
from labkit.schema import FLAG, INT32, INTEGER, REAL, SERIAL_KEY, TEXT, Both, Column, Index, Table

CATALOG_VERSIONS = Table(
    "catalog_versions",
    (
        Column("version", INTEGER, ("PRIMARY KEY", "CHECK (version >= 0)")),
        Column("tools", TEXT, ("NOT NULL",)),
        Column("tools_hash", TEXT, ("NOT NULL",)),
        Column("ballot_id", INTEGER, ("UNIQUE",)),
        Column(
            "base_version",
            INTEGER,
            (Both("", f"CONSTRAINT {BASE_KEY} REFERENCES catalog_versions (version)"),),
        ),
        Column("committed_at", REAL, ("NOT NULL",)),
    ),
    (
        "CHECK ((version = 0 AND base_version IS NULL AND ballot_id IS NULL)\n"
        "        OR (version > 0 AND base_version = version - 1 AND ballot_id IS NOT NULL))",
    ),
)
CATALOG_READER_STATE = Table(
    "catalog_reader_state",
    (
        Column("reader", TEXT, ("PRIMARY KEY",)),
        Column("last_seen", INTEGER, ("NOT NULL",)),
    ),
)
WM_STORE = Table(
    "wm_store",
    (
        Column("id", INT32, ("PRIMARY KEY", "CHECK (id = 1)")),
        Column("next_ballot", INTEGER, ("NOT NULL",)),
    ),
)
WM_BALLOTS = Table(
    "wm_ballots",
    (
        Column("ballot_id", INTEGER, ("PRIMARY KEY",)),
        Column("observed_watermark", INTEGER, ("NOT NULL",)),
        Column("base_version", INTEGER, ("NOT NULL",)),
        Column("replay_of", INTEGER),
        Column(
            "status",
            TEXT,
            ("NOT NULL", "CHECK (status IN ('inflight', 'committed', 'rejected', 'abandoned'))"),
        ),
        Column("reason", TEXT),
        Column("reserved_at", REAL, ("NOT NULL",)),
        Column("decided_at", REAL),
    ),
    indexes=(Index("wm_ballots_inflight", "ballot_id", where="status = 'inflight'"),),
)
WM_RESPONSES = Table(
    "wm_responses",
    (
        Column("seq", INTEGER, (SERIAL_KEY,)),
        Column("ballot_id", INTEGER, ("NOT NULL",)),
        Column("observed_watermark", INTEGER, ("NOT NULL",)),
        Column("base_version", INTEGER, ("NOT NULL",)),
        Column("tools_hash", TEXT, ("NOT NULL",)),
        Column("committed", FLAG, ("NOT NULL", "CHECK (committed IN (0, 1))")),
        Column("reason", TEXT),
        Column("received_at", REAL, ("NOT NULL",)),
    ),
    # At most one committed response per ballot.
    indexes=(Index("wm_responses_one_commit", "ballot_id", where="committed = 1", unique=True),),
)
WM_HELD = Table(
    "wm_held",
    (
        Column("ballot_id", INTEGER, ("PRIMARY KEY",)),
        Column("fence", INTEGER, ("NOT NULL",)),
        Column("base_version", INTEGER, ("NOT NULL",)),
        Column("base_hash", TEXT),
        Column("tools", TEXT, ("NOT NULL",)),
        Column("received_at", REAL, ("NOT NULL",)),
    ),
)
