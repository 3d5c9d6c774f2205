"""Part three: part two's designs against a real planner. A planner service on loopback
(`serve`), the designs running against it with real concurrency, timeouts and crashes (`run`,
`kill_mid_call`), many loops at once (`load`), and the simulator set beside the real thing
(`measure`, `side_by_side`)."""

from importlib import import_module
from typing import Any

# Each public name and the module that holds it, imported on first use: the reader process
# (`python -m labkit.remote.head_watch`) starts without loading the service and the driver.
_HOMES = {
    "measure": "compare",
    "side_by_side": "compare",
    "PlannerUnreachable": "control",
    "set_faults": "control",
    "status": "control",
    "kill_mid_call": "crash",
    "RemoteRun": "driver",
    "run": "driver",
    "load": "many_loops",
    "serve": "service",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'labkit.remote' has no attribute {name!r}")
    value = getattr(import_module(f"labkit.remote.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


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
