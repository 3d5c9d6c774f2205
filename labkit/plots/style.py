"""Shared look and byte-stable saving for every workbook figure."""

from __future__ import annotations

import base64
import functools
import io
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

import matplotlib
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection
from matplotlib.colors import to_rgb, to_rgba_array
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from PIL import Image as PILImage

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

P = ParamSpec("P")
R = TypeVar("R")

# One palette for the whole workbook so a colour means the same thing everywhere. Okabe-Ito hues:
# every pair of meanings shown together stays `colorblind.MIN_DELTA_E` apart for deuteranopes,
# protanopes and tritanopes (tests/test_palette.py), on the light and the dark background.
OKABE_ITO = {
    "orange": "#e69f00",
    "sky_blue": "#56b4e9",
    "bluish_green": "#009e73",
    "yellow": "#f0e442",
    "blue": "#0072b2",
    "vermillion": "#d55e00",
    "reddish_purple": "#cc79a7",
}
COLORS = {
    "pending": "#bbbbbb",
    "running": OKABE_ITO["orange"],
    "delivered": OKABE_ITO["bluish_green"],
    "failed": OKABE_ITO["reddish_purple"],
    "orphan": OKABE_ITO["vermillion"],
    "max": OKABE_ITO["vermillion"],
    "frontier": OKABE_ITO["blue"],
    "callback": OKABE_ITO["vermillion"],
    "lww": OKABE_ITO["orange"],
    "ballot": OKABE_ITO["blue"],
    "fenced": OKABE_ITO["bluish_green"],
    "pipelined": OKABE_ITO["sky_blue"],
    "cas": OKABE_ITO["reddish_purple"],
    "reject": "#666666",
    "rewind": OKABE_ITO["vermillion"],
    "fault": OKABE_ITO["reddish_purple"],
    "hold": OKABE_ITO["sky_blue"],
    "flush": OKABE_ITO["orange"],
    "writer_a": OKABE_ITO["reddish_purple"],
    "writer_b": OKABE_ITO["sky_blue"],
}

# Which meanings a figure shows side by side: each group must stay apart for every reader.
SHOWN_TOGETHER: dict[str, tuple[str, ...]] = {
    "designs": ("callback", "lww", "ballot", "fenced", "pipelined", "cas", "reject"),
    "statuses": ("pending", "running", "delivered", "failed", "orphan"),
    "watermarks": ("max", "frontier", "pending", "running", "delivered", "failed"),
    "writers": ("writer_a", "writer_b", "max", "frontier", "delivered"),
    "pipelined": ("pipelined", "ballot", "fenced", "flush", "reject"),
    "remote": ("running", "fault", "rewind", "reject"),
}

# Meaning never by colour alone: each design also has its own marker and line style, used by
# every plot that shows designs together.
DESIGN_MARKS: dict[str, dict[str, Any]] = {
    "callback": {"marker": "v", "ls": (0, (7, 2))},
    "lww": {"marker": "D", "ls": "--"},
    "ballot": {"marker": "o", "ls": "-"},
    "fenced": {"marker": "s", "ls": "-."},
    "pipelined": {"marker": "^", "ls": (0, (5, 1, 1, 1))},
    "cas": {"marker": "P", "ls": (0, (3, 1, 1, 1, 1, 1))},
}

# The statuses of part one's timeline, also told apart by shape.
STATUS_MARKS = {"pending": "s", "running": "D", "delivered": "o", "failed": "X", "orphan": "o"}


def design_style(design: str) -> dict[str, Any]:
    """Colour, marker and line style of a design (grey and no mark for an unknown one)."""
    return {"color": COLORS.get(design, "#444444"), **DESIGN_MARKS.get(design, {})}


