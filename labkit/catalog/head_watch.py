"""An independent reader in a process of its own: it polls a store's head for as long as it
runs and records every fall (a head lower than the one it read just before). `labkit.remote`
runs one beside each loop; it lives here, light to import, so it starts in a blink.

Run as ``python -m labkit.catalog.head_watch KIND TARGET POLL_S``: KIND is ``catalog`` (a safe
design's catalog log) or ``mirror`` (an unguarded design's head row, `labkit.catalog.head_row`),
TARGET a SQLite file, or
``-`` for PostgreSQL with the DSN in the environment variable `DSN_VARIABLE` (kept off the
command line). It prints ``ready`` and the head it read first, then one JSON line
``[wall, before, after]`` per change of the head (a fall is one whose `after` is lower), and on
end of input ``done POLLS``. A ``sync`` line on its input is answered ``synced HEAD`` after the
next poll that began once the line arrived (`ReaderProcess.sync`: the writer's proof that the
reader has read what it wrote). `ReaderProcess` starts and stops it.
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

import labkit.catalog.head_row as head_row
import labkit.catalog.versions as catalog
from labkit.db import connect_readonly

KINDS = ("catalog", "mirror")
DSN_VARIABLE = "LABKIT_READER_DSN"
READY_TIMEOUT_S = 60.0
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder that holds labkit/


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

        return psycopg.connect(os.environ[DSN_VARIABLE], autocommit=True)
    return connect_readonly(target)


def watch(kind: str, target: str, poll: float) -> None:
    """The reader process's body: poll until stdin closes, printing each fall as it happens."""
    conn = _open(target)
    head = catalog.head if kind == "catalog" else (lambda c: head_row.read(c)[0])
    stop, asked = threading.Event(), threading.Event()

    def listen() -> None:
        for line in sys.stdin:
            if line.strip() == "sync":
                asked.set()
        stop.set()

    threading.Thread(target=listen, daemon=True).start()
    previous, polls = head(conn), 0
    print(f"ready {previous}", flush=True)
    while not stop.is_set():
        answer = asked.is_set()  # checked before the read: the read sees what was written
        if answer:
            asked.clear()
        now = head(conn)
        polls += 1
        if now != previous:
            print(json.dumps([time.time(), previous, now]), flush=True)
        if answer:
            print(f"synced {now}", flush=True)
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
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_PACKAGE_PARENT), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        if dsn is not None:
            env[DSN_VARIABLE] = dsn
        self.target = "-" if dsn is not None else str(store)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labkit.catalog.head_watch", kind, self.target, repr(poll)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.polls = 0
        self.first = 0
        self.changes: list[Change] = []
        self._synced: queue.Queue[int | None] = queue.Queue()
        watchdog = threading.Timer(READY_TIMEOUT_S, self.proc.kill)
        watchdog.start()
        try:
            first = self.proc.stdout.readline().strip()
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
        for line in self.proc.stdout:
            if line.startswith("done "):
                self.polls = int(line.split()[1])
            elif line.startswith("synced "):
                self._synced.put(int(line.split()[1]))
            elif line.strip():
                self.changes.append(Change(*json.loads(line)))
        self._synced.put(None)  # the reader is gone: no sync will be answered

    def sync(self, timeout: float = READY_TIMEOUT_S) -> int:
        """Wait until the reader has polled once after this call and return the head it read
        then: whatever was written before the call, the reader has seen."""
        try:
            self.proc.stdin.write("sync\n")
            self.proc.stdin.flush()
            head = self._synced.get(timeout=timeout)
        except (OSError, queue.Empty):
            head = None
        if head is None:
            raise RuntimeError(
                f"reader process on {self.target} did not answer a sync within {timeout:g} s"
            )
        return head

    def stop(self) -> list[Fall]:
        """End the reader (its input closes) and return every fall it recorded."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass  # it died already; what it printed is in `changes`
        try:
            self.proc.wait(timeout=READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._pump.join(READY_TIMEOUT_S)
        self.proc.stderr.close()
        return [Fall(c.wall, c.before, c.after) for c in self.changes if c.after < c.before]


if __name__ == "__main__":
    watch(sys.argv[1], sys.argv[2], float(sys.argv[3]))
