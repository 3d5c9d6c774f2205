"""Delivery scenarios as data: load and strictly validate JSON, build them in code, run them.

A scenario file (`data/scenarios/*.json`, shipped in the package as `labkit/scenario_files`)
holds::

    {"name": "seed", "title": "...", "description": "...",
     "shards": ["quiet"],                                  # optional: track shards with no rows
     "messages": [{"shard": "main", "priority": 5, "direction": "inbound"}, ...],
     "events": [{"op": "deliver", "id": 3}, {"op": "summarize"},
                {"op": "check", "shard": "main", "frontier": 0, "max_watermark": 5}, ...]}

Messages get ids 1..n in list order; `enqueue` and `redrive` events append ids n+1, n+2, ...
Ops: enqueue(shard, priority[, direction]), dispatch([shard]), start(id), deliver(id), fail(id),
redrive(id), summarize([shard][, policy]), check(shard, any of frontier, max_watermark,
coverage{policy: int}, orphans{policy: [ids]}). Every problem raises `ScenarioError` naming
the file, the entry and the field.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import labkit.backend as backend
import labkit.frontier.log as fr
import labkit.frontier.summarizer as sm


def _data_dir() -> Path:
    """The bundled scenarios: the package's `scenario_files` (a real folder in an installed
    wheel, a symlink to `data/scenarios` in a checkout), else the checkout's `data/scenarios`
    (for a checkout made without symlinks)."""
    here = Path(__file__).resolve().parent.parent  # labkit/
    packaged = here / "scenario_files"
    return packaged.resolve() if packaged.is_dir() else here.parent / "data" / "scenarios"


DATA_DIR = _data_dir()
DIRECTIONS = ("inbound", "outbound")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_TOP_REQUIRED = ("name", "title", "description", "messages", "events")
_TOP_OPTIONAL = ("shards",)
_ID_OPS = ("start", "deliver", "fail", "redrive")
# op -> (required fields, optional fields), "op" itself excluded
OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "enqueue": (("shard", "priority"), ("direction",)),
    "dispatch": ((), ("shard",)),
    **{op: (("id",), ()) for op in _ID_OPS},
    "summarize": ((), ("shard", "policy")),
    "check": (("shard",), ("frontier", "max_watermark", "coverage", "orphans")),
}
_CHECK_FIELDS = OPS["check"][1]
# SQLite stores INTEGER in 64 bits; Python would raise a bare OverflowError past these.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
# Longer digit strings are not turned into ints at all (Python refuses past 4300 digits).
_MAX_INT_DIGITS = 40
# Control characters and lone surrogates (which SQLite cannot store as UTF-8) in a text field;
# a description may hold line breaks and tabs.
_BAD_CHAR_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_BAD_CHAR_MULTILINE_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


class ScenarioError(ValueError):
    """A scenario that cannot be loaded or run; names the file, the entry and the field."""

    def __init__(self, source: str, entry: str, field_name: str | None, problem: str) -> None:
        self.source, self.entry, self.field = source, entry, field_name
        shown = field_name if field_name is None or field_name.isprintable() else (
            repr(field_name)[1:-1]
        )
        where = f"{entry}, field '{shown}'" if field_name else entry
        super().__init__(f"{source}: {where}: {problem}")


class ScenarioCheckError(AssertionError):
    """A `check` event whose expectation did not match what the log computed."""


@dataclass(frozen=True)
class Message:
    """An initial row of the log."""

    shard: str
    priority: int
    direction: str = "inbound"


@dataclass(frozen=True)
class Scenario:
    """A validated scenario; `events` are plain dicts whose fields match `OPS`."""

    name: str
    title: str
    description: str
    messages: tuple[Message, ...]
    events: tuple[dict[str, Any], ...]
    shards: tuple[str, ...] = ()
    source: str = "<scenario>"
    tracked_shards: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        keys = [*self.shards, *(m.shard for m in self.messages)]
        keys += [e["shard"] for e in self.events if "shard" in e]
        # dict.fromkeys keeps first-seen order in linear time (a list scan made loading quadratic)
        object.__setattr__(self, "tracked_shards", tuple(dict.fromkeys(keys)))


# --- parsing ---------------------------------------------------------------------------------


class _JsonObject(dict):
    """A parsed JSON object that remembers the first key it saw twice (JSON keeps the last)."""

    duplicate: str | None = None


class _LongInt:
    """A JSON integer with too many digits to be any SQLite integer; reported by the checks."""

    def __init__(self, digits: str) -> None:
        self.digits = len(digits.lstrip("-"))

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _show_int(value: int | _LongInt) -> str:
    """An integer for an error message; a huge one by its size (`str` refuses > 4300 digits)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"<an integer of {value.bit_length()} bits>"
    return repr(value)


