"""The walls end every process a learner's code starts, cap what it prints, and read an
answer's items with a bound in the walled child (issue 35).

Each test here failed against the walls before: forked processes outlived the check (one
wrote its file a second after the check returned), 100 MB of print came back whole, and an
endless iterator was consumed in the checking process. The supervisor-stopping test guards
the checker's own fallback kill.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import itertools
import json
import mmap
import os
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from worked_answers import VERDICTS

from labkit import exercises as exs
from labkit import walls

pytestmark = [
    pytest.mark.skipif(not walls.can_fork(), reason="the walls need fork (POSIX)"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]
LOOSE_S = 15.0  # far above what the walls allow; only a check that never returns exceeds it
LATE_S = 0.5  # a forked process's sleep before it writes its late file


def _me() -> str:
    """In a forked process: its pid and start time, so a reused pid is not mistaken for it."""
    with open(f"/proc/{os.getpid()}/stat") as stat:
        return f"{os.getpid()} {stat.read().rsplit(')', 1)[1].split()[19]}"


def _alive(record: str) -> bool:
    """Whether the process `_me()` described still runs: a thread of it does (a zombie whose
    threads have all ended is over; one whose main thread alone ended is not)."""
    pid, start = record.split()
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                states.append(stat.read().rsplit(")", 1)[1].split()[0])
    except OSError:
        return False
    return fields[19] == start and any(state not in ("Z", "X") for state in states)


def _put(path: Path, text: str) -> None:
    """Write `text` beside `path` and rename it there: a reader never sees a file half written
    (the wall may kill its writer between the two)."""
    part = path.with_name(f".{path.name}.part")
    part.write_text(text)
    os.replace(part, path)


def _sleeper(folder: Path, k: int, setsid: bool, sleep: float = LATE_S) -> None:
    """In a forked process: (optionally leave the session and fork again, as a daemon does,)
    say it started, sleep, then write a late file holding the time; never returns."""
    try:
        if setsid:
            os.setsid()
            if os.fork():
                os._exit(0)
        _put(folder / f"started-{k}", _me())
        time.sleep(sleep)
        _put(folder / f"late-{k}", str(time.monotonic()))
    finally:
        os._exit(0)


def _written_after(folder: Path, returned: float, sleep: float = LATE_S) -> list[float]:
    """The times of the late files written after the check returned, once every sleeper
    would have written its own (a late file written while the wall stood is allowed)."""
    time.sleep(max(0.0, returned + sleep + 0.3 - time.monotonic()))
    return [t for t in (float(p.read_text()) for p in folder.glob("late-*")) if t > returned]


def _await_files(folder: Path, pattern: str, n: int) -> None:
    until = time.monotonic() + LOOSE_S
    while len(list(folder.glob(pattern))) < n and time.monotonic() < until:
        time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setsid", "n"),
    [(False, 1), (True, 1), (False, 8), (True, 8)],
    ids=["fork", "fork-setsid", "fork-8", "fork-8-setsid"],
)
def test_every_process_an_answer_forks_ends_with_the_check(
    tmp_path: Path, setsid: bool, n: int
) -> None:
    def answer() -> str:
        for k in range(n):
            if os.fork() == 0:
                _sleeper(tmp_path, k, setsid)
        _await_files(tmp_path, "started-*", n)
        return "answered"

    assert walls.run_walled(answer, seconds=LOOSE_S) == "answered"
    returned = time.monotonic()
    records = [p.read_text() for p in tmp_path.glob("started-*")]
    assert len(records) == n
    assert [r for r in records if _alive(r)] == []  # ended before the check returned
    assert _written_after(tmp_path, returned) == []


def _headless_sleeper(folder: Path) -> None:
    """In a forked process: leave the session, start a thread that says it started and sleeps
    on, then end the main thread alone (`pthread_exit`): /proc shows the process as a zombie
    while its thread runs."""
    os.setsid()

    def on() -> None:
        _put(folder / "started-0", _me())
        time.sleep(LOOSE_S)
        os._exit(0)

    threading.Thread(target=on).start()
    ctypes.CDLL(None).pthread_exit(None)


@pytest.mark.slow
def test_a_process_whose_main_thread_exits_ends_with_the_check(tmp_path: Path) -> None:
    """A zombie with a live thread is not over: the walls kill it (an attacker's process once
    outlived the check so)."""

    def answer() -> str:
        if os.fork() == 0:
            _headless_sleeper(tmp_path)
        _await_files(tmp_path, "started-*", 1)
        return "answered"

    assert walls.run_walled(answer, seconds=LOOSE_S) == "answered"
    record = (tmp_path / "started-0").read_text()
    try:
        assert not _alive(record)
    finally:
        if _alive(record):
            os.kill(int(record.split()[0]), signal.SIGKILL)


# --- memory ------------------------------------------------------------------------------------


def _holder(
    folder: Path, k: int, mb: int, shared: bool, headless: bool = False, hold: float = LOOSE_S
) -> None:
    """In a forked process: write `mb` MB, say it started, then sleep. `shared`: the memory is
    a shared mapping that a grandchild reads before this process writes it, so it is shared
    between the two and private to neither. `headless`: a thread sleeps on and the main thread
    ends alone, so /proc answers no more for the process's own memory map."""
    try:
        if shared:
            held: Any = mmap.mmap(-1, mb * 2**20, mmap.MAP_SHARED)
            read, write = os.pipe()
            if os.fork() == 0:
                for i in range(0, len(held), 4096):
                    held[i]  # noqa: B018 - map the page
                os.write(write, b"x")
                time.sleep(LOOSE_S)
                os._exit(0)
            os.read(read, 1)
        else:
            held = bytearray(mb * 2**20)
        for i in range(0, len(held), 4096):
            held[i] = 1
        _put(folder / f"started-{k}", _me())
        if headless:
            threading.Thread(target=time.sleep, args=(hold,)).start()
            ctypes.CDLL(None).pthread_exit(None)
        time.sleep(hold)
    finally:
        os._exit(0)


