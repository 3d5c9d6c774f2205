"""The notebooks the browser tests Run All anyway show what they set out to show: the same
checks as tests/test_notebooks.py, on the outputs JupyterLab holds right after Run All. Where
this test is collected and Chromium is there, tests/conftest.py leaves those notebooks out of
the headless runs, so each is run once per `make test`, not twice."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from notebook_results import check_shows_its_result

from harness.nbrun import starts_postgres

from .test_rerun import NB08
from .test_widgets_fit import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[2]

RUNS = [
    pytest.param(
        path,
        id=path.split("/")[-1].split("_")[0],
        marks=[pytest.mark.notebooks]
        + ([pytest.mark.postgres] if starts_postgres(ROOT / path) else []),
    )
    for path in (*NOTEBOOKS, NB08)  # every notebook a browser test Run Alls
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", RUNS)
def test_run_all_shows_its_result(lab, path: str) -> None:
    lab.notebook(path)
    held = lab.tab.run_all_outputs[path]
    # JupyterLab writes absent keys as null (a markdown cell's "attachments"), which nbformat's
    # reader refuses; the reader also joins outputs stored as lists of lines
    cells = [{k: v for k, v in cell.items() if v is not None} for cell in held["cells"]]
    ran = nbformat.reads(json.dumps({**held, "cells": cells}), as_version=4)
    check_shows_its_result(path.split("/")[-1].removesuffix(".ipynb"), ran)
