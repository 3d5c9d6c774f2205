"""The walls around learner SQL in part three's exercises: the learner is its own session user
and cannot climb to the checker's superuser; every check leaves no role, schema or large object
behind; limits hold that the learner cannot lift; and failures of the server or of the check
itself are never blamed on the learner."""

from __future__ import annotations

import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from labkit import exercises as exs
from labkit.exercises import catalog_pg
from labkit.exercises.sandboxes import pg as pg_sandbox
from labkit.exercises.sandboxes import pg_walls as pw
from labkit.pg import instance as pg

pytestmark = pytest.mark.postgres

GUARDED = (
    "UPDATE naive_catalog SET version = :seen + 1, tools = :tools WHERE id = 1 AND version = :seen"
)
HORIZON = "SELECT pg_snapshot_xmin(pg_current_snapshot()) >= CAST(:xact AS xid8)"
# set_config runs while the statement runs, after its own rights were checked; ts_stat then
# plans and runs its SQL text as whatever role is current by then
CLIMB = "left(set_config('role', 'postgres', false), 0) || 'ABCD'"
LEFT_SQL = (
    "SELECT (SELECT count(*) FROM pg_roles WHERE rolname = ANY(%(roles)s)),"
    " (SELECT count(*) FROM pg_namespace WHERE nspname = ANY(%(schemas)s)),"
    " (SELECT count(*) FROM pg_largeobject_metadata AS m LEFT JOIN pg_roles AS r"
    "  ON r.oid = m.lomowner WHERE r.rolname IS NULL OR r.rolname = ANY(%(roles)s))"
)


@pytest.fixture
def on_server(quiet_pg_dsn: str) -> Iterator[str]:
    """The checks run on a server no other test run shares (see conftest's quiet_pg_dsn)."""
    pg_sandbox.use_server(quiet_pg_dsn)
    yield quiet_pg_dsn
    pg_sandbox.use_server(None)


@pytest.fixture
def made(monkeypatch) -> dict[str, list[str]]:
    """The roles and schemas the checks in a test make, recorded as they are made."""
    seen: dict[str, list[str]] = {"roles": [], "schemas": []}
    make_learner = pw.make_learner

    def recording_learner(conn: Any, schema: str, *args: Any, **kw: Any) -> pw.Learner:
        learner = make_learner(conn, schema, *args, **kw)
        seen["roles"] += learner.roles()
        seen["schemas"].append(schema)
        return learner

    monkeypatch.setattr(pw, "make_learner", recording_learner)
    return seen


def left_behind(dsn: str, made: dict[str, list[str]]) -> tuple[int, int, int]:
    """(roles, schemas, large objects) still on the server of those the checks made."""
    assert made["roles"] and made["schemas"], "the check made no role or schema"
    with pg.connect(dsn, autocommit=True) as conn:
        return tuple(conn.execute(LEFT_SQL, made).fetchone())


@pytest.fixture
def learner_conn(pg_dsn: str) -> Iterator[Any]:
    """A connection as a check's learner role (with a writer role), as the checks make it."""
    with pg_sandbox.learner_schema(pg_dsn, lambda c: None, ("select",), writers=True) as (
        schema,
        who,
    ):
        if who is None:
            pytest.skip("the server's user is not a superuser, so the check makes no role")
        with pw.connect_as(pg_dsn, who, options=pg_sandbox.learner_options(schema, True)) as conn:
            conn.autocommit = True
            yield conn


# --- finding 1: the learner is the session user and cannot climb ------------------------------


