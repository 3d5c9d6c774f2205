"""The walls' control group, where the machine lets the checker make one (root on cgroup v1, as
in CI): a fork storm that leaves the session ends with the check however fast it forks, a fork
bomb stops at `PROCESSES` for root too, and memory the kernel holds for the learner (pipe
buffers, System V segments nothing maps) counts against the wall; a System V segment left by
the learner goes with its IPC namespace. Each was an attacker's escape under root before."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from labkit import cgroups, walls

MB = 2**20


def _groups_here() -> bool:
    group = cgroups.make(2, 64 * MB) if sys.platform.startswith("linux") else None
    if group is None:
        return False
    group.remove(time.monotonic() + 1)
    return True


pytestmark = [
    pytest.mark.skipif(not walls.can_fork(), reason="the walls fork"),
    pytest.mark.skipif(
        not _groups_here(),
        reason="this process may make no control group here (root on cgroup v1 may)",
    ),
]
LOOSE_S = 15.0
# storms, each forking 200 times a second: within the process limit, and not so many forks of a
# test worker that a loaded machine of two cores stalls (24 once held the answer past 15 s in CI)
STORMS = 8
KEY = 0x1AB5C0DE  # the System V key of the segment a learner leaves behind


def _storm(marks: Path) -> None:
    """In a forked process: leave the session, then fork and exit every few milliseconds
    forever (a new pid each time), appending a mark with the time every 0.1 s."""
    try:
        os.setsid()
        last = 0.0
        while True:
            time.sleep(0.005)
            now = time.monotonic()
            if now - last > 0.1:
                with open(marks, "a") as f:
                    f.write(f"{now}\n")
                last = now
            try:
                if os.fork():
                    os._exit(0)
            except OSError:
                pass  # the group is full: try again with the same pid
    finally:
        os._exit(0)


def _marks(path: Path) -> list[float]:
    return [float(line) for line in path.read_text().split()] if path.exists() else []


@pytest.mark.slow
def test_a_fork_storm_that_left_the_session_ends_with_the_check(tmp_path: Path) -> None:
    marks = tmp_path / "marks"

    def answer() -> float:
        started = 0
        while started < STORMS:
            try:
                if os.fork() == 0:
                    _storm(marks)
                started += 1
            except OSError:
                time.sleep(0.01)  # the group is full for a moment: the storm forks too
        time.sleep(1.0)
        return time.monotonic()  # the clock is the machine's: the checker reads it too

    answered = walls.run_walled(answer, seconds=LOOSE_S)
    returned = time.monotonic()
    assert returned - answered < 5.0  # an attacker's storm once held the checker 10-21 s
    assert len(_marks(marks)) > STORMS  # the storm ran while the wall stood
    time.sleep(1.0)
    assert [t for t in _marks(marks) if t > returned] == []


@pytest.mark.slow
def test_a_fork_bomb_stops_at_the_process_limit_for_root_too() -> None:
    def answer() -> int:
        n = 0
        for _ in range(walls.PROCESSES + 8):
            try:
                if os.fork() == 0:
                    time.sleep(LOOSE_S)
                    os._exit(0)
                n += 1
            except OSError:
                pass
        return n

    # 64 forks of a test worker once took 15 s on a loaded machine of two cores
    assert walls.run_walled(answer, seconds=4 * LOOSE_S) == walls.PROCESSES


def _new_pipe(kept: list[int]) -> tuple[int, int] | None:
    """A new pipe; out of descriptors, None in this process (it stops and holds what it
    holds) and a pipe in a forked child, which closes the parent's `kept` and carries on."""
    while True:
        try:
            return os.pipe()
        except OSError:
            if os.fork():
                return None
            for fd in kept:  # the parent keeps these
                os.close(fd)
            kept.clear()


