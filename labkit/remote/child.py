"""The loop process `labkit.remote.crash.kill_mid_call` starts and kills: one `run` on a store.

Run as ``python -m labkit.remote.child URL STORE DESIGN TICKS WINDOW NAME [HOLD_AFTER]``. It
prints one line per send and per commit, as JSON ``["send", ballot_id, base_version]`` or
``["commit", ballot_id, version]``, flushed at once, so the parent knows what was reported
committed and when a call is in flight. A pipelined loop also prints each answer it holds,
``["held", ballot_id, fence]``; given HOLD_AFTER, the first such line after that many commits
is its last: the answer is in the store, and the loop waits there to be killed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from labkit.catalog.crash_child import wait_to_be_killed
from labkit.catalog.pipeline import HELD
from labkit.remote.driver import run


class Reporter:
    """Prints what the parent needs to know about each trace row; with `hold_after`, stops
    at the first answer held after that many commits."""

    def __init__(self, hold_after: int | None = None) -> None:
        self.hold_after = hold_after
        self.commits = 0

    def __call__(self, row: dict[str, Any]) -> None:
        if row["event"] == "send":
            print(json.dumps(["send", row["ballot_id"], row["base_version"]]), flush=True)
        elif row["event"] in ("deliver", "settle") and row["committed"]:
            self.commits += 1
            print(json.dumps(["commit", row["ballot_id"], int(row["head_version"])]), flush=True)
        elif row["event"] == "deliver" and row["reason"] == HELD:
            print(json.dumps(["held", row["ballot_id"], row["observed_watermark"]]), flush=True)
            if self.hold_after is not None and self.commits >= self.hold_after:
                wait_to_be_killed(f"held ballot {row['ballot_id']}")


def main(argv: list[str]) -> None:
    url, store, design, ticks, window, name, *hold_after = argv
    report = Reporter(int(hold_after[0]) if hold_after else None)
    run(design, url, ticks=int(ticks), window=int(window), store=store, name=name, progress=report)


if __name__ == "__main__":
    main(sys.argv[1:])
