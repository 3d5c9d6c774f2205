"""The audit (`labkit.audit`, `python -m labkit audit log | catalog`) on the sample files, on
malformed files, on random histories against labkit's own rule and summarizer, and on a long
generated history with bounded memory."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from hypothesis import given, settings
from hypothesis import strategies as st

import labkit.frontier.rule as rule
from labkit.__main__ import main
from labkit.audit import samples
from labkit.audit.catalog import CatalogAudit, Event
from labkit.audit.findings import SEVERITY
from labkit.audit.inputs import InputError, cell_time
from labkit.audit.log import Checkpoint, LogAudit, StatusRow, audit_rows
from labkit.frontier.scenarios import POLICY_COLUMNS, final_state, run_scenario, scenario_from_order

DATA = Path(__file__).resolve().parent.parent / "data" / "audit"


def _run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, list[dict], str]:
    """Run the command with --json: exit code, the JSON objects, stderr."""
    code = main(["audit", *map(str, argv), "--json"])
    out = capsys.readouterr()
    return code, [json.loads(line) for line in out.out.splitlines()], out.err


def _log(name: str) -> tuple[Path, str, Path]:
    return DATA / f"log_{name}_status.csv", "--checkpoints", DATA / f"log_{name}_checkpoints.csv"


def _found(objs: list[dict]) -> set[tuple]:
    return {
        (o["kind"], o.get("shard") or o.get("observer") or o.get("ballot"), o.get("id"))
        for o in objs
        if o["kind"] != "summary"
    }


def test_the_samples_regenerate_byte_identical() -> None:
    texts = samples.sample_texts()
    assert sorted(texts) == sorted(p.name for p in DATA.iterdir() if p.suffix != ".md")
    for name, text in texts.items():
        assert (DATA / name).read_bytes() == text.encode("utf-8"), name


def test_the_broken_log_reports_each_planted_finding_and_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, objs, err = _run(capsys, "log", *_log("broken"))
    final = final_state(samples.workbook_run()).iloc[0]
    jumped = set(final[POLICY_COLUMNS["max"].orphan_ids])  # what labkit's summarizer orphaned
    assert jumped
    expected = {("orphan", "eu", i) for i in jumped}
    expected |= {("orphan", "us", 104), ("chain_gap", "us", 106)}
    assert (code, err) == (1, "")
    assert _found(objs) == expected
    causes = {o["id"]: o["cause"] for o in objs if o["kind"] == "orphan"}
    assert causes[104] == "before_first_seen"
    assert {causes[i] for i in jumped} == {"covered_while_open"}
    assert objs[-1]["kind"] == "summary" and objs[-1]["rule"] == "max"


@pytest.mark.parametrize("command", ["log", "catalog"])
def test_the_clean_twins_exit_0_with_no_finding(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    args = _log("clean") if command == "log" else (DATA / "catalog_clean.jsonl",)
    code, objs, err = _run(capsys, command, *args)
    assert (code, err) == (0, "")
    assert [o["kind"] for o in objs] == ["summary"]
    if command == "log":
        assert objs[0]["rule"] == "frontier"
        assert {lag["lag"] for lag in objs[0]["lags"]} == {0}


def test_the_broken_catalog_reports_each_planted_finding_and_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, objs, err = _run(capsys, "catalog", DATA / "catalog_broken.jsonl")
    assert (code, err) == (1, "")
    kinds = {(o["kind"], o.get("observer") or o.get("ballot")) for o in objs[:-1]}
    assert kinds == {
        ("fall", "r2"),
        ("double_commit", "b4-retry"),
        ("off_head_commit", "b5"),
        ("given_up_commit", "b6"),
    }
    (fall,) = [o for o in objs if o["kind"] == "fall"]
    summary = objs[-1]
    assert fall["reads"] == summary["observers"]["r2"]["reads"] > 1
    assert fall["from"] > fall["to"] and len(fall["window"]) == 2
    assert summary["observers"]["r1"]["falls"] == 0


def test_json_keys_and_order(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (("log", *_log("broken")), ("catalog", DATA / "catalog_broken.jsonl")):
        _, objs, _ = _run(capsys, *args)
        *findings, summary = objs
        assert summary["kind"] == "summary"
        for o in findings:
            assert {"kind", "at", "message"} <= set(o)
            assert ("shard" in o and "id" in o) or "observer" in o or "ballot" in o
        ranks = [SEVERITY[o["kind"]] for o in findings]
        assert ranks == sorted(ranks)


def test_text_output_is_one_line_per_finding_most_serious_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["audit", "log", *map(str, _log("broken"))]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("orphan: ") and lines[-2].startswith("chain_gap: ")
    assert lines[-1].startswith("audit log: 1 chain_gap, 7 orphan")


# --- bad input: exit 2, one line naming file, row and column, nothing on stdout ---------------


def _bad(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert len(out.err.strip().splitlines()) == 1
    return out.err


def test_a_missing_column_exits_2_naming_file_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = tmp_path / "status.csv"
    lines = (DATA / "log_broken_status.csv").read_text().splitlines()
    status.write_text(
        "\n".join(",".join(line.split(",")[:2] + line.split(",")[3:]) for line in lines)
    )
    err = _bad(capsys, ["audit", "log", str(status), "--checkpoints", str(_log("broken")[2])])
    assert str(status) in err and "'status'" in err


def test_a_bad_cell_exits_2_naming_file_row_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = tmp_path / "ckpt.csv"
    text = (DATA / "log_broken_checkpoints.csv").read_text().replace("eu,7,8,16", "eu,7,x,16")
    ckpt.write_text(text)
    err = _bad(capsys, ["audit", "log", str(_log("broken")[0]), "--checkpoints", str(ckpt)])
    assert f"{ckpt}: row 2, column 'end'" in err
    events = tmp_path / "events.jsonl"
    rows = (DATA / "catalog_broken.jsonl").read_text().splitlines()
    rows[3] = json.dumps({**json.loads(rows[3]), "event": "comit"})
    events.write_text("\n".join(rows))
    err = _bad(capsys, ["audit", "catalog", str(events)])
    assert f"{events}: row 4, column 'event'" in err and "comit" in err


def test_rows_out_of_time_order_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = tmp_path / "status.csv"
    head, *rows = (DATA / "log_clean_status.csv").read_text().splitlines()
    status.write_text("\n".join([head, *reversed(rows)]))
    err = _bad(capsys, ["audit", "log", str(status), "--checkpoints", str(_log("clean")[2])])
    assert "row 2, column 'at'" in err


def test_map_jsonl_and_sqlite_read_the_same_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, want, _ = _run(capsys, "log", *_log("broken"))
    renamed = tmp_path / "status.csv"
    renamed.write_text(
        (DATA / "log_broken_status.csv")
        .read_text()
        .replace("id,shard,status,at", "msg,shard,state,t", 1)
    )
    _, objs, _ = _run(
        capsys,
        "log",
        renamed,
        "--checkpoints",
        _log("broken")[2],
        "--map",
        "id=msg,status=state,at=t",
    )
    assert objs == want
    import csv

    with (DATA / "log_broken_status.csv").open() as f:
        records = [{**r, "id": int(r["id"]), "at": float(r["at"])} for r in csv.DictReader(f)]
    jsonl = tmp_path / "status.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    _, objs, _ = _run(capsys, "log", jsonl, "--checkpoints", _log("broken")[2])
    assert objs == want
    db = tmp_path / "log.db"
    sqlite_utils.Database(db)["status"].insert_all(reversed(records))  # read back by time
    _, objs, _ = _run(capsys, "log", db, "--table", "status", "--checkpoints", _log("broken")[2])
    assert _found(objs) == _found(want)
    err = _bad(capsys, ["audit", "log", str(db), "--table", "nope", "--checkpoints", str(db)])
    assert "no table 'nope'" in err
    err = _bad(capsys, ["audit", "log", str(jsonl), "--checkpoints", str(db), "--map", "idd=x"])
    assert "'idd'" in err


def test_times_as_numbers_or_iso_8601() -> None:
    assert cell_time("f", 1, "at", "12.5") == cell_time("f", 1, "at", 12.5) == 12.5
    assert cell_time("f", 1, "at", "1970-01-01T00:01:00Z") == 60.0
    assert cell_time("f", 1, "at", "1970-01-01T00:01:00") == 60.0  # no zone: UTC
    assert cell_time("f", 1, "at", "1970-01-01T01:01:00+01:00") == 60.0
    with pytest.raises(InputError, match="f: row 1, column 'at'"):
        cell_time("f", 1, "at", "yesterday")


def test_an_overlap_and_a_stale_base_each_get_their_finding() -> None:
    rows = [StatusRow(i, "a", "delivered", float(i)) for i in range(1, 5)]
    report = audit_rows(rows, [Checkpoint("a", 0, 3, 3.5), Checkpoint("a", 2, 4, 4.5)])
    assert [(f.kind, f.id) for f in report.findings] == [("overlap", 3)]
    audit = CatalogAudit()
    for e in (
        Event(1, "commit", "b1", 1, 0),
        Event(2, "commit", "b2", 2, 1),
        Event(3, "commit", "b3", 3, 1),
        Event(4, "reject", "b4"),  # refused, still in flight: its real answer may commit
        Event(5, "commit", "b4", 4, 3),
        Event(6, "abandon", "b5"),  # given up: nothing of b5 may commit after this
        Event(7, "commit", "b5", 5, 4),
    ):
        audit.event(e)
    assert [(f.kind, f.ballot) for f in audit.report().findings] == [
        ("off_head_commit", "b3"),
        ("given_up_commit", "b5"),
    ]


# --- properties: the audit agrees with labkit's own rule and summarizer -----------------------

_history = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(1, 12), st.booleans()), max_size=40
)


@settings(max_examples=150, deadline=None)
@given(_history)
def test_the_audit_frontier_is_the_rule_on_every_row_seen(events: list) -> None:
    """Random histories (ids first seen in any order, open or already terminal, later
    finished): after each row the audit's frontier is `rule.frontier` over all rows seen."""
    audit = LogAudit()
    seen: dict[str, dict[int, bool]] = {"a": {}, "b": {}}
    for t, (shard, row_id, finish) in enumerate(events):
        rows = seen[shard]
        if rows.get(row_id) is False:
            continue  # terminal stays terminal
        status = "delivered" if finish else "running" if row_id in rows else "pending"
        rows[row_id] = not finish
        audit.status(StatusRow(row_id, shard, status, float(t)))
        for key, known in seen.items():
            assert audit.frontier(key) == rule.frontier(0, sorted(known.items()))


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_max_checkpoints_orphan_what_labkits_summarizer_orphans(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 6))
    priorities = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    order = data.draw(st.permutations(range(1, n + 1)))
    failures = data.draw(st.sets(st.sampled_from(order)))
    timeline = run_scenario(scenario_from_order(priorities, order, failures))
    final = final_state(timeline).iloc[0]
    for policy in ("max", "frontier"):
        statuses, checkpoints = samples.export_run(timeline, policy)
        report = audit_rows(
            (StatusRow(r["id"], r["shard"], r["status"], r["at"]) for r in statuses),
            (Checkpoint(c["shard"], c["start"], c["end"], c["at"]) for c in checkpoints),
        )
        orphans = {f.id for f in report.findings if f.kind == "orphan"}
        assert orphans == set(final[POLICY_COLUMNS[policy].orphan_ids])
        assert {f.kind for f in report.findings} <= {"orphan"}
        if policy == "frontier":
            assert all(lag["lag"] == 0 for lag in report.summary["lags"])


