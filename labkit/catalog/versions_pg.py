"""How PostgreSQL makes a schema safely, and the key it adds to catalogs made before it had one.

`labkit.catalog.versions` writes every statement and both backends' tables, side by side; this
module holds what only PostgreSQL does around them. Many sessions may open one store at once,
and `CREATE ... IF NOT EXISTS` is not safe against itself there (two sessions may both try to
create the type), so a schema is made under a transaction-level advisory lock keyed on it and
the schema; and a store that is all there gets no DDL at all (it would take table locks that a
running loop's statements can deadlock against). The log's foreign key (each base exists) is
added to a log made before it existed, when that log is next opened. A session that writes a
store refuses `synchronous_commit = off` and pins the value it has (`require_durable_commits`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from labkit.backend import POSTGRES

SYNC_COMMIT_SQL = "SHOW synchronous_commit"
LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext(? || current_schema()))"
# Whether every table and index named exists (`to_regclass` is NULL for a missing one).
PRESENT_SQL = (
    "SELECT bool_and(to_regclass(name) IS NOT NULL) FROM unnest(CAST(? AS text[])) AS name"
)
# Any foreign key on the log counts: a catalog an earlier labkit made has it unnamed.
BASE_KEY = "catalog_versions_base_exists"
HAS_BASE_KEY_SQL = (
    "SELECT 1 FROM pg_constraint WHERE conrelid = 'catalog_versions'::regclass AND contype = 'f'"
)
ADD_BASE_KEY_SQL = (
    f"ALTER TABLE catalog_versions ADD CONSTRAINT {BASE_KEY}"
    " FOREIGN KEY (base_version) REFERENCES catalog_versions (version)"
)


class DurabilityError(RuntimeError):
    """A connection on which a commit PostgreSQL reports could still be lost in a crash."""


# `set_config(..., false)` is a session-level SET whose name and value can be bound.
PIN_SQL = (
    "SELECT set_config(name, value, false)"
    " FROM unnest(CAST(? AS text[]), CAST(? AS text[])) AS pinned (name, value)"
)
# The level a session that relies on READ COMMITTED pins (`pin_settings`).
READ_COMMITTED = {"default_transaction_isolation": "read committed"}


def pin_settings(conn: Any, settings: Mapping[str, str]) -> None:
    """Set `settings` on the psycopg connection `conn` for the rest of its session.

    A session's own setting outranks the server's (postgresql.conf, `ALTER SYSTEM`), a role's
    and a database's, so no later change there, nor a reload, reaches this session; only the
    session itself can (`SET`, `RESET`). The settings are committed in a transaction of their
    own (a `SET` is undone with a transaction that rolls back), so `conn` must have none open
    (`ValueError`); it is left idle, in autocommit or not as it was.
    """
    from psycopg.pq import TransactionStatus

    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise ValueError(
            "pin_settings needs a connection with no open transaction: a setting made inside"
            " one is undone if it rolls back; commit or roll back first"
        )
    with conn.transaction():
        POSTGRES.execute(conn, PIN_SQL, (list(settings), list(settings.values())))


def require_durable_commits(conn: Any, who: str) -> None:
    """Refuse, in one line naming the setting, a session with `synchronous_commit = off`; pin
    any other value for the rest of the session.

    With it off PostgreSQL reports a commit before its WAL record is on disk; a server crash
    then loses commits already reported (and with them the versions and ballot ids that were
    handed out, so a later commit can reuse them). Every other value flushes locally first.
    The pin (`pin_settings`) keeps it so: a later `ALTER SYSTEM` and reload, or a
    role's or database's setting, cannot turn it off under the session; a later `SET` on the
    session itself is its caller's choice. A session with a transaction open is refused too:
    that transaction's rollback would undo the pin.
    """
    from psycopg.pq import TransactionStatus

    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise DurabilityError(
            f"{who} on PostgreSQL needs a connection with no open transaction when it opens: it"
            " pins synchronous_commit for the session, and a rollback would undo that; commit"
            " or roll back first"
        )
    with POSTGRES.reading(conn):
        (value,) = conn.execute(SYNC_COMMIT_SQL).fetchone()
    if value == "off":
        raise DurabilityError(
            f"{who} on PostgreSQL: synchronous_commit is off on this connection, so a commit is"
            " reported before it is on disk and a server crash can lose it; connect with"
            " synchronous_commit=on (the default)"
        )
    pin_settings(conn, {"synchronous_commit": value})


UNLOGGED_SQL = (
    "SELECT COALESCE(string_agg(c.relname, ', ' ORDER BY c.relname), '') FROM pg_class AS c"
    " WHERE c.oid = ANY(SELECT to_regclass(name) FROM unnest(CAST(? AS text[])) AS name)"
    " AND c.relpersistence <> 'p'"
)


def require_logged_tables(conn: Any, tables: list[str], who: str) -> None:
    """Refuse a store whose tables are UNLOGGED or TEMPORARY: PostgreSQL empties an unlogged
    table after a crash, so every commit in it, and the reader's mark, would be gone."""
    with POSTGRES.reading(conn):
        (unlogged,) = POSTGRES.execute(conn, UNLOGGED_SQL, (tables,)).fetchone()
    if unlogged:
        raise DurabilityError(
            f"{who} on PostgreSQL: {unlogged} not crash-safe (UNLOGGED or TEMPORARY), so a"
            " server crash empties it; ALTER TABLE ... SET LOGGED"
        )


def make(conn: Any, ddl: Sequence[str], names: Sequence[str], lock: str) -> None:
    """Inside the caller's transaction: take the schema's lock (keyed on `lock`), then run the
    DDL unless every table and index it creates (`names`) is there already."""
    POSTGRES.execute(conn, LOCK_SQL, (lock,))
    if not POSTGRES.execute(conn, PRESENT_SQL, (list(names),)).fetchone()[0]:
        for statement in ddl:
            conn.execute(statement)


def add_base_key(conn: Any) -> None:
    """Inside the caller's transaction, after `make`: a catalog log made before the base's
    foreign key gets that key (a log the key refuses, with a hole, is left for
    `versions.verify` to name what is wrong)."""
    import psycopg

    if conn.execute(HAS_BASE_KEY_SQL).fetchone() is not None:
        return
    try:
        with conn.transaction():
            conn.execute(ADD_BASE_KEY_SQL)
    except psycopg.errors.ForeignKeyViolation:
        pass  # a broken log: left as it is, for `versions.verify` to name what is wrong
