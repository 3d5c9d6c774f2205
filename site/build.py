"""Build the static site of the executed workbook (`make site`): stage, execute, render.

Two editions from one build, told apart by one switch (`--instructor`):
- the student site (`make site`, build/site): the lessons, the exercises with answers blanked,
  the reference pages. No worked answer and no instructor page is in it, and no link that
  pointed at either is left as a link.
- the instructor site (`make site-instructor`, build/site-instructor): the same, plus the
  instructor page (the day plans) and the worked answers, which are pages in no navigation
  that the instructor page links.

1. Stage into OUT/src what the site shows, laid out as in the repository so every relative
   link resolves: the front page (site/pages/index.md, else the README), CONTRIBUTING, the docs
   pages and figures (each docs figure built again in the dark theme, which Furo shows in dark
   mode), the lessons notebooks/NN_*.ipynb, the student copies of the exercises (answers
   blanked, as `make lab` puts them in workshop/; shown as a learner gets them, not executed)
   and, in the instructor edition, the solution notebooks.
2. Execute the lessons (and the solutions) in place, a few kernels at a time; part three's
   share one PostgreSQL server (`labkit.pg.server()`, passed on as LABKIT_PG_DSN). Each
   widget's output becomes its first view, drawn from the widget state as its cell left it
   (site/widget_view.py).
3. Sphinx renders OUT/html: MyST-NB reads the executed notebooks as they are, Furo the theme.

Usage: python site/build.py [--instructor] [--out build/site] [--jobs 3] [--timeout 180]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SITE = Path(__file__).resolve().parent
ROOT = SITE.parent
sys.path.insert(0, str(ROOT))  # labkit and the shared harness (harness/) from this checkout

from conf import html_title  # noqa: E402
from widget_view import WIDGET_MIME, WidgetViewError, replace_widget_outputs  # noqa: E402

# The reference pages: these docs first, in this order, then any other docs/*.md by name.
REFERENCE_DOCS = ("glossary", "instructor", "benchmarks", "figures")
# A notebook's number: two digits and an optional letter (`05_`, `05b_`, `ex05_`), so that
# sorted numbers follow the learning path (05b after 05).
NUMBER = re.compile(r"^(?:ex)?(\d\d[a-z]?)_")
# What only the instructor edition has: the day plans and the worked answers (paths in OUT/src).
INSTRUCTOR_PAGE = "docs/instructor.md"
ANSWERS = "exercises/solutions/"
# A Markdown link (not an image): its text and its target.
MD_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")
# A docs page's figure on a line of its own; its dark twin is built into figures/DARK/.
FIGURE_LINE = re.compile(r"^!\[(?P<alt>[^\]\n]*)\]\(figures/(?P<name>[\w-]+)\.svg\)[ \t]*$", re.M)
DARK = "dark"
SITE_LINK = re.compile(r"\[([^\]]+)\]\(build/site/[^)]*\)")  # the README's link to this site
INSTRUCTOR_EDITION = "for instructors"  # said after the title of the instructor site


class BuildError(RuntimeError):
    """The site cannot be built as the sources stand; the message says what to fix."""


def numbered(folder: Path) -> dict[str, Path]:
    """The notebooks of `folder` by their number (`01`, `05b`), in the learning path's order."""
    found = {}
    for path in sorted(folder.glob("*.ipynb")):
        match = NUMBER.match(path.name)
        if match:
            found[match.group(1)] = path
    return dict(sorted(found.items()))


def learning_path() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The parts of the navigation and each part's lesson stems, in learning order: the
    outline's `PARTS` (labkit/docs/outline.py), the one list the docs pages use too."""
    from labkit.docs.outline import PARTS

    return PARTS


