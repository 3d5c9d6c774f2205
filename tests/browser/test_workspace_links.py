"""`make lab`'s workshop folder in JupyterLab: a lesson's links to its exercise and to the
glossary open their targets (the lab these tests share serves that folder: `copy_workbook`)."""

from __future__ import annotations

import pytest

LINKS = [
    ("notebooks/01_max_is_not_a_watermark.ipynb", "ex01_max_and_orphans.ipynb"),
    ("notebooks/00_start_here.ipynb", "glossary.md"),
]


@pytest.mark.parametrize(("lesson", "target"), LINKS)
def test_a_lesson_link_opens_its_target(lab, lesson: str, target: str) -> None:
    nb = lab.open(lesson)
    link = nb.panel.locator(f'.jp-RenderedMarkdown a[href*="{target}"]').first
    link.scroll_into_view_if_needed()
    link.click()
    tab = lab.page.locator(".lm-TabBar-tab", has_text=target)
    tab.first.wait_for(state="visible", timeout=30_000)
    assert not lab.page.locator(".jp-Dialog", has_text="not found").count()
