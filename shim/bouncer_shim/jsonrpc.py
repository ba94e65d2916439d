"""JSON-RPC 2.0 as the shim needs it: parse a line once, key ids, and build the few messages it makes.

Theory of operation
-------------------
The relay parses every line exactly once: strict UTF-8 first (`json.loads` on bytes would guess
UTF-16/32 and let lone surrogates through, which the server's parser may read differently), then JSON.
Client lines (`parse_client`) must also not repeat a key in any object: the shim must judge the same
message the server will act on. Anything that fails is `INVALID` (or `REPEATED`); no other exception
escapes, whatever the bytes.

JSON-RPC ids are strings, numbers or null. `id_key` turns one into a hashable key that keeps
``1`` and ``"1"`` apart, so a response is matched to its request exactly as the client will match it.

The shim makes few messages itself: a JSON-RPC error (`error_response`), the "blocked" tool result
(`blocked_result`), and for asking a person (asking.py) an ``elicitation/create`` request
(`request_line`), its ``notifications/cancelled`` (`cancelled_notification`), an ``input_required``
tool result (`input_required_result`), and a client call re-written without Bouncer's state (`dump`).
They are serialised ASCII-only, so an id or a reason holding any code point still yields valid UTF-8
on the wire, and they follow the protocol version the client speaks: in the 2026-07-28 era a result
carries ``resultType`` and the server's ``_meta`` stamp. (tests/unit/test_relay_messages.py and
test_relay_asking.py validate them against the SDK's per-version models.)
"""

from __future__ import annotations

import json
from json.scanner import make_scanner
from typing import Any, Final, cast

# Standard JSON-RPC error codes (https://www.jsonrpc.org/specification#error_object).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# A request other than tools/call that Bouncer did not forward (a tool call gets an isError result).
BLOCKED_ERROR: Final = -32001

# Protocol revisions that negotiate with `initialize`. A `_meta` protocol version outside this set
# (2026-07-28 and later) marks the per-request-envelope era.
HANDSHAKE_VERSIONS: Final = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"

BLOCKED_PREFIX: Final = "[bouncer blocked] "

# Why the shim itself refused a call (the daemon's reasons come with its verdicts).
UNREACHABLE_REASON: Final = (
    "bouncerd (the Bouncer daemon) is unreachable, so this call could not be checked; tool calls are "
    "refused until it is back. Check it with `bouncerctl status`."
)
NOT_ANSWERING_REASON: Final = (
    "bouncerd (the Bouncer daemon) is running but did not answer in time, so this call could not be "
    "checked and was refused; it will not be sent later. Check it with `bouncerctl status`."
)
UNRECORDED_REASON: Final = (
    "bouncerd could not record this server's latest output (its disk may be full), so calls cannot be "
    "checked against it and are refused; the shim sends the output again every second, and calls are "
    "checked again as soon as bouncerd records it."
)
LOST_REASON: Final = (
    "Bouncer lost track of some of this server's output while bouncerd was unreachable, so it can no "
    "longer check calls safely; every tool call through this server is refused until it is restarted."
)

UNENCODABLE_REASON: Final = "the call's arguments cannot be sent to bouncerd for checking."


class _Invalid:
    __slots__ = ()


INVALID: Final = _Invalid()

IdKey = tuple[str, Any]


class RepeatedKeyError(ValueError):
    """A JSON object names the same key twice."""


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise RepeatedKeyError
    return obj


# Python keeps the last of two equal keys; a server's parser may keep the first. Then the shim would
# check one message and the server act on another (`{"method":"tools/call","method":"ping"}` would be
# relayed as a ping and run as a call), so client messages that repeat a key are refused outright.
_CLIENT_DECODER: Final = json.JSONDecoder(object_pairs_hook=_refuse_repeats)

REPEATED: Final = _Invalid()


_DECODER: Final = json.JSONDecoder()  # json.loads's own settings
# Each decoder's own scanner (what its `scan_once` is), made once. (typeshed types the scanner's
# argument as a scanner; at run time it reads the decoder's settings.)
_SCAN: Final = make_scanner(cast(Any, _DECODER))
_CLIENT_SCAN: Final = make_scanner(cast(Any, _CLIENT_DECODER))


def _decode(decoder: json.JSONDecoder, scan: make_scanner, text: str) -> Any:
    """`decoder.decode(text)`. A line that is one JSON value with nothing around it (nearly every
    line) goes to the C scanner directly: `decode` adds two regular-expression matches for the
    whitespace around the value, a third of the cost of parsing a short message. Anything else
    (whitespace at either end, extra data, no value at all) goes through `decode`, errors included."""
    try:
        value, end = scan(text, 0)
    except StopIteration:  # no value starts at 0: leading whitespace, or not JSON
        return decoder.decode(text)
    return value if end == len(text) else decoder.decode(text)


