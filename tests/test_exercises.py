"""Workshop exercises: each checker accepts a right answer, explains typical wrong ones, never
shows a traceback; the solution notebooks check out and their student copies start blank."""

from __future__ import annotations

import enum
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest
from apply_rules import decide
from fresh_exercises import fresh_exercises  # noqa: F401 - autouse: variant 0 per test
from worked_answers import AFTER_RESTART, CLOSING, OPEN, PARTIAL_INDEX, VERDICTS

from harness.nbrun import execute_notebook, starts_postgres
from labkit import exercises as exs
from labkit.ballot import WatermarkLoop
from labkit.designs.arrival_orders import run_schedule
from labkit.designs.schedules import Kind
from labkit.docs.nbfiles import make_student_copies
from labkit.exercises import ____, catalog, frontier, kit
from labkit.exercises.kit import Exercise, Feedback
from labkit.exercises.sandboxes import sqlite as sandbox
from labkit.frontier import log as fr

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
# ex07 and ex08 start PostgreSQL in their kernel (pg.server_or_reason): their runs are `postgres`.
SOLUTION_RUNS = [
    pytest.param(p, id=p.name, marks=[pytest.mark.postgres] if starts_postgres(p) else [])
    for p in SOLUTIONS
]
CORRECT, INCORRECT, BLANK = "✓ Correct", "✗ Not yet", "○ Not attempted"

FRONTIER_SQL = f"""
SELECT COALESCE(
  (SELECT MIN(id) - 1 FROM conversations
    WHERE channel_key = :shard AND id > :base AND {OPEN}),
  (SELECT MAX(id) FROM conversations WHERE id > :base AND channel_key = :shard),
  :base)  -- trailing comment; and a semicolon
;"""
MAX_RULE_SQL = (
    "SELECT MAX(id) FROM conversations "
    "WHERE channel_key = :shard AND status = 'delivered' AND :base >= 0"
)


def wrong(ex: Exercise, answer: Any, *needles: str) -> Feedback:
    """Check that `answer` is refused with a message containing every needle."""
    fb = ex.check(answer)
    assert fb.status == "incorrect", fb
    assert str(fb).startswith(INCORRECT)
    for needle in needles:
        assert needle in fb.message, (needle, fb.message)
    assert "Traceback" not in fb.message
    return fb


RIGHT: dict[str, Any] = {
    "predict_frontier_ex": {"frontier": 3, "max_watermark": 5},
    "frontier_sql_ex": FRONTIER_SQL,
    "partial_index_ex": PARTIAL_INDEX,
    "max_orphans_ex": {1, 2, 4, 6},
    "rejection_reasons_ex": VERDICTS,
    "lww_rewind_ex": ["deliver 1", "timeout", "deliver 3", "deliver 4", "deliver 2"],
    "closing_question_ex": {"schedule": CLOSING, "decision": "reject"},
    "apply_rule_ex": decide,
    "crash_verdicts_ex": AFTER_RESTART,
    "audit_orphans_ex": {1, 2, 4, 5},
    "fall_log_ex": [
        {"at": 1, "event": "request", "ballot": "a"},
        {"at": 2, "event": "request", "ballot": "b"},
        {"at": 3, "event": "commit", "ballot": "b", "version": 1, "base": 0},
        {"at": 4, "event": "request", "ballot": "c"},
        {"at": 5, "event": "commit", "ballot": "c", "version": 2, "base": 1},
        {"at": 6, "event": "head", "observer": "r1", "version": 2},
        {"at": 7, "event": "commit", "ballot": "a", "version": 1, "base": 0},
        {"at": 8, "event": "head", "observer": "r1", "version": 1},
    ],
}
ALL = exs.part1 + exs.part2 + exs.part4
# Part three's are checked on PostgreSQL: their answers are in tests/test_exercises_pg.py.
PART3 = ("interleaving_ex", "condition_ex", "guarded_write_ex", "tenant_write_ex")
BY_NAME = {name: getattr(exs, name) for name in (*RIGHT, *PART3)}


def test_parts_have_at_least_three_exercises_each() -> None:
    assert len(exs.part1) >= 3 and len(exs.part2) >= 3 and len(exs.part3) >= 3
    assert sorted(e.name for e in ALL + exs.part3) == sorted(e.name for e in BY_NAME.values())


