"""The part-one widget apps, driven without a browser by setting control values, and the typed
delivery orders (`labkit.frontier.scenarios.parse_delivery_order`) the timeline app plays."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.frontier import scenarios as sc
from labkit.widgets import frontier as wf

SEED_PRIORITIES = [5, 5, 1, 5, 5, 5]


@pytest.fixture
def app() -> wf.FrontierTimelineApp:
    return wf.FrontierTimelineApp(n=6)


def _classes(widget) -> set[str]:
    return set(widget._dom_classes)


def _live(app: wf.FrontierTimelineApp) -> dict[str, bool]:
    """Which controls are enabled: priorities, seed, custom text."""
    sliders = {s.disabled for s in app.priority_sliders}
    assert len(sliders) == 1, "all priority sliders share one state"
    return {
        "priority": not sliders.pop(),
        "seed": not app.seed_text.disabled,
        "custom": not app.custom_text.disabled,
    }


# --- the default: dispatch by priority -------------------------------------------------------


def test_opens_in_dispatch_mode_with_live_priorities(app) -> None:
    assert app.mode == wf.DISPATCH == app.order_dropdown.value
    assert app.priorities == SEED_PRIORITIES
    assert app.order == [3, 1, 2, 4, 5, 6] == sc.dispatched_order(SEED_PRIORITIES)
    assert _live(app) == {"priority": True, "seed": False, "custom": False}
    assert app.why_priority.value == ""
    assert wf.WHY_SEED in app.why_seed.value and wf.WHY_CUSTOM in app.why_custom.value
    assert "Move a priority slider" in app.help_html.value
    assert app.step_slider.value == app.step_slider.max == app.state["step"].max() == 12
    assert app.orphan_count == 2 and app.frontier_orphan_count == 0
    assert "(ids 1, 2)" in app.orphans_html.value
    assert "dispatch by priority: delivery order <b>3, 1, 2, 4, 5, 6</b>" in app.message.value
    assert app.last_png.startswith(b"\x89PNG")
    (shown,) = app.out.outputs
    assert "image/png" in shown["data"]
    assert len(app.timings) == 1


def test_css_classes_for_the_browser_test(app) -> None:
    for i, slider in enumerate(app.priority_sliders, 1):
        assert f"wb-priority-{i}" in _classes(slider)
    named = {
        "wb-order": app.order_dropdown,
        "wb-help": app.help_html,
        "wb-why-priority": app.why_priority,
        "wb-custom-order": app.custom_text,
        "wb-why-custom": app.why_custom,
        "wb-seed": app.seed_text,
        "wb-why-seed": app.why_seed,
        "wb-step": app.step_slider,
        "wb-orphans": app.orphans_html,
        "wb-timeline": app.out,
        "wb-message": app.message,
        "wb-play": app.play,
    }
    for css, widget in named.items():
        assert css in _classes(widget)


def test_moving_a_priority_in_dispatch_mode_changes_order_and_png(app) -> None:
    before = app.last_png
    app.priority_sliders[5].value = 4  # id 6 becomes more urgent than the routine rows
    assert app.order == [3, 6, 1, 2, 4, 5]
    assert app.orphan_count == 4 and "(ids 1, 2, 4, 5)" in app.orphans_html.value
    assert app.last_png != before
    app.priority_sliders[0].value = 1  # id 1 ties with id 3 and wins on id
    assert app.order == [1, 3, 6, 2, 4, 5]
    app.priority_sliders[0].value = 5
    app.priority_sliders[5].value = 5
    assert app.order == [3, 1, 2, 4, 5, 6] and app.last_png == before


@given(st.lists(st.integers(1, 9), min_size=1, max_size=12))
def test_dispatched_order_is_the_sql_dispatchers(priorities) -> None:
    """The widget's order comes from `dispatch_next`; it agrees with (priority, id)."""
    assert sc.dispatched_order(priorities) == sc.dispatch_order(priorities)


# --- controls a mode ignores are disabled, and really have no effect --------------------------

MODES = {
    wf.DISPATCH: {"priority": True, "seed": False, "custom": False},
    wf.ID_ORDER: {"priority": False, "seed": False, "custom": False},
    wf.RANDOM: {"priority": False, "seed": True, "custom": False},
    wf.CUSTOM: {"priority": False, "seed": False, "custom": True},
    "preset:seed": {"priority": False, "seed": False, "custom": False},
}


