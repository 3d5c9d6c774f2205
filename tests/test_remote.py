"""labkit.remote: the planner service on loopback and the designs run against it for real.

Latencies are milliseconds so each run takes about a second; faults are chosen so that what a
test expects is certain: `inverted` and `retry_after_commit` strike every loop once at a
seeded base (span 1: at version 1), `duplicate_rate=1.0` sends every answer twice.
"""

from __future__ import annotations

import _thread
import asyncio
import json
import os
import re
import signal
import socket
import threading

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labkit.catalog.versions as catalog
from labkit.db import connect
from labkit.designs.simulator import COLUMNS, simulate
from labkit.remote import PlannerUnreachable, run, serve, set_faults, status
from labkit.remote.control import call, check_loopback, faults
from labkit.remote.faults import FaultSwitch
from labkit.remote.head_watch import ReaderFailure, ReaderProcess
from labkit.remote.inbox import Inbox
from labkit.remote.wire import MAX_ANSWER_BYTES, AnswerError, parse_answer

ALL_FAULTS = ["inverted", "duplicate", "stale_body", "retry_after_commit", "stall"]
KNOBS = {"latency": 0.02, "duplicate_rate": 1.0, "span": 1, "stall_time": 0.1}
SAFE = [("ballot", 1), ("fenced", 3), ("cas", 1), ("pipelined", 3)]


@pytest.fixture(scope="module")
def faulty() -> str:
    with serve(faults=ALL_FAULTS, seed=4, **KNOBS) as url:
        yield url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("stop", [KeyError, KeyboardInterrupt])
def test_serve_answers_while_open_and_stops_on_exit_even_when_the_body_raises(stop) -> None:
    with pytest.raises(stop), serve() as url:
        assert status(url)["requests"] == 0
        raise stop("the notebook cell failed or was interrupted")
    with pytest.raises(PlannerUnreachable, match=url):
        status(url)


def test_faults_are_switched_while_the_service_runs_and_refused_when_unknown() -> None:
    with serve(faults=["duplicate"], seed=1) as url:
        assert faults(url) == {"faults": ["duplicate"], "seed": 1}
        assert set_faults(url, ["stall", "inverted"], seed=7) == {
            "faults": ["inverted", "stall"],
            "seed": 7,
        }
        with pytest.raises(ValueError, match="unknown fault"):
            set_faults(url, ["gremlins"])
        with pytest.raises(ValueError, match="loop fault"):
            set_faults(url, ["crash"])
        assert faults(url)["faults"] == ["inverted", "stall"]


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        ("/loops/x", [1], "JSON object"),
        ("/loops/x", {"callback": "http://example.com:80/answer"}, "loopback only"),
        ("/loops/x", {"callback": "http://127.0.0.1:9/answer", "seed": "7"}, "'seed'"),
        ("/plan", {"loop": "x", "request_id": "1"}, "'request_id': expected an integer, got '1'"),
        ("/plan", {"loop": "", "request_id": 1}, "'loop'"),
    ],
)
def test_the_service_refuses_bad_requests_in_one_line(path: str, body, says: str) -> None:
    with serve() as url:
        with pytest.raises(ValueError, match=says) as info:
            call(url, path, body, method="POST")
        assert "\n" not in str(info.value)
        assert status(url)["requests"] == 0


def test_the_fault_switch_is_seeded_and_strikes_each_loop_once() -> None:
    a, b = FaultSwitch(["inverted", "stall"], seed=3), FaultSwitch(["inverted", "stall"], seed=3)
    assert a.offsets == b.offsets
    target = a.target("inverted", "x")
    assert not a.take("inverted", target - 1, "x")
    assert a.take("inverted", target, "x") and not a.take("inverted", target + 1, "x")
    assert a.take("inverted", target, "y")  # another loop meets the fault too
    a.arm(["inverted"], seed=3, heads={"x": 10})
    assert a.target("inverted", "x") >= 11 and a.take("inverted", a.target("inverted", "x"), "x")