@pytest.mark.parametrize("name", RIGHT)
def test_right_answer_passes(name: str) -> None:
    fb = BY_NAME[name].check(RIGHT[name])
    assert fb.passed, fb
    assert str(fb).startswith(CORRECT)


@pytest.mark.parametrize("ex", ALL, ids=lambda e: e.name)
def test_placeholder_is_not_attempted(ex: Exercise) -> None:
    fb = ex.check(____)
    assert fb.status == "not_attempted" and str(fb).startswith(BLANK)


@pytest.mark.parametrize("ex", ALL, ids=lambda e: e.name)
@pytest.mark.parametrize("junk", [None, 42, 3.5, "", object(), [object()], {"x": 1}])
def test_junk_gets_a_friendly_message(ex: Exercise, junk: Any) -> None:
    fb = ex.check(junk)
    assert fb.status == "incorrect", fb
    assert "Traceback" not in fb.message and fb.message.startswith(ex.name)


@pytest.mark.parametrize("ex", ALL + exs.part3, ids=lambda e: e.name)
def test_three_hints_and_a_solution(ex: Exercise) -> None:
    nudge, method, near = ex.hint(1), ex.hint(2), ex.hint(3)
    assert nudge.status == method.status == near.status == "hint"
    assert len({nudge.message, method.message, near.message}) == 3
    for k, hint in enumerate((nudge, method, near), start=1):
        assert hint.message.startswith(f"({k} of 3)") and len(hint.message) > 40
    assert "____" in near.message  # the near-answer leaves a gap to fill
    assert ex.hint().message == nudge.message and "3 hints" in ex.hint(4).message
    assert ex.solution().status == "solution" and len(ex.solution().message) > 20


def test_every_lesson_with_exercises_has_its_notebook() -> None:
    assert sorted(exs.by_lesson) == [1, 2, 3, 4, 5, 6, 7, 8, 10]
    assert sorted(e.name for es in exs.by_lesson.values() for e in es) == sorted(
        e.name for e in ALL + exs.part3
    )
    for n in exs.by_lesson:
        assert len(list((ROOT / "exercises" / "solutions").glob(f"ex{n:02d}_*.ipynb"))) == 1


# --- part one -------------------------------------------------------------------------------


def test_frontier_sql_max_rule_passes_an_open_id() -> None:
    fb = wrong(
        exs.frontier_sql_ex,
        MAX_RULE_SQL,
        "on shard 'lease'",
        "with base 0 your query returned 4: your frontier passes a leased row, and leased is open",
    )
    assert "frontier is" not in fb.message


def test_frontier_sql_copied_from_notebook_02_misses_the_new_open_statuses() -> None:
    four = FRONTIER_SQL.replace(OPEN, "status IN ('pending','running')")
    wrong(exs.frontier_sql_ex, four, "passes a leased row, and leased is open")
    with_leased = FRONTIER_SQL.replace(OPEN, "status IN ('pending','leased','running')")
    wrong(exs.frontier_sql_ex, with_leased, "on shard 'retry'", "passes a retrying row")


def test_frontier_sql_without_the_minus_one_is_told_so() -> None:
    """The issue's case: MIN(id) without the - 1 once got "it passed id 2, which is leased",
    which sent the learner to the status list instead of the missing - 1."""
    fb = wrong(
        exs.frontier_sql_ex,
        FRONTIER_SQL.replace("MIN(id) - 1", "MIN(id)"),
        "returned 2: it returned the id of the first open row (leased) itself",
        "one short of that row",
    )
    assert "passes a leased row" not in fb.message and "still open" not in fb.message


def test_frontier_sql_without_fallback_returns_null() -> None:
    only_min = (
        "SELECT MIN(id) - 1 FROM conversations "
        f"WHERE channel_key = :shard AND id > :base AND {OPEN}"
    )
    wrong(exs.frontier_sql_ex, only_min, "returned None", "look at the second part of the rule")


@pytest.mark.parametrize(
    ("blocking", "needle"),
    [
        (
            "status NOT IN ('delivered', 'failed')",
            "stops at a cancelled row, but cancelled is terminal",
        ),
        ("status <> 'delivered'", "is terminal (it will never change): it must not hold"),
    ],
)
def test_frontier_sql_that_lets_a_terminal_status_block(blocking: str, needle: str) -> None:
    wrong(exs.frontier_sql_ex, FRONTIER_SQL.replace(OPEN, blocking), needle)


