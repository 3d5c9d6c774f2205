"""Walls enforced from outside: a learner's code runs in a child process that is killed at its
time limit, cannot grow past its memory limit, and takes every process it started with it.

A check asks, it does not trust: the child is forked (so it shares nothing it can damage and a
function defined in a notebook needs no pickling), its answer comes back through a pipe, and
the parent ends the wall `seconds + GRACE_S` after it began, whatever it is waiting for (no
read blocks past that deadline, so half a message cannot hold the parent). One slow call that
SQLite or Python cannot interrupt therefore ends within a fraction of a second of the cap, and
an answer counts only if the child then exits cleanly within the limit.
The clock starts when the child says it is ready (forked, memory capped), so a learner is not
charged for a busy machine's slow fork; a child that is not ready within `READY_S` is killed
too, so nothing runs longer than `READY_S + seconds + GRACE_S`. Capping and the ready signal
happen in a fork hook registered when this module is imported, so fork hooks registered later
(the learner's own included) run capped and on the learner's clock.

Every process the learner's code starts ends with the wall. The child is two processes: a
supervisor that runs no learner code, in a session of its own (`setsid`) and, on Linux, a child
subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`); and below it the learner's process, which dies
with it (`PR_SET_PDEATHSIG`). Whatever a descendant does (its parent exits, it calls `setsid()`
and forks again), Linux hands an orphan to its nearest living subreaper ancestor, never past
it, so all the learner's processes stay below the supervisor. When the wall ends (an answer, a
time limit, an error, an exception in the checker), the supervisor kills them all (found in
/proc by parent pid, again until none is left) and exits; the checker then kills the process
group, and if the supervisor has not exited within `KILL_S` (stopped, say), kills the
supervisor's descendants itself. Why this: a process group or session is left by `setsid()`; a
list of descendants (psutil's) loses a double-forked orphan once init adopts it. `RLIMIT_NPROC`
caps the learner's user at the processes and threads it has plus `PROCESSES`, so a fork bomb
stops; Linux does not enforce it for root.

Where the machine lets the checker make a control group (root on cgroup v1: `labkit/cgroups.py`),
each wall has one, and Linux holds the learner's processes from outside: at most `PROCESSES` tasks
beyond the learner's process, for root too; kernel memory and shared memory charged to the group
count against `memory` (next paragraph); no device node opens but the harmless ones
(`cgroups.DEVICES`: a loop device could hold memory no group charges); and at the wall's end the
group is frozen, every member killed and thawed, so no fork outruns the kill (the supervisor and
the checker both do this, and the scans above follow). A wall inside a wall (learner code that
calls `run_walled`) makes no group of its own: the outer group holds it. Without a group (an
ordinary user, a machine with cgroup v2 only), a root learner's hundreds of processes that each
fork and exit every few milliseconds can starve the supervisor's scans and outlive the wall: there,
run the workbook as an ordinary user. As root the learner's process also gets namespaces of its own
(`_own_namespaces`): System V IPC, so a segment or message queue it leaves goes with its last
process, and mounts, in which /proc and /sys are read-only (root could otherwise change the
machine's settings, a core pattern that runs a program outside any wall, say, or write itself out
of its group); and it gives up root's powers over the walls (`_drop_powers`: raising its own
limits, forcing socket buffers, entering other namespaces, tracing, becoming another user,
real-time priority), for every program it runs too. For any user, the learner's process runs under
a seccomp filter (`labkit/seccomp.py`: no user namespaces, no socket families but Unix and IP, no
io_uring, no tracing), and the supervisor cannot be traced by the learner's processes.

Ctrl-C while the checker waits raises KeyboardInterrupt once; while a wall is made or ends it is
held until the wall has ended (`_Interrupts`), so an interrupt never leaves a wall half ended.

Memory: the learner's process cannot grow its address space past `memory` (RLIMIT_AS). A forked
process inherits that limit for its own address space, so on Linux the supervisor also adds up,
about every `MEMORY_EVERY_S`, what the processes the learner started hold (each its share of
every page it holds: a page n processes hold counts 1/n in each) and stops them all once it
passes `memory` plus what the learner's process held in RAM when it was forked: a started
process that only reads what it inherited copies it (Python counts references), and that one
copy is not the code's doing. `MemoryLimit` says which limit stopped it. The sum is a
sample: memory held for less than the time between two sums (`MEMORY_EVERY_S`, up to
`MEMORY_MOST_S` when a sum is slow) can pass unseen. With a control group, what the kernel holds
for the group that no process maps (pipe buffers, sockets, System V segments, memfds and files
in a tmpfs such as /dev/shm; the dentries and inodes of files it makes too) is summed as well
and held to `memory`, and the group's own ceiling (`_make_group`) holds between two sums. File
pages count toward the ceiling alone, even those a pipe holds (spliced from a file) that the
kernel cannot drop.

The learner's output (Python's and any process's stdout and stderr) goes through a pipe the
checker drains: the first `OUTPUT_BYTES` are printed here, then one line counts the rest.

What the walls do not do: they protect the machine and the notebook, not a learner's check from
that learner. Code in the child can find the answer pipe and write its own "ok" (a forged
answer), which fools only the learner's own check (a forged answer costly to build is
decoded behind walls first: `_read_answer`); and a process of the learner's that kills
the supervisor (same user) and then leaves the session outlives the wall, as a process started
from a notebook cell would; it can signal the checker too (stop it, kill it, interrupt its
wait). Nor do they confine the file system: what the code writes to files is written (but, for
root, where the checker may make a mount namespace: /dev/shm is the wall's own, of at most `memory`
bytes and gone with it, and the machine's other file systems in memory are read-only but those
holding the temporary and working directories: `_own_namespaces`), and root may write any file (one
that another root program runs later is a way out of every wall: run the workbook as an ordinary
user where that matters). Without a control group, the kernel's other stores are not memory the
walls count: a file that lives in memory (a memfd, /dev/shm), a System V segment (which, not as
root, then outlives the check unless removed) or a pipe's buffer (an unlinked file goes with the
last process holding it: at the wall's end at the latest). With one, the kernel's key store is
still not counted (`keyctl`: capped by the user's key quota; keys outlive the check), nor any store
cgroup v1 does not charge that the filter lets through. Connections queued, never accepted, on a
TCP listening socket the kernel makes outside any process; those on a listener in the descriptor
table of one of the code's processes count `QUEUED_BYTES` each, but not the data they hold, nor
those on a listener held elsewhere (in flight in a message, in a mapping, in a table only a
sleeping thread shares): an attacker held 262 MB so past a 64 MB wall. A process of the user's own
that the learner's code did not start (the checker, another notebook) is not walled from it: the
walls take root's extra powers, not the user's.
Elsewhere than Linux there is no subreaper: the process group is killed, a process that left it
is not. Where a platform cannot fork (Windows), the code runs
in-process with only the soft limits the caller sets itself (SQLite's progress handler) and its
output capped; CONTRIBUTING.md (Platforms) says so.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import collections
import contextlib
import io
import json
import multiprocessing
import os
import re
import select
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn, TypeVar

from labkit import cgroups, seccomp

SECONDS = 2.0
GRACE_S = 0.5
# How long the supervisor may take to kill and reap every process below it (done at once when
# none is left; on a loaded machine SIGKILLed processes can take longer than GRACE_S to die), and
# how long the checker waits for it before it kills what it finds below itself.
KILL_S = 5.0
READY_S = 30.0  # a fork on a loaded machine takes a fraction of a second; this is the outer cap
MEMORY_BYTES = 512 * 2**20
OUTPUT_BYTES = 8 * 1024  # of the learner's output, printed; the rest is counted, not shown
PROCESSES = 64  # processes and threads the learner's code may add (RLIMIT_NPROC; not for root)
# descriptors each of its processes may hold (RLIMIT_NOFILE): what the kernel keeps per open
# file or socket that no group charges, times PROCESSES times this, stays small
FILES = 1024
MEMORY_EVERY_S = 0.1  # how often the supervisor adds up the memory of the processes started
MEMORY_MOST_S = 1.0  # ... at the least often, however long a sum takes
GROUP_SLACK = 64 * 2**20  # a control group's memory limit, beyond what the sums allow
# what the kernel holds for one connection queued, never accepted, on a listening TCP socket
# (about 4 kB measured; it makes them outside any process, so no group is charged), doubled
QUEUED_BYTES = 8 * 1024
_OVER_MEMORY = -1  # the supervisor's watch: the processes the learner started held too much
_OVER_KERNEL = -2  # ... or the kernel held too much for the wall's control group
# what the supervisor says on the stop channel before it exits for either
_SAID = {_OVER_MEMORY: b"m", _OVER_KERNEL: b"k"}
T = TypeVar("T")


class Stopped(Exception):
    """The learner's code was stopped by a wall; the message says which, in one line."""