@pytest.mark.parametrize(("design", "window"), SAFE)
def test_safe_designs_never_fall_and_build_each_version_on_the_one_before(
    faulty: str, tmp_path, design: str, window: int
) -> None:
    store = tmp_path / "store.db"
    result = run(design, faulty, ticks=8, window=window, store=store, name=f"safe-{design}")
    trace = result.trace
    assert set(COLUMNS) | {"wall"} <= set(trace.columns)
    struck = set(trace["fault"].dropna())
    assert {"inverted", "duplicate"} <= struck  # the faults really hit this run
    assert result.reader_falls == [] and result.reader_polls > 0
    assert result.summary.rewinds == 0 and result.summary.overwrites == 0
    assert result.summary.kept == result.summary.commits == 8
    assert int(trace["committed"].fillna(False).astype(bool).sum()) == 8
    if design != "cas":  # the ballot designs' store is the catalog log itself
        conn = connect(store)
        assert catalog.verify(conn) == 8  # contiguous, each version based on the one before
        conn.close()


@pytest.mark.parametrize("design", ["callback", "lww"])
def test_unguarded_designs_show_falls_to_an_independent_reader(
    faulty: str, tmp_path, design: str
) -> None:
    result = run(design, faulty, ticks=10, store=tmp_path / "store.db", name=f"bad-{design}")
    assert result.reader_falls, "the reader process saw no fall"
    assert all(f.after < f.before for f in result.reader_falls)
    assert result.summary.rewinds >= 1
    assert result.reader_failure is None and result.trace["event"].iloc[-1] != "truncated"


def test_run_summary_has_the_simulators_fields(faulty: str) -> None:
    real = run("ballot", faulty, ticks=3, name="fields").summary
    simulated = simulate("ballot", ticks=3)
    assert set(real.as_dict()) >= {
        "commits",
        "kept",
        "rejects",
        "throughput",
        "latency_p50",
        "latency_p95",
        "wasted_per_commit",
        "rewinds",
    }
    assert set(simulated.columns) <= set(run("cas", faulty, ticks=2, name="cols").trace.columns)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", r"expected an object, got \[1, 2\]"),
        (json.dumps({"request_id": "1"}).encode(), "'request_id': expected an integer, got '1'"),
        (
            json.dumps({"request_id": True, "ballot_id": 1}).encode(),
            "'request_id': expected an integer, got True",
        ),
        (
            json.dumps(
                {
                    "request_id": 1,
                    "ballot_id": 1,
                    "observed_watermark": 0,
                    "base_version": 0,
                    "tools": "x",
                }
            ).encode(),
            "'tools': expected a list, got 'x'",
        ),
        (
            json.dumps(
                {
                    "request_id": 1,
                    "ballot_id": 1,
                    "observed_watermark": 0,
                    "base_version": 0,
                    "tools": [],
                    "updated_at": "noon",
                }
            ).encode(),
            "'updated_at'",
        ),
        (b'{"request_id": NaN}', "not JSON"),
        (
            b'{"request_id": 1, "ballot_id": 1, "observed_watermark": 0, "base_version": 0,'
            b' "tools": [1e400]}',
            r"'tools\[0\]': a number beyond a 64-bit float's range, got inf",
        ),
        (b"[" + b"0," * MAX_ANSWER_BYTES + b"0]", "limit"),
    ],
)
def test_a_bad_answer_is_refused_in_one_line(raw: bytes, says: str) -> None:
    with pytest.raises(AnswerError, match=says) as info:
        parse_answer(raw)
    assert "\n" not in str(info.value)


def test_the_inbox_refuses_bad_answers_and_everything_after_the_loop_closed() -> None:
    good = {
        "request_id": 1,
        "ballot_id": 1,
        "observed_watermark": 0,
        "base_version": 0,
        "tools": ["a"],
        "updated_at": 1.0,
    }

    async def scenario() -> tuple[list[int], list[tuple]]:
        events: asyncio.Queue = asyncio.Queue()
        inbox = Inbox(events)
        url = await inbox.start()
        codes = []
        async with aiohttp.ClientSession() as session:
            for body in (
                b"{",
                json.dumps({**good, "base_version": "0"}).encode(),
                b"x" * (MAX_ANSWER_BYTES + 10),
                json.dumps(good).encode(),
            ):
                async with session.post(url, data=body) as reply:
                    codes.append(reply.status)
            inbox.close()
            async with session.post(url, data=json.dumps(good).encode()) as reply:
                codes.append(reply.status)
                assert "loop is closed" in await reply.text()
        await inbox.stop()
        return codes, [events.get_nowait() for _ in range(events.qsize())]

    codes, events = asyncio.run(scenario())
    assert codes == [400, 400, 413, 204, 410]
    assert [e[0] for e in events] == ["refused", "refused", "refused", "deliver"]