def _resident_here() -> int:
    """What this process holds in RAM (anonymous and shared), as a forked learner starts with."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return sum(int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssShmem"))


MEMORY = 128 * 2**20  # the walls' memory in these tests


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shared", "headless", "allowed"),
    [(False, False, False), (True, False, False), (False, True, False), (False, False, True)],
    ids=["private", "shared-in-pairs", "main-thread-ended", "under-the-limit"],
)
def test_the_processes_an_answer_starts_share_one_memory_limit(
    tmp_path: Path, shared: bool, headless: bool, allowed: bool
) -> None:
    """Each process has the memory limit for its own address space, so before this an answer
    that forked held the limit once per process (an attacker's four children held 1 GB under
    512 MB walls). Now what they hold of their own, and their share of the shared memory they
    map, is added up and held to the limit plus one copy of what the learner held at the fork.
    Each started process (a pair, if shared) holds 3/4 of the limit, as many as it takes to pass
    the sum's allowance (or two, under it)."""
    mb = MEMORY * 3 // 4 // 2**20
    allowance = MEMORY + _resident_here()
    n = 2 if allowed else -(-(allowance + 32 * 2**20) // (mb * 2**20))

    def answer() -> str:
        for k in range(n):
            if os.fork() == 0:
                _holder(tmp_path, k, mb, shared, headless)
        _await_files(tmp_path, "started-*", n)
        if allowed:
            time.sleep(4 * walls.MEMORY_EVERY_S)  # the supervisor's next sums see them all
            return "answered"
        time.sleep(LOOSE_S)  # only the memory wall ends this
        return "not stopped"

    # shared memory is the kernel's too: with a control group, its count may stop them first
    said = "started processes that together held" + ("|had the kernel hold" if shared else "")
    if allowed:
        assert walls.run_walled(answer, seconds=LOOSE_S, memory=2 * MEMORY) == "answered"
    else:
        with pytest.raises(walls.MemoryLimit, match=said):
            walls.run_walled(answer, seconds=2 * LOOSE_S, memory=MEMORY)
    records = [p.read_text() for p in tmp_path.glob("started-*")]
    assert [r for r in records if _alive(r)] == []


def _writer_with_child(folder: Path, k: int, mb: int) -> None:
    """In a forked process: write `mb` MB, fork a child that only sleeps (every page written
    is now shared by the two, private to neither), say it started, sleep."""
    try:
        held = bytearray(mb * 2**20)
        for i in range(0, len(held), 4096):
            held[i] = 1
        if os.fork() == 0:
            time.sleep(LOOSE_S)
            os._exit(0)
        _put(folder / f"started-{k}", _me())
        time.sleep(LOOSE_S)
    finally:
        os._exit(0)


@pytest.mark.slow
def test_memory_a_started_process_shares_with_its_child_counts(tmp_path: Path) -> None:
    """An attacker's started processes each wrote 110 MB and forked a child that slept: the
    pages, shared by the pair, were in neither's private memory, and 449 MB passed a 128 MB
    wall's sum. Each process's share of what it holds counts now."""
    mb = MEMORY * 3 // 4 // 2**20
    n = -(-(MEMORY + _resident_here() + 32 * 2**20) // (mb * 2**20))

    def answer() -> str:
        for k in range(n):
            if os.fork() == 0:
                _writer_with_child(tmp_path, k, mb)
        _await_files(tmp_path, "started-*", n)
        time.sleep(LOOSE_S)
        return "not stopped"

    with pytest.raises(walls.MemoryLimit, match="started processes that together held"):
        walls.run_walled(answer, seconds=2 * LOOSE_S, memory=MEMORY)


@pytest.mark.slow
def test_a_slow_sum_still_comes_round_within_the_longest_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sum made slow (an attacker's sleepers with thousands of mappings each: half a second a
    sum) once put the next sum ten sums away, and processes that held memory in between were
    never seen. The interval is at most MEMORY_MOST_S."""
    real = walls._held_by_started

    def slow(learner: int) -> int:  # what the supervisor, forked from here, will call
        time.sleep(0.6)
        return real(learner)

    monkeypatch.setattr(walls, "_held_by_started", slow)
    mb = MEMORY * 3 // 4 // 2**20
    n = -(-(MEMORY + _resident_here() + 32 * 2**20) // (mb * 2**20))

    def answer() -> str:
        time.sleep(0.8)  # the first sum has begun
        for k in range(n):
            if os.fork() == 0:
                _holder(tmp_path, k, mb, shared=False, hold=3 * walls.MEMORY_MOST_S)
        time.sleep(LOOSE_S)
        return "not stopped"

    with pytest.raises(walls.MemoryLimit, match="started processes that together held"):
        walls.run_walled(answer, seconds=2 * LOOSE_S, memory=MEMORY)


def test_an_exit_code_is_not_taken_for_the_memory_wall() -> None:
    """The memory wall is said on a channel the learner's code has no end of (an exit code,
    86, once was it, and a learner's os._exit(86) read as a memory stop)."""

    def exits() -> None:
        os._exit(86)

    with pytest.raises(walls.Crashed, match="exit code 86"):
        walls.run_walled(exits)


# --- output ------------------------------------------------------------------------------------


def _dropped_line(n: int) -> str:
    return f"[{n:,} more bytes of output were dropped: a check shows the first 8 kB]"


@pytest.mark.slow
def test_an_answer_printing_100_mb_shows_8_kb_and_counts_the_rest(capsys) -> None:
    def noisy() -> int:
        for _ in range(100):
            print("x" * 999_999)  # 100 lines of 1,000,000 bytes with the newline
        return 7

    assert walls.run_walled(noisy) == 7
    out = capsys.readouterr().out
    assert out == "x" * walls.OUTPUT_BYTES + "\n" + _dropped_line(100_000_000 - 8192) + "\n"


def test_output_of_any_process_in_the_wall_is_capped(capsys) -> None:
    def raw() -> int:
        os.write(1, b"y" * 600_000)
        os.write(2, b"z" * 400_000)
        subprocess.run(["printf", "%s", "tail"], check=True)
        return 7

    assert walls.run_walled(raw) == 7
    out = capsys.readouterr().out.splitlines()
    assert out == ["y" * walls.OUTPUT_BYTES, _dropped_line(1_000_004 - 8192)]


def test_output_is_shown_when_a_wall_stops_the_code(capsys) -> None:
    def chatty() -> None:
        print("looking at", 3)
        while True:
            pass

    with pytest.raises(walls.TimeLimit):
        walls.run_walled(chatty, seconds=0.3)
    assert capsys.readouterr().out == "looking at 3\n"


def test_output_is_capped_where_the_code_runs_in_process(monkeypatch, capsys) -> None:
    """Without fork (Windows) the cap holds too; a character cut at the limit is dropped."""
    monkeypatch.setattr(walls, "can_fork", lambda: False)
    assert walls.run_walled(lambda: print("€" * 1_000_000) or 7) == 7  # 3 bytes each
    kept = walls.OUTPUT_BYTES // 3
    out = capsys.readouterr().out
    assert out == "€" * kept + "\n" + _dropped_line(3_000_001 - kept * 3) + "\n"


# --- answers read with a bound -----------------------------------------------------------------


def _bounded(call: Callable[[], Any], limit: float = LOOSE_S) -> Any:
    """`call()`'s value, failing the test if it has not returned after `limit` seconds (the
    thread is left behind: it is what the test proves does not happen)."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    thread.start()
    thread.join(limit)
    if not outcome:
        pytest.fail(f"the check was still reading after {limit:g} s")
    return outcome[0]


class EndlessMapping(Mapping):
    def __getitem__(self, key: Any) -> str:
        return "commit"

    def __len__(self) -> int:
        return 5

    def __iter__(self) -> Iterator[str]:
        return itertools.repeat("A")


class EndlessSequence(Sequence):
    """Says it has 3 steps; iterating it never ends (its __getitem__ never raises)."""

    def __getitem__(self, index: Any) -> str:
        return "deliver 1"

    def __len__(self) -> int:
        return 3


@pytest.mark.parametrize(
    ("exercise", "answer", "said"),
    [
        (exs.max_orphans_ex, itertools.repeat(1), "more than 100 ids in the orphans"),
        (
            exs.interleaving_ex,
            {"P": itertools.repeat(6), "Q": set()},
            "more than 100 ids in the set for P",
        ),
        (exs.rejection_reasons_ex, EndlessMapping(), "more than 100 entries in your dict"),
        (exs.lww_rewind_ex, EndlessSequence(), "more than 20 steps in the schedule"),
    ],
    ids=["id-set", "pg-id-set", "mapping", "sequence"],
)
def test_an_endless_answer_is_refused_in_one_line(exercise, answer, said) -> None:
    fb = _bounded(lambda: exercise.check(answer))
    assert fb.status == "incorrect" and said in fb.message and "\n" not in fb.message, fb


@pytest.mark.slow
def test_an_answer_whose_next_item_never_comes_is_stopped_by_the_wall() -> None:
    def stuck() -> Iterator[int]:
        yield 1
        while True:
            pass

    fb = _bounded(lambda: exs.max_orphans_ex.check(stuck()))
    assert fb.message.endswith("reading the orphans ran longer than 2 s, so it was stopped"), fb


def test_collections_that_are_not_plain_are_read_in_the_wall_and_still_pass() -> None:
    import numpy as np

    assert exs.max_orphans_ex.check(x for x in (1, 2, 4, 6)).passed
    assert exs.max_orphans_ex.check(np.array([1, 2, 4, 6])).passed
    assert exs.rejection_reasons_ex.check(types.MappingProxyType(VERDICTS)).passed
    assert exs.rejection_reasons_ex.check(collections.UserDict(VERDICTS)).passed
    fb = exs.max_orphans_ex.check(iter([1, 2, "4"]))
    assert fb.message.endswith(
        "each id in the orphans must be a number, not the text '4': drop the quotes"
    ), fb


MEASURE = """
import itertools, json, os, sys, threading, time
from labkit import exercises as exs

def rss_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

base = rss_mb()
peak = [base]

def watch():  # the old walls grew this process by 2.2 GB in 6 s: stop at the bound instead
    while True:
        peak[0] = max(peak[0], rss_mb())
        if peak[0] - base > float(sys.argv[1]):
            print(json.dumps({"grew_mb": peak[0] - base}), flush=True)
            os._exit(3)
        time.sleep(0.005)

threading.Thread(target=watch, daemon=True).start()
start = time.monotonic()
fb = exs.max_orphans_ex.check(itertools.count(1))
took = time.monotonic() - start
time.sleep(0.05)
print(json.dumps({"message": fb.message, "took": took, "grew_mb": peak[0] - base}))
"""


@pytest.mark.slow
def test_an_endless_iterator_answer_leaves_the_checkers_memory_alone() -> None:
    bound_mb = 32
    run = subprocess.run(
        [sys.executable, "-c", MEASURE, str(bound_mb)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, (run.stdout, run.stderr[-2000:])
    seen = json.loads(run.stdout.splitlines()[-1])
    assert "more than 100 ids in the orphans" in seen["message"], seen
    assert seen["grew_mb"] < bound_mb and seen["took"] < LOOSE_S, seen


def test_the_learners_exception_passes_through_a_context_manager() -> None:
    """`Raised` was a frozen dataclass, and a generator context manager sets the traceback of
    what passes through it: `FrozenInstanceError` came out instead."""

    @contextlib.contextmanager
    def around() -> Iterator[None]:
        yield

    def fails() -> None:
        raise ValueError("the learner's")

    with pytest.raises(walls.Raised, match="ValueError: the learner's"), around():
        walls.run_walled(fails)


def _children_cpu() -> float:
    import resource  # POSIX only, as this file is

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def test_the_supervisor_sleeps_after_an_orphan_it_reaped() -> None:
    """The supervisor is woken when an orphan handed to it exits, and reaps it; its wake-up
    pipe, once left undrained, kept it polling at full speed for the rest of the wall."""

    def answer() -> int:
        if os.fork() == 0:
            if os.fork() == 0:
                time.sleep(0.2)  # the supervisor's by now
            os._exit(0)
        time.sleep(2.0)
        return 1

    before = _children_cpu()
    assert walls.run_walled(answer, seconds=LOOSE_S) == 1
    assert _children_cpu() - before < 0.6  # a spinning supervisor spent 1.7 s of the 2


def _filtered() -> dict:
    """Whether this process runs under the walls' filter and limits: what each says."""
    import resource
    import socket
    import struct

    def works(call: Callable[[], None]) -> bool:
        try:
            call()
        except PermissionError:
            return False
        return True

    def open_netlink() -> None:  # NETLINK_USERSOCK: any user may open one
        socket.socket(16, socket.SOCK_RAW, 2).close()

    def set_a_tcp_md5_key() -> None:  # struct tcp_md5sig: for 127.0.0.1, the key "k"
        key = struct.pack(
            "=H2x4s120xBBHI80s", socket.AF_INET, bytes([127, 0, 0, 1]), 0, 0, 1, 0, b"k"
        )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.IPPROTO_TCP, 14, key)  # TCP_MD5SIG

    def join_a_multicast_group() -> None:  # struct ip_mreqn: 224.0.0.251 on the loopback
        group = struct.pack(
            "=4s4si", bytes([224, 0, 0, 251]), bytes(4), socket.if_nametoindex("lo")
        )
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, group)

    def set_what_a_client_sets() -> None:  # as asyncio, libpq and urllib do
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 60)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x10)

    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {
        "filters": int(fields.get("Seccomp_filters", "0")),
        "no new privileges": fields["NoNewPrivs"].strip(),
        "open a netlink socket": works(open_netlink),
        "set a TCP MD5 key": works(set_a_tcp_md5_key),
        "join a multicast group": works(join_a_multicast_group),
        "set what a client sets": works(set_what_a_client_sets),
        "files": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
    }