def test_reference_frontier_agrees_with_labkit_on_four_statuses() -> None:
    conn, _ = frontier._build_frontier_cases()  # noqa: SLF001
    log = fr.connect()
    rows = conn.execute("SELECT channel_key, status FROM conversations ORDER BY id").fetchall()
    for shard, status in rows:
        row_id = fr.enqueue(log, shard, 5)
        if status in ("running", "leased", "retrying"):
            fr.mark_running(log, row_id)
        elif status in ("delivered", "cancelled"):
            fr.mark_delivered(log, row_id)
        elif status == "failed":
            fr.mark_failed(log, row_id)
    for shard in ("a", "b", "r0", "r1", "lease", "cancel", "empty"):
        for base in range(0, len(rows) + 2, 7):
            mapped = [
                (i, "running" if s in ("leased", "retrying") else s)
                for i, s in frontier._shard_rows(log, shard, base)  # noqa: SLF001
            ]
            want = fr.delivered_frontier(log, shard, base)
            assert frontier.reference_frontier(mapped, base) == want, (shard, base)


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("DELETE FROM conversations", "single SELECT"),
        ("SELECT :shard, :base; DELETE FROM conversations", "single statement"),
        ("SELECT MIN(id) FROM conversations WHERE channel_key = ? AND id > ?", ":shard and :base"),
        ("SELECT MAX(id) FROM conversations WHERE channel_key = 'main'", "never uses :shard"),
        ("SELECT frob(:shard, :base)", "no such function"),
        ("SELECT :shard, :base", "one value"),
        ("SELECT load_extension(:shard) + :base", "SQLite"),
        ("SELECT 1 WHERE :shard = :base", "returned 0 row(s)"),
        (
            "WITH x AS (SELECT 1) SELECT * FROM pragma_table_info(:shard) WHERE :base",
            "may only read",
        ),
    ],
)
def test_frontier_sql_refuses_what_is_not_one_select(sql: str, needle: str) -> None:
    wrong(exs.frontier_sql_ex, sql, needle)


def test_frontier_sql_never_writes() -> None:
    sneaky = "SELECT :base FROM conversations WHERE :shard IN (SELECT 1); DROP TABLE conversations"
    wrong(exs.frontier_sql_ex, sneaky, "single statement")
    assert exs.frontier_sql_ex.check(FRONTIER_SQL).passed


def test_explain_with_an_authorizer_refuses_writes_and_lifts_it_after() -> None:
    conn = fr.connect()
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        fr.explain(conn, "DELETE FROM conversations", authorizer=sandbox.read_only)
    fr.explain(conn, "DELETE FROM conversations")  # no authorizer left behind
    conn.execute("DELETE FROM conversations")


# --- only the learner's code is blamed ------------------------------------------------------


def _broken(*_: Any, **__: Any) -> Any:
    raise RuntimeError("labkit bug")


@pytest.mark.parametrize(
    ("module", "helper", "ex", "answer"),
    [
        (frontier, "reference_frontier", "frontier_sql_ex", FRONTIER_SQL),
        (catalog, "run_schedule", "lww_rewind_ex", ["timeout", "deliver 2"]),
        (WatermarkLoop, "apply", "apply_rule_ex", "decide"),
    ],
)
def test_a_labkit_bug_inside_a_check_propagates(
    monkeypatch, module: Any, helper: str, ex: str, answer: Any
) -> None:
    answer = decide if answer == "decide" else answer
    monkeypatch.setattr(module, helper, _broken)
    with pytest.raises(RuntimeError, match="labkit bug"):
        getattr(exs, ex).check(answer)


