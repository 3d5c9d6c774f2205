"""Part three's exercises after notebook 08, on a real PostgreSQL server: write the guarded
write that makes check-then-write safe, and the same for a catalog kept per tenant. The writes
are raced on real connections, each as the check's own learner role in the PostgreSQL sandbox
(`sandboxes.pg`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import labkit.exercises.sandboxes.pg as box
import labkit.exercises.sandboxes.pg_walls as pw
import labkit.exercises.sandboxes.sqlite as sandbox
import labkit.pg.ballots as pb
import labkit.pg.instance as pg
from labkit.backend import POSTGRES
from labkit.exercises.kit import Exercise, Wrong, listing, shown

# The held race's first writer holds its row at most RACE_WAIT_S; the others' statements wait
# behind it, so their statement and lock time limits leave as much again to spare.
RACE_WAIT_S = 2.0
RACE_STATEMENT_MS = box.STATEMENT_MS + int(2 * RACE_WAIT_S * 1000)

WAITING_SQL = (
    "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids) AND wait_event_type = 'Lock'"
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
        opts = box.learner_options(schema, False, RACE_STATEMENT_MS)
        conns = {n: pw.connect_as(dsn, learner, options=opts) for n in stage.workers}
        counts: dict[str, int] = {}
        order: list[str] = []
        errors: list[str] = []
        gone: list[str] = []
        lock = threading.Lock()

        def write(name: str, commit: bool = True) -> None:
            conn = conns[name]
            try:
                rows = box.run_learner(conn, sql, race.bind(by_name[name], stage.seen)).rowcount
                if commit:
                    conn.commit()
            except psycopg.Error as exc:
                lost = box.lost_connection(conn, exc)
                if not lost:
                    conn.rollback()
                with lock:
                    (gone if lost else errors).append(
                        lost or box.explain_pg_error(exc, "your statement", RACE_STATEMENT_MS)
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
                        lost = box.lost_connection(conns[holder], exc)
                        (gone if lost else errors).append(
                            lost or box.explain_pg_error(exc, "your statement", RACE_STATEMENT_MS)
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
    dsn = dsn or box.server_dsn()
    stages = _stages(race)

    def make(conn: Any) -> None:
        race.make(conn)
        for key in race.keys:
            race.init(conn, key, START_VERSION, _start_tools(key, START_VERSION))

    grant = ("select", "insert")
    update = {race.table: race.updatable}
    with box.learner_schema(dsn, make, grant, update) as (schema, learner):

        def task() -> list[dict[str, Any]]:
            done = []
            for stage in stages:
                done.append(_execute(dsn, race, sql, schema, learner, stage))
                if done[-1]["error"] or done[-1]["gone"]:
                    break
            return done

        per_stage = max(box.LOCK_MS, RACE_STATEMENT_MS) / 1000 + RACE_WAIT_S + 1
        results = box.walled(task, len(stages) * per_stage, "your statement")
    if results and results[-1]["gone"]:
        raise box.connection_gone(dsn, "your statement", results[-1]["gone"])
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
    text = box.learner_sql(sql, "your statement", starts, ("seen", "tools"), race.params)
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


exercises: list[Exercise] = [guarded_write_ex, tenant_write_ex]
# The notebook each exercise practises: notebooks/08_... -> exercises/solutions/ex08_...
by_lesson: dict[int, list[Exercise]] = {8: [guarded_write_ex, tenant_write_ex]}
