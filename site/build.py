"""Build the static site of the executed workbook (`make site`): stage, execute, render.

1. Stage into OUT/src what the site shows, laid out as in the repository so every relative
   link resolves: the README (the front page), CONTRIBUTING, the docs pages and figures (each
   docs figure built again in the dark theme, which Furo shows in dark mode),
   notebooks/NN_*.ipynb, the exercise solution notebooks and their student copies (answers
   blanked, as `make exercises` writes them; shown as a learner gets them, not executed). The
   solutions are pages in no navigation, linked from the instructor page only.
2. Execute the lessons and the solutions in place, a few kernels at a time; part three's share
   one PostgreSQL server (`labkit.pg.server()`, passed on as LABKIT_PG_DSN). Each widget's
   output becomes its first view, drawn from the widget state as its cell left it
   (site/widget_view.py).
3. Sphinx renders OUT/html: MyST-NB reads the executed notebooks as they are, Furo the theme.

Usage: python site/build.py [--out build/site] [--jobs 3] [--timeout 180]
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

from widget_view import WIDGET_MIME, replace_widget_outputs  # noqa: E402

# The learning path, by notebook number: each part's lessons, each followed by its exercises.
PARTS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("Start here", (0,)),
    ("Part one · the gap-free delivery frontier", (1, 2, 3)),
    ("Part two · the catalog watermark with ballots", (4, 5, 6)),
    ("Part three · the same lessons on real servers", (7, 8, 9)),
)
# The worked answers' section: last in the navigation, after the reference, and linked from no
# page a learner works through (a student page says where the answers are but does not link).
# The reference pages: these docs first, in this order, then any other docs/*.md by name.
REFERENCE_DOCS = ("glossary", "instructor", "benchmarks", "figures")
NUMBER = re.compile(r"^(?:ex)?(\d\d)_")
# A docs page's figure on a line of its own; its dark twin is built into figures/DARK/.
FIGURE_LINE = re.compile(r"^!\[(?P<alt>[^\]\n]*)\]\(figures/(?P<name>[\w-]+)\.svg\)[ \t]*$", re.M)
DARK = "dark"
SITE_LINK = re.compile(r"\[([^\]]+)\]\(build/site/[^)]*\)")  # the README's link to this site


class BuildError(RuntimeError):
    """The site cannot be built as the sources stand; the message says what to fix."""


def numbered(folder: Path) -> dict[int, Path]:
    """The notebooks of `folder` by their two-digit number (`01_...`, `ex01_...`)."""
    found = {}
    for path in sorted(folder.glob("*.ipynb")):
        match = NUMBER.match(path.name)
        if match:
            found[int(match.group(1))] = path
    return found


def stage(src: Path) -> list[Path]:
    """Copy and prepare the site's sources in `src`; return the notebooks to execute."""
    from labkit.docs import nbfiles

    if src.exists():
        shutil.rmtree(src)
    (src / "docs" / "figures").mkdir(parents=True)
    shutil.copy(SITE / "pages" / "run-it-yourself.md", src)
    shutil.copy(ROOT / "CONTRIBUTING.md", src)
    for page in sorted((ROOT / "docs").glob("*.md")):
        shutil.copy(page, src / "docs")
    for figure in sorted((ROOT / "docs" / "figures").iterdir()):
        if figure.suffix in {".svg", ".png"}:
            shutil.copy(figure, src / "docs" / "figures")
    shutil.copytree(
        ROOT / "notebooks",
        src / "notebooks",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.sqlite", "*.db"),
    )
    shutil.copytree(
        ROOT / "exercises" / "solutions",
        src / "exercises" / "solutions",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints"),
    )
    nbfiles.make_student_copies(ROOT / "exercises" / "solutions", src / "exercises" / "student")
    lessons = numbered(src / "notebooks")
    exercises = numbered(src / "exercises" / "solutions")
    _link_exercise_pairs(exercises, src / "exercises" / "student")
    readme = SITE_LINK.sub(r"`\1`", (ROOT / "README.md").read_text(encoding="utf-8"))
    (src / "index.md").write_text(readme + _toctrees(src, lessons, exercises), encoding="utf-8")
    return [*lessons.values(), *exercises.values()]  # student copies are shown unexecuted


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


