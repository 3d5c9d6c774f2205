"""A widget's first view on a static page (site/widget_view.py), on hand-made widget states."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("widget_view", ROOT / "site" / "widget_view.py")
wv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wv)

PNG = "iVBORw0KGgo="


def model(name: str, **state: object) -> dict[str, object]:
    return {"_model_name": name, **state}


STATES = {
    "root": model("VBoxModel", children=["IPY_MODEL_row", "IPY_MODEL_out", "IPY_MODEL_gone"]),
    "row": model("HBoxModel", children=["IPY_MODEL_slider", "IPY_MODEL_menu", "IPY_MODEL_go"]),
    "slider": model("IntSliderModel", description="#1", value=5, min=1, max=5, step=1),
    "menu": model(
        "DropdownModel", description="order", index=1, _options_labels=["by id", "by priority <1>"]
    ),
    "go": model("ButtonModel", description="reveal", disabled=True),
    "out": model(
        "OutputModel",
        outputs=[
            {
                "output_type": "display_data",
                "data": {"image/png": PNG, "text/plain": "<IPython.core.display.Image object>"},
            },
        ],
    ),
    "gone": model("HTMLModel", value="<b>hidden</b>", layout="IPY_MODEL_hidden"),
    "hidden": model("LayoutModel", display="none"),
}


def test_the_first_view_draws_controls_at_their_values_and_the_figure() -> None:
    html = wv.static_view(STATES, "root")
    assert 'type="range" min="1" max="5" step="1" value="5" disabled' in html
    assert "<option selected>by priority &lt;1&gt;</option>" in html  # the chosen one, escaped
    assert '<button type="button" class="wb-w-button" disabled>reveal</button>' in html
    assert f'<img src="data:image/png;base64,{PNG}"' in html
    assert "hidden" not in html.split(wv.NOTE)[0]  # a display:none child is not drawn
    assert "IPython.core.display.Image" not in html
    assert html.endswith(wv.NOTE) and "interactive" in wv.NOTE and "JupyterLab" in wv.NOTE


def test_a_widget_bundle_keeps_only_its_static_html() -> None:
    outputs = [
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                "text/plain": "VBox(children=(HBox(children=...",
                wv.WIDGET_MIME: {"model_id": "root", "version_major": 2, "version_minor": 0},
            },
        },
        {"output_type": "stream", "name": "stdout", "text": "kept\n"},
    ]
    assert wv.replace_widget_outputs(outputs, STATES) == 1
    assert list(outputs[0]["data"]) == ["text/html"]
    assert "children=" not in outputs[0]["data"]["text/html"]
    assert outputs[1]["text"] == "kept\n"


@pytest.mark.parametrize(
    ("states", "problem"),
    [
        ({"root": model("ColorPickerModel")}, "no static view for ColorPickerModel"),
        ({"root": model("VBoxModel", children=["IPY_MODEL_nowhere"])}, "nowhere has no state"),
        (
            {"root": model("OutputModel", outputs=[{"output_type": "error", "ename": "KeyError"}])},
            "holds an error: KeyError",
        ),
    ],
)
def test_a_widget_that_cannot_be_drawn_fails_the_build_with_its_name(
    states: dict[str, dict[str, object]], problem: str
) -> None:
    with pytest.raises(wv.WidgetViewError, match=problem):
        wv.static_view(states, "root")


def test_a_tab_shows_its_titles_and_only_the_open_tabs_view() -> None:
    states = {
        "tabs": model(
            "TabModel",
            children=["IPY_MODEL_one", "IPY_MODEL_two"],
            titles=["lanes <and> heads", "verdicts"],
            selected_index=1,
        ),
        "one": model("HTMLModel", value="<b>first view</b>"),
        "two": model("HTMLModel", value="<b>second view</b>"),
        "shut": model(
            "AccordionModel", children=["IPY_MODEL_one"], titles=["shortest"], selected_index=None
        ),
    }
    html = wv.static_view(states, "tabs")
    assert "lanes &lt;and&gt; heads" in html and "second view" in html
    assert "first view" not in html
    assert '<span class="wb-w-tab wb-w-tab-open">verdicts</span>' in html
    closed = wv.static_view(states, "shut")
    assert "▸ shortest" in closed and "first view" not in closed