def test_an_answer_after_the_loop_closed_writes_nothing(tmp_path) -> None:
    # a stall answer lands while the closed loop still listens (drain): refused, not applied
    with serve(faults=["stall"], latency=0.01, span=1, stall_time=0.3) as url:
        store = tmp_path / "store.db"
        result = run("ballot", url, ticks=3, store=store, drain=0.6, name="closing")
        assert any("loop is closed" in line for line in result.refused)
        conn = connect(store)
        assert catalog.verify(conn) == 3
        conn.close()


def test_an_unreachable_planner_is_one_line_naming_its_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(PlannerUnreachable) as info:
        run("ballot", url, ticks=1, connect_timeout=0.5)
    assert url in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com:80",
        "https://127.0.0.1:5",
        "127.0.0.1:8",
        "http://127.0.0.1:80\n",  # reached aiohttp's header check
        "http://u:p@127.0.0.1:80",  # passed, then failed to resolve
        "http://127.0.0.1:80/x",  # passed, the endpoints appended after the path
        "http://127.0.0.1:80?y",
        "http://127.0.0.1:80#z",
        "http://127.0.0.1:80#",
        "http://127.0.0.1:80?",
        "HTTP://127.0.0.1:80",
        "http://127.0.0.1:0",
    ],
)
def test_only_loopback_urls_are_called(url: str) -> None:
    with pytest.raises(ValueError, match="loopback only"):
        check_loopback(url)


def test_a_loopback_url_with_a_trailing_slash_is_taken() -> None:
    assert check_loopback("http://127.0.0.1:80/") == "http://127.0.0.1:80"


@pytest.mark.postgres
@pytest.mark.parametrize("design", ["ballot", "callback"])
def test_on_postgresql_the_ballot_never_falls_and_the_callback_does(
    faulty: str, pg_dsn: str, design: str
) -> None:
    from psycopg.conninfo import make_conninfo

    from labkit.pg import instance as pg

    with pg.scratch_schema(pg_dsn, prefix="remote") as schema:
        dsn = make_conninfo(pg_dsn, options=pg.search_path_option(schema))
        result = run(design, faulty, ticks=10, dsn=dsn, name=f"pg-{design}")
        if design == "callback":
            assert result.reader_falls, "the reader process saw no fall on PostgreSQL"
            return
        assert result.reader_falls == [] and result.summary.kept == 10
        with pg.connect(dsn) as conn:
            assert catalog.verify(conn) == 10


def test_an_interrupted_run_stops_cleanly_and_keeps_its_commits(tmp_path) -> None:
    """Ctrl-C in the caller's thread while the loop runs: the loop stops at once (a
    `truncated` row would be its last) and what it committed stays, contiguous."""
    store = tmp_path / "store.db"
    pressed = threading.Event()

    def press_after_a_commit(row: dict) -> None:  # not on a timer: a slow start sends nothing
        if row["committed"] is True and not pressed.is_set():
            pressed.set()
            _thread.interrupt_main()

    with serve(latency=0.01) as url:
        try:
            run(
                "ballot",
                url,
                ticks=10**6,
                store=store,
                name="interrupted",
                progress=press_after_a_commit,
            )
        except KeyboardInterrupt:
            pass
        else:
            # SIGINT is Python's here: tests/conftest.py puts it back after any test
            pytest.fail(f"the run ended without the interrupt (pressed: {pressed.is_set()})")
        assert pressed.is_set() and status(url)["requests"] > 0
    conn = connect(store)
    try:
        assert catalog.verify(conn) >= 1
    finally:
        conn.close()


def test_the_service_draws_what_the_simulator_draws_for_the_same_seed(tmp_path) -> None:
    """Same seed, same knobs: each request meets the same host, and a targeted fault strikes
    the same base version, in the simulator and on the real service."""
    ticks, seed = 8, 3
    sim = simulate("ballot", ["stall"], seed, ticks=ticks, latency=1.0)
    with serve(faults=["stall"], seed=seed, latency=0.01, span=ticks - 3) as url:
        real = run("ballot", url, ticks=ticks, seed=seed, store=tmp_path / "s.db").trace

    def sends(trace):
        rows = trace[trace["event"] == "send"]
        return rows.set_index("request_id")

    sim_sends, real_sends = sends(sim), sends(real)
    stalled = sim_sends[sim_sends["fault"] == "stall"]["base_version"].tolist()
    assert stalled == real_sends[real_sends["fault"] == "stall"]["base_version"].tolist()
    first = [r for r in sim_sends.index if r in real_sends.index][:4]
    assert len(first) == 4
    assert sim_sends.loc[first, "host"].tolist() == real_sends.loc[first, "host"].tolist()


