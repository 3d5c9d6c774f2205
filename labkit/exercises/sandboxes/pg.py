"""The learner-SQL sandbox on PostgreSQL: which server the part-three checks run on, and the walls
around a learner's statement there (the exercises that use it: `frontier_pg`, notebook 07's,
and `catalog_pg`, notebook 08's).

Every check runs on a server: `use_server(dsn)` names one, else `labkit.pg.shared_server()`
(the notebook's own).

How learner SQL runs (`pg_query` here, `race_write` in `catalog_pg`): in a walled child
(`walls`), as a prepared statement (so one command only), on its own connections into a
throwaway schema made for that check, logged in as that check's own role (`pg_walls`: the
learner is the session user, so it cannot `SET ROLE` back to the checker's superuser), behind
limits it cannot lift from inside its statement (time, locks, temp files; on a server on this
machine, memory; the time limit is met where PostgreSQL looks for a cancel, so a statement is
at most `MOST_CHARS` long); the roles, all they own and the schema are dropped after the check,
whatever its outcome. A query runs READ ONLY; the condition check's queries share one time
budget (`CHECK_MS`). Where the server's user is not a superuser the check makes no role and the
learner's SQL runs as that user. Backend memory is capped only on a server on this machine; the
learner's own kernel can run anything anyway.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import labkit.exercises.sandboxes.pg_walls as pw
import labkit.exercises.sandboxes.sqlite as sandbox
import labkit.pg.instance as pg
import labkit.walls as walls
from labkit.backend import POSTGRES
from labkit.exercises.kit import Wrong, listing, shown

STATEMENT_MS = pw.STATEMENT_MS
LOCK_MS = pw.LOCK_MS
CHECK_MS = 6_000  # the condition check's queries together, over all its situations
# An answer here needs a few hundred characters. The cap bounds what one expression can cost past
# the time limit: PostgreSQL looks for a cancel between rows and calls, not inside every
# operator (a row of many huge numeric products runs on past it, and past pg_terminate_backend).
MOST_CHARS = 1_000
_server: dict[str, str] = {}


class CheckFailed(RuntimeError):
    """The check itself could not run (its process died, its own connection broke): not the
    learner's doing; the message says what to do."""


def use_server(dsn: str | None) -> None:
    """Check against the server at `dsn` (None: back to the notebook's shared server)."""
    if dsn is None:
        _server.pop("dsn", None)
    else:
        _server["dsn"] = dsn


def server_dsn() -> str:
    """The server the checks run on: the one `use_server` named, else the shared one."""
    return _server.get("dsn") or pg.shared_server().dsn


# --- the walls around learner SQL on PostgreSQL ---------------------------------------------


@contextmanager
def learner_schema(
    dsn: str,
    make: Callable[[Any], None],
    grant: tuple[str, ...],
    update: dict[str, tuple[str, ...]] | None = None,
    writers: bool = False,
) -> Iterator[tuple[str, pw.Learner | None]]:
    """A throwaway schema whose tables `make(conn)` creates, and this check's own roles
    (`pg_walls.make_learner`: `grant` on its tables, UPDATE of the `update` columns, a writer
    role if `writers`): yields (schema, learner, or None where the server's user is not a
    superuser). The roles and all they own are dropped afterwards, then the schema."""
    with pg.scratch_schema(dsn, prefix="ex") as schema:
        with pg.connect(dsn, options=pg.search_path_option(schema)) as conn:
            make(conn)
            conn.commit()
            conn.autocommit = True
            learner = (
                pw.make_learner(conn, schema, grant, update, writers)
                if pw.may_make_roles(conn)
                else None
            )
        try:
            yield schema, learner
        finally:
            if learner is not None:
                with pg.connect(dsn, autocommit=True, options="-c lock_timeout=10s") as conn:
                    pw.drop_learner(conn, learner)


