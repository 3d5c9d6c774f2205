"""The checks on `labkit.remote`'s public knobs, one home each: times in seconds, counts,
paths, callables. Each returns the value coerced (a numpy int is an int, a numpy float a
float) or refuses it in one line naming the function and the parameter; the number and
integer rules themselves are `labkit.validation`'s (`number_arg`, `int_arg`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from labkit import validation

MAX_SECONDS = 86_400.0  # the longest time knob, a day: far longer ones overflow the OS timers
MIN_INTERVAL_S = 0.001  # the shortest repeat (a retry, a poll): a shorter one only spins a core
MAX_HOSTS = 1_000  # planner hosts (each a clock skew drawn when the service starts)
MAX_WINDOW = 1_000  # requests a loop keeps in flight at once
MAX_SPAN = 100_000  # versions a fault's target is drawn within (drawn from a list this long)
MAX_LOOPS = 256  # loops `load` runs at once (each a thread and a reader process)


def seconds(value: Any, name: str, *, zero: bool = False) -> float:
    """A time in seconds: finite, > 0 (>= 0 with `zero`), at most `MAX_SECONDS`."""
    low = {"at_least": 0.0} if zero else {"above": 0.0}
    return validation.number_arg(value, name, **low, at_most=MAX_SECONDS)


def interval(value: Any, name: str) -> float:
    """How often something repeats, in seconds: `MIN_INTERVAL_S` to `MAX_SECONDS`."""
    return validation.number_arg(value, name, at_least=MIN_INTERVAL_S, at_most=MAX_SECONDS)


def count(value: Any, name: str, *, low: int = 1, high: int | None = None) -> int:
    """An integer in [low, high] (a numpy int too; a bool, float or str refused)."""
    number = validation.int_arg(value, name, low=low)
    if high is not None and number > high:
        raise ValueError(f"{name} {number} is outside [{low}, {high}]")
    return number


def path(value: Any, name: str) -> Path:
    """A file system path given as a str or an `os.PathLike` naming a str (no bytes, no NUL)."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str):
        raise TypeError(
            f"{name} must be a path (a str or pathlib.Path), got "
            f"{type(value).__name__} {validation.shown(value)}"
        )
    if "\x00" in text or not text:
        raise ValueError(f"{name} {validation.shown(text)} is not a usable path")
    return Path(text)


def callback(value: Any, name: str) -> Any:
    """A callable, or None."""
    if value is not None and not callable(value):
        raise TypeError(
            f"{name} must be a function or None, "
            f"got {type(value).__name__} {validation.shown(value)}"
        )
    return value


def sequence(value: Any, name: str) -> tuple[Any, ...]:
    """Values given as a sequence, e.g. a list or tuple (a bare str is refused, never read
    letter by letter)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(
            f"{name} must be a list or tuple, got {type(value).__name__} {validation.shown(value)}"
        )
    return tuple(value)
