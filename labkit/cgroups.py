"""A control group for one walled run, where the machine lets this process make one: cgroup v1
hierarchies for `pids`, `freezer` and `memory` that it may write (root in a container, as on the
machines the workbook is tested on). Linux then holds the learner's processes from outside, with
no race against them: it refuses a fork past `pids.max` (for root too, unlike RLIMIT_NPROC),
refuses or reclaims memory past the group's limit (what the kernel holds for the group counts:
pipe buffers, System V and other shared memory, page tables), and `empty()` freezes the group
(nothing in it can fork), kills every member and thaws it, however fast they fork.

Where no group can be made (an ordinary user, a machine with cgroup v2 only), `make` returns
None and the walls fall back on their own scans (`walls.py` says what those miss)."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("pids", "freezer", "memory")
PREFIX = "labkit-wall-"  # a group's name: this prefix, the pid of the process that made it, a count
FREEZE_S = 2.0  # how long a freeze may take before the members are killed as they run
_made = itertools.count()


@dataclass(frozen=True)
class Group:
    """One run's group: its directory in each hierarchy this process could write."""

    dirs: Mapping[str, str]

    def join(self) -> None:
        """Move this process into the group (its children follow it there)."""
        for folder in self.dirs.values():
            _write(f"{folder}/cgroup.procs", str(os.getpid()))

    def members(self) -> list[int]:
        """The processes in the group now (one hierarchy is enough: every member joined all)."""
        folder = self.dirs.get("freezer") or self.dirs.get("pids") or self.dirs.get("memory")
        if folder is None:
            return []
        try:
            with open(f"{folder}/cgroup.procs", "rb") as procs:
                return [int(pid) for pid in procs.read().split()]
        except OSError:
            return []

    def charged(self) -> int:
        """The memory the kernel holds for the group that no process's own map shows: kernel
        memory (pipe buffers, sockets, page tables) plus shared memory (System V segments,
        memfds, files in a tmpfs such as /dev/shm), whether or not anything maps it; 0
        without `memory`."""
        folder = self.dirs.get("memory")
        if folder is None:
            return 0
        try:
            with open(f"{folder}/memory.kmem.usage_in_bytes", "rb") as kmem:
                kernel = int(kmem.read())
            with open(f"{folder}/memory.stat", "rb") as stat:
                fields = dict(line.split() for line in stat if line.strip())
            return kernel + int(fields[b"shmem"])
        except (OSError, KeyError, ValueError):
            return 0

    def oom_killed(self) -> bool:
        """Whether the kernel killed a member for passing the group's memory limit."""
        folder = self.dirs.get("memory")
        if folder is None:
            return False
        with contextlib.suppress(OSError, ValueError), open(f"{folder}/memory.oom_control") as f:
            fields = dict(line.split() for line in f if line.strip())
            return int(fields.get("oom_kill", "0")) > 0
        return False

    def empty(self, until: float) -> bool:
        """Kill every member: freeze the group (none can fork or run), SIGKILL each, thaw.
        True once the group has no member, False if `until` passes first."""
        freezer = self.dirs.get("freezer")
        while True:
            members = self.members()
            if not members:
                return True
            if time.monotonic() > until:
                return False
            soon = min(until, time.monotonic() + FREEZE_S)
            frozen = freezer is not None and _freeze(freezer, soon)
            if sys.platform.startswith("linux"):  # where `make` returns a group
                for pid in self.members() if frozen else members:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            if freezer is not None:
                _write_quietly(f"{freezer}/freezer.state", "THAWED")
            time.sleep(0.001)

    def remove(self, until: float) -> None:
        """Remove the group's directories once its last member has gone (a member the kernel
        has not released yet holds a directory for a moment); left behind if `until` passes,
        for the next `make` in any process to sweep."""
        for folder in self.dirs.values():
            while True:
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > until:
                        break
                    time.sleep(0.002)


def make(tasks: int, memory: int) -> Group | None:
    """A new group below this process's own in each hierarchy it may write, at most `tasks`
    tasks (processes and threads) and `memory` bytes charged; None where none can be made."""
    dirs: dict[str, str] = {}
    name = f"{PREFIX}{os.getpid()}-{next(_made)}"
    for controller, parent in _own_groups().items():
        _sweep(parent)
        folder = f"{parent}/{name}"
        try:
            os.mkdir(folder)
        except OSError:
            continue
        dirs[controller] = folder
        try:
            if controller == "pids":
                _write(f"{folder}/pids.max", str(tasks))
            elif controller == "memory":
                _write(f"{folder}/memory.limit_in_bytes", str(memory))
        except OSError:
            Group(dirs).remove(time.monotonic())
            return None
    if "freezer" in dirs or "pids" in dirs:
        return Group(dirs)
    Group(dirs).remove(time.monotonic())  # memory alone neither caps nor empties the group
    return None


def _own_groups() -> dict[str, str]:
    """The directory of this process's own group in each v1 hierarchy of `CONTROLLERS` that is
    mounted where systemd and Docker put it."""
    found: dict[str, str] = {}
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/cgroup") as lines:
                for line in lines:
                    _, names, path = line.rstrip("\n").split(":", 2)
                    for controller in names.split(","):
                        folder = f"{ROOT}/{names}{path.rstrip('/')}"
                        if controller in CONTROLLERS and os.path.isdir(folder):
                            found[controller] = folder
        except (OSError, ValueError):
            return {}
    return found


def _sweep(parent: str) -> None:
    """Remove the empty groups left below `parent` by processes that have ended."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if name.startswith(PREFIX):
                owner = name[len(PREFIX) :].split("-", 1)[0]
                if owner.isdigit() and not _alive(int(owner)):
                    with contextlib.suppress(OSError):
                        os.rmdir(f"{parent}/{name}")


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists (a zombie does)."""
    if sys.platform.startswith("linux"):
        return os.path.exists(f"/proc/{pid}")
    return True


def _freeze(folder: str, until: float) -> bool:
    """Freeze the group; True once every member is frozen, False if `until` passes first."""
    try:
        _write(f"{folder}/freezer.state", "FROZEN")
    except OSError:
        return False
    while time.monotonic() < until:
        with contextlib.suppress(OSError), open(f"{folder}/freezer.state") as state:
            if state.read().strip() == "FROZEN":
                return True
        time.sleep(0.001)
    return False


def _write(path: str, text: str) -> None:
    with open(path, "w") as control:
        control.write(text)


def _write_quietly(path: str, text: str) -> None:
    with contextlib.suppress(OSError):
        _write(path, text)