@dataclass(frozen=True)
class Theme:
    """A figure background and the colours of its ink (text, ticks, spines) and grid."""

    background: str
    ink: str
    grid: str
    edge: str

    def rc(self) -> dict[RcKeyType, Any]:
        """The rcParams that apply this theme (every figure, through `workbook_style`)."""
        return {
            "figure.facecolor": self.background,
            "figure.edgecolor": self.background,
            "axes.facecolor": self.background,
            "savefig.facecolor": self.background,
            "savefig.edgecolor": self.background,
            "axes.edgecolor": self.edge,
            "axes.labelcolor": self.ink,
            "text.color": self.ink,
            "xtick.color": self.ink,
            "ytick.color": self.ink,
            "grid.color": self.grid,
            "legend.labelcolor": self.ink,
            "patch.edgecolor": self.ink,
            "hatch.color": self.ink,
        }


# Light is the committed figures' look; dark matches Furo's dark page (#131416).
THEMES = {
    "light": Theme(background="#ffffff", ink="#000000", grid="#b0b0b0", edge="#000000"),
    "dark": Theme(background="#131416", ink="#e8e8e8", grid="#6a6a6a", edge="#c8c8c8"),
}
# Each palette colour stays at least this far (ΔE76, every reader) from the theme's background.
MIN_BACKGROUND_DELTA_E = 20.0
_THEME: ContextVar[str] = ContextVar("labkit_theme", default="light")


@contextmanager
def use_theme(name: str) -> Iterator[Theme]:
    """Draw and save every figure made inside this block in the theme `name` (see `THEMES`)."""
    token = _THEME.set(name)
    try:
        with workbook_style():
            yield THEMES[name]
    finally:
        _THEME.reset(token)


def current_theme() -> Theme:
    """The theme figures are drawn in now (light unless inside `use_theme`)."""
    return THEMES[_THEME.get()]


# Fonts shipped in labkit/plots/fonts: "Workbook CJK" draws the CJK characters of shard names
# that DejaVu Sans lacks, as a fallback after it (a subset of Noto Sans CJK SC, OFL.txt there).
FONTS_DIR = Path(__file__).with_name("fonts")
FONT_FAMILIES = ["DejaVu Sans", "Workbook CJK"]


@functools.cache
def register_fonts() -> None:
    """Add the workbook's own fonts to matplotlib's font manager (once per process)."""
    from matplotlib import font_manager

    for path in sorted(FONTS_DIR.glob("*.otf")):
        font_manager.fontManager.addfont(str(path))


register_fonts()

# The smallest text a figure may carry, in pixels at its own dpi: readable projected.
MIN_TEXT_PX = 10.0

RC: dict[RcKeyType, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.family": FONT_FAMILIES,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "legend.frameon": False,
    "svg.hashsalt": "watermark-workbook",
    "svg.fonttype": "path",
}

# A legend just right of the axes, for figures that leave room there (subplots_adjust right).
RIGHT_LEGEND: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "fontsize": 9}

# Metadata that would otherwise embed dates or versions and break byte-stable rebuilds.
_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
_PNG_METADATA = {"Software": None}


@contextmanager
def workbook_style() -> Iterator[None]:
    """Apply the workbook's rcParams for the duration of a plot call."""
    with matplotlib.rc_context({**RC, **current_theme().rc()}):
        yield


def new_figure(
    width: float = 8.0,
    height: float = 4.0,
    layout: Literal["constrained", "compressed", "tight"] | None = None,
) -> Figure:
    """A pyplot-free Figure (no global state, safe in widget callbacks) in the workbook style.

    The default has no layout engine: constrained layout costs ~50 ms a draw, which a widget
    redraw cannot afford; callers place axes with `fig.subplots_adjust` instead.
    """
    with workbook_style():
        fig = Figure(figsize=(width, height), layout=layout)
    return fig


def single_axes(
    width: float,
    height: float,
    *,
    left: float = 0.1,
    right: float = 0.97,
    top: float = 0.88,
    bottom: float = 0.14,
) -> Axes:
    """One axes on a `new_figure`, placed by fractions of the figure (no layout engine)."""
    fig = new_figure(width, height)
    fig.subplots_adjust(left=left, right=right, top=top, bottom=bottom)
    return fig.add_subplot()


def figure_of(ax: Axes) -> Figure:
    """The Figure `ax` is drawn on: the workbook's axes never sit on a SubFigure."""
    fig = ax.figure
    if not isinstance(fig, Figure):
        raise TypeError(f"these axes are on a {type(fig).__name__}, not a Figure")
    return fig


