"""A widget's first view as static HTML, for the site: no widget manager, no kernel.

An executed notebook holds a widget as a `application/vnd.jupyter.widget-view+json` bundle
whose `text/plain` is the raw `VBox(children=...)` repr; the page would show that or nothing.
`static_view` walks the widget models the kernel sent (their state when the cell finished)
and draws what JupyterLab would draw first: the controls, greyed out, at their values, the
HTML panes, and every figure an Output widget holds, then one line saying the widget becomes
interactive when the notebook runs in JupyterLab.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from html import escape
from typing import Any

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
REF = "IPY_MODEL_"
NOTE = (
    '<p class="wb-widget-note">▶ This is the widget as it first appears. It becomes interactive'
    " when you run the notebook in JupyterLab (see <em>Run it yourself</em> at the top of the"
    " page).</p>"
)

States = Mapping[str, Mapping[str, Any]]


class WidgetViewError(ValueError):
    """A widget that cannot be drawn statically; the message names the model."""


def static_view(states: States, model_id: str) -> str:
    """The HTML of widget `model_id`'s first view (its children drawn too) and the note line."""
    return f'<div class="wb-widget-static">{_draw(states, model_id)}</div>{NOTE}'


def replace_widget_outputs(outputs: list[dict[str, Any]], states: States) -> int:
    """Swap every widget-view bundle in one cell's `outputs` for its static view, in place.

    The bundle keeps only `text/html`, so no renderer falls back to the raw repr. Returns how
    many outputs were replaced.
    """
    replaced = 0
    for out in outputs:
        view = out.get("data", {}).get(WIDGET_MIME)
        if view is None:
            continue
        out["data"] = {"text/html": static_view(states, view["model_id"])}
        out.get("metadata", {}).pop(WIDGET_MIME, None)
        replaced += 1
    return replaced


def _draw(states: States, model_id: str) -> str:
    state = states.get(model_id)
    if state is None:
        raise WidgetViewError(f"widget model {model_id} has no state (was it displayed?)")
    if _hidden(states, state):
        return ""
    name = state.get("_model_name", "")
    draw = _DRAWERS.get(name)
    if draw is None:
        raise WidgetViewError(f"widget model {model_id}: no static view for {name or 'a model'}")
    return draw(states, state)


def _hidden(states: States, state: Mapping[str, Any]) -> bool:
    ref = state.get("layout")
    layout = states.get(ref[len(REF) :], {}) if isinstance(ref, str) and ref.startswith(REF) else {}
    return layout.get("display") == "none" or layout.get("visibility") == "hidden"


def _children(states: States, state: Mapping[str, Any]) -> str:
    return "".join(_draw(states, ref[len(REF) :]) for ref in state.get("children", ()))


def _box(direction: str) -> Callable[[States, Mapping[str, Any]], str]:
    def draw(states: States, state: Mapping[str, Any]) -> str:
        return f'<div class="wb-w-{direction}">{_children(states, state)}</div>'

    return draw