class TimeLimit(Stopped):
    """The child was still running at the wall-clock limit and was killed."""


class MemoryLimit(Stopped):
    """The child ran out of the memory it was allowed."""


class Crashed(Stopped):
    """The child died without answering (a crash in native code, or killed from outside)."""


class NotStarted(Crashed):
    """The child was not ready within `READY_S` and was killed: the check's own failure, as a
    crash is, since the child stalled in the fork or in fork hooks registered before this
    module was imported (the learner's, if any, run after the ready signal, on its clock)."""


@dataclass(eq=False)  # not frozen: Python sets an exception's traceback as it propagates
class Raised(Exception):
    """The learner's code raised: its exception's type name and message, as the child saw them."""

    type_name: str
    message: str

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"


def can_fork() -> bool:
    """True where the walls are real: the platform has the fork start method."""
    return "fork" in multiprocessing.get_all_start_methods()


def run_walled(task: Callable[[], T], *, seconds: float = SECONDS, memory: int = MEMORY_BYTES) -> T:
    """`task()` run in a forked child behind a wall-clock and a memory limit; its value back.

    Raises `Raised` if the task raised, `TimeLimit` after `seconds` counted from the child's
    ready signal (the child is killed at `seconds + GRACE_S`, not asked), `MemoryLimit`,
    `Crashed`, or `NotStarted` (not ready within `READY_S`). Every process the task started is
    killed before this returns or raises. What they printed is printed here: the first
    `OUTPUT_BYTES`, then one line counting the rest. The value comes back as data, never as
    objects: only None, bool, int, float, str, bytes, and lists, tuples, sets and dicts of
    them (exact types, no subclasses), sent as JSON, so nothing the learner's code made runs in this
    process (`Raised` names anything else).
    """
    if not can_fork():
        output = _Output()
        message = _attempt(task, output)
        output.show()
        return _answer(message, memory)
    with _Interrupts() as interrupts:
        wall = _Wall(task, seconds, memory)
        try:
            interrupts.allow()
            if wall.receive(len(READY), time.monotonic() + READY_S) is None:
                raise NotStarted(
                    f"was not ready within {READY_S:g} s (the machine is too busy), so it was "
                    "stopped"
                )
            deadline = time.monotonic() + seconds + GRACE_S  # the learner's clock starts now
            raw = wall.receive(MAX_ANSWER_BYTES, deadline)
            # an answer counts once the child has exited; its supervisor's ending (freezing
            # and killing what is left) is the checker's time, not the learner's
            code = wall.exit_code(max(deadline, time.monotonic() + GRACE_S))
            if raw is None or code is None:
                raise TimeLimit(f"ran longer than {seconds:g} s, so it was stopped")
            if code != 0:
                raise wall.ended(code, "after its answer")
        finally:
            interrupts.hold()
            wall.end()
            wall.output.show()
    return _answer(_read_answer(raw), memory)


class _Interrupts:
    """Ctrl-C (SIGINT) around one wall: held while the wall is made and while it ends (ended
    half way, it would leave the learner's processes running and its descriptors and group
    behind), raised as KeyboardInterrupt once while the checker waits, and dropped after that
    until the wall has ended (an attacker's learner flooded the checker with SIGINT to cut
    each ending short). One held and never raised is raised when the block ends. Only the
    main thread receives signals; elsewhere this does nothing."""

    def __init__(self) -> None:
        self.active = os.name == "posix" and threading.current_thread() is threading.main_thread()
        self.holding, self.raised, self.pending = True, False, False
        self.before: Any = None

    def __enter__(self) -> _Interrupts:
        if self.active:
            import signal

            self.before = signal.signal(signal.SIGINT, self._on_interrupt)
        return self

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        if self.holding or self.raised:
            self.pending = True
            return
        self.raised = True
        raise KeyboardInterrupt

    def allow(self) -> None:
        """From now on the first interrupt raises (at once, if one was held)."""
        self.holding = False
        if self.pending and not self.raised:
            self.pending, self.raised = False, True
            raise KeyboardInterrupt

    def hold(self) -> None:
        """From now on every interrupt is held."""
        self.holding = True

    def __exit__(self, *exc: object) -> None:
        if not self.active:
            return
        import signal

        signal.signal(signal.SIGINT, self.before)
        if self.pending and not self.raised:
            raise KeyboardInterrupt


