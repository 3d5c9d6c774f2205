"""Every public function of part one that takes a connection, on both backends: the same steps
give the same answer on SQLite and on PostgreSQL (written down once, below), and a function
that works on one backend only refuses the other in one line naming itself and the backend
(marker `postgres` for the PostgreSQL cases)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from backends import BACKENDS

from labkit import backend
from labkit.frontier import log as fr
from labkit.frontier import log_pg as fpg
from labkit.frontier import scenarios as sc
from labkit.frontier import summarizer as sm
from labkit.frontier import triggers


@pytest.fixture(params=BACKENDS)
def conn(request: pytest.FixtureRequest) -> Any:
    """A fresh, empty log on the backend under test."""
    if request.param == "sqlite":
        connection = fr.connect()
        yield connection
        connection.close()
    else:
        yield request.getfixturevalue("pg_connect")()


def seed(conn: Any) -> list[int]:
    """Article 1's six rows in shard "main" (id 3 urgent), committed on either backend."""
    ids = [fr.enqueue(conn, "main", p) for p in (5, 5, 1, 5, 5, 5)]
    conn.commit()  # enqueue never commits on PostgreSQL; on SQLite there is nothing to commit
    return ids


def deliver(conn: Any, *ids: int) -> None:
    for row_id in ids:
        fr.mark_delivered(conn, row_id)


def statuses(conn: Any) -> list[tuple[int, str]]:
    return [
        (int(i), s) for i, s in fr.fetch(conn, "SELECT id, status FROM conversations ORDER BY id")
    ]


def refusal(call: Callable[[], object]) -> str:
    with pytest.raises(Exception) as info:
        call()
    return f"{type(info.value).__name__}: {info.value}"


# --- the log ----------------------------------------------------------------------------------


def create_schema(conn: Any) -> object:
    seed(conn)
    fr.create_schema(conn)
    fr.create_schema(conn)
    return fr.fetch(conn, "SELECT COUNT(*) FROM conversations")


def enqueue(conn: Any) -> object:
    ids = seed(conn)
    ids.append(fr.enqueue(conn, "other", 2, "outbound"))
    conn.commit()
    row = fr.fetch(
        conn,
        "SELECT channel_key, direction, status, priority FROM conversations WHERE id = ?",
        (ids[-1],),
    )
    return ids, row


def status_of(conn: Any) -> object:
    seed(conn)
    deliver(conn, 2)
    return fr.status_of(conn, 1), fr.status_of(conn, 2), refusal(lambda: fr.status_of(conn, 99))


def mark_running(conn: Any) -> object:
    seed(conn)
    fr.mark_running(conn, 1)
    return fr.status_of(conn, 1), refusal(lambda: fr.mark_running(conn, 1))


def mark_delivered(conn: Any) -> object:
    seed(conn)
    fr.mark_delivered(conn, 3)
    return statuses(conn)[2], refusal(lambda: fr.mark_delivered(conn, 3))


def mark_failed(conn: Any) -> object:
    seed(conn)
    fr.mark_failed(conn, 2)
    return statuses(conn)[1], refusal(lambda: fr.mark_failed(conn, 42))


def dispatch_next(conn: Any) -> object:
    seed(conn)
    fr.enqueue(conn, "other", 1)
    conn.commit()
    return [fr.dispatch_next(conn, "main") for _ in range(7)], fr.dispatch_next(conn)


def redrive(conn: Any) -> object:
    seed(conn)
    fr.mark_failed(conn, 3)
    new = fr.redrive(conn, 3)
    row = fr.fetch(
        conn,
        "SELECT channel_key, direction, status, priority, redrive_of "
        "FROM conversations WHERE id = ?",
        (new,),
    )
    return new, row, fr.status_of(conn, 3), refusal(lambda: fr.redrive(conn, 1))


def delivered_frontier(conn: Any) -> object:
    seed(conn)
    got = [fr.delivered_frontier(conn, "main")]
    for batch in ((3, 5), (1, 2), (4, 6)):
        deliver(conn, *batch)
        got.append(fr.delivered_frontier(conn, "main"))
    return got, fr.delivered_frontier(conn, "main", 4), fr.delivered_frontier(conn, "quiet", 7)


def max_delivered_watermark(conn: Any) -> object:
    seed(conn)
    before = fr.max_delivered_watermark(conn, "main")
    deliver(conn, 3, 5)
    return before, fr.max_delivered_watermark(conn, "main")


def id_order_frontier(conn: Any) -> object:
    seed(conn)
    deliver(conn, 1, 3, 5)
    return fr.id_order_frontier(conn, "main"), fr.id_order_frontier(conn, "main", 3)


def fetch(conn: Any) -> object:
    seed(conn)
    return fr.fetch(conn, "SELECT id, priority FROM conversations WHERE priority < ?", (5,))


