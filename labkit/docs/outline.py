"""The workbook's outline, in one place: its parts, its notebooks and the designs part two runs.

README.md, notebooks/00_start_here.ipynb, docs/glossary.md, docs/instructor.md and the site's
front page list these; `tests/test_overview.py` fails when one of them disagrees, and the site
build takes its navigation from `PARTS`. The designs are read off `labkit.designs.registry`,
never typed again here.
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit.designs.registry import SPECS

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclass(frozen=True)
class Notebook:
    """One lesson: its file stem, its title (its heading without the number) and the one
    question it answers; `article` is the source article it tests (None for the overview)."""

    stem: str
    title: str
    question: str
    article: int | None = None
    exercise: str | None = None

    @property
    def number(self) -> str:
        """The number the stem starts with, as the file names it: "05", "05b"."""
        return self.stem.split("_", 1)[0]

    @property
    def heading(self) -> str:
        """The notebook's first heading: its number, a middle dot and its title."""
        return f"{self.number} · {self.title}"


@dataclass(frozen=True)
class Part:
    """One part of the workbook: `name` ("Part one"), what it is about, and its notebooks."""

    name: str
    title: str
    notebooks: tuple[Notebook, ...]

    @property
    def caption(self) -> str:
        """How navigation and overview pages head the part."""
        return f"{self.name} · {self.title}"

    @property
    def stems(self) -> tuple[str, ...]:
        return tuple(nb.stem for nb in self.notebooks)

    @property
    def numbers(self) -> tuple[str, ...]:
        return tuple(nb.number for nb in self.notebooks)


@dataclass(frozen=True)
class DesignEntry:
    """One design as the overview pages name it: code key, the name a reader sees, and the
    notebook that builds it."""

    key: str
    display: str
    notebook: str


START = Notebook(
    "00_start_here",
    "Start here",
    "What does the workbook teach, in which order, and what are its two bugs?",
)
PART_ONE = Part(
    "Part one",
    "the gap-free delivery frontier",
    (
        Notebook(
            "01_max_is_not_a_watermark",
            "`MAX(delivered)` is not a watermark",
            "Why does a checkpoint at the largest delivered id lose rows for good?",
            1,
            "ex01_max_and_orphans",
        ),
        Notebook(
            "02_gap_free_frontier",
            "The gap-free frontier",
            "Which checkpoint is safe instead, on every delivery order and edge case?",
            1,
            "ex02_frontier_sql",
        ),
        Notebook(
            "03_triggers_shards_indexes",
            "Triggers, shards and indexes",
            "How does each shard's worker ask for new work cheaply, with an index per query?",
            1,
            "ex03_partial_index",
        ),
    ),
)
PART_TWO = Part(
    "Part two",
    "the catalog watermark with ballots",
    (
        Notebook(
            "04_late_tick_rewinds",
            "A late tick must not rewind the catalog",
            "How does a ballot stop a late planner answer from rewinding a shared catalog?",
            2,
            "ex04_ballots",
        ),
        Notebook(
            "05_five_designs",
            "Five designs, one planner, one fault trace",
            "Which of five designs let a reader see the catalog fall, and what do the safe "
            "ones pay?",
            2,
            "ex05_lww_and_late_ticks",
        ),
        Notebook(
            "05b_pipelined_ballots",
            "Pipelined ballots: several versions in flight",
            "Can the loop ask for several versions at once without the catalog falling?",
            2,
        ),
        Notebook(
            "06_crashes_and_restarts",
            "Crashes and restarts",
            "What must the loop keep on disk so that a crash loses no commit and doubles none?",
            2,
            "ex06_restart",
        ),
    ),
)
PART_THREE = Part(
    "Part three",
    "real servers: PostgreSQL, a remote planner",
    (
        Notebook(
            "07_postgres_commit_order",
            "Part three: the commit-order gap on a real PostgreSQL server",
            "On PostgreSQL a smaller id can appear late: what must the frontier do?",
            1,
            "ex07_commit_order",
        ),
        Notebook(
            "08_ballots_across_machines",
            "Part three: ballots across machines",
            "Does the ballot rule hold for eight processes sharing one PostgreSQL catalog?",
            2,
            "ex08_guarded_writes",
        ),
        Notebook(
            "09_a_real_planner",
            "A real planner: the five designs over a network",
            "Do the designs behave as simulated against a real planner service over HTTP?",
            2,
        ),
    ),
)
PART_FOUR = Part(
    "Part four",
    "your own system",
    (
        Notebook(
            "10_audit_your_own_system",
            "Audit your own system",
            "Does your own summarizer skip rows, and can your own loop's catalog head fall?",
            None,
            "ex10_audit",
        ),
    ),
)
WORKBOOK_PARTS: tuple[Part, ...] = (PART_ONE, PART_TWO, PART_THREE, PART_FOUR)
NOTEBOOKS: tuple[Notebook, ...] = (START, *(nb for part in WORKBOOK_PARTS for nb in part.notebooks))
# The site's navigation: (caption, notebook stems), the overview first, then the three parts.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Start here", (START.stem,)),
    *((part.caption, part.stems) for part in WORKBOOK_PARTS),
)

# Part two's designs, from the registry: the ones 05 compares side by side, then the rest (05b).
COMPARED_IN, BUILT_IN = "05_five_designs", "05b_pipelined_ballots"
DESIGN_ENTRIES: tuple[DesignEntry, ...] = tuple(
    DesignEntry(s.key, s.display, COMPARED_IN if s.compared else BUILT_IN) for s in SPECS
)
COMPARED: tuple[DesignEntry, ...] = tuple(d for d in DESIGN_ENTRIES if d.notebook == COMPARED_IN)


def count_word(n: int) -> str:
    """`n` as the overview pages write a small count ("five"); digits from ten up."""
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def notebook(stem_or_number: str) -> Notebook:
    """The notebook with this stem or number ("05b"); KeyError naming the known stems."""
    for nb in NOTEBOOKS:
        if stem_or_number in (nb.stem, nb.number):
            return nb
    raise KeyError(f"no notebook {stem_or_number!r}; known: {', '.join(n.stem for n in NOTEBOOKS)}")


def part_of(stem: str) -> Part | None:
    """The part a notebook belongs to (None for the overview, 00)."""
    return next((part for part in WORKBOOK_PARTS if stem in part.stems), None)


def article_notebooks(article: int) -> tuple[Notebook, ...]:
    """The notebooks that test Article `article`'s claims, in learning order."""
    return tuple(nb for nb in NOTEBOOKS if nb.article == article)