READY = b"ready"  # the child's first message: forked, capped, about to run the task
_HEADER = struct.Struct("!Q")  # a message is its length, then its bytes
MAX_ANSWER_BYTES = 16 * 2**20
# An answer of so few items decodes in a few milliseconds whatever it holds; one of more is
# decoded first behind walls of its own (`_read_answer`): DECODE_S, and DECODE_ITEM_S more per
# item (a legitimate item takes about 3 us on the reference machine, idle), at most DECODE_MAX_S,
# which bounds what reading any answer costs the checker: about twice that (a forged answer of
# nested sets whose items share hashes decodes in time superlinear in its size, and was decoded
# twice, for 9-10 s each, when DECODE_MAX_S was 10 s).
SMALL_ANSWER_ITEMS = 2_000
SHARED_HASH_MOST = 64  # items of one set, or keys of one dict, that may share one hash
DECODE_S = 3.0
DECODE_ITEM_S = 1e-5
DECODE_MAX_S = 4.5
DECODE_MEMORY = 256 * 2**20


def _send(send: Any, data: bytes) -> None:
    """In the child: one message (its length, then its bytes) to the parent."""
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(send.fileno(), view) :]


class _Output:
    """The learner's output as the checker keeps it: the first `OUTPUT_BYTES`, and a count of
    the bytes after them."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        take = max(0, min(OUTPUT_BYTES - len(self.kept), len(data)))
        self.kept += data[:take]
        self.dropped += len(data) - take

    def show(self) -> None:
        """Print what was kept, then one line naming how many bytes were dropped; once."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(bytes(self.kept), final=not self.dropped)
        dropped = self.dropped + len(decoder.getstate()[0])  # a character cut at the limit
        self.kept, self.dropped = bytearray(), 0
        if dropped:
            text += "" if not text or text.endswith("\n") else "\n"
            text += (
                f"[{dropped:,} more bytes of output were dropped: a check shows the first "
                f"{OUTPUT_BYTES // 1024} kB]\n"
            )
        if text:
            print(text, end="")


class _Sink(io.TextIOBase):
    """A text stream into an `_Output`, for the in-process fallback (no fork)."""

    def __init__(self, output: _Output) -> None:
        self.output = output

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.output.add(text.encode("utf-8", "backslashreplace"))
        return len(text)


def _answer(message: tuple[str, Any], memory: int) -> Any:
    kind, payload = message
    if kind == "ok":
        return payload
    if kind == "memory":
        raise MemoryLimit(f"needed more than {memory // 2**20} MB of memory, so it was stopped")
    raise Raised(*payload)


def _attempt(task: Callable[[], Any], output: _Output | None = None) -> tuple[str, Any]:
    """Run `task`: ("ok", value) | ("raised", (type, message)) | ("memory", None). With
    `output`, what it prints goes there (in-process); a walled child prints into its pipe."""
    capture: Any = contextlib.nullcontext()
    if output is not None:
        sink = _Sink(output)
        capture = contextlib.ExitStack()
        capture.enter_context(contextlib.redirect_stdout(sink))
        capture.enter_context(contextlib.redirect_stderr(sink))
    try:
        with capture:
            value = task()
        return "ok", value
    except MemoryError:
        return "memory", None
    except BaseException as exc:  # noqa: BLE001 - the learner's exception, whatever it is
        return "raised", (type(exc).__name__, str(exc))


def encode(value: Any) -> Any:
    """`value` as JSON-ready data, tagging what JSON lacks (tuples, bytes, sets, dicts with
    other keys); `TypeError` naming anything that is not plain data (subclasses included)."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [encode(v) for v in value]
    if kind is tuple:
        return {"t": [encode(v) for v in value]}
    if kind is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if kind is dict:
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"s" if kind is set else "f": [encode(v) for v in value]}
    raise TypeError(f"a {kind.__name__}, not plain data")


def decode(data: Any) -> Any:
    """The inverse of `encode`, on data only: builds nothing but builtin values."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if isinstance(data, dict):
        ((tag, body),) = data.items()
        if tag == "t":
            return tuple(decode(v) for v in body)
        if tag == "b":
            return base64.b64decode(body)
        if tag in ("s", "f"):
            return (set if tag == "s" else frozenset)(_apart([decode(v) for v in body]))
        pairs = [(decode(k), decode(v)) for k, v in body]
        _apart([k for k, _ in pairs])
        return dict(pairs)
    return data


def _apart(values: list) -> list:
    """`values`, unless more than `SHARED_HASH_MOST` of them share one hash (`ValueError`):
    a set or dict built of values that do takes time quadratic in their number (a forged
    set of 37,000 ints that shared one took 8 s, twice: in the walled decoding and here)."""
    shared = max(collections.Counter(map(hash, values)).values(), default=0)
    if shared > SHARED_HASH_MOST:
        raise ValueError(f"{shared} of its items share one hash")
    return values


def _read_answer(raw: bytes) -> tuple[str, Any]:
    """The child's message, decoded as data; a malformed one is the child's failure. The
    learner's code can forge the message, and decoding runs here, outside the learner's walls:
    a forged set of ints that share one hash would take quadratic time to build (`decode`
    refuses one), a frame of tiny tuples takes thirty times its size in memory. So a message
    of more than `SMALL_ANSWER_ITEMS` items (counted by its commas, strings' included) is
    decoded once in a walled child of its own (the checker's code, on the checker's data,
    within `DECODE_MEMORY` and a time that grows with the items), and here only if that did
    not hit a wall: reading any answer costs the checker at most about that much once more.
    While the caller keeps the value, a few small objects spread over the pages the frame was
    decoded in can keep those pages (an attacker's 16 MB frame of 95 one-item sets held about
    100 MB until the value was dropped). A decoding child that does not start or crashes is
    the check's failure (`NotStarted`, `Crashed`), not the learner's."""
    items = raw.count(b",")
    if items > SMALL_ANSWER_ITEMS and can_fork():
        seconds = min(DECODE_MAX_S, DECODE_S + items * DECODE_ITEM_S)
        try:
            run_walled(lambda: _decoded(raw)[0], seconds=seconds, memory=DECODE_MEMORY)
        except (TimeLimit, MemoryLimit) as exc:
            return _unreadable(f"decoding it {exc}")
    return _decoded(raw)


