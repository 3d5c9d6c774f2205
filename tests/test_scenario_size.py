"""A scenario runs in memory proportional to what it shows (issue 20.8): only the shards an
event touched are read again, and a timeline too big to hold is refused before anything runs,
naming the limit."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from labkit.frontier import scenarios as sc
from labkit.frontier.scenario_format import ScenarioError, load_scenario, scenario_from_dict

DATA = Path(__file__).resolve().parent.parent / "data" / "scenarios"


def full_recompute(scenario) -> pd.DataFrame:
    """The reference: every tracked shard read again after every event (the old runner)."""
    conn = sc.fr.connect()
    sc._enqueue_messages(conn, scenario)
    records = [
        {"step": 0, "event": "start", "op": "start_log", **sc.shard_state(conn, key)}
        for key in scenario.tracked_shards
    ]
    for k, ev in enumerate(scenario.events):
        result = sc._apply_event(conn, scenario, ev, f"events[{k}]")
        records += [
            {
                "step": k + 1,
                "event": sc._label(ev, result),
                "op": ev["op"],
                **sc.shard_state(conn, key),
            }
            for key in scenario.tracked_shards
        ]
    df = pd.DataFrame.from_records(records)
    df["max_watermark"] = df["max_watermark"].astype("Int64")
    return df


def random_scenario(seed: int) -> dict:
    rng = random.Random(seed)
    shards = ["a", "b", "c"][: rng.randint(1, 3)]
    messages = [{"shard": rng.choice(shards), "priority": rng.randint(1, 3)} for _ in range(8)]
    events, open_ids, failed = [], list(range(1, 9)), []
    for _ in range(rng.randint(5, 25)):
        roll = rng.random()
        if roll < 0.45 and open_ids:
            i = open_ids.pop(rng.randrange(len(open_ids)))
            op = "fail" if rng.random() < 0.2 else "deliver"
            events.append({"op": op, "id": i})
            if op == "fail":
                failed.append(i)
        elif roll < 0.55:
            events.append({"op": "dispatch"})
        elif roll < 0.65 and failed:
            events.append({"op": "redrive", "id": failed.pop()})
        else:
            events.append(
                {"op": "summarize"} | ({"shard": rng.choice(shards)} if rng.random() < 0.5 else {})
            )
    return {
        "name": f"random-{seed}",
        "title": "t",
        "description": "d",
        "messages": messages,
        "events": events,
    }


@pytest.mark.parametrize("seed", range(12))
def test_reading_only_touched_shards_gives_the_same_timeline(seed: int) -> None:
    scenario = scenario_from_dict(random_scenario(seed), f"random-{seed}")
    try:
        want = full_recompute(scenario)
    except ScenarioError:  # a dispatch claimed a row the schedule then delivers: both refuse
        with pytest.raises(ScenarioError):
            sc.run_scenario(scenario)
        return
    pd.testing.assert_frame_equal(sc.run_scenario(scenario), want)


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.stem)
def test_every_bundled_scenario_gives_the_same_timeline(path: Path) -> None:
    scenario = load_scenario(path)
    pd.testing.assert_frame_equal(sc.run_scenario(scenario), full_recompute(scenario))


def _big(messages: int, shards: int, events: int) -> dict:
    keys = [f"s{i}" for i in range(shards)]
    return {
        "name": "big",
        "title": "t",
        "description": "d",
        "messages": [{"shard": keys[i % shards], "priority": 1} for i in range(messages)],
        "events": [
            {"op": "deliver", "id": i % messages + 1} if i < messages else {"op": "dispatch"}
            for i in range(events)
        ],
    }


def test_a_timeline_too_big_to_hold_is_refused_up_front_naming_the_limit() -> None:
    scenario = scenario_from_dict(_big(100_000, 50, 100_000), "big.json")
    with pytest.raises(
        ScenarioError,
        match=r"^big.json: events: the timeline would have 5,000,050 rows .* at most 500,000",
    ):
        sc.run_scenario(scenario)
    wide = scenario_from_dict(_big(20_000, 1, 20_000), "wide.json")
    with pytest.raises(ScenarioError, match=r"^wide.json: messages: .* at most 10,000,000"):
        sc.run_scenario(wide)


@pytest.mark.slow
def test_a_long_run_on_many_shards_within_the_limits_reads_only_what_changed() -> None:
    scenario = scenario_from_dict(_big(2_000, 40, 4_000), "long.json")
    timeline = sc.run_scenario(scenario)
    assert len(timeline) == 4_001 * 40
    first, last = timeline.iloc[0], timeline[timeline["shard"] == "s0"].iloc[-1]
    assert timeline[timeline["shard"] == "s0"]["statuses"].map(id).nunique() <= 2_000 // 40 + 2
    assert first["frontier"] == 0 and last["frontier"] == 1_961