def _pipe_buffers(mb: int) -> str:
    """Fill pipes (of 1 MB where the kernel lets this user resize one), keeping only their
    read ends, until they hold `mb` MB; out of descriptors, a child carries on with its own."""
    kept: list[int] = []
    total = 0
    while total < mb * MB:
        pipe = _new_pipe(kept)
        if pipe is None:
            break
        read, write = pipe
        with contextlib.suppress(OSError):  # past the per-user soft limit without root's powers
            fcntl.fcntl(write, 1031, MB)  # F_SETPIPE_SZ
        os.set_blocking(write, False)
        with contextlib.suppress(BlockingIOError):
            while True:
                total += os.write(write, b"x" * 65536)
        os.close(write)
        kept.append(read)
    time.sleep(LOOSE_S)
    return "not stopped"


def _tcp_buffers(mb: int) -> str:
    """Send over loopback TCP connections nobody reads until `mb` MB wait in their buffers."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(256)
    kept, total = [server], 0
    while total < mb * MB and len(kept) < 600:
        sender = socket.create_connection(server.getsockname())
        kept += [sender, server.accept()[0]]
        sender.setblocking(False)
        try:
            while True:
                total += sender.send(b"x" * 65536)
        except BlockingIOError:
            pass
    time.sleep(LOOSE_S)
    return "not stopped"


def _queued_connections(mb: int) -> str:
    """Connect to listening sockets of its own and close, never accepting, until `mb` MB of
    connections wait in their queues (counted at `walls.QUEUED_BYTES` each; the kernel holds
    about half that, charged to no group)."""
    import socket

    kept, total = [], 0
    while total < mb * MB:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(4096)
        kept.append(server)
        for _ in range(4000):  # under the machine's cap on a queue (somaxconn, 4096 here)
            socket.create_connection(server.getsockname()).close()
            total += walls.QUEUED_BYTES
    time.sleep(LOOSE_S)
    return "not stopped"


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _spliced(mb: int) -> str:
    """Write pages, hand them to pipes with vmsplice, unmap them: held by the pipes alone, in
    no process's map."""
    import mmap

    libc, kept, total = _libc(), [], 0
    while total < mb * MB:
        pipe = _new_pipe(kept)  # one a pipe: 64 MB under `walls.FILES` descriptors
        if pipe is None:
            break
        read, write = pipe
        page = mmap.mmap(-1, 65536)
        page.write(b"y" * 65536)
        view = ctypes.c_char.from_buffer(page)
        spliced = libc.vmsplice(write, ctypes.byref(_Iovec(ctypes.addressof(view), 65536)), 1, 0)
        del view
        page.close()
        os.close(write)  # the pipe keeps the pages for its read end
        if spliced <= 0:
            return "vmsplice refused"
        kept.append(read)
        total += spliced
    time.sleep(LOOSE_S)
    return "not stopped"


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmget.restype = ctypes.c_int
    libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    return libc


def _segments(mb: int) -> str:
    """Write `mb` MB into System V segments of 32 MB, each detached once written: memory no
    process maps."""
    libc = _libc()
    for _ in range(mb // 32):
        segment = libc.shmget(0, 32 * MB, 0o1600)  # IPC_PRIVATE, IPC_CREAT, 0600
        address = libc.shmat(segment, None, 0)
        ctypes.memset(address, 1, 32 * MB)
        libc.shmdt(ctypes.c_void_p(address))
    time.sleep(LOOSE_S)
    return "not stopped"


@pytest.mark.slow
@pytest.mark.parametrize(
    "hold",
    [_pipe_buffers, _tcp_buffers, _segments, _spliced, _queued_connections],
    ids=["pipe-buffers", "tcp-buffers", "segments", "spliced", "queued-connections"],
)
def test_memory_the_kernel_holds_for_the_learner_counts(hold) -> None:
    started = time.monotonic()
    with pytest.raises(walls.MemoryLimit, match="had the kernel hold more memory for it"):
        walls.run_walled(lambda: hold(320), seconds=LOOSE_S, memory=64 * MB)
    assert time.monotonic() - started < 5.0


def _ipc_namespaces() -> set[str]:
    """The IPC namespaces some process on the machine is in."""
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                found.add(os.readlink(f"/proc/{pid}/ns/ipc"))
            except OSError:
                continue
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="an IPC namespace of its own needs root")
def test_a_segment_the_learner_leaves_goes_with_its_namespace() -> None:
    def leave() -> list:
        made = _libc().shmget(KEY, MB, 0o1600)  # IPC_CREAT, 0600
        with open("/proc/sysvipc/shm") as table:
            seen = any(int(line.split()[0]) == KEY for line in list(table)[1:])
        return [made >= 0 and seen, os.readlink("/proc/self/ns/ipc")]

    made, namespace = walls.run_walled(leave)
    assert made  # the learner's segment was there while it ran
    assert namespace != os.readlink("/proc/self/ns/ipc")  # in a namespace of its own
    assert namespace not in _ipc_namespaces()  # which ended with it, and its segment with it


