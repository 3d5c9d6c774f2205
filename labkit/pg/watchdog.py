"""Stops an embedded PostgreSQL server whose owner died without stopping it.

A kernel killed hard (SIGKILL, a crash, the machine's out-of-memory killer) runs neither its
`finally` blocks nor its atexit hooks, so the server it started would run on. `watch` starts
this module as a process of its own session beside the server; it polls its parent and, once
that is gone, shuts the server down (fast shutdown, then a kill) and removes its data directory.
It exits by itself when the server's data directory goes (the owner stopped the server).

Run as ``python -m labkit.pg.watchdog PARENT_PID PGDATA``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from labkit.killable import child_env

POLL_S = 0.5
SHUTDOWN_S = 10.0


def postmaster_pid(pgdata: Path) -> int | None:
    """The server's process id from `postmaster.pid`, or None if the server is not running."""
    try:
        first = (pgdata / "postmaster.pid").read_text(encoding="utf-8").split("\n", 1)[0]
        return int(first)
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (POSIX: signal 0 probes without sending)."""
    if os.name == "posix":
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return False


def stop_server(pgdata: Path, wait_s: float = SHUTDOWN_S) -> None:
    """Fast shutdown of the server in `pgdata` (SIGINT), a kill after `wait_s`, then its data
    directory removed. The watchdog runs on POSIX systems only (`instance.server`)."""
    pid = postmaster_pid(pgdata)
    if os.name == "posix" and pid is not None and alive(pid):
        os.kill(pid, signal.SIGINT)
        end = time.monotonic() + wait_s
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(pgdata, ignore_errors=True)


def watch(pgdata: Path) -> subprocess.Popen[bytes]:
    """Start the watchdog for the server in `pgdata`, owned by this process."""
    return subprocess.Popen(
        [sys.executable, "-m", "labkit.pg.watchdog", str(os.getpid()), str(pgdata)],
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a kill of the owner's process group leaves it standing
    )


def reap(dog: subprocess.Popen[bytes]) -> None:
    """After the owner stopped the server: the watchdog exits on its next poll; wait for it
    (a kill if it has not in a few polls, never an error on the owner's way out)."""
    try:
        dog.wait(timeout=4 * POLL_S)
    except subprocess.TimeoutExpired:
        dog.kill()
        dog.wait()


def main(argv: list[str]) -> int:
    parent, pgdata = int(argv[0]), Path(argv[1])
    while pgdata.exists():
        if os.getppid() != parent:  # the owner is gone: this process was handed to another
            stop_server(pgdata)
            return 0
        time.sleep(POLL_S)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
