"""`audit loop MODULE:FACTORY`: a reader's own catalog loop played through Article 2's
inverted-arrival fixture and every arrival order of up to `n` deliveries, and (`service`) run
for real against the planner service with a second reader process counting falls.

The loop is driven as the single-ballot design (`labkit.audit.loop_design.LoopDesign`); the
workbook's replay explorer (`arrival_orders`: its runner, choices and branches) walks the
orders. Everything runs in a child process behind a time and memory limit (`labkit.walls`).
"""

from __future__ import annotations

import contextlib
import sys
import time

from labkit import validation
from labkit.audit import loop_service
from labkit.audit.findings import Finding, Report
from labkit.audit.inputs import UsageError
from labkit.audit.loop_design import LoopAuditError, explore_loop, load_factory, play
from labkit.designs.schedules import Step
from labkit.walls import Raised, Stopped, run_walled

# Article 2's own fixture (`invert_late_tick`): the loop gives up on ballot 1 and reserves
# ballot 2, whose answer commits; then ballot 1's late answer lands. One commit fewer than the
# late tick (`PRESETS["inverted"]`), which the explorer's search covers.
FIXTURE: tuple[Step, ...] = (Step.timeout(), Step.deliver(2), Step.deliver(1))
SECONDS = 60.0  # the wall around the whole search
MEMORY_BYTES = 1024 * 2**20
MAX_N = 8  # deliveries per schedule; the replay walk is exponential in it
MAX_WINDOW = 4  # ballots in flight; each one more multiplies the orders


def _search(target: str, n: int, window: int, service: int | None, seed: int, until: float) -> dict:
    """In the walled child: the fixture, the search and the shortest fall replayed, then the
    real run if `service` names its versions, as data."""
    factory = load_factory(target)
    fixture = play(factory, FIXTURE, window=window)
    found = explore_loop(factory, n, window=window)
    fall = None if found.shortest is None else play(factory, found.shortest, window=window)
    ran = None
    if service is not None:
        ran = loop_service.run_on_service(factory, service, window=window, seed=seed, until=until)
    return {
        "fixture": fixture,
        "orders": found.orders,
        "rewinding": found.rewinding,
        "fall": fall,
        "service": ran,
    }


def audit_loop(
    target: str,
    *,
    n: int = 4,
    window: int = 1,
    seconds: float = SECONDS,
    memory: int = MEMORY_BYTES,
    service: int | None = None,
    seed: int = 0,
) -> Report:
    """Audit the loop `target` (``MODULE:FACTORY``) in a walled child process: a finding of kind
    `fall` holding the shortest falling schedule, or none. With `service` (VERSIONS), the loop
    then also runs for real against the planner service until its head reaches that version
    (`labkit.audit.loop_service`, random seed `seed`): one more `fall` per fall the second reader
    process saw, and its reads in the summary. `LoopAuditError` (one line) when the loop cannot
    be imported, raises, or runs past `seconds` or `memory`. What the loop prints goes to
    stderr."""
    if not validation.is_int(n) or not 1 <= n <= MAX_N:
        raise UsageError(f"--n: deliveries per schedule, from 1 to {MAX_N}, got {n!r}")
    if not validation.is_int(window) or not 1 <= window <= MAX_WINDOW:
        raise UsageError(f"--window: ballots in flight, from 1 to {MAX_WINDOW}, got {window!r}")
    top = loop_service.MAX_VERSIONS
    if service is not None and (not validation.is_int(service) or not 1 <= service <= top):
        raise UsageError(f"--service: versions to reach, from 1 to {top}, got {service!r}")
    if not validation.is_int(seed):
        raise UsageError(f"--seed: an integer, got {seed!r}")
    # the real run stops a little before the wall, so its reads and falls come back
    until = time.monotonic() + 0.9 * seconds
    try:
        with contextlib.redirect_stdout(sys.stderr):
            found = run_walled(
                lambda: _search(target, n, window, service, seed, until),
                seconds=seconds,
                memory=memory,
            )
    except Raised as exc:
        if exc.type_name == LoopAuditError.__name__:
            raise LoopAuditError(exc.message) from None
        raise LoopAuditError(f"{target}: the audit raised {exc}") from None
    except Stopped as exc:
        raise LoopAuditError(f"{target}: the loop {exc} (n = {n})") from None
    return _report(target, n, window, found)


def _report(target: str, n: int, window: int, found: dict) -> Report:
    fixture, fall = found["fixture"], found["fall"]
    findings = []
    if fall is not None:
        at = fall["first_fall"]
        heads = fall["heads"]
        before = max([0, *heads[:at]])
        findings.append(
            Finding(
                "fall",
                float(at + 1),
                f"{target}: the head falls from {before} to {heads[at]} at step {at + 1} of "
                f"'{'; '.join(fall['steps'])}' (outcomes: {' '.join(fall['outcomes'])})",
                details={
                    "schedule": fall["steps"],
                    "outcomes": fall["outcomes"],
                    "heads": fall["heads"],
                    "sends": fall["sends"],
                },
            )
        )
    summary = {
        "loop": target,
        "n": n,
        "window": window,
        "fixture": "falls" if fixture["first_fall"] is not None else "holds",
        "fixture_schedule": fixture["steps"],
        "fixture_outcomes": fixture["outcomes"],
        "fixture_heads": fixture["heads"],
        "fixture_sends": fixture["sends"],
        "orders": found["orders"],
        "rewinding": found["rewinding"],
    }
    if found["service"] is not None:
        findings.extend(loop_service.findings(target, found["service"]))
        summary["service"] = loop_service.summary(found["service"])
    return Report("loop", tuple(findings), summary)