@pytest.mark.parametrize(("mode", "live"), MODES.items())
def test_each_mode_disables_what_it_ignores_and_says_why(app, mode, live) -> None:
    app.order_dropdown.value = mode
    assert _live(app) == live
    notes = {"priority": app.why_priority, "seed": app.why_seed, "custom": app.why_custom}
    for name, note in notes.items():
        assert (note.value == "") == live[name], (name, note.value)
        assert ("disabled:" in note.value) != live[name]
    if mode.startswith(wf.PRESET):
        assert wf.WHY_PRIORITY_PRESET in app.why_priority.value
        assert "<b>Preset Article 1.</b>" in app.help_html.value  # not the file name "seed"
    else:
        assert app.help_html.value == wf.MODE_HELP[mode].format(next_id=7)
        mentions_priority = "Move a priority slider" in app.help_html.value
        assert mentions_priority == live["priority"]
        assert wf.NO_PRIORITY in app.help_html.value or live["priority"]
        assert ("seed" in app.help_html.value) == live["seed"]
    if not live["priority"]:
        assert wf.WHY_PRIORITY in app.why_priority.value or mode.startswith(wf.PRESET)


@pytest.mark.parametrize("mode", [m for m, live in MODES.items() if not live["priority"]])
def test_priorities_change_nothing_where_they_are_disabled(app, mode) -> None:
    """The "disabled" word is honest: even set from code, a priority leaves order and PNG."""
    app.order_dropdown.value = mode
    order, png = list(app.order), app.last_png
    app.priority_sliders[5].value = 1
    assert app.order == order and app.last_png == png


@pytest.mark.parametrize("mode", [wf.DISPATCH, wf.ID_ORDER, wf.CUSTOM, "preset:seed"])
def test_seed_and_custom_text_change_nothing_where_they_are_disabled(app, mode) -> None:
    app.order_dropdown.value = mode
    order, png = list(app.order), app.last_png
    app.seed_text.value = 7
    if mode != wf.CUSTOM:
        app.custom_text.value = "6 5 4 3 2 1"
    assert app.order == order and app.last_png == png


def test_step_slider_moves_through_time(app) -> None:
    app.step_slider.value = 1  # deliver #3: MAX is 3, no summary yet
    assert app.orphan_count == 0
    png = app.last_png
    app.step_slider.value = 4  # #1 delivered under a MAX checkpoint of 3
    assert app.orphan_count == 1 and "(ids 1)" in app.orphans_html.value
    assert app.last_png != png


# --- typed orders: deliveries, dead letters, redrives ----------------------------------------


def test_parse_delivery_order_with_failures_and_a_redrive() -> None:
    steps = sc.parse_delivery_order("3 5 f1 2 r1 4 6", 6)
    assert steps == (
        sc.OrderStep("deliver", 3),
        sc.OrderStep("deliver", 5),
        sc.OrderStep("fail", 1),
        sc.OrderStep("deliver", 2),
        sc.OrderStep("redrive", 1, new_id=7),
        sc.OrderStep("deliver", 4),
        sc.OrderStep("deliver", 6),
    )
    assert sc.format_delivery_order(steps) == "3 5 f1 2 r1 4 6"
    assert sc.parse_delivery_order(" 3,5 ;F1 2 R1 4 6 ", 6) == steps
    chain = sc.parse_delivery_order("f1 r1 f7 r7 8", 6)
    assert [s.new_id for s in chain if s.op == "redrive"] == [7, 8]


def test_typed_order_plays_the_dead_letter_rule(app) -> None:
    app.order_dropdown.value = wf.CUSTOM
    app.custom_text.value = "3 5 f1 2 r1 4 6"
    assert app.order == [3, 5, 1, 2, 4, 6] and app.failures == [1]
    events = app.state.drop_duplicates("step")["event"].tolist()
    assert "fail #1" in events and "redrive #1 -> #7" in events
    last = app.state.iloc[-1]
    assert last["statuses"][1] == "failed" and last["statuses"][7] == "pending"
    # failed is terminal, so the frontier passes row 1; the new pending row 7 holds it at 6
    assert last["frontier"] == 6 and last["coverage_frontier"] == 6
    assert last["orphan_ids_max"] == (1, 2, 4) and last["orphan_ids_frontier"] == ()
    assert "redriven 1 as row 7; still pending 7" in app.message.value
    app.custom_text.value = "3 5 f1 2 r1 4 6 7"
    last = app.state.iloc[-1]
    assert last["statuses"][7] == "delivered" and last["frontier"] == 7
    assert app.order == [3, 5, 1, 2, 4, 6, 7] and "still pending" not in app.message.value
    assert app.state["step"].max() == 16 == app.step_slider.value


