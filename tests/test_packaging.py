"""environment.yml and pyproject.toml must list the same dependencies."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pyproject_deps() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = list(data["project"]["dependencies"])
    for extra in data["project"]["optional-dependencies"].values():
        reqs += extra
    return {_name(r): r.replace(" ", "") for r in reqs}


def environment_deps() -> dict[str, str]:
    deps = {}
    text = (ROOT / "environment.yml").read_text()
    for line in text.split("\ndependencies:\n", 1)[1].splitlines():
        # conda packages at two spaces; pip-only ones in the `- pip:` list at six
        m = re.match(r"^(?:\s{2}|\s{6})- ([A-Za-z0-9_.\-]+[^#]*?)\s*(#.*)?$", line)
        if m and not line.strip().startswith("- pip:"):
            req = m.group(1).strip()
            name = _name(req)
            if name in {"python", "pip", "-e"}:
                continue
            deps[name] = req.replace(" ", "")
    return deps


def test_environment_yml_matches_pyproject() -> None:
    assert environment_deps() == pyproject_deps()


def test_readme_opens_with_two_setup_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
