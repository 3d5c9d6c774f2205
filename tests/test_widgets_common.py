"""What every widget app shares (`labkit.widgets.common`): an image goes to an Output as the
kernel's formatter would put it, and outside a kernel no IPython shell is made for it."""

from __future__ import annotations

import base64

import ipywidgets as widgets
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Image

from labkit.widgets import common

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00"
    b"\x00\x00IEND\xaeB`\x82"
)


def test_outside_a_kernel_the_image_is_formatted_without_making_a_shell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_shell(*args: object, **kwargs: object) -> None:
        raise AssertionError("made an InteractiveShell (and its history file) for one image")

    monkeypatch.setattr(InteractiveShell, "initialized", classmethod(lambda cls: False))
    monkeypatch.setattr(InteractiveShell, "instance", classmethod(no_shell))
    out = widgets.Output()
    common.png_output(out, PNG)
    # what a kernel's formatter made of it before: the bytes in base64, and the Image's repr
    data = {
        "image/png": base64.b64encode(PNG).decode("ascii"),
        "text/plain": "<IPython.core.display.Image object>",
    }
    assert out.outputs == ({"output_type": "display_data", "data": data, "metadata": {}},)


def test_in_a_kernel_the_kernels_formatter_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []

    class Formatter:
        def format(self, obj: object) -> tuple[dict, dict]:
            seen.append(obj)
            return {"image/png": "kernel's"}, {"isolated": True}

    class Shell:
        display_formatter = Formatter()

    monkeypatch.setattr(InteractiveShell, "initialized", classmethod(lambda cls: True))
    monkeypatch.setattr(InteractiveShell, "instance", classmethod(lambda cls: Shell()))
    out = widgets.Output()
    common.png_output(out, PNG)
    assert len(seen) == 1 and isinstance(seen[0], Image)
    assert out.outputs[0]["data"] == {"image/png": "kernel's"}
    assert out.outputs[0]["metadata"] == {"isolated": True}
