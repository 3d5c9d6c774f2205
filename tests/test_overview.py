"""The overview pages agree with the outline (`labkit.docs.outline`) and the notebooks.

README.md, notebooks/00_start_here.ipynb, docs/glossary.md, docs/instructor.md and the site's
front page each say which notebooks exist, which part each belongs to and how many designs part
two has. The outline is the one list; each check below reads the pages as text and fails, naming
the page and the phrase, when one says otherwise. The planted-text tests show each check fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from labkit.docs import outline
from labkit.docs.outline import COMPARED, DESIGN_ENTRIES, NOTEBOOKS, WORKBOOK_PARTS, count_word

ROOT = Path(__file__).resolve().parent.parent
PAGES = {
    "README.md": ROOT / "README.md",
    "00_start_here": ROOT / "notebooks" / "00_start_here.ipynb",
    "docs/glossary.md": ROOT / "docs" / "glossary.md",
    "docs/instructor.md": ROOT / "docs" / "instructor.md",
    "site/pages/index.md": ROOT / "site" / "pages" / "index.md",
}
# The pages that lay out the whole learning path, so must name every notebook, in order.
PATH_PAGES = ("README.md", "00_start_here", "site/pages/index.md")
# The pages that name part two's designs, so must name all of them (not only the five of 05).
DESIGN_PAGES = ("README.md", "00_start_here", "docs/glossary.md", "site/pages/index.md")

NUMBER = r"0\d[a-z]?"
LIST = rf"{NUMBER}(?:\s*(?:,|-|–|to|and|,\s*and)\s*{NUMBER})*"
STEM = re.compile(r"\b\d\d[a-z]?_[a-z][a-z0-9_]*[a-z0-9]")
PART_WORD = {"one": 0, "two": 1, "three": 2}
# Ways a page says which notebooks a part holds: "part three (07, 08, 09)", "part one, notebooks
# 01-03", "part three: notebooks 07-09", and "notebooks 08 and 09 of part three".
PART_CLAIMS = (
    re.compile(r"\b[Pp]art (?P<part>one|two|three)\s*\((?P<list>[^)]*)\)"),
    re.compile(rf"\b[Pp]art (?P<part>one|two|three)[,:]? notebooks? (?P<list>{LIST})"),
    re.compile(rf"\b[Nn]otebooks? (?P<list>{LIST}) (?:of|in) part (?P<part>one|two|three)\b"),
)
# Where a paragraph or a list item (or a table row) ends.
BLOCK_END = re.compile(r"\n\s*\n|\n(?=\s*[-*] |\s*\d+\. |\|)")
COUNT = re.compile(r"\b(?P<n>\w+)(?:-| )designs\b")


def page_text(name: str) -> str:
    """A page as text: a Markdown file, or a notebook's Markdown cells, blank-line separated."""
    path = PAGES[name]
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return path.read_text(encoding="utf-8")


def numbers_in(text: str) -> list[str]:
    """The notebook numbers a list names, a range ("04-06") as every notebook between its ends
    in learning order (so 05b too)."""
    order = [nb.number for nb in NOTEBOOKS]
    found: list[str] = []
    for m in re.finditer(rf"\b({NUMBER})(?:\s*(?:-|–|to)\s*({NUMBER}))?\b", text):
        first, last = m.group(1), m.group(2)
        if last and first in order and last in order:
            found += order[order.index(first) : order.index(last) + 1]
        else:
            found.append(first)
    return found


def block_of(text: str, at: int) -> str:
    """The paragraph or list item around position `at` (the context a claim is read in)."""
    bounds = [m.span() for m in BLOCK_END.finditer(text)]
    start = max((end for _, end in bounds if end <= at), default=0)
    end = min((begin for begin, _ in bounds if begin >= at), default=len(text))
    return text[start:end]