def stage(src: Path, instructor: bool = False) -> list[Path]:
    """Copy and prepare the site's sources in `src`; return the notebooks to execute.

    `instructor` is the one switch between the editions: with it, the instructor page and the
    worked answers; without it, neither, and no link left that pointed at them.
    """
    from labkit.docs import nbfiles

    if src.exists():
        shutil.rmtree(src)
    (src / "docs" / "figures").mkdir(parents=True)
    shutil.copy(SITE / "pages" / "run-it-yourself.md", src)
    shutil.copy(ROOT / "CONTRIBUTING.md", src)
    for page in sorted((ROOT / "docs").glob("*.md")):
        if instructor or page.relative_to(ROOT).as_posix() != INSTRUCTOR_PAGE:
            shutil.copy(page, src / "docs")
    for figure in sorted((ROOT / "docs" / "figures").iterdir()):
        if figure.suffix in {".svg", ".png"}:
            shutil.copy(figure, src / "docs" / "figures")
    for page in sorted((ROOT / "data").rglob("*.md")):  # 10's formats page, linked from it
        target = src / page.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("---\norphan: true\n---\n" + page.read_text(encoding="utf-8"))
    shutil.copytree(
        ROOT / "notebooks",
        src / "notebooks",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.sqlite", "*.db"),
    )
    solutions = ROOT / "exercises" / "solutions"
    nbfiles.make_student_copies(solutions, src / "exercises" / "student")
    lessons = numbered(src / "notebooks")
    exercises = numbered(src / "exercises" / "student")
    _note_student_pages(exercises)
    answers: dict[str, Path] = {}
    if instructor:
        shutil.copytree(
            solutions, src / ANSWERS, ignore=shutil.ignore_patterns(".ipynb_checkpoints")
        )
        answers = numbered(src / ANSWERS)
        _note_answer_pages(answers)
    front = front_page()
    text = SITE_LINK.sub(r"`\1`", front.read_text(encoding="utf-8"))
    (src / "index.md").write_text(text + _toctrees(src, lessons, exercises), encoding="utf-8")
    if not instructor:
        _unlink_instructor_material(src)
    return [*lessons.values(), *answers.values()]  # student copies are shown unexecuted


def front_page() -> Path:
    """The site's front page: the reader's landing page when there is one, else the README."""
    landing = SITE / "pages" / "index.md"
    return landing if landing.is_file() else ROOT / "README.md"