def _decoded(raw: bytes) -> tuple[str, Any]:
    """The message as `_attempt` makes it, or the child's failure: a forged one may be any
    JSON, and only "ok" carries whatever data the task returned."""
    try:
        kind, payload = json.loads(raw)
        payload = decode(payload)
    except (ValueError, TypeError, KeyError, RecursionError, binascii.Error) as exc:
        return _unreadable(str(exc))
    if kind == "ok":
        return kind, payload
    if kind == "memory" and payload is None:
        return kind, payload
    if kind == "raised" and isinstance(payload, (list, tuple)) and len(payload) == 2:
        if all(isinstance(part, str) for part in payload):
            return kind, tuple(payload)
    return _unreadable("not a message the child sends")


def _unreadable(why: str) -> tuple[str, Any]:
    return "raised", ("TypeError", f"sent an answer the checker cannot read ({why})")


def _child(send: Any, task: Callable[[], Any]) -> NoReturn:
    """In the learner's process, capped and ready (`_become_learner`): run the task, send one
    message, exit at once."""
    try:
        kind, value = _attempt(task)
        try:
            raw = json.dumps([kind, encode(value)]).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            problem = (
                f"returned {exc}, which cannot be passed back to the checker; return plain data"
            )
            raw = json.dumps(["raised", {"t": ["TypeError", problem]}]).encode("utf-8")
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        _send(send, raw)
    finally:
        os._exit(0)


