"""The docs figure build: `python -m labkit figures [--out DIR]`.

Each figure is drawn by the same `labkit.plots` function a notebook calls, from data labkit
computes with fixed seeds. A manifest records a fingerprint of each figure's data and the
bytes' hashes, so a test can tell a figure that is out of date with the code.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from labkit.docs.figure_specs import SPECS, FigureSpec

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "docs" / "figures"
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


def build_all(out: Path = DEFAULT_OUT, names: list[str] | None = None) -> dict[str, Any]:
    """Regenerate every figure as SVG + PNG into `out`, printing a line each; write the manifest."""
    from labkit.files import replace_file
    from labkit.plots.style import save_figure

    specs = [s for s in registry() if names is None or s.name in names]
    prepare_output_dir(out)
    manifest: dict[str, Any] = {"matplotlib": metadata.version("matplotlib"), "figures": {}}
    for i, spec in enumerate(specs, 1):
        fig, data = spec.build()
        paths = save_figure(fig, out / spec.name)
        manifest["figures"][spec.name] = {
            "caption": spec.caption,
            "data": data_fingerprint(data),
            **{p.suffix[1:]: _sha(p) for p in paths},
        }
        print(f"[{i}/{len(specs)}] {spec.name}: " + ", ".join(str(p) for p in paths), flush=True)
    replace_file(out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
