"""labkit.remote against hostile input (issue 35): the planner service answers every bad body
with a 4xx and one line, caches nothing from it and logs no traceback; every public knob is
coerced (numpy ints and floats work) or refused in one line naming it; a run that cannot go
on ends truncated and says it stalled."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labkit.remote.driver as driver
import labkit.remote.service as service
from labkit import validation
from labkit.designs.design import Decision, Request
from labkit.designs.simulator import PlannerConfig
from labkit.remote import kill_mid_call, load, measure, run, serve, set_faults, side_by_side
from labkit.remote.compare import differences
from labkit.remote.control import call, config
from labkit.remote.faults import FaultSwitch
from labkit.remote.inbox import Inbox
from labkit.remote.views import falls_text
from labkit.remote.wire import MAX_DEPTH, AnswerError, deeper_than, parse_answer

DEEP = 100_000
GOOD_PLAN = {
    "loop": "x",
    "request_id": 1,
    "observed_watermark": 0,
    "base_version": 0,
    "tools": ["a"],
}


def _free_url() -> str:
    """A loopback URL nobody listens on: a knob refused there was refused before any call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _send(url: str, path: str, raw: bytes, method: str = "POST") -> tuple[int, str]:
    """POST (or PUT) raw bytes; the status and the body's text."""
    req = urllib.request.Request(
        url + path, data=raw, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _plan_with(tools: bytes) -> bytes:
    """A plan request that is good but for its tools, given as raw JSON text."""
    good = json.dumps({**GOOD_PLAN, "tools": "TOOLS"}).encode()
    return good.replace(b'"TOOLS"', tools)


@pytest.fixture
def planner():
    """A planner service whose state the test can look into (what `serve` starts)."""
    cfg = PlannerConfig(latency=0.02, clock_skew=0.01)
    state = service.Planner(cfg, FaultSwitch(), [0.0, 0.0, 0.0], 0.02, 1.0)
    server = service._ServerThread(state)
    url = server.start_serving()
    try:
        yield state, url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def plain() -> str:
    with serve(latency=0.01) as url:
        yield url


# -- bad bodies: a 4xx, one line, nothing cached --------------------------------------------


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        (b"[NaN]", "NaN is not standard JSON"),
        (b"[1, Infinity]", "Infinity is not standard JSON"),
        (b'[{"a": -Infinity}]', "-Infinity is not standard JSON"),
        (b"[1e400]", "'tools' cannot be stored"),  # a float that overflows to inf
        (b"[" * DEEP + b"]" * DEEP, f"nested more than {MAX_DEPTH} deep"),
        (b'"a"', "'tools': expected a list, got 'a'"),
        (b'["' + b'\\"' * 200_000 + b"]", "not JSON"),  # an unterminated string of escapes
    ],
)
def test_a_bad_plan_body_is_a_4xx_in_one_line_and_caches_nothing(planner, tools, says) -> None:
    state, url = planner
    status, text = _send(url, "/plan", _plan_with(tools))
    assert status == 400 and says in text and "\n" not in text.strip()
    assert state.loops == {} and state.counts["requests"] == 0
    # the same loop's good request is taken, and cached: what the check above looks at
    status, _ = _send(url, "/plan", json.dumps(GOOD_PLAN).encode())
    assert status == 202 and state.loops["x"].tools == {0: ("a",)}


@pytest.mark.parametrize(
    ("path", "method"), [("/loops/x", "POST"), ("/faults", "PUT"), ("/plan", "POST")]
)
def test_a_body_nested_100000_deep_is_refused_on_every_endpoint(planner, path, method) -> None:
    state, url = planner
    status, text = _send(url, path, b'{"a": ' + b"[" * DEEP + b"]" * DEEP + b"}", method)
    assert status == 400 and f"nested more than {MAX_DEPTH} deep" in text
    assert state.loops == {}


def test_a_body_over_the_limit_is_refused_unread(planner) -> None:
    state, url = planner
    raw = json.dumps({**GOOD_PLAN, "tools": ["t" * service.MAX_REQUEST_BYTES]}).encode()
    status, text = _send(url, "/plan", raw)
    assert status == 413 and "limit" in text and "\n" not in text.strip()
    assert state.loops == {}


def test_an_answer_nested_deep_is_refused_in_one_line() -> None:
    with pytest.raises(AnswerError, match="nested more than") as info:
        parse_answer(b"[" * DEEP)
    assert "\n" not in str(info.value)


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


