"""`--cpu-report=N` names the test files that took the most CPU (`tests/cpu_report.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent


def _suite(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import cpu_report

def pytest_addoption(parser):
    cpu_report.addoption(parser)

def pytest_configure(config):
    cpu_report.configure(config)
"""
    )
    pytester.makepyfile(
        test_busy="""
import time

def test_spins():
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
""",
        test_idle="def test_nothing():\n    pass\n",
    )


def test_the_report_ranks_files_by_their_cpu_seconds(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    result = pytester.runpytest("--cpu-report=5")
    result.assert_outcomes(passed=2)
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "CPU seconds per test file" in line)
    assert "(top 2 of 2)" in lines[start]  # not "top 5": there are two files
    rows = [line.split() for line in lines[start + 1 :] if line.strip()][:3]
    assert [r[2] for r in rows] == ["test_busy.py", "test_idle.py", "all"]
    assert float(rows[0][0]) >= 0.3 > float(rows[1][0])


def test_without_the_option_there_is_no_report(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)
    assert "CPU seconds per test file" not in result.stdout.str()


def test_make_test_prints_the_report() -> None:
    """`make test` (and so CI) ends with the table, so growth shows in every run."""
    makefile = (HERE.parent / "Makefile").read_text()
    recipe = makefile.split("\ntest: lint\n", 1)[1].split("\n\n", 1)[0]
    assert "--cpu-report=$(CPU_REPORT)" in recipe
    assert "\nCPU_REPORT ?= 15\n" in makefile