@pytest.mark.parametrize(
    "climb",
    [
        "SELECT set_config('role', 'postgres', false)",
        "SET ROLE postgres",
        "RESET ROLE",
        "SET SESSION AUTHORIZATION postgres",
        "SET SESSION AUTHORIZATION DEFAULT",
        "SELECT count(*) FROM ts_stat('SELECT to_tsvector(rolname) FROM pg_authid', " + CLIMB + ")",
    ],
)
def test_no_statement_lets_the_learner_climb_to_the_checkers_role(
    learner_conn: Any, climb: str
) -> None:
    """Whatever the learner's statement tries, the session stays the learner's: no superuser,
    no pg_authid, no pg_read_file afterwards."""
    import psycopg

    try:
        learner_conn.execute(climb)
    except psycopg.errors.InsufficientPrivilege:
        pass
    user, session, sup = learner_conn.execute(
        "SELECT current_user, session_user, (SELECT rolsuper FROM pg_roles"
        " WHERE rolname = current_user)"
    ).fetchone()
    assert user == session and user.startswith(pw.ROLE_PREFIX) and sup is False
    for forbidden in ("SELECT count(*) FROM pg_authid", "SELECT pg_read_file('/etc/hostname')"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            learner_conn.execute(forbidden)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT CAST((SELECT string_agg(word, ',') FROM ts_stat("
        "'SELECT to_tsvector(rolname) FROM pg_authid', " + CLIMB + ")) AS int) > 0"
        " AND CAST(:xact AS xid8) IS NOT NULL",
        "SELECT CAST((SELECT string_agg(word, ',') FROM ts_stat("
        "'SELECT to_tsvector(pg_read_file(''/etc/hostname''))', " + CLIMB + ")) AS int) > 0"
        " AND CAST(:xact AS xid8) IS NOT NULL",
        "SELECT set_config('role', 'postgres', false) <> '' AND " + HORIZON.removeprefix("SELECT "),
    ],
)
def test_a_condition_that_climbs_is_refused_and_shows_nothing_of_the_server(
    on_server: str, sql: str
) -> None:
    fb = exs.condition_ex.check(sql)
    assert fb.status == "incorrect" and "permission denied to set role" in fb.message, fb
    assert "postgres," not in fb.message and "pg_" not in fb.message.split("role")[-1]


def test_the_reviewers_escalating_guarded_write_is_refused_and_writes_no_file(
    on_server: str,
) -> None:
    """A correct guard wrapped around a CTE that climbs to the superuser and exports a large
    object to the server's disk: judged wrong, and no file appears."""
    target = os.path.join(tempfile.gettempdir(), f"labkit_pwned_{uuid.uuid4().hex[:8]}")
    payload = (
        "SELECT to_tsvector(lo_from_bytea(424242, ''\\x41'')::text) UNION ALL "
        f"SELECT to_tsvector(lo_export(424242, ''{target}'')::text)"
    )
    sql = (
        f"WITH x AS (SELECT * FROM ts_stat('{payload}', {CLIMB})) "
        + GUARDED
        + " AND (SELECT count(*) FROM x) >= 0"
    )
    try:
        fb = exs.guarded_write_ex.check(sql)
        assert fb.status == "incorrect" and "permission denied to set role" in fb.message, fb
        assert not os.path.exists(target)
    finally:
        if os.path.exists(target):
            os.remove(target)


# --- findings 2 and 8: nothing left after a check; no server-wide rights ----------------------

LO_WRAP = "WITH j AS (SELECT lo_from_bytea(0, decode(repeat('ab', 1000), 'hex'))) "
LO_GUARD = " AND (SELECT count(*) FROM j) >= 0"


@pytest.mark.parametrize(
    ("outcome", "exercise", "sql"),
    [
        ("passed", "guarded_write_ex", LO_WRAP + GUARDED + LO_GUARD),
        (
            "judged wrong",
            "guarded_write_ex",
            LO_WRAP + "UPDATE naive_catalog SET version = :seen + 1, tools = :tools"
            " WHERE id = 1" + LO_GUARD,
        ),
        (  # longer than a race's statement may run: the first trial is stopped
            "timed out",
            "guarded_write_ex",
            LO_WRAP
            + GUARDED
            + LO_GUARD
            + f" AND pg_sleep({catalog_pg.RACE_STATEMENT_MS // 1000 + 4}) IS NOT NULL",
        ),
        ("killed", "guarded_write_ex", LO_WRAP + GUARDED + LO_GUARD),
        ("passed", "condition_ex", HORIZON),
        ("timed out", "condition_ex", "SELECT pg_sleep(5) IS NULL AND " + HORIZON[7:]),
    ],
)
def test_no_role_schema_or_large_object_is_left_after_a_check(
    on_server: str, made: dict[str, list[str]], monkeypatch, outcome: str, exercise: str, sql: str
) -> None:
    if outcome == "killed":
        real = pg_sandbox.run_learner

        def run(conn: Any, text: str, params: Any) -> Any:
            cur = real(conn, text, params)
            conn.commit()
            os.kill(os.getpid(), signal.SIGKILL)
            return cur

        monkeypatch.setattr(pg_sandbox, "run_learner", run)
        with pytest.raises(pg_sandbox.CheckFailed, match="not because of your statement"):
            getattr(exs, exercise).check(sql)
    else:
        fb = getattr(exs, exercise).check(sql)
        assert fb.passed is (outcome == "passed"), fb
        if outcome == "timed out":
            assert "so PostgreSQL stopped it" in fb.message, fb
    assert left_behind(on_server, made) == (0, 0, 0)


def test_a_check_drops_the_expired_roles_of_checks_that_never_cleaned_up(on_server: str) -> None:
    from psycopg import sql

    stale = f"{pw.ROLE_PREFIX}{uuid.uuid4().hex[:12]}"
    with pg.connect(on_server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN VALID UNTIL '2000-01-01'").format(sql.Identifier(stale))
        )
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(stale)))
        conn.execute("SELECT lo_from_bytea(0, '\\x41')")
        conn.execute("RESET ROLE")
    assert exs.guarded_write_ex.check(GUARDED).passed
    with pg.connect(on_server, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (stale,))
        assert left.fetchone()[0] == 0


