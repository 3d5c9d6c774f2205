"""Part three's exercises, on a real PostgreSQL server: predict from two written interleavings
which rows Article 1's rule orphans, write the condition under which a frontier may pass an id
(after notebook 07); write the guarded write that makes check-then-write safe, and the same for
a catalog kept per tenant (08).

Every check runs on a server: `use_server(dsn)` names one, else `labkit.pg.shared_server()`
(the notebook's own). The interleavings run in a real `CommitOrderLab`; the condition is judged
against the statement `delivered_frontier` runs, both in one exported snapshot taken while no
transaction outside the check runs (else `ServerBusy`: on a shared server the check waits,
then says it could not judge); the writes are raced on real connections.

How learner SQL runs (`pg_query`, `race_write`): in a walled child (`walls`), as a prepared
statement (so one command only), on its own connections into a throwaway schema made for that
check, logged in as that check's own role (`pg_walls`: the learner is the session user, so it
cannot `SET ROLE` back to the checker's superuser), behind limits it cannot lift from inside
its statement (time, locks, temp files; on a server on this machine, memory); the roles, all they own and the schema are dropped after the check,
whatever its outcome. A query runs READ ONLY; the condition check's queries share one time
budget (`CHECK_MS`). Where the server's user is not a superuser the check makes no role and the
learner's SQL runs as that user. Backend memory is capped only on a server on this machine;
the learner's own kernel can run anything anyway.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import labkit.exercises.pg_walls as pw
import labkit.exercises.sandbox as sandbox
import labkit.exercises.walls as walls
import labkit.frontier.log as fr
import labkit.frontier.log_pg as fpg
import labkit.pg.ballots as pb
import labkit.pg.commit_order as co
import labkit.pg.instance as pg
from labkit.backend import POSTGRES
from labkit.exercises.kit import Exercise, Wrong, by_label, learner_items, listing, shown, whole

STATEMENT_MS = pw.STATEMENT_MS
LOCK_MS = pw.LOCK_MS
# The held race's first writer holds its row at most RACE_WAIT_S; the others' statements wait
# behind it, so their statement and lock time limits leave as much again to spare.
RACE_WAIT_S = 2.0
RACE_STATEMENT_MS = STATEMENT_MS + int(2 * RACE_WAIT_S * 1000)
CHECK_MS = 6_000  # the condition check's queries together, over all its situations
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

WAITING_SQL = (
    "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids) AND wait_event_type = 'Lock'"
)


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


def _run_learner(conn: Any, sql: str, params: Mapping[str, Any]) -> Any:
    """The learner's statement on `conn` as a prepared statement: PostgreSQL refuses more than
    one command in one, whatever quoting hides a `;` from `learner_sql`'s look at the text."""
    return conn.execute(sql, dict(params), prepare=True)


def _lost(conn: Any, exc: Exception) -> str | None:
    """If `exc` broke `conn` itself (the server or its session ended), say so in one line."""
    if conn.broken or conn.closed:
        return " ".join(str(exc).split())[:300] or type(exc).__name__
    return None


def _connection_gone(dsn: str, what: str, reason: str) -> Exception:
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


def _walled(task: Callable[[], Any], seconds: float, what: str) -> Any:
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
    query becomes a `Wrong` naming `what`; a server or check that fails does not."""

    def task() -> dict[str, Any]:
        import psycopg
        from psycopg import sql as pgsql

        opts = learner_options(schema, True, statement_ms)
        with pw.connect_as(dsn, learner, options=opts) as conn:
            if snapshot is not None:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.execute(
                    pgsql.SQL("SET TRANSACTION SNAPSHOT {}").format(pgsql.Literal(snapshot))
                )
            try:
                rows = _run_learner(conn, sql, params).fetchmany(2)
                conn.rollback()
            except psycopg.Error as exc:
                gone = _lost(conn, exc)
                if gone:
                    return {"gone": gone}
                return {"wrong": explain_pg_error(exc, what, statement_ms)}
        return {"rows": [[_plain(v) for v in row] for row in rows]}

    out = _walled(task, statement_ms / 1000 + 2, what)
    if "gone" in out:
        raise _connection_gone(dsn, what, out["gone"])
    if "wrong" in out:
        raise Wrong(out["wrong"])
    return out["rows"]


# --- lesson 07: predict from a written interleaving which rows Article 1's rule orphans -----

# Two interleavings other than notebook 07's: in P a writer holds two ids and a third one is
# taken after the other writer's commit; in Q the late commit lands before the first summary.
SCRIPTS: dict[str, tuple[tuple[str, str], ...]] = {
    "P": (
        ("A", "insert"),
        ("B", "insert"),
        ("B", "insert"),
        ("B", "commit"),
        ("worker", "deliver"),
        ("A", "insert"),
        ("worker", "summarize"),
        ("A", "commit"),
        ("worker", "deliver"),
        ("worker", "summarize"),
    ),
    "Q": (
        ("A", "insert"),
        ("B", "insert"),
        ("B", "commit"),
        ("worker", "deliver"),
        ("A", "commit"),
        ("worker", "summarize"),
        ("worker", "deliver"),
        ("worker", "summarize"),
    ),
}


def script_text(script: Iterable[tuple[str, str]]) -> str:
    """A script as numbered steps: '1. A insert, 2. B insert, ...'."""
    return ", ".join(f"{k}. {actor} {action}" for k, (actor, action) in enumerate(script, 1))


def run_script(label: str, dsn: str | None = None) -> co.LabState:
    """Run interleaving `label` ("P" or "Q") in a real `CommitOrderLab`: the "then run it"."""
    with co.CommitOrderLab(dsn or server_dsn()) as lab:
        return lab.run(SCRIPTS[label])


def _id_set(value: Any, label: str) -> set[int]:
    if isinstance(value, dict) and not value:
        raise Wrong(f"{label}: {{}} is an empty dict in Python, not a set; write set() for none")
    if (
        isinstance(value, str | bytes)
        or not isinstance(value, Iterable)
        or isinstance(value, Mapping)
    ):
        raise Wrong(
            f"{label}: give a set of row ids, e.g. {{6, 9}} (or set() for none); "
            f"{shown(value)} is a {type(value).__name__}"
        )
    each = f"{label}: each id"
    return set(learner_items(value, f"the set for {label}", lambda i: whole(i, each), noun="ids"))


def _orphan_parts(answer: Any) -> dict[str, set[int]]:
    if not isinstance(answer, Mapping):
        raise Wrong(
            "give a dict from interleaving to the set of ids orphaned, e.g. "
            f"{{'P': {{6, 9}}, 'Q': {{7}}}}; yours is a {type(answer).__name__}"
        )
    keyed = by_label(answer)
    missing = [k for k in SCRIPTS if k not in keyed]
    if missing:
        raise Wrong(f"give an entry for every interleaving; missing: {listing(missing)}")
    extra = [k for k in keyed if k not in SCRIPTS]
    if extra:
        raise Wrong(f"there are interleavings {listing(SCRIPTS)} only, not {listing(extra)}")
    return {k: _id_set(keyed[k], k) for k in SCRIPTS}


def _not_orphaned_because(row: co.Row) -> str:
    """Why a row the learner named is not an orphan under Article 1's rule."""
    step = row.summarized.get("id_order")
    if step is not None:
        return (
            f"row {row.row_id} is in a summary: the summarize at step {step + 1} covered it, "
            "and it was committed and delivered by then. A row is orphaned only if the "
            "checkpoint passed it while its writer had not committed"
        )
    return f"row {row.row_id} ends in no summary, but the checkpoint never passed it"


