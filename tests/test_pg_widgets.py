"""Notebook 07's widget drives real connections: the buttons step the lab and redraw."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.postgres


def test_buttons_reproduce_the_late_commit(pg_dsn: str) -> None:
    from labkit.pg.commit_order import LATE_COMMIT
    from labkit.widgets.part3_postgres import CommitOrderApp

    app = CommitOrderApp(pg_dsn)
    try:
        first = app.last_png
        by_class = {b._dom_classes[0]: b for b in app.buttons}
        for actor, action in LATE_COMMIT:
            by_class[f"wb-pg-{actor}-{action}"].click()
        assert app.last_png != first and app.last_png.startswith(b"\x89PNG")
        assert "id_order: coverage 2, orphans 1" in app.message.value
        assert "horizon: coverage 2, orphans none" in app.message.value
        app.reset_button.click()
        assert "id_order: coverage 0, orphans none" in app.message.value
    finally:
        app.close()


def test_a_held_row_is_named_in_the_message(pg_dsn: str) -> None:
    from labkit.widgets.part3_postgres import CommitOrderApp

    app = CommitOrderApp(pg_dsn)
    try:
        app.step("A", "insert")
        assert "A holds [1] uncommitted" in app.message.value
        app.step("worker", "insert")
        assert "refused" in app.message.value
    finally:
        app.close()