# --- the summarizer ---------------------------------------------------------------------------


def story(conn: Any) -> None:
    """Article 1's story under both policies: 3 and 5 first, then 1 and 2, then 4 and 6."""
    seed(conn)
    for batch in ((3, 5), (1, 2), (4, 6)):
        deliver(conn, *batch)
        for policy in fr.POLICIES:
            sm.summarize_range(conn, "main", policy)


def coverage_end(conn: Any) -> object:
    seed(conn)
    before = sm.coverage_end(conn, "main")
    deliver(conn, 1, 3)
    sm.summarize_range(conn, "main", "max")
    return before, sm.coverage_end(conn, "main", "max"), sm.coverage_end(conn, "main")


def proposed_end(conn: Any) -> object:
    seed(conn)
    deliver(conn, 1, 3)
    return {p: sm.proposed_end(conn, "main", p) for p in fr.POLICIES}


def summarize_range(conn: Any) -> object:
    seed(conn)
    deliver(conn, 2)
    nothing = sm.summarize_range(conn, "main")
    deliver(conn, 1)
    first = sm.summarize_range(conn, "main")
    assert first is not None
    return nothing, (first.channel_key, first.policy, first.start_id, first.end_id, first.item_ids)


def summaries(conn: Any) -> object:
    story(conn)
    return {
        p: [(s.start_id, s.end_id, s.item_ids) for s in sm.summaries(conn, "main", p)]
        for p in fr.POLICIES
    }


def orphans(conn: Any) -> object:
    story(conn)
    return {p: sm.orphans(conn, "main", p) for p in fr.POLICIES}


def chain_problems(conn: Any) -> object:
    story(conn)
    return {p: sm.chain_problems(conn, "main", p) for p in fr.POLICIES}


# --- the triggers and the timeline ------------------------------------------------------------


def blocked(conn: Any) -> None:
    """Article 1's rows with 2..6 delivered and id 1 still pending: the frontier is stuck."""
    seed(conn)
    deliver(conn, 2, 3, 4, 5, 6)


def newly_covered_count(conn: Any) -> object:
    blocked(conn)
    return triggers.newly_covered_count(conn, "main", 0, 0), triggers.newly_covered_count(
        conn, "main", 1, 6
    )


def rows_after_checkpoint(conn: Any) -> object:
    blocked(conn)
    return triggers.rows_after_checkpoint(conn, "main", 0), triggers.rows_after_checkpoint(
        conn, "main", 4
    )


def global_poll_counts(conn: Any) -> object:
    blocked(conn)
    fr.enqueue(conn, "other", 5)
    conn.commit()
    return triggers.global_poll_counts(conn, {"main": 2, "other": 0, "silent": 0})


def trigger_readings(conn: Any) -> object:
    blocked(conn)
    return triggers.trigger_readings(conn, "main", 0)


def busy_loop_ticks(conn: Any) -> object:
    blocked(conn)
    naive = triggers.busy_loop_ticks(conn, "main", ticks=2, trigger="after_checkpoint")
    deliver(conn, 1)
    return naive, triggers.busy_loop_ticks(conn, "main", ticks=2)


def shard_state(conn: Any) -> object:
    story(conn)
    state = sc.shard_state(conn, "main")
    return {k: v for k, v in state.items() if k != "statuses"}, state["statuses"]