def _json_object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    for key, value in pairs:
        if key in obj and obj.duplicate is None:
            obj.duplicate = key
        obj[key] = value
    return obj


def _json_int(text: str) -> int | _LongInt:
    return int(text) if len(text) <= _MAX_INT_DIGITS else _LongInt(text)


# --- validation ------------------------------------------------------------------------------


class _Checker:
    """Field checks that raise `ScenarioError` with the file and entry already filled in."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, entry: str, name: str | None, problem: str) -> ScenarioError:
        return ScenarioError(self.source, entry, name, problem)

    def obj(self, obj: Any, entry: str, name: str | None = None) -> dict:
        """`obj` if it is a JSON object that names each field once."""
        if not isinstance(obj, dict):
            raise self.fail(entry, name, f"expected an object, got {type(obj).__name__}")
        duplicate = getattr(obj, "duplicate", None)
        if duplicate is not None:
            where = duplicate if name is None else f"{name}.{duplicate}"
            raise self.fail(entry, where, "given twice in one object (JSON would keep the last)")
        return obj

    def keys(self, obj: Any, entry: str, required: Iterable[str], optional: Iterable[str]) -> None:
        self.obj(obj, entry)
        required = tuple(required)
        for name in required:
            if name not in obj:
                raise self.fail(entry, name, "missing required field")
        allowed = set(required) | set(optional)
        for name in obj:
            if name not in allowed:
                raise self.fail(entry, name, f"unknown field (allowed: {sorted(allowed)})")

    def text(self, obj: dict, entry: str, name: str, multiline: bool = False) -> str:
        return self.text_value(obj[name], entry, name, multiline)

    def text_value(self, value: Any, entry: str, name: str, multiline: bool = False) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(entry, name, f"expected a non-empty string, got {value!r}")
        bad = (_BAD_CHAR_MULTILINE_RE if multiline else _BAD_CHAR_RE).search(value)
        if bad:
            char = bad.group()
            kind = "a lone surrogate" if "\ud800" <= char <= "\udfff" else "a control character"
            raise self.fail(
                entry, name, f"{kind} {char!r} at position {bad.start()} is not allowed here"
            )
        return value

    def integer(self, obj: dict, entry: str, name: str, low: int | None = None) -> int:
        return self.int_value(obj[name], entry, name, low)

    def int_value(self, value: Any, entry: str, name: str, low: int | None = None) -> int:
        if isinstance(value, _LongInt) or (
            type(value) is int and not INT_MIN <= value <= INT_MAX
        ):
            raise self.fail(
                entry,
                name,
                f"{_show_int(value)} does not fit SQLite's 64-bit integer [-2**63, 2**63 - 1]",
            )
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(entry, name, f"expected an integer, got {value!r}")
        if low is not None and value < low:
            raise self.fail(entry, name, f"must be >= {low}, got {value}")
        return value

    def choice(self, obj: dict, entry: str, name: str, options: Sequence[str]) -> str:
        value = obj[name]
        if value not in options:
            raise self.fail(entry, name, f"expected one of {list(options)}, got {value!r}")
        return value

    def row_id(self, value: Any, entry: str, name: str, rows: int) -> int:
        value = self.int_value(value, entry, name, low=1)
        if value > rows:
            raise self.fail(entry, name, f"id {value} does not exist yet (log has {rows} rows)")
        return value

    def policy_map(self, obj: dict, entry: str, name: str) -> dict[str, Any]:
        value = obj[name]
        if not isinstance(value, dict) or not value:
            raise self.fail(entry, name, "expected a non-empty object keyed by policy")
        self.obj(value, entry, name)
        for policy in value:
            if policy not in fr.POLICIES:
                raise self.fail(entry, f"{name}.{policy}", f"unknown policy {policy!r}")
        return value


def _validate_message(ck: _Checker, raw: Any, entry: str) -> Message:
    ck.keys(raw, entry, ("shard", "priority"), ("direction",))
    direction = ck.choice(raw, entry, "direction", DIRECTIONS) if "direction" in raw else "inbound"
    return Message(ck.text(raw, entry, "shard"), ck.integer(raw, entry, "priority"), direction)


def _validate_check(ck: _Checker, ev: dict, entry: str, rows: int) -> None:
    if not any(name in ev for name in _CHECK_FIELDS):
        raise ck.fail(entry, "op", f"a check needs at least one of {list(_CHECK_FIELDS)}")
    if "frontier" in ev:
        ck.integer(ev, entry, "frontier", low=0)
    if "max_watermark" in ev and ev["max_watermark"] is not None:
        ck.integer(ev, entry, "max_watermark", low=1)
    if "coverage" in ev:
        for policy, value in ck.policy_map(ev, entry, "coverage").items():
            ck.int_value(value, entry, f"coverage.{policy}", low=0)
    if "orphans" in ev:
        for policy, ids in ck.policy_map(ev, entry, "orphans").items():
            if not isinstance(ids, list):
                raise ck.fail(entry, f"orphans.{policy}", "expected a list of ids")
            for k, value in enumerate(ids):
                ck.row_id(value, entry, f"orphans.{policy}[{k}]", rows)


def _validate_event(ck: _Checker, raw: Any, entry: str, rows: int) -> tuple[dict, int]:
    """Validate one event; return it and the log's row count after it."""
    ck.obj(raw, entry)
    if "op" not in raw:
        raise ck.fail(entry, "op", "missing required field")
    op = ck.choice(raw, entry, "op", tuple(OPS))
    required, optional = OPS[op]
    ck.keys(raw, entry, ("op", *required), optional)
    if "shard" in raw:
        ck.text(raw, entry, "shard")
    if "policy" in raw:
        ck.choice(raw, entry, "policy", fr.POLICIES)
    if "direction" in raw:
        ck.choice(raw, entry, "direction", DIRECTIONS)
    if op == "enqueue":
        ck.integer(raw, entry, "priority")
        rows += 1
    elif op in _ID_OPS:
        ck.row_id(raw["id"], entry, "id", rows)
        rows += op == "redrive"
    elif op == "check":
        _validate_check(ck, raw, entry, rows)
    return dict(raw), rows


