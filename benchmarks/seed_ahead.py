"""Notebook 05's seed control with and without the work an idle kernel does ahead, in process.

`python -m benchmarks.seed_ahead [--presses N] [--rounds R]` runs an asyncio loop (as ipykernel
does) with two `FiveDesignsApp`s: one as shipped, one whose work ahead is switched off. Rounds
alternate which app goes first; each press types the next seed (101, 102, ... as the browser
benchmark does), and before each press the loop idles until the work ahead is done. It prints,
per side, the median and p95 CPU time of a press (`time.process_time` around setting the seed:
what the press costs the kernel) and the median CPU the idle kernel spent ahead per press.
Not part of `python -m benchmarks`: the browser A/B (`benchmarks.widget_browser --labkit A
--labkit B`) is the end-to-end measure; this one separates the kernel's share of it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import time

from benchmarks.common import fmt_s, percentile

FIRST_SEED = 101


async def _idle(app: object) -> float:
    """Let the loop run until the app's work ahead is done; the CPU time that took."""
    start = time.process_time()
    while app._ahead:  # type: ignore[attr-defined]
        await asyncio.sleep(0.001)
    return time.process_time() - start


async def _measure(presses: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    from labkit.widgets.catalog import FiveDesignsApp

    seen: dict[str, dict[str, list[float]]] = {}
    for r in range(rounds):
        sides = ("ahead", "plain") if r % 2 == 0 else ("plain", "ahead")
        apps = {}
        for side in sides:
            app = FiveDesignsApp(highlight="ballot", preset="inverted", seed=FIRST_SEED - 1)
            if side == "plain":
                app._ahead.start = lambda *_a, **_k: None  # type: ignore[method-assign]
            apps[side] = app
        gc.collect()
        for i in range(presses):
            for side in sides:
                app, row = apps[side], seen.setdefault(side, {"press": [], "idle": []})
                row["idle"].append(await _idle(app))
                start = time.process_time()
                app.seed.value = FIRST_SEED + i
                row["press"].append(time.process_time() - start)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.seed_ahead", description=__doc__)
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    load = os.getloadavg()[0]
    seen = asyncio.run(_measure(args.presses, args.rounds))
    print(f"load {load:.2f}-{os.getloadavg()[0]:.2f}, {args.rounds} rounds x {args.presses}")
    for side, row in seen.items():
        press, idle = row["press"], row["idle"]
        print(
            f"  {side}: press CPU median {fmt_s(statistics.median(press))}, "
            f"p95 {fmt_s(percentile(press, 0.95))}; idle CPU ahead per press median "
            f"{fmt_s(statistics.median(idle))}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
