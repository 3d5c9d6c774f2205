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

The structs below are the format: msgspec checks the types, the 64-bit range, the required
and the unknown fields (`labkit.typed_json`). What a type cannot say is checked after it: the
text of names and shard keys, and that an id names a row the log has by then. The file itself
is parsed by the standard library, which knows lines and columns and lets a key given twice
be refused rather than the last one kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import msgspec
from msgspec import UNSET, UnsetType

import labkit.frontier.log as fr
from labkit import typed_json
from labkit.typed_json import Count, Int64, NonEmptyText, RowId, TooLong


def _data_dir() -> Path:
    """The bundled scenarios: the package's `scenario_files` (a real folder in an installed
    wheel, a symlink to `data/scenarios` in a checkout), else the checkout's `data/scenarios`
    (for a checkout made without symlinks)."""
    here = Path(__file__).resolve().parent.parent  # labkit/
    packaged = here / "scenario_files"
    return packaged.resolve() if packaged.is_dir() else here.parent / "data" / "scenarios"


DATA_DIR = _data_dir()
Direction = Literal["inbound", "outbound"]
DIRECTIONS: tuple[str, ...] = get_args(Direction)
if TYPE_CHECKING:
    Policy = str
else:
    Policy = Literal[fr.POLICIES]
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
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


# --- the format ------------------------------------------------------------------------------


class _Closed(msgspec.Struct, forbid_unknown_fields=True):
    """An object that names only its own fields."""


class Message(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """An initial row of the log."""

    shard: NonEmptyText
    priority: Int64
    direction: Direction = "inbound"


# A check's coverage and orphans: one optional field per policy of the log.
_Coverage = msgspec.defstruct(
    "Coverage",
    [(p, Count | UnsetType, UNSET) for p in fr.POLICIES],
    bases=(_Closed,),
)
_Orphans = msgspec.defstruct(
    "Orphans",
    [(p, list[RowId] | UnsetType, UNSET) for p in fr.POLICIES],
    bases=(_Closed,),
)


class _Event(_Closed, tag_field="op"):
    """One step of a scenario, told apart by its `op`."""


class _Enqueue(_Event, tag="enqueue"):
    shard: NonEmptyText
    priority: Int64
    direction: Direction | UnsetType = UNSET


class _Dispatch(_Event, tag="dispatch"):
    shard: NonEmptyText | UnsetType = UNSET


class _ById(_Event):
    """An op on one row, named by its id."""

    id: RowId


class _Start(_ById, tag="start"):
    pass


class _Deliver(_ById, tag="deliver"):
    pass


class _Fail(_ById, tag="fail"):
    pass


class _Redrive(_ById, tag="redrive"):
    pass


class _Summarize(_Event, tag="summarize"):
    shard: NonEmptyText | UnsetType = UNSET
    policy: Policy | UnsetType = UNSET


class _Check(_Event, tag="check"):
    shard: NonEmptyText
    frontier: Count | UnsetType = UNSET
    max_watermark: RowId | None | UnsetType = UNSET
    coverage: _Coverage | UnsetType = UNSET  # type: ignore[valid-type]
    orphans: _Orphans | UnsetType = UNSET  # type: ignore[valid-type]


_AnyEvent = _Enqueue | _Dispatch | _Start | _Deliver | _Fail | _Redrive | _Summarize | _Check
_BY_OP: dict[str, type[_Event]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in get_args(_AnyEvent)
}


class _File(_Closed):
    name: NonEmptyText
    title: NonEmptyText
    description: NonEmptyText
    messages: list[Message]
    events: list[_AnyEvent]
    shards: list[NonEmptyText] = []


def _names(cls: type[msgspec.Struct], required: bool) -> tuple[str, ...]:
    return tuple(f.name for f in msgspec.structs.fields(cls) if f.required == required)


ID_OPS = tuple(op for op, cls in _BY_OP.items() if issubclass(cls, _ById))  # a row by its id
# op -> (required fields, optional fields), "op" itself excluded: what the structs above say
OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    op: (_names(cls, True), _names(cls, False)) for op, cls in _BY_OP.items()
}
_CHECK_FIELDS = OPS["check"][1]
_CHOICES = {"op": tuple(OPS), "direction": DIRECTIONS, "policy": fr.POLICIES}


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


