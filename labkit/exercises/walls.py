"""Walls enforced from outside: a learner's code runs in a child process that is killed at its
time limit and cannot grow past its memory limit.

A check asks, it does not trust: the child is forked (so it shares nothing it can damage and a
function defined in a notebook needs no pickling), its answer comes back through a pipe, and
the parent kills the child `seconds + GRACE_S` after it began, whatever it is waiting for (no
read blocks past that deadline, so half a message cannot hold the parent). One slow call that
SQLite or Python cannot interrupt therefore ends within a fraction of a second of the cap, and
an answer counts only if the child then exits cleanly within the limit.
The clock starts when the child says it is ready (forked, memory capped), so a learner is not
charged for a busy machine's slow fork; a child that is not ready within `READY_S` is killed
too, so nothing runs longer than `READY_S + seconds + GRACE_S`. Capping and the ready signal
happen in a fork hook registered when this module is imported, so fork hooks registered later
(the learner's own included) run capped and on the learner's clock.
Where a platform cannot fork (Windows), the code runs in-process with only the soft limits the
caller sets itself (SQLite's progress handler); the README says so.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import multiprocessing
import os
import struct
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

SECONDS = 2.0
GRACE_S = 0.5
READY_S = 30.0  # a fork on a loaded machine takes a fraction of a second; this is the outer cap
MEMORY_BYTES = 512 * 2**20
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


@dataclass(frozen=True)
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
    `Crashed`, or `NotStarted` (not ready within `READY_S`). Whatever the task printed is
    printed here. The value comes back as data, never as objects: only None, bool, int, float,
    str, bytes, and lists, tuples and dicts of them (exact types, no subclasses), sent as JSON,
    so nothing the learner's code made runs in this process (`Raised` names anything else).
    """
    if not can_fork():
        return _answer(_attempt(task), seconds)
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, task), daemon=True)
    with _forking(send, memory), warnings.catch_warnings():
        # Python 3.12+ warns that fork in a threaded process can deadlock; the child runs no lock
        warnings.simplefilter("ignore", DeprecationWarning)
        child.start()
    send.close()
    try:
        if _receive(receive, child, len(READY), time.monotonic() + READY_S) is None:
            raise NotStarted(
                f"was not ready within {READY_S:g} s (the machine is too busy), so it was stopped"
            )
        start = time.monotonic()  # the learner's clock starts now
        deadline = start + seconds + GRACE_S
        raw = _receive(receive, child, MAX_ANSWER_BYTES, deadline)
        code = _exit_code(child, deadline)  # an answer counts once the child has exited
        if raw is None or code is None:
            raise TimeLimit(f"ran longer than {seconds:g} s, so it was stopped")
        if code != 0:
            raise Crashed(f"stopped after its answer (exit code {code})")
        message = _read_answer(raw)
    finally:
        _stop(child)
        receive.close()
    return _answer(message, seconds, time.monotonic() - start)


READY = b"ready"  # the child's first message: forked, capped, about to run the task
_pending: tuple[int, Any, int] | None = None  # (forking thread, send end, memory) for the hook
_forking_lock = threading.Lock()


@contextlib.contextmanager
def _forking(send: Any, memory: int) -> Iterator[None]:
    """Tell the fork hook that the fork about to happen from this thread is a walled child."""
    global _pending
    with _forking_lock:
        _pending = (threading.get_ident(), send, memory)
        try:
            yield
        finally:
            _pending = None


def _after_fork_in_child() -> None:
    """In every forked child, before later-registered fork hooks: a walled child silences its
    streams, caps its memory and says it is ready; any other child is left alone."""
    global _pending
    pending, _pending = _pending, None
    if pending is None or pending[0] != threading.get_ident():
        return
    _, send, memory = pending
    try:
        sys.stdout = sys.stderr = io.StringIO()  # never write into the parent's kernel streams
        _cap_memory(memory)
        _send(send, READY)
    except BaseException:  # noqa: BLE001 - an uncapped child must not run the task
        os._exit(70)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _receive(receive: Any, child: Any, most: int, deadline: float) -> bytes | None:
    """The child's next message, or None if it is not all there by `deadline` (the child is
    then killed); `Crashed` if it died first, `Raised` if the message is cut short or longer
    than `most` bytes (the child is killed). No read blocks past `deadline`."""
    try:
        header = _read_exactly(receive, _HEADER.size, deadline)
        if header is None:
            child.kill()
            return None
        (size,) = _HEADER.unpack(header)
        if size > most:
            raise ValueError(f"longer than {most // 2**20} MB")
        try:
            message = _read_exactly(receive, size, deadline)
        except EOFError:
            raise ValueError("cut short") from None
        if message is None:
            child.kill()
        return message
    except (EOFError, ValueError) as exc:
        _stop(child)
        if isinstance(exc, EOFError):
            raise Crashed(f"stopped without an answer (exit code {child.exitcode})") from None
        problem = f"sent an answer the checker cannot read ({exc}), so it was stopped"
        raise Raised("TypeError", problem) from None


