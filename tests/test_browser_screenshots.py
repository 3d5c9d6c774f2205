"""The browser tests' screenshots of passing tests are taken only when asked for
(LABKIT_SCREENSHOTS=1): the helper then saves the cell into artifacts/browser/, and otherwise
never touches the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import jlab


class Cell:
    """A stand-in for a Playwright locator: records what it was asked to save."""

    def __init__(self) -> None:
        self.saved: list[str] = []

    def screenshot(self, path: str, timeout: float) -> None:
        self.saved.append(path)


@pytest.mark.parametrize(
    ("value", "taken"), [(None, False), ("0", False), ("false", False), ("no", False), ("1", True)]
)
def test_screenshots_only_when_asked_for(value, taken, monkeypatch, tmp_path: Path) -> None:
    if value is None:
        monkeypatch.delenv("LABKIT_SCREENSHOTS", raising=False)
    else:
        monkeypatch.setenv("LABKIT_SCREENSHOTS", value)
    monkeypatch.setattr(jlab, "ARTIFACTS", tmp_path)
    cell = Cell()
    path = jlab.screenshot(cell, "05-x")  # type: ignore[arg-type]
    assert cell.saved == ([str(tmp_path / "05-x.png")] if taken else [])
    assert path == (tmp_path / "05-x.png" if taken else None)
