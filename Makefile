# Two commands do everything on a fresh machine (Python 3.11+ and make):
#   make lab    open the workbook in JupyterLab (builds the figures instead when there is no screen)
#   make test   lint + every test (unit, property, notebooks, exercises, browser)
#   make test-fast  the edit-test loop: no browser, PostgreSQL, notebooks or slow tests
# Each installs only what it needs into .venv: `lab` the reader's install (the package and the
# `notebooks` extra), `test` adds the `dev` extra, `site` the `site` extra.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LAB_STAMP := $(VENV)/.installed-lab
SITE_STAMP := $(VENV)/.installed-site
SITE_OUT ?= build/site
# uv installs the packages: a fresh clone's .venv with the test stack took 7 s here (uv's cache
# empty or not) where pip took 16 s. pip installs uv itself into .venv (nothing global; pinned
# to a minor release, whose command line this file uses): the pip of $(PYTHON) where it has one
# (`pip --python`), so .venv gets no pip of its own, which ensurepip took 3-8 s to install and
# compile here; else a pip ensurepip puts into .venv. uv reads the system's certificates
# (--native-tls) but not pip's configuration: where pip is set up for a mirror or an index of
# its own, `make INSTALLER=pip ...` installs with pip (seeded into .venv). Neither writes
# bytecode at install time (about 130 MB for the reader's install): Python writes it on first
# import, for the modules that run.
UV := $(VENV)/bin/uv
UV_SPEC := uv>=0.13,<0.14
VENV_PIP := $(VENV)/bin/pip
# Python 3.11's ensurepip also seeds setuptools (10 MB), which nothing here runs (3.12+ seeds none).
SEED_PIP := $(PY) -m ensurepip --default-pip >/dev/null && $(PY) -m pip uninstall -q -y setuptools
INSTALLER ?= uv
ifeq ($(INSTALLER),pip)
INSTALL_TOOL := $(VENV_PIP)
INSTALL := $(PY) -m pip install --quiet --no-compile
else
INSTALL_TOOL := $(UV)
INSTALL := $(UV) pip install --quiet --native-tls --python $(PY)
endif
PORT ?= 8888
# JupyterLab refuses to run as root (containers, CI) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
# Open on the first notebook rather than an empty launcher.
START_AT := --LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb
# pytest-xdist: two workers per core, since many tests wait (on kernels, servers, sleeping
# writers) rather than compute: on 2 cores 4 workers run `make test`'s pytest in 174 s, 3 in
# 183-186 s, 5 in 182 s. Measured on 2 cores only; each worker starts its own PostgreSQL
# server, so on a big machine set JOBS lower. JOBS=0: no workers.
# Which tests share a worker is set in tests/conftest.py (pytest_xdist_make_scheduler).
CORES := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
JOBS ?= $(shell echo $$(( $(CORES) * 2 )))
PARALLEL := -n $(JOBS)
FAST := not browser and not postgres and not notebooks and not slow
# A test run starts dozens of Python processes (workers, kernels, JupyterLab, crash children):
# let them cache compiled modules (__pycache__, git-ignored) even where the environment sets
# PYTHONDONTWRITEBYTECODE, so each one does not compile labkit and the tests again.
test test-fast: export PYTHONDONTWRITEBYTECODE :=

.PHONY: lab serve figures test test-fast lint exercises bench bench-smoke strip site site-instructor site-test clean

$(PY):
	$(PYTHON) -m venv --without-pip $(VENV)

$(UV): | $(PY)
	@if $(PYTHON) -m pip --python $(PY) --version >/dev/null 2>&1; then \
		echo "$(PYTHON) -m pip --python $(PY) install --quiet --no-compile '$(UV_SPEC)'"; \
		$(PYTHON) -m pip --python $(PY) install --quiet --no-compile '$(UV_SPEC)'; \
	else \
		$(SEED_PIP) && $(PY) -m pip install --quiet --no-compile '$(UV_SPEC)'; \
	fi

$(VENV_PIP): | $(PY)
	$(SEED_PIP)

