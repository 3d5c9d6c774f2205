"""The built static site, opened in headless Chromium with every other host blocked.

Uses the student site `make site` built (build/site, or LABKIT_SITE_DIR) and builds it first
when there is none. Every page must load with no console error and no failed request, every
image must decode, every internal link and anchor must resolve, the search must find the
workbook's two ideas, and no page may show a traceback or a raw widget repr. No file, link or
search entry of it may reach a worked answer or the instructor page; both editions, rendered
from their staged sources without executing them, are checked for that too. Screenshots of the
front page and one page per part land in artifacts/site/.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = [pytest.mark.site, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LABKIT_SITE_DIR", ROOT / "build" / "site"))
HTML = SITE / "html"
ARTIFACTS = ROOT / "artifacts" / "site"
CHROMIUM = Path("/usr/bin/chromium")
WAIT_MS = 60_000
RAW_REPRS = re.compile(r"\b(?:H|V|Grid)?Box\(children=|Output\(outputs=|\w+Slider\(value=")
TRACEBACK = "Traceback (most recent call last)"
# One page per part of the learning path, by notebook number (names may change, numbers stay).
PART_PAGES = {"part-one": "01", "part-two": "04", "part-three": "07"}
# What only the instructor edition holds, as paths in the built html folder.
ANSWER_PATHS = ("exercises/solutions/", "docs/instructor.html")

sys.path.insert(0, str(ROOT / "site"))
import build  # noqa: E402  (site/build.py, importable once its folder is on the path)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def site() -> Path:
    """The built site's html folder; `site/build.py` builds it when there is none."""
    if not (HTML / "index.html").is_file():
        subprocess.run(
            [sys.executable, str(ROOT / "site" / "build.py"), "--out", str(SITE)],
            check=True,
            cwd=ROOT,
        )
    return HTML


@pytest.fixture(scope="session")
def base_url(site: Path) -> Iterator[str]:
    """The site served over HTTP from 127.0.0.1 by a quiet thread."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's Chromium driven by Playwright; locally a missing one skips, under CI it fails."""
    problem = None
    if not CHROMIUM.is_file():
        problem = (
            f"{CHROMIUM} not found; install it with: apt-get update && apt-get install -y chromium"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "playwright is not installed (pip install -e '.[dev]')"
    if problem:
        if _in_ci():
            pytest.fail(f"CI=true and the site crawl cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM))
        yield chromium
        chromium.close()


class Offline:
    """A browser context that aborts every request not to the site, and records what went wrong."""

    def __init__(self, browser: Browser, base_url: str) -> None:
        self.base = base_url
        self.problems: list[str] = []
        self.context: BrowserContext = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.set_default_timeout(WAIT_MS)
        self.context.route("**/*", self._route)
        self.page_name = ""

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(self.base) or url.startswith("data:"):
            route.continue_()
        else:
            self.problems.append(f"{self.page_name}: requested another host: {url}")
            route.abort()

    def new_page(self) -> Page:
        page = self.context.new_page()
        page.on(
            "console",
            lambda m: (
                m.type == "error"
                and self.problems.append(f"{self.page_name}: console error: {m.text}")
            ),
        )
        page.on("pageerror", lambda e: self.problems.append(f"{self.page_name}: page error: {e}"))
        page.on(
            "requestfailed",
            lambda r: self.problems.append(
                f"{self.page_name}: request failed: {r.url} ({r.failure})"
            ),
        )
        page.on(
            "response",
            lambda r: (
                r.status >= 400
                and self.problems.append(f"{self.page_name}: HTTP {r.status} for {r.url}")
            ),
        )
        return page


@pytest.fixture
def offline(browser: Browser, base_url: str) -> Iterator[Offline]:
    ctx = Offline(browser, base_url)
    yield ctx
    ctx.context.close()


def pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))


def content_pages(site: Path) -> list[str]:
    """The pages made from the workbook's files (not Sphinx's search and index pages)."""
    return [p for p in pages(site) if p not in {"search.html", "genindex.html"}]


def numbered_page(site: Path, folder: str, number: str) -> str:
    (found,) = [p for p in pages(site) if re.match(rf"{folder}/(?:ex)?{number}_", p)]
    return found


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


# --------------------------------------------------------------------------- the crawl


IMAGES_JS = """() => Array.from(document.images).map(i => ({
    src: i.currentSrc.slice(0, 80), complete: i.complete,
    w: i.naturalWidth, h: i.naturalHeight}))"""