@pytest.mark.skipif(
    __import__("platform").machine() not in ("x86_64", "aarch64"), reason="no table for it"
)
def test_the_learners_system_calls_are_filtered_for_any_user() -> None:
    """`labkit.seccomp`: the learner's process, root or not, runs under the filter (a netlink
    queue any user may open held 1.7 GB past a 64 MB wall, charged to no group; TCP MD5 keys
    726 MB, multicast memberships 329 MB) and may hold `FILES` descriptors."""
    unwalled = _filtered()  # the checker's own filters (a container may have one)
    assert unwalled["open a netlink socket"] and unwalled["set a TCP MD5 key"]
    assert unwalled["join a multicast group"]
    assert walls.run_walled(_filtered) == {
        "filters": unwalled["filters"] + 1,
        "no new privileges": "1",
        "open a netlink socket": False,
        "set a TCP MD5 key": False,
        "join a multicast group": False,
        "set what a client sets": True,
        "files": min(walls.FILES, unwalled["files"]),
    }


POOL = """
from concurrent.futures import ThreadPoolExecutor
from labkit import walls

def pool():
    with ThreadPoolExecutor(8) as threads:
        return sum(threads.map(lambda k: len(bytearray(1000)) * k, range(100)))

print(walls.run_walled(pool, memory=256 * 2**20))
"""


def test_a_pool_of_eight_threads_runs_in_a_256_mb_wall() -> None:
    """glibc reserved 64 MB of address space for each thread's heap, and a pool of eight
    threads ran out of a 512 MB wall ("can't start new thread"); one heap serves them all.
    Run from a fresh interpreter: one that made thread heaps before the fork (this one has)
    brings them along, already counted."""
    done = subprocess.run(
        [sys.executable, "-c", POOL],
        capture_output=True,
        text=True,
        timeout=LOOSE_S * 2,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.stdout.strip() == "4950000", done.stderr[-2000:]
