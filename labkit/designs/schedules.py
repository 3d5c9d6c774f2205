"""The arrival-schedule vocabulary shared by the replay on SQLite (`arrivals`) and the in-memory
search (`arrival_search`): the step grammar, its error, and what an exploration found.

A step is ``"deliver N"`` (or ``"N"``, ``"dup N"``), ``"stale N"``, ``"timeout"`` /
``"timeout N"`` or ``"crash"``; `parse_step` reads one into a verb and a request id.
"""

from __future__ import annotations

from dataclasses import dataclass


class ScheduleError(ValueError):
    """A step names a request the loop has not sent, or is not a known step."""


@dataclass(frozen=True)
class Exploration:
    """Every arrival order of a small run for one design."""

    design: str
    orders: int
    rewinding: int
    shortest: list[str] | None


def parse_step(raw: str) -> tuple[str, int | None]:
    """(verb, request id) of one step; `dup N` reads as `deliver N`. Raises `ScheduleError`."""
    parts = str(raw).replace(":", " ").split()
    if not parts:
        raise ScheduleError(f"empty step {raw!r}")
    if len(parts) == 1 and parts[0].lstrip("r").isdigit():
        return "deliver", int(parts[0].lstrip("r"))
    verb = parts[0].lower()
    if verb in ("crash", "timeout") and len(parts) == 1:
        return verb, None
    if verb in ("deliver", "dup", "stale", "timeout") and len(parts) == 2:
        num = parts[1].lstrip("r")
        if num.isdigit():
            return ("deliver" if verb == "dup" else verb), int(num)
    raise ScheduleError(
        f"step {raw!r} is not one of 'deliver N' (or 'N', 'dup N'), 'stale N', 'timeout [N]', "
        "'crash'"
    )