def _toctrees(src: Path, lessons: dict[int, Path], exercises: dict[int, Path]) -> str:
    """The site's navigation: the learning path, then the reference pages. The worked answers
    are in no navigation (orphan pages): only the instructor page links them."""
    placed = {n for _, numbers in PARTS for n in numbers}
    if set(lessons) - placed:
        raise BuildError(
            f"notebooks {sorted(set(lessons) - placed)} are in no part of "
            "site/build.py's PARTS: place them on the learning path"
        )

    def doc(path: Path) -> str:
        return path.relative_to(src).with_suffix("").as_posix()

    blocks = []
    for caption, numbers in PARTS:
        entries = []
        for n in numbers:
            if n in lessons:
                entries.append(doc(lessons[n]))
            if n in exercises:
                entries.append(doc(src / "exercises" / "student" / exercises[n].name))
        blocks.append((caption, entries))
    docs = sorted(p.stem for p in (src / "docs").glob("*.md"))
    docs = [d for d in REFERENCE_DOCS if d in docs] + [d for d in docs if d not in REFERENCE_DOCS]
    blocks.append(("Reference", ["run-it-yourself", *(f"docs/{d}" for d in docs), "CONTRIBUTING"]))
    return "".join(
        f"\n\n```{{toctree}}\n:caption: {caption}\n:hidden:\n\n" + "\n".join(entries) + "\n```\n"
        for caption, entries in blocks
    )


def _link_exercise_pairs(solutions: dict[int, Path], student_dir: Path) -> None:
    """Title each solution page as such and link it to its student page; the student page
    names the hints and where the answers are, without a link to them."""
    import nbformat
    from nbformat.v4 import new_markdown_cell

    for n, solution in solutions.items():
        student = student_dir / solution.name
        for path, note in (
            (
                student,
                "Check each answer with `.check()`; when stuck, climb `.hint(1)` to "
                "`.hint(3)` before `.solution()`. The worked answers are for "
                "instructors: the instructor page links them, and nothing a learner follows does.",
            ),
            (
                solution,
                "These are the worked answers, for instructors. The exercises without "
                f"them: [Exercises {n:02d}](../student/{solution.name}).",
            ),
        ):
            nb = nbformat.read(path, as_version=4)
            if path == solution:
                nb.metadata["orphan"] = True  # in no navigation: only the instructor page links it
                first = nb.cells[0]
                first.source = re.sub(r"^# Exercises\b", "# Solutions", first.source, count=1)
                if not first.source.startswith("# Solutions"):
                    first.source = re.sub(r"^# ", "# Solutions · ", first.source, count=1)
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


def render(src: Path, html: Path, doctrees: Path) -> None:
    """Sphinx with this folder's conf.py; any warning (a broken link, an orphan page) fails."""
    from sphinx.cmd.build import build_main

    if html.exists():
        shutil.rmtree(html)
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
            str(src),
            str(html),
        ]
    )
    if code:
        raise BuildError(f"sphinx-build failed (exit {code}); its warnings are above")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--jobs", type=int, default=3, help="kernels at a time (default 3)")
    parser.add_argument("--timeout", type=int, default=180, help="seconds per cell (default 180)")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    t0 = time.monotonic()
    try:
        notebooks = stage(out / "src")
        theme_figures(out / "src")
        print(f"staged {len(notebooks)} notebooks in {time.monotonic() - t0:.1f} s", flush=True)
        t1 = time.monotonic()
        execute(notebooks, args.jobs, args.timeout, out / "kernels.log")
        print(f"executed them in {time.monotonic() - t1:.1f} s", flush=True)
        t2 = time.monotonic()
        render(out / "src", out / "html", out / "doctrees")
        print(f"rendered in {time.monotonic() - t2:.1f} s", flush=True)
    except BuildError as exc:
        print(f"site build failed: {exc}", file=sys.stderr)
        return 1
    print(f"site built in {time.monotonic() - t0:.0f} s: {out / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