def _check_orphans(answer: Any) -> str:
    said = _orphan_parts(answer)
    dsn = server_dsn()
    notes: list[str] = []
    waits: list[str] = []
    for label in SCRIPTS:
        state = run_script(label, dsn)
        real = set(state.orphans["id_order"])
        ids = {r.row_id: r for r in state.rows}
        unknown = sorted(said[label] - set(ids))
        if unknown:
            raise Wrong(
                f"{label}: interleaving {label} only takes ids {min(ids)} to {max(ids)} "
                f"(one per insert, counting from 1); {listing(unknown)} never exists"
            )
        extra = sorted(said[label] - real)
        if len(extra) == 1 and said[label] == real | set(extra):  # the sole error: name it
            raise Wrong(f"{label}: {_not_orphaned_because(ids[extra[0]])}.")
        if extra:
            raise Wrong(
                f"{label}: some of your ids are not orphans: each either ends in a summary "
                "(committed and delivered before the summarize that passed it) or was never "
                "passed by the checkpoint. For each id, find the summarize that first moved "
                "the checkpoint past it and ask whether its writer had committed by then"
            )
        if said[label] != real:
            raise Wrong(
                f"{label}: your answer misses at least one orphaned id. Find each summarize "
                "step and ask which ids were taken but not yet committed then, yet lie below "
                "the largest id the worker could see"
            )
        notes.append(f"{label} orphans {listing(sorted(real)) if real else 'nothing'}")
        held = sorted(state.orphans["horizon"])
        if held:
            waits.append(f"id {listing(held)} in {label}")
    lost = " and ".join(waits) if waits else "no row in either"
    return (
        "both match a real run on PostgreSQL (" + "; ".join(notes) + "). In the same runs the "
        f"xmin horizon wait, which summarized alongside, orphaned {lost}."
    )


interleaving_ex = Exercise(
    name="Predict the orphans",
    question=(
        "Two writer connections A and B and one worker share a fresh log in a CommitOrderLab "
        "(each insert takes the next id, counting from 1; a writer's rows become visible when it "
        "commits; 'deliver' delivers every pending row the worker can see; 'summarize' moves "
        "Article 1's checkpoint to id_order_frontier and summarizes up to it). "
        f"Interleaving P: {script_text(SCRIPTS['P'])}. "
        f"Interleaving Q: {script_text(SCRIPTS['Q'])}. "
        "Which ids does Article 1's rule orphan (delivered, under its checkpoint, in no summary) "
        "in each? Answer a dict of two sets of whole numbers, shaped like "
        "{'P': {6, 9}, 'Q': {7}} (other ids; set() for none)."
    ),
    checker=_check_orphans,
    hints=(
        "Only the summarize steps move the checkpoint. For each one, write down what the worker "
        "can see at that moment and what is still hidden inside an open transaction.",
        "At a summarize, Article 1's rule takes one less than the smallest visible open id, else "
        "the largest visible id. An id is orphaned when that checkpoint passes it while its "
        "writer has not committed: when it appears later, the checkpoint never comes back.",
        "In P, at step 7 the worker sees B's ids, both delivered, and nothing open, while A "
        "holds ids the worker cannot see: where does the checkpoint go, and which of A's ids "
        "lie below it? In Q, at step 6: has A committed yet, and is every visible row "
        "delivered? Then {'P': ____, 'Q': ____}.",
    ),
    solution_text=(
        "answer = {'P': {1}, 'Q': set()}. P: at step 7 the checkpoint jumps to 3 (the largest "
        "visible id; nothing visible is open), passing id 1 while A holds it; id 4 lies above "
        "3 and is summarized later, so only 1 is orphaned. Q: A commits at step 5, before any "
        "summary, and id 1 is still pending at step 6, so the checkpoint stays at 0; both rows "
        "end in the last summary."
    ),
)