def test_the_learners_own_errors_are_feedback_while_labkit_errors_are_not(monkeypatch) -> None:
    wrong(exs.apply_rule_ex, lambda inflight, head, r: 1 // 0, "your rule raised ZeroDivisionError")
    wrong(exs.frontier_sql_ex, "SELECT frob(:shard, :base)", "no such function: frob")
    monkeypatch.setattr(frontier, "reference_frontier", _broken)  # the checker is broken
    wrong(exs.frontier_sql_ex, "SELECT frob(:shard, :base)", "no such function: frob")
    with pytest.raises(RuntimeError, match="labkit bug"):
        exs.frontier_sql_ex.check(FRONTIER_SQL)


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ({"frontier": 1, "max_watermark": 5}, "a failed row is a dead letter"),
        ({"frontier": 5, "max_watermark": 5}, "stops one short of the first row that can still"),
        (
            {"frontier": 4, "max_watermark": 5},
            "row 4 is still pending, so it can still change; a frontier never includes an open",
        ),
        ({"frontier": 3, "max_watermark": 6}, "id 6 is pending: MAX(id) WHERE status='delivered'"),
        ({"frontier": 3, "max_watermark": 3}, "gap-free rule's answer again"),
        ({"frontier": 3}, "'max_watermark'"),
        ({"frontier": "3", "max": 5}, "not the text '3': drop the quotes"),
        ({"frontier": 3.5, "max": 5}, "3.5 is not"),
        ([3, 5], "dict"),
    ],
)
def test_predict_frontier_messages(answer: Any, needle: str) -> None:
    wrong(exs.predict_frontier_ex, answer, needle)


def test_predict_frontier_accepts_max_key_and_integral_floats() -> None:
    assert exs.predict_frontier_ex.check({"frontier": 3, "max": 5}).passed
    assert exs.predict_frontier_ex.check({"frontier": 3.0, "max": np.float64(5)}).passed


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("CREATE INDEX i ON conversations(tenant, channel_key, id)", "holds open rows only"),
        (
            "CREATE INDEX i ON conversations(tenant, channel_key, priority, id) "
            "WHERE status IN ('pending', 'retrying', 'running')",
            "seeks the shard but not the id range",
        ),
        (
            "CREATE INDEX i ON conversations(tenant, channel_key, id) "
            "WHERE status IN ('pending', 'running')",
            "does not use i",
        ),
        (
            "CREATE INDEX i ON conversations(tenant, channel_key, id) "
            "WHERE status IN ('retrying', 'pending', 'running')",
            "same values in the same order",
        ),
        (
            "CREATE INDEX i ON conversations(channel_key, id) "
            "WHERE status IN ('pending', 'retrying', 'running')",
            "does not seek on tenant",
        ),
        ("CREATE INDEX i ON conversations(channel_key, id)", "does not seek on tenant"),
        ("DROP TABLE conversations", "one CREATE INDEX"),
        ("CREATE INDEX i ON nowhere(x)", "no such table"),
        ("CREATE INDEX i ON conversations(channel_key, id); DROP TABLE conversations", "single"),
    ],
)
def test_partial_index_messages(sql: str, needle: str) -> None:
    wrong(exs.partial_index_ex, sql, needle)


def test_partial_index_accepts_the_implicit_rowid() -> None:
    """The issue's case: SQLite appends the rowid to every index, so (tenant, channel_key) with
    the right WHERE seeks `rowid>?` exactly as the reference does; it was refused."""
    fb = exs.partial_index_ex.check(PARTIAL_INDEX.replace(", id)", ")"))
    assert fb.passed, fb
    assert "(tenant=? AND channel_key=? AND rowid>?)" in fb.message


def test_partial_index_accepts_either_order_of_the_shard_columns() -> None:
    fb = exs.partial_index_ex.check(
        PARTIAL_INDEX.replace("tenant, channel_key", "channel_key, tenant")
    )
    assert fb.passed, fb
    fb = exs.partial_index_ex.check(PARTIAL_INDEX)
    assert "USING INDEX idx_open (tenant=? AND channel_key=? AND id>?)" in fb.message


def test_notebook_03_index_does_not_pass_the_variant() -> None:
    shown = "CREATE INDEX i ON conversations(channel_key, id) WHERE status IN ('pending','running')"
    wrong(exs.partial_index_ex, shown, "does not use i")


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ([1, 2], "your ids account for MAX's first jump, but not for all of them"),
        ({1, 2, 4}, "MAX's first two jumps"),
        ({6}, "an orphan is an id that was still open when a MAX jump passed it"),
        ({1, 2, 3, 4, 6}, "ask of each id you gave whether it was delivered before the jump"),
        ({1, 2, 3, 4, 5, 6, 7}, "Not every id you named, or left out, fits the rule"),
        ({1, 2, 3}, "Not every id you named, or left out, fits the rule"),
        ({1, 2, 4, 6, 9}, "there is no id 9"),
        (4, "set of ids"),
        (["1"], "not the text '1'"),
    ],
)
def test_max_orphans_messages(answer: Any, needle: str) -> None:
    wrong(exs.max_orphans_ex, answer, needle)


