"""Exercises for notebook 10 (the audit), checked by `labkit.audit` itself: predict the orphans
`audit log` reports on a small status history, and write a catalog event log that `audit
catalog` reports a fall in.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from labkit import validation
from labkit.audit.catalog import EVENT_COLUMNS, audit_events, parse_events
from labkit.audit.inputs import InputError
from labkit.audit.log import Checkpoint, StatusRow, audit_rows
from labkit.exercises.kit import Exercise, Variant, Wrong, learner_items, listing, shown, whole

# One history: what happens at each time 1, 2, ...: ("status", id, status) or ("checkpoint",
# start, end). One shard.
Event = tuple[str, int, Any]
SHARD = "main"

ORPHAN_HISTORY: tuple[Event, ...] = (
    ("status", 1, "pending"),
    ("status", 2, "pending"),
    ("status", 3, "pending"),
    ("status", 5, "pending"),
    ("status", 6, "pending"),
    ("status", 3, "delivered"),
    ("checkpoint", 0, 3),
    ("status", 1, "delivered"),
    ("status", 6, "delivered"),
    ("status", 2, "failed"),
    ("checkpoint", 3, 6),
    ("status", 4, "pending"),
    ("status", 5, "delivered"),
    ("status", 4, "delivered"),
)


def history_rows(history: Sequence[Event]) -> tuple[list[StatusRow], list[Checkpoint]]:
    """A history as the audit's rows: event k happens at time k (from 1)."""
    statuses: list[StatusRow] = []
    checkpoints: list[Checkpoint] = []
    for at, (what, a, b) in enumerate(history, start=1):
        if what == "status":
            statuses.append(StatusRow(a, SHARD, b, float(at), at))
        else:
            checkpoints.append(Checkpoint(SHARD, a, b, float(at), at))
    return statuses, checkpoints


def audited_orphans(history: Sequence[Event]) -> list[int]:
    """The ids `audit log` reports as orphans in `history`."""
    statuses, checkpoints = history_rows(history)
    report = audit_rows(statuses, checkpoints)
    return sorted({f.id for f in report.findings if f.kind == "orphan" and f.id is not None})


def _history_text(history: Sequence[Event]) -> str:
    lines = []
    for at, (what, a, b) in enumerate(history, start=1):
        lines.append(f"{at}: id {a} {b}" if what == "status" else f"{at}: checkpoint ({a}, {b}]")
    return "; ".join(lines)


def _ids(answer: Any, what: str) -> set[int]:
    """A learner's collection of ids as a set of Python ints."""
    if isinstance(answer, int | str) or isinstance(answer, Mapping):
        raise Wrong(f"give {what} as a set of ids, e.g. {{8, 9}} (or set() for none)")
    try:
        iter(answer)
    except TypeError:
        raise Wrong(
            f"give {what} as a set of ids, e.g. {{8, 9}}, not a {type(answer).__name__}"
        ) from None
    return set(learner_items(answer, what, lambda i: whole(i, f"each id in {what}"), noun="ids"))


def _check_orphans(answer: Any, history: Sequence[Event] = ORPHAN_HISTORY) -> str:
    said = _ids(answer, "the orphans")
    want = set(audited_orphans(history))
    seen = {a for what, a, _ in history if what == "status"}
    outside = sorted(said - seen)
    if outside:
        raise Wrong(
            f"no status row names id {outside[0]}; the history holds ids {listing(sorted(seen))}"
        )
    if said == want:
        return f"the audit reports orphans {listing(sorted(want))}, and nothing else."
    extra, missing = said - want, want - said
    if extra and not missing:
        raise Wrong(
            "you named ids the audit does not report. An id is judged at each checkpoint that "
            "covers it: it is an orphan only if it was still open, or not yet seen at all, at "
            "that moment; an id that finished before the checkpoint, however late, is fine"
        )
    if missing and not extra:
        raise Wrong(
            "the audit reports more orphans than you named. Look again at each checkpoint: "
            "which ids in its range were still open then, and is there an id the log shows "
            "only after a checkpoint had already covered it (the commit-order gap)?"
        )
    raise Wrong(
        "some ids you named are not orphans and some orphans are missing. Walk the history in "
        "time order, keeping the open ids and the coverage; at each checkpoint, collect the ids "
        "of its range that are open, and at each first sighting, ask whether coverage has "
        "already passed that id"
    )


