"""CONTRIBUTING.md speaks of the project alone: relative paths that exist, linked from README."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "CONTRIBUTING.md"


def test_readme_links_the_guide() -> None:
    assert "](CONTRIBUTING.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert not (ROOT / "docs" / "CONVENTIONS.md").exists()


def test_guide_names_only_paths_inside_the_repository() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    assert not re.search(r"(?<![\w.])/(work|home|root|tmp|usr)/", text)
    paths = re.findall(
        r"`((?:labkit|data|tests|notebooks|exercises|benchmarks|docs|harness)/[^`*]*)`", text
    )
    assert paths, "the guide should point at the layout"
    missing = [p for p in paths if not (ROOT / p.split(" ")[0]).exists()]
    assert not missing, missing