# --- lesson 07: the condition under which a frontier may pass an id --------------------------

TAKE_XACT_SQL = "SELECT pg_current_xact_id()"
IDLE_SQL = "SELECT 1"
SHARD = "main"


@dataclass(frozen=True)
class Moment:
    """One situation on the server when the condition is asked: who is open, and why the
    frontier may or may not pass (said when the learner's condition disagrees)."""

    label: str
    if_pass: str  # the mistake when the learner's condition passes here, wrongly
    if_hold: str  # the mistake when it holds back here, wrongly
    own: bool = False  # :xact is taken by the asking transaction, which stays open


class _Writers:
    """Writer connections into the check's schema, each a transaction the check opens and ends."""

    def __init__(self, dsn: str, schema: str, learner: pw.Learner | None = None) -> None:
        self.dsn, self.schema, self.learner = dsn, schema, learner
        self.conns: dict[str, Any] = {}

    def conn(self, name: str) -> Any:
        """Writer `name`'s connection, as the check's writer role (whose sessions the learner
        may see) where the check made one."""
        if name not in self.conns:
            opts = pg.search_path_option(self.schema)
            if self.learner is not None and self.learner.writer:
                role = self.learner.writer
                self.conns[name] = pw.connect_as(self.dsn, self.learner, role, options=opts)
            else:
                self.conns[name] = pg.connect(self.dsn, options=opts)
        return self.conns[name]

    def insert(self, name: str) -> int:
        return fr.enqueue(self.conn(name), SHARD, 1)

    def idle(self, name: str) -> None:
        self.conn(name).execute(IDLE_SQL)  # opens a transaction that never takes an xact id

    def xact_ids(self) -> set[int]:
        """The transaction ids the writers hold now."""
        found = (c.execute(fpg.OWN_XACT_SQL).fetchone()[0] for c in self.conns.values())
        return {int(str(x)) for x in found if x is not None}

    def end_all(self) -> None:
        """Roll every writer back; a session ended from outside stays ended (see `ended`)."""
        import psycopg

        for conn in self.conns.values():
            try:
                conn.rollback()
            except psycopg.OperationalError:
                conn.close()

    def ended(self) -> list[str]:
        """The writers whose sessions were ended from outside (the learner's role may signal
        them: it sees them in pg_stat_activity through its membership)."""
        return [name for name, conn in self.conns.items() if conn.broken or conn.closed]

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


_OLDER_OPEN = (
    "your condition lets the frontier pass while a transaction older than :xact is still "
    "running. That transaction may hold an id the frontier cannot see yet (its row is invisible "
    "until it commits); look at the transactions still running, not at the rows"
)
_NOTHING_OLDER = (
    "your condition holds the frontier back although every transaction older than :xact has "
    "ended{how}: nothing can still appear below the frontier, and a frontier that waits "
    "here waits forever"
)


def _moments() -> list[tuple[Moment, Callable[[_Writers], None], Callable[[_Writers], None]]]:
    """(moment, set-up before :xact is taken, set-up after it) for each situation checked."""

    def none(_: _Writers) -> None:
        return None

    def older(w: _Writers) -> None:
        w.insert("A")

    def two_older(w: _Writers) -> None:
        w.insert("A")
        w.insert("B")
        w.conn("B").commit()

    def older_then_commit(w: _Writers) -> None:
        w.insert("A")

    def commit_a(w: _Writers) -> None:
        w.conn("A").commit()

    def rollback_a(w: _Writers) -> None:
        w.conn("A").rollback()

    def younger(w: _Writers) -> None:
        w.insert("A")
        w.conn("Z").execute(TAKE_XACT_SQL)  # a later transaction ends, so snapshots list A's
        w.conn("Z").commit()  # id among those running (xip), not above them all (xmax)

    def idle(w: _Writers) -> None:
        w.idle("A")

    return [
        (Moment("a writer older than :xact holds an uncommitted id", _OLDER_OPEN, ""), older, none),
        (
            Moment(
                "two writers older than :xact; the one with the larger id committed, the other "
                "still holds the smaller id",
                _OLDER_OPEN + ". Every row you can see may be settled here: the larger id "
                "committed first",
                "",
            ),
            two_older,
            none,
        ),
        (
            Moment(
                "a writer older than :xact inserted, then committed",
                "",
                _NOTHING_OLDER.format(how=" (it committed)"),
            ),
            older_then_commit,
            commit_a,
        ),
        (
            Moment(
                "a writer older than :xact inserted, then rolled back",
                "",
                _NOTHING_OLDER.format(how=" (it rolled back: its id is a hole for ever)"),
            ),
            older_then_commit,
            rollback_a,
        ),
        (
            Moment(
                "a writer that began after :xact was taken holds an uncommitted id",
                "",
                "your condition holds the frontier back for a transaction YOUNGER than :xact. "
                "It took its id after :xact was taken, so its id is larger than every id the "
                "frontier saw: it cannot hide one. Only older transactions matter",
            ),
            none,
            younger,
        ),
        (
            Moment(
                "a session older than :xact is idle in a transaction that never wrote",
                "",
                "your condition holds the frontier back for a session that is idle in a "
                "transaction but never wrote: it has no transaction id, so it holds no id "
                "(every insert takes a transaction id before its id). Ask about transaction "
                "ids, not sessions or start times",
            ),
            idle,
            none,
        ),
        (Moment("nothing else is running", "", _NOTHING_OLDER.format(how="")), none, none),
        (
            Moment(
                "the frontier asks inside the transaction that took :xact (delivered_frontier "
                "called inside a caller's transaction), and nothing else is running",
                "",
                "your condition holds the frontier back although no transaction older than "
                ":xact is running. Here the transaction asking is the one that took :xact: it "
                "is still running while it asks, so the oldest transaction still running is "
                ":xact itself, never younger; a frontier that waits for :xact's transaction to "
                "end waits for ever, since that transaction is the one waiting",
                own=True,
            ),
            none,
            none,
        ),
    ]