def part_problems(text: str) -> list[str]:
    """Every place `text` says a part holds notebooks it does not, or only some of its notebooks
    without saying that it means one article's share of the part."""
    problems = []
    for pattern in PART_CLAIMS:
        for m in pattern.finditer(text):
            part = WORKBOOK_PARTS[PART_WORD[m.group("part")]]
            said = numbers_in(m.group("list"))
            if not said:
                continue
            stray = [n for n in said if n not in part.numbers]
            if stray:
                problems.append(f"{m.group(0)!r}: {stray} are not in {part.name} {part.numbers}")
                continue
            if set(said) == set(part.numbers):
                continue
            articles = set(re.findall(r"Article ([12])", block_of(text, m.start())))
            if len(articles) != 1:
                problems.append(f"{m.group(0)!r}: {part.name} is {part.numbers}")
                continue
            share = {nb.number for nb in outline.article_notebooks(int(articles.pop()))}
            if set(said) != share & set(part.numbers):
                problems.append(
                    f"{m.group(0)!r}: this article's share of {part.name} is "
                    f"{sorted(share & set(part.numbers))}"
                )
    return problems


def article_problems(text: str) -> list[str]:
    """Each `- **Article N...` entry must name exactly the notebooks that test Article N."""
    problems = []
    for m in re.finditer(r"^- \*\*Article ([12])", text, re.MULTILINE):
        entry = block_of(text, m.start() + 1)
        said = set(numbers_in(entry))
        want = {nb.number for nb in outline.article_notebooks(int(m.group(1)))}
        if said != want:
            problems.append(f"Article {m.group(1)}: names {sorted(said)}, tested in {sorted(want)}")
    return problems


def stems_in(text: str) -> list[str]:
    """The notebook stems `text` names, in order of first mention."""
    seen: list[str] = []
    for stem in STEM.findall(text):
        if stem not in seen:
            seen.append(stem)
    return seen


def design_problems(text: str, names_all: bool) -> list[str]:
    """A count of designs other than the five 05 compares or all of them; and, where the page
    names designs (`names_all`), a design left out, or 'five' said with the sixth unnamed."""
    allowed = {count_word(len(COMPARED)), count_word(len(DESIGN_ENTRIES))}
    allowed |= {str(len(COMPARED)), str(len(DESIGN_ENTRIES))}
    problems = [
        f"{m.group(0)!r}: part two has {len(DESIGN_ENTRIES)} designs, "
        f"{len(COMPARED)} compared in 05"
        for m in COUNT.finditer(text)
        if m.group("n").lower() in set(outline.NUMBER_WORDS) - allowed
    ]
    if names_all:
        flat = " ".join(text.split())  # a name may wrap across lines
        missing = [d.display for d in DESIGN_ENTRIES if d.display not in flat]
        if missing:
            problems.append(f"does not name {missing}")
    return problems


# --- the outline against the files ------------------------------------------------------------


def test_every_lesson_file_is_in_the_outline_and_back() -> None:
    files = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
    assert files == sorted(nb.stem for nb in NOTEBOOKS)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda nb: nb.stem)
def test_each_notebook_opens_with_its_outline_heading(nb: outline.Notebook) -> None:
    first = nbformat.read(ROOT / "notebooks" / f"{nb.stem}.ipynb", as_version=4).cells[0].source
    assert first.splitlines()[0] == f"# {nb.heading}"


def test_each_exercise_belongs_to_one_lesson() -> None:
    solutions = sorted(p.stem for p in (ROOT / "exercises" / "solutions").glob("ex*.ipynb"))
    assert sorted(nb.exercise for nb in NOTEBOOKS if nb.exercise) == solutions


def test_the_designs_come_from_the_registry() -> None:
    from labkit.designs.registry import SPECS

    assert [d.key for d in DESIGN_ENTRIES] == [s.key for s in SPECS]
    assert [d.key for d in COMPARED] == [s.key for s in SPECS if s.compared]
    assert {d.notebook for d in DESIGN_ENTRIES} <= {nb.stem for nb in NOTEBOOKS}


def test_parts_for_the_site_list_every_notebook_once() -> None:
    stems = [s for _, part in outline.PARTS for s in part]
    assert stems == [nb.stem for nb in NOTEBOOKS]


# --- the pages against the outline --------------------------------------------------------------


@pytest.mark.parametrize("name", PAGES)
def test_page_names_only_notebooks_that_exist(name: str) -> None:
    unknown = set(stems_in(page_text(name))) - {nb.stem for nb in NOTEBOOKS}
    assert not unknown, f"{name} names notebooks the outline does not have: {sorted(unknown)}"


