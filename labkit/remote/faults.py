"""The service's fault switch: which of the simulator's fault classes are on, and where each
targeted one strikes. Seeded, and re-armed whenever the faults are switched while running.

Each targeted fault hits, in every loop, the first request whose base version reaches its
target, once per arming, as in the simulator (`labkit.designs.simulator.pick_targets`);
targets lie within `span` versions above the head the loop had when the faults were switched
(0 for a loop that came later).
`crash` is a fault of the loop, not of the planner: a real crash is a killed loop process.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping

import labkit.remote.knobs as knobs
from labkit.designs.simulator import FAULTS, check_faults, pick_targets

SERVICE_FAULTS: tuple[str, ...] = tuple(f for f in FAULTS if f != "crash")


def check_service_faults(faults: Collection[str]) -> tuple[str, ...]:
    """The fault classes in `faults` (simulator order); `crash` is refused in one line."""
    chosen = check_faults(faults)
    if "crash" in chosen:
        raise ValueError(
            "'crash' is a loop fault, not a planner fault: kill the loop's process instead "
            "(labkit.remote.kill_mid_call)"
        )
    return chosen


class FaultSwitch:
    """The faults on, their targets and which of them already struck since the last switch."""

    def __init__(
        self,
        faults: Collection[str] = (),
        seed: int = 0,
        span: int = 5,
        rng: random.Random | None = None,
    ) -> None:
        """`rng` draws the first targets (the service passes its `Random(seed)` after drawing
        the hosts' skews, as the simulator does, so that with `span` = ticks - 3 both pick the
        same targets); later switches draw from their own seeded generator."""
        self.span = knobs.count(span, "span", high=knobs.MAX_SPAN)
        self.arms = 0
        self.arm(faults, seed, heads={}, rng=rng)

    def arm(
        self,
        faults: Collection[str],
        seed: int,
        heads: Mapping[str, int],
        rng: random.Random | None = None,
    ) -> None:
        """Switch to `faults`, each targeted one aimed within `span` versions above the head
        each loop has now (`heads`, by loop name)."""
        self.faults = frozenset(check_service_faults(faults))
        self.seed = seed
        self.arms += 1
        rng = rng or random.Random(f"{seed}:faults:{self.arms}")
        self.offsets = pick_targets(rng, self.faults, self.span + 3)
        self.origins = dict(heads)
        self.hit: set[tuple[str, str]] = set()

    def on(self, fault: str) -> bool:
        """Is `fault` switched on (for the untargeted `duplicate`)?"""
        return fault in self.faults

    def forget(self, loop: str) -> None:
        """A new run under the name `loop`: its faults strike again, above version 0."""
        self.origins.pop(loop, None)
        self.hit = {(name, fault) for name, fault in self.hit if name != loop}

    def target(self, fault: str, loop: str) -> int:
        """The base version at which `fault` strikes loop `loop`."""
        return self.origins.get(loop, 0) + self.offsets[fault]

    def take(self, fault: str, base: int, loop: str) -> bool:
        """True once per arming and loop: for its first request at or above the target."""
        if fault not in self.faults or (loop, fault) in self.hit:
            return False
        if base < self.target(fault, loop):
            return False
        self.hit.add((loop, fault))
        return True
