"""The A/B mode of the browser benchmark (`python -m benchmarks.widget_browser`), without a
browser: what it refuses before starting anything, and how it pools rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import widget_browser as wb


def test_controls_of_two_notebooks_or_none_are_refused_before_any_server_starts(
    monkeypatch,
) -> None:
    monkeypatch.setattr(wb, "start_lab", lambda *a, **k: pytest.fail("a server was started"))
    for names in (["05 random seed", "01 step slider"], ["no such control"]):
        with pytest.raises(ValueError, match="controls of one notebook"):
            wb.compare([Path(".")], names, presses=1, rounds=1)


def test_rounds_pool_per_checkout_and_control() -> None:
    def row(checkout: str, rnd: int, samples: list[float]) -> dict[str, object]:
        made = wb._row("05 random seed", "press", samples, [0.01, 0.03], wb.TARGET_P95_S)
        return {**made, "checkout": checkout, "round": rnd, "load_start": 1.0 + rnd}

    rows = [row("a", 1, [0.05, 0.07]), row("b", 1, [0.2, 0.3]), row("a", 2, [0.06, 0.5])]
    pooled = wb._pooled(rows)
    assert [(p["checkout"], p["presses"]) for p in pooled] == [("a", 4), ("b", 2)]
    a = pooled[0]
    assert (a["p50"], a["p95"], a["max"]) == ("60.00 ms", "500.00 ms", "500.00 ms")
    assert a["p95 per round (ms)"] == "70 500"


def test_the_typed_schedule_goes_with_notebook_04_controls_only(monkeypatch) -> None:
    monkeypatch.setattr(wb, "start_lab", lambda *a, **k: pytest.fail("a server was started"))
    with pytest.raises(ValueError, match="controls of one notebook"):
        wb.compare([Path(".")], [wb.TYPED_COLD_AB, "05 random seed"], presses=1, rounds=1)


def test_the_new_states_row_leaves_the_workbench_no_kept_picture() -> None:
    """What its kernel runs before each press empties the pictures the canvas keeps whole, so
    the next click draws its state (the other row's clicks find theirs kept)."""
    from labkit.widgets.catalog import ArrivalWorkbench

    (control,) = [c for c in wb.CONTROLS if c.name == "04 workbench deliver/undo, new states"]
    workbench = ArrivalWorkbench(preset="inverted")
    workbench.buttons["deliver"].click()
    assert workbench.canvas.pngs
    exec(control.before, {"workbench": workbench})
    assert not workbench.canvas.pngs