_brackety = st.text(alphabet='[]{}"\\ab,:\n', max_size=8)
_values = st.recursive(
    st.none() | st.integers() | _brackety,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_brackety, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(_values, st.integers(0, 6))
def test_the_depth_scan_counts_what_the_parser_would(value, limit: int) -> None:
    """Brackets, quotes and backslashes inside strings never count; the rest counts exactly."""
    assert deeper_than(json.dumps(value), limit) == (_depth(value) > limit)


# -- a client that hangs up: one line at most, never a traceback ---------------------------


def _noisy(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """The records of the servers' loggers (aiohttp's and labkit's)."""
    return [r for r in records if r.name.startswith(("aiohttp", "labkit.remote"))]


def _settle(caplog, quiet_s: float = 0.2) -> None:
    """Wait until no new log record has come for `quiet_s` (at most 5 s)."""
    end, seen, since = time.monotonic() + 5, -1, time.monotonic()
    while time.monotonic() < end:
        if len(caplog.records) != seen:
            seen, since = len(caplog.records), time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.02)


def _wait_for(predicate, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not predicate() and time.monotonic() < end:
        time.sleep(0.02)


def test_a_client_that_hangs_up_mid_body_costs_one_line_and_no_traceback(plain, caplog) -> None:
    port = int(plain.rsplit(":", 1)[1])
    caplog.set_level(logging.DEBUG)
    hangups = 3
    for _ in range(hangups):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b'POST /plan HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"loop":')
    # and one whose chunked body HTTP cannot frame: a 400, the connection closed
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /plan HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        s.settimeout(10)
        assert b" 400 " in s.recv(64)

    def cut() -> int:
        return sum("cut short" in r.getMessage() for r in caplog.records)

    _wait_for(lambda: cut() >= hangups and len(_noisy(caplog.records)) > hangups)
    noisy = _noisy(caplog.records)
    assert cut() == hangups  # each hang-up was seen, once
    assert len(noisy) <= hangups + 1  # at most one line per refused request
    assert all(r.exc_info is None and r.levelno < logging.WARNING for r in noisy)
    assert all("\n" not in r.getMessage() for r in noisy)


# An encoding aiohttp knows fails while the body is read (logged); one it does not know is
# refused with the headers, before any handler runs (no line at all).
ENCODINGS = (b"gzip", b"deflate", b"bogus")


@pytest.mark.parametrize(("encoding", "most"), list(zip(ENCODINGS, (1, 1, 0), strict=True)))
def test_a_body_its_content_encoding_cannot_decode_is_a_400_without_a_traceback(
    plain, caplog, encoding: bytes, most: int
) -> None:
    """A body that says gzip and is not: aiohttp's decoder fails while the body is read, a
    client fault like a hang-up (it gave 500 and two tracebacks for gzip, then two lines: the
    handler's and aiohttp's, which met the same error reading the rest). Now the handler's one
    line at INFO, or none for an encoding aiohttp refuses with the headers."""
    port = int(plain.rsplit(":", 1)[1])
    caplog.set_level(logging.DEBUG)
    # the server outlives one test: let a late line of an earlier test come, then forget it
    _settle(caplog)
    caplog.clear()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(
            b"POST /plan HTTP/1.1\r\nHost: x\r\nContent-Encoding: "
            + encoding
            + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        )
        s.settimeout(10)
        assert b" 400 " in s.recv(64)
    others = [e.decode() for e in ENCODINGS if e != encoding]

    def mine() -> list[logging.LogRecord]:  # not a line that names another case's encoding
        return [r for r in _noisy(caplog.records) if not any(o in r.getMessage() for o in others)]

    _wait_for(lambda: len(mine()) >= min(most, 1), seconds=10.0)
    _settle(caplog)  # a later line, had there been one, has come by now
    said = [r.getMessage() for r in mine()]
    assert bool(said) == bool(most) and len(said) <= most, said
    noisy = _noisy(caplog.records)
    assert all(r.exc_info is None and r.levelno < logging.WARNING for r in noisy)
    assert all("\n" not in r.getMessage() for r in noisy)


def test_the_inbox_refuses_a_sender_that_hangs_up_without_a_traceback(caplog) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> tuple[list[str], bytes]:
        inbox = Inbox(asyncio.Queue())
        url = await inbox.start()
        port = int(url.split(":")[2].split("/")[0])
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /answer HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{")
        await writer.drain()
        writer.close()
        for _ in range(500):
            if inbox.refused:
                break
            await asyncio.sleep(0.01)
        # and a body HTTP cannot frame: aiohttp answers 400 before the inbox sees it
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /answer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
        )
        await writer.drain()
        status = await asyncio.wait_for(reader.read(64), 10)
        writer.close()
        await inbox.stop()
        return inbox.refused, status

    refused, status = asyncio.run(scenario())
    assert len(refused) == 1 and "cut short" in refused[0]
    assert b" 400 " in status
    noisy = _noisy(caplog.records)
    assert len(noisy) <= 2  # one line for each refused request at most
    assert all(r.exc_info is None and r.levelno < logging.WARNING for r in noisy)


# -- knobs: coerced, or refused in one line naming them --------------------------------------


@pytest.mark.parametrize(
    ("knobs", "says"),
    [
        ({"retry_every": 0}, "retry_every"),
        ({"retry_every": 1e-9}, "retry_every"),
        ({"retry_every": math.nan}, "retry_every"),
        ({"redeliver_for": math.nan}, "redeliver_for"),
        ({"redeliver_for": -1}, "redeliver_for"),
        ({"redeliver_for": math.inf}, "redeliver_for"),
        ({"latency": math.inf}, "latency"),
        ({"latency": "0.1"}, "latency"),
        ({"sigma": 1e200}, "sigma"),
        ({"duplicate_rate": 1.5}, "duplicate_rate"),
        ({"clock_skew": math.nan}, "clock_skew"),
        ({"stall_time": -0.1}, "stall_time"),
        ({"hosts": True}, "hosts"),
        ({"hosts": 2.0}, "hosts"),
        ({"hosts": 10**9}, "hosts"),
        ({"span": 0}, "span"),
        ({"span": 4 * 10**6}, "span"),  # a list this long froze the service's event loop
        ({"seed": "7"}, "seed"),
        ({"faults": "duplicate"}, "faults must be a collection"),
    ],
)
def test_bad_service_knobs_are_refused_in_one_line_naming_them(knobs: dict, says: str) -> None:
    with pytest.raises((TypeError, ValueError), match=says) as info:
        with serve(**knobs):
            pass
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("knobs", "says"),
    [
        ({"poll": 0}, "poll"),
        ({"poll": -1}, "poll"),
        ({"poll": math.nan}, "poll"),
        ({"drain": -1}, "drain"),
        ({"drain": math.nan}, "drain"),
        ({"deadline": math.inf}, "deadline"),
        ({"deadline": 10**400}, "deadline"),
        ({"connect_timeout": math.nan}, "connect_timeout"),
        ({"timeout": math.nan}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"window": np.float64(2)}, "window"),
        ({"seed": 1.5}, "seed"),
        ({"store": b"/tmp/x.db"}, "run\\(\\): store must be a path"),
        ({"store": 5}, "run\\(\\): store must be a path"),
        ({"progress": 5}, "run\\(\\): progress must be a function"),
        ({"stop": 5}, "run\\(\\): stop must be a threading.Event"),
        ({"dsn": 5}, "dsn must be a str"),
        ({"name": 7}, "loop name"),
    ],
)
def test_bad_run_knobs_are_refused_in_one_line_before_any_call(knobs: dict, says: str) -> None:
    with pytest.raises((TypeError, ValueError), match=says) as info:
        run("ballot", _free_url(), ticks=1, **knobs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("call_it", "says"),
    [
        (lambda url: set_faults(url, "duplicate"), "faults must be a collection"),
        (lambda url: set_faults(url, ["duplicate"], seed="1"), "set_faults\\(\\): seed"),
        (lambda url: config(url, timeout=math.nan), "config\\(\\): timeout"),
        (lambda url: call(url, "/status", timeout=0), "call\\(\\): timeout"),
        (lambda url: load(url, loops=0), "load\\(\\): loops"),
        (lambda url: load(url, seconds=math.nan), "load\\(\\): seconds"),
        (lambda url: load(url, poll=0), "load\\(\\): poll"),
        (lambda url: load(url, connect_timeout=-1), "load\\(\\): connect_timeout"),
        (lambda url: load(url, mix=[]), "load\\(\\): mix"),
        (lambda url: load(url, mix="ballot"), "load\\(\\): mix"),
        (lambda url: load(url, mix=[("ballot",)]), "load\\(\\): mix\\[0\\]"),
        (lambda url: load(url, mix=[("ballot", 0)]), "load\\(\\): mix\\[0\\] window"),
        (lambda url: measure("ballot"), "measure\\(\\): designs"),
        (lambda url: measure(["ballot"], seeds=3), "measure\\(\\): seeds"),
        (lambda url: measure(["ballot"], latency=0), "measure\\(\\): latency"),
        (lambda url: measure(["ballot"], faults="stall"), "faults must be a collection"),
        (lambda url: kill_mid_call(url, "s.db", holding="yes"), "kill_mid_call\\(\\): holding"),
        (lambda url: kill_mid_call(url, "s.db", after=-1), "kill_mid_call\\(\\): after"),
        (lambda url: kill_mid_call(url, "s.db", timeout=math.nan), "kill_mid_call\\(\\): timeout"),
        (lambda url: kill_mid_call(url, b"s.db"), "kill_mid_call\\(\\): store"),
        (lambda url: side_by_side({}, latency=math.nan), "side_by_side\\(\\): latency"),
        (lambda url: differences(pd.DataFrame(), tolerance=-1), "differences\\(\\): tolerance"),
        (lambda url: falls_text([], most=-1), "falls_text\\(\\): most"),
    ],
)
def test_every_public_function_refuses_a_bad_knob_in_one_line(call_it, says: str) -> None:
    with pytest.raises((TypeError, ValueError), match=says) as info:
        call_it(_free_url())
    assert "\n" not in str(info.value)