BAD_ORDERS = [
    ("3 5 2 r9", "token 4 'r9': row 9 has not failed"),
    ("r2", "token 1 'r2': row 2 has not failed (it is pending)"),
    ("3 r3", "token 2 'r3': row 3 has not failed (it is delivered)"),
    ("f1 r1 r1", "token 3 'r1': row 1's dead letter was already redriven as row 7"),
    ("3 5 x", "token 3 'x': use a row id"),
    ("3 -1", "token 2 '-1': use a row id"),
    ("f", "token 1 'f': use a row id"),
    ("3 9", "token 2 '9': row 9 does not exist"),
    ("3 0", "token 2 '0': row 0 does not exist"),
    ("3 7", "token 2 '7': row 7 does not exist"),
    ("f3 f3", "token 2 'f3': row 3 already failed"),
    ("3 3", "token 2 '3': row 3 is already delivered"),
    ("f1 1", "token 2 '1': row 1 already failed; terminal is forever (r1 retries it"),
    ("3 f3", "token 2 'f3': row 3 is already delivered"),
]


@pytest.mark.parametrize(("text", "reason"), BAD_ORDERS)
def test_every_bad_token_is_named(text, reason) -> None:
    with pytest.raises(sc.OrderTokenError) as caught:
        sc.parse_delivery_order(text, 6)
    assert str(caught.value).startswith(reason)
    position = int(reason.split()[1])
    assert caught.value.position == position
    assert caught.value.token == text.split()[position - 1]


def test_bad_tokens_show_inline_and_keep_the_last_good_timeline(app) -> None:
    app.order_dropdown.value = wf.CUSTOM
    app.custom_text.value = "1 2 3 4 5 6"
    assert app.orphan_count == 0
    good_png, good_state = app.last_png, app.state
    for text, reason in [*BAD_ORDERS, ("  ", "type the order rows finish in, e.g.")]:
        app.custom_text.value = text
        assert f"custom order: {reason}" in app.message.value, (text, app.message.value)
        assert "still showing the last valid order" in app.message.value
        assert app.state is good_state and app.last_png == good_png


def test_redrives_are_capped() -> None:
    with pytest.raises(sc.OrderTokenError, match="token 6 'r4': a redrive would add row 5"):
        sc.parse_delivery_order("f1 r1 f3 r3 f4 r4", 2)
    assert len(sc.parse_delivery_order("f1 r1 f3 r3 f4 r4", 2, max_rows=5)) == 6


def test_custom_starts_from_the_order_on_screen_and_keeps_what_was_typed(app) -> None:
    app.order_dropdown.value = "preset:seed"
    app.order_dropdown.value = wf.CUSTOM
    assert app.custom_text.value == "3 5 1 2 4 6"
    assert app.order == [3, 5, 1, 2, 4, 6] and app.orphan_count == 3
    app.custom_text.value = "6 5 4 3 2 1"
    app.order_dropdown.value = wf.DISPATCH
    app.order_dropdown.value = wf.CUSTOM
    assert app.custom_text.value == "6 5 4 3 2 1" and app.orphan_count == 5


def test_presets_carry_failures() -> None:
    presets = wf.presets_for(5)
    assert presets["late_small_pending"].order == (2, 3, 4, 5, 1)
    assert presets["all_terminal"].failures == (4,)
    app = wf.FrontierTimelineApp(n=5)
    app.order_dropdown.value = "preset:late_small_pending"
    assert app.priorities == [9, 1, 1, 1, 1] and app.orphan_count == 1
    app.order_dropdown.value = "preset:all_terminal"
    assert app.failures == [4] and "dead-lettered 4" in app.message.value
    app.order_dropdown.value = wf.CUSTOM
    assert "f4" in app.custom_text.value.split()
    with pytest.raises(ValueError):
        wf.FrontierTimelineApp(n=1)


def test_random_order_follows_the_seed(app) -> None:
    app.order_dropdown.value = wf.RANDOM
    first = list(app.order)
    assert first == sc.random_order(6, 0)
    app.seed_text.value = 1
    assert app.order == sc.random_order(6, 1)
    app.seed_text.value = 0
    assert app.order == first
    app.order_dropdown.value = wf.ID_ORDER
    assert app.order == [1, 2, 3, 4, 5, 6] and app.orphan_count == 0


def test_each_control_change_is_one_timed_update(app) -> None:
    """One recorded update per change (latency itself is measured by benchmarks/)."""
    app.timings.clear()
    images = set()
    for _ in range(10):
        app.step_slider.value = (app.step_slider.value + 5) % 13
        images.add(app.last_png)
    app.priority_sliders[0].value = 2
    assert len(app.timings) == 11 and all(t > 0 for t in app.timings)
    assert len(images) > 1


# --- predict, then reveal --------------------------------------------------------------------


def _orphans_by_hand(priorities) -> tuple[int, ...]:
    """Independent oracle for one dispatcher with a summary after each delivery: a row is
    orphaned when some larger id is more urgent (it finishes first and MAX passes the row)."""
    n = len(priorities)
    return tuple(
        i for i in range(1, n + 1) if any(priorities[j] < priorities[i - 1] for j in range(i, n))
    )