def _mine() -> set[str]:
    """The groups this process has made, in every hierarchy, at any depth."""
    return _made_by(os.getpid())


def _made_by(pid: int) -> set[str]:
    """The groups process `pid` (of this pid namespace) has made, in every hierarchy."""
    mine = f"{cgroups.PREFIX}{cgroups._namespace()}-{pid}-"
    return {
        folder
        for parent in cgroups._own_groups().values()
        for folder in cgroups._below(parent)
        if os.path.basename(folder).startswith(mine)
    }


def test_the_group_is_removed_with_the_wall_and_a_dead_process_groups_are_swept() -> None:
    before = _mine()
    assert walls.run_walled(lambda: os.getpid()) > 0
    assert _mine() == before
    dead = max(int(n) for n in os.listdir("/proc") if n.isdigit()) + 10_000
    name = f"{cgroups.PREFIX}{cgroups._namespace()}-{dead}-0"
    left = [f"{p}/{name}" for p in set(cgroups._own_groups().values())]
    for folder in left:
        os.mkdir(folder)
        os.mkdir(f"{folder}/below")  # a group below one is removed first
    assert walls.run_walled(lambda: 1) == 1
    assert [f for f in left if os.path.exists(f)] == []


def _inner(marks: Path) -> str:
    """Learner code that runs a wall of its own around a process that outlives its answer."""

    def sleeper() -> str:
        if os.fork() == 0:
            time.sleep(2.0)
            marks.write_text("late")
            os._exit(0)
        time.sleep(LOOSE_S)
        return "never"

    return walls.run_walled(sleeper, seconds=LOOSE_S)


@pytest.mark.slow
def test_a_wall_inside_a_wall_is_held_by_the_outer_group(tmp_path: Path) -> None:
    """A wall in learner code made a group inside the wall's: the outer kill read only its own
    group's members, and neither group could be removed."""
    before = _mine()
    with pytest.raises(walls.TimeLimit):
        walls.run_walled(lambda: _inner(tmp_path / "late"), seconds=1.0)
    assert _mine() == before
    time.sleep(2.5)
    assert not (tmp_path / "late").exists()