def test_the_learner_role_reads_its_checks_writers_but_no_other_session(
    pg_dsn: str, learner_conn: Any
) -> None:
    """No pg_read_all_stats: the learner sees the query text of its own check's writer role
    (a wrong answer may look at sessions), not of the checker's superuser sessions."""
    with pg.connect(pg_dsn, autocommit=True) as checker:
        checker.execute("SELECT 'the checker''s own query'")
        mine = checker.info.backend_pid
        seen = learner_conn.execute(
            "SELECT query, pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')"
            " FROM pg_stat_activity WHERE pid = %s",
            (mine,),
        ).fetchone()
    assert seen == ("<insufficient privilege>", False)


# --- finding 3: limits the learner cannot lift -------------------------------------------------


def test_the_temp_file_limit_is_set_and_cannot_be_raised(learner_conn: Any) -> None:
    import psycopg

    setting = learner_conn.execute("SHOW temp_file_limit").fetchone()[0]
    assert setting == pw.ROLE_SETTINGS["temp_file_limit"]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        learner_conn.execute("SET temp_file_limit = '100GB'")
    assert learner_conn.execute("SHOW statement_timeout").fetchone()[0] == "2s"


def test_a_query_that_grows_the_servers_memory_is_stopped(on_server: str) -> None:
    with pg_sandbox.learner_schema(on_server, lambda c: None, ("select",)) as (schema, who):
        if who is None:
            pytest.skip("the server's user is not a superuser, so the check makes no role")
        with pw.connect_as(
            on_server, who, options=pg_sandbox.learner_options(schema, True)
        ) as conn:
            if not pw.bound_backend(conn, who):
                pytest.skip("the server is not on this machine or its processes are not ours")
    # 500 MB in one value: under PostgreSQL's own 1 GB cap per value, over the backend's cap
    big = pw.BACKEND_MEMORY_BYTES + 100 * 2**20
    fb = exs.condition_ex.check(
        f"SELECT length(repeat('x', {big})) > 0 AND CAST(:xact AS xid8) IS NOT NULL"
    )
    assert fb.status == "incorrect" and "more memory than the check allows" in fb.message, fb


