"""Walls around learner SQL on PostgreSQL, enforced by the server and the OS, not by the SQL.

Each check makes its own LOGIN roles (`make_learner`) and connects AS them, so the learner is
the session user: `SET ROLE`, `set_config('role', ...)` and `SET SESSION AUTHORIZATION` cannot
climb to the checker's superuser. The learner role has no attribute and no membership but, in
the condition exercise, in the check's writer role (to see, and so to signal, its writers'
sessions; it inherits their INSERT and UPDATE, which its READ ONLY queries cannot use; before
PostgreSQL 16 it may also SET ROLE to it). Its settings (`ROLE_SETTINGS`) are defaults: a
statement cannot disarm the time limits already running for it, nor raise `temp_file_limit`
(superuser-only), but it could raise `work_mem`; so where the server runs on this machine and
the checker may, each learner backend's address space is capped too (`bound_backend`, an OS
limit on that process).
`drop_learner` ends the roles' sessions and drops everything they own (large objects too)
after every check. What stays unbounded: backend memory on a server on another machine (no
PostgreSQL setting caps it), and disk written inside one statement's time limit by large
objects (dropped right after the check).
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import sys
import uuid
from dataclasses import dataclass
from typing import Any

from labkit.backend import POSTGRES

ROLE_PREFIX = "labkit_learner_"
CONNECTIONS = 8  # per role: the race opens three at once
VALID_FOR = dt.timedelta(minutes=10)  # a password that outlives a crashed check expires
BACKEND_MEMORY_BYTES = 384 * 2**20  # above what the backend had mapped when it started
STATEMENT_MS = 2_000
LOCK_MS = 6_000
ROLE_SETTINGS: dict[str, str] = {
    "statement_timeout": f"{STATEMENT_MS}ms",
    "lock_timeout": f"{LOCK_MS}ms",
    "idle_in_transaction_session_timeout": "10s",
    "temp_file_limit": "64MB",  # superuser-only: the learner cannot raise it
    "work_mem": "4MB",
    "max_parallel_workers_per_gather": "0",  # workers would escape `bound_backend`
}
END_SESSIONS_SQL = (
    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = ANY(:roles)"
)
ROLES_LEFT_SQL = "SELECT count(*) FROM pg_roles WHERE rolname = ANY(:roles)"
# roles of checks that died before their clean-up; no live check's password has expired
EXPIRED_SQL = (
    "SELECT rolname FROM pg_roles WHERE starts_with(rolname, :prefix) AND rolvaliduntil < now()"
)
DATA_DIR_SQL = "SELECT setting FROM pg_settings WHERE name = 'data_directory'"
IS_SUPERUSER_SQL = "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
VERSION_NUM_SQL = "SELECT current_setting('server_version_num')::int"


class LearnerLoginRefused(RuntimeError):
    """The server would not let the check log in as its own learner role (its pg_hba rules)."""


@dataclass(frozen=True)
class Learner:
    """The roles one check runs as: `role` runs the learner's SQL, `writer` (or None) the
    check's own writers; `password` logs in as either; `data_dir` is the server's data
    directory when the checker may read it (a local server), else None."""

    role: str
    writer: str | None
    password: str
    data_dir: str | None

    def roles(self) -> list[str]:
        return [r for r in (self.role, self.writer) if r]


def may_make_roles(conn: Any) -> bool:
    """True if the checker's user is a superuser (the only case the check makes roles)."""
    return bool(conn.execute(IS_SUPERUSER_SQL).fetchone()[0])


