"""Scenario files: every bundled one loads and its checks hold; bad files say where and why."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from labkit.frontier import log as fr
from labkit.frontier import scenario_format as fmt
from labkit.frontier import scenarios as sc

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
    assert {p.stem for p in fmt.list_scenarios()} == EDGE_CASES


@pytest.mark.parametrize("path", fmt.list_scenarios(), ids=lambda p: p.stem)
def test_bundled_scenario_runs_and_its_checks_hold(path: Path) -> None:
    scenario = fmt.load_scenario(path)
    assert scenario.name == path.stem
    timeline = sc.run_scenario(scenario)  # raises on any failed check
    assert list(timeline.columns) == COLUMNS
    assert timeline["step"].max() == len(scenario.events)
    assert (timeline["orphans_frontier"] == 0).all()
    assert any(e["op"] == "check" for e in scenario.events)


def test_readers_find_each_policy_s_columns_where_policy_columns_says() -> None:
    timeline = sc.run_scenario(fmt.load_scenario("seed"))
    assert list(sc.POLICY_COLUMNS) == list(fr.POLICIES)
    last = timeline.iloc[-1]
    got = {
        p: (last[c.coverage], last[c.orphans], last[c.orphan_ids])
        for p, c in sc.POLICY_COLUMNS.items()
    }
    assert got == {"frontier": (7, 0, ()), "max": (6, 3, (1, 2, 4))}


def test_seed_timeline_shows_the_divergence() -> None:
    timeline = sc.run_scenario(fmt.load_scenario("seed"))
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
    timeline = sc.run_scenario(fmt.load_scenario("interleaved_shards"))
    both = sc.status_matrix(timeline)
    assert list(both.columns) == [1, 2, 3, 4, 5, 6]
    assert both.loc[0].tolist() == ["pending"] * 6
    only_a = sc.status_matrix(timeline, "a")
    assert list(only_a.columns) == [1, 3, 5]


def test_failed_check_names_file_entry_and_field(tmp_path: Path) -> None:
    data = json.loads((fmt.DATA_DIR / "seed.json").read_text())
    data["events"][3]["frontier"] = 4
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(data))
    with pytest.raises(sc.ScenarioCheckError) as info:
        sc.run_scenario(fmt.load_scenario(path))
    message = str(info.value)
    assert str(path) in message and "events[3]" in message and "'frontier'" in message


def test_refused_transition_at_run_time_names_the_event(tmp_path: Path) -> None:
    path = write(tmp_path, events=[{"op": "deliver", "id": 1}, {"op": "fail", "id": 1}])
    with pytest.raises(fmt.ScenarioError, match=r"events\[1\], field 'id'.*terminal"):
        sc.run_scenario(fmt.load_scenario(path))


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
    with pytest.raises(fmt.ScenarioError) as info:
        fmt.load_scenario(path)
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
    scenario = fmt.load_scenario(write(tmp_path, events=events))
    assert sc.run_scenario(scenario)["event"].tolist()[-4:] == [
        "fail #2",
        "redrive #2 -> #3",
        "enqueue #4 (main, p5)",
        "deliver #4",
    ]
    with pytest.raises(fmt.ScenarioError, match=r"events\[2\], field 'id'.*log has 3 rows"):
        fmt.load_scenario(write(tmp_path, events=[*events[:2], {"op": "deliver", "id": 4}]))


def test_missing_top_level_field_and_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "partial.json"
    path.write_text(json.dumps({"name": "x", "title": "t", "description": "d", "events": []}))
    with pytest.raises(fmt.ScenarioError, match="scenario, field 'messages': missing"):
        fmt.load_scenario(path)
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x",\n  "title": }')
    with pytest.raises(fmt.ScenarioError, match=r"broken\.json: line 2 column"):
        fmt.load_scenario(broken)
    with pytest.raises(fmt.ScenarioError, match="cannot read"):
        fmt.load_scenario(tmp_path / "absent.json")
    with pytest.raises(fmt.ScenarioError, match="scenario: expected an object"):
        fmt.scenario_from_dict([1, 2])


def test_sqlite_integer_range_is_accepted_and_one_past_it_is_not(tmp_path: Path) -> None:
    edge = [{"shard": "main", "priority": 2**63 - 1}, {"shard": "main", "priority": -(2**63)}]
    final = sc.run_scenario(fmt.load_scenario(write(tmp_path, messages=edge))).iloc[-1]
    assert final["statuses"] == {1: "delivered", 2: "pending"}
    with pytest.raises(fmt.ScenarioError, match=r"priority'.*64-bit"):
        fmt.load_scenario(write(tmp_path, messages=[{"shard": "main", "priority": 2**63}]))


def test_file_that_is_not_utf8_names_file_and_position(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"name": "x",\n "title": "caf\xe9"}')
    with pytest.raises(fmt.ScenarioError) as info:
        fmt.load_scenario(path)
    assert (info.value.source, info.value.entry) == (str(path), "line 2 column 15")
    assert "not UTF-8" in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "entry", "problem"),
    [
        ("[" * 100_000, "file", "nested too deeply"),
        ("", "line 1 column 1", "invalid JSON"),
        ('{"name": NaN}', "scenario", "field 'name': expected a string, got nan"),
    ],
)
def test_odd_json_is_a_scenario_error(tmp_path: Path, text: str, entry: str, problem: str) -> None:
    path = tmp_path / "odd.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(fmt.ScenarioError, match=problem) as info:
        fmt.load_scenario(path)
    assert (info.value.source, info.value.entry) == (str(path), entry)


# --- hostile files: huge numbers, odd characters, repeated keys, many shards -----------------


def write_text(tmp_path: Path, text: str, stem: str = "hostile") -> Path:
    path = tmp_path / f"{stem}.json"
    path.write_text(text, encoding="utf-8")
    return path


def refused(path: Path, entry: str, field: str, problem: str) -> fmt.ScenarioError:
    """Loading `path` raises one ScenarioError line naming the file, `entry` and `field`."""
    with pytest.raises(fmt.ScenarioError) as info:
        fmt.load_scenario(path)
    err = info.value
    assert (err.source, err.entry, err.field) == (str(path), entry, field)
    assert str(err).startswith(f"{path}: {entry}, field ") and problem in str(err)
    assert "\n" not in str(err)
    return err


HEAD = '"name": "x", "title": "t", "description": "d"'


@pytest.mark.parametrize("digits", ["1" * 5000, "-" + "9" * 5000, "9" * 41, "9" * 30])
def test_a_huge_integer_is_a_scenario_error_not_a_decoder_valueerror(
    tmp_path: Path, digits: str
) -> None:
    text = f'{{{HEAD}, "messages": [{{"shard": "a", "priority": {digits}}}], "events": []}}'
    refused(write_text(tmp_path, text), "messages[0]", "priority", "64-bit")
    events = f'[{{"op": "check", "shard": "a", "coverage": {{"max": {digits}}}}}]'
    text = f'{{{HEAD}, "messages": [], "events": {events}}}'
    refused(write_text(tmp_path, text), "events[0]", "coverage.max", "64-bit")


def test_a_huge_python_integer_is_named_by_its_size() -> None:
    data = {
        "name": "x",
        "title": "t",
        "description": "d",
        "events": [],
        "messages": [{"shard": "a", "priority": 10**5000}],
    }
    with pytest.raises(fmt.ScenarioError, match=r"'priority': a \d+-bit int does not fit a 64-bit"):
        fmt.scenario_from_dict(data)


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("\\ud800", "lone surrogate"),
        ("a\\udfffb", "lone surrogate"),
        ("a\\u0000", "control"),
        ("main\\n", "control"),
        ("\\u001b[31m", "control"),
        ("\\u0085", "control"),
    ],
)
def test_shard_keys_with_surrogates_or_control_characters_are_refused(
    tmp_path: Path, key: str, problem: str
) -> None:
    msg = f'{{"shard": "{key}", "priority": 1}}'
    refused(
        write_text(tmp_path, f'{{{HEAD}, "messages": [{msg}], "events": []}}'),
        "messages[0]",
        "shard",
        problem,
    )
    ev = f'{{"op": "enqueue", "shard": "{key}", "priority": 1}}'
    refused(
        write_text(tmp_path, f'{{{HEAD}, "messages": [], "events": [{ev}]}}'),
        "events[0]",
        "shard",
        problem,
    )
    text = f'{{{HEAD}, "shards": ["ok", "{key}"], "messages": [], "events": []}}'
    refused(write_text(tmp_path, text), "scenario", "shards[1]", problem)


def test_a_valid_surrogate_pair_is_just_unicode(tmp_path: Path) -> None:
    msg = '{"shard": "\\ud83d\\ude00", "priority": 1}'  # one emoji, written as a pair
    text = f'{{{HEAD}, "messages": [{msg}], "events": [{{"op": "deliver", "id": 1}}]}}'
    final = sc.run_scenario(fmt.load_scenario(write_text(tmp_path, text))).iloc[-1]
    assert final["shard"] == "\U0001f600" and final["frontier"] == 1


@pytest.mark.parametrize(
    ("head", "field"),
    [('"name": "x\\n"', "name"), ('"name": "x\\r"', "name"), ('"name": "x\\t"', "name")],
)
def test_a_name_with_a_trailing_control_character_is_refused(
    tmp_path: Path, head: str, field: str
) -> None:
    text = f'{{{head}, "title": "t", "description": "d", "messages": [], "events": []}}'
    refused(write_text(tmp_path, text), "scenario", field, "control character")


def test_title_is_one_line_but_a_description_may_have_several(tmp_path: Path) -> None:
    text = '{"name": "x", "title": "a\\nb", "description": "d", "messages": [], "events": []}'
    refused(write_text(tmp_path, text), "scenario", "title", "control character")
    text = '{"name": "x", "title": "t", "description": "a\\n\\tb", "messages": [], "events": []}'
    assert fmt.load_scenario(write_text(tmp_path, text)).description == "a\n\tb"
    text = '{"name": "x", "title": "t", "description": "a\\u0007", "messages": [], "events": []}'
    refused(write_text(tmp_path, text), "scenario", "description", "control character")


@pytest.mark.parametrize(
    ("text", "entry", "field"),
    [
        (f'{{{HEAD}, "name": "y", "messages": [], "events": []}}', "scenario", "name"),
        (
            f'{{{HEAD}, "messages": [{{"shard": "a", "priority": 1, "priority": 2}}], '
            '"events": []}',
            "messages[0]",
            "priority",
        ),
        (
            f'{{{HEAD}, "messages": [{{"shard": "a", "priority": 1}}], '
            '"events": [{"op": "deliver", "op": "fail", "id": 1}]}',
            "events[0]",
            "op",
        ),
        (
            f'{{{HEAD}, "messages": [], '
            '"events": [{"op": "check", "shard": "a", "orphans": {"max": [], "max": []}}]}',
            "events[0]",
            "orphans.max",
        ),
    ],
)
def test_a_key_given_twice_is_refused_not_last_wins(
    tmp_path: Path, text: str, entry: str, field: str
) -> None:
    refused(write_text(tmp_path, text), entry, field, "given twice")


def test_an_odd_field_name_still_makes_a_one_line_error(tmp_path: Path) -> None:
    text = f'{{{HEAD}, "messages": [], "events": [], "a\\nb\\ud800": 1}}'
    err = refused(write_text(tmp_path, text), "scenario", "a\nb\ud800", "unknown field")
    assert "field 'a\\nb\\ud800'" in str(err)


def many_shards(n: int) -> dict:
    """A scenario with `n` shards, each named by one message, one event and the shards list."""
    keys = [f"shard-{i}" for i in range(n)]
    return {
        "name": "many",
        "title": "t",
        "description": "d",
        "shards": keys[::2],
        "messages": [{"shard": k, "priority": 1} for k in keys],
        "events": [{"op": "enqueue", "shard": k, "priority": 2} for k in reversed(keys)],
    }


class CountingKey(str):
    """A shard key that counts the hashes and comparisons made with it."""

    ops = 0

    def __hash__(self) -> int:
        CountingKey.ops += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        CountingKey.ops += 1
        return str.__eq__(self, other)


def key_operations(n: int) -> int:
    data = json.loads(json.dumps(many_shards(n)))
    for item in [*data["messages"], *data["events"]]:
        item["shard"] = CountingKey(item["shard"])
    data["shards"] = [CountingKey(k) for k in data["shards"]]
    CountingKey.ops = 0
    scenario = fmt.scenario_from_dict(data)
    assert len(scenario.tracked_shards) == n
    return CountingKey.ops


def test_loading_does_work_linear_in_the_number_of_shards() -> None:
    small, big = key_operations(4_000), key_operations(40_000)
    assert small > 0
    assert big / small < 12, f"{small} -> {big} key operations for 10x the shards"


@pytest.mark.slow
def test_a_big_file_loads_in_near_linear_time(tmp_path: Path) -> None:
    """A generous ratio of CPU times (10x shards: linear ~10x, the old quadratic ~100x)."""
    paths = {}
    for n in (4_000, 40_000):
        paths[n] = tmp_path / f"many_{n}.json"
        paths[n].write_text(json.dumps(many_shards(n)))

    def cpu(path: Path) -> float:
        runs = []
        for _ in range(2):
            start = time.process_time()
            scenario = fmt.load_scenario(path)
            runs.append(time.process_time() - start)
        assert len(scenario.tracked_shards) == int(path.stem.split("_")[1])
        return min(runs)

    small, big = cpu(paths[4_000]), cpu(paths[40_000])
    assert big < 35 * max(small, 1e-3), f"{small:.3f}s -> {big:.3f}s for 10x the shards"


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
