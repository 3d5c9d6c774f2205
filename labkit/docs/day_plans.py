"""The instructor page's numbers and day plans, computed from the notebooks as they stand.

A notebook is cut into sections at its `## ` headings (the cells before the first one are its
opening). Each section costs a projected reading time at one pace: `WPM` words of prose a
minute plus `SECS_PER_LINE` seconds per non-blank code line. A day plan names, per notebook,
the sections it shows; the sections it skips are the rest, so a renamed or new section can
never go unmentioned. `docs/instructor.md` holds the rendered tables between
`<!-- BEGIN generated: NAME -->` and `<!-- END generated: NAME -->` lines;
`python -m labkit.docs.instructor_page` rewrites them and `--check` says whether they are current.
Measured values (kernel seconds from `harness/dry_run.py --write`, exercise minutes from
`tests/learner_pass.py --write`) are read from `docs/measured.json`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.files import replace_file
from labkit.paths import REPO

WPM = 130
"""Projected prose, words a minute."""
SECS_PER_LINE = 10
"""Seconds to run one line of code and look at what it printed."""
OPENING = "(opening)"
"""The name of the cells before a notebook's first `## ` heading."""
MEASURED = REPO / "docs" / "measured.json"
PAGE = REPO / "docs" / "instructor.md"
_HEADING = re.compile(r"^## +(.+?)\s*$", re.M)
_BLOCK = re.compile(
    r"(<!-- BEGIN generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)"
    r"(<!-- END generated: (?P=name) -->)",
    re.S,
)


class PlanError(ValueError):
    """A plan names a section or notebook that does not exist, or breaks its time limit."""


@dataclass(frozen=True)
class Section:
    """One `## ` section of a notebook: its prose words and non-blank code lines."""

    notebook: str
    title: str
    words: int
    code_lines: int

    @property
    def minutes(self) -> float:
        return self.words / WPM + self.code_lines * SECS_PER_LINE / 60


def sections(path: Path) -> list[Section]:
    """`path`'s sections in order; headings inside code cells do not count."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    counts: dict[str, list[int]] = {OPENING: [0, 0]}
    current = OPENING
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            parts = _HEADING.split(source)
            # parts: text before the first heading, then (title, text) pairs
            counts[current][0] += len(parts[0].split())
            for title, text in zip(parts[1::2], parts[2::2], strict=True):
                current = _unique(title, counts)
                counts[current] = [len(title.split()) + len(text.split()), 0]
        elif cell["cell_type"] == "code":
            counts[current][1] += sum(1 for line in source.splitlines() if line.strip())
    return [Section(path.stem, title, w, c) for title, (w, c) in counts.items()]


def _unique(title: str, seen: Mapping[str, Any]) -> str:
    """A repeated heading ("Try it" twice) gets its position: "Try it (2)"."""
    if title not in seen:
        return title
    n = 2
    while f"{title} ({n})" in seen:
        n += 1
    return f"{title} ({n})"


@dataclass(frozen=True)
class Lesson:
    """A notebook presented: `show` names its sections (all of them when None)."""

    stem: str
    show: tuple[str, ...] | None = None
    note: str = ""


@dataclass(frozen=True)
class Exercises:
    """An exercise notebook worked in the room: the named exercises, at the learner pass's pace."""

    stem: str
    names: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class Pause:
    """A break or the wrap-up: fixed minutes."""

    label: str
    minutes: int


Block = Lesson | Exercises | Pause


@dataclass(frozen=True)
class Plan:
    """A day plan: blocks in order, and the most minutes it may take."""

    name: str
    blocks: tuple[Block, ...]
    limit: int
    optional: tuple[Block, ...] = field(default=())


@dataclass(frozen=True)
class Row:
    """One rendered block: its minutes and what it shows and skips."""

    label: str
    minutes: int
    shown: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


def notebook_path(stem: str, repo: Path = REPO) -> Path:
    """A lesson or solution notebook by its stem ("04_late_tick_rewinds", "ex04_ballots")."""
    folder = repo / ("exercises/solutions" if stem.startswith("ex") else "notebooks")
    path = folder / f"{stem}.ipynb"
    if not path.is_file():
        raise PlanError(f"no notebook {path.relative_to(repo)}")
    return path


def load_measured(path: Path = MEASURED) -> dict[str, Any]:
    """The measured values: {"kernel_seconds": {stem: s}, "exercise_minutes": {name: min}}."""
    if not path.is_file():
        return {"kernel_seconds": {}, "exercise_minutes": {}}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected an object at the top")
    return data


