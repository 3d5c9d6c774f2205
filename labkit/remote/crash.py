"""A real crash of the loop: its process is killed in the middle of a planner call.

`kill_mid_call` starts `labkit.remote.child` (a `run` on a SQLite store), waits until it has
reported `after` commits and sent its next request (or, for a pipelined loop, held its next
early answer), and kills it with `Popen.kill()` (SIGKILL
on Linux and macOS, TerminateProcess on Windows): no handler, no cleanup. The planner still
owes that request an answer; a `run` started again on the same store under the same name is
sent it, and its durable ballots judge it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from labkit.catalog.crashlab import KILLED_RETURNCODE
from labkit.killable import Verdict, run_child


@dataclass(frozen=True)
class Crash:
    """What the killed loop reported before it died."""

    returncode: int
    commits: dict[int, int]  # version -> ballot id, as the loop reported them committed
    in_flight: tuple[int, ...]  # ballots it had sent and not seen committed
    held: tuple[int, ...] = ()  # ballots whose answer it reported held and not seen committed

    @property
    def killed_outright(self) -> bool:
        """True if the operating system ended the process: it had no chance to clean up."""
        return self.returncode == KILLED_RETURNCODE


def kill_mid_call(
    url: str,
    store: str | Path,
    design: str = "ballot",
    *,
    ticks: int = 20,
    window: int = 1,
    name: str = "crashing-loop",
    after: int = 3,
    holding: bool = False,
    timeout: float = 60.0,
) -> Crash:
    """Run `design` in a child process on `store`; kill it as it sends the request that
    follows its `after`-th commit. With `holding` (`pipelined`), kill it instead as it reports
    the first answer it held after its `after`-th commit: the child stops right there, so the
    answer is in the store's hold when it dies and the W calls around it are in flight.
    `RuntimeError` with its last error line if it never gets there within `timeout` seconds."""
    commits: dict[int, int] = {}
    sent: list[int] = []
    held: list[int] = []

    def on_line(line: str) -> Verdict:
        if line.startswith("at held ballot"):
            return "kill"  # the child's own word that it stopped where it was asked to
        kind, ballot, number = json.loads(line)
        if kind == "commit":
            commits[number] = ballot
        elif kind == "held":
            held.append(ballot)
        else:
            sent.append(ballot)
            return "kill" if not holding and len(commits) >= after else None
        return None

    extra = [str(after)] if holding else []
    end = run_child(
        "labkit.remote.child",
        [url, str(store), design, str(ticks), str(window), name, *extra],
        on_line,
        timeout=timeout,
    )
    if not end.killed:
        raise RuntimeError(
            f"loop process on {store} was not killed mid-call (exit {end.returncode}): "
            f"{end.last_error}"
        )
    done = set(commits.values())
    return Crash(
        end.returncode,
        commits,
        tuple(b for b in sent if b not in done),
        tuple(b for b in held if b not in done),
    )
