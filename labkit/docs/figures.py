"""The docs figure build: `python -m labkit figures [NAME ...] [--out DIR] [options]`.

Each figure is drawn by the same `labkit.plots` function a notebook calls, from data labkit
computes with fixed seeds. A manifest records a fingerprint of each figure's data and the
bytes' hashes, so a test can tell a figure that is out of date with the code.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from labkit.docs.figure_specs import SPECS, FigureSpec
from labkit.paths import REPO

if TYPE_CHECKING:
    from labkit.plots.saved import SavedFigure

DEFAULT_OUT = REPO / "docs" / "figures"
MANIFEST = "MANIFEST.json"


class FigureOutputError(ValueError):
    """An output directory the figures cannot be written to; names the path and the problem."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        super().__init__(f"{path}: {problem}")


def data_fingerprint(data: Any) -> str:
    """A stable hash of the data a figure was drawn from (DataFrames hash their CSV)."""
    if hasattr(data, "to_csv"):
        text = data.to_csv(index=True, float_format="%.9g")
    else:
        text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def registry() -> list[FigureSpec]:
    """Every docs figure, in the order the docs page shows them."""
    return list(SPECS)


def prepare_output_dir(out: Path) -> None:
    """Create `out` if needed and prove a file can be written there, before drawing anything."""
    if out.exists() and not out.is_dir():
        raise FigureOutputError(out, "exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FigureOutputError(out, f"cannot create the directory: {exc.strerror}") from exc
    try:
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise FigureOutputError(out, f"cannot write in this directory: {exc.strerror}") from exc


FORMATS = ("svg", "png")


@dataclass(frozen=True)
class BuildRequest:
    """What to build: docs figures by name (None: all of them), saved specs, and how."""

    names: tuple[str, ...] | None = None
    specs: tuple[Path, ...] = ()
    formats: tuple[str, ...] = FORMATS
    dpi: int = 100
    theme: str = "light"
    scenario: Path | None = None


class FigureRequestError(ValueError):
    """A figure name, format, theme, resolution, scenario or spec that cannot be built."""


@dataclass(frozen=True)
class _Job:
    name: str
    caption: str
    draw: Callable[[], tuple[Figure, Any]]


def _jobs(request: BuildRequest) -> list[_Job]:
    """Check every part of `request` and read its files, before anything is drawn or written."""
    from labkit.frontier.scenario_format import ScenarioError, load_scenario
    from labkit.plots.saved import SpecError, load_spec
    from labkit.plots.style import THEMES

    known = {s.name: s for s in registry()}
    unknown = [n for n in request.names or () if n not in known]
    if unknown:
        raise FigureRequestError(f"no figure named {unknown[0]!r} (see --list)")
    bad = [f for f in request.formats if f not in FORMATS]
    if bad or not request.formats:
        raise FigureRequestError(f"format {bad[0] if bad else ''!r}: choose from {FORMATS}")
    if request.theme not in THEMES:
        raise FigureRequestError(f"theme {request.theme!r}: choose from {tuple(THEMES)}")
    if not 10 <= request.dpi <= 1200:
        raise FigureRequestError(f"dpi {request.dpi}: choose from 10 to 1200")
    try:
        scenario = load_scenario(request.scenario) if request.scenario else None
    except ScenarioError as exc:
        raise FigureRequestError(str(exc)) from None
    chosen = [s for s in registry() if request.names is None or s.name in request.names]
    jobs = [_Job(s.name, s.caption, functools.partial(s.draw, scenario)) for s in chosen]
    for path in request.specs:
        try:
            saved = load_spec(path)
        except SpecError as exc:
            raise FigureRequestError(str(exc)) from None
        draw = functools.partial(_draw_spec, saved)
        jobs.append(_Job(path.stem, f"saved {saved.figure} figure ({path.name})", draw))
    names = [j.name for j in jobs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FigureRequestError(f"two figures would be written as {twice[0]!r}")
    return jobs


def _draw_spec(saved: SavedFigure) -> tuple[Figure, Any]:
    """A saved figure redrawn, and its state as plain data for the manifest's fingerprint."""
    import msgspec

    from labkit.plots.saved import draw_saved

    return draw_saved(saved), {"figure": saved.figure, "state": msgspec.to_builtins(saved.state)}


def spec_files(folder: Path) -> tuple[Path, ...]:
    """The saved figure specs in `folder` (every `*.json`, by name); none if it does not exist."""
    return tuple(sorted(folder.glob("*.json"))) if folder.is_dir() else ()


def build_all(
    out: Path = DEFAULT_OUT, names: list[str] | None = None, request: BuildRequest | None = None
) -> dict[str, Any]:
    """Build the requested figures into `out`, printing a line each, and record them in the
    manifest (theme, dpi, formats per figure); a partial build keeps the other entries."""
    from labkit.files import replace_file
    from labkit.plots.style import save_figure, use_theme

    request = request or BuildRequest(names=tuple(names) if names is not None else None)
    jobs = _jobs(request)
    prepare_output_dir(out)
    manifest: dict[str, Any] = {"matplotlib": metadata.version("matplotlib"), "figures": {}}
    if request.names is not None:  # a partial build keeps the other figures' entries
        manifest["figures"] = _earlier_entries(out / MANIFEST)
    for i, job in enumerate(jobs, 1):
        with use_theme(request.theme):
            fig, data = job.draw()
            paths = save_figure(fig, out / job.name, request.formats, dpi=request.dpi)
        manifest["figures"][job.name] = {
            "caption": job.caption,
            "data": data_fingerprint(data),
            "theme": request.theme,
            "dpi": request.dpi,
            "formats": list(request.formats),
            **{p.suffix[1:]: _sha(p) for p in paths},
        }
        print(f"[{i}/{len(jobs)}] {job.name}: " + ", ".join(str(p) for p in paths), flush=True)
    replace_file(out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _earlier_entries(path: Path) -> dict[str, Any]:
    """The figure entries of an earlier manifest in the same folder (none if unreadable)."""
    try:
        entries = json.loads(path.read_text())["figures"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return entries if isinstance(entries, dict) else {}


def figure_list() -> list[str]:
    """One line per docs figure: its name and caption (`figures --list`)."""
    width = max(len(s.name) for s in registry())
    return [f"{s.name:<{width}}  {s.caption}" for s in registry()]


def rebuild_table() -> str:
    """The figures page's table: each figure, its caption and the command that rebuilds it."""
    rows = [
        f"| `{s.name}` | {s.caption} | `python -m labkit figures {s.name}` |" for s in registry()
    ]
    return "\n".join(["| figure | shows | rebuild it |", "| --- | --- | --- |", *rows]) + "\n"