def _unlink_instructor_material(src: Path) -> None:
    """Turn each Markdown link to the instructor page or a worked answer, in every staged page
    and notebook, into its plain text: the student edition has neither page to link to."""
    for page in sorted(src.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        unlinked = unlink_answers(text, page.parent.relative_to(src))
        if unlinked != text:
            page.write_text(unlinked, encoding="utf-8")
    import nbformat

    for path in sorted(src.rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        changed = False
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                unlinked = unlink_answers(cell.source, path.parent.relative_to(src))
                changed |= unlinked != cell.source
                cell.source = unlinked
        if changed:
            nbformat.write(nb, path)


def unlink_answers(text: str, folder: Path) -> str:
    """`text` (a page in `folder`, relative to the site root) with every Markdown link whose
    target is the instructor page or a worked answer replaced by the link's text."""

    def plain(match: re.Match[str]) -> str:
        target = match.group("target").split("#", 1)[0]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            return match.group(0)  # an anchor on the page itself, or another site
        path = os.path.normpath((folder / target).as_posix())
        if path == INSTRUCTOR_PAGE or path.startswith(ANSWERS):
            return match.group("text")
        return match.group(0)

    return MD_LINK.sub(plain, text)


def theme_figures(src: Path) -> None:
    """Give each staged docs page's figures a dark twin that Furo shows in dark mode: build
    them (`dark_figures`), then point the pages at both (`themed_images`)."""
    dark = dark_figures(src / "docs" / "figures" / DARK)
    for page in sorted((src / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        page.write_text(themed_images(text, dark), encoding="utf-8")


def dark_figures(out: Path) -> set[str]:
    """Build every docs figure again in the dark theme into `out` (SVG, as the pages embed
    them); return their names. The light ones are the committed `docs/figures`."""
    from labkit.docs.figures import BuildRequest, build_all

    manifest = build_all(out, request=BuildRequest(formats=("svg",), theme="dark"))
    return set(manifest["figures"])


def themed_images(page: str, dark: set[str]) -> str:
    """Each `![alt](figures/NAME.svg)` line whose figure has a dark twin, as two images that
    Furo shows one at a time: the light one in light mode, the dark one in dark mode."""

    def both(match: re.Match[str]) -> str:
        alt, name = match.group("alt"), match.group("name")
        if name not in dark:
            return match.group(0)
        return "\n".join(
            f"```{{image}} figures/{folder}{name}.svg\n:alt: {alt}\n:class: {shown}\n```"
            for folder, shown in (("", "only-light"), (f"{DARK}/", "only-dark"))
        )

    return FIGURE_LINE.sub(both, page)


def _toctrees(src: Path, lessons: dict[str, Path], exercises: dict[str, Path]) -> str:
    """The site's navigation: the learning path (each lesson followed by the exercises of its
    number; a stem the outline names before its notebook exists is passed over), then the
    reference pages. The worked answers are in no navigation (orphan pages): only the
    instructor page links them."""

    def doc(path: Path) -> str:
        return path.relative_to(src).with_suffix("").as_posix()

    by_stem = {path.stem: key for key, path in lessons.items()}
    blocks = []
    placed: list[str] = []
    for caption, stems in learning_path():
        entries = []
        for key in [by_stem[stem] for stem in stems if stem in by_stem]:
            placed.append(key)
            entries.append(doc(lessons[key]))
            if key in exercises:
                entries.append(doc(exercises[key]))
        blocks.append((caption, entries))
    if set(lessons) - set(placed) or set(exercises) - set(placed):
        missing = sorted((set(lessons) | set(exercises)) - set(placed))
        raise BuildError(
            f"notebooks {missing} are in no part of the learning path (PARTS in "
            "labkit/docs/outline.py): place each lesson, and a lesson of each exercise's number"
        )
    if len(placed) != len(set(placed)):
        raise BuildError(f"the learning path places a notebook twice: {placed}")
    docs = sorted(p.stem for p in (src / "docs").glob("*.md"))
    docs = [d for d in REFERENCE_DOCS if d in docs] + [d for d in docs if d not in REFERENCE_DOCS]
    blocks.append(("Reference", ["run-it-yourself", *(f"docs/{d}" for d in docs), "CONTRIBUTING"]))
    return "".join(
        f"\n\n```{{toctree}}\n:caption: {caption}\n:hidden:\n\n" + "\n".join(entries) + "\n```\n"
        for caption, entries in blocks
    )


def student_note(name: str) -> str:
    """What a student exercise page says under its title: where the learner works it."""
    return (
        "To work these exercises, run `make lab` in a clone of the repository: it opens "
        "JupyterLab on your own `workshop/` folder (git-ignored; your edits stay there), which "
        f"holds the lessons, the docs and these exercises, answers blanked, as `exercises/student/"
        f"{name}`. Write each answer where the code says `____` and run the check cell under it; "
        "when stuck, climb `.hint(1)` to `.hint(3)` before `.solution()`. Delete the file to get "
        "a fresh copy at the next `make lab`."
    )


def _note_student_pages(exercises: dict[str, Path]) -> None:
    """Put the student note (`student_note`) under each exercise page's title."""
    import nbformat
    from nbformat.v4 import new_markdown_cell

    for path in exercises.values():
        nb = nbformat.read(path, as_version=4)
        nb.cells.insert(1, new_markdown_cell(f"```{{note}}\n{student_note(path.name)}\n```"))
        nbformat.write(nb, path)


def _note_answer_pages(answers: dict[str, Path]) -> None:
    """Title each worked-answer page as such, keep it out of every navigation (an orphan page
    the instructor page links) and link it to its student page."""
    import nbformat
    from nbformat.v4 import new_markdown_cell

    for key, path in answers.items():
        nb = nbformat.read(path, as_version=4)
        nb.metadata["orphan"] = True
        first = nb.cells[0]
        first.source = re.sub(r"^# Exercises\b", "# Solutions", first.source, count=1)
        if not first.source.startswith("# Solutions"):
            first.source = re.sub(r"^# ", "# Solutions · ", first.source, count=1)
        note = (
            "These are the worked answers, for instructors. The exercises without them: "
            f"[Exercises {key}](../student/{path.name})."
        )
        nb.cells.insert(1, new_markdown_cell(f"```{{note}}\n{note}\n```"))
        nbformat.write(nb, path)


def execute(paths: Iterable[Path], jobs: int, timeout: int, log: Path) -> None:
    """Execute each notebook in place, `jobs` kernels at a time, on one PostgreSQL server.

    The kernels' own log lines (not the cells' output) go to `log`.
    """
    from labkit.pg import instance as pg

    try:
        with pg.server() as dsn, log.open("w", encoding="utf-8") as kernel_log:
            os.environ[pg.ENV] = dsn  # every kernel inherits it: one server for the whole build
            asyncio.run(_execute_all(list(paths), jobs, timeout, kernel_log))
    except pg.PgUnavailable as exc:
        raise BuildError(f"part three's notebooks need a PostgreSQL server: {exc}") from exc


async def _execute_all(paths: list[Path], jobs: int, timeout: int, kernel_log: Any) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    class SiteClient(NotebookClient):
        """Draws each widget's first view from the widget state as its cell left it."""

        async def async_execute_cell(
            self, cell: Any, cell_index: int, *args: Any, **kwargs: Any
        ) -> Any:
            cell = await super().async_execute_cell(cell, cell_index, *args, **kwargs)
            if cell.cell_type == "code":
                replace_widget_outputs(cell.outputs, self.widget_state)
            return cell

    gate = asyncio.Semaphore(jobs)

    async def run(path: Path) -> None:
        async with gate:
            started = time.monotonic()
            nb = nbformat.read(path, as_version=4)
            client = SiteClient(
                nb,
                timeout=timeout,
                kernel_name="python3",
                resources={"metadata": {"path": str(path.parent)}},
            )
            try:
                await client.async_execute(stderr=kernel_log)
            except CellExecutionError as exc:
                raise BuildError(f"{path.relative_to(path.parents[1])} failed:\n{exc}") from exc
            except WidgetViewError as exc:
                raise BuildError(f"{path.name}: a widget has no static view: {exc}") from exc
            nb.metadata.pop("widgets", None)  # drawn already; no widget manager on the page
            left = [
                i
                for i, c in enumerate(nb.cells)
                if c.cell_type == "code"
                for out in c.outputs
                if WIDGET_MIME in out.get("data", {})
            ]
            if left:
                raise BuildError(f"{path.name}: cells {left} still hold a raw widget view")
            nbformat.write(nb, path)
            print(
                f"  executed {path.parent.name}/{path.name} in {time.monotonic() - started:.1f} s",
                flush=True,
            )

    # the slowest (part three, the later lessons) first, so no kernel starts last and alone
    await asyncio.gather(*(run(p) for p in sorted(paths, key=lambda p: p.name, reverse=True)))


def render(src: Path, html: Path, doctrees: Path, instructor: bool = False) -> None:
    """Sphinx with this folder's conf.py; any warning (a broken link, an orphan page) fails.
    The instructor edition says so in its title."""
    from sphinx.cmd.build import build_main

    if html.exists():
        shutil.rmtree(html)
    title = ["-D", f"html_title={html_title} · {INSTRUCTOR_EDITION}"] if instructor else []
    code = build_main(
        [
            "-b",
            "html",
            "-q",
            "-W",
            "--keep-going",
            "-c",
            str(SITE),
            "-d",
            str(doctrees),
            *title,
            str(src),
            str(html),
        ]
    )
    if code:
        raise BuildError(f"sphinx-build failed (exit {code}); its warnings are above")


def main(argv: list[str] | None = None) -> int:
    # The worked answers' checks run on no learner's behalf: their kernels record no progress.
    os.environ.setdefault("LABKIT_PROGRESS", "off")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--instructor",
        action="store_true",
        help="the instructor edition: add the instructor page and the worked answers",
    )
    parser.add_argument(
        "--out", type=Path, help="default build/site, build/site-instructor with --instructor"
    )
    parser.add_argument("--jobs", type=int, default=3, help="kernels at a time (default 3)")
    parser.add_argument("--timeout", type=int, default=180, help="seconds per cell (default 180)")
    args = parser.parse_args(argv)
    edition = "site-instructor" if args.instructor else "site"
    out = (args.out or ROOT / "build" / edition).resolve()
    t0 = time.monotonic()
    try:
        notebooks = stage(out / "src", instructor=args.instructor)
        theme_figures(out / "src")
        print(f"staged {len(notebooks)} notebooks in {time.monotonic() - t0:.1f} s", flush=True)
        t1 = time.monotonic()
        execute(notebooks, args.jobs, args.timeout, out / "kernels.log")
        print(f"executed them in {time.monotonic() - t1:.1f} s", flush=True)
        t2 = time.monotonic()
        render(out / "src", out / "html", out / "doctrees", instructor=args.instructor)
        print(f"rendered in {time.monotonic() - t2:.1f} s", flush=True)
    except BuildError as exc:
        print(f"site build failed: {exc}", file=sys.stderr)
        return 1
    print(f"site built in {time.monotonic() - t0:.0f} s: {out / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
