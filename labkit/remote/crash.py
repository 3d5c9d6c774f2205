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
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import labkit.catalog.storeview as storeview
import labkit.catalog.versions as catalog
import labkit.remote.knobs as knobs
from labkit import validation
from labkit.catalog.crashlab import KILLED_RETURNCODE
from labkit.db import connect_readonly
from labkit.designs.registry import check_design
from labkit.killable import Verdict, run_child
from labkit.remote.control import check_loopback
from labkit.remote.driver import check_loop_name


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
    url = check_loopback(url)
    store = knobs.path(store, "kill_mid_call(): store")
    design = check_design(design)
    ticks = validation.int_arg(ticks, "kill_mid_call(): ticks", low=1)
    window = knobs.count(window, "kill_mid_call(): window", high=knobs.MAX_WINDOW)
    name = check_loop_name(name)
    after = validation.int_arg(after, "kill_mid_call(): after", low=0)
    if not isinstance(holding, bool):
        raise TypeError(f"kill_mid_call(): holding must be True or False, got {holding!r}")
    timeout = knobs.seconds(timeout, "kill_mid_call(): timeout")
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


def lost_commits(store: str | Path, crash: Crash) -> list[int]:
    """The versions the killed loop reported committed that the store's log does not hold
    with the ballot it reported (none, if the durable ballots did their job)."""
    conn = connect_readonly(store)
    try:
        return [
            version
            for version, ballot in sorted(crash.commits.items())
            if (record := catalog.read_version(conn, version)) is None or record.ballot_id != ballot
        ]
    finally:
        conn.close()


def fates(store: str | Path, ballots: Collection[int], trace: pd.DataFrame) -> pd.DataFrame:
    """What became of each of `ballots` (those a killed loop left in flight): its status and
    reason in the store, and what the restarted loop's `trace` shows of it (its answers and
    timeouts, or "nothing": an answer the dead process had already received is never sent
    again)."""
    stored = storeview.table(store, "wm_ballots").set_index("ballot_id").to_dict("index")
    mine = trace[trace["event"].isin(["deliver", "timeout"])]
    rows = []
    for ballot in sorted(ballots):
        seen = [
            f"{r['event']} at {r['t']:.3f} s"
            + (
                ""
                if r["event"] == "timeout"
                else f": {'commit' if r['committed'] else r['reason']}"
            )
            for r in mine[mine["ballot_id"] == ballot].to_dict("records")
        ]
        record = stored[ballot]
        rows.append(
            {
                "ballot": ballot,
                "status": record["status"],
                "reason": "" if pd.isna(reason := record["reason"]) else reason,
                "the restarted loop saw": "; ".join(seen) or "nothing",
            }
        )
    return pd.DataFrame(rows, columns=["ballot", "status", "reason", "the restarted loop saw"])
