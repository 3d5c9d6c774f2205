"""An autouse fixture that puts every exercise back at variant 0 with no wrong streak around a
test: a wrong streak draws a fresh variant, and module-level exercises are shared by tests.
A test module imports it (`from fresh_exercises import fresh_exercises`) to use it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labkit.exercises import kit


@pytest.fixture(autouse=True)
def fresh_exercises() -> Iterator[None]:
    """Each test meets the exercises as a fresh kernel does."""
    kit.reset_all()
    yield
    kit.reset_all()