def test_prediction_is_hidden_until_locked_in_then_judged_right() -> None:
    puzzle = wf.PredictOrphansApp()
    assert puzzle.priorities == wf.PUZZLE_PRIORITIES
    assert puzzle.out.outputs == () and puzzle.last_png == b"" and puzzle.state is None
    assert puzzle.verdict is None and puzzle.new_button.disabled
    assert "answer this puzzle first" in puzzle.why_new.value
    for i in (1, 2, 3, 5):
        puzzle.guesses[i - 1].value = True
    puzzle.reveal_button.click()
    verdict = puzzle.verdict
    assert verdict == wf.Verdict((1, 2, 3, 5), (1, 2, 3, 5)) and verdict.right
    assert verdict.actual == _orphans_by_hand(wf.PUZZLE_PRIORITIES)
    assert "Right." in puzzle.verdict_html.value and "Not quite" not in puzzle.verdict_html.value
    assert "order was 4, 1, 6, 2, 3, 5" in puzzle.verdict_html.value
    assert all(box.disabled for box in puzzle.guesses) and puzzle.reveal_button.disabled
    assert not puzzle.new_button.disabled and puzzle.why_new.value == ""
    assert puzzle.last_png.startswith(b"\x89PNG") and len(puzzle.out.outputs) == 1
    puzzle.guesses[3].value = True  # a disabled box set from code cannot change the verdict
    assert puzzle.reveal() is verdict


@pytest.mark.parametrize(
    ("ticked", "missed", "extra"),
    [((), (1, 2, 3, 5), ()), ((1, 4), (2, 3, 5), (4,)), ((1, 2, 3, 4, 5, 6), (), (4, 6))],
)
def test_wrong_predictions_are_judged_wrong(ticked, missed, extra) -> None:
    puzzle = wf.PredictOrphansApp()
    for i in ticked:
        puzzle.guesses[i - 1].value = True
    verdict = puzzle.reveal()
    assert not verdict.right and verdict.missed == missed and verdict.extra == extra
    text = puzzle.verdict_html.value
    assert "Not quite." in text and "Right." not in text
    for label, ids in (("Missed: ", missed), ("Not orphaned: ", extra)):
        if ids:
            assert label + ", ".join(map(str, ids)) + "." in text
        else:
            assert label not in text


def test_no_orphans_is_an_answer_and_new_puzzles_follow_the_seed() -> None:
    calm = wf.PredictOrphansApp(priorities=(1, 2, 3))
    verdict = calm.reveal()
    assert verdict.right and verdict.actual == () and "orphans no id" in calm.verdict_html.value
    first, second = wf.PredictOrphansApp(seed=4), wf.PredictOrphansApp(seed=4)
    first.reveal()
    first.new_button.click()
    second.new_puzzle()
    assert first.priorities == second.priorities and first.puzzle == 1
    assert first.verdict is None and first.out.outputs == () and not first.reveal_button.disabled
    assert not any(box.value or box.disabled for box in first.guesses)
    assert "Puzzle 2." in first.question.value
    assert first.reveal().actual == _orphans_by_hand(first.priorities)


# --- notebook 02 -----------------------------------------------------------------------------


def test_edge_case_app() -> None:
    edge = wf.EdgeCaseApp()
    assert "wb-case" in _classes(edge.case) and "wb-ranges" in _classes(edge.out)
    assert edge.shard.value == "main" and edge.last_png.startswith(b"\x89PNG")
    png = edge.last_png
    edge.case.value = "interleaved_shards"
    assert list(edge.shard.options) == ["a", "b"] and edge.shard.value == "a"
    assert edge.table["orphan_ids_max"].tolist() == [(3,), (2,)]
    assert edge.last_png != png
    # the columns the notebook's prose reads come first, in view beside the shard
    head = edge.table_html.value.split("<tbody>")[0]
    assert head.index(">shard<") < head.index(">orphan_ids_frontier<") < head.index(">frontier<")
    assert head.index(">orphan_ids_max<") < head.index(">frontier<")
    edge.shard.value = "b"
    assert len(edge.timings) == 3
    edge.case.value = "odd_shard_keys"
    assert "DROP TABLE conversations" in edge.table_html.value and "频道-é" in edge.table_html.value


def test_a_priority_move_that_keeps_the_order_says_no_change(app) -> None:
    """Issue 19: #1 from 5 to 4 leaves ORDER BY priority, id at 3, 1, 2, 4, 5, 6."""
    before = app.order
    app.priority_sliders[0].value = 4
    assert app.order == before
    assert app.message.value.startswith("<i>No change: with these priorities")
    app.priority_sliders[3].value = 1  # now #4 ties #3 at the front: the order moves
    assert app.order != before and "No change" not in app.message.value
