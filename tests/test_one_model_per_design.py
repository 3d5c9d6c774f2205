"""Each design is written once: its class and its model side by side, the keys in one table.

The arrival search (`arrival_search`) knows no design: it plays the model the registry pairs
with a key, the same model the check against SQLite plays. These tests fail if a design's
behaviour comes back in a second place: a branch on a design in the search, a second list of
keys or a second `make_design`, a second `StepOutcome`, the window rule written again.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import labkit
from labkit.designs import arrival_search
from labkit.designs.arrival_orders import verify_model_against_sqlite
from labkit.designs.arrival_search import explore_fast
from labkit.designs.model import DesignModel
from labkit.designs.registry import (
    ALL_DESIGNS,
    DESIGNS,
    DISPLAY_NAMES,
    REGISTRY,
    SPECS,
    WINDOWED,
    make_design,
    make_model,
    spec,
)
from labkit.designs.schedules import Kind

PACKAGE = Path(labkit.__file__).resolve().parent
REGISTRY_FILE = PACKAGE / "designs" / "registry.py"
# The names the search used to branch on (`self.guarded`, `self.pipelined`, ...), and the keys.
OLD_FLAGS = {"guarded", "pipelined", "lww", "cas", "callback", "ballot", "fenced", "unguarded"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _labkit_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_search_does_not_branch_on_designs() -> None:
    """No design key as a string, no flag named after a design, no import of a design module:
    every step and every memo key comes from the model `registry.make_model` returns."""
    path = Path(arrival_search.__file__)
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Constant) and node.value in ALL_DESIGNS:
            found.append(f"line {node.lineno}: the key {node.value!r}")
        if isinstance(node, ast.Attribute) and node.attr.lower() in OLD_FLAGS:
            found.append(f"line {node.lineno}: .{node.attr}")
        if isinstance(node, ast.Name) and node.id.lower() in OLD_FLAGS:
            found.append(f"line {node.lineno}: {node.id}")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("labkit."):
            allowed = (
                "labkit.designs.model",
                "labkit.designs.registry",
                "labkit.designs.schedules",
            )
            if node.module not in allowed:
                found.append(f"line {node.lineno}: imports {node.module}")
            if node.module == "labkit.designs.registry":
                names = {a.name for a in node.names}
                if names != {"make_model"}:
                    found.append(f"line {node.lineno}: takes {sorted(names)} from the registry")
    assert not found, found


def test_each_model_sits_beside_its_design_and_shares_its_rule() -> None:
    for row in SPECS:
        assert issubclass(row.model, DesignModel)
        assert row.model.__module__ == row.design.__module__, row.key
        rule = getattr(row.design, "refusal", None)
        if rule is not None:  # a rule in plain Python: the model calls the class's own
            assert row.model.refusal is rule, row.key  # type: ignore[attr-defined]


@pytest.mark.parametrize("design", ALL_DESIGNS)
def test_the_search_and_the_check_play_the_model_the_registry_pairs(
    design: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change to a design's model (here: a recorder around its answer) is seen by the search
    and by the model-against-SQLite check, since both take the model from the registry."""
    model_class = spec(design).model
    real_answer = model_class._answer
    played: list[tuple[str, str]] = []
    where = ["search"]

    def recorded(self, state, req, body_base):  # type: ignore[no-untyped-def]
        played.append((where[0], self.name))
        return real_answer(self, state, req, body_base)

    monkeypatch.setattr(model_class, "_answer", recorded)
    window = 3 if design in WINDOWED else 2
    explore_fast(design, 2, window=window)
    where[0] = "check"
    assert verify_model_against_sqlite(design, 2, window=window).agrees
    assert {("search", design), ("check", design)} <= set(played)
    assert {name for _, name in played} == {design}


def test_one_table_of_designs() -> None:
    """The keys, their subsets and their display names are read off `SPECS`; only the registry
    defines them, or a `make_design` / `check_design` / `make_model`."""
    assert ALL_DESIGNS == tuple(REGISTRY) == tuple(row.key for row in SPECS)
    assert DESIGNS == ("callback", "lww", "ballot", "fenced", "cas")
    assert ALL_DESIGNS == (*DESIGNS, "pipelined")
    assert WINDOWED == ("fenced", "pipelined")
    assert set(DISPLAY_NAMES) == set(ALL_DESIGNS)
    defined_twice = []
    for path in _labkit_files():
        if path == REGISTRY_FILE:
            continue
        for node in _tree(path).body:
            names: list[str] = []
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            for name in names:
                if name in {
                    "make_design",
                    "check_design",
                    "make_model",
                    "DESIGNS",
                    "ALL_DESIGNS",
                    "WINDOWED",
                    "DISPLAY_NAMES",
                }:
                    defined_twice.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert not defined_twice, defined_twice


@pytest.mark.parametrize("design", ALL_DESIGNS)
def test_a_design_and_its_model_carry_the_key(design: str) -> None:
    window = 3 if design in WINDOWED else 1
    assert make_design(design, window=window).name == design
    assert make_model(design, window=window).name == design


def test_one_step_outcome() -> None:
    """One `StepOutcome` (a run on the real design); the model's own is `ModelOutcome`, and
    both word an outcome with `schedules.outcome_label`."""
    defined = [
        f"{path.relative_to(PACKAGE)}"
        for path in _labkit_files()
        for node in _tree(path).body
        if isinstance(node, ast.ClassDef) and node.name == "StepOutcome"
    ]
    assert defined == ["designs/arrival_orders.py"]
    from labkit.designs.arrival_orders import StepOutcome
    from labkit.designs.model import ModelOutcome

    for kind, rid, committed, reason in [
        (Kind.DELIVER, 3, True, None),
        (Kind.DELIVER, 3, False, "stale_base"),
        (Kind.TIMEOUT, None, False, None),
        (Kind.TIMEOUT, -2, False, None),
        (Kind.CRASH, None, False, None),
    ]:
        real = StepOutcome(kind, 0, rid, committed, reason)
        assert ModelOutcome(kind, rid, committed, reason).label == real.label == str(real)


def test_the_window_rule_is_written_once() -> None:
    """Which window a design runs with, and which it refuses, is `DesignSpec.window` and
    `DesignSpec.accepts`; the drivers, the models and the depth comparison all ask it."""
    for path in _labkit_files():
        if path == REGISTRY_FILE:
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert "need window" not in node.value, path
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                names = {
                    s.id if isinstance(s, ast.Name) else s.attr
                    for s in sides
                    if isinstance(s, (ast.Name, ast.Attribute))
                }
                consts = {s.value for s in sides if isinstance(s, ast.Constant)}
                assert not ("window" in names and 2 in consts), f"{path}:{node.lineno}"
    for maker in (make_design, make_model):
        with pytest.raises(ValueError, match=r"hedged ballots \(key 'fenced'\) need window >= 2"):
            maker("fenced", window=1)
        with pytest.raises(TypeError, match="window must be an int"):
            maker("fenced", window="3")  # type: ignore[arg-type]
    assert make_model("ballot", window=5).window == make_design("ballot", window=5).window == 1
    assert make_model("fenced", window=4).window == make_design("fenced", window=4).window == 4
    assert make_model("lww", window=4).window == 1  # one request at a time
    assert not spec("fenced").accepts(1) and spec("pipelined").accepts(1)
