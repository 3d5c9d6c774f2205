"""What travels between the loop and the planner service, as JSON, and the checks on it.

A plan request names the loop, the request id, the ballot (None for unguarded designs), the
fence, the base version and the current tools. An answer carries the planner's `Response`
plus the host that computed it and the fault it carries. The loop trusts nothing it receives:
`parse_answer` turns bytes into an `Answer` or refuses them in one line (`AnswerError`); the
service is as strict with a plan request (`load_json`, `read_request`). Both parse strictly:
UTF-8, standard JSON (no NaN, no Infinity) and nested at most `MAX_DEPTH` deep, a depth found
by a scan of the text before the parser recurses into it.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import labkit.catalog.versions as catalog
from labkit.catalog.loop import Response
from labkit.designs.design import Request

MAX_ANSWER_BYTES = 256 * 1024  # a planner answer larger than this is refused unread
MAX_DEPTH = 32  # JSON nested deeper than this is refused before it is parsed

# A JSON string, escapes and all, or an unterminated one to the end of the text (the parser
# stops there, so nothing after it is ever parsed); possessive, so the scan stays linear.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class AnswerError(ValueError):
    """A planner answer the loop refuses (malformed, wrong types, huge, or too late)."""


@dataclass(frozen=True)
class Answer:
    """One planner answer as the loop received it."""

    request_id: int
    response: Response
    host: int | None
    fault: str | None


def request_body(loop: str, req: Request) -> dict[str, Any]:
    """The JSON body of `POST /plan` for `req`."""
    return {
        "loop": loop,
        "request_id": req.request_id,
        "ballot_id": req.ballot_id,
        "observed_watermark": req.observed_watermark,
        "base_version": req.base_version,
        "tools": list(req.tools),
        "replay_of": req.replay_of,
    }


def deeper_than(text: str, limit: int) -> bool:
    """Do the arrays and objects of the JSON `text` nest more than `limit` deep (brackets
    inside strings not counted)? A scan that never recurses and stops at the first bracket
    too deep. Where `text` is not JSON the count may be off, but never below the depth the
    parser reaches before it stops at the first mistake."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return any(depth > limit for depth in itertools.accumulate(map(_STEP.__getitem__, brackets)))


def load_json(raw: bytes, what: str) -> Any:
    """`raw` parsed as strict JSON (see the module docstring); `ValueError` in one line that
    starts with `what` otherwise."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what}: not JSON (not UTF-8 at byte {exc.start})") from None
    if deeper_than(text, MAX_DEPTH):
        raise ValueError(f"{what}: JSON nested more than {MAX_DEPTH} deep")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise ValueError(f"{what}: not JSON ({str(exc).splitlines()[0]})") from None


def read_request(body: Any) -> tuple[str, Request]:
    """The loop name and `Request` in a `POST /plan` body; `ValueError` in one line if bad."""
    if not isinstance(body, dict):
        raise ValueError(f"plan request must be a JSON object, got {type(body).__name__}")
    loop = body.get("loop")
    if not isinstance(loop, str) or not loop:
        raise ValueError("plan request: 'loop' must be a non-empty string")
    ints = {
        k: _int(body, k, "plan request")
        for k in ("request_id", "observed_watermark", "base_version")
    }
    ballot = None if body.get("ballot_id") is None else _int(body, "ballot_id", "plan request")
    replay = None if body.get("replay_of") is None else _int(body, "replay_of", "plan request")
    tools = _tools(body, "plan request")
    req = Request(
        ints["request_id"],
        ballot,
        ints["observed_watermark"],
        ints["base_version"],
        tuple(tools),
        replay,
    )
    return loop, req


def answer_body(request_id: int, resp: Response, host: int | None, fault: str | None) -> bytes:
    """The JSON bytes the service posts to a loop's callback for one answer."""
    return json.dumps(
        {
            "request_id": request_id,
            "ballot_id": resp.ballot_id,
            "observed_watermark": resp.observed_watermark,
            "base_version": resp.base_version,
            "tools": list(resp.tools),
            "updated_at": resp.updated_at,
            "base_hash": resp.base_hash,
            "host": host,
            "fault": fault,
        }
    ).encode()


def parse_answer(raw: bytes) -> Answer:
    """Check a planner answer field by field; `AnswerError` names what is wrong."""
    if len(raw) > MAX_ANSWER_BYTES:
        raise AnswerError(f"answer refused: {len(raw)} bytes is over the {MAX_ANSWER_BYTES} limit")
    try:
        body = load_json(raw, "answer refused")
    except ValueError as exc:
        raise AnswerError(str(exc)) from None
    if not isinstance(body, dict):
        raise AnswerError(f"answer refused: a JSON object is expected, got {type(body).__name__}")
    try:
        fields = {
            k: _int(body, k, "answer")
            for k in ("request_id", "ballot_id", "observed_watermark", "base_version")
        }
        tools = _tools(body, "answer")
        stamp = body.get("updated_at")
        if stamp is not None and (
            isinstance(stamp, bool)
            or not isinstance(stamp, int | float)
            or not math.isfinite(stamp)
        ):
            raise ValueError(f"answer: 'updated_at' must be a number or null, got {stamp!r}")
        host = None if body.get("host") is None else _int(body, "host", "answer")
        for name in ("base_hash", "fault"):
            if body.get(name) is not None and not isinstance(body[name], str):
                raise ValueError(f"answer: '{name}' must be a string or null")
    except ValueError as exc:
        raise AnswerError(f"answer refused: {exc}") from None
    resp = Response(
        fields["ballot_id"],
        fields["observed_watermark"],
        fields["base_version"],
        tuple(tools),
        None if stamp is None else float(stamp),
        body.get("base_hash"),
    )
    return Answer(fields["request_id"], resp, host, body.get("fault"))


def _tools(body: dict[str, Any], what: str) -> list[Any]:
    """The tool list of `body`, if the catalog could store it (its own rule: standard JSON)."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        raise ValueError(f"{what}: 'tools' must be a list, got {type(tools).__name__}")
    try:
        catalog.tools_json(tools)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what}: 'tools' cannot be stored ({exc})") from None
    return tools


def _int(body: dict[str, Any], key: str, what: str) -> int:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what}: '{key}' must be an integer, got {value!r}")
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"{what}: '{key}' is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")