# --- finding 4: a server or a check that fails is not the learner's mistake --------------------


def test_a_server_that_does_not_answer_is_a_labkit_error_not_feedback() -> None:
    pg_sandbox.use_server(
        f"host={tempfile.gettempdir()}/labkit-no-server-{uuid.uuid4().hex} dbname=x"
    )
    try:
        with pytest.raises(pg.PgUnavailable):
            exs.condition_ex.check(HORIZON)
        with pytest.raises(pg.PgUnavailable):
            exs.guarded_write_ex.check(GUARDED)
    finally:
        pg_sandbox.use_server(None)


def test_a_learner_connection_that_breaks_while_the_server_is_gone_is_unavailable(
    on_server: str, monkeypatch
) -> None:
    """The learner's session ends under it (here: ended from the server's side) and the server
    then no longer answers: a labkit error naming what to do, for both kinds of check."""

    def ended(conn: Any, sql: str, params: Any) -> Any:
        return conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    def gone(dsn: str, timeout: int = pg.CONNECT_TIMEOUT_S) -> str:
        raise pg.PgUnavailable("PostgreSQL at x refused the connection: no such socket")

    monkeypatch.setattr(pg_sandbox, "run_learner", ended)
    monkeypatch.setattr(pg, "probe", gone)
    with pytest.raises(pg.PgUnavailable, match="stopped answering during the check"):
        exs.condition_ex.check(HORIZON)
    with pytest.raises(pg.PgUnavailable, match="run the check again"):
        exs.guarded_write_ex.check(GUARDED)