def scenario_from_dict(data: Any, source: str = "<dict>") -> Scenario:
    """Validate a parsed scenario (e.g. from JSON) and return it; `ScenarioError` if invalid."""
    ck = _Checker(source)
    ck.keys(data, "scenario", _TOP_REQUIRED, _TOP_OPTIONAL)
    name = ck.text(data, "scenario", "name")
    if not _NAME_RE.fullmatch(name):
        raise ck.fail("scenario", "name", f"use lowercase letters, digits, '-' or '_': {name!r}")
    ck.text(data, "scenario", "title")
    ck.text(data, "scenario", "description", multiline=True)
    shards: list[str] = []
    if "shards" in data:
        if not isinstance(data["shards"], list):
            raise ck.fail("scenario", "shards", "expected a list of shard keys")
        shards = [
            ck.text_value(v, "scenario", f"shards[{i}]") for i, v in enumerate(data["shards"])
        ]
    for key in ("messages", "events"):
        if not isinstance(data[key], list):
            raise ck.fail("scenario", key, "expected a list")
    messages = tuple(
        _validate_message(ck, m, f"messages[{i}]") for i, m in enumerate(data["messages"])
    )
    rows, events = len(messages), []
    for i, raw in enumerate(data["events"]):
        ev, rows = _validate_event(ck, raw, f"events[{i}]", rows)
        events.append(ev)
    return Scenario(
        name, data["title"], data["description"], messages, tuple(events), tuple(shards), source
    )


