"""Delivery scenarios on SQLite: build them in code, run them step by step, read the timeline.

`run_scenario` plays a validated `Scenario` (`labkit.frontier.scenario_format` reads and checks
the JSON files) on a fresh in-memory log and returns one timeline row per (step, shard);
`POLICY_COLUMNS` names the timeline's columns for each policy, for the plots and widgets that
read them. Scenarios can also be built from a delivery order, random or typed by a reader
("3 5 f1 2 r1 4 6": deliveries, dead letters and redrives).
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

import labkit.backend as backend
import labkit.frontier.log as fr
import labkit.frontier.summarizer as sm
from labkit.frontier.scenario_format import ID_OPS, Scenario, ScenarioError, scenario_from_dict


class ScenarioCheckError(AssertionError):
    """A `check` event whose expectation did not match what the log computed."""


@dataclass(frozen=True)
class PolicyColumns:
    """The timeline columns `run_scenario` writes for one policy: where its coverage ends, how
    many rows it orphaned, and which (a tuple of ids). Readers take the names from here."""

    coverage: str
    orphans: str
    orphan_ids: str


POLICY_COLUMNS: dict[str, PolicyColumns] = {
    policy: PolicyColumns(f"coverage_{policy}", f"orphans_{policy}", f"orphan_ids_{policy}")
    for policy in fr.POLICIES
}


# --- building scenarios in code --------------------------------------------------------------


def random_order(n: int, seed: int | None = None) -> list[int]:
    """A random delivery order of ids 1..n, reproducible from `seed`."""
    order = list(range(1, n + 1))
    random.Random(seed).shuffle(order)
    return order


def dispatch_order(priorities: Sequence[int]) -> list[int]:
    """The order a single worker dispatching `ORDER BY priority, id` finishes ids 1..n."""
    return sorted(range(1, len(priorities) + 1), key=lambda i: (priorities[i - 1], i))


def scenario_from_order(
    priorities: Sequence[int],
    order: Sequence[int] | None = None,
    failures: Iterable[int] = (),
    seed: int | None = None,
    shard: str = "main",
) -> Scenario:
    """One shard with ids 1..n at `priorities`, finished in `order`, summarizing after each.

    `order` may list a subset (the rest stay pending); when None it is `random_order(n, seed)`.
    Ids in `failures` are dead-lettered instead of delivered.
    """
    n = len(priorities)
    order = random_order(n, seed) if order is None else list(order)
    failed = set(failures)
    if len(set(order)) != len(order) or not set(order) <= set(range(1, n + 1)):
        raise ValueError(f"order must list distinct ids from 1..{n}, got {order}")
    if not failed <= set(order):
        raise ValueError(f"failures {sorted(failed - set(order))} are not in the order")
    return scenario_from_steps(priorities, order_steps(order, failed), shard)


# --- running ---------------------------------------------------------------------------------


def _label(ev: dict[str, Any], result: int | None) -> str:
    op = ev["op"]
    if op in ID_OPS:
        return f"{op} #{ev['id']}" + (f" -> #{result}" if op == "redrive" else "")
    if op == "enqueue":
        return f"enqueue #{result} ({ev['shard']}, p{ev['priority']})"
    if op == "dispatch":
        return f"dispatch -> #{result}" if result is not None else "dispatch (idle)"
    if op == "summarize":
        return f"summarize {ev.get('shard', 'all')} ({ev.get('policy', 'both')})"
    return f"check {ev['shard']}"


def _apply(conn: sqlite3.Connection, scenario: Scenario, ev: dict[str, Any]) -> int | None:
    op = ev["op"]
    if op == "enqueue":
        return fr.enqueue(conn, ev["shard"], ev["priority"], ev.get("direction", "inbound"))
    if op == "dispatch":
        return fr.dispatch_next(conn, ev.get("shard"))
    if op == "redrive":
        return fr.redrive(conn, ev["id"])
    if op in ID_OPS:
        step = {"start": fr.mark_running, "deliver": fr.mark_delivered, "fail": fr.mark_failed}
        step[op](conn, ev["id"])
    elif op == "summarize":
        keys = [ev["shard"]] if "shard" in ev else scenario.tracked_shards
        policies = [ev["policy"]] if "policy" in ev else fr.POLICIES
        for key in keys:
            for policy in policies:
                sm.summarize_range(conn, key, policy)
    return None


def shard_state(conn: backend.Connection, shard: str) -> dict[str, Any]:
    """Everything the timeline shows for one shard right now (on either backend)."""
    statuses = dict(
        fr.fetch(
            conn, "SELECT id, status FROM conversations WHERE channel_key = ? ORDER BY id", (shard,)
        )
    )
    cov = {p: sm.coverage_end(conn, shard, p) for p in fr.POLICIES}
    lost = {p: tuple(sm.orphans(conn, shard, p)) for p in fr.POLICIES}
    mx = fr.max_delivered_watermark(conn, shard)
    return {
        "shard": shard,
        "statuses": statuses,
        "max_watermark": pd.NA if mx is None else mx,
        "frontier": fr.delivered_frontier(conn, shard, cov["frontier"]),
        **{cols.coverage: cov[p] for p, cols in POLICY_COLUMNS.items()},
        **{cols.orphans: len(lost[p]) for p, cols in POLICY_COLUMNS.items()},
        **{cols.orphan_ids: lost[p] for p, cols in POLICY_COLUMNS.items()},
    }


def _verify(scenario: Scenario, ev: dict[str, Any], entry: str, state: dict[str, Any]) -> None:
    mx = state["max_watermark"]
    actual: dict[str, Any] = {
        "frontier": state["frontier"],
        "max_watermark": None if mx is pd.NA else mx,
    }
    for policy, cols in POLICY_COLUMNS.items():
        actual[f"coverage.{policy}"] = state[cols.coverage]
        actual[f"orphans.{policy}"] = list(state[cols.orphan_ids])
    expected: dict[str, Any] = {k: ev[k] for k in ("frontier", "max_watermark") if k in ev}
    for group in ("coverage", "orphans"):
        expected.update({f"{group}.{p}": v for p, v in ev.get(group, {}).items()})
    for name, want in expected.items():
        if actual[name] != want:
            raise ScenarioCheckError(
                f"{scenario.source}: {entry}, field '{name}': expected {want!r} for shard "
                f"{ev['shard']!r}, the log computed {actual[name]!r}"
            )


def _enqueue_messages(conn: sqlite3.Connection, scenario: Scenario) -> None:
    for m in scenario.messages:
        fr.enqueue(conn, m.shard, m.priority, m.direction)


def _apply_event(
    conn: sqlite3.Connection, scenario: Scenario, ev: dict[str, Any], entry: str
) -> int | None:
    try:
        return _apply(conn, scenario, ev)
    except fr.TransitionError as exc:
        raise ScenarioError(scenario.source, entry, "id", str(exc)) from exc


def replay_scenario(scenario: Scenario, upto: int | None = None) -> sqlite3.Connection:
    """Play the scenario (its first `upto` events, default all) on a fresh in-memory log.

    Returns the open connection, for what the timeline does not carry: the summaries and
    their items, query plans. `check` events are verified as in `run_scenario`.
    """
    conn = fr.connect()
    _enqueue_messages(conn, scenario)
    for k, ev in enumerate(scenario.events[:upto]):
        entry = f"events[{k}]"
        _apply_event(conn, scenario, ev, entry)
        if ev["op"] == "check":
            _verify(scenario, ev, entry, shard_state(conn, ev["shard"]))
    return conn


# What one run may hold, named in the refusal: the timeline has a row per (step, tracked shard),
# and each row a status map of its shard's rows (shared between rows while a shard is unchanged).
MAX_TIMELINE_ROWS = 500_000
MAX_STATUS_CELLS = 10_000_000


def check_size(scenario: Scenario) -> None:
    """Refuse, before anything runs, a scenario whose timeline would outgrow the limits above
    (a 100k-event, 50-shard file once grew to 4 GB in a minute); the error names the limit."""
    steps = len(scenario.events) + 1
    rows = steps * len(scenario.tracked_shards)
    if rows > MAX_TIMELINE_ROWS:
        raise ScenarioError(
            scenario.source,
            "events",
            None,
            f"the timeline would have {rows:,} rows ({steps:,} steps x "
            f"{len(scenario.tracked_shards)} tracked shards); at most {MAX_TIMELINE_ROWS:,}: "
            "split the scenario or use fewer shards",
        )
    grown = sum(1 for ev in scenario.events if ev["op"] in ("enqueue", "redrive"))
    cells = steps * (len(scenario.messages) + grown)
    if cells > MAX_STATUS_CELLS:
        raise ScenarioError(
            scenario.source,
            "messages",
            None,
            f"{steps:,} steps over up to {len(scenario.messages) + grown:,} rows would record "
            f"{cells:,} row statuses; at most {MAX_STATUS_CELLS:,}: split the scenario",
        )


def _touched(conn: sqlite3.Connection, ev: dict[str, Any], result: int | None) -> set[str]:
    """The shards whose state `ev` may have changed (its row's shard, or the shards named)."""
    ids = [i for i in (ev.get("id"), result) if isinstance(i, int)]
    shards = {ev["shard"]} if "shard" in ev else set()
    for row_id in ids:
        shards.update(r[0] for r in fr.fetch(conn, SHARD_OF_SQL, (row_id,)))
    return shards


SHARD_OF_SQL = "SELECT channel_key FROM conversations WHERE id = ?"


def run_scenario(scenario: Scenario) -> pd.DataFrame:
    """Step the scenario on a fresh in-memory SQLite log; one row per (step, tracked shard).

    Step 0 is the initial log; step k is after `events[k-1]`. `check` events are verified
    (a mismatch raises `ScenarioCheckError`); a refused transition raises `ScenarioError`, and
    so does a scenario too big to hold (`check_size`). Only the shards an event touched are
    read again; the others keep their last state (the same objects, not copies).
    Columns: step, event (label), op, shard, statuses ({id: status} of the shard's rows),
    max_watermark (Int64, NA before any delivery), frontier (from the frontier policy's
    coverage_end), then per policy (`POLICY_COLUMNS`) coverage_frontier, coverage_max,
    orphans_frontier, orphans_max (counts) and orphan_ids_frontier, orphan_ids_max (tuples).
    """
    check_size(scenario)
    conn = fr.connect()  # a fresh in-memory log with the schema, opened the one way (labkit.db)
    try:
        _enqueue_messages(conn, scenario)
        states = {key: shard_state(conn, key) for key in scenario.tracked_shards}
        records = [{"step": 0, "event": "start", "op": "start_log", **s} for s in states.values()]
        for k, ev in enumerate(scenario.events):
            entry = f"events[{k}]"
            result = _apply_event(conn, scenario, ev, entry)
            changed = (
                scenario.tracked_shards if ev["op"] == "summarize" else _touched(conn, ev, result)
            )
            for key in changed:
                if key in states:
                    states[key] = shard_state(conn, key)
            if ev["op"] == "check":
                _verify(scenario, ev, entry, states[ev["shard"]])
            label = _label(ev, result)
            records += [
                {"step": k + 1, "event": label, "op": ev["op"], **s} for s in states.values()
            ]
    finally:
        conn.close()
    df = pd.DataFrame.from_records(records)
    if not df.empty:
        df["max_watermark"] = df["max_watermark"].astype("Int64")
    return df


def status_matrix(timeline: pd.DataFrame, shard: str | None = None) -> pd.DataFrame:
    """Pivot `run_scenario` output to steps x ids of status strings (NaN before a row exists)."""
    rows = timeline if shard is None else timeline[timeline["shard"] == shard]
    frame = pd.DataFrame([dict(s) for s in rows["statuses"]], index=rows["step"].to_numpy())
    merged = frame.groupby(level=0).first() if shard is None else frame
    return merged.reindex(sorted(merged.columns), axis=1)


FINAL_COLUMNS = (
    "shard",
    "frontier",
    "max_watermark",
    *(cols.coverage for cols in POLICY_COLUMNS.values()),
    *(cols.orphan_ids for cols in POLICY_COLUMNS.values()),
)


def final_state(timeline: pd.DataFrame) -> pd.DataFrame:
    """The last row of each shard in `run_scenario` output: where each policy ended up."""
    last = timeline.groupby("shard", sort=False).tail(1)
    return last.loc[:, list(FINAL_COLUMNS)].reset_index(drop=True)


# --- the order a reader types: deliveries, dead letters and redrives -------------------------

ORDER_OPS = {"": "deliver", "f": "fail", "r": "redrive"}
_ORDER_SPLIT_RE = re.compile(r"[\s,;]+")
_ORDER_TOKEN_RE = re.compile(r"^([fr]?)([0-9]{1,6})$", re.IGNORECASE)
ORDER_EXAMPLE = "3 5 f1 2 r1 4 6"


class OrderTokenError(ValueError):
    """One token of a typed order cannot happen; names its position (from 1) and its text."""

    def __init__(self, position: int, token: str, problem: str) -> None:
        self.position, self.token, self.problem = position, token, problem
        super().__init__(f"token {position} {token!r}: {problem}")


@dataclass(frozen=True)
class OrderStep:
    """One step of a typed order: deliver, fail (dead-letter) or redrive row `id`.

    A redrive leaves row `id` failed and adds `new_id`, a new pending row (terminal is forever).
    """

    op: str
    id: int
    new_id: int | None = None

    @property
    def token(self) -> str:
        """The step as the reader types it: "3", "f1" or "r1"."""
        prefix = next(p for p, op in ORDER_OPS.items() if op == self.op)
        return f"{prefix}{self.id}"


def _step_problem(op: str, row: int, status: str | None, n: int, redriven: dict[int, int]) -> str:
    """Why `op` on `row` cannot happen now, or "" if it can."""
    if op == "redrive":
        if status == "failed" and row in redriven:
            return f"row {row}'s dead letter was already redriven as row {redriven[row]}"
        if status != "failed":
            now = "it does not exist" if status is None else f"it is {status}"
            return f"row {row} has not failed ({now}); only a dead letter can be redriven"
        return ""
    if status is None:
        return f"row {row} does not exist: the shard has rows 1..{n} plus one per redrive"
    if status == "failed":
        return f"row {row} already failed; terminal is forever (r{row} retries it as a new row)"
    if status == "delivered":
        return f"row {row} is already delivered; each row finishes once"
    return ""


def parse_delivery_order(text: str, n: int, max_rows: int | None = None) -> tuple[OrderStep, ...]:
    """Parse a typed order such as "3 5 f1 2 r1 4 6" for a shard of rows 1..n.

    `3` delivers row 3, `f1` dead-letters row 1, `r1` redrives row 1's dead letter as a new
    pending row with the next id (n+1, n+2, ...), which later tokens can finish by that id.
    Rows never finished stay pending. `OrderTokenError` names the first token that cannot
    happen; at most `max_rows` rows in all (default 2n).
    """
    tokens = [t for t in _ORDER_SPLIT_RE.split(text.strip()) if t]
    if not tokens:
        raise ValueError(f"type the order rows finish in, e.g. {ORDER_EXAMPLE}")
    limit = 2 * n if max_rows is None else max_rows
    statuses = dict.fromkeys(range(1, n + 1), "pending")
    redriven: dict[int, int] = {}
    steps = []
    for position, token in enumerate(tokens, 1):
        found = _ORDER_TOKEN_RE.match(token)
        if found is None:
            raise OrderTokenError(
                position, token, "use a row id (deliver it), f<id> (it fails) or r<id> (redrive)"
            )
        op, row = ORDER_OPS[found.group(1).lower()], int(found.group(2))
        problem = _step_problem(op, row, statuses.get(row), n, redriven)
        if not problem and op == "redrive" and len(statuses) >= limit:
            problem = f"a redrive would add row {len(statuses) + 1}; at most {limit} rows fit"
        if problem:
            raise OrderTokenError(position, token, problem)
        if op == "redrive":
            new_id = redriven[row] = len(statuses) + 1
            statuses[new_id] = "pending"
            steps.append(OrderStep(op, row, new_id))
        else:
            statuses[row] = "delivered" if op == "deliver" else "failed"
            steps.append(OrderStep(op, row))
    return tuple(steps)


def format_delivery_order(steps: Iterable[OrderStep]) -> str:
    """The typed form of `steps`, e.g. "3 5 f1 2 r1 4 6" (round-trips `parse_delivery_order`)."""
    return " ".join(step.token for step in steps)


def order_steps(order: Iterable[int], failures: Iterable[int] = ()) -> tuple[OrderStep, ...]:
    """Steps that finish `order` in turn, dead-lettering the ids in `failures`."""
    failed = set(failures)
    return tuple(OrderStep("fail" if i in failed else "deliver", i) for i in order)


def dispatched_order(priorities: Sequence[int], shard: str = "main") -> list[int]:
    """The order labkit's dispatcher (`frontier.dispatch_next`, `ORDER BY priority, id`) hands
    out rows 1..n with these priorities, taken from a fresh SQLite log, one worker."""
    conn = fr.connect()
    try:
        for p in priorities:
            fr.enqueue(conn, shard, p)
        order = []
        while (row := fr.dispatch_next(conn, shard)) is not None:
            order.append(row)
        return order
    finally:
        conn.close()


def scenario_from_steps(
    priorities: Sequence[int], steps: Sequence[OrderStep], shard: str = "main"
) -> Scenario:
    """One shard with rows 1..n at `priorities`, playing `steps`, summarizing after each."""
    events: list[dict[str, Any]] = []
    for step in steps:
        events.append({"op": step.op, "id": step.id})
        events.append({"op": "summarize", "shard": shard})
    data = {
        "name": "custom",
        "title": "Custom delivery order",
        "description": f"priorities {list(priorities)}, order {format_delivery_order(steps)}",
        "messages": [{"shard": shard, "priority": p} for p in priorities],
        "events": events,
    }
    return scenario_from_dict(data, "<scenario_from_steps>")
