"""The sliced shell-channel poll behaves like the original: a message, or `queue.Empty`."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from queue import Empty

import nbrun
import pytest
from jupyter_client.channels import AsyncZMQSocketChannel


class FakeSocket:
    """A socket that becomes readable `ready_after` seconds from now (never if None)."""

    def __init__(self, ready_after: float | None) -> None:
        self.ready_at = None if ready_after is None else time.monotonic() + ready_after
        self.polls: list[int | None] = []

    async def poll(self, timeout_ms: int | None) -> int:
        self.polls.append(timeout_ms)
        wait = 3600.0 if timeout_ms is None else timeout_ms / 1000
        if self.ready_at is not None and self.ready_at - time.monotonic() <= wait:
            await asyncio.sleep(max(0.0, self.ready_at - time.monotonic()))
            return 1
        await asyncio.sleep(wait)
        return 0


class FakeChannel:
    def __init__(self, ready_after: float | None) -> None:
        self.socket = FakeSocket(ready_after)

    async def _recv(self) -> dict:
        return {"msg_type": "kernel_info_reply"}


@pytest.fixture(autouse=True)
def sliced(monkeypatch: pytest.MonkeyPatch) -> None:
    nbrun.patch_zmq_get_msg()
    monkeypatch.setattr(nbrun, "POLL_SLICE_S", 0.2)


def get(channel: FakeChannel, timeout: float | None) -> dict:
    # A thread of its own: other tests in the session (Playwright) keep a loop running here.
    coro = AsyncZMQSocketChannel.get_msg(channel, timeout=timeout)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def test_deadline_without_a_message_raises_empty_not_timeouterror() -> None:
    channel = FakeChannel(ready_after=None)
    start = time.monotonic()
    with pytest.raises(Empty):
        get(channel, timeout=0.5)
    assert 0.45 <= time.monotonic() - start < 1.5
    assert len(channel.socket.polls) >= 3  # polled in slices, not one long wait
    assert all(p is not None and p <= 200 for p in channel.socket.polls)


def test_message_arriving_after_several_slices_is_returned() -> None:
    channel = FakeChannel(ready_after=0.5)
    assert get(channel, timeout=None) == {"msg_type": "kernel_info_reply"}
    assert len(channel.socket.polls) >= 2


def test_zero_timeout_polls_once() -> None:
    channel = FakeChannel(ready_after=None)
    with pytest.raises(Empty):
        get(channel, timeout=0)
    assert channel.socket.polls == [0]
