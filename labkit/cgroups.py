"""A control group for one walled run, where the machine lets this process make one: cgroup v1
hierarchies for `pids`, `freezer`, `memory` and `devices` that it may write (root in a
container, as on the machines the workbook is tested on). Linux then holds the learner's
processes from outside, with no race against them: it refuses a fork past `pids.max` (for root
too, unlike RLIMIT_NPROC), refuses or reclaims memory past the group's limit (what the kernel
holds for the group counts: pipe buffers, System V and other shared memory, page tables),
refuses to open any device node but `DEVICES`, and `empty()` freezes the group (nothing in it
can fork), kills every member and thaws it, however fast they fork.

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
CONTROLLERS = ("pids", "freezer", "memory", "devices")
# the device nodes a member may open: null, zero, full, random, urandom and tty (a loop device
# backed by a memfd held 1.2 GB past a 64 MB wall, charged to no group, and stayed; 3,000 new
# ptys' buffers held 180 MB no group charged)
DEVICES = tuple(f"c {n} rw" for n in ("1:3", "1:5", "1:7", "1:8", "1:9", "5:0"))
PREFIX = "labkit-wall-"  # then the maker's pid namespace, its pid there, and a count
FREEZE_S = 2.0  # how long a freeze may take before the members are killed as they run
_made = itertools.count()


@dataclass(frozen=True)
class Group:
    """One run's group: its directory in each hierarchy (two controllers mounted together
    share one)."""

    dirs: Mapping[str, str]

    def join(self) -> None:
        """Move this process into the group (its children follow it there)."""
        for folder in set(self.dirs.values()):
            _write(f"{folder}/cgroup.procs", str(os.getpid()))

    def members(self) -> list[int]:
        """The processes in the group and in any group below it now (one hierarchy is enough:
        every member joined all)."""
        top = self.dirs.get("freezer") or self.dirs.get("pids") or self.dirs.get("memory")
        found: list[int] = []
        for folder in _below(top) if top is not None else []:
            with contextlib.suppress(OSError), open(f"{folder}/cgroup.procs", "rb") as procs:
                found += [int(pid) for pid in procs.read().split()]
        return found

    def charged(self) -> int:
        """The memory charged to the group that no process's own map shows: all it is charged
        but anonymous memory a process maps (the walls count that per process) and the page
        cache of files (the disk holds those): so kernel memory (pipe buffers, Unix and TCP
        sockets' buffers, page tables, the dentries and inodes of files made), shared memory
        (System V segments, memfds, files in a tmpfs such as /dev/shm) and pages a pipe holds
        after their process unmapped them (vmsplice), whether or not anything maps them; 0
        without `memory`."""
        folder = self.dirs.get("memory")
        if folder is None:
            return 0
        try:
            with open(f"{folder}/memory.usage_in_bytes", "rb") as usage:
                total = int(usage.read())
            with (
                contextlib.suppress(OSError),
                open(f"{folder}/memory.kmem.tcp.usage_in_bytes") as tcp,
            ):
                total += int(tcp.read())  # TCP buffers: counted apart, once `make` set a limit
            with open(f"{folder}/memory.stat", "rb") as stat:
                fields = dict(line.split() for line in stat if line.strip())
            mapped = int(fields[b"total_rss"]) + int(fields[b"total_cache"])
            return max(0, total - mapped + int(fields[b"total_shmem"]))
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
        """Kill every member: freeze the group (none can fork or run), SIGKILL each member
        read after the freeze, thaw (always, so nothing is left frozen). True once the group
        has no member, False if `until` passes first."""
        freezer = self.dirs.get("freezer")
        while self.members():
            if time.monotonic() > until:
                return False
            try:
                if freezer is not None:
                    _freeze(freezer, min(until, time.monotonic() + FREEZE_S))
                _kill(self.members())  # read again: a pid read before a slow freeze may be reused
            finally:
                if freezer is not None:
                    _write_quietly(f"{freezer}/freezer.state", "THAWED")
            time.sleep(0.001)
        return True

    def remove(self, until: float) -> None:
        """Remove the group's directories, deepest first, once their last member has gone (a
        member the kernel has not released yet holds one for a moment); what is left when
        `until` passes is swept by a later `make` once its maker has ended."""
        for top in set(self.dirs.values()):
            _remove_tree(top, until)


def make(tasks: int, memory: int) -> Group | None:
    """A new group below this process's own in every hierarchy of `CONTROLLERS` mounted, at
    most `tasks` tasks (processes and threads) and `memory` bytes charged (with swap, where
    the kernel counts it); None where none can be made: this process may not write there, or
    it is in a wall's group already (the outer group holds it and all below)."""
    own = _own_groups()
    if not own or any(f"/{PREFIX}" in folder for folder in own.values()):
        return None
    name = f"{PREFIX}{_namespace()}-{os.getpid()}-{next(_made)}"
    group = Group({controller: f"{parent}/{name}" for controller, parent in own.items()})
    try:
        for parent in set(own.values()):
            _sweep(parent)
            os.mkdir(f"{parent}/{name}")
        if "pids" in group.dirs:
            _write(f"{group.dirs['pids']}/pids.max", str(tasks))
        if "devices" in group.dirs:
            _write(f"{group.dirs['devices']}/devices.deny", "a")
            for rule in DEVICES:
                _write(f"{group.dirs['devices']}/devices.allow", rule)
        if "memory" in group.dirs:
            _write(f"{group.dirs['memory']}/memory.limit_in_bytes", str(memory))
            # with swap, anonymous memory past the limit is swapped out, not refused: hold
            # memory and swap together where the kernel counts swap (quiet where it does not);
            # TCP buffers are charged only to a group with a TCP limit of its own
            for extra in ("memory.memsw.limit_in_bytes", "memory.kmem.tcp.limit_in_bytes"):
                _write_quietly(f"{group.dirs['memory']}/{extra}", str(memory))
    except OSError:
        group.remove(time.monotonic())
        return None
    return group


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


