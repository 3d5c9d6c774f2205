"""Part three's exercises after notebook 07, on a real PostgreSQL server: predict from two
written interleavings which rows Article 1's rule orphans, and write the condition under which
a frontier may pass an id.

The interleavings run in a real `CommitOrderLab`; a wrong streak draws two new ones (picked
with `step_model`, Article 1's rule stepped in Python, which every check holds against the
run, played once per variant and server); the condition is judged against the statement
`delivered_frontier` runs, both in one exported snapshot taken while no transaction outside the
check runs (else `ServerBusy`: on a shared server the check waits, then says it could not
judge). The learner's SQL runs in the PostgreSQL sandbox (`sandboxes.pg`).
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import labkit.exercises.sandboxes.pg as box
import labkit.exercises.sandboxes.pg_walls as pw
import labkit.frontier.log as fr
import labkit.frontier.log_pg as fpg
import labkit.frontier.rule as rule
import labkit.pg.commit_order as co
import labkit.pg.instance as pg
from labkit.backend import POSTGRES
from labkit.exercises.kit import (
    Exercise,
    Variant,
    Wrong,
    by_label,
    learner_items,
    listing,
    shown,
    whole,
)

# --- lesson 07: predict from a written interleaving which rows Article 1's rule orphans -----

Step = tuple[str, str]
Script = tuple[Step, ...]

# Two interleavings other than notebook 07's: in P a writer holds two ids and a third one is
# taken after the other writer's commit; in Q the late commit lands before the first summary.
SCRIPTS: dict[str, Script] = {
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


def _run(script: Script, dsn: str | None = None) -> co.LabState:
    with co.CommitOrderLab(dsn or box.server_dsn()) as lab:
        return lab.run(script)


# The runs checks played, by server and script: a variant's interleavings run on the server at
# its first check, and the next checks of that variant read the same runs (a learner's second
# answer waits no 0.3-0.9 s for a run that cannot come out otherwise: Article 1's orphans follow
# from the script, and another session can only hold the horizon wait longer, which orphans
# nothing either way). Read only: a check never changes a run it reads.
@functools.lru_cache(maxsize=8)
def _played(script: Script, dsn: str) -> co.LabState:
    return _run(script, dsn)


def current_scripts() -> dict[str, Script]:
    """The two interleavings the prediction asks about now (its current variant)."""
    drawn = interleaving_ex.current()
    return dict(drawn.scripts) if isinstance(drawn, _Drawn) else dict(SCRIPTS)


def run_script(label: str, dsn: str | None = None) -> co.LabState:
    """Run interleaving `label` ("P" or "Q") of the variant asked now in a real
    `CommitOrderLab`: the "then run it"."""
    return _run(current_scripts()[label], dsn)


@dataclass(frozen=True)
class _Pass:
    """A summarize step (1-based) that moved Article 1's checkpoint, and the ids it passed
    while they were hidden in an open transaction."""

    step: int
    checkpoint: int
    hidden: tuple[int, ...]


@dataclass(frozen=True)
class StepModel:
    """Article 1's rule stepped in Python over a script: the checkpoint after every step, the
    moves it made and the orphans. It picks variants; each check holds it against the server."""

    checkpoints: tuple[int, ...]
    passes: tuple[_Pass, ...]
    orphans: tuple[int, ...]
    ids: int


def step_model(script: Script) -> StepModel:
    """What a `CommitOrderLab` run of `script` gives under Article 1's rule, without a server:
    a summarize moves the checkpoint to the rule's frontier over the committed rows when a
    delivered row lies on the way."""
    committed: set[int] = set()
    delivered: set[int] = set()
    summarized: set[int] = set()
    holding: dict[str, list[int]] = {w: [] for w in co.WRITERS}
    taken, checkpoint = 0, 0
    checkpoints: list[int] = []
    passes: list[_Pass] = []
    for k, (actor, action) in enumerate(script, 1):
        if action == "insert":
            taken += 1
            holding[actor].append(taken)
        elif action == "commit":
            committed.update(holding[actor])
            holding[actor] = []
        elif action == "deliver":
            delivered |= committed
        else:
            seen = [(i, i not in delivered) for i in sorted(committed) if i > checkpoint]
            end = rule.frontier(checkpoint, seen)
            items = [i for i in range(checkpoint + 1, end + 1) if i in delivered]
            if items:  # summarize_range writes nothing, and moves nothing, without a row
                hidden = tuple(i for i in range(checkpoint + 1, end + 1) if i not in committed)
                summarized.update(items)
                passes.append(_Pass(k, end, hidden))
                checkpoint = end
        checkpoints.append(checkpoint)
    lost = tuple(i for i in sorted(delivered) if i <= checkpoint and i not in summarized)
    return StepModel(tuple(checkpoints), tuple(passes), lost, taken)


def _labelled_ids(value: Any, label: str) -> set[int]:
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
    return {k: _labelled_ids(keyed[k], k) for k in SCRIPTS}


# What a wrong prediction is told: the idea to re-check, never an id nor which interleaving.
_PASSED_LATER = (
    "one of the ids you named was still hidden in an open transaction at a summarize, but "
    "that summarize's checkpoint stopped below it, and its writer committed before a later "
    "summarize reached it, so a summary holds it. Re-check where each summarize moves the "
    "checkpoint: one less than the smallest visible id not yet delivered, else the largest "
    "visible id; only hidden ids below that point are passed"
)
_NEVER_HIDDEN = (
    "one of the ids you named was committed, so visible, at every summarize after it was "
    "taken. A summarize that can see a row either stops short of it (it is not delivered yet) "
    "or summarizes it; it never orphans it. A late commit orphans a row only when a summarize "
    "runs while the row is still hidden and moves the checkpoint past it"
)
_LEFT_OUT = (
    "at least one orphan is missing{named}. At each summarize, list the ids still hidden in "
    "an open transaction and see where the checkpoint goes: a hidden id below it is passed, "
    "and when its writer commits it is never summarized"
)


def _hidden_at_a_summarize(row: co.Row, state: co.LabState) -> bool:
    """Whether a summarize ran after `row` was taken and before its writer committed."""
    return any(
        e.action == "summarize"
        and row.inserted < e.step
        and (row.committed is None or e.step < row.committed)
        for e in state.events
    )


def _mistake(said: Mapping[str, set[int]], states: Mapping[str, co.LabState]) -> str | None:
    """The idea behind the first wrong id (named ids first, then the ones left out)."""
    for label, state in states.items():
        rows = {r.row_id: r for r in state.rows}
        for row_id in sorted(said[label] - set(state.orphans["id_order"])):
            hidden = _hidden_at_a_summarize(rows[row_id], state)
            return _PASSED_LATER if hidden else _NEVER_HIDDEN
    if any(set(state.orphans["id_order"]) - said[k] for k, state in states.items()):
        named = any(said.values())
        return _LEFT_OUT.format(named=" (every id you named is one)" if named else "")
    return None


def _agree(label: str, script: Script, state: co.LabState) -> None:
    """The step model (which picked the variant and wrote its solution) must match the run."""
    model = step_model(script)
    ran = tuple(e.coverage["id_order"] for e in state.events)
    if (
        model.checkpoints != ran
        or model.orphans != tuple(state.orphans["id_order"])
        or [r.row_id for r in state.rows] != list(range(1, model.ids + 1))
    ):
        raise RuntimeError(
            f"interleaving {label}: the step model and the server disagree "
            f"({model} vs checkpoints {ran}, orphans {state.orphans['id_order']})"
        )


def _check_orphans(answer: Any, scripts: Mapping[str, Script] = SCRIPTS) -> str:
    said = _orphan_parts(answer)
    for label, script in scripts.items():
        taken = sum(action == "insert" for _, action in script)
        unknown = sorted(i for i in said[label] if not 1 <= i <= taken)
        if unknown:
            raise Wrong(
                f"{label}: interleaving {label} only takes ids 1 to {taken} "
                f"(one per insert, counting from 1); {listing(unknown)} never exists"
            )
    dsn = box.server_dsn()
    states = {label: _played(script, dsn) for label, script in scripts.items()}
    for label, state in states.items():
        _agree(label, scripts[label], state)
    mistake = _mistake(said, states)
    if mistake is not None:
        raise Wrong(mistake + ".")
    found = {label: state.orphans["id_order"] for label, state in states.items()}
    notes = [f"{k} orphans {listing(ids) if ids else 'nothing'}" for k, ids in found.items()]
    waits = [
        f"id {listing(s.orphans['horizon'])} in {k}"
        for k, s in states.items()
        if s.orphans["horizon"]
    ]
    lost = " and ".join(waits) if waits else "no row in either"
    return (
        "both match a real run on PostgreSQL (" + "; ".join(notes) + "). In the same runs the "
        f"xmin horizon wait, which summarized alongside, orphaned {lost}."
    )


def _orphans_question(scripts: Mapping[str, Script]) -> str:
    shown_scripts = " ".join(
        f"Interleaving {label}: {script_text(script)}." for label, script in scripts.items()
    )
    return (
        "Two writer connections A and B and one worker share a fresh log in a CommitOrderLab "
        "(each insert takes the next id, counting from 1; a writer's rows become visible when it "
        "commits; 'deliver' delivers every pending row the worker can see; 'summarize' moves "
        "Article 1's checkpoint to id_order_frontier and summarizes up to it). "
        f"{shown_scripts} "
        "Which ids does Article 1's rule orphan (delivered, under its checkpoint, in no summary) "
        "in each? Answer a dict of two sets of whole numbers, shaped like "
        "{'P': {6, 9}, 'Q': {7}} (other ids; set() for none)."
    )


# Variants: each interleaving is drawn from CANDIDATES random scripts, grouped by the orphans
# the step model gives; a group is picked evenly (none with NONE_SHARE), so no answer is common.
CANDIDATES = 300
NONE_SHARE = 1 / 6
MOST_IDS = 6
MOST_ORPHANS = 3


@dataclass(frozen=True)
class _Drawn(Variant):
    """A variant of the prediction with its interleavings, which the "then run it" plays."""

    scripts: Mapping[str, Script] = field(default_factory=dict)


def _random_script(rng: random.Random) -> Script:
    """Writers A and B take 3 to MOST_IDS ids in one or two transactions each, interleaved at
    random with a few deliveries and summaries; a deliver and a summarize end it."""
    total = rng.randint(3, MOST_IDS)
    first = rng.randint(1, total - 1)
    streams: list[list[Step]] = []
    for writer, count in zip(co.WRITERS, (first, total - first), strict=True):
        sizes = [count]
        if count >= 2 and rng.random() < 0.5:
            cut = rng.randint(1, count - 1)
            sizes = [cut, count - cut]
        streams.append([s for n in sizes for s in [(writer, "insert")] * n + [(writer, "commit")]])
    worker: list[Step] = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.6:
            worker += [("worker", "deliver"), ("worker", "summarize")]
        else:
            worker.append(("worker", rng.choice(("deliver", "summarize"))))
    if ("worker", "summarize") not in worker:
        worker.append(("worker", "summarize"))
    streams.append(worker)
    # each interleaving of the three streams equally likely: a shuffled list of whose turn it is
    turns = [k for k, stream in enumerate(streams) for _ in stream]
    rng.shuffle(turns)
    nexts = [iter(stream) for stream in streams]
    script = [next(nexts[k]) for k in turns]
    return (*script, ("worker", "deliver"), ("worker", "summarize"))


def _pick_script(rng: random.Random, avoid: Iterable[Script]) -> Script:
    """One interleaving for a variant: its orphans are none (NONE_SHARE of the time) or one to
    MOST_ORPHANS ids, each set found among the candidates about as likely as any other."""
    want_none = rng.random() < NONE_SHARE
    avoid = set(avoid)
    by_orphans: dict[tuple[int, ...], list[Script]] = {}
    for _ in range(CANDIDATES):
        script = _random_script(rng)
        if script not in avoid:
            by_orphans.setdefault(step_model(script).orphans, []).append(script)
    sets = sorted(s for s in by_orphans if 0 < len(s) <= MOST_ORPHANS)
    pick = () if (want_none and () in by_orphans) or not sets else rng.choice(sets)
    return rng.choice(by_orphans[pick])


def _explain(label: str, model: StepModel) -> str:
    """The worked answer for one interleaving, from the step model's moves."""
    moves = [p for p in model.passes if p.hidden]
    if not moves:
        return (
            f"{label}: no summarize moves the checkpoint past an id that is still hidden, so "
            "nothing is orphaned"
        )
    said = [
        f"the summarize at step {p.step} moves the checkpoint to {p.checkpoint} while "
        f"{'id' if len(p.hidden) == 1 else 'ids'} {listing(p.hidden)} "
        f"{'is' if len(p.hidden) == 1 else 'are'} still hidden"
        for p in moves
    ]
    lost = listing(model.orphans)
    ends = f"id {lost} ends" if len(model.orphans) == 1 else f"ids {lost} end"
    return f"{label}: " + "; ".join(said) + f", so {ends} in no summary"


