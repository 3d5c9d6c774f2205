"""What the two HTTP servers here share (the planner service and a loop's inbox): reading a
request's body whole, or refusing it in one line, and aiohttp's server log kept to one line
per client fault.

A client that hangs up mid-body, or sends a request aiohttp cannot parse, is the client's
fault: it costs one line at INFO on the `labkit.remote` logger, never a traceback. Anything
else a handler raises is a bug here and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import weakref
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

LOG = logging.getLogger("labkit.remote")

# What a client can do to a request mid-way: hang up, send bytes HTTP cannot frame, or send a
# body its own Content-Encoding cannot decode (RequestPayloadError wraps the decoder's error).
CLIENT_FAULTS: tuple[type[BaseException], ...] = (
    ConnectionError,
    HttpProcessingError,
    RequestPayloadError,
)


# Client faults a handler has logged already: after the handler answers, aiohttp reads the rest
# of the body and meets the same exception again; its server log then stays quiet.
_SAID: weakref.WeakSet[BaseException] = weakref.WeakSet()


class BodyRefused(ValueError):
    """A request body refused before it is parsed: `status` is its 4xx, the message one line."""

    def __init__(self, status: int, message: str, limit: int) -> None:
        super().__init__(message)
        self.status, self.limit = status, limit

    def http(self) -> web.HTTPClientError:
        """The refusal as aiohttp's exception, for a handler to raise."""
        if self.status == 413:
            return web.HTTPRequestEntityTooLarge(self.limit, text=str(self))
        return web.HTTPBadRequest(text=str(self))


async def read_body(request: web.Request, limit: int) -> bytes:
    """The body of `request`, read no more than one byte past `limit`; `BodyRefused` (413) if
    it is longer, (400) if the client hung up or broke it mid-body (that one is logged)."""
    raw = bytearray()
    try:
        while len(raw) <= limit:
            chunk = await request.content.read(limit + 1 - len(raw))
            if not chunk:
                break
            raw += chunk
    except CLIENT_FAULTS as exc:
        message = f"{request.method} {request.path}: body cut short ({one_line(exc)})"
        LOG.info("%s from %s", message, request.remote)
        with contextlib.suppress(TypeError):  # OSErrors take no weak reference; aiohttp is
            _SAID.add(exc)  # quiet after a hang-up anyway
        raise BodyRefused(400, message, limit) from None
    if len(raw) > limit:
        message = f"{request.method} {request.path}: body over the {limit} byte limit"
        raise BodyRefused(413, message, limit)
    return bytes(raw)


def one_line(exc: BaseException, most: int = 200) -> str:
    """`exc` as one short line: its type and its message, its lines joined, cut at `most`."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= most else text[: most - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class QuietServerLog(logging.LoggerAdapter):
    """aiohttp's server log (`AppRunner(..., logger=QuietServerLog())`): a client's fault is
    one line at INFO on `LOG`, none if a handler said it already (`read_body`); any other
    exception keeps its level and traceback."""

    def __init__(self) -> None:
        super().__init__(LOG, {})

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        exc_info = kwargs.pop("exc_info", None)
        exc = sys.exc_info()[1] if exc_info is True else exc_info
        if isinstance(exc, BaseException) and not isinstance(exc, CLIENT_FAULTS):
            LOG.log(level, msg, *args, exc_info=exc, **kwargs)
            return
        if isinstance(exc, BaseException) and exc in _SAID:
            return
        text = str(msg) % args if args else str(msg)
        if isinstance(exc, BaseException):
            text = f"{text}: {one_line(exc)}"
        LOG.log(min(level, logging.INFO), "aiohttp: %s", text, **kwargs)
