"""The part-one widget apps, driven without a browser by setting control values."""

from __future__ import annotations

import pytest

from labkit.widgets import part1_frontier as wf


@pytest.fixture
def app() -> wf.FrontierTimelineApp:
    return wf.FrontierTimelineApp(n=6)


def _classes(widget) -> set[str]:
    return set(widget._dom_classes)


def test_defaults_are_the_seed_scenario(app) -> None:
    assert [s.value for s in app.priority_sliders] == [5, 5, 1, 5, 5, 5]
    assert app.order_dropdown.value == "preset:seed"
    assert app.order == [3, 5, 1, 2, 4, 6]
    assert app.step_slider.value == app.step_slider.max == app.state["step"].max() == 12
    assert app.orphan_count == 3 and app.frontier_orphan_count == 0
    assert "ids 1, 2, 4" in app.orphans_html.value
    assert app.last_png.startswith(b"\x89PNG")
    (shown,) = app.out.outputs
    assert "image/png" in shown["data"]
    assert len(app.timings) == 1


def test_css_classes_for_the_browser_test(app) -> None:
    for i, slider in enumerate(app.priority_sliders, 1):
        assert f"wb-priority-{i}" in _classes(slider)
    named = {
        "wb-order": app.order_dropdown,
        "wb-custom-order": app.custom_text,
        "wb-seed": app.seed_text,
        "wb-step": app.step_slider,
        "wb-orphans": app.orphans_html,
        "wb-timeline": app.out,
        "wb-message": app.message,
        "wb-play": app.play,
    }
    for css, widget in named.items():
        assert css in _classes(widget)


def test_priority_slider_changes_the_dispatch_order(app) -> None:
    app.order_dropdown.value = wf.DISPATCH
    assert app.order == [3, 1, 2, 4, 5, 6]
    before = app.last_png
    app.priority_sliders[5].value = 1  # id 6 becomes urgent too
    assert app.order == [3, 6, 1, 2, 4, 5]
    assert app.orphan_count == 4  # 1, 2, 4, 5 all finish after MAX jumped to 6
    assert app.last_png != before
    assert app.state["step"].max() == 12


def test_step_slider_moves_through_time(app) -> None:
    app.step_slider.value = 2  # deliver #3 and one summary: nothing orphaned yet
    assert app.orphan_count == 0
    png = app.last_png
    app.step_slider.value = 6  # #1 delivered under a MAX checkpoint of 5
    assert app.orphan_count == 1 and "ids 1)" in app.orphans_html.value
    assert app.last_png != png


def test_custom_order_and_bad_input(app) -> None:
    app.custom_text.value = "1, 2, 3, 4, 5, 6"
    assert app.order_dropdown.value == wf.CUSTOM
    assert app.order == [1, 2, 3, 4, 5, 6] and app.orphan_count == 0
    good_png, good_state = app.last_png, app.state
    for bad, reason in [
        ("3,5,x", "'x' is not a message id"),
        ("3,9", "id 9 does not exist"),
        ("3,3", "appears twice"),
        ("", "separated by commas"),
    ]:
        app.custom_text.value = bad
        assert reason in app.message.value.replace("&#x27;", "'")
        assert app.state is good_state and app.last_png == good_png
    app.custom_text.value = "6"  # a partial order: the rest stay pending
    assert app.order == [6] and "still pending 1, 2, 3, 4, 5" in app.message.value


def test_random_order_follows_the_seed(app) -> None:
    app.order_dropdown.value = wf.RANDOM
    first = list(app.order)
    app.seed_text.value = 1
    assert app.order != first or app.seed_text.value == 0
    app.seed_text.value = 0
    assert app.order == first
    app.order_dropdown.value = wf.ID_ORDER
    assert app.order == [1, 2, 3, 4, 5, 6] and app.orphan_count == 0


def test_presets_and_parse_order() -> None:
    presets = wf.presets_for(5)
    assert presets["late_small_pending"].order == (2, 3, 4, 5, 1)
    assert presets["all_terminal"].failures == (4,)
    app = wf.FrontierTimelineApp(n=5)
    app.order_dropdown.value = "preset:late_small_pending"
    assert [s.value for s in app.priority_sliders] == [9, 1, 1, 1, 1]
    assert app.orphan_count == 1
    app.order_dropdown.value = "preset:all_terminal"
    assert app.failures == [4] and "dead-lettered 4" in app.message.value
    assert wf.parse_order(" 2 ;1 ", 3) == [2, 1]
    with pytest.raises(ValueError):
        wf.FrontierTimelineApp(n=1)


def test_each_control_change_is_one_timed_update(app) -> None:
    """One recorded update per change (latency itself is measured by benchmarks/)."""
    app.timings.clear()
    images = set()
    for _ in range(10):
        app.step_slider.value = (app.step_slider.value + 5) % 13
        images.add(app.last_png)
    assert len(app.timings) == 10 and all(t > 0 for t in app.timings)
    assert len(images) > 1


def test_edge_case_app() -> None:
    edge = wf.EdgeCaseApp()
    assert "wb-case" in _classes(edge.case) and "wb-ranges" in _classes(edge.out)
    assert edge.shard.value == "main" and edge.last_png.startswith(b"\x89PNG")
    png = edge.last_png
    edge.case.value = "interleaved_shards"
    assert list(edge.shard.options) == ["a", "b"] and edge.shard.value == "a"
    assert edge.table["orphan_ids_max"].tolist() == [(3,), (2,)]
    assert edge.last_png != png
    edge.shard.value = "b"
    assert len(edge.timings) == 3
    edge.case.value = "odd_shard_keys"
    assert "DROP TABLE conversations" in edge.table_html.value and "频道-é" in edge.table_html.value