# function -> (the steps, what SQLite and PostgreSQL both answer)
CASES: dict[str, tuple[Callable[[Any], object], object]] = {
    "log.create_schema": (create_schema, [(6,)]),
    "log.enqueue": (enqueue, ([1, 2, 3, 4, 5, 6, 7], [("other", "outbound", "pending", 2)])),
    "log.status_of": (
        status_of,
        ("pending", "delivered", "TransitionError: conversation 99 does not exist"),
    ),
    "log.mark_running": (
        mark_running,
        ("running", "TransitionError: conversation 1 is 'running'; cannot move it to 'running'"),
    ),
    "log.mark_delivered": (
        mark_delivered,
        (
            (3, "delivered"),
            "TerminalStateError: conversation 3 is 'delivered', a terminal status; refusing "
            "'delivered' -> 'delivered' (terminal is forever; redrive a failed row instead)",
        ),
    ),
    "log.mark_failed": (
        mark_failed,
        ((2, "failed"), "TransitionError: conversation 42 does not exist"),
    ),
    "log.dispatch_next": (dispatch_next, ([3, 1, 2, 4, 5, 6, None], 7)),
    "log.redrive": (
        redrive,
        (
            7,
            [("main", "inbound", "pending", 1, 3)],
            "failed",
            "TransitionError: conversation 1 is 'pending'; only a 'failed' row can be redriven",
        ),
    ),
    "log.delivered_frontier": (delivered_frontier, ([0, 0, 3, 6], 6, 7)),
    "log.max_delivered_watermark": (max_delivered_watermark, (None, 5)),
    "log.id_order_frontier": (id_order_frontier, (1, 3)),
    "log.fetch": (fetch, [(3, 1)]),
    "summarizer.coverage_end": (coverage_end, (0, 3, 0)),
    "summarizer.proposed_end": (proposed_end, {"frontier": 1, "max": 3}),
    "summarizer.summarize_range": (summarize_range, (None, ("main", "frontier", 1, 2, (1, 2)))),
    "summarizer.summaries": (
        summaries,
        {
            "frontier": [(1, 3, (1, 2, 3)), (4, 6, (4, 5, 6))],
            "max": [(1, 5, (3, 5)), (6, 6, (6,))],
        },
    ),
    "summarizer.orphans": (orphans, {"frontier": [], "max": [1, 2, 4]}),
    "summarizer.chain_problems": (chain_problems, {"frontier": [], "max": []}),
    "triggers.newly_covered_count": (newly_covered_count, (0, 5)),
    "triggers.rows_after_checkpoint": (rows_after_checkpoint, (6, 2)),
    "triggers.global_poll_counts": (global_poll_counts, {"main": 4, "other": 1, "silent": 0}),
    "triggers.trigger_readings": (
        trigger_readings,
        {"frontier": 0, "newly_covered": 0, "after_checkpoint": 6},
    ),
    "triggers.busy_loop_ticks": (
        busy_loop_ticks,
        (
            [
                {
                    "tick": t,
                    "trigger": "after_checkpoint",
                    "fired": True,
                    "summarized": False,
                    "wasted": True,
                    "coverage_end": 0,
                }
                for t in (0, 1)
            ],
            [
                {
                    "tick": 0,
                    "trigger": "newly_covered",
                    "fired": True,
                    "summarized": True,
                    "wasted": False,
                    "coverage_end": 6,
                },
                {
                    "tick": 1,
                    "trigger": "newly_covered",
                    "fired": False,
                    "summarized": False,
                    "wasted": False,
                    "coverage_end": 6,
                },
            ],
        ),
    ),
    "scenarios.shard_state": (
        shard_state,
        (
            {
                "shard": "main",
                "max_watermark": 6,
                "frontier": 6,
                "coverage_frontier": 6,
                "coverage_max": 6,
                "orphans_frontier": 0,
                "orphans_max": 3,
                "orphan_ids_frontier": (),
                "orphan_ids_max": (1, 2, 4),
            },
            {i: "delivered" for i in range(1, 7)},
        ),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_same_answer_on_both_backends(conn: Any, name: str) -> None:
    steps, expected = CASES[name]
    assert steps(conn) == expected


# --- one backend only: refused in one line ----------------------------------------------------

SQLITE_ONLY = {
    "explain": lambda c: fr.explain(c, fr.FRONTIER_SQL, ("main", 0)),
    "vm_steps": lambda c: triggers.vm_steps(c, lambda: None),
    "object_pages": lambda c: triggers.object_pages(c),
}
POSTGRES_ONLY = {
    "horizon_frontier": lambda c: fr.horizon_frontier(c, "main"),
    "explain_json": lambda c: fpg.explain_json(c, fr.FRONTIER_SQL, ("main", 0)),
}


@pytest.mark.parametrize("name", list(SQLITE_ONLY) + list(POSTGRES_ONLY))
def test_a_function_for_one_backend_refuses_the_other_in_one_line(conn: Any, name: str) -> None:
    on_sqlite = isinstance(conn, sqlite3.Connection)
    call = SQLITE_ONLY.get(name) or POSTGRES_ONLY[name]
    if (name in SQLITE_ONLY) == on_sqlite:
        call(conn)  # its own backend: it runs
        return
    supported, handed = ("postgres", "sqlite") if on_sqlite else ("sqlite", "postgres")
    with pytest.raises(backend.UnsupportedBackend) as info:
        call(conn)
    assert str(info.value) == (
        f"{name} works on {supported} only; it was handed a {handed} connection"
    )


def test_unknown_policies_are_refused_per_backend(conn: Any) -> None:
    """PostgreSQL's checkpoint table also keeps Article 1's id order (part three); SQLite's
    keeps the two policies of part one."""
    seed(conn)
    deliver(conn, 1, 3)
    if isinstance(conn, sqlite3.Connection):
        with pytest.raises(ValueError, match=r"unknown policy 'id_order'; expected one of"):
            sm.summarize_range(conn, "main", "id_order")
    else:
        summary = sm.summarize_range(conn, "main", "id_order")
        assert summary is not None and summary.item_ids == (1,)  # 2 is still open
        assert sm.coverage_end(conn, "main", "id_order") == 1
    with pytest.raises(ValueError, match=r"unknown policy 'latest'"):
        sm.orphans(conn, "main", "latest")
