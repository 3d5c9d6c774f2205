"""JSON validated by msgspec structs (issue 32, item 7): a malformed scenario file or wire body
is refused in one line that names the field path and shows the bad value, and every
constraint of the structs is load-bearing: a test below fails when any one is deleted (a
bool taken for an int, 3.0 for an int, a 65-bit id, an unknown field, a bad `updated_at`,
a missing required field)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from labkit import typed_json
from labkit.frontier import scenario_format as fmt
from labkit.remote import wire
from labkit.validation import INT64_MAX, INT64_MIN

# --- the scenario files ------------------------------------------------------------------------

SCENARIO = {
    "name": "paths",
    "title": "t",
    "description": "d",
    "messages": [{"shard": "main", "priority": 5}, {"shard": "main", "priority": 1}],
    "events": [{"op": "deliver", "id": 1}],
}
# One good event of each op (each names every field its op allows).
EVENTS = {
    "enqueue": {"op": "enqueue", "shard": "main", "priority": 2, "direction": "outbound"},
    "dispatch": {"op": "dispatch", "shard": "main"},
    "start": {"op": "start", "id": 1},
    "deliver": {"op": "deliver", "id": 1},
    "fail": {"op": "fail", "id": 1},
    "redrive": {"op": "redrive", "id": 1},
    "summarize": {"op": "summarize", "shard": "main", "policy": "max"},
    "check": {
        "op": "check",
        "shard": "main",
        "frontier": 0,
        "max_watermark": None,
        "coverage": {"frontier": 0, "max": 1},
        "orphans": {"frontier": [], "max": [2]},
    },
}


def refusal(tmp_path: Path, data: Any) -> fmt.ScenarioError:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(fmt.ScenarioError) as info:
        fmt.load_scenario(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    return info.value


def test_a_malformed_file_is_refused_naming_the_field_path_and_the_value(tmp_path: Path) -> None:
    check = {"op": "check", "shard": "main", "orphans": {"max": [1, True]}}
    err = refusal(tmp_path, {**SCENARIO, "events": [check]})
    assert (err.entry, err.field) == ("events[0]", "orphans.max[1]")
    assert str(err).endswith(": events[0], field 'orphans.max[1]': expected an integer, got True")


def test_every_op_as_written_above_is_accepted(tmp_path: Path) -> None:
    events = [EVENTS[op] for op in ("fail", "redrive", "enqueue", "start", "deliver")]
    events += [EVENTS["dispatch"], EVENTS["summarize"], EVENTS["check"]]
    path = tmp_path / "good.json"
    path.write_text(json.dumps({**SCENARIO, "events": events}))
    assert [e["op"] for e in fmt.load_scenario(path).events] == [e["op"] for e in events]
    assert set(EVENTS) == set(fmt.OPS)  # one good event per op, each with all its fields
    for op, (required, optional) in fmt.OPS.items():
        assert set(EVENTS[op]) == {"op", *required, *optional}


def _with(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """The good scenario with the value at `path` replaced (an event path starts at its op)."""
    data = json.loads(json.dumps(SCENARIO))
    if path[0] in EVENTS:
        data["events"] = [json.loads(json.dumps(EVENTS[path[0]]))]
        path = ("events", 0, *path[1:])
    node = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return data


INT_FIELDS = [
    ("messages", 0, "priority"),
    ("enqueue", "priority"),
    ("deliver", "id"),
    ("start", "id"),
    ("fail", "id"),
    ("redrive", "id"),
    ("check", "frontier"),
    ("check", "max_watermark"),
    ("check", "coverage", "max"),
    ("check", "coverage", "frontier"),
    ("check", "orphans", "max", 0),
]


def _named(path: tuple[str | int, ...]) -> tuple[str, str]:
    entry = "messages[0]" if path[0] == "messages" else "events[0]"
    return entry, typed_json.dotted(path[2:] if path[0] == "messages" else path[1:])


@pytest.mark.parametrize("path", INT_FIELDS)
@pytest.mark.parametrize(
    ("value", "says"),
    [
        (True, "expected an integer, got True"),
        (3.0, "expected an integer, got 3.0"),
        ("3", "expected an integer, got '3'"),
        (INT64_MAX + 1, "9223372036854775808 does not fit a 64-bit integer"),
        (INT64_MIN - 1, "-9223372036854775809 does not fit a 64-bit integer"),
    ],
)
def test_each_integer_field_is_an_int64_and_never_a_bool_or_a_float(
    tmp_path: Path, path: tuple[str | int, ...], value: Any, says: str
) -> None:
    err = refusal(tmp_path, _with(path, value))
    assert (err.entry, err.field) == _named(path)
    if path[-1] == "max_watermark":  # the one that may be null
        says = says.replace("an integer,", "an integer or null,")
    assert says in str(err)


@pytest.mark.parametrize(
    ("path", "low"),
    [
        (("deliver", "id"), 1),
        (("check", "frontier"), 0),
        (("check", "max_watermark"), 1),
        (("check", "coverage", "max"), 0),
        (("check", "orphans", "max", 0), 1),
    ],
)
def test_each_lower_bound_holds(tmp_path: Path, path: tuple[str | int, ...], low: int) -> None:
    err = refusal(tmp_path, _with(path, low - 1))
    assert (err.entry, err.field) == _named(path)
    assert str(err).endswith(f"must be >= {low}, got {low - 1}")


@pytest.mark.parametrize(
    "path",
    [
        ("messages", 0, "shard"),
        ("enqueue", "shard"),
        ("dispatch", "shard"),
        ("summarize", "shard"),
        ("check", "shard"),
        ("name",),
        ("title",),
        ("description",),
    ],
)
def test_each_text_field_is_a_non_empty_string(tmp_path: Path, path: tuple) -> None:
    for value, says in (("", "expected a non-empty string, got ''"), (7, "expected a string")):
        err = refusal(tmp_path, _with(path, value))
        assert says in str(err) and f"'{path[-1]}'" in str(err)


@pytest.mark.parametrize(
    ("path", "choices"),
    [
        (("messages", 0, "direction"), ["inbound", "outbound"]),
        (("enqueue", "direction"), ["inbound", "outbound"]),
        (("summarize", "policy"), ["frontier", "max"]),
        (("deliver", "op"), list(fmt.OPS)),
    ],
)
def test_each_choice_names_its_options(tmp_path: Path, path: tuple, choices: list[str]) -> None:
    err = refusal(tmp_path, _with(path, "sideways"))
    assert str(err).endswith(f"field '{path[-1]}': expected one of {choices}, got 'sideways'")


@pytest.mark.parametrize(
    "where",
    [(), ("messages", 0), *((op,) for op in EVENTS), ("check", "coverage"), ("check", "orphans")],
)
def test_every_object_refuses_an_unknown_field(tmp_path: Path, where: tuple) -> None:
    if not where:
        data = {**SCENARIO, "colour": 1}
    else:
        data = _with((*where, "colour"), 1)
    err = refusal(tmp_path, data)
    assert err.field is not None and err.field.endswith("colour")
    assert "unknown field (allowed: [" in str(err)


@pytest.mark.parametrize(
    "path",
    [
        ("name",),
        ("messages", 0, "shard"),
        ("messages", 0, "priority"),
        *((op, name) for op, (required, _) in fmt.OPS.items() for name in required),
        ("deliver", "op"),
    ],
)
def test_every_required_field_is_required(tmp_path: Path, path: tuple) -> None:
    data = _with(path, None)
    node = data["events"][0] if path[0] in EVENTS else data
    for step in path[1:-1] if path[0] in EVENTS else path[:-1]:
        node = node[step]
    del node[path[-1]]
    err = refusal(tmp_path, data)
    assert err.field == path[-1] and str(err).endswith("missing required field")


def test_a_check_names_something_to_check_and_each_group_a_policy(tmp_path: Path) -> None:
    err = refusal(tmp_path, {**SCENARIO, "events": [{"op": "check", "shard": "main"}]})
    assert err.field == "op" and "a check needs at least one of" in str(err)
    for group in ("coverage", "orphans"):
        event = {"op": "check", "shard": "main", group: {}}
        err = refusal(tmp_path, {**SCENARIO, "events": [event]})
        assert err.field == group and "expected at least one of ['frontier', 'max']" in str(err)


# --- the wire ----------------------------------------------------------------------------------

ANSWER = {
    "request_id": 1,
    "ballot_id": 2,
    "observed_watermark": 0,
    "base_version": 0,
    "tools": ["t"],
    "updated_at": 1.5,
    "base_hash": "h",
    "host": 1,
    "fault": None,
}
PLAN = {
    "loop": "a",
    "request_id": 1,
    "ballot_id": 2,
    "observed_watermark": 0,
    "base_version": 0,
    "tools": ["t"],
    "replay_of": None,
}
ANSWER_INTS = ["request_id", "ballot_id", "observed_watermark", "base_version", "host"]
PLAN_INTS = ["request_id", "ballot_id", "observed_watermark", "base_version", "replay_of"]


def _raw(body: dict[str, Any], **fields: Any) -> bytes:
    return json.dumps({**body, **fields}).encode()


def test_a_malformed_answer_is_refused_naming_the_field_and_the_value() -> None:
    with pytest.raises(wire.AnswerError) as info:
        wire.parse_answer(_raw(ANSWER, host=True))
    assert str(info.value) == "answer refused: 'host': expected an integer or null, got True"


def test_a_malformed_plan_request_is_refused_naming_the_field_and_the_value() -> None:
    with pytest.raises(ValueError) as info:
        wire.read_request(wire.load_json(_raw(PLAN, base_version=3.0), "request body"))
    assert str(info.value) == "plan request: 'base_version': expected an integer, got 3.0"


def test_good_bodies_and_the_ends_of_the_range_are_taken() -> None:
    answer = wire.parse_answer(_raw(ANSWER, request_id=INT64_MAX, ballot_id=INT64_MIN))
    assert (answer.request_id, answer.response.ballot_id) == (INT64_MAX, INT64_MIN)
    assert answer.response.tools == ("t",) and answer.host == 1
    assert wire.parse_answer(_raw(ANSWER, updated_at=5)).response.updated_at == 5.0
    loop, req = wire.read_request(json.loads(_raw(PLAN, replay_of=INT64_MIN)))
    assert loop == "a" and req.replay_of == INT64_MIN and req.tools == ("t",)


@pytest.mark.parametrize("field", ANSWER_INTS)
@pytest.mark.parametrize("value", [True, 3.0, "3", INT64_MAX + 1, INT64_MIN - 1])
def test_each_answer_int_is_an_int64_and_never_a_bool_or_a_float(field: str, value: Any) -> None:
    with pytest.raises(wire.AnswerError, match=f"^answer refused: '{field}': "):
        wire.parse_answer(_raw(ANSWER, **{field: value}))


@pytest.mark.parametrize("field", PLAN_INTS)
@pytest.mark.parametrize("value", [True, 3.0, "3", INT64_MAX + 1, INT64_MIN - 1])
def test_each_plan_int_is_an_int64_and_never_a_bool_or_a_float(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"^plan request: '{field}': "):
        wire.read_request(json.loads(_raw(PLAN, **{field: value})))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("true", "expected a number or null, got True"),
        ('"noon"', "expected a number or null, got 'noon'"),
        ("[1.0]", "expected a number or null, got [1.0]"),
        ("1e400", "a number beyond a 64-bit float's range, got inf"),
        ("NaN", "not JSON (NaN is not standard JSON)"),
        ("-Infinity", "not JSON (-Infinity is not standard JSON)"),
    ],
)
def test_updated_at_is_a_finite_number_or_null(text: str, says: str) -> None:
    raw = _raw(ANSWER, updated_at="STAMP").replace(b'"STAMP"', text.encode())
    with pytest.raises(wire.AnswerError) as info:
        wire.parse_answer(raw)
    assert says in str(info.value)
    assert "'updated_at'" in str(info.value) or "not JSON" in str(info.value)


@pytest.mark.parametrize(
    ("body", "field"),
    [(ANSWER, "base_hash"), (ANSWER, "fault"), (PLAN, "loop")],
)
def test_text_fields_take_only_text(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"'{field}': expected a string"):
        if body is ANSWER:
            wire.parse_answer(_raw(body, **{field: 5}))
        else:
            wire.read_request(json.loads(_raw(body, **{field: 5})))


def test_a_plan_names_its_loop() -> None:
    with pytest.raises(ValueError, match="^plan request: 'loop': expected a non-empty string"):
        wire.read_request(json.loads(_raw(PLAN, loop="")))


@pytest.mark.parametrize("field", ["request_id", "ballot_id", "observed_watermark", "tools"])
def test_an_answer_without_a_required_field_is_refused(field: str) -> None:
    body = {k: v for k, v in ANSWER.items() if k != field}
    with pytest.raises(wire.AnswerError, match=f"^answer refused: '{field}': missing required"):
        wire.parse_answer(json.dumps(body).encode())


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        ("[NaN]", "NaN is not standard JSON"),
        ("[1, Infinity]", "Infinity is not standard JSON"),
        ("[1e400]", "'tools[0]': a number beyond a 64-bit float's range"),
        ("[" + "9" * 5000 + "]", "'tools[0]': an integer of more than"),
        ('["\\ud800"]', "lone UTF-16 surrogate"),
        ('{"a": 1}', "'tools': expected a list"),
        ('"t"', "'tools': expected a list, got 't'"),
    ],
)
def test_an_answer_whose_tools_the_catalog_cannot_store_is_refused(tools: str, says: str) -> None:
    """parse_answer leaves `catalog.tools_json` out: these are what it would refuse."""
    raw = _raw(ANSWER, tools="TOOLS").replace(b'"TOOLS"', tools.encode())
    with pytest.raises(wire.AnswerError, match="^answer refused: ") as info:
        wire.parse_answer(raw)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_nesting_is_counted_outside_strings_only() -> None:
    deep = "[" * (wire.MAX_DEPTH - 1) + "]" * (wire.MAX_DEPTH - 1)
    assert wire.parse_answer(_raw(ANSWER, tools="T").replace(b'"T"', deep.encode()))
    with pytest.raises(wire.AnswerError, match=f"nested more than {wire.MAX_DEPTH} deep"):
        wire.parse_answer(_raw(ANSWER, tools="T").replace(b'"T"', b"[" + deep.encode() + b"]"))
    brackets = ["[" * 40, "{" * 40]  # more brackets than the limit, all inside strings
    assert wire.parse_answer(_raw(ANSWER, tools=brackets)).response.tools == tuple(brackets)


# --- the shared half ---------------------------------------------------------------------------


def test_a_path_inside_an_untyped_object_stops_where_msgspec_stops_naming_it() -> None:
    class Body(msgspec.Struct):
        tools: list[Any]

    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(b'{"tools": [{"a": [1e400]}]}', type=Body)
    assert "[...]" in str(info.value)  # msgspec does not say the key
    assert typed_json.refusal(info.value).path == ("tools", 0)
    assert typed_json.dotted(("events", 3, "orphans", "max", 1)) == "events[3].orphans.max[1]"
