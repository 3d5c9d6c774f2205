"""One home per rule (issue 32): each rule below is written once in labkit, and every place that
used to write it by hand now calls that one home.

Two kinds of test. The scans read labkit's source (its syntax trees, so a comment or a message
that names a rule is not a copy) and fail when a second copy of a rule appears outside its
home. The refusals feed a bad value through each entry point where a rule used to be written
by hand and assert the refusal, so deleting that entry point's call to the rule fails here.
"""

from __future__ import annotations

import ast
import functools
import json
import math
from pathlib import Path
from typing import Any

import pytest

import labkit
import labkit.frontier.rule as rule
from labkit import validation
from labkit.catalog.hold import frontier as hold_frontier
from labkit.catalog.loop import Response, ResponseError, WatermarkLoop
from labkit.exercises.frontier import OPEN_STATUSES, reference_frontier
from labkit.frontier import scenario_format as fmt
from labkit.frontier.orders import _frontier_end
from labkit.remote import wire

LABKIT = Path(labkit.__file__).resolve().parent
VALIDATION = LABKIT / "validation.py"
RULE = LABKIT / "frontier" / "rule.py"


@functools.cache
def _nodes() -> tuple[tuple[str, tuple[ast.AST, ...]], ...]:
    """Every module of labkit, parsed once: (its path inside labkit, all its syntax nodes)."""
    return tuple(
        (
            path.relative_to(LABKIT).as_posix(),
            tuple(ast.walk(ast.parse(path.read_text(), str(path)))),
        )
        for path in sorted(LABKIT.rglob("*.py"))
    )


def _found(home: Path, predicate: Any) -> list[str]:
    """`path:line` of every node outside `home` for which `predicate(node)` holds."""
    skip = home.relative_to(LABKIT).as_posix()
    return [
        f"{name}:{node.lineno}"
        for name, nodes in _nodes()
        if name != skip
        for node in nodes
        if predicate(node)
    ]


# --- the 64-bit range: labkit.validation.INT64_MIN / INT64_MAX -------------------------------

_RANGE_ENDS = {2**63, 2**63 - 1, -(2**63), 2**64, 2**64 - 1}


def _is_64_bit_bound(node: ast.AST) -> bool:
    """`2**63`, `2**64` (also inside `-(2**63)`, `2**63 - 1`), or one of the ends written out."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, power = node.left, node.right
        return (
            isinstance(base, ast.Constant)
            and base.value == 2
            and isinstance(power, ast.Constant)
            and power.value in (63, 64)
        )
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value in _RANGE_ENDS or -node.value in _RANGE_ENDS
    return False


def test_the_64_bit_range_is_written_once() -> None:
    assert _found(VALIDATION, _is_64_bit_bound) == []
    assert (validation.INT64_MIN, validation.INT64_MAX) == (-(2**63), 2**63 - 1)


# --- "an int, never a bool": labkit.validation.is_int / is_integral / is_real ----------------


def _isinstance_of(node: ast.AST) -> tuple[str, set[str]] | None:
    """For `isinstance(x, T)` (T a name, dotted name, union or tuple): x's source and T's
    names; else None."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "isinstance"
        and len(node.args) == 2
    ):
        return None
    kinds: set[str] = set()
    for part in ast.walk(node.args[1]):
        if isinstance(part, ast.Name):
            kinds.add(part.id)
        elif isinstance(part, ast.Attribute):
            kinds.add(part.attr)
    return ast.unparse(node.args[0]), kinds


_NUMBERS = {"int", "float", "Integral", "Real", "Number", "complex"}


def _is_int_not_bool(node: ast.AST) -> bool:
    """A hand-written "a number, not a bool": one `and`/`or` that asks of the same value both
    `isinstance(v, bool)` and `isinstance(v, <a number type>)`."""
    if not isinstance(node, ast.BoolOp):
        return False
    asked: dict[str, set[str]] = {}
    for value in node.values:
        for part in ast.walk(value):
            found = _isinstance_of(part)
            if found:
                asked.setdefault(found[0], set()).update(found[1])
    return any("bool" in kinds and kinds & _NUMBERS for kinds in asked.values())