def _cap_memory(extra: int) -> None:
    """Let the child's address space grow by at most `extra` bytes (Linux; elsewhere a no-op:
    SQLite's heap limit still holds for SQL)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import resource

        with open("/proc/self/statm", encoding="ascii") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (size + extra, size + extra))
        # glibc reserves 64 MB of address space for each thread's own heap: under the cap, a
        # pool of eight threads had used it up; one heap serves them all
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX


@dataclass
class _Pending:
    """What the fork hook needs to make the child a wall: the forking thread, the task and its
    limits, the child's ends of the pipes (answer, output, stop), the parent's ends to close."""

    thread: int
    task: Callable[[], Any]
    seconds: float
    memory: int
    send: Any
    out_w: int
    stop_r: int
    parents_ends: tuple[int, ...]
    processes: int | None = None
    group: cgroups.Group | None = None


_pending: _Pending | None = None  # set around the checker's fork, read by the fork hook
_learner = False  # True in the learner's process once the fork hook has made it one
_forking_lock = threading.Lock()


@contextlib.contextmanager
def _forking(pending: _Pending) -> Iterator[None]:
    """Tell the fork hook that the fork about to happen from this thread is a walled child."""
    global _pending
    with _forking_lock:
        _pending = pending
        try:
            yield
        finally:
            _pending = None


if os.name == "posix":
    import ctypes
    import resource
    import signal

    # fork() without Python's fork hooks, for the supervisor (one thread, runs no learner
    # code): the learner's process then runs the hooks the supervisor skipped, once, capped
    _libc = ctypes.PyDLL(None, use_errno=True)
    _libc.fork.restype = ctypes.c_int
    _libc.fork.argtypes = []

    class _Wall:
        """The checker's side of one walled child: the supervisor's pid, the answer pipe, the
        output pipe (drained into `output` while it waits) and the stop pipe."""

        def __init__(self, task: Callable[[], Any], seconds: float, memory: int) -> None:
            self.answers, send = multiprocessing.Pipe(duplex=False)
            out_r, out_w = os.pipe()
            # the stop channel: the checker asks the supervisor to stop; the supervisor says
            # why it stopped the learner, if for memory (the learner closes its copy)
            mine, theirs = socket.socketpair()
            self.stop, stop_r = mine.detach(), theirs.detach()
            os.set_blocking(out_r, False)
            self.out: int | None = out_r
            self.output = _Output()
            self.code: int | None = None  # the supervisor's exit code, once it has exited
            self.reaped = False
            # never blocks: a learner holding a copy of this end could empty it between the
            # poll that says readable and the read
            os.set_blocking(self.answers.fileno(), False)
            ends = (self.answers.fileno(), out_r, self.stop)
            self.group = _make_group(memory)
            pending = _Pending(
                threading.get_ident(), task, seconds, memory, send, out_w, stop_r, ends
            )
            pending.group = self.group
            try:
                with _forking(pending), warnings.catch_warnings():
                    # Python 3.12+ warns that fork in a threaded process can deadlock; the
                    # child runs no lock
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
                if pid == 0:  # the learner's process, after every later fork hook ran in it
                    if not _learner:
                        os._exit(70)
                    _child(send, task)
            except BaseException:
                self.answers.close()
                os.close(out_r)
                os.close(self.stop)
                if self.group is not None:
                    self.group.empty(time.monotonic() + KILL_S)
                    self.group.remove(time.monotonic() + GRACE_S)
                raise
            finally:
                send.close()
                os.close(out_w)
                os.close(stop_r)
            self.pid = pid
            self.pidfd = _pidfd(pid)

        def receive(self, most: int, deadline: float) -> bytes | None:
            """The child's next message, or None if it is not all there by `deadline`;
            `Crashed` if the child's processes all ended first, `Raised` if the message is
            cut short or longer than `most` bytes. No read blocks past `deadline`."""
            try:
                header = self._read(_HEADER.size, deadline)
                if header is None:
                    return None
                (size,) = _HEADER.unpack(header)
                if size > most:
                    raise ValueError(f"longer than {most // 2**20} MB")
                try:
                    return self._read(size, deadline)
                except EOFError:
                    raise ValueError("cut short") from None
            except EOFError:
                code = self.exit_code(time.monotonic() + GRACE_S)
                raise self.ended(code, "without an answer") from None
            except ValueError as exc:
                problem = f"sent an answer the checker cannot read ({exc}), so it was stopped"
                raise Raised("TypeError", problem) from None

        def ended(self, code: int | None, when: str) -> Stopped:
            """What the child, which exited with `code` (not 0) `when`, was stopped for: the
            supervisor says so if it was the memory of the processes the learner started."""
            said = b""
            with contextlib.suppress(OSError):
                os.set_blocking(self.stop, False)
                said = os.read(self.stop, 1)
            if said == _SAID[_OVER_MEMORY]:
                return MemoryLimit(
                    "started processes that together held more memory than it may have, so "
                    "they were all stopped"
                )
            if said == _SAID[_OVER_KERNEL]:
                return MemoryLimit(
                    "had the kernel hold more memory for it than it may have (pipe buffers, "
                    "shared memory, files in memory, many files made, connections never "
                    "accepted), so its processes were all stopped"
                )
            return Crashed(f"stopped {when} (exit code {code})")

        def _read(self, size: int, deadline: float) -> bytes | None:
            """`size` bytes from the answer pipe, or None at `deadline`; `EOFError` if it
            closed before any, `ValueError` if it closed part way."""
            got = bytearray()
            fd = self.answers.fileno()
            while len(got) < size:
                if not self._wait(fd, deadline):
                    return None
                try:
                    chunk = os.read(fd, min(size - len(got), 2**20))
                except BlockingIOError:
                    continue
                if not chunk:
                    raise ValueError("cut short") if got else EOFError
                got += chunk
            return bytes(got)

        def _wait(self, fd: int | None, deadline: float) -> bool:
            """True once `fd` is readable, False at `deadline`; the output is drained
            meanwhile (a child must never block on a full output pipe)."""
            poller = select.poll()
            if fd is not None:
                poller.register(fd, select.POLLIN)
            out = self.out
            if out is not None:
                poller.register(out, select.POLLIN)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ready = {f for f, _ in poller.poll(left * 1000)}
                if out is not None and out in ready and not self._drain(0.01):
                    poller.unregister(out)
                    out = None
                if fd is not None and fd in ready:
                    return True

        def _drain(self, seconds: float) -> bool:
            """Read what the output pipe holds, for at most `seconds`; False once it is
            closed (every process that could write to it has ended)."""
            if self.out is None:
                return False
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                try:
                    chunk = os.read(self.out, 2**16)
                except BlockingIOError:
                    return True
                if not chunk:
                    os.close(self.out)
                    self.out = None
                    return False
                self.output.add(chunk)
            return True

        def exit_code(self, until: float) -> int | None:
            """The supervisor's exit code once it has exited (it is not reaped, so its pid
            stays its process group's), or None at `until`."""
            while self.code is None:
                self._poll_exit()
                now = time.monotonic()
                if self.code is not None or now >= until:
                    break
                pause = 1.0 if self.pidfd is not None else 0.002
                self._wait(self.pidfd, min(until, now + pause))
            return self.code

        def _poll_exit(self) -> None:
            if hasattr(os, "waitid"):
                flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
                try:
                    info = os.waitid(os.P_PID, self.pid, flags)
                except ChildProcessError:
                    return
                if info is not None and info.si_pid == self.pid:
                    exited = info.si_code == os.CLD_EXITED
                    self.code = info.si_status if exited else -info.si_status
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.reaped, self.code = True, os.waitstatus_to_exitcode(status)

        def end(self) -> None:
            """End the wall on every path: ask the supervisor to kill every process below
            it; whatever it did, kill the process group, and the supervisor's descendants if
            it has not exited within `KILL_S`; reap it; take the rest of the output."""
            with contextlib.suppress(OSError):
                os.write(self.stop, b"x")
            os.close(self.stop)
            until = time.monotonic() + KILL_S
            while self.exit_code(min(until, time.monotonic() + GRACE_S)) is None:
                if time.monotonic() >= until or _stopped(self.pid):
                    _kill_below(self.pid, time.monotonic() + KILL_S)
                    break
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            if self.group is not None:  # whatever the supervisor did, killed mid-freeze even
                self.group.empty(time.monotonic() + KILL_S)
            until = time.monotonic() + GRACE_S
            while not self.reaped:
                try:
                    self.reaped = os.waitpid(self.pid, os.WNOHANG)[0] != 0
                except ChildProcessError:
                    self.reaped = True
                if not self.reaped and time.monotonic() > until:
                    break  # stuck in the kernel; init reaps it after this process
                time.sleep(0 if self.reaped else 0.002)
            self._drain(GRACE_S)
            if self.group is not None:
                self.group.remove(time.monotonic() + GRACE_S)
            for fd in (self.out, self.pidfd):
                if fd is not None:
                    os.close(fd)
            self.out = self.pidfd = None
            self.answers.close()

    def _pidfd(pid: int) -> int | None:
        """A descriptor that turns readable when process `pid` exits (Linux 5.3+), or None."""
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                return os.pidfd_open(pid)
        return None

    def _after_fork_in_child() -> None:
        """In every forked child, before later-registered fork hooks: the checker's walled
        fork becomes the supervisor, which never returns from here, and the learner's process
        below it, which returns capped and ready; any other child is left alone."""
        global _pending, _learner
        pending, _pending = _pending, None
        if pending is None or pending.thread != threading.get_ident():
            return
        try:
            learner = _become_supervisor(pending)
            if learner == 0:
                _become_learner(pending)
                _learner = True
                return
        except BaseException:  # noqa: BLE001 - an unwalled child must not run the task
            os._exit(70)
        _supervise(learner, pending)

    os.register_at_fork(after_in_child=_after_fork_in_child)

    def _become_supervisor(p: _Pending) -> int:
        """In the checker's child: a session of its own, a subreaper, no core dumps; then the
        learner's process forked below it. Returns its pid here, 0 in the learner's process."""
        for fd in p.parents_ends:
            os.close(fd)
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)  # a signal here must not wake the checker's event loop
        os.setsid()
        _become_subreaper()
        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))  # a mirrored crash dumps no core
        p.processes = _process_limit()
        pid = _libc.fork()
        if pid < 0:
            raise OSError(ctypes.get_errno(), "fork failed")
        return pid

    def _make_group(memory: int) -> cgroups.Group | None:
        """A control group for one wall where the machine allows one: `PROCESSES` tasks beyond
        the learner's process; a memory ceiling above all the sums allow (the learner's own
        `memory`, its started processes' `memory` and the kernel's `memory`, a copy of this
        process's for the learner and one for its started processes, and `GROUP_SLACK`) that
        holds between two sums."""
        if not sys.platform.startswith("linux"):
            return None
        ceiling = 3 * memory + 2 * _resident(os.getpid()) + GROUP_SLACK
        return cgroups.make(PROCESSES + 1, ceiling)

    def _become_learner(p: _Pending) -> None:
        """In the learner's process: in the wall's control group and an IPC namespace of its
        own, where the machine allows, without root's powers over the walls; dies with the
        supervisor; stdin empty, stdout and stderr into the output pipe; processes and memory
        capped; then says it is ready."""
        os.close(p.stop_r)
        if p.group is not None:
            p.group.join()
        _close_inherited(_own_namespaces(p.memory))
        _drop_powers()
        seccomp.install()
        _die_with(os.getppid())
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(p.out_w, 1)
        os.dup2(p.out_w, 2)
        if p.out_w > 2:
            os.close(p.out_w)
        sys.stdin = io.StringIO()
        sys.stdout = sys.stderr = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        if p.processes is not None:
            _lower(resource.RLIMIT_NPROC, p.processes)
        _lower(resource.RLIMIT_NOFILE, FILES)
        _cap_memory(p.memory)
        _send(p.send, READY)

    def _lower(limit: int, most: int) -> None:
        """Hold `limit` at `most`, or at its hard limit if that is lower, for good."""
        _, hard = resource.getrlimit(limit)
        cap = most if hard == resource.RLIM_INFINITY else min(most, hard)
        resource.setrlimit(limit, (cap, cap))

    def _supervise(learner: int, p: _Pending) -> NoReturn:
        """In the supervisor: wait until the learner's process ends, the checker says stop or
        goes, or the outer deadline passes; kill every process below; exit as the learner's
        process did (killed, if it had to be)."""
        status = None
        try:
            _untraceable()
            p.send.close()
            os.close(p.out_w)
            outer = time.monotonic() + READY_S + p.seconds + 2 * GRACE_S
            status = _watch(learner, p, outer)
            if status is None or status in _SAID:
                os.kill(learner, signal.SIGKILL)
            elif p.group is not None and os.WIFSIGNALED(status) and p.group.oom_killed():
                status = _OVER_KERNEL  # the kernel killed it at the group's memory ceiling
            if p.group is not None:
                p.group.empty(time.monotonic() + KILL_S)
            _kill_below(os.getpid(), time.monotonic() + KILL_S)
        except BaseException:  # noqa: BLE001 - the supervisor must reach its exit
            if status is None or status in _SAID:  # not reaped: the pid is still the learner's
                with contextlib.suppress(OSError):
                    os.kill(learner, signal.SIGKILL)
        if status in _SAID:
            with contextlib.suppress(OSError):
                os.write(p.stop_r, _SAID[status])
            status = None  # exits as killed
        _exit_as(status)

    def _watch(learner: int, p: _Pending, until: float) -> int | None:
        """The learner's wait status once it exits; `_OVER_MEMORY` once the processes it started
        hold more than `p.memory` of their own beyond a copy of the learner's, `_OVER_KERNEL`
        once the kernel holds more than `p.memory` for the wall's group (summed every
        `MEMORY_EVERY_S`, less often if a sum takes long, at least every `MEMORY_MOST_S`);
        None when the checker says stop, the checker is gone (the supervisor was re-parented)
        or `until` passes."""
        woken = _wake_on_child_exit()
        try:
            return _watch_until(learner, p, until, woken)
        finally:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(woken)

    def _watch_until(learner: int, p: _Pending, until: float, woken: int) -> int | None:
        pidfd = _pidfd(learner)
        poller = select.poll()
        poller.register(p.stop_r, select.POLLIN)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        poller.register(woken, select.POLLIN)
        checker = os.getppid()
        # a started process that only reads what it inherited copies it page by page (Python
        # counts references): one copy of the learner's memory at the fork is not the code's
        allowance = p.memory + _resident(learner)
        next_sum = 0.0
        while True:
            _, status = _reap(learner)
            if status is not None:
                return status
            now = time.monotonic()
            if now > until or os.getppid() != checker:
                return None
            if now >= next_sum:
                if _held_by_started(learner) > allowance:
                    return _OVER_MEMORY
                if p.group is not None and _kernel_held(p.group) > p.memory:
                    return _OVER_KERNEL
                spent = time.monotonic() - now  # a sum reads page tables: not most of a core,
                next_sum = now + min(max(MEMORY_EVERY_S, 2 * spent), MEMORY_MOST_S)  # nor rare
            wait = max(0.0, min(next_sum - now, 0.25)) if pidfd is not None else 0.005
            ready = {fd for fd, _ in poller.poll(wait * 1000)}
            if p.stop_r in ready:
                return _reap(learner)[1]
            if woken in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(woken, 4096):
                        pass

    def _wake_on_child_exit() -> int:
        """A descriptor that turns readable when a child of this process exits (a wake-up
        pipe written by a SIGCHLD handler), so `_watch` reaps at once."""
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        return wake_r

    def _reap(learner: int = 0) -> tuple[bool, int | None]:
        """Reap every child that has exited: the learner's process, or an orphan of the
        learner's handed to this subreaper (a zombie holds a place in the group's process
        limit until reaped). Whether a child is left, and the learner's wait status if it
        was among them."""
        found = None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False, found
            if pid == 0:
                return True, found
            if pid == learner:
                found = status

    def _kernel_held(group: cgroups.Group) -> int:
        """What the kernel holds for the wall's group that no process maps: what the group is
        charged (`cgroups.Group.charged`) and the connections queued on its listening sockets."""
        return group.charged() + QUEUED_BYTES * _queued(group.members())

    def _queued(pids: list[int]) -> int:
        """How many connections wait, never accepted, on the TCP listening sockets that
        processes `pids` hold (the queue length /proc/net/tcp shows for a listening socket)."""
        sockets = set()
        for pid in pids:
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        link = os.readlink(f"/proc/{pid}/fd/{fd}")
                        if link.startswith("socket:["):
                            sockets.add(link[8:-1])
        if not sockets:
            return 0
        queued = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError), open(table) as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) < 10 or fields[3] != "0A":
                        break  # the listening sockets come first, then the rest
                    if fields[9] in sockets:
                        queued += int(fields[4].partition(":")[2], 16)
        return queued

    def _held_by_started(learner: int) -> int:
        """The memory held by every process below the supervisor but the learner's, each
        counting its share of what it holds (`_held_share`)."""
        total, seen = 0, {learner}
        todo = [*_children(os.getpid()), *_children(learner)]
        while todo:
            pid = todo.pop()
            if pid not in seen:
                seen.add(pid)
                total += _held_share(pid)
                todo += _children(pid)
        return total

    def _exit_as(status: int | None) -> NoReturn:
        """Exit as a process with wait `status` did (exit code, or killed by its signal)."""
        if status is not None and os.WIFEXITED(status):
            os._exit(os.WEXITSTATUS(status))
        sig = int(signal.SIGKILL)
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)

    def _kill_below(root: int, until: float) -> None:
        """SIGKILL every process below `root`, again until none is left or `until` passes. The
        supervisor (`root` is this process) reaps them too, and is done at once when it has no
        child: a subreaper with no child has no descendant."""
        mine = root == os.getpid()
        while True:
            if mine and not _reap()[0]:
                return  # all dead and reaped: none is left a zombie for init
            below = _descendants(root)
            for pid in below:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if (not below and not mine) or time.monotonic() > until:
                return
            time.sleep(0.001)

    def _stopped(pid: int) -> bool:
        """Whether `pid` is stopped (SIGSTOP, a tracer): it cannot end the wall itself."""
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
        except (OSError, IndexError):
            return False

    if sys.platform.startswith("linux"):
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
        _prctl.restype = ctypes.c_int
        _prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36

        _unshare = ctypes.CDLL(None, use_errno=True).unshare
        _unshare.argtypes = [ctypes.c_int]
        _mount = ctypes.CDLL(None, use_errno=True).mount
        _mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
        CLONE_NEWIPC, CLONE_NEWNS = 0x08000000, 0x00020000
        MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
        MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18

        # file systems whose files live in memory: one that outlives the wall holds RAM that
        # nothing frees (an attacker's root learner left 260 MB in /dev/shm, 208 MB in /dev)
        IN_MEMORY = ("tmpfs", "ramfs", "devtmpfs", "hugetlbfs", "mqueue")

        class _Mount(NamedTuple):
            """A mount as /proc/self/mountinfo shows it."""

            point: str
            options: str
            kind: str  # its file system
            device: int  # a file's `st_dev` there

        def _own_namespaces(memory: int) -> set[int]:
            """System V IPC and POSIX message queues of this process's own, gone with its last
            process, and a view of the mounts of its own: /proc and /sys read-only (root, whom
            the kernel lets write there by file mode alone, could otherwise change the
            machine's settings, such as a core pattern that starts a program as root outside
            any wall, or its own control group); /dev/shm a tmpfs of the wall's own of at most
            `memory` bytes, gone with it; the machine's other file systems in memory read-only,
            but those holding the temporary and working directories, which the checker shares
            with the learner. Returns the devices of the file systems it made read-only or hid
            (`_close_inherited`). Needs CAP_SYS_ADMIN: root; elsewhere the process keeps the
            machine's (and an ordinary user writes none of them but /dev/shm)."""
            if _unshare(CLONE_NEWIPC | CLONE_NEWNS) != 0:
                return set()
            if _mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
                return set()  # without private mounts, a mount here could show in the machine's
            for top in (b"/proc", b"/sys"):
                _mount(top, top, None, MS_BIND | MS_REC, None)
            mounts = _mounts()
            shared = {_mount_point(path, mounts) for path in (tempfile.gettempdir(), os.getcwd())}
            closed = set()
            for point, options, kind, device in mounts:
                if (
                    point in ("/proc", "/sys")
                    or point.startswith(("/proc/", "/sys/"))
                    or (kind in IN_MEMORY and point not in shared)
                ):
                    closed.add(device)
                    kept = set(options.split(","))
                    flags = MS_BIND | MS_REMOUNT | MS_RDONLY
                    flags |= MS_NOSUID * ("nosuid" in kept) | MS_NODEV * ("nodev" in kept)
                    flags |= MS_NOEXEC * ("noexec" in kept)
                    _mount(None, point.encode(), None, flags, None)
            if "/dev/shm" not in shared:  # a temporary directory there stays the checker's
                inodes = max(1024, memory // 2**16)
                size = f"size={memory},nr_inodes={inodes},mode=1777".encode()
                _mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, size)
            return closed

        def _mounts() -> list[_Mount]:
            """This process's mounts, in the order mounted."""
            found = []
            with open("/proc/self/mountinfo") as mounts:
                for line in mounts:
                    fields, _, after = line.partition(" - ")
                    device, _, point, options = fields.split()[2:6]
                    major, minor = device.split(":")
                    device_id = os.makedev(int(major), int(minor))
                    found.append(_Mount(_unescaped(point), options, after.split()[0], device_id))
            return found

        def _close_inherited(closed: set[int]) -> None:
            """Close each descriptor the checker left open that reaches past the learner's view
            of the mounts: a directory (a path looked up from one walks the checker's mounts,
            where /proc and the control groups are writable), a symbolic link, or a file on a
            file system in `closed` (reopened through /proc/self/fd, it could be written).
            Sockets, pipes, devices and files elsewhere stay: the learner's code may use what
            the caller opened (a database session, a database file)."""
            for name in os.listdir("/proc/self/fd"):
                try:
                    found = os.fstat(int(name))
                except OSError:
                    continue  # the listing's own descriptor, closed since
                kind = stat.S_IFMT(found.st_mode)
                if kind in (stat.S_IFDIR, stat.S_IFLNK) or (
                    kind == stat.S_IFREG and found.st_dev in closed
                ):
                    os.close(int(name))

        def _unescaped(point: str) -> str:
            """A mount point as mountinfo writes it (space, tab, newline, backslash as octal)."""
            return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), point)

        def _mount_point(path: str, mounts: list[_Mount]) -> str:
            """The point of the mount that holds `path`: the longest that contains it."""
            real = os.path.realpath(path)
            points = [m.point for m in mounts]
            inside = [p for p in points if real == p or real.startswith(p.rstrip("/") + "/")]
            return max(inside, key=len, default="/")

        # root's capabilities the walls cannot afford a learner's code: raising its own limits
        # (SYS_RESOURCE), socket buffers past the machine's cap (NET_ADMIN), other namespaces
        # and mounts (SYS_ADMIN), tracing the supervisor or the checker, which hold every power
        # (SYS_PTRACE), becoming another user (SETUID, SETGID: as one, it reached the machine's
        # writable /proc through that user's process), signalling other users' processes
        # (KILL), real-time priority over the supervisor (SYS_NICE), locked memory (IPC_LOCK),
        # opening files by handle (DAC_READ_SEARCH: from a descriptor the checker left open, a
        # file in the checker's view of the mounts), and the rest of the system's kind. Root
        # keeps its power over files (DAC_OVERRIDE reads and writes any).
        POWERS = (2, 5, 6, 7, 9, *range(12, 41))  # then SETPCAP (8), which drops them
        PR_CAPBSET_DROP, PR_SET_DUMPABLE = 24, 4
        _capget = ctypes.CDLL(None, use_errno=True).capget
        _capset = ctypes.CDLL(None, use_errno=True).capset

        def _drop_powers() -> None:
            """Drop `POWERS` from this process and every program it runs (the bounding set
            too, so no program regains one): root keeps its files and its user, not its power
            over the walls. Needs CAP_SETPCAP, which only root has; an ordinary user has none
            to drop."""
            if os.geteuid() != 0:
                return
            for power in (*POWERS, 8):
                _prctl(PR_CAPBSET_DROP, power, 0, 0, 0)  # EINVAL for one this kernel lacks
            header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, self
            sets = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; low then high
            if _capget(header, sets) != 0:
                raise OSError(ctypes.get_errno(), "capget failed")
            for power in (*POWERS, 8):
                for field in range(3):
                    sets[field + 3 * (power // 32)] &= ~(1 << (power % 32)) & 0xFFFFFFFF
            if _capset(header, sets) != 0:
                raise OSError(ctypes.get_errno(), "capset failed")

        def _untraceable() -> None:
            """No process of this user without CAP_SYS_PTRACE may trace this one or read its
            memory (a learner's process must not steer the supervisor)."""
            _prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)

        def _become_subreaper() -> None:
            """Orphans below this process are re-parented to it, not to init (Linux 3.4+)."""
            if _prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")

        def _die_with(parent: int) -> None:
            """This process is killed when `parent` (its parent now) exits."""
            if _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
            if os.getppid() != parent:  # it exited before the call
                os._exit(70)

        def _ended(pid: int) -> bool:
            """Whether zombie `pid` has ended: every thread of it has. A main thread that calls
            `pthread_exit` leaves its process a zombie while its other threads run on."""
            for task in _tasks(pid):
                try:
                    with open(f"/proc/{pid}/task/{task}/stat", "rb") as stat:
                        data = stat.read()
                except OSError:
                    continue
                if data[data.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X"):
                    return False
            return True

        def _descendants(root: int, depth: int | None = None) -> list[int]:
            """The live processes below `root` (ended zombies left out), from /proc's parent
            pids; at most `depth` generations down."""
            children: dict[int, list[tuple[int, bytes]]] = {}
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/stat", "rb") as stat:
                        data = stat.read()
                except OSError:
                    continue
                state, ppid = data[data.rfind(b")") + 2 :].split()[:2]
                children.setdefault(int(ppid), []).append((int(name), state))
            found, todo = [], [(root, 0)]
            while todo:
                parent, level = todo.pop()
                if depth is not None and level >= depth:
                    continue
                for pid, state in children.get(parent, ()):
                    todo.append((pid, level + 1))
                    if state not in (b"Z", b"X") or not _ended(pid):
                        found.append(pid)
            return found

        def _children(pid: int) -> list[int]:
            """The children of process `pid`: every thread's list in /proc, or, on a kernel
            without those lists, the processes whose parent it is."""
            if not _CHILD_LISTS:
                return _descendants(pid, depth=1)
            found: list[int] = []
            for task in _tasks(pid):
                with (
                    contextlib.suppress(OSError),
                    open(f"/proc/{pid}/task/{task}/children", "rb") as children,
                ):
                    found += [int(c) for c in children.read().split()]
            return found

        def _tasks(pid: int) -> list[str]:
            try:
                return os.listdir(f"/proc/{pid}/task")
            except OSError:
                return []

        def _held_share(pid: int) -> int:
            """Process `pid`'s share of the memory it holds in RAM or swap, anonymous or
            shared (a page held by n processes counts 1/n in each: what a started process
            wrote and then shares with its own child counts once between them, where its
            private memory counted it in neither). Read from any live thread once the main
            one has ended; a process that made itself unreadable (not dumpable) counts all it
            holds; an ended one 0."""
            for rollup in (f"/proc/{pid}", *(f"/proc/{pid}/task/{t}" for t in _tasks(pid))):
                try:
                    with open(f"{rollup}/smaps_rollup", "rb") as lines:
                        fields = dict(line.split(b":", 1) for line in lines if b":" in line)
                except PermissionError:
                    return _resident(pid)
                except OSError:
                    continue
                kb = {k: int(v.split()[0]) for k, v in fields.items() if v.strip()[:1].isdigit()}
                if b"Pss_Anon" in kb:
                    return (kb[b"Pss_Anon"] + kb[b"Pss_Shmem"] + kb.get(b"SwapPss", 0)) * 1024
                if b"Private_Dirty" in kb:  # a kernel before 5.8 splits no Pss
                    return (kb[b"Private_Dirty"] + kb.get(b"Pss_Shmem", 0)) * 1024
            return 0

        def _resident(pid: int) -> int:
            """The anonymous and shared memory process `pid` has in RAM (0 once it has
            ended): its copies of what it shares count in full."""
            total = 0
            with contextlib.suppress(OSError), open(f"/proc/{pid}/status", "rb") as status:
                for line in status:
                    if line.startswith((b"RssAnon:", b"RssShmem:")):
                        total += int(line.split()[1]) * 1024
            return total

        _CHILD_LISTS = os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")

        def _process_limit() -> int | None:
            """RLIMIT_NPROC for the learner: the processes and threads its user has now plus
            `PROCESSES`; None for root, for whom Linux does not enforce it."""
            uid = os.getuid()
            if uid == 0:
                return None
            count = 0
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/status", "rb") as status:
                        fields = dict(line.split(b":", 1) for line in status.read().splitlines())
                    if int(fields[b"Uid"].split()[0]) == uid:
                        count += int(fields[b"Threads"])
                except (OSError, KeyError, ValueError):
                    continue
            return count + PROCESSES

    else:  # other POSIX systems: no subreaper; the process group is what is killed

        def _become_subreaper() -> None:
            pass

        def _own_namespaces(memory: int) -> set[int]:
            return set()

        def _close_inherited(closed: set[int]) -> None:
            pass

        def _drop_powers() -> None:
            pass

        def _untraceable() -> None:
            pass

        def _die_with(parent: int) -> None:
            pass

        def _descendants(root: int, depth: int | None = None) -> list[int]:
            return []

        def _children(pid: int) -> list[int]:
            return []

        def _held_share(pid: int) -> int:
            return 0

        def _resident(pid: int) -> int:
            return 0

        def _process_limit() -> int | None:
            return None
