"""Where the workbook's folders are: the checkout that holds `labkit/`, and the workshop folder
`make lab` opens. One home, so no module works the path out again."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The folder that holds labkit/: the checkout (or the site-packages folder of an install)."""
WORKSHOP = REPO / "workshop"
"""The git-ignored folder `make lab` makes and opens (`python -m labkit workspace`)."""