def test_an_int_that_is_not_a_bool_is_asked_of_validation_only() -> None:
    assert _found(VALIDATION, _is_int_not_bool) == []


@pytest.mark.parametrize(
    ("check", "value", "expected"),
    [
        (validation.is_int, 3, True),
        (validation.is_int, True, False),
        (validation.is_int, 3.0, False),
        (validation.is_integral, True, False),
        (validation.is_real, False, False),
        (validation.is_real, 2.5, True),
        (validation.is_finite_real, math.inf, False),
        (validation.is_int64, 2**63, False),
        (validation.is_int64, -(2**63), True),
    ],
)
def test_the_predicates(check: Any, value: Any, expected: bool) -> None:
    assert check(value) is expected


def test_the_scan_sees_a_hand_written_copy() -> None:
    """The scans are not vacuous: each finds the copy it is there to find."""
    copy = "def f(v):\n    return isinstance(v, bool) or not isinstance(v, numbers.Integral)\n"
    assert any(_is_int_not_bool(n) for n in ast.walk(ast.parse(copy)))
    assert any(_is_64_bit_bound(n) for n in ast.walk(ast.parse("LOW = -(2**63)")))
    assert any(_is_64_bit_bound(n) for n in ast.walk(ast.parse("HIGH = 9223372036854775807")))
    loop = "def f(rows, base):\n    for i, s in rows:\n        if s:\n            return i - 1\n"
    assert any(_is_frontier_loop(n) for n in ast.walk(ast.parse(loop)))
    assert any(_is_frontier_loop(n) for n in ast.walk(ast.parse("while r in done:\n    r += 1")))
    assert any(_is_policy_list(n) for n in ast.walk(ast.parse("P = ('frontier', 'max')")))


# --- the checkpoint policies: labkit.frontier.rule.POLICIES / PG_ONLY ------------------------

_POLICY_NAMES = set(rule.PG_POLICIES)


def _is_policy_list(node: ast.AST) -> bool:
    """A tuple, list or set of two or more policy names, or DDL that lists them."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        names = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        return (
            len(names) == len(node.elts) >= 2
            and all(isinstance(n, str) for n in names)
            and set(names) <= _POLICY_NAMES
        )
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "policy IN ('" in node.value.replace("  ", " ")
    return False


def test_the_policy_list_is_written_once() -> None:
    assert _found(RULE, _is_policy_list) == []


def test_the_policies_in_each_backend_come_from_the_one_list() -> None:
    import labkit.frontier.log as fr
    import labkit.frontier.log_pg as fpg

    assert fr.POLICIES is rule.POLICIES
    assert rule.PG_POLICIES == (*rule.POLICIES, *rule.PG_ONLY) == ("frontier", "max", "id_order")
    assert fr.SCHEMA_SQL.count(rule.policy_check(rule.POLICIES)) == 2
    assert fpg.SCHEMA_SQL.count(rule.policy_check(rule.PG_POLICIES)) == 2


# --- the low-watermark rule: labkit.frontier.rule.frontier ------------------------------------


def _is_frontier_loop(node: ast.AST) -> bool:
    """The rule's core by hand: a loop over rows that returns `id - 1` at the first open one,
    or a `while x in done: x += 1` walk."""
    if isinstance(node, ast.For):
        for part in ast.walk(node):
            if (
                isinstance(part, ast.If)
                and part.body
                and isinstance(part.body[0], ast.Return)
                and isinstance(part.body[0].value, ast.BinOp)
                and isinstance(part.body[0].value.op, ast.Sub)
                and isinstance(part.body[0].value.left, ast.Name)
                and isinstance(part.body[0].value.right, ast.Constant)
                and part.body[0].value.right.value == 1
            ):
                return True
    if isinstance(node, ast.While) and isinstance(node.test, ast.Compare):
        walked = ast.unparse(node.test.left)
        return isinstance(node.test.ops[0], ast.In) and any(
            isinstance(s, ast.AugAssign) and ast.unparse(s.target) == walked for s in node.body
        )
    return False


def test_the_low_watermark_rule_is_written_once_in_python() -> None:
    assert _found(RULE, _is_frontier_loop) == []


@pytest.mark.parametrize(
    ("base", "rows", "expected"),
    [
        (0, [], 0),  # no row above the base: the base
        (5, [], 5),
        (0, [(1, False), (2, False)], 2),  # none open: the last row
        (0, [(1, False), (2, True), (3, False)], 1),  # the first open row, less one
        (3, [(4, True), (5, False)], 3),
        (0, [(2, False), (7, True)], 6),  # ids need not be dense
    ],
)
def test_the_rule(base: int, rows: list[tuple[int, bool]], expected: int) -> None:
    assert rule.frontier(base, rows) == expected


def _hold_before(head: int, answered: set[int]) -> int:
    """The hold's walk as it was written before it called the rule."""
    reach = head
    while reach in answered:
        reach += 1
    return reach