def load_scenario(path: str | Path) -> Scenario:
    """Load and validate a scenario file; a bare name like "seed" is looked up in `DATA_DIR`."""
    path = Path(path)
    if not path.exists() and path.suffix == "" and len(path.parts) == 1:
        path = DATA_DIR / f"{path.name}.json"
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(source, "file", None, f"cannot read: {exc.strerror}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ScenarioError(
            source,
            f"line {line} column {column}",
            None,
            f"not UTF-8: byte 0x{raw[exc.start]:02x} ({exc.reason}); save the file as UTF-8",
        ) from exc
    try:
        data = json.loads(text, object_pairs_hook=_json_object, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise ScenarioError(
            source, f"line {exc.lineno} column {exc.colno}", None, f"invalid JSON: {exc.msg}"
        ) from exc
    except RecursionError as exc:
        raise ScenarioError(source, "file", None, "invalid JSON: nested too deeply") from exc
    return scenario_from_dict(data, source)


def list_scenarios() -> list[Path]:
    """The bundled scenario files, sorted by name."""
    return sorted(DATA_DIR.glob("*.json"))


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
    if op in _ID_OPS:
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
    if op in _ID_OPS:
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
        "coverage_frontier": cov["frontier"],
        "coverage_max": cov["max"],
        "orphans_frontier": len(lost["frontier"]),
        "orphans_max": len(lost["max"]),
        "orphan_ids_frontier": lost["frontier"],
        "orphan_ids_max": lost["max"],
    }


def _verify(scenario: Scenario, ev: dict[str, Any], entry: str, state: dict[str, Any]) -> None:
    mx = state["max_watermark"]
    actual: dict[str, Any] = {
        "frontier": state["frontier"],
        "max_watermark": None if mx is pd.NA else mx,
    }
    for policy in fr.POLICIES:
        actual[f"coverage.{policy}"] = state[f"coverage_{policy}"]
        actual[f"orphans.{policy}"] = list(state[f"orphan_ids_{policy}"])
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


def run_scenario(scenario: Scenario) -> pd.DataFrame:
    """Step the scenario on a fresh in-memory SQLite log; one row per (step, tracked shard).

    Step 0 is the initial log; step k is after `events[k-1]`. `check` events are verified
    (a mismatch raises `ScenarioCheckError`); a refused transition raises `ScenarioError`.
    Columns: step, event (label), op, shard, statuses ({id: status} of the shard's rows),
    max_watermark (Int64, NA before any delivery), frontier (from the frontier policy's
    coverage_end), coverage_frontier, coverage_max, orphans_frontier, orphans_max (counts)
    and orphan_ids_frontier, orphan_ids_max (tuples).
    """
    conn = fr.connect()  # a fresh in-memory log with the schema, opened the one way (labkit.db)
    try:
        _enqueue_messages(conn, scenario)
        records = [
            {"step": 0, "event": "start", "op": "start_log", **shard_state(conn, key)}
            for key in scenario.tracked_shards
        ]
        for k, ev in enumerate(scenario.events):
            entry = f"events[{k}]"
            result = _apply_event(conn, scenario, ev, entry)
            for key in scenario.tracked_shards:
                state = shard_state(conn, key)
                if ev["op"] == "check" and ev["shard"] == key:
                    _verify(scenario, ev, entry, state)
                records.append(
                    {"step": k + 1, "event": _label(ev, result), "op": ev["op"], **state}
                )
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
    "coverage_frontier",
    "coverage_max",
    "orphan_ids_frontier",
    "orphan_ids_max",
)


def final_state(timeline: pd.DataFrame) -> pd.DataFrame:
    """The last row of each shard in `run_scenario` output: where each policy ended up."""
    last = timeline.groupby("shard", sort=False).tail(1)
    return last.loc[:, list(FINAL_COLUMNS)].reset_index(drop=True)


# --- the order a reader types: deliveries, dead letters and redrives -------------------------

ORDER_OPS = {"": "deliver", "f": "fail", "r": "redrive"}
_ORDER_SPLIT_RE = re.compile(r"[\s,;]+")
_ORDER_TOKEN_RE = re.compile(r"^([fr]?)(\d{1,6})$", re.IGNORECASE)
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
