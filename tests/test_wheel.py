"""A built wheel stands on its own: installed outside the repository, it finds its scenarios."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import labkit

ROOT = Path(__file__).resolve().parent.parent
# Python on Windows cannot start without SYSTEMROOT in its environment.
_WINDOWS_ROOT = {"SYSTEMROOT": os.environ["SYSTEMROOT"]} if "SYSTEMROOT" in os.environ else {}
OFFLINE = ("No matching distribution", "Could not find a version", "NewConnectionError")
PROBE = """
import labkit, labkit.frontier.scenario_format as fmt, labkit.frontier.scenarios as sc
print(labkit.__file__)
print(fmt.DATA_DIR)
print(sorted(p.stem for p in fmt.list_scenarios()))
print(sc.run_scenario(fmt.load_scenario("seed")).iloc[-1]["frontier"])
"""


def copy_project(dest: Path) -> Path:
    """The files a wheel is built from, symlinks kept (labkit/scenario_files is one)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "labkit", dest / "labkit", symlinks=True, ignore=ignore)
    shutil.copytree(ROOT / "data" / "scenarios", dest / "data" / "scenarios")
    return dest


@pytest.mark.slow
def test_wheel_ships_the_scenarios_and_loads_them_outside_the_repo(tmp_path: Path) -> None:
    project = copy_project((tmp_path / "project").resolve())
    assert (project / "labkit" / "scenario_files").is_symlink()
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(project),
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "dist"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode and any(s in build.stderr for s in OFFLINE):
        pytest.skip("pip cannot fetch the build backend (offline)")
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    # pyproject.toml takes the version from labkit.__version__, its one place
    assert wheel.name.startswith(f"watermark_workbook-{labkit.__version__}-"), wheel.name
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        zf.extractall(site)
    shipped = sorted(n for n in names if n.startswith("labkit/scenario_files/"))
    bundled = sorted(p.name for p in (ROOT / "data" / "scenarios").glob("*.json"))
    assert [n.rsplit("/", 1)[1] for n in shipped] == bundled
    shutil.rmtree(project)  # nothing of the source tree is left to fall back on
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=False,
        cwd=elsewhere,
        env={"PYTHONPATH": str(site), "PATH": os.defpath, **_WINDOWS_ROOT},
    )
    assert run.returncode == 0, run.stderr
    module, data_dir, stems, frontier = run.stdout.splitlines()
    assert (
        Path(module).is_relative_to(site) and Path(data_dir) == site / "labkit" / "scenario_files"
    )
    assert stems == repr([Path(n).stem for n in bundled])
    assert frontier == "7"