def test_a_check_process_killed_from_outside_is_not_the_learners_fault(
    on_server: str, monkeypatch
) -> None:
    def killed(conn: Any, sql: str, params: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(pg_sandbox, "run_learner", killed)
    with pytest.raises(pg_sandbox.CheckFailed, match="not because of your query"):
        exs.condition_ex.check(HORIZON)


@pytest.mark.parametrize(
    ("exercise", "sql"),
    [
        (
            "condition_ex",
            "SELECT pg_terminate_backend(pg_backend_pid()) AND CAST(:xact AS xid8) IS NOT NULL",
        ),
        (
            "guarded_write_ex",
            "WITH k AS (SELECT pg_terminate_backend(pg_backend_pid()) AS t) " + GUARDED + " AND"
            " (SELECT t FROM k)",
        ),
    ],
)
def test_an_answer_that_ends_its_own_session_is_judged_wrong(
    on_server: str, exercise: str, sql: str
) -> None:
    fb = getattr(exs, exercise).check(sql)
    assert fb.status == "incorrect" and "ended while it ran" in fb.message, fb


def test_a_condition_that_ends_the_checks_writers_is_judged_wrong(on_server: str) -> None:
    fb = exs.condition_ex.check(
        "SELECT (SELECT count(pg_terminate_backend(pid, 1000)) FROM pg_stat_activity"
        " WHERE usename ~ '_w$') >= 0 AND " + HORIZON[7:]
    )
    assert fb.status == "incorrect" and "ended sessions the check had opened" in fb.message, fb


# --- finding 5: a write that changes the key ---------------------------------------------------

MOVE_TENANT = (
    "UPDATE tenant_catalog SET tenant = tenant || 'x', version = :seen + 1, tools = :tools"
    " WHERE tenant = :tenant AND version = :seen"
)


def test_a_write_that_changes_the_tenant_is_refused(on_server: str) -> None:
    fb = exs.tenant_write_ex.check(MOVE_TENANT)
    assert fb.status == "incorrect" and "does not open" in fb.message, fb


def test_without_column_grants_a_moved_tenant_is_still_feedback(
    on_server: str, monkeypatch
) -> None:
    """Where the check may make no role (no column grants), the row that vanished is named."""
    monkeypatch.setattr(pw, "may_make_roles", lambda conn: False)
    fb = exs.tenant_write_ex.check(MOVE_TENANT)
    assert fb.status == "incorrect" and "tenant 'acme' no longer exists" in fb.message, fb


# --- finding 6 and 7: timing margins and the condition check's time budget ---------------------


def test_waiters_outlast_the_holders_longest_hold() -> None:
    """In the held race a waiter waits at most until the holder commits, RACE_WAIT_S after it
    started; its lock and statement time limits leave at least as much again for a loaded
    machine."""
    assert pg_sandbox.LOCK_MS / 1000 >= 2 * catalog_pg.RACE_WAIT_S
    assert catalog_pg.RACE_STATEMENT_MS / 1000 >= 2 * catalog_pg.RACE_WAIT_S
    assert f"statement_timeout={catalog_pg.RACE_STATEMENT_MS}" in pg_sandbox.learner_options(
        "s", False, catalog_pg.RACE_STATEMENT_MS
    )


def test_a_holder_that_holds_longer_than_a_statement_may_run_still_passes(
    on_server: str, monkeypatch
) -> None:
    """The held race's holder keeps its row past STATEMENT_MS (the check never sees the others
    waiting, as on a loaded machine): the waiting writers are not stopped, and a correct
    answer passes."""
    monkeypatch.setattr(catalog_pg, "WAITING_SQL", "SELECT 0 * cardinality(CAST(:pids AS int[]))")
    monkeypatch.setattr(catalog_pg, "RACE_WAIT_S", pg_sandbox.STATEMENT_MS / 1000 + 0.5)
    fb = exs.guarded_write_ex.check(GUARDED)
    assert fb.passed, fb


def test_the_condition_check_stops_when_its_queries_use_up_their_budget(
    on_server: str, monkeypatch
) -> None:
    """Each run stays under the per-statement limit, but together they exceed the budget."""
    monkeypatch.setattr(pg_sandbox, "CHECK_MS", 2_500)
    fb = exs.condition_ex.check("SELECT pg_sleep(0.9) IS NOT NULL AND " + HORIZON[7:])
    assert fb.status == "incorrect" and "may take together" in fb.message, fb


# --- finding 9: one statement, whatever quoting hides a ';' ------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT E'\\'' ; DROP TABLE conversations; SELECT CAST(:xact AS xid8) IS NOT NULL",
        "SELECT $q$ ' $q$ ; DROP TABLE conversations; SELECT CAST(:xact AS xid8) IS NOT NULL",
    ],
)
def test_quoting_cannot_smuggle_a_second_statement(on_server: str, sql: str) -> None:
    fb = exs.condition_ex.check(sql)
    assert fb.status == "incorrect", fb
    assert "one statement" in fb.message or "single statement" in fb.message, fb


def test_the_learners_statement_is_prepared_so_one_command_only(
    pg_dsn: str, learner_conn: Any
) -> None:
    import psycopg

    with pytest.raises(psycopg.errors.SyntaxError, match="multiple commands") as caught:
        pg_sandbox.run_learner(learner_conn, "SELECT 1; SELECT 2", {})
    assert pg_sandbox.explain_pg_error(caught.value, "it").startswith("it must be one statement")


def test_a_server_that_refuses_the_checks_login_says_what_to_change(monkeypatch) -> None:
    """A server whose pg_hba.conf refuses password logins of new roles: one line naming the
    role and the fix, not feedback on the answer."""
    import psycopg

    def refused(*args: Any, **kw: Any) -> Any:
        raise psycopg.OperationalError(
            f'FATAL: password authentication failed for user "{kw.get("user")}"'
        )

    learner = pw.Learner(f"{pw.ROLE_PREFIX}x", None, "secret", None)
    monkeypatch.setattr(psycopg, "connect", refused)
    with pytest.raises(pw.LearnerLoginRefused, match=r"labkit_learner_x .*pg_hba\.conf"):
        pw.connect_as("host=127.0.0.1 port=1 dbname=x", learner)