def test_numpy_numbers_are_taken_where_numbers_are_meant_and_config_serialises() -> None:
    with serve(
        seed=np.int64(3), hosts=np.int64(2), span=np.int32(2), latency=np.float32(0.01)
    ) as url:
        knobs = config(url)
        assert knobs["hosts"] == 2 and knobs["span"] == 2
        assert knobs["latency"] == pytest.approx(0.01)
        assert set_faults(url, ("duplicate",), seed=np.int64(4)) == {
            "faults": ["duplicate"],
            "seed": 4,
        }
        result = run("ballot", url, ticks=np.int64(2), seed=np.int64(1), poll=np.float64(0.002))
    assert result.summary.commits == 2 and not result.summary.truncated


def test_a_store_that_cannot_be_opened_is_named(plain, tmp_path) -> None:
    store = tmp_path / "no-such-folder" / "store.db"
    with pytest.raises(sqlite3.Error, match=str(store)) as info:
        run("ballot", plain, ticks=1, store=store)
    assert "\n" not in str(info.value)


def test_the_shared_number_rule() -> None:
    assert validation.number_arg(np.float32(0.5), "x", above=0) == 0.5
    assert type(validation.number_arg(np.int64(3), "x")) is float
    for bad, error in [
        (True, TypeError),
        ("1", TypeError),
        (None, TypeError),
        (math.nan, ValueError),
        (-math.inf, ValueError),
        (10**400, ValueError),
        (0, ValueError),
    ]:
        with pytest.raises(error, match="^f\\(\\): x must be a finite number > 0"):
            validation.number_arg(bad, "f(): x", above=0)
    with pytest.raises(ValueError, match=">= 0 and <= 1, got 1.5"):
        validation.number_arg(1.5, "rate", at_least=0, at_most=1)


