"""Part three's exercises after notebook 07, on a real PostgreSQL server: predict from two
written interleavings which rows Article 1's rule orphans, and write the condition under which
a frontier may pass an id.

The interleavings run in a real `CommitOrderLab`; the condition is judged against the statement
`delivered_frontier` runs, both in one exported snapshot taken while no transaction outside the
check runs (else `ServerBusy`: on a shared server the check waits, then says it could not
judge). The learner's SQL runs in the PostgreSQL sandbox (`sandboxes.pg`).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import labkit.exercises.sandboxes.pg as box
import labkit.exercises.sandboxes.pg_walls as pw
import labkit.frontier.log as fr
import labkit.frontier.log_pg as fpg
import labkit.pg.commit_order as co
import labkit.pg.instance as pg
from labkit.backend import POSTGRES
from labkit.exercises.kit import Exercise, Wrong, by_label, learner_items, listing, shown, whole

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
    with co.CommitOrderLab(dsn or box.server_dsn()) as lab:
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
    dsn = box.server_dsn()
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
                left = box.STATEMENT_MS
                if deadline is not None:
                    left = min(left, int((deadline - time.monotonic()) * 1000))
                if left < 1:
                    raise Wrong(
                        f"your query used up the {box.CHECK_MS / 1000:g} s all its runs in this "
                        "check may take together"
                    )
                params = {"xact": xact}
                rows = box.pg_query(dsn, schema, learner, text, params, "your query", shared, left)
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
    text = box.learner_sql(sql, "your query", ("select", "with"), ("xact",), advice=advice)
    dsn = box.server_dsn()
    moments = _moments()
    with box.learner_schema(dsn, fr.create_schema, ("select",), writers=True) as (schema, learner):
        opts = pg.search_path_option(schema)
        with (
            pg.connect(dsn, autocommit=True, options=opts) as ref,
            pg.connect(dsn, options=opts) as snap,
        ):
            deadline = time.monotonic() + box.CHECK_MS / 1000
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


exercises: list[Exercise] = [interleaving_ex, condition_ex]
# The notebook each exercise practises: notebooks/07_... -> exercises/solutions/ex07_...
by_lesson: dict[int, list[Exercise]] = {7: [interleaving_ex, condition_ex]}