def _json_objects() -> tuple[list[_JsonObject], Any]:
    """A hook for `json.loads` that makes `_JsonObject`s, and the list of those that were
    given a key twice (the parser makes inner objects first: not in the order of the text)."""
    twice: list[_JsonObject] = []

    def hook(pairs: list[tuple[str, Any]]) -> _JsonObject:
        obj = _JsonObject()
        for key, value in pairs:
            if key in obj and obj.duplicate is None:
                obj.duplicate = key
                twice.append(obj)
            obj[key] = value
        return obj

    return twice, hook


def _json_int(text: str) -> int | TooLong:
    return int(text) if len(text) <= _MAX_INT_DIGITS else TooLong(text)


def _walk(data: Any) -> Iterator[tuple[typed_json.Path, Any]]:
    """Every value of parsed JSON with its path, in the order of the text (no recursion: a
    file may nest as deep as the parser went)."""
    stack: list[tuple[typed_json.Path, Any]] = [((), data)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(node))))


# --- validation ------------------------------------------------------------------------------


class _Checker:
    """What the structs cannot say, checked with the file already named in each error."""

    def __init__(self, source: str, data: Any) -> None:
        self.source, self.data = source, data

    def fail(self, path: typed_json.Path, problem: str) -> ScenarioError:
        """The error for the field at `path`: `messages[i]` and `events[i]` are entries, the
        rest of the path is the field; anything else is a field of the scenario itself."""
        if len(path) >= 2 and path[0] in ("messages", "events") and isinstance(path[1], int):
            entry, rest = f"{path[0]}[{path[1]}]", path[2:]
        else:
            entry, rest = "scenario", path
        return ScenarioError(self.source, entry, typed_json.dotted(rest) or None, problem)

    def refused(self, exc: msgspec.ValidationError) -> ScenarioError:
        why = typed_json.refusal(exc, self.data, _CHOICES)
        problem = why.problem
        if problem == "unknown field":
            problem += f" (allowed: {self.allowed(why.path[:-1])})"
        return self.fail(why.path, problem)

    def allowed(self, where: typed_json.Path) -> list[str]:
        """The fields the object at `where` may hold."""
        names = [step for step in where if isinstance(step, str)]
        if not names:
            return sorted(f.name for f in msgspec.structs.fields(_File))
        if names == ["messages"]:
            return sorted(f.name for f in msgspec.structs.fields(Message))
        if names == ["events"]:
            op = typed_json.value_at(self.data, (*where, "op"))
            fields = OPS.get(op, ((), ())) if isinstance(op, str) else ((), ())
            return sorted(["op", *fields[0], *fields[1]])
        return sorted(fr.POLICIES)

    def odd_text(self) -> ScenarioError:
        """The first key or text that is not Unicode (a lone surrogate): msgspec cannot even
        look such a key up, so its refusal is a `UnicodeEncodeError`, not a path."""
        for path, node in _walk(self.data):
            for key in node if isinstance(node, dict) else ():
                if not _encodable(key):
                    return self.fail((*path, key), f"unknown field (allowed: {self.allowed(path)})")
            if isinstance(node, str) and not _encodable(node):
                return self.text(node, path) or self.fail(path, "not Unicode text")
        return self.fail((), "not Unicode text")

    def text(
        self, value: str, path: typed_json.Path, multiline: bool = False
    ) -> ScenarioError | None:
        """The error for a control character or a lone surrogate in `value`, if it holds one."""
        bad = (_BAD_CHAR_MULTILINE_RE if multiline else _BAD_CHAR_RE).search(value)
        if not bad:
            return None
        char = bad.group()
        kind = "a lone surrogate" if "\ud800" <= char <= "\udfff" else "a control character"
        return self.fail(path, f"{kind} {char!r} at position {bad.start()} is not allowed here")

    def texts(self, *fields: tuple[str | UnsetType, typed_json.Path, bool]) -> None:
        for value, path, multiline in fields:
            if isinstance(value, str) and (error := self.text(value, path, multiline)):
                raise error


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_events(ck: _Checker, events: list[_AnyEvent], rows: int) -> None:
    """Each event's shard key, and that each id it names is a row the log has by then."""
    for i, ev in enumerate(events):
        ck.texts((getattr(ev, "shard", UNSET), ("events", i, "shard"), False))
        if isinstance(ev, _Enqueue):
            rows += 1
        elif isinstance(ev, _ById):
            if ev.id > rows:
                raise ck.fail(
                    ("events", i, "id"), f"id {ev.id} does not exist yet (log has {rows} rows)"
                )
            rows += isinstance(ev, _Redrive)
        elif isinstance(ev, _Check):
            _check_check(ck, ev, i, rows)


