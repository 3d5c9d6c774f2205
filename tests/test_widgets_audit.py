"""Notebook 10's audit widget driven without a browser, and the exports it and the notebook
read (`labkit.audit.samples.export_workbook_runs`, `export_design`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.audit.catalog import audit_catalog
from labkit.audit.findings import render_text
from labkit.audit.inputs import Source
from labkit.audit.log import audit_log
from labkit.audit.samples import export_design, export_workbook_runs, write_jsonl
from labkit.designs.arrival_orders import run_schedule
from labkit.designs.schedule_builder import PRESETS
from labkit.widgets import audit as w


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return export_workbook_runs(tmp_path_factory.mktemp("runs"))


def test_the_app_opens_on_the_broken_log_with_verdict_and_figure() -> None:
    app = w.AuditApp()
    assert app.report is not None and app.report.exit_code == 1
    assert app.message == render_text(app.report)
    assert "orphan: shard us id 104" in app.message and "chain_gap: shard us" in app.message
    assert "exit 1: findings" in app.verdict.value
    assert app.last_png.startswith(b"\x89PNG") and "data:image/png;base64," in app.figure.value
    assert "alt='figure of the log audit: audit log: 1 chain_gap" in app.figure.value
    assert "wb-audit-app" in app.ui._dom_classes


@pytest.mark.parametrize("name", list(w.SAMPLES))
def test_each_sample_gets_its_twins_verdict(name: str) -> None:
    app = w.AuditApp(sample=name)
    assert app.kind.value == w.SAMPLES[name].kind
    assert app.report is not None and app.report.clean == name.endswith("clean")
    assert ("exit 0: clean" in app.verdict.value) == name.endswith("clean")


def test_picking_a_sample_reruns_and_sets_the_kind() -> None:
    app = w.AuditApp(sample="log: clean")
    app.sample.value = "catalog: broken"
    assert app.kind.value == "catalog" and app.report is not None
    assert app.report.audit == "catalog"
    assert {f.kind for f in app.report.findings} == {
        "fall",
        "double_commit",
        "off_head_commit",
        "given_up_commit",
    }


def test_your_own_files(runs: dict[str, Path]) -> None:
    app = w.AuditApp()
    app.sample.value = w.OWN
    assert app.report is None and "type a path" in app.message
    app.kind.value = "log"
    app.path.value = str(runs["frontier_status"])
    app.checkpoints.value = str(runs["frontier_checkpoints"])
    app.update()
    assert app.report is not None and app.report.clean and app.last_png
    app.kind.value = "catalog"
    app.path.value = str(runs["callback"])
    app.update()
    assert app.report is not None and {f.kind for f in app.report.findings} == {
        "fall",
        "double_commit",
    }


def test_bad_input_is_one_line_and_no_figure(tmp_path: Path) -> None:
    app = w.AuditApp()
    app.sample.value = w.OWN
    app.kind.value = "catalog"
    app.path.value = str(tmp_path / "nope.jsonl")
    app.update()
    assert app.report is None and "nope.jsonl" in app.message and "no such file" in app.message
    assert app.figure.value == "" and app.last_png == b"" and "&#9888;" in app.verdict.value
    bad = tmp_path / "bad.csv"
    bad.write_text("id,shard,at\n1,eu,0\n")
    app.kind.value = "log"
    app.path.value, app.checkpoints.value = str(bad), str(bad)
    app.update()
    assert "column 'status'" in app.message and "\n" not in app.message
    app.checkpoints.value = ""
    app.update()
    assert "checkpoint file" in app.message


def test_the_loop_kind_audits_a_loop() -> None:
    report, fig = w.run_audit("loop", "labkit.catalog.loop:WatermarkLoop", n=2)
    assert report.clean and report.summary["fixture"] == "holds"
    assert fig.get_axes()


def test_an_unknown_sample_or_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="one of"):
        w.AuditApp(sample="log: nope")
    with pytest.raises(ValueError, match="one of log, catalog, loop"):
        w.run_audit("nope", "x")


def test_the_widget_fits_the_screen_and_its_text_is_readable() -> None:
    """Two control rows (about 40 px each), the verdict and the figure, each capped, stay in
    760 px; the figures' smallest text (8 pt) is drawn at 10 px or more, never shrunk."""
    px = int(w.VERDICT_HEIGHT.removesuffix("px")) + int(w.FIGURE_HEIGHT.removesuffix("px"))
    assert px + 3 * 40 + 20 <= 760  # the two rows may wrap into three
    assert 8 * w.DPI / 72 >= 10
    app = w.AuditApp()
    assert f"overflow:auto;max-height:{w.FIGURE_HEIGHT};width:100%" in app.figure.value
    assert "max-width:none" in app.figure.value and app.verdict.layout.overflow == "auto"


# --- the exports notebook 10 audits ---------------------------------------------------------


def test_the_max_run_orphans_and_the_frontier_run_is_clean(runs: dict[str, Path]) -> None:
    bad = audit_log(Source(runs["max_status"]), Source(runs["max_checkpoints"]))
    good = audit_log(Source(runs["frontier_status"]), Source(runs["frontier_checkpoints"]))
    assert bad.summary["rule"] == "max" and good.summary["rule"] == "frontier"
    assert {f.kind for f in bad.findings} == {"orphan"} and good.clean


@pytest.mark.parametrize("design", ["callback", "ballot", "lww", "cas"])
def test_an_exported_event_log_falls_exactly_when_the_design_does(
    design: str, tmp_path: Path
) -> None:
    steps = PRESETS["inverted"].steps
    played = run_schedule(design, steps)
    events = export_design(design, steps)
    heads = [e["version"] for e in events if e["event"] == "head"]
    assert heads == played.heads
    report = audit_catalog(Source(write_jsonl(tmp_path / "e.jsonl", events)))
    falls = [f for f in report.findings if f.kind == "fall"]
    assert bool(falls) == played.rewinds
    assert report.summary["reads"] == len(steps)
