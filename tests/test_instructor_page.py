"""The instructor page's tables come from the notebooks: current, within their limits, and every
section of a planned notebook named as shown or skipped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit.docs import day_plans as dp
from labkit.docs import instructor_page as ip


def test_the_page_is_current() -> None:
    assert ip.main(["--check"]) == 0, "run `.venv/bin/python -m labkit.docs.instructor_page`"


def test_an_edited_notebook_makes_the_page_stale(tmp_path: Path) -> None:
    page = tmp_path / "instructor.md"
    page.write_text(dp.PAGE.read_text(encoding="utf-8").replace("| 00_start_here | ", "| 00 | "))
    assert ip.main(["--check", "--page", str(page)]) == 1
    assert ip.main(["--page", str(page)]) == 0
    assert ip.main(["--check", "--page", str(page)]) == 0


@pytest.mark.parametrize("name", sorted(ip.PLANS))
def test_every_section_of_a_planned_notebook_is_shown_or_skipped(name: str) -> None:
    measured = dp.load_measured()
    for block in ip.PLANS[name].blocks:
        if isinstance(block, dp.Lesson):
            row = dp.row(block, measured)
            titles = [s.title for s in dp.sections(dp.notebook_path(block.stem))]
            assert sorted(row.shown + row.skipped) == sorted(titles)


def test_plans_keep_their_limits() -> None:
    measured = dp.load_measured()
    for plan in ip.PLANS.values():
        total = sum(dp.row(b, measured).minutes for b in plan.blocks)
        assert total <= plan.limit, plan.name
    assert ip.CORE.limit == 90


def test_a_plan_naming_a_missing_section_fails() -> None:
    plan = dp.Plan("p", (dp.Lesson("01_max_is_not_a_watermark", ("No such section",)),), 90)
    with pytest.raises(dp.PlanError, match="No such section"):
        dp.render_plan(plan, dp.load_measured())


def test_a_plan_over_its_limit_fails() -> None:
    plan = dp.Plan("p", (dp.Lesson("04_late_tick_rewinds"),), 5)
    with pytest.raises(dp.PlanError, match="more than its 5"):
        dp.render_plan(plan, dp.load_measured())


def test_sections_count_prose_and_code(tmp_path: Path) -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Title\n", "one two three"], "metadata": {}},
            {"cell_type": "code", "source": ["x = 1\n", "\n", "y = 2"], "metadata": {}},
            {"cell_type": "markdown", "source": ["## Try it\n", "four five"], "metadata": {}},
            {"cell_type": "code", "source": ["# ## not a heading"], "metadata": {}},
            {"cell_type": "markdown", "source": ["## Try it\n", "six"], "metadata": {}},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps(nb))
    got = [(s.title, s.words, s.code_lines) for s in dp.sections(path)]
    assert got == [("(opening)", 5, 2), ("Try it", 4, 1), ("Try it (2)", 3, 0)]


def test_fill_refuses_unknown_and_missing_blocks() -> None:
    page = "a\n<!-- BEGIN generated: x -->\nold\n<!-- END generated: x -->\n"
    assert dp.fill(page, {"x": "new\n"}) == page.replace("old", "new")
    with pytest.raises(dp.PlanError, match="nothing renders"):
        dp.fill(page, {})
    with pytest.raises(dp.PlanError, match="lacks"):
        dp.fill(page, {"x": "n\n", "y": "m\n"})


def test_measured_values_are_merged_and_written_beside(tmp_path: Path) -> None:
    path = tmp_path / "measured.json"
    dp.save_measured("kernel_seconds", {"01": 1.234}, path)
    dp.save_measured("exercise_minutes", {"a_ex": 4.66}, path)
    assert dp.load_measured(path) == {
        "kernel_seconds": {"01": 1.2},
        "exercise_minutes": {"a_ex": 4.7},
    }


TIME = re.compile(r"\*\*Time:\*\* about (\d+) minutes")


@pytest.mark.parametrize(
    "path", sorted((dp.REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem[:3]
)
def test_each_notebook_opens_with_its_time_at_the_page_s_pace(path: Path) -> None:
    """The minutes a notebook's first cell states are its sections' minutes at the pace the
    instructor page assumes, within one (a rounding either way)."""
    first = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
    said = TIME.search(first)
    assert said, f"{path.name}: the first cell does not say '**Time:** about N minutes'"
    computed = sum(s.minutes for s in dp.sections(path))
    assert abs(int(said[1]) - computed) <= 1, (path.name, int(said[1]), round(computed, 1))


@pytest.mark.parametrize(
    "path", sorted((dp.REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem[:3]
)
def test_no_notebook_has_more_than_4000_words_of_prose(path: Path) -> None:
    """A notebook a reader can finish in one sitting: its markdown, whitespace-separated."""
    words = sum(s.words for s in dp.sections(path))
    assert words <= 4000, (path.name, words)


def test_the_readme_says_what_it_teaches_first_in_at_most_1500_words() -> None:
    readme = (dp.REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.split()) <= 1500
    assert readme.index("## What it teaches") < readme.index("make lab")
