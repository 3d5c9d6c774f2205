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
    fill,
    load_measured,
    render_plan,
    render_reading_table,
)
from labkit.files import replace_file

LESSONS = tuple(p.stem for p in sorted((REPO / "notebooks").glob("[0-9][0-9]*_*.ipynb")))
SOLUTIONS = tuple(
    p.stem for p in sorted((REPO / "exercises" / "solutions").glob("ex[0-9][0-9]_*.ipynb"))
)

CORE = Plan(
    "The 90-minute core path",
    (
        Lesson("00_start_here", ("Bug 1 in one picture", "Bug 2 in one picture")),
        Lesson(
            "01_max_is_not_a_watermark",
            ("(opening)", "The log", "The experiment", "Predict, then reveal", "What this taught"),
        ),
        Exercises("ex01_max_and_orphans", ("predict_frontier_ex",), "max_orphans_ex is homework"),
        Lesson(
            "02_gap_free_frontier",
            ("(opening)", "The rule", "Every edge case, run live", "What this taught"),
        ),
        Lesson("03_triggers_shards_indexes", ()),
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
        Lesson(
            "06_crashes_and_restarts",
            ("Crash 1: the loop dies while the planner call is in flight",),
        ),
        Pause("wrap-up: one discussion question", 5),
    ),
    limit=90,
)

HALF_DAY = Plan(
    "The half-day path",
    (
        Lesson("00_start_here"),
        Lesson("01_max_is_not_a_watermark"),
        Exercises("ex01_max_and_orphans", ("predict_frontier_ex", "max_orphans_ex")),
        Lesson("02_gap_free_frontier"),
        Exercises("ex02_frontier_sql", ("frontier_sql_ex",)),
        Lesson("03_triggers_shards_indexes"),
        Exercises("ex03_partial_index", ("partial_index_ex",)),
        Pause("break", 15),
        Lesson("04_late_tick_rewinds"),
        Exercises("ex04_ballots", ("rejection_reasons_ex", "apply_rule_ex")),
        Pause("break", 10),
        Lesson("05_five_designs"),
        Exercises("ex05_lww_and_late_ticks", ("lww_rewind_ex", "closing_question_ex")),
        Lesson("06_crashes_and_restarts"),
        Exercises("ex06_restart", ("crash_verdicts_ex",)),
        Pause("wrap-up and discussion", 10),
    ),
    limit=240,
)
PLANS = {"plan-core": CORE, "plan-half-day": HALF_DAY}


def blocks(repo: Path = REPO) -> dict[str, str]:
    """Every generated block of the page, by name, rendered from the notebooks as they stand."""
    measured = load_measured(repo / "docs" / "measured.json")
    out = {"reading": render_reading_table(LESSONS + SOLUTIONS, measured, repo)}
    out.update({name: render_plan(plan, measured, repo) for name, plan in PLANS.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    page = args.page.read_text(encoding="utf-8")
    new = fill(page, blocks())
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