# --- part two -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"B": "stale_watermark"}, "at least one decision is not apply()'s"),
        ({"B": "stale_watermark"}, "Re-check the second question, whether the ballot still owns"),
        ({"E": "commit"}, "Re-check the second question"),
        ({"E": "unknown_ballot"}, "Re-check the first question, whether the ballot is in flight"),
        ({"A": None}, "which events take a ballot out of flight"),
        ({"D": "stale_base"}, "Re-check the second question"),
        ({"C": "stale_base"}, "Re-check the third question, whether the body is based on"),
        ({"C": "Stale-Base."}, "Re-check the third question"),
        ({"C": "stale"}, "'stale' is not a decision"),
        ({"C": 1}, "not a int"),
    ],
)
def test_rejection_reason_messages(change: dict[str, Any], needle: str) -> None:
    wrong(exs.rejection_reasons_ex, {**VERDICTS, **change}, needle)


def test_rejection_reasons_need_every_label() -> None:
    wrong(exs.rejection_reasons_ex, {"A": "unknown_ballot"}, "missing: B, C, D, E")


def test_rejection_reasons_accept_none_for_commit() -> None:
    assert exs.rejection_reasons_ex.check({**VERDICTS, "C": None}).passed


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"X": 3}, "ballot 3 was handed out before the crash"),
        ({"X": 5}, "X is too high: count the reservations since the first ballot, across"),
        ({"A": "stale_watermark"}, "a restart's abandon too"),
        ({"B": "stale_watermark"}, "Re-check the second question"),
        ({"C": "commit"}, "Re-check the second question"),
        ({"D": "commit"}, "Re-check the first question"),
        ({"X": True}, "True is a bool"),
        ({"X": "4"}, "not the text '4': drop the quotes"),
    ],
)
def test_crash_verdict_messages(change: dict[str, Any], needle: str) -> None:
    wrong(exs.crash_verdicts_ex, {**AFTER_RESTART, **change}, needle)


def test_crash_verdicts_need_x() -> None:
    wrong(exs.crash_verdicts_ex, {"A": "unknown_ballot"}, "missing: X, B, C, D")


@pytest.mark.parametrize(
    ("steps", "needle"),
    [
        (["timeout", "deliver 2", "deliver 3", "deliver 1"], "host A, whose stamps run 10"),
        (["deliver 1", "deliver 2", "deliver 1"], "never saw the head fall"),
        (["deliver 9"], "request 9 has not been sent"),
        (["jump 1"], "'jump 1'"),
        ("deliver 1", "list of steps"),
        ([], "empty"),
        (["deliver 1"] * 25, "far fewer"),
    ],
)
def test_lww_rewind_messages(steps: Any, needle: str) -> None:
    wrong(exs.lww_rewind_ex, steps, needle)


def test_notebook_05_counterexample_rewinds_only_with_clocks_on_time() -> None:
    steps = ["timeout", "deliver 2", "deliver 3", "deliver 1"]
    assert run_schedule("lww", steps).rewinds
    assert not run_schedule("lww", steps, skews=catalog.HOST_SKEWS).rewinds


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ({"schedule": CLOSING, "decision": "compensate"}, "nothing to compensate"),
        ({"schedule": CLOSING, "decision": "replay"}, "a late body is never applied"),
        ({"schedule": CLOSING, "decision": "reject, then replay"}, "both replays went out before"),
        ({"schedule": CLOSING, "decision": "shrug"}, "must be one of"),
        ({"schedule": ["timeout", "deliver 21"], "decision": "reject"}, "giving up on 20, 21"),
        (
            {"schedule": ["timeout", "timeout", "deliver 22", "deliver 20"], "decision": "reject"},
            "never delivers 21, 23",
        ),
        (
            {
                "schedule": [
                    "timeout",
                    "timeout",
                    "deliver 22",
                    "deliver 20",
                    "deliver 21",
                    "deliver 23",
                ],
                "decision": "reject",
            },
            "lww never rewinds on that order",
        ),
        ({"schedule": ["deliver 25"], "decision": "reject"}, "request 25 has not been sent"),
        ({"decision": "reject"}, "'schedule'"),
        (CLOSING, "'schedule'"),
    ],
)
def test_closing_question_messages(answer: Any, needle: str) -> None:
    wrong(exs.closing_question_ex, answer, needle)