# The reader's install: what reading and running the notebooks needs, no test or site tools.
$(LAB_STAMP): pyproject.toml | $(INSTALL_TOOL)
	$(INSTALL) -e '.[notebooks]'
	@touch $(LAB_STAMP)

# The test stack on top of the reader's install (one uv run installs both).
$(STAMP): pyproject.toml | $(INSTALL_TOOL)
	$(INSTALL) -e '.[notebooks,dev]'
	@touch $(LAB_STAMP) $(STAMP)

# The site tools on top of the reader's install (one uv run installs both).
$(SITE_STAMP): pyproject.toml | $(INSTALL_TOOL)
	$(INSTALL) -e '.[notebooks,site]'
	@touch $(LAB_STAMP) $(SITE_STAMP)

# With a screen, JupyterLab opens on workshop/ (`python -m labkit workspace`: the lessons, the
# student exercises and the docs they link to, laid out as in the repository, git-ignored, files
# already there kept), so every lesson link works and the tracked notebooks never change.
# Without a screen (no DISPLAY/WAYLAND_DISPLAY, e.g. a server or CI) the main job is the figure
# build; `make serve` starts the server headless anyway.
lab: $(LAB_STAMP)
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
		$(PY) -m labkit workspace && \
		$(PY) -m jupyterlab $(ROOT_FLAG) --notebook-dir=workshop --port=$(PORT) $(START_AT); \
	else \
		echo "no screen found: building the docs figures (use 'make serve' for a headless JupyterLab)"; \
		$(PY) -m labkit figures; \
	fi

serve: $(LAB_STAMP)
	$(PY) -m labkit workspace
	$(PY) -m jupyterlab $(ROOT_FLAG) --no-browser --ip=127.0.0.1 --port=$(PORT) --notebook-dir=workshop $(START_AT)

figures: $(LAB_STAMP)
	$(PY) -m labkit figures

# mypy reads its settings (labkit/, Python 3.11) from [tool.mypy] in pyproject.toml.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy

# Every run ends with the CPU_REPORT test files that took the most CPU seconds (tests/cpu_report.py),
# so growth shows where it happens; CPU_REPORT=0 leaves the table out. PYTEST_ARGS reach pytest.
CPU_REPORT ?= 15
test: lint
	$(PY) -m pytest $(PARALLEL) --cpu-report=$(CPU_REPORT) $(PYTEST_ARGS)

# The edit-test loop: every test but the browser, PostgreSQL, notebook and slow ones (no ruff).
# These tests compute rather than wait, so one worker per core: a third only adds its own
# start-up and collection (CPU 94 s on 3 workers, 84 s on 2, back to back at the same load).
FAST_JOBS ?= $(CORES)
test-fast: $(STAMP)
	$(PY) -m pytest -n $(FAST_JOBS) -m "$(FAST)"

exercises: $(LAB_STAMP)
	$(PY) -m labkit exercises

bench: $(LAB_STAMP)
	$(PY) -m benchmarks

bench-smoke: $(LAB_STAMP)
	$(PY) -m benchmarks --smoke

# nbstripout's stripping, written by replace (CONTRIBUTING: "Libraries we use, and why").
strip: $(LAB_STAMP)
	$(PY) -m labkit strip notebooks exercises/solutions

# The static site of the executed workbook, into $(SITE_OUT)/html (how and why: CONTRIBUTING, "The website").
# `site` is the student edition: no instructor page, no worked answer, no link to either.
# `site-instructor` adds both (into build/site-instructor unless SITE_OUT is given).
site: $(SITE_STAMP)
	$(PY) site/build.py --out $(SITE_OUT)

site-instructor: SITE_OUT := build/site-instructor
site-instructor: $(SITE_STAMP)
	$(PY) site/build.py --instructor --out $(SITE_OUT)

# The site's crawl in headless Chromium (needs the test stack and a built site).
site-test: $(STAMP) $(SITE_STAMP)
	$(PY) -m pytest -m site tests/site

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis artifacts build/site build/site-instructor