def _orders_before(cover_end: int, done: int, n: int) -> int:
    """The order model's bitmask form as it was written before it called the rule."""
    still_open = ((1 << (n + 1)) - 1) & ~((1 << (cover_end + 1)) - 1) & ~done
    if cover_end >= n or not still_open:
        return max(cover_end, n)
    return (still_open & -still_open).bit_length() - 2


def _reference_before(rows: list[tuple[int, str]], base: int) -> int:
    """The exercises' reference as it was written before it called the rule."""
    frontier = base
    for row_id, status in rows:
        if status in OPEN_STATUSES:
            return row_id - 1
        frontier = row_id
    return frontier


def test_each_caller_keeps_its_answers() -> None:
    """The hold, the order model and the exercises' reference give what they gave when each
    wrote the rule itself, on every log of up to 7 rows and every base."""
    n = 7
    for base in range(n + 2):
        for done_mask in range(1 << n):
            answered = {f for f in range(n) if done_mask >> f & 1}
            assert hold_frontier(base, answered) == _hold_before(base, answered)
            done = done_mask << 1  # row id i is bit i
            assert _frontier_end(base, done, n) == _orders_before(base, done, n)
            rows = [
                (i, "delivered" if done >> i & 1 else "pending") for i in range(base + 1, n + 1)
            ]
            assert reference_frontier(rows, base) == _reference_before(rows, base)


# --- refusals at each entry point that used to check by hand ----------------------------------

_GOOD_ANSWER = {
    "request_id": 1,
    "ballot_id": 2,
    "observed_watermark": 0,
    "base_version": 0,
    "tools": ["t"],
    "updated_at": 1.5,
    "base_hash": None,
    "host": None,
    "fault": None,
}


def _answer(**fields: Any) -> bytes:
    raw = json.dumps({**_GOOD_ANSWER, **fields}).encode()
    return raw.replace(b'"<1e400>"', b"1e400")  # a JSON number a float cannot hold


def test_wire_accepts_a_good_answer() -> None:
    assert wire.parse_answer(_answer()).response.updated_at == 1.5


@pytest.mark.parametrize(
    "field", ["request_id", "ballot_id", "observed_watermark", "base_version", "host"]
)
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**64 + 5])
def test_wire_refuses_an_answer_field_outside_64_bits(field: str, value: int) -> None:
    with pytest.raises(wire.AnswerError, match=f"'{field}'.*64-bit"):
        wire.parse_answer(_answer(**{field: value}))


@pytest.mark.parametrize("field", ["request_id", "ballot_id", "observed_watermark", "host"])
def test_wire_refuses_a_bool_for_an_answer_int(field: str) -> None:
    with pytest.raises(wire.AnswerError, match=f"'{field}'"):
        wire.parse_answer(_answer(**{field: True}))