@pytest.mark.parametrize("decision", ["reject", "Reject", "  REJECT "])
def test_closing_question_accepts_what_notebook_05_teaches(decision: str) -> None:
    assert exs.closing_question_ex.check((CLOSING, decision)).passed


def test_notebook_05_closing_order_does_not_pass_the_variant() -> None:
    shown = ["timeout", "deliver 13", "deliver 14", "deliver 12", "deliver 14"]
    wrong(exs.closing_question_ex, {"schedule": shown, "decision": "reject"}, "has not been sent")


def test_apply_rule_that_raises_or_has_wrong_arity() -> None:
    def lookup(inflight: dict[int, int], head: int, r: Any) -> str | None:
        return decide(inflight, head, r) if r.ballot_id in inflight else {}[r.ballot_id]

    wrong(exs.apply_rule_ex, lookup, "[ballot fenced out earlier, echo below", "KeyError: 4")
    wrong(exs.apply_rule_ex, lambda r: None, "TypeError")
    wrong(exs.apply_rule_ex, lambda i, h, r: "nope", "'nope' is not a decision")


def test_apply_rule_sees_every_outcome() -> None:
    note = exs.apply_rule_ex.check(decide).message
    assert "all 54 boundary cases" in note
    for outcome in ("commit", "stale_base", "stale_watermark", "unknown_ballot"):
        assert outcome in note


# --- notebooks ------------------------------------------------------------------------------
# execute_notebook raises on any cell error, so what is left to assert is what each check cell
# printed: every exercise's feedback, in order, with the status the notebook should show.

CELL_TIMEOUT = 60


def lesson_of(path: Path) -> int:
    return int(path.name[2:4])


