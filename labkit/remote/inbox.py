"""The loop's callback endpoint: the planner POSTs answers here; each is checked
(`labkit.remote.wire.parse_answer`) and queued for the driver, or refused in one line.

Once the loop has closed, every answer is refused (410) and nothing reaches the store: an
answer that arrives after the loop is gone is never applied.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from labkit.remote.wire import MAX_ANSWER_BYTES, AnswerError, parse_answer

PATH = "/answer"


class Inbox:
    """An HTTP server on 127.0.0.1 that feeds checked answers into `events`."""

    def __init__(self, events: asyncio.Queue[tuple[Any, ...]]) -> None:
        self.events = events
        self.closed = False
        self.refused: list[str] = []
        self.runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Listen on a free loopback port; the callback URL."""
        app = web.Application(client_max_size=MAX_ANSWER_BYTES * 4)
        app.router.add_post(PATH, self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        return f"http://127.0.0.1:{self.runner.addresses[0][1]}{PATH}"

    def close(self) -> None:
        """From now on refuse every answer: the loop is closed."""
        self.closed = True

    async def stop(self) -> None:
        """Stop listening (a later answer finds nobody: the planner retries, then drops it)."""
        if self.runner is not None:
            await self.runner.cleanup()

    def refuse(self, status: int, message: str) -> web.Response:
        self.refused.append(message)
        if not self.closed:
            self.events.put_nowait(("refused", message))
        return web.Response(status=status, text=message)

    async def handle(self, request: web.Request) -> web.Response:
        """Check one answer and queue it; 400/410/413 with one line if refused."""
        raw = bytearray()
        while len(raw) <= MAX_ANSWER_BYTES:  # read no more than one byte past the limit
            chunk = await request.content.read(MAX_ANSWER_BYTES + 1 - len(raw))
            if not chunk:
                break
            raw += chunk
        if self.closed:
            return self.refuse(410, "answer refused: the loop is closed; nothing was written")
        if len(raw) > MAX_ANSWER_BYTES:
            return self.refuse(413, f"answer refused: over the {MAX_ANSWER_BYTES} byte limit")
        try:
            answer = parse_answer(bytes(raw))
        except AnswerError as exc:
            return self.refuse(400, str(exc))
        self.events.put_nowait(("deliver", answer))
        return web.Response(status=204)