def _powers_left() -> dict[str, bool]:
    """In the learner's process: which of root's powers over the walls still work."""
    import resource
    import socket

    def works(call) -> bool:
        try:
            call()
        except (OSError, ValueError):  # setrlimit says EPERM as ValueError
            return False
        return True

    def raise_memory_limit() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (soft, resource.RLIM_INFINITY))

    def force_a_socket_buffer() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.SOL_SOCKET, 33, 512 * MB)  # SO_RCVBUFFORCE

    def leave_the_ipc_namespace() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/proc/{os.getppid()}/ns/ipc", os.O_RDONLY)
        try:
            if libc.setns(fd, 0x08000000) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)

    def real_time() -> None:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))

    def trace_its_parent() -> None:  # the supervisor, in a wall; no stop (SEIZE), and let go
        libc = ctypes.CDLL(None, use_errno=True)  # when this process exits
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        if libc.ptrace(0x4206, os.getppid(), None, None) != 0:  # PTRACE_SEIZE
            raise OSError(ctypes.get_errno(), "ptrace")

    def make_a_user_namespace() -> None:  # in a child: this process stays where it is
        child = os.fork()
        if child == 0:
            os._exit(ctypes.CDLL(None).unshare(0x10000000) != 0)  # CLONE_NEWUSER
        if os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) != 0:
            raise OSError("unshare")

    def become_another_user() -> None:  # in a child: this process stays root
        child = os.fork()
        if child == 0:
            try:
                os.setresuid(65534, 65534, 65534)
            except OSError:
                os._exit(1)
            os._exit(0)
        if os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) != 0:
            raise OSError("setresuid")

    def open_socket(*how: int) -> Callable[[], None]:
        return lambda: socket.socket(*how).close()

    def open_for_writing(path: str) -> Callable[[], None]:  # opened, never written
        return lambda: os.close(os.open(path, os.O_WRONLY))

    def on_a_child(act: Callable[[int], None]) -> Callable[[], None]:
        """`act` on a sleeping child of this process's own, ended after."""

        def call() -> None:
            child = os.fork()
            if child == 0:
                time.sleep(LOOSE_S)
                os._exit(0)
            try:
                act(child)
            finally:
                os.kill(child, 9)
                os.waitpid(child, 0)

        return call

    def trace(pid: int) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        if libc.ptrace(0x4206, pid, None, None) != 0:  # PTRACE_SEIZE
            raise OSError(ctypes.get_errno(), "ptrace")

    def open_by_handle() -> None:  # /, through a handle and a descriptor on its file system
        libc = ctypes.CDLL(None, use_errno=True)
        handle = ctypes.create_string_buffer(8 + 128)  # struct file_handle, MAX_HANDLE_SZ
        ctypes.c_uint32.from_buffer(handle).value = 128
        mount = ctypes.c_int()
        if libc.name_to_handle_at(-100, b"/", handle, ctypes.byref(mount), 0) != 0:  # AT_FDCWD
            raise OSError(ctypes.get_errno(), "name_to_handle_at")
        on = os.open("/", os.O_RDONLY)
        try:
            fd = libc.open_by_handle_at(on, handle, os.O_RDONLY)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "open_by_handle_at")
            os.close(fd)
        finally:
            os.close(on)

    def lease_a_file_in_sys() -> None:  # a read lease, let go at once: it holds only writers
        fd = os.open("/sys/devices/system/cpu/online", os.O_RDONLY)
        try:
            fcntl.fcntl(fd, 1024, fcntl.F_RDLCK)  # F_SETLEASE
            fcntl.fcntl(fd, 1024, fcntl.F_UNLCK)
        finally:
            os.close(fd)

    def open_a_performance_event() -> None:  # a dummy one on this process, user space only
        libc = ctypes.CDLL(None, use_errno=True)
        attr = (ctypes.c_uint32 * 32)()  # struct perf_event_attr, zeroed
        attr[0], attr[1], attr[2] = 1, 64, 9  # PERF_TYPE_SOFTWARE, its size, PERF_COUNT_SW_DUMMY
        attr[10] = 1 | 1 << 5 | 1 << 6  # disabled, exclude_kernel, exclude_hv
        number = 298 if platform.machine() == "x86_64" else 241  # perf_event_open
        fd = libc.syscall(number, attr, 0, -1, -1, 0)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "perf_event_open")
        os.close(fd)

    def lower_the_limit(pid: int) -> None:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, 64))

    def open_an_io_uring() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
        fd = libc.syscall(425, 1, params)  # io_uring_setup, the same number on arm64
        if fd < 0:
            raise OSError(ctypes.get_errno(), "io_uring_setup")
        os.close(fd)

    return {
        "raise its memory limit": works(raise_memory_limit),
        "force a socket buffer": works(force_a_socket_buffer),
        "leave its IPC namespace": works(leave_the_ipc_namespace),
        "take real-time priority": works(real_time),
        "make a user namespace": works(make_a_user_namespace),
        "open a packet socket": works(open_socket(17, socket.SOCK_RAW, 0)),
        "open a user netlink socket": works(open_socket(16, socket.SOCK_RAW, 2)),
        "trace its parent": works(trace_its_parent),
        "trace its own child": works(on_a_child(trace)),
        "open a routing netlink socket": works(open_socket(16, socket.SOCK_RAW, 0)),
        "open an io_uring": works(open_an_io_uring),
        "write a kernel setting": works(open_for_writing("/proc/sys/kernel/core_pattern")),
        "write the control groups": works(open_for_writing("/sys/fs/cgroup/pids/cgroup.procs")),
        "become another user": works(become_another_user),
        "make a file in /dev": works(make_a_file("/dev")),
        "open a file by its handle": works(open_by_handle),
        "lease a file in /sys": works(lease_a_file_in_sys),
        "open a performance event": works(open_a_performance_event),
        "lower another process's limit": works(on_a_child(lower_the_limit)),
    }


