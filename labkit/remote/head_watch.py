"""An independent reader in a process of its own: it polls a store's head for as long as it
runs and records every fall (a head lower than the one it read just before). `labkit.remote`
runs one beside each loop; it lives here, light to import, so it starts in a blink.

Run as ``python -m labkit.remote.head_watch KIND TARGET POLL_S``: KIND is ``catalog`` (a safe
design's catalog log) or ``mirror`` (an unguarded design's head row, `labkit.remote.head_row`),
TARGET a SQLite file, or
``-`` for PostgreSQL with the DSN in the environment variable `DSN_VARIABLE` (kept off the
command line). It prints ``ready`` and the head it read first, then one JSON line
``[wall, before, after]`` per change of the head (a fall is one whose `after` is lower), and on
end of input ``done POLLS``. A ``sync N`` line on its input is answered ``synced N HEAD`` after
the next poll that began once the line arrived (`ReaderProcess.sync`: the writer's proof that
the reader has read what it wrote; N names the request, so an answer that comes after its
asker gave up is never taken for a later one's). `ReaderProcess` starts and stops it.
On PostgreSQL each poll is an autocommit statement, which sees every commit made before it at
any level, but at SERIALIZABLE a read can fail with a serialization error and end the process:
its session is pinned to READ COMMITTED (`versions_pg.pin_settings`), so no change of the
server's reaches it. It writes nothing, so its `synchronous_commit` does not matter.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import labkit.catalog.versions as catalog
import labkit.catalog.versions_pg as versions_pg
import labkit.remote.head_row as head_row
from labkit.db import connect_readonly
from labkit.killable import child_env

KINDS = ("catalog", "mirror")
DSN_VARIABLE = "LABKIT_READER_DSN"
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 0.25  # how much longer a sync waits once its caller is stopped


class ReaderFailure(RuntimeError):
    """The reader process died, or stayed silent, before it answered a sync: one line saying
    which store and what happened."""


@dataclass(frozen=True)
class Fall:
    """One fall the reader saw: when (wall clock) and the head before and after."""

    wall: float
    before: int
    after: int


@dataclass(frozen=True)
class Change:
    """One change of the head the reader saw (a rise or a fall): when and from what to what."""

    wall: float
    before: int
    after: int


def _open(target: str) -> Any:
    if target == "-":  # the parent reached this server already; a failure is its stderr line
        import psycopg

        conn = psycopg.connect(os.environ[DSN_VARIABLE], autocommit=True)
        versions_pg.pin_settings(conn, versions_pg.READ_COMMITTED)
        return conn
    return connect_readonly(target)


def watch(kind: str, target: str, poll: float) -> None:
    """The reader process's body: poll until stdin closes, printing each fall as it happens."""
    conn = _open(target)
    head = catalog.head if kind == "catalog" else (lambda c: head_row.read(c)[0])
    stop, asked = threading.Event(), queue.SimpleQueue[str]()

    def listen() -> None:
        for line in sys.stdin:
            word, _, number = line.strip().partition(" ")
            if word == "sync":
                asked.put(number)
        stop.set()

    threading.Thread(target=listen, daemon=True).start()
    previous, polls = head(conn), 0
    print(f"ready {previous}", flush=True)
    while not stop.is_set():
        answer = []  # taken before the read: the read sees what was written
        while not asked.empty():
            answer.append(asked.get())
        now = head(conn)
        polls += 1
        if now != previous:
            print(json.dumps([time.time(), previous, now]), flush=True)
        for number in answer:
            print(f"synced {number} {now}", flush=True)
        previous = now
        time.sleep(poll)
    print(f"done {polls}", flush=True)