def learner_options(schema: str, read_only: bool, statement_ms: int = STATEMENT_MS) -> str:
    """The libpq options of a learner connection: its schema and its limits (the role's own
    settings repeat them, for a server where the check could make no role)."""
    opts = [
        pg.search_path_option(schema),
        f"-c statement_timeout={statement_ms}",
        f"-c lock_timeout={LOCK_MS}",
        "-c idle_in_transaction_session_timeout=10000",
    ]
    if read_only:
        opts.append("-c default_transaction_read_only=on")
    return " ".join(opts)


def learner_sql(
    sql: Any,
    what: str,
    starts: tuple[str, ...],
    names: tuple[str, ...],
    optional: tuple[str, ...] = (),
    advice: Mapping[str, str] | None = None,
) -> str:
    """The learner's statement rendered for psycopg, after the checks every answer must pass:
    a string, one statement, of the right kind, using every one of `names` (`advice`: where a
    missing one goes), and no parameter but those and the `optional` ones."""
    text = sandbox.strip_sql(sql, what)
    length = len(" ".join(text.split()))  # indenting costs nothing
    if length > MOST_CHARS:
        raise Wrong(
            f"{what} is {length:,} characters long without its comments and extra spaces; an "
            f"answer here needs a few hundred, and the check runs none over {MOST_CHARS:,}"
        )
    code = sandbox.code_only(text)
    if not re.match(rf"(?is)^\s*({'|'.join(starts)})\b", code):
        kinds = " or ".join(s.upper() for s in starts)
        raise Wrong(f"{what} must be one {kinds} statement; yours starts {shown(text[:20])}")
    if "?" in code or re.search(r"%s|%\(", code):
        raise Wrong(f"use the named parameters {listing(':' + n for n in names)}, not ? or %s")
    sandbox.require_params(text, names, what, optional, advice)
    known = tuple(dict.fromkeys(names + optional))
    for found in re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", code):
        if found not in known:
            raise Wrong(
                f"{what} uses :{found}, which the check does not bind; the parameters are "
                f"{listing(':' + n for n in known)}"
            )
    return POSTGRES.sql(text)


