"""One learner's pass over exercises ex01-ex06, recorded: the instructor page's per-exercise times.

Each exercise is worked as a participant would, in the student copy: read its text, trace the
answer by hand, type it, run the check, read the feedback, open hints when stuck, try again.
`PASS` records the pass: the answers tried, in order (the mistakes are the common ones the
instructor page lists), and the hints opened. The script replays it through the real checks and
counts, per exercise, the words read (the exercise's markdown in the student copy, each hint
opened, each feedback line), the code lines typed or run, the checks run, and the steps the
answer needs traced by hand. Minutes = words at --wpm + lines at --secs-per-line + steps at
--secs-per-step; the first two paces are the instructor page's, the last is an assumption the
page states. Run from the repository root: `.venv/bin/python tests/learner_pass.py`.
Not a test: `--write` keeps the minutes in docs/measured.json, which the instructor page's
plans read (`python -m labkit.docs.instructor_page`).
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from apply_rules import decide
from worked_answers import AFTER_RESTART, CLOSING, FRONTIER_SQL, OPEN, PARTIAL_INDEX, VERDICTS

from labkit import exercises as exs
from labkit.docs.day_plans import save_measured
from labkit.docs.nbfiles import studentize_source

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "exercises" / "solutions"


def first_rule(inflight: dict[int, int], head: int, response: Any) -> str | None:
    """The pass's first commit rule: right in its decisions, wrong to evict on a stale base."""
    b = response.ballot_id
    if b not in inflight:
        return "unknown_ballot"
    observed = inflight[b]
    if observed != head:
        del inflight[b]
        return "stale_watermark"
    if response.observed_watermark != observed:
        return "stale_watermark"
    if response.base_version != head:
        del inflight[b]
        return "stale_base"
    del inflight[b]
    return None


@dataclass(frozen=True)
class Pass:
    """One exercise as the learner worked it: the answers tried, in order, the hints opened,
    and the steps its answer needs traced by hand (statuses, jumps, questions per response)."""

    attempts: tuple[Any, ...]
    hints: tuple[int, ...]
    steps: int


PASS: dict[str, Pass] = {
    # six statuses to write down, then the two answers
    "predict_frontier_ex": Pass(
        ({"frontier": 1, "max_watermark": 5}, {"frontier": 3, "max_watermark": 5}), (), 8
    ),
    # seven finishes, each: the new MAX and the open ids below it
    "max_orphans_ex": Pass(({1, 2}, {1, 2, 4}, {1, 2, 4, 6}), (), 7),
    # seven statuses to classify, three parts of the rule
    "frontier_sql_ex": Pass(
        (
            FRONTIER_SQL.replace(OPEN, "status IN ('pending', 'running')"),
            FRONTIER_SQL.replace(OPEN, "status IN ('pending', 'leased', 'running')"),
            FRONTIER_SQL,
        ),
        (),
        10,
    ),
    # which columns are '=' and which '>', the WHERE, reading the plan
    "partial_index_ex": Pass(
        (
            "CREATE PARTIAL_INDEX i ON conversations(channel_key, id) "
            "WHERE status IN ('pending', 'retrying', 'running')",
            PARTIAL_INDEX,
        ),
        (1,),
        4,
    ),
    # five responses, up to three questions each
    "rejection_reasons_ex": Pass(({**VERDICTS, "E": "commit"}, VERDICTS), (), 15),
    # four outcomes, two eviction decisions, the order of the tests
    "apply_rule_ex": Pass((first_rule, decide), (1, 2), 8),
    # reading the trial's labels, then five steps of a schedule
    "lww_rewind_ex": Pass(
        (
            ["deliver 1", "timeout", "deliver 3", "deliver 2"],
            ["deliver 1", "timeout", "deliver 3", "deliver 4", "deliver 2"],
        ),
        (1, 2),
        7,
    ),
    # six steps of the schedule, then the decision
    "closing_question_ex": Pass(
        (
            {
                "schedule": [*CLOSING[:3], "deliver 20", "deliver 21", "deliver 23"],
                "decision": "reject",
            },
            {"schedule": CLOSING, "decision": "reject, then replay"},
            {"schedule": CLOSING, "decision": "reject"},
        ),
        (1,),
        8,
    ),
    # the state the file keeps, X, then four responses, up to three questions each
    "crash_verdicts_ex": Pass(({**AFTER_RESTART, "X": 3}, AFTER_RESTART), (), 14),
}


def words(text: str) -> int:
    return len(text.split())


def answer_lines(answer: Any) -> int:
    """Lines a learner types for `answer`, as the student copy's answer cell holds it."""
    if callable(answer):
        return len([line for line in inspect.getsource(answer).splitlines() if line.strip()])
    if isinstance(answer, str):
        return len([line for line in answer.splitlines() if line.strip()])
    return max(1, math.ceil(len(repr(answer)) / 80))


def sections() -> dict[str, tuple[int, int]]:
    """Exercise name -> (words of markdown, lines of given code) in its student copy: the cells
    up to and including its check cell (the notebook's opening and closing cells go with its
    first and last exercise); solution blocks are blanked as `make exercises` blanks them."""
    out: dict[str, tuple[int, int]] = {}
    for path in sorted(SOLUTIONS.glob("ex0*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        text, lines, last = 0, 0, None
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                text += words(cell.source)
                continue
            source = studentize_source(cell.source)
            if ".check(" in source:
                last = source.split(".check(")[0].strip()
                out[last] = (text, lines)
                text, lines = 0, 0
            elif "____" not in source:
                lines += len([line for line in source.splitlines() if line.strip()])
        if last and (text or lines):
            t, c = out[last]
            out[last] = (t + text, c + lines)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wpm", type=float, default=130.0, help="words read a minute")
    parser.add_argument("--secs-per-line", type=float, default=10.0, help="seconds per code line")
    parser.add_argument("--secs-per-step", type=float, default=20.0, help="seconds per traced step")
    parser.add_argument(
        "--write", action="store_true", help="keep the minutes in docs/measured.json"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("LABKIT_PROGRESS", "off")  # a replayed pass is no learner's progress
    measured: dict[str, float] = {}
    given = sections()
    print("| exercise | words read | code lines | checks | hints | steps | minutes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, done in PASS.items():
        ex = getattr(exs, name)
        read, lines = given[name]
        read += sum(words(ex.hint(k).message) for k in done.hints)
        for k, answer in enumerate(done.attempts):
            fb = ex.check(answer)
            if fb.passed != (k == len(done.attempts) - 1):
                raise SystemExit(f"{name}: attempt {k + 1} gave {fb}")
            read += words(fb.message)
            lines += answer_lines(answer) if k == 0 else 1  # later tries edit one line
        minutes = (
            read / args.wpm + lines * args.secs_per_line / 60 + done.steps * args.secs_per_step / 60
        )
        print(
            f"| `{name}` | {read} | {lines} | {len(done.attempts)} | {len(done.hints)} | "
            f"{done.steps} | {minutes:.1f} |"
        )
        measured[name] = minutes
    if args.write:
        save_measured("exercise_minutes", measured)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
