"""Real crashes for notebook 06: a child process (`labkit.catalog.crash_child`) runs one step of a
`WatermarkLoop` on a SQLite file and is killed at a named point, so the parent can restart from
what is on disk.

Kill points (`POINTS`):
- ``after_reserve``: the ballot is persisted and the planner call is "in flight";
- ``mid_commit``: inside `apply`'s transaction, after the catalog row was inserted and before
  COMMIT.
The child waits at the point and the parent kills it with `Popen.kill()`, which works on every
platform (SIGKILL on Linux and macOS, TerminateProcess on Windows): no handler, no cleanup, no
COMMIT.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.catalog.crash_child import POINTS
from labkit.catalog.loop import Ballot, Response
from labkit.db import connect
from labkit.killable import Verdict, run_child

# What `Popen.kill()` leaves as the exit code: minus the signal number (SIGKILL is 9) where the
# operating system kills by signal, 1 from TerminateProcess on Windows.
KILLED_RETURNCODE = 1 if os.name == "nt" else -9


@dataclass(frozen=True)
class Killed:
    """A child loop that died: its exit code and the ballot it reserved before it died."""

    point: str
    returncode: int
    ballot: Ballot | None

    @property
    def killed_outright(self) -> bool:
        """True if the operating system ended the process: it had no chance to clean up."""
        return self.returncode == KILLED_RETURNCODE

    def response(self, tools: list[Any]) -> Response:
        """The planner's (late) answer to the dead process's ballot."""
        if self.ballot is None:
            raise ValueError("the child died before it reserved a ballot")
        b = self.ballot
        return b.answer(tools)


def kill_loop(
    db: str | Path,
    point: str = "after_reserve",
    *,
    tools: Sequence[Any] = (),
    window: int = 1,
    timeout: float = 30.0,
) -> Killed:
    """Run a loop in a child process on `db`: reserve a ballot, then kill it at `point`.

    With ``mid_commit`` the child applies a response with `tools` and is killed inside the
    commit transaction. A child that fails or does not reach `point` within `timeout`
    seconds raises `RuntimeError` with the last line of its stderr.
    """
    if point not in POINTS:
        raise ValueError(f"unknown kill point {point!r}; expected one of {', '.join(POINTS)}")
    found: list[Ballot] = []

    def on_line(line: str) -> Verdict:
        if line.strip() == f"at {point}":
            return "kill"
        found.append(Ballot(*json.loads(line)))
        return None

    end = run_child(
        "labkit.catalog.crash_child",
        [str(db), point, str(window), json.dumps(list(tools))],
        on_line,
        timeout=timeout,
    )
    if not end.killed:
        raise RuntimeError(
            f"child loop on {db} did not reach {point!r} (exit {end.returncode}): {end.last_error}"
        )
    return Killed(point, end.returncode, found[-1] if found else None)


def snapshot(db: str | Path, to: str | Path) -> Path:
    """Copy the live database with SQLite's backup API (safe under WAL, unlike a file copy)."""
    src, dst = connect(db), connect(to)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return Path(to)


def restore_naively(backup: str | Path, db: str | Path) -> None:
    """The naive restart: overwrite the live catalog with an older backup (loses commits)."""
    snapshot(backup, db)