class ReaderProcess:
    """Start the reader process on a store; `stop()` ends it and returns the falls it saw.
    Afterwards `first` is the head it read first and `changes` every change it saw."""

    def __init__(
        self, kind: str, store: str | Path | None, *, dsn: str | None = None, poll: float = 0.001
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown reader kind {kind!r}; expected one of {', '.join(KINDS)}")
        env = child_env(**({DSN_VARIABLE: dsn} if dsn is not None else {}))
        self.target = "-" if dsn is not None else str(store)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labkit.remote.head_watch", kind, self.target, repr(poll)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stdin, stdout, stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        assert stdin is not None and stdout is not None and stderr is not None  # all PIPE
        self._stdin, self._stdout, self._stderr = stdin, stdout, stderr
        self.polls = 0
        self.first = 0
        self.failure: str | None = None  # why a sync or the stop failed, in one line
        self.changes: list[Change] = []
        self._synced: queue.Queue[tuple[int, int] | None] = queue.Queue()
        self._asked = 0  # the number of the last sync sent
        watchdog = threading.Timer(READY_TIMEOUT_S, self.proc.kill)
        watchdog.start()
        try:
            first = self._stdout.readline().strip()
        finally:
            watchdog.cancel()
        if first.startswith("ready "):
            self.first = int(first.split()[1])
        else:
            self.proc.kill()
            _, err = self.proc.communicate()
            last = (err.strip().splitlines() or ["no error output"])[-1]
            raise RuntimeError(f"reader process on {self.target} did not start: {last}")
        self._pump = threading.Thread(target=self._read_output, daemon=True)
        self._pump.start()

    def _read_output(self) -> None:
        """Collect the reader's lines as they come (changes, sync answers, its poll count)."""
        for line in self._stdout:
            if line.startswith("done "):
                self.polls = int(line.split()[1])
            elif line.startswith("synced "):
                _, number, head = line.split()
                self._synced.put((int(number), int(head)))
            elif line.strip():
                self.changes.append(Change(*json.loads(line)))
        self._synced.put(None)  # the reader is gone: no sync will be answered

    def sync(self, timeout: float = READY_TIMEOUT_S, stop: threading.Event | None = None) -> int:
        """Wait until the reader has polled once after this call and return the head it read
        then: whatever was written before the call, the reader has seen. `ReaderFailure` if it
        is dead, or silent for `timeout` s (or `STOP_GRACE_S` more once `stop` is set)."""
        self._asked += 1
        start = time.monotonic()
        end = start + timeout
        try:
            self._stdin.write(f"sync {self._asked}\n")
            self._stdin.flush()
        except OSError:
            raise self._failed(self._dead()) from None
        while True:
            now = time.monotonic()
            if stop is not None and stop.is_set():
                end = min(end, now + STOP_GRACE_S)
            try:
                answer = self._synced.get(timeout=max(0.0, min(0.05, end - now)))
            except queue.Empty:
                if time.monotonic() >= end:
                    break
                continue
            if answer is None:
                self._synced.put(None)  # the reader is gone: for every later sync too
                raise self._failed(self._dead())
            number, head = answer
            if number == self._asked:
                return head
            # an answer to an earlier sync whose asker gave up: not proof of this one
        waited = time.monotonic() - start
        why = " (the run was stopped)" if stop is not None and stop.is_set() else ""
        raise self._failed(
            f"reader process on {self.target} is alive but did not answer a sync "
            f"for {waited:.1f} s{why}"
        )

    def _failed(self, why: str) -> ReaderFailure:
        self.failure = self.failure or why  # the first failure is the cause of the others
        return ReaderFailure(why)

    def _dead(self) -> str:
        """One line on a reader process that ended: its exit code and last error line."""
        try:
            code = self.proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            code = None
        said = ""
        if code is not None and not self._stderr.closed:
            lines = self._stderr.read().strip().splitlines()
            said = f": {lines[-1]}" if lines else ""
        if code is None:
            return f"reader process on {self.target} closed its output"
        return f"reader process on {self.target} died (exit code {code}){said}"

    def stop(self, timeout: float = READY_TIMEOUT_S) -> list[Fall]:
        """End the reader (its input closes; killed if it has not ended `timeout` s later, or
        `STOP_GRACE_S` once it has failed) and return every fall it recorded."""
        try:
            self._stdin.close()
        except OSError:
            pass  # it died already; what it printed is in `changes`
        try:
            self.proc.wait(timeout=timeout if self.failure is None else STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._failed(
                f"reader process on {self.target} did not end within {timeout:g} s of being "
                f"told to; killed"
            )
        if self.proc.returncode != 0:  # it died on its own, whether or not a sync noticed
            self._failed(self._dead())
        self._pump.join(READY_TIMEOUT_S)
        self._stderr.close()
        return [Fall(c.wall, c.before, c.after) for c in self.changes if c.after < c.before]


if __name__ == "__main__":
    watch(sys.argv[1], sys.argv[2], float(sys.argv[3]))