EXPORT_SNAPSHOT_SQL = "SELECT pg_export_snapshot()"


def export_snapshot(conn: Any) -> str:
    """Open a REPEATABLE READ transaction on `conn` (no other open) and export its snapshot."""
    import psycopg

    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    return str(conn.execute(EXPORT_SNAPSHOT_SQL).fetchone()[0])


XIP_SQL = "SELECT pg_snapshot_xip(pg_current_snapshot())::text"
QUIET_TRIES = 100
QUIET_POLL_S = 0.02


class ServerBusy(RuntimeError):
    """Sessions outside the check kept transactions open, so it could not set its scene."""


def horizon_passed(conn: Any, xact: str) -> bool:
    """What `delivered_frontier` itself decides, in the statement it runs: may it pass now?"""
    params = {"xact": xact, "key": SHARD, "base": 0}
    return bool(POSTGRES.execute(conn, fr.HORIZON_CHECK_SQL, params).fetchone()[0])


def _truth(value: list[Any], label: str) -> bool:
    """The learner's one value as a bool; `Wrong` naming its type if it is not one."""
    kind, got = value
    if kind == "bool":
        return bool(got)
    if got is None:
        raise Wrong(
            f"when {label}, your query returned NULL; it must return true or false "
            "(a comparison with NULL is NULL: is every operand defined?)"
        )
    raise Wrong(
        f"your query must return a boolean, true or false; it returned {shown(got)}, of the "
        f"Python type {kind}. "
        "Write the condition itself, e.g. SELECT a >= b"
    )


def _ask_in(
    moment: Moment,
    before: Callable[[_Writers], None],
    after: Callable[[_Writers], None],
    dsn: str,
    schema: str,
    learner: pw.Learner | None,
    text: str,
    ref: Any,
    snap: Any,
    deadline: float | None = None,
) -> tuple[bool, list[list[list[Any]]]]:
    """Set the moment's scene, then ask delivered_frontier's test and the learner's query in
    one snapshot. The scene is judged only when no transaction outside the check is running
    (on a shared server an older one would hold every moment back, a younger one would change
    what a wrong answer gets told); until then the check ends its own transactions, waits and
    sets the scene again, so two checks never wait on each other. The query gets what is left
    before `deadline` (time.monotonic()), at most STATEMENT_MS."""
    import psycopg

    rng = random.Random(os.getpid())  # apart, two waiting checks retry at different moments
    for _ in range(QUIET_TRIES):
        writers = _Writers(dsn, schema, learner)
        try:
            before(writers)
            if moment.own:  # as delivered_frontier in a caller's READ COMMITTED transaction
                snap.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
                xact = str(snap.execute(TAKE_XACT_SQL).fetchone()[0])
                after(writers)
                shared = str(snap.execute(EXPORT_SNAPSHOT_SQL).fetchone()[0])
            else:
                xact = str(ref.execute(TAKE_XACT_SQL).fetchone()[0])
                after(writers)
                shared = export_snapshot(snap)
            running = {int(r[0]) for r in snap.execute(XIP_SQL).fetchall()}
            if not running - writers.xact_ids():
                may = horizon_passed(snap, xact)
                left = STATEMENT_MS
                if deadline is not None:
                    left = min(left, int((deadline - time.monotonic()) * 1000))
                if left < 1:
                    raise Wrong(
                        f"your query used up the {CHECK_MS / 1000:g} s all its runs in this "
                        "check may take together"
                    )
                params = {"xact": xact}
                rows = pg_query(dsn, schema, learner, text, params, "your query", shared, left)
                writers.end_all()
                if writers.ended():
                    raise Wrong(
                        "your query ended sessions the check had opened beside it (its "
                        f"writers {listing(writers.ended())}); a condition only reads"
                    )
                return may, rows
        finally:
            snap.rollback()
            writers.end_all()
            writers.close()
        time.sleep(QUIET_POLL_S * (1 + rng.random()))
    raise ServerBusy(
        f"while setting up the moment '{moment.label}', other sessions on this PostgreSQL "
        "server kept transactions open, so the check could not tell what your condition "
        "decides; run it again"
    )


def _check_condition(sql: Any) -> str:
    advice = {"xact": "compare the transactions still running against :xact"}
    text = learner_sql(sql, "your query", ("select", "with"), ("xact",), advice=advice)
    dsn = server_dsn()
    moments = _moments()
    with learner_schema(dsn, fr.create_schema, ("select",), writers=True) as (schema, learner):
        opts = pg.search_path_option(schema)
        with (
            pg.connect(dsn, autocommit=True, options=opts) as ref,
            pg.connect(dsn, options=opts) as snap,
        ):
            deadline = time.monotonic() + CHECK_MS / 1000
            for moment, before, after in moments:
                may, rows = _ask_in(
                    moment, before, after, dsn, schema, learner, text, ref, snap, deadline
                )
                if len(rows) != 1 or len(rows[0]) != 1:
                    cols = len(rows[0]) if rows else 0
                    raise Wrong(
                        f"your query returned {'more than one' if len(rows) > 1 else len(rows)} "
                        f"row(s) of {cols} column(s); it must return one value, true or false"
                    )
                said = _truth(rows[0][0], moment.label)
                if said != may:
                    why = moment.if_pass if said else moment.if_hold
                    raise Wrong(f"when {moment.label}: {why}.")
    return (
        f"it agreed with delivered_frontier's own test in all {len(moments)} situations: older "
        "transactions hold the frontier, younger ones and idle sessions without a transaction id "
        "do not."
    )


