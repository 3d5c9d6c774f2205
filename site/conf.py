"""Sphinx configuration of the workbook's static site (built by site/build.py, not by hand).

The sources are the staged, already executed copy that site/build.py writes; MyST-NB renders
the notebooks as they are (no execution here) and Furo, which ships every asset it uses, is the
theme. No page loads anything from another host: no web fonts, no MathJax, no widget manager.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

project = "The Watermark Workbook"
html_title = "The Watermark Workbook"
extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["**/.ipynb_checkpoints"]

nb_execution_mode = "off"  # site/build.py executed every notebook already
nb_ipywidgets_js: dict[str, Any] = {}  # widgets are drawn as static views, no manager from a CDN
nb_merge_streams = True
myst_heading_anchors = 3

html_theme = "furo"
html_static_path = [str(HERE / "static")]
html_css_files = ["workbook.css"]
html_copy_source = False
html_show_sourcelink = False
html_show_sphinx = False

RUN_PAGE = "run-it-yourself"


def repo_path(source: str) -> str:
    """The repository path of a staged source file (the front page is site/pages/index.md,
    else the README, as site/build.py's `front_page` picks)."""
    if source != "index.md":
        return source
    return "site/pages/index.md" if (HERE / "pages" / "index.md").is_file() else "README.md"


def run_yourself_banner(
    app: Any, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Put a "run this yourself" line under every page's title: the commands and the file."""
    if doctree is None or pagename == RUN_PAGE or "body" not in context:
        return
    source = repo_path(app.env.doc2path(pagename, False).as_posix())
    how = f'<a href="{app.builder.get_relative_uri(pagename, RUN_PAGE)}">Run it yourself</a>'
    if source.startswith("exercises/solutions/"):
        text = (
            f"This page is <code>{source}</code> in the repository (the workshop folder holds only"
            f" the copy with answers blanked); <code>make test</code> runs it. {how}."
        )
    elif source.endswith(".ipynb"):
        text = (
            f"▶ Run this notebook yourself: in a clone of the repository, <code>make lab</code>"
            f" opens JupyterLab on your own <code>workshop/</code> folder; open <code>{source}"
            f"</code> there. <code>make test</code> runs it with every test. {how}."
        )
    else:
        text = (
            f"This page is <code>{source}</code> in the repository. {how}: <code>make lab</code>"
            " opens the workbook in JupyterLab on your own <code>workshop/</code> folder,"
            " <code>make test</code> runs every test."
        )
    banner = f'<p class="wb-run-yourself">{text}</p>'
    body = context["body"]
    cut = body.find("</h1>")
    cut = cut + len("</h1>") if cut >= 0 else 0
    context["body"] = body[:cut] + banner + body[cut:]


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", run_yourself_banner)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
