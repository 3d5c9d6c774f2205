"""A labkit module run as a child process that the parent may kill mid-work: the crash labs of
part two (`catalog.crashlab`, `designs.pipeline_crash`) and the real planner's (`remote.crash`)
start one, read what it prints line by line, and kill it (`Popen.kill()`: no cleanup, no
COMMIT; portable) at the moment they want, with a watchdog for a child that never gets there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from labkit.paths import REPO

Verdict = Literal["kill", "stop"] | None


@dataclass(frozen=True)
class ChildEnd:
    """How the child ended: killed at the reader's word or not, its exit code, and the last
    line it wrote to stderr (for the one-line error a caller raises)."""

    killed: bool
    returncode: int
    last_error: str


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment with this labkit first on PYTHONPATH (plus `extra`), so a
    `python -m labkit...` child imports the same labkit, installed or not."""
    pythonpath = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath), **extra}


def run_child(
    module: str, args: Sequence[str], on_line: Callable[[str], Verdict], *, timeout: float
) -> ChildEnd:
    """Run `python -m module *args` with this labkit importable and hand each line it prints
    to `on_line`, which answers "kill" (kill it now), "stop" (read no more; let it exit) or
    None. A child still running after `timeout` seconds is killed by a watchdog."""
    env = child_env()
    killed = False
    with subprocess.Popen(
        [sys.executable, "-m", module, *args],
        env=env,
        stdin=subprocess.PIPE,  # a child may wait on it; it closes when the parent is done
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
        assert stdin is not None and stdout is not None and stderr is not None  # all PIPE
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        try:
            for line in stdout:
                verdict = on_line(line)
                if verdict == "kill":
                    proc.kill()
                    killed = True
                if verdict is not None:
                    break
            stdin.close()
            proc.wait()
        finally:
            watchdog.cancel()
        last = (stderr.read().strip().splitlines() or ["no error output"])[-1]
    return ChildEnd(killed, proc.returncode, last)
