"""Hypothesis state machine over reserve/respond/duplicate/stale/restart/abandon (SPEC section 4).

A plain-Python model predicts every outcome; after every step the invariants hold: a reader
never sees the version fall, each commit raises it by exactly one and is exactly one accepted
response, no response is applied twice, and a restart loses no commit.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from labkit.ballot import Ballot, Response, WatermarkLoop, WindowFullError
from labkit.catalog import versions as catalog
from labkit.catalog.versions import CatalogReader
from labkit.db import connect


class LoopMachine(RuleBasedStateMachine):
    """Drives a file-backed WatermarkLoop and a model side by side."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="wm-sm-"))
        self.db = self.dir / "wm.db"
        self.window = 1
        self.sent: list[Ballot] = []
        self.inflight: dict[int, Ballot] = {}
        self.head = 0
        self.committed: list[int] = []
        self.responses: list[Response] = []

    @initialize(window=st.sampled_from([1, 1, 2, 3]))
    def open(self, window: int) -> None:
        self.window = window
        self.loop = WatermarkLoop(self._connect(), window=window)
        self.reader = CatalogReader(self._connect(), "sm")

    def _connect(self) -> sqlite3.Connection:
        conn = connect(self.db)
        conn.execute("PRAGMA synchronous = OFF")  # durability is test_crash's job; keep this fast
        return conn

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _respond(self, resp: Response) -> None:
        b = self.inflight.get(resp.ballot_id)
        if b is None:
            expected = "unknown_ballot"
        elif b.watermark != self.head or resp.observed_watermark != b.watermark:
            expected = "stale_watermark"
        elif resp.base_version != self.head:
            expected = "stale_base"
        else:
            expected = None
        before = self.loop.head_version()
        out = self.loop.apply(resp)
        assert out.reason == expected, (out, expected)
        assert out.committed == (expected is None)
        if expected is None or (expected == "stale_watermark" and b.watermark != self.head):
            del self.inflight[resp.ballot_id]  # committed, or fenced out for good
        if out.committed:
            assert out.version == before + 1 == self.loop.head_version()
            self.head += 1
            self.committed.append(resp.ballot_id)
        else:
            assert self.loop.head_version() == before
        self.responses.append(resp)

    @rule()
    def reserve(self) -> None:
        if len(self.inflight) >= self.window:
            try:
                self.loop.reserve()
            except WindowFullError as err:
                assert err.inflight_ids == sorted(self.inflight)
                return
            raise AssertionError("reserve beyond the window did not raise")
        b = self.loop.reserve()
        assert b.watermark == b.base_version == self.head
        self.sent.append(b)
        self.inflight[b.ballot_id] = b

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def respond(self, data: st.DataObject) -> None:
        b = data.draw(st.sampled_from(self.sent))
        tools = [*catalog.read_version(self.loop.conn, b.base_version).tools, b.ballot_id]
        self._respond(b.answer(tools))

    @precondition(lambda self: self.responses)
    @rule(data=st.data())
    def duplicate(self, data: st.DataObject) -> None:
        self._respond(data.draw(st.sampled_from(self.responses)))

    @precondition(lambda self: self.sent)
    @rule(data=st.data(), back=st.integers(1, 3))
    def stale(self, data: st.DataObject, back: int) -> None:
        b = data.draw(st.sampled_from(self.sent))
        self._respond(Response(b.ballot_id, b.watermark, b.base_version - back, ["stale"]))

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def abandon(self, data: st.DataObject) -> None:
        b = data.draw(st.sampled_from(self.sent))
        assert self.loop.abandon(b.ballot_id) == (b.ballot_id in self.inflight)
        self.inflight.pop(b.ballot_id, None)

    @rule()
    def restart(self) -> None:
        self.loop.conn.close()
        self.loop = WatermarkLoop(self._connect(), window=self.window)
        assert self.loop.head_version() == self.head
        assert self.loop.inflight() == [self.inflight[k] for k in sorted(self.inflight)]

    @invariant()
    def reader_never_sees_a_fall(self) -> None:
        if hasattr(self, "reader"):
            assert self.reader.poll() == self.head

    @invariant()
    def one_accepted_response_per_commit(self) -> None:
        if not hasattr(self, "loop"):
            return
        conn = self.loop.conn
        assert catalog.verify(conn) == self.head == len(self.committed)
        ballots = [r.ballot_id for r in catalog.history(conn)[1:]]
        assert ballots == self.committed  # in commit order, none twice
        (accepted,) = conn.execute(
            "SELECT COUNT(*) FROM wm_responses WHERE committed = 1"
        ).fetchone()
        assert accepted == self.head


LoopMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestLoopMachine = LoopMachine.TestCase