def make_a_file(folder: str) -> Callable[[], None]:
    """Make an empty file in `folder` and remove it again."""

    def make() -> None:
        path = f"{folder}/labkit-test-{os.getpid()}"
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(path)

    return make


@pytest.mark.skipif(os.geteuid() != 0, reason="root's powers")
def test_a_root_learner_has_no_power_over_the_walls() -> None:
    """An attacker's root learner forced 1.5 GB of socket buffers past a 64 MB wall and left
    its IPC namespace with setns (its segments then outlived the check); it could also raise
    its own memory limit and take real-time priority over the supervisor. The next one traced
    the supervisor (which holds every power) into starting a root shell outside the group, and
    held gigabytes no group charges in netlink queues and, inside a user namespace of its own,
    packet rings. The third set the machine's core pattern to start a program as root outside
    any wall, became another user to trace that user's process into starting one, and made
    sockets through io_uring, where no filter sees them. The fourth became the user of a
    process outside the wall to reach the machine's writable /proc through it. The seventh
    left files in /dev, which lives in memory, after the check. The eighth opened / as the
    checker sees it (where /proc and the control groups are writable) by its handle, through a
    descriptor the checker had left open. The eleventh leased the file of its group's memory use
    (root owns it), which held the supervisor's next sum, and files every process reads. The
    twelfth held a gigabyte in performance events no group charges, and lowered init's limit
    on open files for good."""
    read, write = os.pipe()
    if os.fork() == 0:  # a child without walls: root has every one of these powers
        os.write(write, json.dumps(_powers_left()).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as said:
        unwalled = json.load(said)
    os.wait()
    assert unwalled == dict.fromkeys(unwalled, True)
    assert walls.run_walled(_powers_left) == dict.fromkeys(unwalled, False)


FLOOD = """
import json, os, signal, sys, time
from labkit import walls

def answer():
    checker = int(open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()[1])
    for k in range(4):
        if os.fork() == 0:
            os.setsid()
            with open(f"{sys.argv[1]}/.flooder-{k}", "w") as f:
                f.write(str(os.getpid()))
            os.replace(f"{sys.argv[1]}/.flooder-{k}", f"{sys.argv[1]}/flooder-{k}")  # whole
            while True:
                os.kill(checker, signal.SIGINT)
                time.sleep(0.002)
    time.sleep(30)

fds = len(os.listdir("/proc/self/fd"))
said = []
for _ in range(5):
    try:
        walls.run_walled(answer, seconds=30)
    except KeyboardInterrupt:
        said.append("interrupted")
print(json.dumps({"said": said, "fds": len(os.listdir("/proc/self/fd")) - fds, "pid": os.getpid()}))
"""


@pytest.mark.slow
def test_ctrl_c_floods_while_a_wall_ends_still_end_it_whole(tmp_path: Path) -> None:
    """An attacker's learner flooded the checker with SIGINT: each check raised
    KeyboardInterrupt part way through ending its wall, and left descriptors, group
    directories and (for up to 31 s) the learner's processes behind. The interrupt is held
    until the wall has ended, then passed on."""
    done = subprocess.run(
        [sys.executable, "-c", FLOOD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=LOOSE_S * 4,
        cwd=Path(__file__).resolve().parents[1],
    )
    result = json.loads(done.stdout)
    assert (result["said"], result["fds"]) == (["interrupted"] * 5, 0), done.stderr
    pids = [int(p.read_text()) for p in tmp_path.glob("flooder-*")]
    assert pids and [p for p in pids if os.path.exists(f"/proc/{p}")] == []
    assert _made_by(result["pid"]) == set()


def _devices() -> dict[str, str]:
    found = {}
    for node in (
        "/dev/null",
        "/dev/urandom",
        "/dev/loop-control",
        "/dev/kmsg",
        "/dev/kvm",
        "/dev/ptmx",
    ):
        if os.path.exists(node):
            try:
                os.close(os.open(node, os.O_RDWR))
                found[node] = "opened"
            except OSError as exc:
                found[node] = exc.strerror or ""
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="an ordinary user opens none of these anyway")
def test_the_learner_opens_no_device_node_but_the_harmless_ones() -> None:
    """An attacker's root learner backed a loop device with a memfd: 1.2 GB past a 64 MB wall,
    charged to no group, still held after the check; and made 300 loop devices that stayed.
    The next held 180 MB in the buffers of 3,000 new ptys."""
    unwalled = _devices()
    walled = walls.run_walled(_devices)
    assert walled["/dev/null"] == walled["/dev/urandom"] == "opened"
    refused = {
        node: said
        for node, said in walled.items()
        if node.endswith(("control", "msg", "kvm", "ptmx"))
    }
    assert refused == {n: "Operation not permitted" for n in unwalled if n in refused}
    assert all(unwalled[n] == "opened" for n in refused)


def _fill_shm(name: str) -> dict[str, Any]:
    """In the learner's process: /dev/shm's size, a file of 8 MB made there, what a file past
    the size met, and shared memory and a semaphore as multiprocessing makes them."""
    import multiprocessing
    from multiprocessing import shared_memory

    folder = os.statvfs("/dev/shm")
    with open(f"/dev/shm/{name}", "wb") as f:
        f.write(b"x" * 8 * MB)
    try:
        with open(f"/dev/shm/{name}-big", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, folder.f_blocks * folder.f_frsize + MB)
        past = "made"
    except OSError as exc:
        past = os.strerror(exc.errno or 0)
    block = shared_memory.SharedMemory(create=True, size=MB)
    block.buf[:2] = b"ok"
    said = bytes(block.buf[:2]).decode()
    block.close()
    block.unlink()
    with multiprocessing.get_context("fork").Lock():
        pass
    return {"size": folder.f_blocks * folder.f_frsize, "past": past, "shared": said}


@pytest.mark.skipif(os.geteuid() != 0, reason="a tmpfs of its own needs root")
def test_the_learners_dev_shm_is_its_own_and_goes_with_the_wall() -> None:
    """An attacker's root learner left 256 MB in a file in /dev/shm past a 64 MB wall, held
    in memory after the check."""
    name = f"labkit-test-{os.getpid()}"
    seen = walls.run_walled(lambda: _fill_shm(name), memory=64 * MB)
    assert seen == {"size": 64 * MB, "past": "No space left on device", "shared": "ok"}
    assert not os.path.exists(f"/dev/shm/{name}")


@pytest.mark.skipif(os.geteuid() != 0, reason="a view of the mounts of its own needs root")
def test_descriptors_that_reach_past_the_learners_view_are_closed(tmp_path: Path) -> None:
    """A directory the checker left open walks the checker's mounts, and a file on /proc
    reopened through /proc/self/fd is writable; the learner's code gets neither. What it may
    use stays: a file elsewhere, a socket (a database session)."""
    kept = {
        "a directory": os.open("/", os.O_RDONLY | os.O_DIRECTORY),
        "a file on /proc": os.open("/proc/sys/kernel/core_pattern", os.O_RDONLY),
        "a file in the temporary directory": os.open(tmp_path / "data", os.O_RDWR | os.O_CREAT),
    }
    left, right = socket.socketpair()
    kept["a socket"] = left.fileno()

    def still_open() -> dict[str, bool]:
        def is_open(fd: int) -> bool:
            try:
                os.fstat(fd)
            except OSError:
                return False
            return True

        return {what: is_open(fd) for what, fd in kept.items()}

    try:
        assert walls.run_walled(still_open) == {
            "a directory": False,
            "a file on /proc": False,
            "a file in the temporary directory": True,
            "a socket": True,
        }
        assert still_open() == dict.fromkeys(kept, True)  # the checker's own stay open
    finally:
        left.close()
        right.close()
        for what, fd in kept.items():
            if what != "a socket":
                os.close(fd)
