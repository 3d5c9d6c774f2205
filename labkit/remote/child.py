"""The loop process `labkit.remote.crash.kill_mid_call` starts and kills: one `run` on a store.

Run as ``python -m labkit.remote.child URL STORE DESIGN TICKS WINDOW NAME``. It prints one
line per send and per commit, as JSON ``["send", ballot_id, base_version]`` or
``["commit", ballot_id, version]``, flushed at once, so the parent knows what was reported
committed and when a call is in flight.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from labkit.remote.driver import run


def report(row: dict[str, Any]) -> None:
    """Print what the parent needs to know about one trace row."""
    if row["event"] == "send":
        print(json.dumps(["send", row["ballot_id"], row["base_version"]]), flush=True)
    elif row["event"] in ("deliver", "settle") and row["committed"]:
        print(json.dumps(["commit", row["ballot_id"], int(row["head_version"])]), flush=True)


def main(argv: list[str]) -> None:
    url, store, design, ticks, window, name = argv
    run(design, url, ticks=int(ticks), window=int(window), store=store, name=name, progress=report)


if __name__ == "__main__":
    main(sys.argv[1:])
