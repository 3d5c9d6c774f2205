"""What travels between the loop and the planner service, as JSON, and the checks on it.

A plan request names the loop, the request id, the ballot (None for unguarded designs), the
fence, the base version and the current tools. An answer carries the planner's `Response`
plus the host that computed it and the fault it carries. The loop trusts nothing it receives:
`parse_answer` turns bytes into an `Answer` or refuses them in one line (`AnswerError`); the
service is as strict with a plan request (`load_json`, `read_request`). Both parse strictly:
UTF-8, standard JSON (no NaN, no Infinity) and nested at most `MAX_DEPTH` deep, a depth found
by a scan of the text before the parser recurses into it.

The two bodies are msgspec structs (`labkit.typed_json`): msgspec parses and checks them in
one pass, and a refusal names the field path and the bad value. Fields a body does not
define are ignored, as they always were (a newer peer may send more).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

import msgspec

import labkit.catalog.versions as catalog
from labkit import typed_json
from labkit.catalog.loop import Response
from labkit.designs.design import Request
from labkit.typed_json import Int64, NonEmptyText

MAX_ANSWER_BYTES = 256 * 1024  # a planner answer larger than this is refused unread
MAX_DEPTH = 32  # JSON nested deeper than this is refused before it is parsed

# A JSON string, escapes and all, or an unterminated one to the end of the text (the parser
# stops there, so nothing after it is ever parsed); possessive, so the scan stays linear.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# An escaped UTF-16 surrogate: the standard library reads a lone one, msgspec refuses it.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class AnswerError(ValueError):
    """A planner answer the loop refuses (malformed, wrong types, huge, or too late)."""


@dataclass(frozen=True)
class Answer:
    """One planner answer as the loop received it."""

    request_id: int
    response: Response
    host: int | None
    fault: str | None


class _PlanBody(msgspec.Struct, frozen=True):
    """The body of `POST /plan` (`request_body` writes it)."""

    loop: NonEmptyText
    request_id: Int64
    observed_watermark: Int64
    base_version: Int64
    tools: list[Any]
    ballot_id: Int64 | None = None
    replay_of: Int64 | None = None


class _AnswerBody(msgspec.Struct, frozen=True):
    """The body of one answer (`answer_body` writes it). `updated_at` is finite: standard
    JSON has no NaN or infinity, and msgspec refuses a number past a float's range."""

    request_id: Int64
    ballot_id: Int64
    observed_watermark: Int64
    base_version: Int64
    tools: list[Any]
    updated_at: float | None = None
    base_hash: str | None = None
    host: Int64 | None = None
    fault: str | None = None


_ANSWER = msgspec.json.Decoder(_AnswerBody)
# Any JSON: a float past a float's range reads as an infinity, as the standard library reads
# it (msgspec's own refusal of it has no reliable path inside an untyped object); the field that
# holds it refuses it by name (`read_request`: 'tools' cannot be stored).
_ANY = msgspec.json.Decoder(float_hook=float)


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


def _decode(raw: bytes, decoder: msgspec.json.Decoder, what: str) -> Any:
    """`raw` decoded strictly by `decoder`; `ValueError` in one line that starts with `what`."""
    # No text holds more nesting than opening brackets, so most bodies (a flat tool list has
    # two) skip the scan; a deeper one is checked before msgspec recurses into it.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        if deeper_than(_text(raw, what), MAX_DEPTH):
            raise ValueError(f"{what}: JSON nested more than {MAX_DEPTH} deep")
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:  # JSON, but not the body: name the field
        raise ValueError(_field_error(exc, _readable(raw), what)) from None
    except msgspec.DecodeError as exc:  # not JSON at all: say where, as the standard library does
        raise ValueError(_not_json(raw, what, exc)) from None


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what}: not JSON (not UTF-8 at byte {exc.start})") from None


def _not_json(raw: bytes, what: str, exc: msgspec.DecodeError) -> str:
    """Why `raw` is not JSON, in the standard library's words (line and column), which read
    it again: a refusal is rare, and those words say more than msgspec's byte offset."""
    text = _text(raw, what)
    try:
        json.loads(text, parse_constant=_no_constant)
    except ValueError as err:
        return f"{what}: not JSON ({str(err).splitlines()[0]})"
    if _SURROGATE_ESCAPE.search(text):
        return f"{what}: not JSON (a string holds a lone UTF-16 surrogate, not Unicode text)"
    return f"{what}: not JSON ({exc})"


def _readable(raw: bytes) -> Any:
    """`raw` read leniently, for showing the bad value of a field (`ABSENT` if unreadable)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return typed_json.ABSENT


def _field_error(exc: msgspec.ValidationError, data: Any, what: str) -> str:
    why = typed_json.refusal(exc, data)
    where = f"'{typed_json.dotted(why.path)}': " if why.path else ""
    return f"{what}: {where}{why.problem}"


def load_json(raw: bytes, what: str) -> Any:
    """`raw` parsed as strict JSON (see the module docstring); `ValueError` in one line that
    starts with `what` otherwise."""
    return _decode(raw, _ANY, what)


def read_request(body: Any) -> tuple[str, Request]:
    """The loop name and `Request` in a `POST /plan` body; `ValueError` in one line if bad."""
    try:
        plan = msgspec.convert(body, _PlanBody, strict=True)
    except msgspec.ValidationError as exc:
        raise ValueError(_field_error(exc, body, "plan request")) from None
    except UnicodeEncodeError:  # a key msgspec cannot even look up
        raise ValueError("plan request: a key is not Unicode text (a lone surrogate)") from None
    req = Request(
        plan.request_id,
        plan.ballot_id,
        plan.observed_watermark,
        plan.base_version,
        _tools(plan.tools, "plan request"),
        plan.replay_of,
    )
    return plan.loop, req


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
        body: _AnswerBody = _decode(raw, _ANSWER, "answer refused")
    except ValueError as exc:
        raise AnswerError(str(exc)) from None
    # The catalog's rule for tools (`catalog.tools_json`: standard JSON) holds for anything
    # msgspec decoded from bytes: no NaN or infinity, no lone surrogate, no integer past the
    # digits Python prints, nesting checked above. Checking it again cost half the parse.
    resp = Response(
        body.ballot_id,
        body.observed_watermark,
        body.base_version,
        tuple(body.tools),
        body.updated_at,
        body.base_hash,
    )
    return Answer(body.request_id, resp, body.host, body.fault)


def _tools(tools: list[Any], what: str) -> tuple[Any, ...]:
    """`tools` as a tuple, if the catalog could store them (its own rule: standard JSON)."""
    try:
        catalog.tools_json(tools)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what}: 'tools' cannot be stored ({exc})") from None
    return tuple(tools)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")