def _create_role(conn: Any, role: str, password: str) -> None:
    from psycopg import sql

    # hashed here, so the clear password never reaches the server's logs
    hashed = conn.pgconn.encrypt_password(password.encode(), role.encode()).decode()
    until = (dt.datetime.now(dt.UTC) + VALID_FOR).isoformat()
    conn.execute(
        sql.SQL(
            "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            " INHERIT CONNECTION LIMIT {} PASSWORD {} VALID UNTIL {}"
        ).format(
            sql.Identifier(role), sql.Literal(CONNECTIONS), sql.Literal(hashed), sql.Literal(until)
        )
    )
    for name, value in ROLE_SETTINGS.items():
        conn.execute(
            sql.SQL("ALTER ROLE {} SET {} = {}").format(
                sql.Identifier(role), sql.Identifier(name), sql.Literal(value)
            )
        )


def make_learner(
    conn: Any,
    schema: str,
    grant: tuple[str, ...],
    update: dict[str, tuple[str, ...]] | None = None,
    writers: bool = False,
) -> Learner:
    """Make this check's roles on `conn` (autocommit, a superuser): the learner may use
    `schema` and hold `grant` (e.g. ("select",)) on its tables, plus UPDATE of the named
    columns per table in `update`; with `writers`, a writer role may write every table and
    sequence there, and the learner sees its sessions in full (pg_stat_activity)."""
    from psycopg import sql

    sweep_expired(conn)
    tag = uuid.uuid4().hex[:12]
    learner = Learner(
        role=f"{ROLE_PREFIX}{tag}",
        writer=f"{ROLE_PREFIX}{tag}_w" if writers else None,
        password=secrets.token_urlsafe(24),
        data_dir=_local_data_dir(conn),
    )
    try:
        s = sql.Identifier(schema)
        for role in learner.roles():
            _create_role(conn, role, learner.password)
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, sql.Identifier(role)))
        me = sql.Identifier(learner.role)
        if grant:
            rights = sql.SQL(", ").join(sql.SQL(p.upper()) for p in grant)
            conn.execute(sql.SQL("GRANT {} ON ALL TABLES IN SCHEMA {} TO {}").format(rights, s, me))
        for table, columns in (update or {}).items():
            cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
            conn.execute(
                sql.SQL("GRANT UPDATE ({}) ON {}.{} TO {}").format(
                    cols, s, sql.Identifier(table), me
                )
            )
        if learner.writer:
            w = sql.Identifier(learner.writer)
            # the learner inherits these, but its queries run READ ONLY
            conn.execute(
                sql.SQL("GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {} TO {}").format(
                    s, w
                )
            )
            conn.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(s, w))
            # membership only to see the writers' sessions; SET is refused from PostgreSQL 16
            how = (
                " WITH INHERIT TRUE, SET FALSE"
                if conn.execute(VERSION_NUM_SQL).fetchone()[0] >= 160000
                else ""
            )
            conn.execute(sql.SQL("GRANT {} TO {}" + how).format(w, me))
    except BaseException:
        drop_learner(conn, learner)
        raise
    return learner


def drop_learner(conn: Any, learner: Learner) -> None:
    """End every session of the check's roles (a killed check leaves its statements running),
    then drop all they own in this database (large objects too) and the roles themselves."""
    from psycopg import sql

    roles = learner.roles()
    POSTGRES.execute(conn, END_SESSIONS_SQL, {"roles": roles})
    names = sql.SQL(", ").join(sql.Identifier(r) for r in roles)
    if POSTGRES.execute(conn, ROLES_LEFT_SQL, {"roles": roles}).fetchone()[0]:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(names))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(names))


def sweep_expired(conn: Any) -> None:
    """Drop the roles of earlier checks that never cleaned up (a killed kernel on a shared
    server), once their password has expired."""
    for (role,) in POSTGRES.execute(conn, EXPIRED_SQL, {"prefix": ROLE_PREFIX}).fetchall():
        drop_learner(conn, Learner(role, None, "", None))


def _local_data_dir(conn: Any) -> str | None:
    """The server's data directory if it may run on this machine (a Unix socket or loopback;
    `bound_backend` checks each pid before it acts) and this is Linux; else None."""
    host = conn.info.host or ""
    local = host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")
    if not local or not sys.platform.startswith("linux"):
        return None
    return str(conn.execute(DATA_DIR_SQL).fetchone()[0])