def check_feedback(nb: Any) -> list[tuple[str, str]]:
    """(the check call, the text it printed) for each check cell of an executed notebook."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code" and ".check(" in cell.source:
            texts = [
                out.get("text") or out.get("data", {}).get("text/plain", "") for out in cell.outputs
            ]
            found.append((cell.source.strip(), "".join(texts)))
    return found


def assert_every_check_says(nb: Any, status: str, lesson: int) -> None:
    """One check cell per exercise of the lesson, in order, each printing `status` first."""
    feedback = check_feedback(nb)
    names = [n for n, e in BY_NAME.items() for want in exs.by_lesson[lesson] if e is want]
    order = {e.name: k for k, e in enumerate(exs.by_lesson[lesson])}
    names.sort(key=lambda n: order[BY_NAME[n].name])
    assert [call.split(".check(")[0] for call, _ in feedback] == names, feedback
    off = [(call, text) for call, text in feedback if not text.startswith(status)]
    assert not off, f"checks that did not say {status!r}: {off}"


def test_there_are_solution_notebooks() -> None:
    assert [p.name for p in SOLUTIONS] == [
        "ex01_max_and_orphans.ipynb",
        "ex02_frontier_sql.ipynb",
        "ex03_partial_index.ipynb",
        "ex04_ballots.ipynb",
        "ex05_lww_and_late_ticks.ipynb",
        "ex06_restart.ipynb",
        "ex07_commit_order.ipynb",
        "ex08_guarded_writes.ipynb",
        "ex10_audit.ipynb",
    ]


def test_solution_notebooks_link_their_lesson_and_hide_no_starter_in_markdown() -> None:
    for path in SOLUTIONS:
        nb = nbformat.read(path, as_version=4)
        lesson = next((ROOT / "notebooks").glob(f"{path.name[2:4]}_*.ipynb"))
        assert f"../../notebooks/{lesson.name}" in nb.cells[0].source
        assert "../../docs/glossary.md" in nb.cells[0].source
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                assert "def " not in cell.source and "```" not in cell.source, path.name


@pytest.mark.notebooks
def test_a_wrong_answer_in_a_solution_notebook_fails_the_assertion(tmp_path: Path) -> None:
    nb = nbformat.read(SOLUTIONS[0], as_version=4)
    (cell,) = [c for c in nb.cells if 'prediction = {"frontier": 3' in c.source]
    cell.source = cell.source.replace('"frontier": 3', '"frontier": 5')
    path = tmp_path / "wrong.ipynb"
    nbformat.write(nb, path)
    executed = execute_notebook(path, timeout=CELL_TIMEOUT, cwd=tmp_path)
    with pytest.raises(
        AssertionError, match="predict_frontier_ex.check.*Not yet.*can still change"
    ):
        assert_every_check_says(executed, CORRECT, 1)


@pytest.mark.notebooks
@pytest.mark.parametrize("path", SOLUTION_RUNS)
def test_the_student_copy_starts_not_attempted_and_the_solution_is_all_correct(
    path: Path, tmp_path: Path
) -> None:
    """The student copy made from the solution notebook runs first (every check says not
    attempted), then the solution itself (every check correct), in one kernel: between them the
    kernel forgets every name (`%reset -f`) and moves to a directory of its own. What the copy
    leaves cannot make the solution pass: it defines what the solution defines, minus the
    answers. (Two kernels cost 16 start-ups and imports of labkit per test run; this, 8.)"""
    src = tmp_path / "solutions"
    src.mkdir()
    shutil.copy(path, src)
    (copy,) = make_student_copies(src, tmp_path / "student")
    assert copy.name == path.name
    text = copy.read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" not in text and "= ____  # your answer here" in text
    student, solution = (nbformat.read(p, as_version=4) for p in (copy, path))
    for cell in student.cells:  # the copy keeps the solution's cell ids; one notebook cannot
        cell.id = f"student-{cell.id}"
    (tmp_path / "student-run").mkdir()
    (tmp_path / "solution-run").mkdir()
    between = nbformat.v4.new_code_cell(
        f"import os\nos.chdir({str(tmp_path / 'solution-run')!r})\n%reset -f"
    )
    both = nbformat.v4.new_notebook(
        cells=[*student.cells, between, *solution.cells], metadata=solution.metadata
    )
    nbformat.write(both, tmp_path / "both.ipynb")
    ran = execute_notebook(
        tmp_path / "both.ipynb", timeout=CELL_TIMEOUT, cwd=tmp_path / "student-run"
    )
    k = len(student.cells)
    assert not ran.cells[k].outputs  # the reset said nothing
    student.cells, solution.cells = ran.cells[:k], ran.cells[k + 1 :]
    assert_every_check_says(student, BLANK, lesson_of(copy))
    assert_every_check_says(solution, CORRECT, lesson_of(path))
    if path.name in REVEALS:  # Run All on the blank copy shows nothing a prediction asks for
        answer = REVEALS[path.name]
        assert answer not in _printed(student) and "Predict first" in _printed(student)
        assert answer in _printed(solution)


# Text a cell prints only once the learner has predicted (the answer to that prediction).
REVEALS = {"ex07_commit_order.ipynb": "orphaned by the no-wait frontier"}


def _printed(nb: Any) -> str:
    """Everything the code cells of executed notebook `nb` printed."""
    return "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )


def test_no_orphan_message_names_an_id() -> None:
    """The review's case: start with every id and drop the one each message names; that found
    the answer in 4 tries. No message names a wrong id now, whichever ids are wrong."""
    for said in ({1, 2, 3, 4, 6}, {1, 2, 4}, {1, 2, 4, 6, 7}, set(range(1, 8))):
        exs.max_orphans_ex.reset()
        fb = exs.max_orphans_ex.check(said)
        assert not fb.passed and not re.search(r"\bids? \d", fb.message), fb


def test_max_orphans_shape_example_holds_no_orphan() -> None:
    example = re.search(r"shaped like (\{[\d, ]+\})", exs.max_orphans_ex.question)
    assert example, exs.max_orphans_ex.question
    assert not eval(example.group(1)) & {1, 2, 4, 6}  # noqa: S307 - our own literal
    assert "{2, 9}" not in exs.max_orphans_ex.check("1, 2").message


LAST_FINISHED = (
    "SELECT COALESCE((SELECT MAX(c.id) FROM conversations c WHERE c.channel_key = :shard "
    "AND c.id > :base AND NOT EXISTS (SELECT 1 FROM conversations o WHERE o.channel_key = :shard "
    "AND o.id > :base AND o.id <= c.id AND o.status IN ('pending', 'leased', 'running', "
    "'retrying'))), :base)"
)


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        (  # the last finished row of the shard, not the boundary below the first open row
            LAST_FINISHED,
            "ids of other shards in between count as passed",
        ),
        (FRONTIER_SQL.replace(":shard", "$shard"), "writes $shard; a parameter here is written"),
        (FRONTIER_SQL.replace(":shard", "@shard"), "writes @shard"),
        (FRONTIER_SQL.replace(":base", "0"), "never uses :base; use the parameter :base"),
        (
            FRONTIER_SQL.replace("channel_key = :shard", "channel_key = ':shard'", 1),
            "':shard' in quotes: that is the text",
        ),
    ],
)
def test_frontier_sql_misdiagnoses_fixed(sql: str, needle: str) -> None:
    fb = wrong(exs.frontier_sql_ex, sql, needle)
    assert "every row between it and the shard's end is finished" not in fb.message
    assert "instead of writing" not in fb.message


@pytest.mark.parametrize(
    ("sql", "in_list"),
    [
        (
            "CREATE INDEX i ON conversations(tenant, channel_key, id)"
            " WHERE status IN ('running', 'pending', 'retrying')",
            True,
        ),
        (
            "CREATE INDEX i ON conversations(tenant, channel_key, id)"
            " WHERE status = 'pending' OR status = 'retrying' OR status = 'running'",
            False,
        ),
    ],
)
def test_index_in_list_advice_only_for_an_in_list(sql: str, in_list: bool) -> None:
    fb = wrong(exs.partial_index_ex, sql, "does not use i", "implies the index's")
    assert ("for an IN list" in fb.message) is in_list, fb.message


CRASH_SCHEDULE = [
    "timeout",
    "timeout",
    "deliver 22",
    "crash",
    "deliver 23",
    "deliver 20",
    "deliver 21",
]


@pytest.mark.parametrize("design", ["ballot", "fenced", "pipelined"])
def test_a_schedule_with_a_crash_settles_on_every_safe_design(design: str) -> None:
    """The participant's case: settling after a crash and restart replayed a request id never
    sent ('deliver -5'); the closing question refused a valid schedule containing 'crash'."""
    res = run_schedule(design, CRASH_SCHEDULE, settle=True, **catalog.CLOSING)
    assert not res.rewinds and any(o.kind == Kind.CRASH for o in res.outcomes)


def test_the_closing_question_judges_a_schedule_with_a_crash() -> None:
    fb = exs.closing_question_ex.check({"schedule": CRASH_SCHEDULE, "decision": "reject"})
    assert fb.passed, fb


def test_numpy_strings_are_read_where_the_meaning_is_clear() -> None:
    steps = np.array(["deliver 1", "timeout", "deliver 3", "deliver 4", "deliver 2"])
    assert exs.lww_rewind_ex.check(steps).passed
    schedule = np.array(CRASH_SCHEDULE)
    fb = exs.closing_question_ex.check({"schedule": schedule, "decision": np.str_("reject")})
    assert fb.passed, fb
    verdicts = {k: np.str_(v) for k, v in VERDICTS.items()}
    assert exs.rejection_reasons_ex.check(verdicts).passed


def test_a_str_enum_decision_is_read_as_its_value() -> None:
    decision = enum.StrEnum("Decision", {v.upper(): v for v in set(VERDICTS.values())})
    assert exs.rejection_reasons_ex.check({k: decision(v) for k, v in VERDICTS.items()}).passed


@pytest.mark.parametrize("name", ["rejection_reasons_ex", "crash_verdicts_ex"])
def test_a_verdict_variant_plays_the_loop_when_drawn_not_at_each_check(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The loop's decisions for a scenario never change, so checking answers replays nothing
    (crash_verdicts_ex rebuilt a store on disk at every check: 13 s for a blind learner's 225)."""
    played: list[int] = []
    real = catalog._play_verdicts
    monkeypatch.setattr(catalog, "_play_verdicts", lambda *a: played.append(1) or real(*a))
    monkeypatch.setattr(kit, "VARIANT_AFTER", 10**9)  # no fresh variant after a wrong streak
    ex = getattr(exs, name)
    monkeypatch.setattr(ex, "_drawn", {})  # an earlier test in this process may have drawn it
    ex.new_variant()
    drawn = len(played)
    assert drawn >= 1
    for label in ("commit", "stale_base", "unknown_ballot"):
        ex.check({k: label for k in "XABCDE"})
    ex.check(eval(ex.solution().message.rsplit("answer = ", 1)[1]))  # noqa: S307 - our own text
    assert len(played) == drawn
