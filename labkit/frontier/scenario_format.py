"""The scenario file format: JSON read strictly and validated into a `Scenario`.

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
the file, the entry and the field. `labkit.frontier.scenarios` runs a validated scenario.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import labkit.frontier.log as fr


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
ID_OPS = ("start", "deliver", "fail", "redrive")  # the ops that name a row by its id
# op -> (required fields, optional fields), "op" itself excluded
OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "enqueue": (("shard", "priority"), ("direction",)),
    "dispatch": ((), ("shard",)),
    **{op: (("id",), ()) for op in ID_OPS},
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
        shown = (
            field_name
            if field_name is None or field_name.isprintable()
            else (repr(field_name)[1:-1])
        )
        where = f"{entry}, field '{shown}'" if field_name else entry
        super().__init__(f"{source}: {where}: {problem}")


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
        if isinstance(value, _LongInt) or (type(value) is int and not INT_MIN <= value <= INT_MAX):
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
    elif op in ID_OPS:
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