@pytest.mark.parametrize("name", PATH_PAGES)
def test_page_lays_out_the_whole_path_in_order(name: str) -> None:
    assert stems_in(page_text(name)) == [nb.stem for nb in NOTEBOOKS], name


@pytest.mark.parametrize("name", PATH_PAGES)
def test_page_asks_each_notebooks_question_as_the_outline_does(name: str) -> None:
    text = " ".join(page_text(name).split())
    missing = [nb.stem for nb in NOTEBOOKS if " ".join(nb.question.split()) not in text]
    assert not missing, f"{name} does not ask the outline's question of {missing}"


@pytest.mark.parametrize("name", PATH_PAGES)
def test_page_heads_each_part_as_the_outline_does_before_its_notebooks(name: str) -> None:
    text = " ".join(page_text(name).split())
    for part in WORKBOOK_PARTS:
        at = text.find(part.caption)
        assert at != -1, f"{name} has no heading {part.caption!r}"
        after = stems_in(text[at:])[: len(part.stems)]
        assert after == list(part.stems), f"{name}: {part.caption!r} is followed by {after}"


@pytest.mark.parametrize("name", PAGES)
def test_page_puts_each_notebook_in_its_part(name: str) -> None:
    assert part_problems(page_text(name)) == [], name


@pytest.mark.parametrize("name", ["00_start_here", "docs/glossary.md"])
def test_page_says_which_notebooks_test_each_article(name: str) -> None:
    text = page_text(name)
    assert re.search(r"^- \*\*Article 1", text, re.MULTILINE), name
    assert article_problems(text) == [], name


@pytest.mark.parametrize("name", PAGES)
def test_page_counts_the_designs_as_the_registry_does(name: str) -> None:
    assert design_problems(page_text(name), name in DESIGN_PAGES) == [], name


# --- each check fails on a page that says otherwise ---------------------------------------------


@pytest.mark.parametrize(
    "planted",
    [
        "Part three (notebooks 07 and 08) repeats both lessons on PostgreSQL.",
        "The instructor's slot: part three (07-08).",
        "- **Article 2**: the catalog. Part two (04-06) and part three (08).",
        "Notebooks 06 and 07 of part three run on PostgreSQL.",
        "Part two, notebooks 04-07, builds the ballot.",
    ],
)
def test_part_check_fails_on_a_wrong_part(planted: str) -> None:
    assert part_problems(planted)


@pytest.mark.parametrize(
    "fine",
    [
        "Part three (07, 08, 09) runs on real servers.",
        "- **Article 1**: the log. Part one (01-03) and part three (07).",
        "- **Article 2**: the catalog. Part two (04-06) and part three (08, 09).",
        "Part two (notebooks 04, 05, 05b and 06) is about the catalog.",
    ],
)
def test_part_check_passes_what_the_outline_says(fine: str) -> None:
    assert part_problems(fine) == []


def test_article_check_fails_on_a_wrong_share() -> None:
    assert article_problems("- **Article 2**: the catalog (part two, 04-06; part three, 08).\n")
    assert article_problems("- **Article 1**: the log (01-03 and 07).\n") == []


def test_design_check_fails_on_a_wrong_count_or_a_missing_design() -> None:
    five_only = "The five designs: " + ", ".join(d.display for d in COMPARED) + "."
    assert design_problems("Notebook 05 runs four designs.", names_all=False)
    assert design_problems(five_only, names_all=True)
    everything = "The six designs: " + ", ".join(d.display for d in DESIGN_ENTRIES) + "."
    assert design_problems(everything, names_all=True) == []


def test_path_check_fails_on_a_missing_or_misplaced_notebook() -> None:
    stems = [nb.stem for nb in NOTEBOOKS]
    without_05b = "\n".join(s for s in stems if s != "05b_pipelined_ballots")
    assert stems_in(without_05b) != stems
    swapped = "\n".join([stems[0], stems[2], stems[1], *stems[3:]])
    assert stems_in(swapped) != stems
    assert stems_in("\n".join(stems)) == stems