def _exit_code(child: Any, until: float) -> int | None:
    """The child's exit code once it has exited, or None at `until`. The code is polled, not
    joined: a grandchild may hold the child's exit sentinel open."""
    while child.exitcode is None and time.monotonic() < until:
        time.sleep(0.002)
    return child.exitcode


def _stop(child: Any) -> None:
    """Kill the child (a no-op once it has exited) and reap it, waiting `GRACE_S` at most."""
    child.kill()
    _exit_code(child, time.monotonic() + GRACE_S)
    child.join(0)


_HEADER = struct.Struct("!Q")  # a message is its length, then its bytes


def _read_exactly(receive: Any, size: int, deadline: float) -> bytes | None:
    """`size` bytes from the pipe, or None at `deadline`; `EOFError` if it closed before any,
    `ValueError` if it closed part way."""
    got = bytearray()
    while len(got) < size:
        if not receive.poll(max(0.0, deadline - time.monotonic())):
            return None
        chunk = os.read(receive.fileno(), min(size - len(got), 2**20))
        if not chunk:
            raise ValueError("cut short") if got else EOFError
        got += chunk
    return bytes(got)


def _send(send: Any, data: bytes) -> None:
    """In the child: one message (its length, then its bytes) to the parent."""
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(send.fileno(), view) :]


def _answer(message: tuple[str, Any, str], seconds: float, elapsed: float = 0.0) -> Any:
    kind, payload, printed = message
    if printed:
        print(printed, end="")
    if kind == "ok":
        return payload
    if kind == "memory":
        raise MemoryLimit(
            f"needed more than {MEMORY_BYTES // 2**20} MB of memory, so it was stopped"
        )
    raise Raised(*payload)


def _attempt(task: Callable[[], Any]) -> tuple[str, Any, str]:
    """Run `task` with its output captured: ("ok", value | "raised", (type, message) |
    "memory", None, printed text)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            value = task()
        return "ok", value, out.getvalue()
    except MemoryError:
        return "memory", None, out.getvalue()
    except BaseException as exc:  # noqa: BLE001 - the learner's exception, whatever it is
        return "raised", (type(exc).__name__, str(exc)), out.getvalue()


MAX_ANSWER_BYTES = 256 * 2**20


def encode(value: Any) -> Any:
    """`value` as JSON-ready data, tagging what JSON lacks (tuples, bytes, dicts with other
    keys); `TypeError` naming anything that is not plain data (subclasses included)."""
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
        return {decode(k): decode(v) for k, v in body}
    return data


def _read_answer(raw: bytes) -> tuple[str, Any, str]:
    """The child's message, decoded as data; a malformed one is the child's failure."""
    try:
        kind, payload, printed = json.loads(raw)
        return str(kind), decode(payload), str(printed)
    except (ValueError, TypeError, KeyError, RecursionError, binascii.Error) as exc:
        return "raised", ("TypeError", f"sent an answer the checker cannot read ({exc})"), ""


def _child(send: Any, task: Callable[[], Any]) -> None:
    """In the forked child, already capped and ready (`_after_fork_in_child`): run the task,
    send one message, exit at once."""
    kind, value, printed = _attempt(task)
    try:
        raw = json.dumps([kind, encode(value), printed]).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        problem = f"returned {exc}, which cannot be passed back to the checker; return plain data"
        raw = json.dumps(["raised", {"t": ["TypeError", problem]}, printed]).encode("utf-8")
    _send(send, raw)
    os._exit(0)


def _cap_memory(extra: int) -> None:
    """Let the child's address space grow by at most `extra` bytes (Linux; elsewhere a no-op:
    SQLite's heap limit still holds for SQL)."""
    if sys.platform.startswith("linux"):
        import resource

        with open("/proc/self/statm", encoding="ascii") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (size + extra, size + extra))
