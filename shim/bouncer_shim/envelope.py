"""Reading a JSON-RPC envelope from the ends of a line without parsing the middle.

Theory of operation
-------------------
A large upstream line is almost always a response whose bulk is one result (a file, a query, an
image). To classify it the relay needs only the envelope: the ``id`` and whether the first structured
member is ``result`` or ``error``. Parsing 10 MB of JSON for that would cost the shim more than all
its other work on the line, so `peek` reads the envelope from the two ends:

- from the front, after ``{``: members whose values are scalars (string, number, true, false, null),
  then the key of the first member whose value is an object or array;
- from the back, before ``}``: members whose values are scalars, walking right to left.

Both walks stay at the top level by construction: they stop at the first value that is not a scalar,
so nothing nested is ever mistaken for an envelope member. Each member is confirmed with `json.loads`
on its own few bytes. The two serialisations in the wild are covered: the Python SDK writes
``{"jsonrpc":"2.0","id":1,"result":{...}}`` and the TypeScript SDK ``{"result":{...},"jsonrpc":"2.0",
"id":1}``. Anything else yields an `Envelope` without an id and the caller parses the whole line.
A member between two structured values is seen by neither walk, so an envelope never says that
such a member is absent: a caller that must know (serverside.py: a ``method`` hidden there makes the
line a server request to the client) checks the bytes itself.

The same walk over the excerpts of an over-long line (`lines.OversizedLine`) recovers which request it
answered. Both walks are linear in the bytes they look at and never raise.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

# How many bytes at each end are searched. The envelope members are a few dozen bytes; a generous
# window tolerates pretty-printing and long string ids without making a hostile line costly.
WINDOW_BYTES: Final = 4096

_STRING = rb'"(?:[^"\\\x00-\x1f]|\\.)*"'
_SCALAR = rb"(?:" + _STRING + rb"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)"
_OPEN = re.compile(rb"[ \t\r\n]*\{")
_MEMBER = re.compile(rb"[ \t\r\n]*(" + _STRING + rb")[ \t\r\n]*:[ \t\r\n]*(" + _SCALAR + rb")[ \t\r\n]*,")
_STRUCTURED_KEY = re.compile(rb"[ \t\r\n]*(" + _STRING + rb")[ \t\r\n]*:[ \t\r\n]*[\[{]")
_WS = b" \t\r\n"
_BARE = frozenset(b"0123456789+-.eEtruefalsn")


class Envelope:
    __slots__ = ("first_structured", "members")

    def __init__(self) -> None:
        self.members: dict[str, Any] = {}  # top-level members with scalar values
        self.first_structured: str | None = None  # key of the first member holding an object or array

    @property
    def is_response(self) -> bool:
        return "id" in self.members and self.first_structured in ("result", "error")

    def __repr__(self) -> str:
        return f"Envelope(members={self.members!r}, first_structured={self.first_structured!r})"


def peek(line: bytes) -> Envelope:
    return peek_ends(line[:WINDOW_BYTES], line[-WINDOW_BYTES:])


def peek_ends(head: bytes, tail: bytes) -> Envelope:
    envelope = Envelope()
    _walk_head(head, envelope)
    for key, value in _walk_tail(tail):
        envelope.members.setdefault(key, value)
    return envelope


def _walk_head(head: bytes, envelope: Envelope) -> None:
    opened = _OPEN.match(head)
    if opened is None:
        return
    pos = opened.end()
    while (member := _MEMBER.match(head, pos)) is not None:
        pair = _decode_member(member.group(1), member.group(2))
        if pair is None:
            return
        envelope.members.setdefault(*pair)
        pos = member.end()
    structured = _STRUCTURED_KEY.match(head, pos)
    if structured is not None:
        key = _loads(structured.group(1))
        if isinstance(key, str):
            envelope.first_structured = key


def _walk_tail(tail: bytes) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    end = _skip_ws_back(tail, len(tail))
    if end == 0 or tail[end - 1] != ord("}"):
        return found
    end -= 1
    while True:
        value_end = _skip_ws_back(tail, end)
        value_start = _scalar_start(tail, value_end)
        if value_start is None:
            return found
        colon = _skip_ws_back(tail, value_start)
        if colon == 0 or tail[colon - 1] != ord(":"):
            return found
        key_end = _skip_ws_back(tail, colon - 1)
        if key_end == 0 or tail[key_end - 1] != ord('"'):
            return found
        key_start = _string_start(tail, key_end - 1)
        if key_start is None:
            return found
        pair = _decode_member(tail[key_start:key_end], tail[value_start:value_end])
        if pair is None:
            return found
        found.append(pair)
        comma = _skip_ws_back(tail, key_start)
        if comma == 0 or tail[comma - 1] != ord(","):
            return found
        end = comma - 1


def _skip_ws_back(data: bytes, end: int) -> int:
    while end > 0 and data[end - 1] in _WS:
        end -= 1
    return end


def _scalar_start(data: bytes, end: int) -> int | None:
    """Start of the scalar that ends at `end`, or None if what ends there is not a scalar."""
    if end == 0:
        return None
    if data[end - 1] == ord('"'):
        return _string_start(data, end - 1)
    start = end
    while start > 0 and data[start - 1] in _BARE:
        start -= 1
    return start if start < end else None


def _string_start(data: bytes, close: int) -> int | None:
    """Index of the quote opening the string whose closing quote is at `close`.

    Inside a valid JSON string every quote is escaped by an odd run of backslashes, so the first
    quote to the left preceded by an even run (zero included) is the opening one.
    """
    pos = close
    while (pos := data.rfind(b'"', 0, pos)) >= 0:
        run = 0
        while pos - run > 0 and data[pos - run - 1] == ord("\\"):
            run += 1
        if run % 2 == 0:
            return pos
    return None


def _decode_member(key: bytes, value: bytes) -> tuple[str, Any] | None:
    k = _loads(key)
    v = _loads(value)
    if not isinstance(k, str) or v is _FAILED:
        return None
    if isinstance(v, list | dict):
        return None
    return k, v


_FAILED: Final = object()


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return _FAILED