def parse_client(line: bytes) -> Any:
    """The JSON value of a client line; INVALID if it is not UTF-8 JSON, REPEATED if an object in it
    repeats a key. Never raises."""
    try:
        return _decode(_CLIENT_DECODER, _CLIENT_SCAN, line.decode("utf-8"))
    except RepeatedKeyError:
        return REPEATED
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return INVALID


def parse(line: bytes) -> Any:
    """The JSON value of an upstream line (repeated keys allowed: it is only observed), or INVALID."""
    try:
        return _decode(_DECODER, _SCAN, line.decode("utf-8"))
    except (ValueError, RecursionError):
        return INVALID


def id_key(value: Any) -> IdKey | None:
    """A hashable key for a JSON-RPC id, or None if `value` cannot be one."""
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return ("n", value)
    if value is None:
        return ("z", None)
    return None


def _dump(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("ascii")


def serialise(value: Any) -> bytes:
    """One element of a client batch as a line of its own (the only re-serialisation the relay does)."""
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def error_response(request_id: Any, code: int, message: str) -> bytes:
    try:
        return _dump({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})
    except ValueError:  # an id we cannot write back (NaN): answer as for an unreadable request
        return _dump({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


def blocked_result(request_id: Any, reason: str, *, modern: bool, server_info: Any = None) -> bytes:
    """The tool result for a call the shim did not forward: ``isError`` and a ``[bouncer blocked]`` text."""
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": BLOCKED_PREFIX + reason}],
        "isError": True,
    }
    if modern:
        result["resultType"] = "complete"
        if server_info is not None:
            result["_meta"] = {SERVER_INFO_KEY: server_info}
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
    try:
        return _dump(message)
    except ValueError:  # a server stamp holding NaN cannot be repeated; drop the stamp, keep the answer
        result.pop("_meta", None)
    try:
        return _dump(message)
    except ValueError:  # an id JSON cannot write back (1e999 parsed as infinity, NaN): answer as for an
        message["id"] = None  # unreadable request, never by crashing with the other calls in flight
        return _dump(message)


def dump(message: dict[str, Any]) -> bytes | None:
    """A message as one ASCII line, or None if it holds what JSON cannot write (NaN, infinities)."""
    try:
        return _dump(message)
    except (ValueError, TypeError, RecursionError):
        return None


def request_line(request_id: str, method: str, params: dict[str, Any]) -> bytes | None:
    """A request of the shim's own to the client (None if `params` cannot be written)."""
    return dump({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def cancelled_notification(request_id: str, reason: str) -> bytes:
    params = {"requestId": request_id, "reason": reason}
    return _dump({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})


def input_required_result(
    request_id: Any, input_requests: dict[str, Any], state: str, server_info: Any = None
) -> bytes | None:
    """A 2026-07-28 tool result asking the client for input before the call can go on."""
    result: dict[str, Any] = {"resultType": "input_required", "inputRequests": input_requests}
    result["requestState"] = state
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
    if server_info is not None:
        result["_meta"] = {SERVER_INFO_KEY: server_info}
        line = dump(message)
        if line is not None:
            return line
        del result["_meta"]  # a stamp that cannot be written is dropped, as for blocked_result
    return dump(message)


def wire_text(value: Any) -> str | None:
    """`value` if it is a string the daemon's wire can carry (msgpack refuses lone surrogates)."""
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def wire_id(value: Any) -> str | int | None:
    """A JSON-RPC id as the daemon's wire carries it (string or 64-bit int); anything else is nil."""
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**64:
        return value
    return wire_text(value)


class _Literal(str):
    """A number's text as the client wrote it."""


# Reads a line again keeping each float's text (`parse_float`, `parse_constant` get the literal).
_LITERAL_NUMBERS: Final = json.JSONDecoder(parse_float=_Literal, parse_constant=_Literal)


def id_json(value: Any, line: bytes) -> str:
    """The exact JSON text of request `value`'s id, ASCII only, for the audit log: lossless where the
    wire's `wire_id` is not (a float, an integer past 64 bits, a string with a lone surrogate, which
    JSON escapes as ``\\udXXX``; and null, which a missing id also reads as). A float is read again
    from its `line`, so ``1.50`` and ``1e999`` stay as written (a parsed float would not)."""
    if type(value) is int:  # the commonest id (not a bool): json writes an int as its repr
        return int.__repr__(value)
    if isinstance(value, float):
        try:
            message = _LITERAL_NUMBERS.decode(line.decode("utf-8"))
        except (ValueError, RecursionError):
            message = None
        literal = message.get("id") if isinstance(message, dict) else None
        if isinstance(literal, _Literal):
            return str(literal)
    return json.dumps(value, ensure_ascii=True)