def _titled(states: States, state: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """Each child of a Tab or an Accordion: its title, its view, and whether it is the one
    open (`selected_index`; None, an Accordion all closed, opens none)."""
    refs = state.get("children", ())
    titles = list(state.get("titles", ())) + [""] * len(refs)
    selected = state.get("selected_index")
    return [
        (
            titles[i] or f"{i + 1}",
            _draw(states, ref[len(REF) :]) if i == selected else "",
            i == selected,
        )
        for i, ref in enumerate(refs)
    ]


def _tab(states: States, state: Mapping[str, Any]) -> str:
    """The tab row, the open tab marked, and only that tab's view, as JupyterLab shows it."""
    tabs = _titled(states, state)
    row = "".join(
        f'<span class="wb-w-tab{" wb-w-tab-open" if shown else ""}">{escape(title)}</span>'
        for title, _, shown in tabs
    )
    views = "".join(view for _, view, _ in tabs)
    return f'<div class="wb-w-tabs"><div class="wb-w-tab-row">{row}</div>{views}</div>'


def _accordion(states: States, state: Mapping[str, Any]) -> str:
    """Each section's header, ▸ closed or ▾ open, with the open one's view under it."""
    return "".join(
        f'<div class="wb-w-section"><div class="wb-w-section-title">{"▾" if shown else "▸"} '
        f"{escape(title)}</div>{view}</div>"
        for title, view, shown in _titled(states, state)
    )


def _label(state: Mapping[str, Any]) -> str:
    text = state.get("description", "")
    return f'<span class="wb-w-label">{escape(text)}</span>' if text else ""


def _control(state: Mapping[str, Any], inner: str) -> str:
    return f'<span class="wb-w-control">{_label(state)}{inner}</span>'


def _slider(states: States, state: Mapping[str, Any]) -> str:
    value = state.get("value", 0)
    attrs = " ".join(
        f'{key}="{escape(str(state[key]))}"' for key in ("min", "max", "step") if key in state
    )
    readout = f'<span class="wb-w-readout">{escape(str(value))}</span>'
    return _control(
        state, f'<input type="range" {attrs} value="{escape(str(value))}" disabled>{readout}'
    )


def _dropdown(states: States, state: Mapping[str, Any]) -> str:
    index = state.get("index")
    options = "".join(
        f"<option{' selected' if i == index else ''}>{escape(str(label))}</option>"
        for i, label in enumerate(state.get("_options_labels", ()))
    )
    return _control(state, f"<select disabled>{options}</select>")


def _text(states: States, state: Mapping[str, Any]) -> str:
    value = escape(str(state.get("value", "")), quote=True)
    placeholder = escape(str(state.get("placeholder", "")), quote=True)
    return _control(
        state, f'<input type="text" value="{value}" placeholder="{placeholder}" disabled>'
    )


def _checkbox(states: States, state: Mapping[str, Any]) -> str:
    checked = " checked" if state.get("value") else ""
    return (
        f'<label class="wb-w-control"><input type="checkbox"{checked} disabled>'
        f"{escape(state.get('description', ''))}</label>"
    )


def _button(states: States, state: Mapping[str, Any]) -> str:
    text = state.get("description") or state.get("tooltip") or "button"
    return f'<button type="button" class="wb-w-button" disabled>{escape(text)}</button>'


def _play(states: States, state: Mapping[str, Any]) -> str:
    return '<button type="button" class="wb-w-button" disabled aria-label="play">▶</button>'


def _html(states: States, state: Mapping[str, Any]) -> str:
    return f'<div class="wb-w-html">{_label(state)}{state.get("value", "")}</div>'


def _plain(states: States, state: Mapping[str, Any]) -> str:
    return f'<span class="wb-w-html">{escape(str(state.get("value", "")))}</span>'


def _output(states: States, state: Mapping[str, Any]) -> str:
    inner = "".join(_one_output(o) for o in state.get("outputs", ()))
    return f'<div class="wb-w-output">{inner}</div>'


def _one_output(out: Mapping[str, Any]) -> str:
    kind = out.get("output_type")
    if kind == "stream":
        return f"<pre>{escape(_joined(out.get('text', '')))}</pre>"
    if kind == "error":
        raise WidgetViewError(f"an Output widget holds an error: {out.get('ename')}")
    data = out.get("data", {})
    if "text/html" in data:
        return _joined(data["text/html"])
    if "image/png" in data:
        png = _joined(data["image/png"]).replace("\n", "")
        return f'<img src="data:image/png;base64,{png}" alt="The widget\'s figure, first view">'
    if "text/plain" in data:
        return f"<pre>{escape(_joined(data['text/plain']))}</pre>"
    return ""


def _joined(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


_DRAWERS: dict[str, Callable[[States, Mapping[str, Any]], str]] = {
    "VBoxModel": _box("vbox"),
    "HBoxModel": _box("hbox"),
    "BoxModel": _box("hbox"),
    "IntSliderModel": _slider,
    "FloatSliderModel": _slider,
    "DropdownModel": _dropdown,
    "TextModel": _text,
    "IntTextModel": _text,
    "FloatTextModel": _text,
    "CheckboxModel": _checkbox,
    "ButtonModel": _button,
    "PlayModel": _play,
    "HTMLModel": _html,
    "HTMLMathModel": _html,
    "LabelModel": _plain,
    "OutputModel": _output,
    "TabModel": _tab,
    "AccordionModel": _accordion,
}