def _namespace() -> int:
    """This process's pid namespace (its inode): a pid names a process only within one."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            return os.stat("/proc/self/ns/pid").st_ino
    return 0


def _sweep(parent: str) -> None:
    """Remove the groups left below `parent` by ended processes of this pid namespace (a
    group with members stays)."""
    mine = f"{PREFIX}{_namespace()}-"
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if name.startswith(mine):
                owner = name[len(mine) :].split("-", 1)[0]
                if owner.isdigit() and not _alive(int(owner)):
                    _remove_tree(f"{parent}/{name}", time.monotonic())


def _below(top: str) -> list[str]:
    """`top` and every group directory below it, parents before children."""
    found = [top]
    for folder in found:
        with contextlib.suppress(OSError):
            found += [entry.path for entry in os.scandir(folder) if entry.is_dir()]
    return found


def _remove_tree(top: str, until: float) -> None:
    for folder in reversed(_below(top)):
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


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists (a zombie does)."""
    if sys.platform.startswith("linux"):
        return os.path.exists(f"/proc/{pid}")
    return True


def _kill(pids: list[int]) -> None:
    if sys.platform.startswith("linux"):  # the only platform `make` returns a group on
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _freeze(folder: str, until: float) -> bool:
    """Freeze the group (again if another process thawed it meanwhile); True once every
    member is frozen, False if `until` passes first."""
    while time.monotonic() < until:
        try:
            with open(f"{folder}/freezer.state") as state:
                now = state.read().strip()
            if now == "FROZEN":
                return True
            if now == "THAWED":
                _write(f"{folder}/freezer.state", "FROZEN")
        except OSError:
            return False
        time.sleep(0.001)
    return False


def _write(path: str, text: str) -> None:
    with open(path, "w") as control:
        control.write(text)


def _write_quietly(path: str, text: str) -> None:
    with contextlib.suppress(OSError):
        _write(path, text)