def png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    """Render `fig` to PNG bytes (what widgets display and tests compare)."""
    buf = io.BytesIO()
    with workbook_style():
        fig.savefig(buf, format="png", dpi=dpi, metadata=_PNG_METADATA)
    return buf.getvalue()


def save_figure(
    fig: Figure, stem: Path, formats: tuple[str, ...] = ("svg", "png"), dpi: int | None = None
) -> list[Path]:
    """Save `fig` as `stem.svg` / `stem.png` with fixed metadata so reruns are byte-identical;
    each file is rendered in memory and written by replace (`labkit.files`), never in place."""
    from labkit.files import replace_file

    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    with workbook_style():
        retint(fig)
        for fmt in formats:
            path = stem.with_suffix(f".{fmt}")
            metadata = _SVG_METADATA if fmt == "svg" else _PNG_METADATA
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, metadata=metadata, dpi=dpi or RC["savefig.dpi"])
            replace_file(path, buf.getvalue())
            written.append(path)
    return written


def retint(fig: Figure) -> None:
    """Repaint the greys a plot names itself (black lines, grey notes, white fills) in the
    current theme: black becomes its ink, white its background, greys fall between. Hues stay."""
    theme = current_theme()
    if theme == THEMES["light"]:
        return
    ink, paper = np.array(to_rgb(theme.ink)), np.array(to_rgb(theme.background))
    # the theme's own greys come from its rc; the palette's (pending, reject) keep their meaning
    own = [to_rgb(c) for c in (theme.ink, theme.background, theme.grid, theme.edge)]
    own += [to_rgb(c) for c in COLORS.values()]

    def tint(color: Any) -> Any:
        if isinstance(color, str) and color.lower() in ("none", "auto", "face"):
            return color
        rgba = to_rgba_array(color)
        for row in rgba:
            grey = row[:3].max() - row[:3].min() < 0.02  # no hue to keep
            if grey and tuple(row[:3]) not in own:
                row[:3] = ink + (paper - ink) * row[:3].mean()
        return rgba if len(rgba) != 1 else tuple(rgba[0])

    frames = {id(fig.patch), *(id(ax.patch) for ax in fig.axes)}
    for artist in fig.findobj():
        if id(artist) in frames or isinstance(artist, Legend):
            continue
        if isinstance(artist, Line2D):
            artist.set_color(tint(artist.get_color()))
            artist.set_markeredgecolor(tint(artist.get_markeredgecolor()))
            artist.set_markerfacecolor(tint(artist.get_markerfacecolor()))
        elif isinstance(artist, Collection | Patch):
            artist.set_facecolor(tint(artist.get_facecolor()))
            artist.set_edgecolor(tint(artist.get_edgecolor()))
        elif isinstance(artist, Text):
            artist.set_color(tint(artist.get_color()))