def save_measured(key: str, values: Mapping[str, float], path: Path = MEASURED) -> None:
    """Merge `values` into `path`'s `key`, written beside and renamed."""
    data = load_measured(path)
    data.setdefault(key, {}).update({k: round(v, 1) for k, v in values.items()})
    replace_file(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def row(block: Block, measured: Mapping[str, Any], repo: Path = REPO) -> Row:
    """What `block` costs and shows, computed from its notebook."""
    if isinstance(block, Pause):
        return Row(block.label, block.minutes)
    if isinstance(block, Exercises):
        minutes = measured.get("exercise_minutes", {})
        missing = [n for n in block.names if n not in minutes]
        if missing:
            raise PlanError(f"no learner-pass minutes for {', '.join(missing)}")
        label = f"**{block.stem}** ({', '.join(f'`{n}`' for n in block.names)})"
        total = math.ceil(sum(minutes[n] for n in block.names))
        return Row(label + (f"; {block.note}" if block.note else ""), total)
    parts = sections(notebook_path(block.stem, repo))
    titles = [s.title for s in parts]
    show = tuple(titles) if block.show is None else block.show
    unknown = [t for t in show if t not in titles]
    if unknown:
        raise PlanError(f"{block.stem} has no section {', '.join(map(repr, unknown))}")
    shown = [s for s in parts if s.title in show]
    label = block.stem + (f"; {block.note}" if block.note else "")
    return Row(
        label,
        math.ceil(sum(s.minutes for s in shown)),
        tuple(s.title for s in shown),
        tuple(t for t in titles if t not in show),
    )


def render_plan(plan: Plan, measured: Mapping[str, Any], repo: Path = REPO) -> str:
    """The plan as a markdown table with clock times; `PlanError` past its limit."""
    rows = [row(b, measured, repo) for b in plan.blocks]
    total = sum(r.minutes for r in rows)
    if total > plan.limit:
        raise PlanError(f"{plan.name} takes {total} minutes, more than its {plan.limit}")
    lines = [
        "| time | minutes | block | shows | skips (a sentence instead) |",
        "|---|---:|---|---|---|",
    ]
    start = 0
    for r in rows:
        end = start + r.minutes
        shown = _titles(r.shown) if r.shown and r.skipped else ("everything" if r.shown else "")
        if r.skipped and not r.shown:
            shown = "nothing: the whole notebook is reading"
        lines.append(
            f"| {_clock(start)}-{_clock(end)} | {r.minutes} | {r.label} | {shown} "
            f"| {_titles(r.skipped)} |"
        )
        start = end
    lines.append(f"| **total** | **{total}** | | | |")
    for b in plan.optional:
        r = row(b, measured, repo)
        lines.append(f"| optional | +{r.minutes} | {r.label} | everything | |")
    return "\n".join(lines) + "\n"


def _titles(titles: Iterable[str]) -> str:
    return "; ".join(f'"{t}"' for t in titles)


def _clock(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}"


def render_reading_table(
    stems: Iterable[str], measured: Mapping[str, Any], repo: Path = REPO
) -> str:
    """Per notebook: prose words, code lines, minutes at the pace, and the measured kernel time."""
    kernel = measured.get("kernel_seconds", {})
    lines = [
        "| notebook | words | code lines | minutes | kernel time |",
        "|---|---:|---:|---:|---:|",
    ]
    for stem in stems:
        parts = sections(notebook_path(stem, repo))
        words = sum(s.words for s in parts)
        code = sum(s.code_lines for s in parts)
        seconds = kernel.get(stem)
        shown = "not measured" if seconds is None else f"{seconds:.1f} s"
        minutes = round(sum(s.minutes for s in parts))  # as each notebook states its time
        lines.append(f"| {stem} | {words:,} | {code} | {minutes} | {shown} |")
    return "\n".join(lines) + "\n"


def fill(page: str, blocks: Mapping[str, str]) -> str:
    """`page` with each generated block's body replaced; `PlanError` for a block not in `blocks`
    or a name in `blocks` the page lacks."""
    found: set[str] = set()

    def swap(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in blocks:
            raise PlanError(f"the page has a generated block {name!r} that nothing renders")
        found.add(name)
        return match[1] + blocks[name] + match[4]

    out = _BLOCK.sub(swap, page)
    missing = sorted(set(blocks) - found)
    if missing:
        raise PlanError(f"the page lacks the generated blocks {', '.join(missing)}")
    return out
