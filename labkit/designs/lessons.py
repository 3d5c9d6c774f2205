"""The runs the part-two lessons show, fixed once so a notebook and its docs figure agree.

- Bug 2 in one picture (notebooks 00 and 04, figure `inverted_trace`): a late tick plus a
  stalled delivery, so the stale answer lands long after its base and the callback's reader
  sees an older catalog for a quarter of the run.
- The showcase (figure `five_designs`): every design on four fault classes and one seed.
- Article 2's inverted arrival as schedule steps, requests numbered from 1 (figure
  `arrival_lanes`; notebook 04 tells the same story).
- Pipelined ballots (notebook 05b, figure `pipelined_ballots`): a stalled answer
  in a window of four, and the depth runs behind the throughput curve.
"""

from __future__ import annotations

from labkit.designs.schedules import Step

BUG2_FAULTS: tuple[str, ...] = ("inverted", "stall")
BUG2_SEED = 1
SHOWCASE_FAULTS: tuple[str, ...] = ("inverted", "duplicate", "stale_body", "retry_after_commit")
SHOWCASE_SEED = 7
INVERTED_STEPS: tuple[Step, ...] = (
    Step.timeout(),
    Step.deliver(2),
    Step.deliver(3),
    Step.deliver(1),
)
# Notebook 05b's pipelined ballots (figure `pipelined_ballots`): the lanes of one run with a
# stalled answer, so the loop gives up on a tick and flushes the W - 1 built on it, beside
# throughput against W on the fault-free depth runs.
PIPELINE_FAULTS: tuple[str, ...] = ("stall",)
PIPELINE_SEED = 0
PIPELINE_WINDOW = 4
PIPELINE_TICKS = 12
DEPTH_TICKS = 20
