"""Real crashes for notebook 06: a child process runs one step of a `WatermarkLoop` on a SQLite
file and is SIGKILLed at a named point, so the parent can restart from what is on disk.

Kill points:
- ``after_reserve``: the ballot is persisted and the planner call is "in flight";
- ``mid_commit``: inside `apply`'s transaction, after the catalog row was inserted and before
  COMMIT (SQLite's trace callback fires as the transaction's last statement starts).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.ballot import Ballot, Response

_ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, os, signal, sys
from labkit import catalog
from labkit.ballot import Response, WatermarkLoop

db, point, window, tools = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
loop = WatermarkLoop(catalog.connect(db), window=window)
ballot = loop.reserve()
print(json.dumps([ballot.ballot_id, ballot.watermark, ballot.base_version]), flush=True)

def die(sql):
    if sql.lstrip().upper().startswith("INSERT INTO WM_RESPONSES"):
        os.kill(os.getpid(), signal.SIGKILL)

if point == "after_reserve":
    os.kill(os.getpid(), signal.SIGKILL)
loop.conn.set_trace_callback(die)
loop.apply(Response(ballot.ballot_id, ballot.watermark, ballot.base_version, tools))
print("survived", flush=True)
"""

POINTS = ("after_reserve", "mid_commit")


@dataclass(frozen=True)
class Killed:
    """A child loop that died: its exit code (-9 for SIGKILL) and the ballot it reserved."""

    point: str
    returncode: int
    ballot: Ballot | None

    @property
    def sigkilled(self) -> bool:
        """True if the process was ended by SIGKILL, i.e. it had no chance to clean up."""
        return self.returncode == -signal.SIGKILL

    def response(self, tools: list[Any]) -> Response:
        """The planner's (late) answer to the dead process's ballot."""
        if self.ballot is None:
            raise ValueError("the child died before it reserved a ballot")
        b = self.ballot
        return Response(b.ballot_id, b.watermark, b.base_version, tools)


def kill_loop(
    db: str | Path, point: str = "after_reserve", *, tools: list[Any] = (), window: int = 1,
    timeout: float = 30.0,
) -> Killed:
    """Run a loop in a child process on `db`: reserve a ballot, then die at `point`.

    With ``mid_commit`` the child applies a response with `tools` and is killed inside the
    commit transaction.
    """
    if point not in POINTS:
        raise ValueError(f"unknown kill point {point!r}; expected one of {', '.join(POINTS)}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    args = [sys.executable, "-c", _CHILD, str(db), point, str(window), json.dumps(list(tools))]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.splitlines()
    ballot = Ballot(*json.loads(lines[0])) if lines else None
    if proc.returncode != -signal.SIGKILL:
        raise RuntimeError(f"child loop was not killed (exit {proc.returncode}): {proc.stderr}")
    return Killed(point, proc.returncode, ballot)


def snapshot(db: str | Path, to: str | Path) -> Path:
    """Copy the live database with SQLite's backup API (safe under WAL, unlike a file copy)."""
    src, dst = sqlite3.connect(str(db)), sqlite3.connect(str(to))
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return Path(to)


def restore_naively(backup: str | Path, db: str | Path) -> None:
    """The naive restart: overwrite the live catalog with an older backup (loses commits)."""
    snapshot(backup, db)
