"""Notebook 07's widget drives real connections: the buttons step the lab and redraw, an
impossible step is greyed out and refused in words, and a closed connection or a server that is
gone shows on the message line (the widget reconnects by itself when it can)."""

from __future__ import annotations

import pytest

from labkit.pg.instance import PgUnavailable

pytestmark = pytest.mark.postgres


@pytest.fixture
def app(pg_dsn: str):
    from labkit.widgets.pg import CommitOrderApp

    made = CommitOrderApp(pg_dsn)
    yield made
    made.close()


def _button(app, actor: str, action: str):
    return {b._dom_classes[0]: b for b in app.buttons}[f"wb-pg-{actor}-{action}"]


def test_buttons_reproduce_the_late_commit(app) -> None:
    from labkit.pg.commit_order import LATE_COMMIT

    first = app.last_png
    for actor, action in LATE_COMMIT:
        _button(app, actor, action).click()
    assert app.last_png != first and app.last_png.startswith(b"\x89PNG")
    assert "no-wait frontier: coverage 2, orphans 1" in app.message.value
    assert "xmin horizon wait: coverage 2, orphans none" in app.message.value
    app.reset_button.click()
    assert "no-wait frontier: coverage 0, orphans none" in app.message.value


def test_message_line_and_legend_name_the_rules_alike() -> None:
    from labkit.plots.pg import RULE_NAMES, RULE_STYLE

    assert {rule: label for rule, (_color, label) in RULE_STYLE.items()} == RULE_NAMES


def test_a_held_row_is_named_in_the_message(app) -> None:
    app.step("A", "insert")
    assert "A holds [1] uncommitted" in app.message.value
    app.step("worker", "insert")
    assert "Not done" in app.message.value


def test_a_commit_before_an_insert_is_greyed_out_and_refused(app) -> None:
    commit_a = _button(app, "A", "commit")
    assert commit_a.disabled and "A holds no uncommitted row" in app.why.value
    before = app.last_png
    app.step("A", "commit")
    assert "Not done: A commit: A holds no uncommitted row" in app.message.value
    assert app.lab.events == [] and app.last_png == before
    app.step("A", "insert")
    assert not commit_a.disabled and "A commits" not in app.why.value
    assert _button(app, "B", "commit").disabled


def test_a_delivery_that_finds_nothing_says_no_change(app) -> None:
    app.step("A", "insert")
    app.step("worker", "deliver")
    assert app.message.value.startswith("No change: no committed row")
    app.step("A", "commit")
    app.step("worker", "deliver")
    assert "No change" not in app.message.value


def test_a_closed_connection_reconnects_by_itself(app) -> None:
    """What Run All used to do: a later cell closes the app, then the reader clicks."""
    app.step("A", "insert")
    old = app.lab
    app.close()
    app.step("B", "insert")
    assert app.lab is not old and app.lab.events == []
    assert "reconnected and started over" in app.message.value
    assert app.message.value.count(".") >= 1 and "Traceback" not in app.message.value
    app.step("B", "insert")
    assert "B holds [1] uncommitted" in app.message.value


def test_a_server_that_is_gone_is_said_on_the_message_line(app, monkeypatch) -> None:
    import labkit.widgets.pg as widget

    def refuse(_dsn: str) -> None:
        raise PgUnavailable("PostgreSQL at x refused the connection: gone")

    app.close()
    monkeypatch.setattr(widget, "CommitOrderLab", refuse)
    app.step("A", "insert")
    assert app.lab is None
    assert "no longer answers" in app.message.value and "start over" in app.message.value
    assert all(b.disabled for b in app.buttons)
    assert "the server is gone" in app.why.value


def test_a_summary_that_moves_nothing_says_no_change_and_why(app) -> None:
    app.step("A", "insert")
    app.step("B", "insert")
    app.step("B", "commit")
    app.step("worker", "deliver")
    app.step("worker", "summarize")  # the no-wait frontier moves to 2; the horizon holds
    assert "No change" not in app.message.value
    app.step("worker", "summarize")
    assert app.message.value.startswith("No change: neither checkpoint moved (the horizon")