condition_ex = Exercise(
    name="When may a frontier pass an id",
    question=(
        "The frontier has read v, the largest id it can see, and in the same statement taken a "
        "fresh transaction id, bound as the text parameter :xact (cast it: CAST(:xact AS xid8)). "
        "Write ONE SELECT returning one boolean: true when the frontier may now pass every id up "
        "to v (no transaction that could still commit one of them is alive), false while it "
        "must wait. The check asks it in eight situations on a real server (writers open and "
        "closed around :xact, and once inside the very transaction that took :xact) and "
        "compares with delivered_frontier's own test. Answer a string "
        'of SQL, shaped like "SELECT now() > CAST(:start AS timestamptz)" (other functions, '
        "other parameter)."
    ),
    checker=_check_condition,
    hints=(
        "Every id up to v was taken by a transaction whose id is smaller than :xact. So the "
        "question is about transactions, not rows: which of them may still be running?",
        "A snapshot knows the oldest transaction still running: pg_snapshot_xmin("
        "pg_current_snapshot()). Transactions that began after :xact was taken do not matter; "
        "compare the two transaction ids.",
        "SELECT pg_snapshot_xmin(pg_current_snapshot()) ____ CAST(:xact AS xid8): which "
        "comparison says that the oldest transaction still running is not older than :xact?",
    ),
    solution_text=(
        "SELECT pg_snapshot_xmin(pg_current_snapshot()) >= CAST(:xact AS xid8). The snapshot's "
        "xmin is the oldest transaction id still running; once it has reached :xact, every "
        "transaction that took an id up to v has ended, committed or rolled back. Equivalent: "
        "no id in pg_snapshot_xip(pg_current_snapshot()) is below :xact."
    ),
)


# --- lesson 08: the guarded write, raced on real connections --------------------------------

START_VERSION = 5
WRITE_SHAPE = '"UPDATE stock SET qty = :qty WHERE sku = :sku"'  # an answer's shape, not ours
TENANT_SCHEMA_SQL = (
    "CREATE TABLE tenant_catalog (tenant text PRIMARY KEY, version bigint NOT NULL,"
    " tools text NOT NULL)"
)
TENANT_INIT_SQL = "INSERT INTO tenant_catalog (tenant, version, tools) VALUES (?, ?, ?)"
TENANT_STATE_SQL = "SELECT tenant, version, tools FROM tenant_catalog ORDER BY tenant"
TENANT_SET_SQL = "UPDATE tenant_catalog SET version = ?, tools = ? WHERE tenant = ?"
NAIVE_STATE_ALL_SQL = "SELECT id, version, tools FROM naive_catalog ORDER BY id"
NAIVE_SET_SQL = "UPDATE naive_catalog SET version = ?, tools = ? WHERE id = ?"


@dataclass(frozen=True)
class Worker:
    """A worker of a race: its name, the catalog row it writes (tenant, or 1 for the one row),
    and its answer."""

    name: str
    key: Any
    tools: str


@dataclass(frozen=True)
class Race:
    """One catalog table and the workers that race on it; the statements that set it up."""

    table: str
    noun: str  # how feedback names one row: "the catalog" or "tenant"
    keys: tuple[Any, ...]
    workers: tuple[Worker, ...]
    make: Callable[[Any], None]
    init: Callable[[Any, Any, int, str], None]  # (conn, key, version, tools): one row
    state_sql: str  # every row: key, version, tools
    set_sql: str  # (version, tools, key)
    params: tuple[str, ...]
    updatable: tuple[str, ...] = ("version", "tools")  # the columns a write may change

    def row(self, key: Any) -> str:
        return "the catalog" if len(self.keys) == 1 else f"tenant {key!r}"

    def bind(self, worker: Worker, seen: int) -> dict[str, Any]:
        out: dict[str, Any] = {"seen": seen, "tools": worker.tools}
        if "tenant" in self.params:
            out["tenant"] = worker.key
        return out


def _make_naive(conn: Any) -> None:
    conn.execute(pb.NAIVE_SCHEMA_SQL)


def _make_tenants(conn: Any) -> None:
    conn.execute(TENANT_SCHEMA_SQL)


def _init_naive(conn: Any, key: Any, version: int, tools: str) -> None:
    conn.execute(pb.NAIVE_INIT_SQL, (version, tools))  # the one row, id 1


def _init_tenant(conn: Any, key: Any, version: int, tools: str) -> None:
    POSTGRES.execute(conn, TENANT_INIT_SQL, (key, version, tools))


NAIVE = Race(
    table="naive_catalog",
    noun="catalog",
    keys=(1,),
    workers=(
        Worker("A", 1, "answer of A"),
        Worker("B", 1, "answer of B"),
        Worker("C", 1, "answer of C"),
    ),
    make=_make_naive,
    init=_init_naive,
    state_sql=NAIVE_STATE_ALL_SQL,
    set_sql=NAIVE_SET_SQL,
    params=("seen", "tools"),
)
TENANTS = Race(
    table="tenant_catalog",
    noun="tenant",
    keys=("acme", "zenith"),
    workers=(
        Worker("A", "acme", "acme: answer of A"),
        Worker("B", "acme", "acme: answer of B"),
        Worker("C", "zenith", "zenith: answer of C"),
    ),
    make=_make_tenants,
    init=_init_tenant,
    state_sql=TENANT_STATE_SQL,
    set_sql=TENANT_SET_SQL,
    params=("tenant", "seen", "tools"),
)


