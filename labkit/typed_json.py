"""JSON checked against msgspec structs: what the scenario files and the wire share.

msgspec decodes JSON (or converts parsed data) into a struct and checks the types, the
ranges, the required and the unknown fields on the way. Its refusal is one string that ends
with the field path (``Expected `int`, got `bool` - at `$.events[3].id` ``); `refusal` turns it
into a `Refusal`: the path as a tuple and one line of problem that shows the bad value. Why
msgspec and not pydantic: CONTRIBUTING.md, "Libraries".
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from labkit.validation import INT64_MAX, INT64_MIN, is_int64, shown

# An integer both backends store (a bool or a float such as 3.0 is refused, never coerced).
Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
Count = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]  # an Int64 that is >= 0
RowId = Annotated[int, msgspec.Meta(ge=1, le=INT64_MAX)]  # an Int64 that is >= 1
NonEmptyText = Annotated[str, msgspec.Meta(min_length=1)]

Path = tuple[str | int, ...]

# msgspec's refusal: the problem, then ` - at `$.a[0].b`` (absent for the document itself).
_MESSAGE = re.compile(r"(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
_STEP = re.compile(r"\.([A-Za-z_]\w*)|\[(\d+)\]")
_MISSING = re.compile(r"Object missing required field `(?P<name>.*)`", re.DOTALL)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<name>.*)`", re.DOTALL)
_INVALID = re.compile(r"Invalid (?:enum )?value .*", re.DOTALL)
_BOUND = re.compile(r"Expected `int` (?P<op>>=|<=) (?P<bound>-?\d+)")
_TYPE = re.compile(r"Expected `(?P<want>[^`]*)`(?:, got `[^`]*`)?")
# msgspec's JSON names for the types a reader meets, in the words of the messages before it.
_WORDS = {
    "int": "an integer",
    "str": "a string",
    "float": "a number",
    "bool": "true or false",
    "null": "null",
    "object": "an object",
    "array": "a list",
}
RANGE_TEXT = "does not fit a 64-bit integer [-2**63, 2**63 - 1]"
ABSENT = object()  # no value where a path leads: nothing to show


@dataclass(frozen=True)
class Refusal:
    """Why a document was refused: where (`path`, from the document's root) and what."""

    path: Path
    problem: str


def dotted(path: Sequence[str | int]) -> str:
    """`("orphans", "max", 1)` as `orphans.max[1]`, the way a reader writes a field path."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
    return text


def value_at(data: Any, path: Path) -> Any:
    """The value at `path` in parsed JSON `data`, or `ABSENT` if the path leads nowhere."""
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return ABSENT
    return data


class TooLong:
    """A JSON integer with too many digits to be read as an int at all (Python refuses past
    4300): what a reader of JSON text puts in its place, refused as out of range."""

    def __init__(self, digits: str) -> None:
        self.digits = len(digits.lstrip("-"))

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def refusal(
    exc: msgspec.ValidationError,
    data: Any = ABSENT,
    choices: Mapping[str, Sequence[str]] | None = None,
) -> Refusal:
    """msgspec's one-line refusal as a field path and a problem. `data` (the document, already
    parsed) lets the problem show the bad value; `choices` names the allowed values of a
    field (by its last name) where msgspec only says a value is invalid."""
    m = _MESSAGE.fullmatch(str(exc))
    assert m is not None  # the pattern matches any text
    said, path = m.group("problem"), _steps(m.group("path") or "")
    for pattern, problem in ((_MISSING, "missing required field"), (_UNKNOWN, "unknown field")):
        named = pattern.fullmatch(said)
        if named:
            return Refusal((*path, named.group("name")), problem)
    value = value_at(data, path)
    got = "" if value is ABSENT else f", got {shown(value)}"
    name = next((step for step in reversed(path) if isinstance(step, str)), "")
    bound = _BOUND.fullmatch(said)
    typed = _TYPE.fullmatch(said)
    if (said.startswith("Expected `int`") or bound) and out_of_int64(value):
        problem = f"{shown(value)} {RANGE_TEXT}"
    elif bound:
        problem = f"must be {bound.group('op')} {bound.group('bound')}{got}"
    elif said == "Expected `str` of length >= 1":
        problem = f"expected a non-empty string{got}"
    elif _INVALID.fullmatch(said):
        options = (choices or {}).get(name)
        problem = f"expected one of {list(options)}{got}" if options else f"not allowed{got}"
    elif typed:
        wanted = " or ".join(_WORDS.get(t, t) for t in typed.group("want").split(" | "))
        problem = f"expected {wanted}{got}"
    elif said == "Number out of range":
        problem = f"a number beyond a 64-bit float's range{got}"
    elif said == "Integer value out of range":  # past Python's limit on digits
        problem = f"an integer of more than {sys.get_int_max_str_digits()} digits"
    else:
        problem = said[:1].lower() + said[1:].replace("`", "") + got
    return Refusal(path, problem)


def out_of_int64(value: Any) -> bool:
    """Is `value` an integer outside the 64-bit range (or one too long to read at all)?"""
    return isinstance(value, TooLong) or (type(value) is int and not is_int64(value))


def _steps(text: str) -> Path:
    """`.events[3].id` as `("events", 3, "id")`. msgspec writes a value inside an untyped
    object as `[...]` (its key unsaid): the path stops before it, true as far as it goes."""
    known = text.split("[...]", 1)[0]
    return tuple(name if name else int(index) for name, index in _STEP.findall(known))
