"""Workshop exercises: each checker accepts a right answer, explains typical wrong ones, never
shows a traceback; the solution notebooks check out and their student copies start blank."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbrun import execute_notebook

from labkit import exercises as exs
from labkit import frontier as fr
from labkit.ballot import Response, WatermarkLoop
from labkit.exercises import ____, ex2_ballots, sandbox
from labkit.exercises.kit import Exercise, Feedback
from labkit.nbfiles import make_student_copies

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
CORRECT, INCORRECT, BLANK = "✓ Correct", "✗ Not yet", "○ Not attempted"

FRONTIER_SQL = """
SELECT COALESCE(
  (SELECT MIN(id) - 1 FROM conversations
    WHERE channel_key = :shard AND id > :base AND status IN ('pending','running')),
  (SELECT MAX(id) FROM conversations WHERE channel_key = :shard AND id > :base),
  :base)  -- trailing comment; and a semicolon
;"""
MAX_RULE_SQL = (
    "SELECT MAX(id) FROM conversations "
    "WHERE channel_key = :shard AND status = 'delivered' AND :base >= 0"
)
PARTIAL_INDEX = (
    "CREATE INDEX idx_open ON conversations(channel_key, id) WHERE status IN ('pending','running')"
)
CLOSING = ["timeout", "deliver 13", "deliver 14", "deliver 12", "deliver 14"]
VERDICTS = {
    "A": "unknown_ballot",
    "B": "stale_base",
    "C": "commit",
    "D": "stale_watermark",
    "E": "stale_watermark",
}


def decide(inflight: dict[int, int], head: int, response: Response) -> str | None:
    if response.ballot_id not in inflight:
        return "unknown_ballot"
    observed = inflight[response.ballot_id]
    if observed != head or response.observed_watermark != observed:
        return "stale_watermark"
    if response.base_version != head:
        return "stale_base"
    return None


def seed_sketch_rule(inflight: dict[int, int], head: int, response: Response) -> str | None:
    return "stale_base" if response.base_version + 1 < head else None


def base_before_watermark(inflight: dict[int, int], head: int, response: Response) -> str | None:
    if response.ballot_id not in inflight:
        return "unknown_ballot"
    if response.base_version != head:
        return "stale_base"
    if inflight[response.ballot_id] != head:
        return "stale_watermark"
    return None


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
    "lww_rewind_ex": ["timeout", "deliver 2", "deliver 3", "deliver 1"],
    "closing_question_ex": {"schedule": CLOSING, "decision": "reject"},
    "apply_rule_ex": decide,
}
ALL = exs.part1 + exs.part2
BY_NAME = {name: getattr(exs, name) for name in RIGHT}


def test_parts_have_at_least_three_exercises_each() -> None:
    assert len(exs.part1) >= 3 and len(exs.part2) >= 3
    assert sorted(e.name for e in ALL) == sorted(e.name for e in BY_NAME.values())


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


@pytest.mark.parametrize("ex", ALL, ids=lambda e: e.name)
def test_hint_and_solution_are_text(ex: Exercise) -> None:
    assert ex.hint().status == "hint" and len(ex.hint().message) > 20
    assert ex.solution().status == "solution" and len(ex.solution().message) > 20


# --- part one -------------------------------------------------------------------------------


def test_frontier_sql_max_rule_passes_a_pending_id() -> None:
    wrong(
        exs.frontier_sql_ex,
        MAX_RULE_SQL,
        "on shard 'late'",
        "with base 0 your query returned 12, the frontier is 7: it passed the pending id 8",
    )


def test_frontier_sql_without_fallback_returns_null() -> None:
    only_min = (
        "SELECT MIN(id) - 1 FROM conversations "
        "WHERE channel_key = :shard AND id > :base AND status IN ('pending','running')"
    )
    wrong(exs.frontier_sql_ex, only_min, "returned None", "frontier stays at the base")


def test_frontier_sql_that_lets_failed_block() -> None:
    blocks = FRONTIER_SQL.replace("status IN ('pending','running')", "status <> 'delivered'")
    wrong(exs.frontier_sql_ex, blocks, "failed is terminal")


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


def test_learner_plan_is_explained_under_the_read_only_authorizer(monkeypatch) -> None:
    seen: list[Any] = []
    real = fr.explain

    def spy(conn, sql, params=(), authorizer=None):
        seen.append(authorizer)
        return real(conn, sql, params, authorizer=authorizer)

    monkeypatch.setattr(fr, "explain", spy)
    assert exs.frontier_sql_ex.check(FRONTIER_SQL).passed
    assert seen and all(a is sandbox.read_only for a in seen)


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
        (fr, "delivered_frontier", "frontier_sql_ex", FRONTIER_SQL),
        (ex2_ballots, "run_schedule", "lww_rewind_ex", ["timeout", "deliver 2"]),
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
    monkeypatch.setattr(fr, "delivered_frontier", _broken)  # now the checker itself is broken
    wrong(exs.frontier_sql_ex, "SELECT frob(:shard, :base)", "no such function: frob")
    with pytest.raises(RuntimeError, match="labkit bug"):
        exs.frontier_sql_ex.check(FRONTIER_SQL)


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ({"frontier": 1, "max_watermark": 5}, "id 2 is failed"),
        ({"frontier": 5, "max_watermark": 5}, "id 4 is still pending"),
        ({"frontier": 3, "max_watermark": 6}, "delivered ids are 1, 3, 5"),
        ({"frontier": 3}, "'max_watermark'"),
        ({"frontier": "3", "max": 5}, "whole number"),
        ([3, 5], "dict"),
    ],
)
def test_predict_frontier_messages(answer: Any, needle: str) -> None:
    wrong(exs.predict_frontier_ex, answer, needle)


def test_predict_frontier_accepts_max_key() -> None:
    assert exs.predict_frontier_ex.check({"frontier": 3, "max": 5}).passed


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("CREATE INDEX i ON conversations(channel_key, id)", "make it partial"),
        ("CREATE INDEX i ON conversations(channel_key)", "put id right after channel_key"),
        (
            "CREATE INDEX i ON conversations(channel_key, id) WHERE status = 'pending'",
            "does not use i",
        ),
        (
            "CREATE INDEX i ON conversations(id, channel_key) WHERE status IN ('pending','running')",
            "lead the index with channel_key",
        ),
        ("CREATE INDEX i ON conversations(status, channel_key, id)", "make it partial"),
        ("DROP TABLE conversations", "one CREATE INDEX"),
        ("CREATE INDEX i ON nowhere(x)", "no such table"),
        ("CREATE INDEX i ON conversations(channel_key, id); DROP TABLE conversations", "single"),
    ],
)
def test_partial_index_messages(sql: str, needle: str) -> None:
    wrong(exs.partial_index_ex, sql, needle)


def test_partial_index_plan_is_named_in_the_note() -> None:
    fb = exs.partial_index_ex.check(PARTIAL_INDEX)
    assert "SEARCH conversations USING INDEX idx_open (channel_key=? AND id>?)" in fb.message


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ([1, 2], "id 4 is an orphan too: after 'deliver #5' MAX coverage jumped to 5"),
        ({1, 2, 3, 4, 6}, "id 3 is not an orphan"),
        ({1, 2, 4, 6, 9}, "there is no id 9"),
        (4, "list or set"),
        (["1"], "not an id"),
    ],
)
def test_max_orphans_messages(answer: Any, needle: str) -> None:
    wrong(exs.max_orphans_ex, answer, needle)


# --- part two -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"B": "stale_watermark"}, "response B (ballot 3, observed watermark 1, base 0)"),
        ({"E": "commit"}, "ballot 3 observed watermark 1, but the head has moved to 2"),
        ({"A": None}, "ballot 1 already left flight (it committed version 1)"),
        ({"D": "stale_base"}, "observed watermark 0, but the head has moved to 2"),
        ({"C": "stale_base"}, "is in flight"),
        ({"C": "stale"}, "'stale' is not a decision"),
    ],
)
def test_rejection_reason_messages(change: dict[str, Any], needle: str) -> None:
    wrong(exs.rejection_reasons_ex, {**VERDICTS, **change}, needle)


def test_rejection_reasons_need_every_label() -> None:
    wrong(exs.rejection_reasons_ex, {"A": "unknown_ballot"}, "missing: B, C, D, E")


def test_rejection_reasons_accept_none_for_commit() -> None:
    assert exs.rejection_reasons_ex.check({**VERDICTS, "C": None}).passed


@pytest.mark.parametrize(
    ("steps", "needle"),
    [
        (["deliver 1", "deliver 2", "deliver 1"], "does rewind the callback design"),
        (["deliver 1", "deliver 2"], "never saw the head fall"),
        (["deliver 9"], "request 9 has not been sent"),
        (["jump 1"], "'jump 1'"),
        ("deliver 1", "list of steps"),
        ([], "empty"),
        (["deliver 1"] * 25, "far fewer"),
    ],
)
def test_lww_rewind_messages(steps: Any, needle: str) -> None:
    wrong(exs.lww_rewind_ex, steps, needle)


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ({"schedule": CLOSING, "decision": "compensate"}, "nothing to compensate"),
        ({"schedule": CLOSING, "decision": "replay"}, "NEW ballot"),
        ({"schedule": CLOSING, "decision": "shrug"}, "must be one of"),
        ({"schedule": ["timeout", "deliver 12"], "decision": "reject"}, "never committed"),
        (
            {"schedule": ["timeout", "deliver 13", "deliver 12"], "decision": "reject"},
            "never delivers 14",
        ),
        (
            {
                "schedule": ["timeout", "deliver 13", "deliver 12", "deliver 14"],
                "decision": "reject",
            },
            "no naive design rewinds",
        ),
        ({"schedule": ["deliver 15"], "decision": "reject"}, "request 15 has not been sent"),
        ({"decision": "reject"}, "'schedule'"),
        (CLOSING, "'schedule'"),
    ],
)
def test_closing_question_messages(answer: Any, needle: str) -> None:
    wrong(exs.closing_question_ex, answer, needle)


def test_closing_question_accepts_a_pair() -> None:
    assert exs.closing_question_ex.check((CLOSING, "Reject")).passed


def test_apply_rule_seed_sketch_is_caught() -> None:
    wrong(
        exs.apply_rule_ex,
        seed_sketch_rule,
        "your rule said 'commit', WatermarkLoop.apply said 'unknown_ballot'",
    )


def test_apply_rule_check_order_matters() -> None:
    wrong(exs.apply_rule_ex, base_before_watermark, "WatermarkLoop.apply said 'stale_watermark'")


def test_apply_rule_that_raises_or_has_wrong_arity() -> None:
    wrong(exs.apply_rule_ex, lambda inflight, head, r: inflight[r.ballot_id], "KeyError")
    wrong(exs.apply_rule_ex, lambda r: None, "TypeError")
    wrong(exs.apply_rule_ex, lambda i, h, r: "nope", "'nope' is not a decision")


def test_apply_rule_sees_every_outcome() -> None:
    note = exs.apply_rule_ex.check(decide).message
    for outcome in ("commit", "stale_base", "stale_watermark", "unknown_ballot"):
        assert outcome in note


# --- notebooks ------------------------------------------------------------------------------
# execute_notebook raises on any cell error, so what is left to assert is what each check cell
# printed: every exercise's feedback, in order, with the status the notebook should show.

CELL_TIMEOUT = 60
CHECKS_PER_NOTEBOOK = 4


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


def assert_every_check_says(nb: Any, status: str) -> None:
    """Every check cell printed one feedback line starting with `status`; there are four."""
    feedback = check_feedback(nb)
    assert len(feedback) == CHECKS_PER_NOTEBOOK, feedback
    off = [(call, text) for call, text in feedback if not text.startswith(status)]
    assert not off, f"checks that did not say {status!r}: {off}"


def test_there_are_solution_notebooks() -> None:
    assert [p.name for p in SOLUTIONS] == ["ex1_frontier.ipynb", "ex2_ballots.ipynb"]


@pytest.mark.notebooks
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_solution_notebook_checks_are_all_correct(path: Path, tmp_path: Path) -> None:
    nb = execute_notebook(path, timeout=CELL_TIMEOUT, cwd=tmp_path)  # not saved; runs in tmp
    assert_every_check_says(nb, CORRECT)


@pytest.mark.notebooks
def test_a_wrong_answer_in_a_solution_notebook_fails_the_assertion(tmp_path: Path) -> None:
    nb = nbformat.read(SOLUTIONS[0], as_version=4)
    (cell,) = [c for c in nb.cells if "prediction = {'frontier': 3" in c.source]
    cell.source = cell.source.replace("'frontier': 3", "'frontier': 5")
    path = tmp_path / "wrong.ipynb"
    nbformat.write(nb, path)
    executed = execute_notebook(path, timeout=CELL_TIMEOUT, cwd=tmp_path)
    with pytest.raises(AssertionError, match="predict_frontier_ex.check.*Not yet.*id 4"):
        assert_every_check_says(executed, CORRECT)


@pytest.mark.notebooks
def test_student_copies_start_not_attempted(tmp_path: Path) -> None:
    src = tmp_path / "solutions"
    shutil.copytree(ROOT / "exercises" / "solutions", src)
    copies = make_student_copies(src, tmp_path / "student")
    assert [p.name for p in copies] == [p.name for p in SOLUTIONS]
    for path in copies:
        text = path.read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text and "= ____  # your answer here" in text
        nb = execute_notebook(path, timeout=CELL_TIMEOUT, cwd=tmp_path)
        assert_every_check_says(nb, BLANK)
