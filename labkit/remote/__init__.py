"""Part two against a real planner: a planner service on loopback (`serve`) and the designs
running against it with real concurrency, timeouts and crashes (`run`)."""

from labkit.remote.control import PlannerUnreachable, set_faults, status
from labkit.remote.driver import RemoteRun, run
from labkit.remote.service import serve

__all__ = ["PlannerUnreachable", "RemoteRun", "run", "serve", "set_faults", "status"]