@dataclass(frozen=True)
class Stage:
    """One trial of the learner's write: the rows before it (key -> version), the workers
    who write (all having read `seen`), and how: "alone", "held" (the first holds its row
    while the others start, then commits) or "free" (all at once from a barrier)."""

    name: str
    versions: tuple[tuple[Any, int], ...]
    workers: tuple[str, ...]
    seen: int
    how: str
    title: str  # how feedback names the trial: "the first trial (a current read)"


def _stages(race: Race) -> list[Stage]:
    v = START_VERSION
    first = race.workers[0]
    fresh = tuple((k, v) for k in race.keys)
    moved = tuple((k, v + 1 if k == first.key else v) for k in race.keys)
    everyone = tuple(w.name for w in race.workers)
    return [
        Stage("current", fresh, (first.name,), v, "alone", "the first trial (a current read)"),
        Stage("stale", moved, (first.name,), v, "alone", "the second trial (a stale read)"),
        Stage("held", fresh, everyone, v, "held", "the third trial (a race, one writer first)"),
        Stage("free", fresh, everyone, v, "free", "the fourth trial (a race, all at once)"),
        Stage("free again", fresh, everyone, v, "free", "the fifth trial (a race, all at once)"),
    ]


def _start_tools(key: Any, version: int) -> str:
    return f"answer {version}" if key == 1 else f"{key}: answer {version}"


def _execute(
    dsn: str, race: Race, sql: str, schema: str, learner: pw.Learner | None, stage: Stage
) -> dict[str, Any]:
    """In the walled child: reset the table, run one stage, read the table back. Returns
    {"error": str | None, "gone": str | None, "counts": {worker: rows}, "order": [workers, by
    commit], "rows": {key: [version, tools]}}; "gone" says a learner connection broke."""
    import psycopg

    by_name = {w.name: w for w in race.workers}
    with pg.connect(dsn, autocommit=True, options=pg.search_path_option(schema)) as admin:
        for key, version in stage.versions:
            POSTGRES.execute(admin, race.set_sql, (version, _start_tools(key, version), key))
        opts = learner_options(schema, False, RACE_STATEMENT_MS)
        conns = {n: pw.connect_as(dsn, learner, options=opts) for n in stage.workers}
        counts: dict[str, int] = {}
        order: list[str] = []
        errors: list[str] = []
        gone: list[str] = []
        lock = threading.Lock()

        def write(name: str, commit: bool = True) -> None:
            conn = conns[name]
            try:
                rows = _run_learner(conn, sql, race.bind(by_name[name], stage.seen)).rowcount
                if commit:
                    conn.commit()
            except psycopg.Error as exc:
                lost = _lost(conn, exc)
                if not lost:
                    conn.rollback()
                with lock:
                    (gone if lost else errors).append(
                        lost or explain_pg_error(exc, "your statement", RACE_STATEMENT_MS)
                    )
                return
            with lock:
                counts[name] = rows
                if commit:
                    order.append(name)

        try:
            if stage.how == "alone":
                write(stage.workers[0])
            elif stage.how == "held":
                holder, *rest = stage.workers
                write(holder, commit=False)
                pids = [conns[n].info.backend_pid for n in rest]
                threads = [threading.Thread(target=write, args=(n,)) for n in rest]
                for t in threads:
                    t.start()
                deadline = time.monotonic() + RACE_WAIT_S
                while time.monotonic() < deadline:  # until every other writer waits or is done
                    waiting = POSTGRES.execute(admin, WAITING_SQL, {"pids": pids}).fetchone()[0]
                    if waiting + sum(not t.is_alive() for t in threads) >= len(rest):
                        break
                    time.sleep(0.005)
                if holder in counts:
                    try:
                        conns[holder].commit()
                    except psycopg.Error as exc:
                        lost = _lost(conns[holder], exc)
                        (gone if lost else errors).append(
                            lost or explain_pg_error(exc, "your statement", RACE_STATEMENT_MS)
                        )
                    else:
                        with lock:
                            order.insert(0, holder)
                for t in threads:
                    t.join()
            else:
                barrier = threading.Barrier(len(stage.workers))

                def at_once(name: str) -> None:
                    barrier.wait()
                    write(name)

                threads = [threading.Thread(target=at_once, args=(n,)) for n in stage.workers]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        finally:
            for conn in conns.values():
                conn.close()
        rows = {k: [int(v), str(t)] for k, v, t in admin.execute(race.state_sql).fetchall()}
    missing = [k for k in race.keys if k not in rows]
    if missing and not errors:
        errors.append(
            f"after your statement ran, {race.row(missing[0])} no longer exists: a write may "
            f"change only {listing(race.updatable)}, never which row it is"
        )
    return {
        "error": errors[0] if errors else None,
        "gone": gone[0] if gone else None,
        "counts": counts,
        "order": order,
        "rows": rows,
    }