def _orphans_question(history: Sequence[Event]) -> str:
    return (
        f"One shard's status history and its checkpoints, in time order: {_history_text(history)}. "
        "Terminal statuses are delivered, failed and cancelled. Which ids does `audit log` "
        "report as orphans? Answer a set of ids, shaped like {8, 9} (other ids), or set() "
        "for none."
    )


def random_history(rng: random.Random) -> tuple[Event, ...]:
    """A small history: ids open then finishing in a random order, a MAX-rule checkpoint after
    some finishes, and sometimes one id first seen late (a commit-order gap)."""
    n = rng.randint(6, 8)
    late = rng.randrange(2, n) if rng.random() < 0.5 else None
    events: list[Event] = [("status", i, "pending") for i in range(1, n + 1) if i != late]
    order = [i for i in rng.sample(range(1, n + 1), n) if i != late]
    end = top = 0
    for k, i in enumerate(order):
        events.append(("status", i, rng.choice(("delivered",) * 3 + ("failed",))))
        top = max(top, i)
        if top > end and (rng.random() < 0.5 or k == len(order) - 1):
            events.append(("checkpoint", end, top))
            end = top
        if late is not None and k == len(order) // 2:
            events.append(("status", late, "pending"))
            events.append(("status", late, "delivered"))
    return tuple(events)


def _orphans_variant(rng: random.Random) -> Variant:
    """New history, same idea; two orphans at least and some ids not orphaned, never the
    shape example's answer."""
    while True:
        history = random_history(rng)
        orphans = audited_orphans(history)
        ids = {a for what, a, _ in history if what == "status"}
        if 2 <= len(orphans) <= len(ids) - 2 and orphans != [8, 9]:
            break
    return Variant(
        question=_orphans_question(history),
        checker=lambda answer: _check_orphans(answer, history),
        solution_text=(
            "At each checkpoint, the ids of its range still open are orphans; an id first seen "
            f"after coverage passed it is one too. answer = {{{listing(orphans)}}}"
        ),
    )


audit_orphans_ex = Exercise(
    name="The audit's orphans",
    question=_orphans_question(ORPHAN_HISTORY),
    checker=_check_orphans,
    hints=(
        "The audit does not look at how the summarizer chose its range; it only compares each "
        "checkpoint with the statuses at that moment.",
        "Walk the history in time order and keep two things: the ids open now (seen, not yet "
        "terminal) and how far coverage has reached. At each checkpoint, the open ids in its "
        "range go on your list; at each id's first status row, check whether coverage is "
        "already past it.",
        "At time 7, checkpoint (0, 3] covers ids 1, 2 and 3: which of them are open then? At "
        "time 11, (3, 6] covers 4, 5 and 6: which are open, and has id 4 been seen yet? At "
        "time 12 id 4 shows up for the first time: coverage is already at ____.",
    ),
    solution_text=(
        "Time 7: (0, 3] covers 1 and 2 while pending: orphans. Time 11: (3, 6] covers 5 while "
        "pending: orphan (6 was delivered, 4 not seen yet). Time 12: id 4 is first seen after "
        "coverage reached 6: the commit-order gap, an orphan. answer = {1, 2, 4, 5}"
    ),
    variants=_orphans_variant,
)


# --- a fall, written as an event log -----------------------------------------------------

ROW_KEYS = frozenset(EVENT_COLUMNS)
MOST_ROWS = 40


def _row(value: Any) -> dict[str, Any]:
    """One learner row as a plain dict of the event log's columns."""
    if not isinstance(value, Mapping):
        raise Wrong(
            f"each row is a dict like {{'at': 1, 'event': 'head', ...}}, not {shown(value)}"
        )
    row: dict[str, Any] = {}
    for key, cell in value.items():
        if key not in ROW_KEYS:
            raise Wrong(
                f"a row has the key {shown(key)}; the columns are {', '.join(EVENT_COLUMNS)}"
            )
        if cell is not None and not isinstance(cell, str) and not validation.is_real(cell):
            raise Wrong(f"the cell {key}={shown(cell)} is neither a number nor text")
        row[key] = cell
    return row


