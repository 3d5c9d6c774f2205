"""Widget for notebook 10: pick a file (a sample from data/audit/ or a path of your own) and an
audit kind, see the verdict lines and the figure.

The audits are `labkit.audit`'s own (`audit_log`, `audit_catalog`, `audit_loop`) and the figure
is `labkit.plots.audit.audit_figure`; bad input is the audit's one line (`InputError`,
`UsageError`), shown in red, never a traceback.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

import ipywidgets as widgets
from matplotlib.figure import Figure

from labkit.audit.catalog import EVENT_COLUMNS, audit_catalog, parse_events
from labkit.audit.findings import Report, render_text
from labkit.audit.inputs import InputError, Source, UsageError, read_rows
from labkit.audit.log import DEFAULT_TERMINAL, audit_log
from labkit.audit.loop import audit_loop
from labkit.paths import REPO
from labkit.plots.audit import audit_figure
from labkit.plots.style import png_bytes
from labkit.widgets.common import classed

SAMPLES_DIR = REPO / "data" / "audit"
KINDS = ("log", "catalog", "loop")
OWN = "(your own: type below)"
# 90 dpi draws the figures' smallest text (8 pt) at 10 px; the image scrolls, never shrinks.
DPI = 90
FIGURE_HEIGHT = "400px"  # a box that scrolls on its own stays within half the window
VERDICT_HEIGHT = "150px"
LOOP_N = 4
_WRAP = widgets.Layout(flex_flow="row wrap")
_PRE = "margin:2px 0;font-size:12px;white-space:pre-wrap"  # long lines wrap, never cut
READS_DRAWN = 20_000  # head reads drawn per observer; every fall is drawn whatever this


@dataclass(frozen=True)
class Sample:
    """A sample of data/audit/: its audit kind, its file and (for `log`) its checkpoints."""

    kind: str
    path: Path
    checkpoints: Path | None = None


SAMPLES: dict[str, Sample] = {
    f"{kind}: {twin}": Sample(
        kind,
        SAMPLES_DIR / (f"log_{twin}_status.csv" if kind == "log" else f"catalog_{twin}.jsonl"),
        SAMPLES_DIR / f"log_{twin}_checkpoints.csv" if kind == "log" else None,
    )
    for kind in ("log", "catalog")
    for twin in ("clean", "broken")
}


def run_audit(
    kind: str,
    target: str | Path,
    checkpoints: str | Path | None = None,
    *,
    terminal: tuple[str, ...] = DEFAULT_TERMINAL,
    n: int = LOOP_N,
) -> tuple[Report, Figure]:
    """One audit and its figure: `log` (status file `target`, its `checkpoints`), `catalog`
    (event log `target`) or `loop` (`target` = MODULE:FACTORY, arrival orders up to `n`).
    Raises `InputError` or `UsageError` (one line) on bad input."""
    if kind == "log":
        if not checkpoints:
            raise UsageError("audit log needs a checkpoint file beside the status file")
        report = audit_log(Source(Path(target)), Source(Path(checkpoints)), terminal=terminal)
    elif kind == "catalog":
        report = audit_catalog(Source(Path(target)))
    elif kind == "loop":
        report = audit_loop(str(target), n=n)
    else:
        raise UsageError(f"audit kind {kind!r}: one of {', '.join(KINDS)}")
    reads = head_reads(Path(target)) if kind == "catalog" else None
    return report, audit_figure(report, reads)


def head_reads(path: Path, most: int = READS_DRAWN) -> list[tuple[str, float, int]]:
    """Each observer's head reads in event log `path` as (observer, at, version), the first
    `most` of each: what the catalog figure draws beside the falls."""
    kept: dict[str, int] = {}
    reads = []
    rows = read_rows(Source(path), EVENT_COLUMNS, order_by="at")
    for e in parse_events(rows, str(path)):
        if e.event == "head" and e.version is not None and kept.get(e.observer, 0) < most:
            kept[e.observer] = kept.get(e.observer, 0) + 1
            reads.append((e.observer, e.at, e.version))
    return reads


class AuditApp:
    """A sample or your own file, an audit kind, a button; the verdict and the figure below.

    `ui` is the container to display; `report` the last audit's report (None before one or
    after bad input); `message` the text shown; `last_png` the image shown.
    """

    def __init__(self, sample: str = "log: broken") -> None:
        if sample not in SAMPLES:
            raise ValueError(f"sample {sample!r}: one of {', '.join(SAMPLES)}")
        self.report: Report | None = None
        self.message = ""
        self.last_png = b""
        self.sample = classed(
            widgets.Dropdown(
                options=[*SAMPLES, OWN],
                value=sample,
                description="file",
                layout=widgets.Layout(width="300px"),
            ),
            "wb-audit-sample",
        )
        self.kind = classed(
            widgets.Dropdown(
                options=KINDS,
                value=SAMPLES[sample].kind,
                description="audit",
                layout=widgets.Layout(width="190px"),
            ),
            "wb-audit-kind",
        )
        wide = widgets.Layout(width="440px")
        self.path = classed(
            widgets.Text(
                placeholder="your file, or MODULE:FACTORY for loop",
                description="path",
                layout=wide,
            ),
            "wb-audit-path",
        )
        self.checkpoints = classed(
            widgets.Text(
                placeholder="your checkpoint file (audit log only)",
                description="checkpoints",
                style={"description_width": "initial"},
                layout=wide,
            ),
            "wb-audit-checkpoints",
        )
        self.button = classed(
            widgets.Button(description="audit", button_style="primary"), "wb-audit-run"
        )
        self.verdict = classed(
            widgets.HTML(layout=widgets.Layout(max_height=VERDICT_HEIGHT, overflow="auto")),
            "wb-audit-verdict",
        )
        # The box inside scrolls; the widget keeps the app's width whatever the image's.
        self.figure = classed(
            widgets.HTML(layout=widgets.Layout(overflow="hidden")),
            "wb-audit-figure",
        )
        self.sample.observe(self._picked, names="value")
        self.button.on_click(lambda _b: self.update())
        self.ui = classed(
            widgets.VBox(
                [
                    widgets.HBox([self.sample, self.kind, self.button], layout=_WRAP),
                    widgets.HBox([self.path, self.checkpoints], layout=_WRAP),
                    self.verdict,
                    self.figure,
                ]
            ),
            "wb-audit-app",
        )
        self._sync_kind()
        self.update()

    def _picked(self, _change: object = None) -> None:
        self._sync_kind()
        self.update()

    def _sync_kind(self) -> None:
        """A sample has its own audit kind: the menu shows it, greyed, and says why."""
        sample = self.sample.value in SAMPLES
        if sample:
            self.kind.value = SAMPLES[self.sample.value].kind
        self.kind.disabled = sample
        self.kind.tooltip = (
            "a sample has its own audit kind; choose your own file to pick one" if sample else ""
        )

    def _inputs(self) -> tuple[str, str | Path, str | Path | None]:
        """What to audit: the sample chosen, or the boxes when the file is your own."""
        if self.sample.value in SAMPLES:
            s = SAMPLES[self.sample.value]
            return s.kind, s.path, s.checkpoints
        target = self.path.value.strip()
        if not target:
            raise UsageError("type a path (or MODULE:FACTORY for the loop audit) in the box")
        return self.kind.value, target, self.checkpoints.value.strip() or None

    def update(self) -> None:
        """Run the audit chosen and show its verdict lines and figure (or the one-line error)."""
        try:
            kind, target, checkpoints = self._inputs()
            report, fig = run_audit(kind, target, checkpoints)
        except (InputError, UsageError) as exc:
            self.report, self.message = None, str(exc)
            self.verdict.value = (
                f"<span style='color:#b00020'>&#9888; {html.escape(self.message)}</span>"
            )
            self.figure.value = ""
            self.last_png = b""
            return
        self.report = report
        self.message = render_text(report)
        colour = "#2e8b57" if report.clean else "#b00020"
        verdict = f"exit {report.exit_code}: " + ("clean" if report.clean else "findings")
        self.verdict.value = (
            f"<b style='color:{colour}'>{verdict}</b>"
            f"<pre style='{_PRE}'>{html.escape(self.message)}</pre>"
        )
        self.last_png = png_bytes(fig, dpi=DPI)
        self.figure.value = unshrunk(self.last_png, self.alt(report))

    @staticmethod
    def alt(report: Report) -> str:
        """The figure's text alternative: which audit, and its verdict line."""
        return f"figure of the {report.audit} audit: " + render_text(report).splitlines()[-1]


def unshrunk(png: bytes, alt: str) -> str:
    """HTML showing `png` at its own size in a box that scrolls by itself: a shrunk image would
    draw the figures' smallest text under 10 px, and a wide one must not widen the app."""
    data = base64.b64encode(png).decode("ascii")
    return (
        f"<div style='overflow:auto;max-height:{FIGURE_HEIGHT};width:100%'>"
        f"<img style='max-width:none' alt='{html.escape(alt, quote=True)}' "
        f"src='data:image/png;base64,{data}'/></div>"
    )