# --- streaming: memory bounded by the open rows, not the history ------------------------------


def _streamed(rows: int) -> tuple[Any, int, int]:
    """Audit a synthetic history of `rows` status rows as it streams by: the report, the
    checkpoints seen and the peak of memory allocated meanwhile (tracemalloc)."""
    tracemalloc.start()
    try:
        audit = LogAudit()
        checkpoints = 0
        for item in samples.synthetic_log(rows, shards=100, every=200):
            if isinstance(item, StatusRow):
                audit.status(item)
            else:
                audit.checkpoint(item)
                checkpoints += 1
        report = audit.report()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return report, checkpoints, peak


@pytest.mark.slow
def test_a_long_history_streams_in_bounded_memory() -> None:
    """The peak does not grow with the history: from 10,000 to 40,000 rows it grew 39 KB here,
    where keeping one reference per row (8 bytes each) grows it 300 KB."""
    _, _, small = _streamed(10_000)
    report, checkpoints, peak = _streamed(40_000)
    assert report.clean and report.summary["status_rows"] == 40_000
    assert report.summary["rule"] == "frontier" and checkpoints > 100
    assert report.summary["peak_open_rows"] <= 100 * 8
    assert peak - small < 150_000, (small, peak)


def test_the_samples_script_writes_beside_and_renames(tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "audit")
    written = samples.write_samples(tmp_path / "audit")
    assert {p.name for p in written} == {p.name for p in DATA.iterdir() if p.suffix != ".md"}
    assert not list((tmp_path / "audit").glob(".*.tmp"))


def test_unknown_statuses_are_named_and_the_terminal_set_is_yours() -> None:
    rows = [
        StatusRow(1, "a", "retrying", 1.0),
        StatusRow(2, "a", "acked", 2.0),
        StatusRow(1, "a", "acked", 3.0),
    ]
    report = audit_rows(rows, [Checkpoint("a", 0, 2, 4.0)], terminal=("acked",))
    assert report.clean and report.summary["unknown_statuses"] == ["retrying"]
    report = audit_rows(rows[:2], [Checkpoint("a", 0, 2, 4.0)], terminal=("acked",))
    assert [(f.kind, f.id, f.details["status"]) for f in report.findings] == [
        ("orphan", 1, "retrying")
    ]


def test_a_chain_may_start_above_0_unless_a_row_below_its_start_was_seen() -> None:
    late = [StatusRow(i, "a", "delivered", float(i)) for i in range(11, 14)]
    assert audit_rows(late, [Checkpoint("a", 10, 13, 20.0)]).clean
    early = [StatusRow(5, "a", "delivered", 0.5), *late]
    report = audit_rows(early, [Checkpoint("a", 10, 13, 20.0)])
    assert [(f.kind, f.id) for f in report.findings] == [("chain_gap", 1)]