def test_every_page_loads_offline_with_no_error_and_every_image_decodes(
    site: Path, base_url: str, offline: Offline
) -> None:
    page = offline.new_page()
    checked_images = 0
    for name in pages(site):
        offline.page_name = name
        page.goto(base_url + name, wait_until="load")
        page.wait_for_load_state("networkidle")
        for img in page.evaluate(IMAGES_JS):
            checked_images += 1
            if not (img["complete"] and img["w"] > 0 and img["h"] > 0):
                offline.problems.append(f"{name}: image did not decode: {img}")
        text = page.locator("body").inner_text()
        if TRACEBACK in text or page.locator(".output.traceback, .output.error").count():
            offline.problems.append(f"{name}: shows a Python traceback")
        if RAW_REPRS.search(text):
            offline.problems.append(f"{name}: shows a raw widget repr: {RAW_REPRS.search(text)[0]}")
    assert not offline.problems, "\n".join(offline.problems)
    assert checked_images > 40  # every figure of 00-08, the docs figures and the widgets' views


def test_every_figure_of_every_notebook_is_on_its_page(site: Path) -> None:
    """Each executed notebook's figures (PNG outputs, <img> in HTML outputs) are all on its page."""
    missing = []
    notebooks = sorted((SITE / "src" / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 9
    for path in notebooks:
        executed = json.loads(path.read_text(encoding="utf-8"))
        figures = 0
        for cell in executed["cells"]:
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                html = "".join(data.get("text/html", ""))
                figures += html.count("<img") if html else int("image/png" in data)
        page = (site / "notebooks" / path.with_suffix(".html").name).read_text(encoding="utf-8")
        shown = page.count("<img")  # the theme draws no image of its own
        if figures == 0 or shown != figures:
            missing.append(f"{path.name}: {figures} figures run, {shown} on the page")
    assert not missing, "\n".join(missing)


class Links(HTMLParser):
    """Every id on a page and every internal URL it points to (links, images, scripts, styles)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"])
        for key in ("href", "src"):
            url = found.get(key)
            if url and not re.match(r"^(?:[a-z]+:|//)", url):
                self.urls.append(url)


def test_every_internal_link_and_anchor_resolves(site: Path) -> None:
    parsed = {}
    for name in pages(site):
        links = Links()
        links.feed((site / name).read_text(encoding="utf-8"))
        parsed[name] = links
    broken = []
    checked = 0
    for name, links in parsed.items():
        for url in links.urls:
            parts = urlsplit(url)
            target = (Path(name).parent / unquote(parts.path)).as_posix() if parts.path else name
            target = os.path.normpath(target)
            if target.endswith("/") or (site / target).is_dir():
                target = f"{target.rstrip('/')}/index.html"
            checked += 1
            if not (site / target).is_file():
                broken.append(f"{name}: {url} (no file {target})")
            elif parts.fragment and target.endswith(".html"):
                ids = parsed[target].ids if target in parsed else set()
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{name}: {url} (no id {parts.fragment!r} in {target})")
    assert not broken, "\n".join(broken)
    assert checked > 500


@pytest.mark.parametrize("word", ["frontier", "ballot"])
def test_the_search_finds_the_workbooks_two_ideas(
    site: Path, base_url: str, offline: Offline, word: str
) -> None:
    page = offline.new_page()
    offline.page_name = f"search.html?q={word}"
    page.goto(f"{base_url}search.html?q={word}")
    results = page.locator("#search-results ul.search li")
    results.first.wait_for()
    hits = results.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert any("notebooks/" in h for h in hits), hits
    screenshot(page, f"search-{word}")
    assert not offline.problems, "\n".join(offline.problems)


def test_every_page_says_how_to_run_it_yourself(site: Path) -> None:
    missing = []
    for name in content_pages(site):
        html = (site / name).read_text(encoding="utf-8")
        banner = re.search(r'<p class="wb-run-yourself">(.*?)</p>', html, re.DOTALL)
        if name == "run-it-yourself.html":
            text = re.sub(r"<[^>]+>", "", html)
            if "make lab" not in text or "make test" not in text:
                missing.append(f"{name}: does not give the two commands")
        elif not banner or "run-it-yourself.html" not in banner[1]:
            missing.append(f"{name}: no link to 'Run it yourself' under its title")
        elif name.startswith(("notebooks/", "exercises/")) and (
            f"<code>{name.removesuffix('.html')}.ipynb</code>" not in banner[1]
        ):
            missing.append(f"{name}: the line does not name the notebook's path")
    assert not missing, "\n".join(missing)


def test_student_pages_hold_no_answer_and_say_how_to_work_them(site: Path) -> None:
    students = [p for p in pages(site) if p.startswith("exercises/student/")]
    assert len(students) >= 8
    for name in students:
        html = (site / name).read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in html and "____" in html, name
        note = re.search(r'<div class="admonition note">(.*?)</div>', html, re.DOTALL)
        assert note, f"{name}: no note under the title"
        text = re.sub(r"<[^>]+>", "", note[1])
        assert "make lab" in text and "workshop/" in text, name
        assert f"exercises/student/{Path(name).with_suffix('.ipynb').name}" in text, name


def answer_references(html: Path) -> list[str]:
    """Every file, link, search-index or inventory entry of a built site that is or reaches a
    worked answer or the instructor page."""
    found = [
        f"{p.relative_to(html).as_posix()}: a page of the instructor edition"
        for p in html.rglob("*")
        if p.is_file() and p.relative_to(html).as_posix().startswith(ANSWER_PATHS)
    ]
    for name in pages(html):
        links = Links()
        links.feed((html / name).read_text(encoding="utf-8"))
        for url in links.urls:
            path = unquote(urlsplit(url).path)
            target = os.path.normpath((Path(name).parent / path).as_posix()) if path else name
            if target.startswith(ANSWER_PATHS):
                found.append(f"{name}: links {url}")
    search = (html / "searchindex.js").read_text(encoding="utf-8")
    inventory = (html / "objects.inv").read_bytes().split(b"\n", 4)[4]
    for where, text in (("searchindex.js", search), ("objects.inv", zlib.decompress(inventory))):
        for path in ("exercises/solutions/", "docs/instructor"):
            text = text.decode() if isinstance(text, bytes) else text
            if path in text:
                found.append(f"{where}: names {path}")
    return found


def test_the_student_site_has_no_answer_and_no_path_to_one(site: Path) -> None:
    """No solution page, no instructor page, and no link (navigation, page body) or search
    entry that reaches either, in any file of the built student site."""
    assert len(pages(site)) > 20
    assert answer_references(site) == []


@pytest.fixture(scope="module")
def editions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both editions staged and rendered, notebooks not executed: what each links, quickly."""
    built = {}
    for edition in ("student", "instructor"):
        out = tmp_path_factory.mktemp(edition)
        build.stage(out / "src", instructor=edition == "instructor")
        build.render(out / "src", out / "html", out / "doctrees", edition == "instructor")
        built[edition] = out / "html"
    return built


def test_one_switch_tells_the_editions_apart(editions: dict[str, Path]) -> None:
    """The student edition reaches no answer; the instructor edition has the instructor page in
    its navigation and every worked answer, each linked from the instructor page only."""
    assert answer_references(editions["student"]) == []
    html = editions["instructor"]
    found = answer_references(html)
    solutions = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
    assert len(solutions) >= 8
    instructor = (html / "docs" / "instructor.html").read_text(encoding="utf-8")
    for path in solutions:
        page = f"exercises/solutions/{path.stem}.html"
        assert (html / page).is_file(), page
        assert f'href="../{page}"' in instructor, page
        linked_from = {f.split(":")[0] for f in found if f.endswith(f"{path.stem}.html")}
        assert linked_from <= {"docs/instructor.html", "search.html"}, linked_from
    index = (html / "index.html").read_text(encoding="utf-8")
    assert 'href="docs/instructor.html"' in index.split('class="sidebar-tree"', 1)[1]
    assert build.INSTRUCTOR_EDITION in index.split("<title>", 1)[1].split("</title>", 1)[0]
    student_index = (editions["student"] / "index.html").read_text(encoding="utf-8")
    assert build.INSTRUCTOR_EDITION not in student_index.split("</title>", 1)[0]


def test_widgets_show_their_first_view_and_say_they_come_alive_in_jupyterlab(
    site: Path, base_url: str, offline: Offline
) -> None:
    page = offline.new_page()
    views = 0
    for name in [p for p in pages(site) if p.startswith("notebooks/")]:
        offline.page_name = name
        page.goto(base_url + name, wait_until="load")
        for view in page.locator(".wb-widget-static").all():
            views += 1
            box = view.bounding_box()
            assert box and box["height"] > 40, f"{name}: an empty widget view"
            note = view.locator("xpath=following-sibling::p[1]")
            assert "interactive when you run the notebook in JupyterLab" in note.inner_text()
        if name.startswith("notebooks/01_"):
            view = page.locator(".wb-widget-static").filter(has=page.locator("img")).first
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            view.screenshot(path=str(ARTIFACTS / "widget-first-view.png"))
    assert views >= 8  # 01: two, 02: one, 04: two, 05: two, 07: one
    assert not offline.problems, "\n".join(offline.problems)


def test_screenshots_of_the_front_page_and_one_page_per_part(
    site: Path, base_url: str, offline: Offline
) -> None:
    page = offline.new_page()
    offline.page_name = "index.html"
    page.goto(base_url + "index.html", wait_until="load")
    assert "The Watermark Workbook" in page.title()
    screenshot(page, "front-page")
    for part, number in PART_PAGES.items():
        name = numbered_page(site, "notebooks", number)
        offline.page_name = name
        page.goto(base_url + name, wait_until="load")
        screenshot(page, part)
    assert not offline.problems, "\n".join(offline.problems)


def test_the_navigation_follows_the_learning_path(site: Path) -> None:
    """Parts in order, each lesson followed by its exercises; no worked answer and no
    instructor page in it."""
    html = (site / "index.html").read_text(encoding="utf-8")
    captions = re.findall(
        r'<p class="caption" role="heading"><span class="caption-text">(.*?)<', html
    )
    parts = [caption for caption, _ in build.learning_path()]
    assert captions == [*(c.replace("&", "&amp;") for c in parts), "Reference"]
    tree = html.split('class="sidebar-tree"', 1)[1]
    nav = list(  # each page once: a page's sections link it again, with an anchor
        dict.fromkeys(
            re.sub(r"\.html$", "", h)
            for h in re.findall(r'class="reference internal" href="([^"#]+)', tree)
        )
    )
    lessons = [h.split("/")[1].split("_")[0] for h in nav if h.startswith("notebooks/")]
    assert lessons == sorted(lessons) and len(lessons) >= 10
    numbers = sorted({n[:2] for n in lessons})
    assert numbers == [f"{n:02d}" for n in range(len(numbers))]
    for i, h in enumerate(nav):
        if h.startswith("exercises/student/ex"):
            assert nav[i - 1].startswith(f"notebooks/{h.split('/')[-1][2:4]}_"), nav
    assert not [h for h in nav if h.startswith(("exercises/solutions/", "docs/instructor"))]


# Each figure the reader sees, drawn on a canvas: its class and the brightness (0-1) and
# opacity of its top-left pixel, the figure's own background.
SHOWN_FIGURES_JS = """() => Array.from(document.querySelectorAll('article img'))
    .filter(i => i.getClientRects().length > 0 && i.closest('.cell') === null)
    .map(i => {
        const c = document.createElement('canvas');
        c.width = i.naturalWidth; c.height = i.naturalHeight;
        const g = c.getContext('2d');
        g.drawImage(i, 0, 0);
        const [r, gr, b, a] = g.getImageData(2, 2, 1, 1).data;
        return {cls: i.className, light: (0.2126 * r + 0.7152 * gr + 0.0722 * b) / 255, a: a,
                alt: i.alt};
    })"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_figures_page_shows_the_figures_of_the_readers_theme(
    site: Path, base_url: str, browser: Browser, scheme: str
) -> None:
    """Under `prefers-color-scheme` light or dark, every docs figure shown is its twin in that
    theme (its background dark on a dark page: no white slab), and the other is hidden."""
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(base_url + "docs/figures.html", wait_until="load")
        page.wait_for_load_state("networkidle")
        shown = page.evaluate(SHOWN_FIGURES_JS)
        hidden = page.locator(f"article img.only-{'light' if scheme == 'dark' else 'dark'}")
        assert hidden.count() == len(shown) >= 13  # one twin of each, hidden
        for figure in shown:
            assert f"only-{scheme}" in figure["cls"].split(), figure
            assert figure["a"] == 255, figure  # an opaque background, drawn by the figure
            assert (figure["light"] < 0.2) if scheme == "dark" else (figure["light"] > 0.9), figure
        screenshot(page, f"figures-{scheme}")
    finally:
        context.close()
