"""Scenario files: every bundled one loads and its checks hold; bad files say where and why."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from labkit import scenarios as sc

EDGE_CASES = {
    "seed",
    "empty_shard",
    "all_terminal",
    "dead_letter_tail",
    "late_small_pending",
    "interleaved_shards",
    "odd_shard_keys",
}
COLUMNS = [
    "step",
    "event",
    "op",
    "shard",
    "statuses",
    "max_watermark",
    "frontier",
    "coverage_frontier",
    "coverage_max",
    "orphans_frontier",
    "orphans_max",
    "orphan_ids_frontier",
    "orphan_ids_max",
]


def test_bundled_scenarios_are_all_there() -> None:
    assert {p.stem for p in sc.list_scenarios()} == EDGE_CASES


@pytest.mark.parametrize("path", sc.list_scenarios(), ids=lambda p: p.stem)
def test_bundled_scenario_runs_and_its_checks_hold(path: Path) -> None:
    scenario = sc.load_scenario(path)
    assert scenario.name == path.stem
    timeline = sc.run_scenario(scenario)  # raises on any failed check
    assert list(timeline.columns) == COLUMNS
    assert timeline["step"].max() == len(scenario.events)
    assert (timeline["orphans_frontier"] == 0).all()
    assert any(e["op"] == "check" for e in scenario.events)


def test_seed_timeline_shows_the_divergence() -> None:
    timeline = sc.run_scenario(sc.load_scenario("seed"))
    after_3_and_5 = timeline[timeline["event"] == "deliver #5"].iloc[0]
    assert after_3_and_5["max_watermark"] == 5 and after_3_and_5["frontier"] == 0
    assert after_3_and_5["statuses"] == {
        1: "pending",
        2: "pending",
        3: "delivered",
        4: "pending",
        5: "delivered",
        6: "pending",
    }
    last = timeline.iloc[-1]
    assert last["orphan_ids_max"] == (1, 2, 4) and last["frontier"] == 7
    assert str(timeline["max_watermark"].dtype) == "Int64"
    assert pd.isna(timeline["max_watermark"].iloc[0])


def test_status_matrix_is_steps_by_ids() -> None:
    timeline = sc.run_scenario(sc.load_scenario("interleaved_shards"))
    both = sc.status_matrix(timeline)
    assert list(both.columns) == [1, 2, 3, 4, 5, 6]
    assert both.loc[0].tolist() == ["pending"] * 6
    only_a = sc.status_matrix(timeline, "a")
    assert list(only_a.columns) == [1, 3, 5]


def test_failed_check_names_file_entry_and_field(tmp_path: Path) -> None:
    data = json.loads((sc.DATA_DIR / "seed.json").read_text())
    data["events"][3]["frontier"] = 4
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(data))
    with pytest.raises(sc.ScenarioCheckError) as info:
        sc.run_scenario(sc.load_scenario(path))
    message = str(info.value)
    assert str(path) in message and "events[3]" in message and "'frontier'" in message


def test_refused_transition_at_run_time_names_the_event(tmp_path: Path) -> None:
    path = write(tmp_path, events=[{"op": "deliver", "id": 1}, {"op": "fail", "id": 1}])
    with pytest.raises(sc.ScenarioError, match=r"events\[1\], field 'id'.*terminal"):
        sc.run_scenario(sc.load_scenario(path))


# --- bad files -------------------------------------------------------------------------------


def write(tmp_path: Path, stem: str = "bad", **overrides) -> Path:
    data = {
        "name": "bad",
        "title": "t",
        "description": "d",
        "messages": [{"shard": "main", "priority": 5}, {"shard": "main", "priority": 1}],
        "events": [{"op": "deliver", "id": 1}],
    }
    data.update(overrides)
    path = tmp_path / f"{stem}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


BAD = [
    ({"events": [{"op": "deliver", "id": 1}, {"op": "teleport", "id": 1}]}, "events[1]", "op"),
    ({"events": [{"id": 1}]}, "events[0]", "op"),
    ({"events": [{"op": "deliver", "id": 3}]}, "events[0]", "id"),
    ({"events": [{"op": "deliver", "id": "1"}]}, "events[0]", "id"),
    ({"events": [{"op": "deliver", "id": True}]}, "events[0]", "id"),
    ({"events": [{"op": "deliver", "id": 1, "when": 3}]}, "events[0]", "when"),
    ({"events": [{"op": "summarize", "policy": "latest"}]}, "events[0]", "policy"),
    ({"events": [{"op": "enqueue", "shard": "main"}]}, "events[0]", "priority"),
    ({"events": [{"op": "check", "shard": "main"}]}, "events[0]", "op"),
    (
        {"events": [{"op": "check", "shard": "main", "coverage": {"lww": 1}}]},
        "events[0]",
        "coverage.lww",
    ),
    (
        {"events": [{"op": "check", "shard": "main", "orphans": {"max": [1, 9]}}]},
        "events[0]",
        "orphans.max[1]",
    ),
    (
        {"messages": [{"shard": "main", "priority": 5}, {"shard": "", "priority": 1}]},
        "messages[1]",
        "shard",
    ),
    ({"messages": [{"shard": "main", "priority": 1.5}]}, "messages[0]", "priority"),
    (
        {"messages": [{"shard": "main", "priority": 1, "direction": "sideways"}]},
        "messages[0]",
        "direction",
    ),
    ({"messages": [{"shard": "main", "priority": 10**20}]}, "messages[0]", "priority"),
    ({"messages": [{"shard": "main", "priority": -(2**63) - 1}]}, "messages[0]", "priority"),
    (
        {"events": [{"op": "enqueue", "shard": "main", "priority": 2**63}]},
        "events[0]",
        "priority",
    ),
    (
        {"events": [{"op": "check", "shard": "main", "coverage": {"max": 10**30}}]},
        "events[0]",
        "coverage.max",
    ),
    ({"events": [{"op": "check", "shard": "main", "frontier": 2**64}]}, "events[0]", "frontier"),
    ({"messages": "none"}, "scenario", "messages"),
    ({"shards": ["ok", 7]}, "scenario", "shards[1]"),
    ({"name": "Has Spaces"}, "scenario", "name"),
    ({"colour": "red"}, "scenario", "colour"),
]


@pytest.mark.parametrize(("overrides", "entry", "field"), BAD)
def test_bad_file_error_names_file_entry_and_field(
    tmp_path: Path, overrides: dict, entry: str, field: str
) -> None:
    path = write(tmp_path, **overrides)
    with pytest.raises(sc.ScenarioError) as info:
        sc.load_scenario(path)
    err = info.value
    assert (err.source, err.entry, err.field) == (str(path), entry, field)
    assert str(path) in str(err) and entry in str(err) and f"'{field}'" in str(err)


def test_redrive_and_enqueue_make_later_ids_valid(tmp_path: Path) -> None:
    events = [
        {"op": "fail", "id": 2},
        {"op": "redrive", "id": 2},
        {"op": "enqueue", "shard": "main", "priority": 5},
        {"op": "deliver", "id": 4},
    ]
    scenario = sc.load_scenario(write(tmp_path, events=events))
    assert sc.run_scenario(scenario)["event"].tolist()[-4:] == [
        "fail #2",
        "redrive #2 -> #3",
        "enqueue #4 (main, p5)",
        "deliver #4",
    ]
    with pytest.raises(sc.ScenarioError, match=r"events\[2\], field 'id'.*log has 3 rows"):
        sc.load_scenario(write(tmp_path, events=[*events[:2], {"op": "deliver", "id": 4}]))


def test_missing_top_level_field_and_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "partial.json"
    path.write_text(json.dumps({"name": "x", "title": "t", "description": "d", "events": []}))
    with pytest.raises(sc.ScenarioError, match="scenario, field 'messages': missing"):
        sc.load_scenario(path)
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x",\n  "title": }')
    with pytest.raises(sc.ScenarioError, match=r"broken\.json: line 2 column"):
        sc.load_scenario(broken)
    with pytest.raises(sc.ScenarioError, match="cannot read"):
        sc.load_scenario(tmp_path / "absent.json")
    with pytest.raises(sc.ScenarioError, match="scenario: expected an object"):
        sc.scenario_from_dict([1, 2])


def test_sqlite_integer_range_is_accepted_and_one_past_it_is_not(tmp_path: Path) -> None:
    edge = [{"shard": "main", "priority": 2**63 - 1}, {"shard": "main", "priority": -(2**63)}]
    final = sc.run_scenario(sc.load_scenario(write(tmp_path, messages=edge))).iloc[-1]
    assert final["statuses"] == {1: "delivered", 2: "pending"}
    with pytest.raises(sc.ScenarioError, match=r"priority'.*64-bit"):
        sc.load_scenario(write(tmp_path, messages=[{"shard": "main", "priority": 2**63}]))


def test_file_that_is_not_utf8_names_file_and_position(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"name": "x",\n "title": "caf\xe9"}')
    with pytest.raises(sc.ScenarioError) as info:
        sc.load_scenario(path)
    assert (info.value.source, info.value.entry) == (str(path), "line 2 column 15")
    assert "not UTF-8" in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "entry", "problem"),
    [
        ("[" * 100_000, "file", "nested too deeply"),
        ("", "line 1 column 1", "invalid JSON"),
        ('{"name": NaN}', "scenario", "missing"),
    ],
)
def test_odd_json_is_a_scenario_error(tmp_path: Path, text: str, entry: str, problem: str) -> None:
    path = tmp_path / "odd.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(sc.ScenarioError, match=problem) as info:
        sc.load_scenario(path)
    assert (info.value.source, info.value.entry) == (str(path), entry)


# --- building scenarios in code --------------------------------------------------------------


def test_random_order_is_a_seeded_permutation() -> None:
    assert sc.random_order(8, seed=3) == sc.random_order(8, seed=3)
    assert sorted(sc.random_order(8, seed=3)) == list(range(1, 9))
    assert sc.random_order(8, seed=3) != sc.random_order(8, seed=4)


def test_dispatch_order_is_priority_then_id() -> None:
    assert sc.dispatch_order([5, 5, 1, 5, 5, 5]) == [3, 1, 2, 4, 5, 6]


def test_scenario_from_order_reproduces_the_seed() -> None:
    scenario = sc.scenario_from_order([5, 5, 1, 5, 5, 5], [3, 5, 1, 2, 4, 6])
    last = sc.run_scenario(scenario).iloc[-1]
    assert last["orphan_ids_max"] == (1, 2, 4)
    assert last["coverage_frontier"] == 6 and last["orphans_frontier"] == 0


def test_scenario_from_order_partial_random_and_failures() -> None:
    partial = sc.run_scenario(sc.scenario_from_order([5, 5, 5], [2], failures=[2])).iloc[-1]
    assert partial["statuses"] == {1: "pending", 2: "failed", 3: "pending"}
    assert partial["frontier"] == 0 and pd.isna(partial["max_watermark"])
    seeded = sc.scenario_from_order([1, 2, 3, 4], seed=7)
    assert seeded == sc.scenario_from_order([1, 2, 3, 4], seed=7)
    with pytest.raises(ValueError, match="distinct ids"):
        sc.scenario_from_order([5, 5], [1, 1])
    with pytest.raises(ValueError, match="not in the order"):
        sc.scenario_from_order([5, 5], [1], failures=[2])