def explain_pg_error(exc: Exception, what: str, statement_ms: int = STATEMENT_MS) -> str:
    """One line for the learner: which limit stopped `what`, or what PostgreSQL said."""
    import psycopg

    msg = " ".join(str(exc).split())
    msg = msg if len(msg) <= 300 else msg[:299] + "…"
    if isinstance(exc, psycopg.errors.QueryCanceled):
        if statement_ms < STATEMENT_MS:
            return (
                f"{what} used up the {CHECK_MS / 1000:g} s all its runs in this check may take "
                "together, so PostgreSQL stopped it"
            )
        return f"{what} ran longer than {statement_ms / 1000:g} s, so PostgreSQL stopped it"
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return f"{what} waited longer than {LOCK_MS / 1000:g} s for a lock, so it was stopped"
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return f"{what} may only read here: PostgreSQL refused a write ({msg})"
    if isinstance(exc, psycopg.errors.OutOfMemory):
        return f"{what} needed more memory than the check allows, so PostgreSQL stopped it"
    if isinstance(exc, psycopg.errors.ConfigurationLimitExceeded):
        return f"{what} wrote more temporary data than the check allows ({msg})"
    if "multiple commands" in msg:
        return f"{what} must be one statement; PostgreSQL found more than one ({msg})"
    if "could not determine data type of parameter" in msg:
        return (
            f"PostgreSQL could not tell the type of a parameter in {what} ({msg}): cast it, "
            "e.g. CAST(:name AS bigint)"
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return f"{what} touched something the exercise does not open to it: {msg}"
    return f"PostgreSQL could not run {what}: {msg}"


def run_learner(conn: Any, sql: str, params: Mapping[str, Any]) -> Any:
    """The learner's statement on `conn` as a prepared statement: PostgreSQL refuses more than
    one command in one, whatever quoting hides a `;` from `learner_sql`'s look at the text."""
    return conn.execute(sql, dict(params), prepare=True)


def lost_connection(conn: Any, exc: Exception) -> str | None:
    """If `exc` broke `conn` itself (the server or its session ended), say so in one line."""
    if conn.broken or conn.closed:
        return " ".join(str(exc).split())[:300] or type(exc).__name__
    return None


def connection_gone(dsn: str, what: str, reason: str) -> Exception:
    """What a connection lost mid-check means: the server is gone (`PgUnavailable`), or, if it
    still answers, the learner's statement ended its own session (`Wrong`)."""
    try:
        pg.probe(dsn)
    except pg.PgUnavailable as exc:
        return pg.PgUnavailable(
            f"PostgreSQL stopped answering during the check ({reason}); {exc}. Restart the "
            f"kernel to start a fresh server (or check {pg.ENV}), then run the check again"
        )
    return Wrong(
        f"the session {what} ran in was ended while it ran ({reason}); a statement that ends "
        "sessions cannot be judged"
    )


def walled(task: Callable[[], Any], seconds: float, what: str) -> Any:
    """`walls.run_walled(task)`, where what stops the learner's statement is a `Wrong` and a
    check process that dies without a cause of the learner's is `CheckFailed`."""
    try:
        return walls.run_walled(task, seconds=seconds)
    except (walls.TimeLimit, walls.MemoryLimit) as exc:
        raise Wrong(f"{what} {exc}") from None
    except walls.Crashed as exc:
        raise CheckFailed(
            f"the check's own process {exc}, not because of {what}; run the check again"
        ) from None
    except walls.Raised as exc:
        if exc.type_name in ("PgUnavailable", "LearnerLoginRefused"):
            raise pg.PgUnavailable(exc.message) from None
        raise CheckFailed(
            f"the check failed on its own side ({exc}), not because of {what}; run it again"
        ) from None


def _plain(value: Any) -> list[Any]:
    """A value from PostgreSQL as [type name, plain value] (its repr if it is not plain)."""
    kind = type(value).__name__
    return [kind, value if value is None or type(value) in (bool, int, float, str) else repr(value)]


def pg_query(
    dsn: str,
    schema: str,
    learner: pw.Learner | None,
    sql: str,
    params: Mapping[str, Any],
    what: str,
    snapshot: str | None = None,
    statement_ms: int = STATEMENT_MS,
) -> list[list[list[Any]]]:
    """Run the learner's query once in a walled child as the check's learner role, READ ONLY,
    in the exported `snapshot` if one is named (so it sees exactly what the checker's own
    statement saw); at most two rows back, each value as [type name, value]. What stops the
    query becomes a `Wrong` naming `what`; a server or check that fails does not. The
    connection is made here, where the checker may cap its backend's memory (inside the wall
    the learner's process has no power over another user's process); the child inherits it."""
    import psycopg

    opts = learner_options(schema, True, statement_ms)
    try:
        session = pw.connect_as(dsn, learner, options=opts)
    except pw.LearnerLoginRefused as exc:
        raise pg.PgUnavailable(str(exc)) from None

    def task() -> dict[str, Any]:
        from psycopg import sql as pgsql

        with session as conn:
            if snapshot is not None:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.execute(
                    pgsql.SQL("SET TRANSACTION SNAPSHOT {}").format(pgsql.Literal(snapshot))
                )
            try:
                rows = run_learner(conn, sql, params).fetchmany(2)
                conn.rollback()
            except psycopg.Error as exc:
                gone = lost_connection(conn, exc)
                if gone:
                    return {"gone": gone}
                return {"wrong": explain_pg_error(exc, what, statement_ms)}
        return {"rows": [[_plain(v) for v in row] for row in rows]}

    try:
        out = walled(task, statement_ms / 1000 + 2, what)
    finally:
        with contextlib.suppress(psycopg.Error):
            session.close()  # the child's copy ended the session; this one only lets go
    if "gone" in out:
        raise connection_gone(dsn, what, out["gone"])
    if "wrong" in out:
        raise Wrong(out["wrong"])
    return out["rows"]