def race_write(race: Race, sql: str, dsn: str | None = None) -> list[tuple[Stage, dict[str, Any]]]:
    """Every stage of `race` on the learner's statement (rendered for psycopg), in one walled
    child with a connection per worker, each as the check's learner role, which may change
    only `race.updatable`; stops after a stage whose statement failed."""
    dsn = dsn or server_dsn()
    stages = _stages(race)

    def make(conn: Any) -> None:
        race.make(conn)
        for key in race.keys:
            race.init(conn, key, START_VERSION, _start_tools(key, START_VERSION))

    grant = ("select", "insert")
    update = {race.table: race.updatable}
    with learner_schema(dsn, make, grant, update) as (schema, learner):

        def task() -> list[dict[str, Any]]:
            done = []
            for stage in stages:
                done.append(_execute(dsn, race, sql, schema, learner, stage))
                if done[-1]["error"] or done[-1]["gone"]:
                    break
            return done

        per_stage = max(LOCK_MS, RACE_STATEMENT_MS) / 1000 + RACE_WAIT_S + 1
        results = _walled(task, len(stages) * per_stage, "your statement")
    if results and results[-1]["gone"]:
        raise _connection_gone(dsn, "your statement", results[-1]["gone"])
    return list(zip(stages, results, strict=False))


