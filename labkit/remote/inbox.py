"""The loop's callback endpoint: the planner POSTs answers here; each is checked
(`labkit.remote.wire.parse_answer`) and queued for the driver, or refused in one line.

Once the loop has closed, every answer is refused (410) and nothing reaches the store: an
answer that arrives after the loop is gone is never applied. A sender that hangs up mid-body
is refused too (one line, no traceback: `labkit.remote.serving`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from labkit.remote.serving import BodyRefused, QuietServerLog, read_body
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
        self.runner = web.AppRunner(app, access_log=None, logger=QuietServerLog())
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
        refused: BodyRefused | None = None
        try:
            raw = await read_body(request, MAX_ANSWER_BYTES)
        except BodyRefused as exc:
            raw, refused = b"", exc
        if self.closed:
            return self.refuse(410, "answer refused: the loop is closed; nothing was written")
        if refused is not None:  # too long, or the sender hung up mid-body
            return self.refuse(refused.status, f"answer refused: {refused}")
        try:
            answer = parse_answer(raw)
        except AnswerError as exc:
            return self.refuse(400, str(exc))
        self.events.put_nowait(("deliver", answer))
        return web.Response(status=204)