@pytest.mark.parametrize("stamp", [True, "noon", [1.0], {"t": 1}, "<1e400>"])
def test_wire_refuses_a_bad_updated_at(stamp: Any) -> None:
    with pytest.raises(wire.AnswerError, match="'updated_at'"):
        wire.parse_answer(_answer(updated_at=stamp))


@pytest.mark.parametrize("field", ["request_id", "ballot_id", "base_version", "replay_of"])
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, True])
def test_wire_refuses_a_plan_request_int_outside_64_bits_or_a_bool(field: str, value: Any) -> None:
    body = {
        "loop": "a",
        "request_id": 1,
        "ballot_id": 2,
        "observed_watermark": 0,
        "base_version": 0,
        "tools": [],
        "replay_of": None,
        field: value,
    }
    with pytest.raises(ValueError, match=f"'{field}'"):
        wire.read_request(body)


_SCENARIO = {
    "name": "t",
    "title": "T",
    "description": "d",
    "messages": [{"shard": "main", "priority": 5}],
    "events": [{"op": "deliver", "id": 1}],
}


@pytest.mark.parametrize(
    ("key", "entries", "field"),
    [
        ("messages", [{"shard": "main", "priority": "{}"}], "priority"),
        ("events", [{"op": "enqueue", "shard": "main", "priority": "{}"}], "priority"),
        ("events", [{"op": "deliver", "id": "{}"}], "id"),
        ("events", [{"op": "check", "shard": "main", "frontier": "{}"}], "frontier"),
        ("events", [{"op": "check", "shard": "main", "coverage": {"max": "{}"}}], "coverage.max"),
    ],
)
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**64])
def test_a_scenario_refuses_an_int_outside_64_bits(
    key: str, entries: list[dict[str, Any]], field: str, value: int, tmp_path: Path
) -> None:
    text = json.dumps({**_SCENARIO, key: entries}).replace('"{}"', str(value))
    data = json.loads(text)
    with pytest.raises(fmt.ScenarioError, match=f"'{field}'.*64-bit"):
        fmt.scenario_from_dict(data)
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(fmt.ScenarioError, match=f"'{field}'.*64-bit"):
        fmt.load_scenario(path)


def test_a_scenario_refuses_a_bool_for_an_int() -> None:
    data = {**_SCENARIO, "messages": [{"shard": "main", "priority": True}]}
    with pytest.raises(fmt.ScenarioError, match="'priority'"):
        fmt.scenario_from_dict(data)


@pytest.fixture
def loop() -> WatermarkLoop:
    import sqlite3

    return WatermarkLoop(sqlite3.connect(":memory:"))


@pytest.mark.parametrize("field", ["ballot_id", "observed_watermark", "base_version"])
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, True, 1.0])
def test_apply_refuses_a_fence_outside_64_bits_or_not_an_int(
    loop: WatermarkLoop, field: str, value: Any
) -> None:
    b = loop.reserve()
    good = {"ballot_id": b.ballot_id, "observed_watermark": b.watermark, "base_version": 0}
    resp = Response(**{**good, field: value}, tools=["t"])  # type: ignore[arg-type]
    with pytest.raises(ResponseError, match=f"response {field}"):
        loop.apply(resp)
    assert loop.apply(b.answer(["t"])).committed  # nothing was changed by the refusal


@pytest.mark.parametrize("stamp", [True, "noon", math.nan, math.inf, -math.inf, [1.0]])
def test_apply_refuses_a_bad_updated_at(loop: WatermarkLoop, stamp: Any) -> None:
    b = loop.reserve()
    with pytest.raises(ResponseError, match="response updated_at must be None or a finite"):
        loop.apply(b.answer(["t"], updated_at=stamp))
    out = loop.apply(b.answer(["t"], updated_at=2))
    assert out.committed


def test_a_ballot_answers_itself(loop: WatermarkLoop) -> None:
    b = loop.reserve()
    assert b.answer(["t"]) == Response(b.ballot_id, b.watermark, b.base_version, ["t"])
    assert b.answer(["t"], 3.5).updated_at == 3.5
