"""A process that started the embedded PostgreSQL and is then killed hard (no finally, no
atexit) leaves no server behind: the watchdog stops it and removes its data directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit.pg.watchdog import postmaster_pid

OWNER = """
import json, sys
from labkit.pg import instance
with instance.server() as dsn:
    print(json.dumps({"dsn": dsn}), flush=True)
    sys.stdin.read()  # until killed
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.postgres
def test_a_hard_killed_owner_leaves_no_server_behind(monkeypatch) -> None:
    monkeypatch.delenv("LABKIT_PG_DSN", raising=False)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        dsn = json.loads(line)["dsn"]
        host = dsn.split("host=")[-1].split("&")[0]  # the server's socket folder: its PGDATA
        pgdata = Path(host)
        pid = postmaster_pid(pgdata)
        assert pid is not None and _alive(pid), dsn
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        end = time.monotonic() + 30
        while (_alive(pid) or pgdata.exists()) and time.monotonic() < end:
            time.sleep(0.1)
        assert not _alive(pid), "the server outlived its owner"
        assert not pgdata.exists(), "its data directory was left behind"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
