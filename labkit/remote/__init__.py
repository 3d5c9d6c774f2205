"""Part two against a real planner: a planner service on loopback (`serve`), the designs
running against it with real concurrency, timeouts and crashes (`run`, `kill_mid_call`),
many loops at once (`load`), and the simulator set beside the real thing (`measure`,
`side_by_side`)."""

from labkit.remote.compare import measure, side_by_side
from labkit.remote.control import PlannerUnreachable, set_faults, status
from labkit.remote.crash import kill_mid_call
from labkit.remote.driver import RemoteRun, run
from labkit.remote.load import load
from labkit.remote.service import serve

__all__ = [
    "PlannerUnreachable",
    "RemoteRun",
    "kill_mid_call",
    "load",
    "measure",
    "run",
    "serve",
    "set_faults",
    "side_by_side",
    "status",
]