def _check_check(ck: _Checker, ev: _Check, i: int, rows: int) -> None:
    if all(getattr(ev, name) is UNSET for name in _CHECK_FIELDS):
        raise ck.fail(("events", i, "op"), f"a check needs at least one of {list(_CHECK_FIELDS)}")
    for group in ("coverage", "orphans"):
        given = getattr(ev, group)
        if given is not UNSET and all(getattr(given, p) is UNSET for p in fr.POLICIES):
            raise ck.fail(("events", i, group), f"expected at least one of {list(fr.POLICIES)}")
    if ev.orphans is not UNSET:
        for policy in fr.POLICIES:
            for k, row in enumerate(getattr(ev.orphans, policy) or ()):
                if row > rows:
                    raise ck.fail(
                        ("events", i, "orphans", policy, k),
                        f"id {row} does not exist yet (log has {rows} rows)",
                    )


def scenario_from_dict(data: Any, source: str = "<dict>") -> Scenario:
    """Validate a parsed scenario (e.g. from JSON) and return it; `ScenarioError` if invalid."""
    ck = _Checker(source, data)
    try:
        parsed = msgspec.convert(data, _File, strict=True)
    except msgspec.ValidationError as exc:
        raise ck.refused(exc) from None
    except UnicodeEncodeError:
        raise ck.odd_text() from None
    ck.texts(
        (parsed.name, ("name",), False),
        (parsed.title, ("title",), False),
        (parsed.description, ("description",), True),
        *((key, ("shards", i), False) for i, key in enumerate(parsed.shards)),
        *((m.shard, ("messages", i, "shard"), False) for i, m in enumerate(parsed.messages)),
    )
    if not _NAME_RE.fullmatch(parsed.name):
        raise ck.fail(("name",), f"use lowercase letters, digits, '-' or '_': {parsed.name!r}")
    _check_events(ck, parsed.events, len(parsed.messages))
    return Scenario(
        parsed.name,
        parsed.title,
        parsed.description,
        tuple(parsed.messages),
        tuple(dict(raw) for raw in data["events"]),
        tuple(parsed.shards),
        source,
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
    twice, hook = _json_objects()
    try:
        data = json.loads(text, object_pairs_hook=hook, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise ScenarioError(
            source, f"line {exc.lineno} column {exc.colno}", None, f"invalid JSON: {exc.msg}"
        ) from exc
    except RecursionError as exc:
        raise ScenarioError(source, "file", None, "invalid JSON: nested too deeply") from exc
    if twice:  # a key given twice is refused, not the last one kept: the first in the text
        where, obj = next((p, n) for p, n in _walk(data) if getattr(n, "duplicate", None))
        raise _Checker(source, data).fail(
            (*where, obj.duplicate), "given twice in one object (JSON would keep the last)"
        )
    return scenario_from_dict(data, source)


def list_scenarios() -> list[Path]:
    """The bundled scenario files, sorted by name."""
    return sorted(DATA_DIR.glob("*.json"))