def _read_events(answer: Any) -> list[Any]:
    if isinstance(answer, str | Mapping) or not hasattr(answer, "__iter__"):
        raise Wrong("give a list of rows, each a dict with the event log's columns")
    rows = learner_items(answer, "your event log", _row, most=MOST_ROWS, noun="rows")
    cells = [(n, {c: r.get(c) for c in EVENT_COLUMNS}) for n, r in enumerate(rows, start=1)]
    try:
        return list(parse_events(cells, "your event log"))
    except InputError as exc:
        raise Wrong(str(exc)) from None


def _check_fall(answer: Any) -> str:
    events = _read_events(answer)
    head = 0
    for e in events:
        if e.event == "commit":
            head = e.version
        elif e.event == "head" and e.version != head:
            raise Wrong(
                f"row {e.row}: observer {e.observer} reads head {e.version}, but the last commit "
                f"before it wrote {head}. In this exercise the store holds what the last commit "
                "wrote, and an observer reads exactly that: a fall has to come from a commit"
            )
    commits = [e for e in events if e.event == "commit"]
    for e in commits:
        if e.event == "commit" and e.base is not None and e.version != e.base + 1:
            raise Wrong(
                f"row {e.row}: a commit writes its base + 1 (the loop appends one version to "
                f"what the body was built on), not version {e.version} on base {e.base}"
            )
    report = audit_events(events)
    falls = [f for f in report.findings if f.kind == "fall"]
    if not falls:
        raise Wrong(
            "the audit sees no fall. A fall is one observer reading a lower head than at its "
            "read before, so the same observer must read the head before and after a commit "
            "that writes a lower version than the one it read"
        )
    late = falls[0]
    return (
        f"the audit reports {late.message}; a late answer built on an old base, committed "
        "without a ballot check, is Article 2's late tick."
    )


fall_log_ex = Exercise(
    name="A fall in an event log",
    question=(
        "Write a catalog event log, a list of rows (dicts with keys at, event, ballot, version, "
        "base, observer; leave out a key that does not apply), that `audit catalog` reports a "
        "fall in. The store holds what the last commit wrote: a `head` row reads exactly "
        "that version (0 before any commit), and a `commit` writes version base + 1. Times "
        "must not go backwards. Shape: [{'at': 1, 'event': 'request', 'ballot': 'x'}, ...]"
    ),
    checker=_check_fall,
    hints=(
        "A loop that writes in its callback commits every answer, however late. What would "
        "a reader see if an old answer landed after a newer one?",
        "Send two requests built on the same base, let the second one's answer commit, let an "
        "observer read, then let the first one's answer commit, and let the same observer read "
        "again. Check what each commit writes.",
        "Two answers built on base 0 each write version 1. To make the head go down, the newer "
        "answer must be built on a later base: commit v1 on base 0, then v2 on base ____, "
        "read, then commit the late answer on base 0, and read again.",
    ),
    solution_text=(
        "events = [{'at': 1, 'event': 'request', 'ballot': 'a'}, "
        "{'at': 2, 'event': 'request', 'ballot': 'b'}, "
        "{'at': 3, 'event': 'commit', 'ballot': 'b', 'version': 1, 'base': 0}, "
        "{'at': 4, 'event': 'request', 'ballot': 'c'}, "
        "{'at': 5, 'event': 'commit', 'ballot': 'c', 'version': 2, 'base': 1}, "
        "{'at': 6, 'event': 'head', 'observer': 'r1', 'version': 2}, "
        "{'at': 7, 'event': 'commit', 'ballot': 'a', 'version': 1, 'base': 0}, "
        "{'at': 8, 'event': 'head', 'observer': 'r1', 'version': 1}]"
    ),
)


exercises: list[Exercise] = [audit_orphans_ex, fall_log_ex]
# The notebook each exercise practises: notebooks/10_... -> exercises/solutions/ex10_...
by_lesson: dict[int, list[Exercise]] = {10: [audit_orphans_ex, fall_log_ex]}