def _as_set(ids: Iterable[int]) -> str:
    return "{" + listing(ids) + "}" if ids else "set()"


def _orphans_variant(rng: random.Random) -> Variant:
    """Two new interleavings for the same prediction; their truth is the server's run, checked
    against the step model that picked them."""
    scripts: dict[str, Script] = {}
    for label in SCRIPTS:
        scripts[label] = _pick_script(rng, [*SCRIPTS.values(), *scripts.values()])
    models = {label: step_model(s) for label, s in scripts.items()}
    answer = ", ".join(f"{k!r}: {_as_set(m.orphans)}" for k, m in models.items())
    return _Drawn(
        question=_orphans_question(scripts),
        checker=lambda answer: _check_orphans(answer, scripts),
        solution_text=(
            ". ".join(_explain(k, m) for k, m in models.items()) + f". answer = {{{answer}}}"
        ),
        scripts=scripts,
    )


interleaving_ex = Exercise(
    name="Predict the orphans",
    question=_orphans_question(SCRIPTS),
    checker=_check_orphans,
    hints=(
        "Only the summarize steps move the checkpoint. For each one, write down what the worker "
        "can see at that moment and what is still hidden inside an open transaction.",
        "At a summarize, Article 1's rule takes one less than the smallest visible open id, else "
        "the largest visible id. An id is orphaned when that checkpoint passes it while its "
        "writer has not committed: when it appears later, the checkpoint never comes back.",
        "Make a table with one line per summarize step: the ids the worker can see (is each "
        "delivered?), the ids still hidden in an open transaction, and where the checkpoint "
        "moves. Which hidden ids does a line's checkpoint ____, and does an id leave the "
        "answer if its writer commits before the next summarize? Then {'P': ____, 'Q': ____}.",
    ),
    solution_text=(
        "answer = {'P': {1}, 'Q': set()}. P: at step 7 the checkpoint jumps to 3 (the largest "
        "visible id; nothing visible is open), passing id 1 while A holds it; id 4 lies above "
        "3 and is summarized later, so only 1 is orphaned. Q: A commits at step 5, before any "
        "summary, and id 1 is still pending at step 6, so the checkpoint stays at 0; both rows "
        "end in the last summary."
    ),
    variants=_orphans_variant,
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
        "SELECT ____ ____ CAST(:xact AS xid8): on the left, the one transaction id whose "
        "position against :xact settles whether any older transaction is still running; "
        "then the comparison that says none is. What can the current snapshot tell you, "
        "and is :xact itself still running when the statement is asked?",
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
