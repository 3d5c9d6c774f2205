"""The instructor page's generated tables: the reading table and the two day plans.

`python -m labkit.docs.instructor_page` rewrites the generated blocks of docs/instructor.md from
the notebooks as they stand and docs/measured.json; `--check` exits 1 (naming the blocks) when
the page is out of date, which a test runs. The plans are data here: per notebook, the
sections shown by their headings; everything else in the notebook is named as skipped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labkit.docs.day_plans import (
    PAGE,
    REPO,
    Exercises,
    Lesson,
    Pause,
    Plan,
    PlanError,
    fill,
    load_measured,
    render_plan,
    render_reading_table,
)
from labkit.exercises import catalog as ex_catalog
from labkit.exercises import frontier as ex_frontier
from labkit.exercises import kit
from labkit.files import replace_file

LESSONS = tuple(p.stem for p in sorted((REPO / "notebooks").glob("[0-9][0-9]*_*.ipynb")))
SOLUTIONS = tuple(
    p.stem for p in sorted((REPO / "exercises" / "solutions").glob("ex[0-9][0-9]_*.ipynb"))
)

CORE = Plan(
    "The 90-minute core path",
    (
        Lesson("00_start_here", ("Bug 1 in one picture",), "bug 2's picture waits for 04"),
        Lesson(
            "01_max_is_not_a_watermark",
            ("(opening)", "The log", "The experiment", "Predict, then reveal", "What this taught"),
        ),
        Pause("the room answers 01's two questions", 2),
        Exercises("ex01_max_and_orphans", ("predict_frontier_ex",), "max_orphans_ex is homework"),
        Lesson(
            "02_gap_free_frontier",
            ("(opening)", "The rule", "Every edge case, run live", "What this taught"),
        ),
        Pause("poll the room on the edge cases", 3),
        Lesson("03_triggers_shards_indexes", (), "reading after the day"),
        Pause("break", 5),
        Lesson(
            "04_late_tick_rewinds",
            (
                "(opening)",
                "Ballots and the watermark",
                "Article 2's story, with one set of numbers",
                "When does a ballot leave flight?",
            ),
        ),
        Exercises("ex04_ballots", ("rejection_reasons_ex",), "apply_rule_ex is homework"),
        Lesson("05_five_designs", ("(opening)", "Try it", "Article 2's closing question")),
        Lesson("05b_pipelined_ballots", (), "reading after the day"),
        Lesson("06_crashes_and_restarts", (), "reading after the day"),
        Pause("wrap-up: one discussion question", 8),
    ),
    limit=90,
)

HALF_DAY = Plan(
    "The half-day path",
    (
        Lesson(
            "00_start_here",
            (
                "(opening)",
                "The two bugs in a few lines",
                "Bug 1 in one picture",
                "Bug 2 in one picture",
            ),
        ),
        Lesson(
            "01_max_is_not_a_watermark",
            ("(opening)", "The log", "The experiment", "Predict, then reveal", "What this taught"),
        ),
        Exercises("ex01_max_and_orphans", ("predict_frontier_ex", "max_orphans_ex")),
        Lesson(
            "02_gap_free_frontier",
            (
                "(opening)",
                "The rule",
                "Every edge case, run live",
                "Terminal is forever",
                "A warning for PostgreSQL",
                "What this taught",
            ),
        ),
        Exercises("ex02_frontier_sql", ("frontier_sql_ex",)),
        Lesson(
            "03_triggers_shards_indexes",
            (
                "(opening)",
                "Two ways to ask",
                "What the global poll costs",
                "One index per predicate, proved by the plan",
                "What this taught",
            ),
        ),
        Exercises("ex03_partial_index", ("partial_index_ex",)),
        Pause("break", 15),
        Lesson(
            "04_late_tick_rewinds",
            (
                "(opening)",
                "Model and assumptions",
                "Ballots and the watermark",
                "Article 2's story, with one set of numbers",
                "When does a ballot leave flight?",
                "Article 2's four failure classes, each refused with a reason",
            ),
        ),
        Exercises("ex04_ballots", ("rejection_reasons_ex", "apply_rule_ex")),
        Pause("break", 10),
        Lesson(
            "05_five_designs",
            (
                "(opening)",
                "Try it",
                "All faults at once",
                "Article 2's closing question",
                "Compare-and-set: enough for what?",
            ),
        ),
        Exercises("ex05_lww_and_late_ticks", ("lww_rewind_ex", "closing_question_ex")),
        Lesson("05b_pipelined_ballots", ("(opening)", "Pipelined ballots", "The flush")),
        Lesson(
            "06_crashes_and_restarts",
            (
                "(opening)",
                "A reader that remembers",
                "Crash 1: the loop dies while the planner call is in flight",
                "Crash 2: the loop dies in the middle of a commit",
                "Crash 3: the late answer arrives after newer work committed",
            ),
        ),
        Exercises("ex06_restart", ("crash_verdicts_ex",)),
        Pause("wrap-up and discussion", 10),
    ),
    limit=240,
)
PLANS = {"plan-core": CORE, "plan-half-day": HALF_DAY}

_OPEN = "status IN ('pending', 'leased', 'running', 'retrying')"
_FRONTIER_SQL = (  # a learner's answer as typed: text the check runs in its sandbox
    "SELECT COALESCE((SELECT MIN(id) - 1 FROM conversations WHERE channel_key = :shard "
    "AND id > :base AND status IN ('pending', 'leased', 'running', 'retrying')), "
    "(SELECT MAX(id) FROM conversations WHERE id > :base AND channel_key = :shard), :base)"
)
_INDEX = "CREATE INDEX i ON conversations(tenant, channel_key, id)"
_RETRYING_FIRST = " WHERE status IN ('retrying', 'pending', 'running')"
_VERDICTS = {"A": "unknown_ballot", "B": "stale_base", "C": "commit", "D": "stale_watermark"}
_CLOSING = ["timeout", "timeout", "deliver 22", "deliver 23", "deliver 20", "deliver 21"]
_RESTART = {"X": 4, "A": "unknown_ballot", "B": "commit", "C": "stale_watermark"}


def _accepts_ahead(inflight: dict[int, int], head: int, response: object) -> str | None:
    """The starter rule: commit any body not behind the head."""
    return None if response.base_version >= head else "stale_base"  # type: ignore[attr-defined]


COMMON_WRONG: tuple[tuple[str, str, object], ...] = (
    ("predict_frontier_ex", "frontier 1", {"frontier": 1, "max_watermark": 5}),
    ("predict_frontier_ex", "frontier 4", {"frontier": 4, "max_watermark": 5}),
    ("predict_frontier_ex", "MAX 3", {"frontier": 3, "max_watermark": 3}),
    ("max_orphans_ex", "`{1, 2}`", {1, 2}),
    ("max_orphans_ex", "`set()`", set()),
    ("frontier_sql_ex", "notebook 02's statuses", _FRONTIER_SQL.replace(", 'leased'", "")),
    (
        "frontier_sql_ex",
        "`status <> 'delivered'`",
        _FRONTIER_SQL.replace(_OPEN, "status <> 'delivered'"),
    ),
    ("partial_index_ex", "no WHERE", _INDEX),
    ("partial_index_ex", "the statuses in another order", _INDEX + _RETRYING_FIRST),
    ("rejection_reasons_ex", "B = commit", {**_VERDICTS, "B": "commit", "E": "stale_watermark"}),
    ("rejection_reasons_ex", "E = commit", {**_VERDICTS, "E": "commit"}),
    ("apply_rule_ex", "the starter rule", _accepts_ahead),
    ("lww_rewind_ex", "notebook 05's order", ["timeout", "deliver 2", "deliver 3", "deliver 1"]),
    (
        "closing_question_ex",
        "decision 'compensate'",
        {"schedule": _CLOSING, "decision": "compensate"},
    ),
    ("closing_question_ex", "decision 'replay'", {"schedule": _CLOSING, "decision": "replay"}),
    ("crash_verdicts_ex", "X = 3", {**_RESTART, "D": "unknown_ballot", "X": 3}),
    ("crash_verdicts_ex", "X = `'4'`", {**_RESTART, "D": "unknown_ballot", "X": "4"}),
)
"""Typical wrong answers to parts one and two, each checked on the exercise as a fresh kernel
asks it (variant 0); the page quotes what the check says."""


def render_feedback() -> str:
    """The quoted feedback table: each common wrong answer run through its exercise's check."""
    lines = ["| exercise | common wrong answer | the check says |", "|---|---|---|"]
    for name, label, answer in COMMON_WRONG:
        ex = getattr(ex_frontier, name, None) or getattr(ex_catalog, name)
        try:
            ex.current().checker(answer)
        except kit.Wrong as exc:
            said = " ".join(str(exc).split()).replace("|", "\\|")
        else:
            raise kit.Wrong(f"{name}: the page's wrong answer {label!r} passes its check")
        lines.append(f"| `{name}` | {label} | {said} |")
    return "\n".join(lines) + "\n"


def blocks(repo: Path = REPO) -> dict[str, str]:
    """Every generated block of the page, by name, rendered from the notebooks as they stand."""
    measured = load_measured(repo / "docs" / "measured.json")
    out = {"reading": render_reading_table(LESSONS + SOLUTIONS, measured, repo)}
    out.update({name: render_plan(plan, measured, repo) for name, plan in PLANS.items()})
    out["feedback"] = render_feedback()
    out["solutions"] = (
        "The worked answers, for you and not for the room: "
        + ", ".join(f"[{s.split('_')[0]}](../exercises/solutions/{s}.ipynb)" for s in SOLUTIONS)
        + ".\n"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    page = args.page.read_text(encoding="utf-8")
    try:
        new = fill(page, blocks())
    except PlanError as exc:
        print(f"{args.page}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if new != page:
            print(
                f"{args.page}: generated tables are out of date; run "
                "`.venv/bin/python -m labkit.docs.instructor_page`",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != page:
        replace_file(args.page, new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