# -- a run that cannot go on says so ------------------------------------------------------


class _Wedged:
    """A design that awaits nothing from the start, its head at `head`; with `held`, one
    answer is ready to settle, which takes the head to `held`."""

    name = "ballot"

    def __init__(self, head: int, held: int | None = None) -> None:
        self.head, self.held = head, held

    def start(self, now: float) -> list[Request]:
        return []

    def awaited(self) -> list[Request]:
        return []

    def settle(self, now: float):
        if self.held is None:
            return None
        self.head, self.held = self.held, None
        return Request(1, 1, 0, 0, ()), Decision(True, None)

    def read_head(self) -> tuple[int, str]:
        return self.head, "digest"

    def stalled(self) -> str | None:
        return f"the head is at {self.head} of 3, and nothing is awaited" if self.head < 3 else None


class _NoReader:
    """Stands in for the reader process: a design with no store has nothing to poll."""

    def __init__(self, *args, **kwargs) -> None:
        self.polls, self.first, self.changes, self.failure = 0, 0, [], None

    def sync(self, timeout: float, stop: threading.Event | None = None) -> int:
        return 0

    def stop(self, timeout: float) -> list:
        return []


@pytest.mark.parametrize(
    ("design", "stalls"),
    [
        (_Wedged(head=0), True),  # nothing in flight, the head below ticks
        (_Wedged(head=2), True),
        (_Wedged(head=3), False),  # done: the head reached ticks
        (_Wedged(head=0, held=3), False),  # a held answer settles it first
        (_Wedged(head=0, held=1), True),  # settles, and is stuck after that
    ],
)
def test_a_run_that_cannot_go_on_ends_truncated_as_stalled(
    plain, monkeypatch, design: _Wedged, stalls: bool
) -> None:
    monkeypatch.setattr(driver, "_build", lambda *args: (design, None))
    monkeypatch.setattr(driver, "ReaderProcess", _NoReader)
    result = run("ballot", plain, ticks=3, name="wedged", deadline=5.0)
    events = result.trace["event"].tolist()
    assert result.summary.truncated == stalls
    if stalls:
        last = result.trace.iloc[-1]
        assert last["event"] == "truncated" and last["reason"].startswith(driver.STALLED + ":")
        assert f"at {design.head} of 3" in last["reason"]
    else:
        assert "truncated" not in events