def connect_as(dsn: str, learner: Learner | None, role: str | None = None, **kw: Any) -> Any:
    """A connection to `dsn` as the learner's `role` (default: the learner role), capped by
    `bound_backend`; as the DSN's own user when the check made no roles. A login the server
    refuses is `LearnerLoginRefused`, naming what to change."""
    import psycopg

    import labkit.pg.instance as pg

    if learner is None:
        return pg.connect(dsn, **kw)
    role = role or learner.role
    try:
        conn = psycopg.connect(
            dsn, user=role, password=learner.password, connect_timeout=pg.CONNECT_TIMEOUT_S, **kw
        )
    except psycopg.OperationalError as exc:
        reason = pg.mask_dsn(" ".join(str(exc).split()))
        if "authentication" in reason or "pg_hba" in reason or "password" in reason:
            raise LearnerLoginRefused(
                f"the PostgreSQL server at {pg.mask_dsn(dsn)} refused a login as the check's own "
                f"role {role} ({reason}); let new roles log in with a password there "
                "(pg_hba.conf), "
                "or unset LABKIT_PG_DSN to use the embedded server"
            ) from None
        raise pg.PgUnavailable(
            f"PostgreSQL at {pg.mask_dsn(dsn)} stopped answering: {reason}"
        ) from None
    if role == learner.role:
        bound_backend(conn, learner)
    return conn


def bound_backend(conn: Any, learner: Learner) -> bool:
    """Cap the address space of `conn`'s server process at what it has now plus
    `BACKEND_MEMORY_BYTES` (an allocation past it is PostgreSQL's "out of memory" error).
    Only on a local Linux server (prlimit and /proc), for a process whose parent is the
    postmaster named in the data directory's `postmaster.pid` (so the pid is really that
    server's backend); True if the cap is in place. Elsewhere the role's own limits
    (work_mem, temp_file_limit, timeouts) still hold."""
    if learner.data_dir is None or not sys.platform.startswith("linux"):
        return False
    return _bound_linux_backend(conn.info.backend_pid, learner.data_dir)


if sys.platform.startswith("linux"):

    def _bound_linux_backend(pid: int, data_dir: str) -> bool:
        """`bound_backend` for backend `pid` of the server in `data_dir`, on Linux."""
        try:
            # a backend's parent is the postmaster (read from /proc/pid/stat, which any user
            # may: the walls take root's power to trace another user's process, which reading
            # its working directory needs)
            with open(f"{data_dir}/postmaster.pid") as f:
                postmaster = int(f.readline())
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if parent != postmaster:
                return False
            with open(f"/proc/{pid}/statm") as f:
                pages = int(f.read().split()[0])
            owner = os.stat(f"/proc/{pid}").st_uid
        except (OSError, ValueError, IndexError):
            return False
        cap = pages * os.sysconf("SC_PAGE_SIZE") + BACKEND_MEMORY_BYTES
        return _prlimit_as(pid, owner, cap)

    def _prlimit_as(pid: int, owner: int, cap: int) -> bool:
        """Set RLIMIT_AS of process `pid` to `cap`. The kernel lets only the process's own user
        do it (without CAP_SYS_RESOURCE), so root does it from a throwaway child that becomes
        `owner` first; any other user only for its own processes."""
        import resource

        if os.geteuid() == owner:
            try:
                resource.prlimit(pid, resource.RLIMIT_AS, (cap, cap))
            except OSError:
                return False
            return True
        if os.geteuid() != 0:
            return False
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the forked child, which only exits
            code = 1
            try:
                os.setgroups([])
                os.setgid(os.stat(f"/proc/{pid}").st_gid)
                os.setuid(owner)
                resource.prlimit(pid, resource.RLIMIT_AS, (cap, cap))
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        return os.waitstatus_to_exitcode(status) == 0