@pytest.mark.parametrize("name", ["a/b", "", "x" * 101, "sp ace"])
def test_a_loop_name_that_is_no_url_segment_is_refused_before_any_call(name: str) -> None:
    with pytest.raises(ValueError, match="loop name"):
        run("ballot", f"http://127.0.0.1:{_free_port()}", ticks=1, name=name)


@pytest.mark.parametrize(
    ("knobs", "says"),
    [
        ({"ticks": 0}, "ticks"),
        ({"ticks": 2.5}, "ticks"),
        ({"window": 0}, "window"),
        ({"deadline": 0}, "deadline"),
        ({"timeout": -1}, "timeout"),
    ],
)
def test_bad_run_knobs_are_refused_before_any_call(knobs: dict, says: str) -> None:
    args = {"ticks": 1, **knobs}
    with pytest.raises((TypeError, ValueError), match=says):
        run("ballot", f"http://127.0.0.1:{_free_port()}", **args)


def test_a_fault_switched_on_mid_run_strikes_that_run(tmp_path) -> None:
    """The service starts clean; after the loop's third commit the faults are switched on
    from outside, and they strike the same run above the head it had then."""
    switched: list[int] = []

    def switch_after_three(row: dict) -> None:
        if row["committed"] and not switched and row["head_version"] >= 3:
            switched.append(int(row["head_version"]))
            set_faults(url, ["inverted", "retry_after_commit"], seed=2)

    with serve(latency=0.02, span=1) as url:
        result = run(
            "callback",
            url,
            ticks=12,
            store=tmp_path / "s.db",
            name="switched",
            progress=switch_after_three,
        )
    sends = result.trace[result.trace["event"] == "send"]
    struck = sends[sends["fault"].notna()]
    assert switched and not struck.empty
    assert (struck["base_version"] >= switched[0]).all()  # none before the switch
    assert result.summary.rewinds >= 1


def test_the_reader_process_records_each_fall_of_a_head_row(tmp_path) -> None:
    import labkit.remote.head_row as head_row
    from labkit.remote.head_watch import ReaderProcess

    store = tmp_path / "head.db"
    conn = connect(store)
    head_row.create(conn, 0, "h0")
    reader = ReaderProcess("mirror", store, poll=0.001)
    try:
        for version in (1, 2, 5, 3, 4, 2):
            head_row.publish(conn, version, f"h{version}")
            assert reader.sync() == version  # it polled after the write, however late
    finally:
        falls = reader.stop()
        conn.close()
    assert [(f.before, f.after) for f in falls] == [(5, 3), (4, 2)]
    assert reader.polls >= 6


def test_a_reader_process_that_died_says_so_when_asked_to_sync(tmp_path) -> None:
    import labkit.remote.head_row as head_row
    from labkit.remote.head_watch import ReaderProcess

    store = tmp_path / "head.db"
    conn = connect(store)
    head_row.create(conn, 0, "h0")
    reader = ReaderProcess("mirror", store, poll=0.001)
    reader.proc.kill()
    reader.proc.wait()
    with pytest.raises(ReaderFailure, match=f"reader process on {store} died \\(exit code -?9\\)"):
        reader.sync(timeout=5.0)
    reader.stop()
    assert reader.failure is not None and "died" in reader.failure
    conn.close()


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="POSIX signals stop a process")
def test_a_sync_the_reader_answers_late_is_never_taken_for_a_later_one(tmp_path) -> None:
    """A stopped reader: the sync gives up saying so; the answer it sends once it runs again
    names that sync, so the next sync waits for a poll of its own and sees the newer head."""
    import labkit.remote.head_row as head_row

    store = tmp_path / "head.db"
    conn = connect(store)
    head_row.create(conn, 5, "h5")
    reader = ReaderProcess("mirror", store, poll=0.001)
    try:
        assert reader.sync() == 5
        os.kill(reader.proc.pid, signal.SIGSTOP)
        head_row.publish(conn, 3, "h3")
        with pytest.raises(RuntimeError) as gave_up:
            reader.sync(timeout=0.3)
        os.kill(reader.proc.pid, signal.SIGCONT)
        for _ in range(1000):  # its late answer to the abandoned sync comes with this change
            if any(c.after == 3 for c in reader.changes):
                break
            threading.Event().wait(0.01)
        head_row.publish(conn, 1, "h1")
        assert reader.sync() == 1  # not the 3 the late answer carried
    finally:
        falls = reader.stop()
        conn.close()
    assert [(f.before, f.after) for f in falls] == [(5, 3), (3, 1)]
    assert gave_up.type is ReaderFailure
    assert f"on {store} is alive but did not answer a sync for 0.3 s" in str(gave_up.value)