def _who(names: Iterable[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _all(items: Iterable[Any]) -> str:
    return "both" if len(list(items)) == 2 else "all"


def _compares_version(sql: str) -> bool:
    """Does the statement's WHERE mention both the row's version and :seen (however it
    compares them)?"""
    where = re.split(r"(?i)\bwhere\b", sandbox.code_only(sql), maxsplit=1)[1:]
    return bool(where) and bool(
        re.search(r"(?i)\bversion\b", where[0]) and re.search(r"%\(seen\)s", where[0])
    )


def _judge_alone(
    race: Race,
    stage: Stage,
    out: dict[str, Any],
    start: dict[Any, list],
    sql: str,
    unused: tuple[str, ...],
) -> None:
    """A lone writer: with a current read it writes its own row once; with a stale one, nothing."""
    (name,) = stage.workers
    worker = next(w for w in race.workers if w.name == name)
    rows, n = out["rows"], out["counts"].get(name, 0)
    others = [k for k in race.keys if k != worker.key and rows[k] != start[k]]
    if others:
        why = (
            f"Your statement never uses {listing(':' + p for p in unused)}, so it cannot pick "
            f"the worker's own {race.noun}"
            if unused
            else f"Your WHERE matched every {race.noun} whose version was {stage.seen}"
        )
        raise Wrong(
            f"worker {name}'s write for {race.row(worker.key)} overwrote the row of "
            f"{race.row(others[0])} with its answer: that row's own update was lost. {why}; a "
            f"write must touch its own {race.noun}'s row only"
        )
    mine = rows[worker.key]
    if stage.name == "stale":
        if n or mine != start[worker.key]:
            raise Wrong(
                f"worker {name} read version {stage.seen}, but another worker has since committed "
                f"version {stage.seen + 1}; {name}'s write still went through and replaced that "
                "answer: the lost update. "
                + (
                    "Your WHERE compares the row's version with :seen, but the comparison "
                    "still lets a write through after another worker moved the version past "
                    ":seen"
                    if _compares_version(sql)
                    else "Your WHERE does not compare the version in the row with the version "
                    "the worker read (:seen)"
                )
            )
        return
    if n == 0:
        raise Wrong(
            f"worker {name} read version {stage.seen} and the head is still {stage.seen}, yet "
            "your statement wrote nothing: its condition refuses the very write it must let "
            "through. Check the comparison in your WHERE"
        )
    if mine[0] == stage.seen:
        raise Wrong(
            f"your statement kept the version at {stage.seen}, the version the worker read: the "
            "new answer must be stored as the next version, one above the version read"
        )
    if mine[0] != stage.seen + 1:
        raise Wrong(
            f"your statement stored version {mine[0]} after a read of {stage.seen}: the new "
            "version is the one right after the version read, no other"
        )
    if mine[1] != worker.tools:
        raise Wrong(
            f"your statement stored the tools {shown(mine[1])}, not the worker's answer: "
            "bind :tools"
        )


def _judge_race(
    race: Race,
    stage: Stage,
    out: dict[str, Any],
    start: dict[Any, list],
    turns_ok: bool,
    unused: tuple[str, ...] = (),
) -> None:
    """Racing writers on one read: per row exactly one wins, and every answer reported written
    is in the catalog; else name whose answer was lost, and why."""
    rows, counts, order = out["rows"], out["counts"], out["order"]
    for key in race.keys:
        mine = [w for w in race.workers if w.key == key and w.name in stage.workers]
        if not mine:
            continue
        won = [w.name for w in mine if counts.get(w.name, 0) > 0]
        kept = rows[key][1]
        lost = [n for n in won if next(w for w in mine if w.name == n).tools != kept]
        how = (
            f"{_who(o for o in order if o in won)} committed in that order" if len(won) > 1 else ""
        )
        if lost:
            where = (
                "the first held the row while the others' UPDATEs waited for it; when it "
                "committed, READ COMMITTED ran each waiting UPDATE against the newest row"
                if stage.how == "held"
                else "they started together"
            )
            cause = (
                "Your guard works when writes take turns but not when they overlap: a "
                "condition read through a subquery or a CTE sees the snapshot the statement "
                "started with, taken before the winner committed; only conditions on the row "
                "being updated are checked again against the newest row"
                if turns_ok
                else "Your WHERE does not re-check the version the worker read"
            )
            whose = _who(f"{n}'s" for n in lost)
            raise Wrong(
                f"workers {_who(w.name for w in mine)} {_all(mine)} read version {stage.seen} of "
                f"{race.row(key)} and {_who(won)} {_all(won)} reported a row written "
                f"({how}; {where}). "
                f"{race.row(key).capitalize()} keeps one answer: {whose} "
                f"{'answer was' if len(lost) == 1 else 'answers were'} lost without an error. "
                + cause
            )
        if not won:
            forgot = (
                f": your statement never uses {listing(':' + p for p in unused)}, so it cannot "
                "pick the worker's own row"
                if unused
                else ""
            )
            if len(mine) == 1:
                raise Wrong(
                    f"worker {mine[0].name}'s write for {race.row(key)} changed nothing, though "
                    f"{mine[0].name} read the current version {stage.seen} and no other worker "
                    f"wrote that row{forgot or ': check which rows your WHERE picks'}"
                )
            raise Wrong(
                f"workers {_who(w.name for w in mine)} {_all(mine)} read version {stage.seen} of "
                f"{race.row(key)} and none of their writes went through"
                f"{forgot or ': a guard must let exactly one of them win'}"
            )
        if rows[key][0] != stage.seen + 1:
            raise Wrong(
                f"after the race {race.row(key)} is at version {rows[key][0]}, not one above "
                f"the {stage.seen} every worker read: more than one write counted as new"
            )


def _check_write(race: Race, sql: Any) -> str:
    starts = ("update", "with", "insert")
    # :tenant is left optional, so a write that forgets it is raced and shown what it loses
    text = learner_sql(sql, "your statement", starts, ("seen", "tools"), race.params)
    code = sandbox.code_only(text)
    unused = tuple(p for p in race.params if f"%({p})s" not in code)
    turns_ok = False
    rounds = 0
    for stage, out in race_write(race, text):
        if out["error"]:
            raise Wrong(f"in {stage.title}, {out['error']}")
        start = {k: [v, _start_tools(k, v)] for k, v in stage.versions}
        if stage.how == "alone":
            _judge_alone(race, stage, out, start, text, unused)
            turns_ok = turns_ok or stage.name == "stale"
        else:
            _judge_race(race, stage, out, start, turns_ok, unused)
            rounds += 1
    n = len(race.workers)
    return (
        f"a current read wrote the next version, a stale read wrote nothing, and in {rounds} "
        f"races of {n} connections on one read exactly one write won per {race.noun}, the "
        "others wrote nothing and knew it (0 rows)."
    )


guarded_write_ex = Exercise(
    name="The guarded write",
    question=(
        "The naive catalog of notebook 08: one row, naive_catalog(id = 1, version, tools), at "
        f"version {START_VERSION}. A worker has read the version, bound as :seen, and computed "
        "its answer, bound as :tools. Write the ONE statement it commits with, so that the "
        "check-then-write is safe: it stores version :seen + 1 and :tools only if the row still "
        "holds the version read, and writes nothing otherwise. The check tries a current and a "
        "stale read, then races three real connections that all read the same version. Answer "
        f"a string of SQL, shaped like {WRITE_SHAPE} (another table, other parameters)."
    ),
    checker=lambda sql: _check_write(NAIVE, sql),
    hints=(
        "The naive write changes the row whatever it holds now. What must still be true of "
        "the row for this worker's answer to be the next version?",
        "Put the fact the decision relied on into the write itself, as a condition on the row "
        "being updated: PostgreSQL re-checks such a condition against the newest row when a "
        "writer that waited gets its turn. A subquery is not re-checked.",
        "UPDATE naive_catalog SET version = :seen + 1, tools = :tools WHERE id = 1 AND ____: "
        "which condition on the row's own columns fills the gap?",
    ),
    solution_text=(
        "UPDATE naive_catalog SET version = :seen + 1, tools = :tools "
        "WHERE id = 1 AND version = :seen. Of racing writers that read the same version, the "
        "first to commit changes the row; each one waiting behind it re-checks `version = :seen` "
        "against the new row, finds it false and updates 0 rows, so its worker knows it lost "
        "and must read again."
    ),
)

tenant_write_ex = Exercise(
    name="The guarded write, per tenant",
    question=(
        "Now each tenant has its own catalog row: tenant_catalog(tenant PRIMARY KEY, version, "
        f"tools), with tenants 'acme' and 'zenith' both at version {START_VERSION}. A worker "
        "writing for tenant :tenant read version :seen and computed :tools. Write the ONE "
        "statement it commits with, safe against every other worker. The check races workers "
        "A and B on 'acme' and C on 'zenith', all on one read; when an update is lost it says "
        f"whose and why. Answer a string of SQL, shaped like {WRITE_SHAPE} (another table, "
        "other parameters)."
    ),
    checker=lambda sql: _check_write(TENANTS, sql),
    hints=(
        "The previous exercise's guard is still needed, but this table has more than one row. "
        "Which rows may a write for one tenant change?",
        "Two conditions on the row being updated: it is this worker's tenant, and it still "
        "holds the version the worker read. Both belong in the statement that writes.",
        "UPDATE tenant_catalog SET version = :seen + 1, tools = :tools WHERE ____ AND ____: "
        "the previous exercise's guard fills one gap; the column and parameter that pick "
        "this worker's own row fill the other.",
    ),
    solution_text=(
        "UPDATE tenant_catalog SET version = :seen + 1, tools = :tools "
        "WHERE tenant = :tenant AND version = :seen. Without the tenant, a write for 'acme' "
        "also overwrites 'zenith' whenever both are at the version read; without the version, "
        "the second of two racing 'acme' writers replaces the first one's answer."
    ),
)


exercises: list[Exercise] = [interleaving_ex, condition_ex, guarded_write_ex, tenant_write_ex]
# The notebook each exercise practises: notebooks/0N_... -> exercises/solutions/ex0N_...
by_lesson: dict[int, list[Exercise]] = {
    7: [interleaving_ex, condition_ex],
    8: [guarded_write_ex, tenant_write_ex],
}