def styled(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator: run a plot function inside the workbook rcParams."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with workbook_style():
            return fn(*args, **kwargs)

    return wrapper


def label_share_bars(
    ax: Axes,
    xs: Iterable[float],
    shares: Iterable[float],
    hits: Iterable[int],
    totals: Iterable[int],
    **text: Any,
) -> None:
    """Write `hits/totals` just above each bar of a share-of-all-orders chart."""
    for x, share, hit, total in zip(xs, shares, hits, totals, strict=True):
        ax.text(x, share + 0.02, f"{hit}/{total}", ha="center", va="bottom", **text)


class FrameCache:
    """Fast PNGs of a figure whose frame (axes, ticks, legend) rarely changes.

    The first render of a `frame_key` draws everything but the `animated` artists and keeps
    those pixels; later renders with a key seen before restore them and draw only the animated
    artists. The last `frames` keys are kept, so a control moved back and forth (a slider
    nudged left and right) finds both frames. A full Agg draw of ticks and legend text costs
    ~60 ms; this path costs a few.

    `ticks` (the axes' `xaxis`/`yaxis`: ticks, tick labels, grid) are what differs from one
    frame key to the next when the rest of the frame (titles, legend, labels' text, panels) is
    the same for every key, as when only the limits change: that rest is drawn once per figure
    size and dpi and kept, and a new frame draws only the ticks on it (half a full draw).

    `texts` (labels that change with the data, but less often than it) are drawn onto the frame
    and those pixels kept too, keyed by what the texts say and where: text is the dearest
    artist to rasterise, and an undo, a reset or a retyped schedule brings back texts already
    drawn. `steady` artists (e.g. a highlighted panel's frame) are kept the same way, keyed by
    `steady_key`, under the texts. Both go under the other animated artists.
    """

    def __init__(self, frames: int = 6, bases: int = 2) -> None:
        self._frames = frames
        self._most_bases = bases  # frames without ticks kept, one per figure size
        self._canvas: FigureCanvasAgg | None = None
        self._bases: OrderedDict[object, object] = OrderedDict()
        self._backgrounds: OrderedDict[object, object] = OrderedDict()
        self._with_texts: OrderedDict[object, object] = OrderedDict()

    def png(
        self,
        fig: Figure,
        animated: Sequence[Artist],
        frame_key: object,
        dpi: int,
        texts: Sequence[Text] = (),
        *,
        ticks: Sequence[Artist] = (),
        steady: Sequence[Artist] = (),
        steady_key: object = None,
    ) -> bytes:
        """PNG bytes of `fig` at `dpi`, redrawing the frame only for a `frame_key` not kept."""
        for artist in (*animated, *steady, *texts):
            artist.set_animated(True)
        key = (frame_key, dpi)
        with workbook_style():
            canvas = self._canvas_for(fig, dpi)
            layered = bool(texts or steady)
            layer = (key, steady_key, tuple(_text_key(t) for t in texts))
            if layered and layer in self._with_texts:
                self._with_texts.move_to_end(layer)
                canvas.restore_region(self._with_texts[layer])
            else:
                if key in self._backgrounds:
                    self._backgrounds.move_to_end(key)
                    canvas.restore_region(self._backgrounds[key])
                else:
                    self._draw_frame(fig, canvas, ticks, dpi)
                    _keep(self._backgrounds, key, canvas.copy_from_bbox(fig.bbox), self._frames)
                if layered:
                    for artist in (*steady, *texts):
                        fig.draw_artist(artist)
                    _keep(self._with_texts, layer, canvas.copy_from_bbox(fig.bbox), self._frames)
            for artist in animated:
                fig.draw_artist(artist)
            return widget_png(canvas)

    def has(self, frame_key: object, dpi: int) -> bool:
        """True if the frame of `frame_key` at `dpi` is kept (a `png` with it draws no frame)."""
        return (frame_key, dpi) in self._backgrounds

    def keep(self, fig: Figure, frame_key: object, dpi: int, ticks: Sequence[Artist] = ()) -> None:
        """Draw the frame of `frame_key` now and keep it, e.g. while a widget's kernel is idle,
        so that the `png` that first needs it only restores it. The caller has set the figure
        up as that key says (its limits) and marked the data artists animated."""
        with workbook_style():
            canvas = self._canvas_for(fig, dpi)
            self._draw_frame(fig, canvas, ticks, dpi)
            _keep(
                self._backgrounds, (frame_key, dpi), canvas.copy_from_bbox(fig.bbox), self._frames
            )

    def has_base(self, size_inches: tuple[float, float], dpi: int) -> bool:
        """True if the frame without ticks of a figure of this size is kept at `dpi`."""
        return (dpi, tuple(size_inches)) in self._bases

    def keep_base(self, fig: Figure, dpi: int, ticks: Sequence[Artist]) -> None:
        """Draw and keep the frame without `ticks` for the figure's size now (e.g. a taller
        figure the widget may grow to, while its kernel is idle), so a new frame of that size
        draws only the ticks."""
        with workbook_style():
            self._draw_base(fig, self._canvas_for(fig, dpi), ticks, dpi)

    def _canvas_for(self, fig: Figure, dpi: int) -> FigureCanvasAgg:
        """The Agg canvas of `fig` at `dpi`; a new figure forgets everything kept."""
        if self._canvas is None or self._canvas.figure is not fig:
            self._canvas = FigureCanvasAgg(fig)
            self._bases.clear()
            self._backgrounds.clear()
            self._with_texts.clear()
        fig.set_canvas(self._canvas)
        if fig.dpi != dpi:
            fig.set_dpi(dpi)
        return self._canvas

    def _draw_frame(
        self, fig: Figure, canvas: FigureCanvasAgg, ticks: Sequence[Artist], dpi: int
    ) -> None:
        """Draw the frame: all of it, or the kept base (the frame without `ticks`) plus ticks."""
        if not ticks:
            canvas.draw()
            return
        base = (dpi, tuple(fig.get_size_inches()))
        if base in self._bases:
            self._bases.move_to_end(base)
            canvas.restore_region(self._bases[base])
        else:
            self._draw_base(fig, canvas, ticks, dpi)
        for artist in ticks:
            fig.draw_artist(artist)

    def _draw_base(
        self, fig: Figure, canvas: FigureCanvasAgg, ticks: Sequence[Artist], dpi: int
    ) -> None:
        """Draw the frame without `ticks` and keep it for the figure's size and `dpi`."""
        for artist in ticks:
            artist.set_animated(True)
        try:
            canvas.draw()
        finally:
            for artist in ticks:
                artist.set_animated(False)
        base = (dpi, tuple(fig.get_size_inches()))
        _keep(self._bases, base, canvas.copy_from_bbox(fig.bbox), self._most_bases)


def _keep(kept: OrderedDict[object, object], key: object, pixels: object, most: int) -> None:
    kept[key] = pixels
    while len(kept) > most:
        kept.popitem(last=False)


def _text_key(text: Text) -> tuple:
    """What a text's pixels depend on, besides the frame (limits, dpi: the frame key)."""
    if not text.get_visible():
        return ()
    return (
        text.get_text(),
        text.get_position(),
        text.get_color(),
        text.get_alpha(),
        text.get_rotation(),
        text.get_fontproperties(),
        text.get_horizontalalignment(),
        text.get_verticalalignment(),
        id(text.get_transform()),  # which coordinates; their scale is in the frame key
    )


def widget_png(canvas: FigureCanvasAgg) -> bytes:
    """The canvas's pixels as a small PNG, quickly: a 256-colour palette (a workbook figure has
    fewer distinct colours than that, bar anti-aliased edges, which move by a few levels) and
    light compression. A third of the bytes of an RGBA PNG, so less to encode, send and decode.
    """
    width, height = canvas.get_width_height()
    image = PILImage.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    palette = image.convert("RGB").quantize(
        256, method=PILImage.Quantize.FASTOCTREE, dither=PILImage.Dither.NONE
    )
    buf = io.BytesIO()
    palette.save(buf, format="png", compress_level=1)
    return buf.getvalue()


def image_bundle(png: bytes, alt: str) -> dict[str, str]:
    """A display bundle for a PNG that carries its text alternative.

    JupyterLab's image renderer sets no `alt`, but it prefers `text/html` to `image/png`, and
    its sanitizer keeps an `<img>`'s `alt` and a `data:` source; `text/plain` holds the same
    words for plain-text front ends. `image/png` stays for tools that read the picture itself.
    """
    encoded = base64.b64encode(png).decode("ascii")
    html = f'<img src="data:image/png;base64,{encoded}" alt="{escape(alt, quote=True)}"/>'
    return {"text/html": html, "image/png": encoded, "text/plain": alt}


def show(fig: Figure, dpi: int = 100, alt: str | None = None) -> None:
    """Display a labkit figure in a notebook as a PNG (no pyplot state involved).

    With `alt`, the image carries that text alternative (see `image_bundle`).
    """
    from IPython.display import Image, display

    png = png_bytes(fig, dpi=dpi)
    if alt is None:
        display(Image(data=png))
    else:
        display(image_bundle(png, alt), raw=True)