class _FailingReader(ReaderProcess):
    """A real reader process that stops answering (SIGSTOP) or dies (SIGKILL) when it is first
    asked to sync; `and_stop` also sets the run's stop event then, as a stop button would."""

    how = 0  # the signal, set per test
    and_stop = False

    def sync(self, timeout: float = 60.0, stop: threading.Event | None = None) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, self.how)
            if self.how == signal.SIGKILL:
                self.proc.wait()
        if self.and_stop and stop is not None:
            stop.set()
        return super().sync(timeout, stop)


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="POSIX signals stop a process")
@pytest.mark.parametrize(
    ("how", "and_stop", "says"),
    [
        ("SIGKILL", False, r"died \(exit code -9\)"),
        ("SIGSTOP", False, r"is alive but did not answer a sync for \d+\.\d s$"),
        ("SIGSTOP", True, r"is alive but did not answer a sync for .* \(the run was stopped\)"),
    ],
)
def test_a_run_whose_reader_dies_or_stalls_ends_with_its_trace_and_says_why(
    faulty: str, tmp_path, monkeypatch, how: str, and_stop: bool, says: str
) -> None:
    """The falling design asks its reader to sync; a dead reader ends the run at once, a
    silent one at the deadline or the stop: truncated, the trace so far kept, the reason on
    the result (before, the run waited 60 s per sync, then raised and lost its trace)."""
    import labkit.remote.driver as driver

    reader = type("Failing", (_FailingReader,), {"how": getattr(signal, how), "and_stop": and_stop})
    monkeypatch.setattr(driver, "ReaderProcess", reader)
    store = tmp_path / "store.db"
    result = run("lww", faulty, ticks=10**6, store=store, name=f"fail-{how}", deadline=2.0)
    assert result.reader_failure is not None
    assert re.fullmatch(f"reader process on {re.escape(str(store))} {says}", result.reader_failure)
    last = result.trace.iloc[-1]
    assert last["event"] == "truncated" and last["reason"] == driver.READER_FAILED
    assert result.summary.truncated and (result.trace["event"] == "deliver").any()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_fields = (
    "request_id",
    "ballot_id",
    "observed_watermark",
    "base_version",
    "tools",
    "updated_at",
    "base_hash",
    "host",
    "fault",
)


_shaped = st.fixed_dictionaries(
    {k: st.integers(-(2**70), 2**70) for k in _fields[:4]},
    optional={"tools": st.lists(_json, max_size=3) | _json, "updated_at": _json},
)


@settings(max_examples=150, deadline=None)
@given(
    st.binary(max_size=64)
    | st.dictionaries(st.sampled_from(_fields), _json).map(lambda d: json.dumps(d).encode())
    | _shaped.map(lambda d: json.dumps(d).encode())
)
@pytest.mark.slow
def test_any_bytes_are_an_answer_or_a_one_line_refusal(raw: bytes) -> None:
    try:
        answer = parse_answer(raw)
    except AnswerError as exc:
        assert "\n" not in str(exc)
        return
    assert catalog.tools_hash(answer.response.tools)  # what it lets in, the store can hold


def test_an_interrupt_is_passed_on_within_its_bound_though_the_loop_is_stuck() -> None:
    """Ctrl-C sets stop; a loop that does not end (a call that never returns) no longer keeps
    the caller waiting past the bound."""
    from labkit.remote.driver import _in_thread

    released, started = threading.Event(), threading.Event()

    def stuck(stop: threading.Event) -> None:
        started.set()
        released.wait(60)  # deaf to `stop`

    def press() -> None:
        started.wait(10)
        _thread.interrupt_main()

    threading.Thread(target=press, daemon=True).start()
    stop = threading.Event()
    try:
        with pytest.raises(KeyboardInterrupt):
            _in_thread(stuck, stop, bound=0.2)
        assert stop.is_set() and not released.is_set()
    finally:
        released.set()
