"""The wire between bouncer-shim / bouncerctl and bouncerd: a sans-I/O frame codec.

Theory of operation
-------------------
A frame is a 4-byte big-endian length followed by exactly that many bytes holding one msgpack
map with string keys. The length is checked against MAX_FRAME_BYTES as soon as its four bytes are
in, before any of the body is buffered, so a peer cannot make us allocate more than that.

`encode` makes one frame; `encode_parts` makes the same bytes as a list of buffers, so a frame that
carries a large raw payload (an observation) is written with ``writev`` without copying the payload.

`FrameDecoder` takes bytes in (`receive_data`) and hands whole messages out (`next_message`). It
never touches a socket. For untrusted input it keeps one promise: it either parses a frame or
raises `ProtocolError`; no other exception escapes, and after an error the decoder stays broken
(the connection must be dropped, because framing is lost).

Messages
--------
Every request carries ``op`` and a request ``id`` (a non-negative int, unique per connection,
chosen by the sender so requests can be pipelined). Every reply carries the same ``id`` and
``ok`` (bool); a failed reply carries ``error: {code, message}``. Replies may arrive in any order.

The first request on a connection must be ``hello``. The ops and their fields are listed in
`OPS`; `check_request` validates a request against it, so the daemon never reads a field whose
type it did not check.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Final, NotRequired, TypedDict

import msgpack

from bouncerd.errors import ProtocolError

PROTOCOL_VERSION: Final = 1

# An observation carries one upstream JSON-RPC line, and the shim accepts lines up to
# bouncer_shim.relay.MAX_LINE_BYTES (64 MiB, enough for a 50 MB tool result). The frame limit
# leaves room for that line plus the envelope; anything bigger is a broken or hostile peer.
MAX_FRAME_BYTES: Final = 72 * 1024 * 1024

_HEADER = struct.Struct(">I")
HEADER_BYTES: Final = _HEADER.size

# Bytes values at least this large are left out of the packed frame by `encode_parts` and written from
# their own buffer. Below it one copy is cheaper than the extra encoding steps and system-call pieces.
BLOB_MIN_BYTES: Final = 64 * 1024

# Roles a peer may claim in hello. The daemon trusts the uid (checked by the kernel), not the role:
# the role only selects which ops make sense on the connection.
ROLES: Final = frozenset({"shim", "ctl", "hook"})

# op -> {field: allowed python types}. Fields not listed are refused (a typo in a peer is a bug we
# want to see, not a silently ignored key). A type of `None` in the tuple means the field may be nil.
_STR = (str,)
_INT = (int,)
_OPT_STR = (str, type(None))
_MAP = (dict,)
_OPT_MAP = (dict, type(None))
_OPT_BOOL = (bool, type(None))
_LIST = (list,)
_ID = (str, int, type(None))  # a JSON-RPC id: string, number, or absent

OPS: Final[Mapping[str, Mapping[str, tuple[type, ...]]]] = {
    # First message of every connection.
    "hello": {
        "version": _INT,
        "role": _STR,
        "session": _OPT_STR,  # session key (shim, hook); ctl sends nil
        "server": _OPT_STR,  # the shim's --name
        "upstream": _LIST,  # the upstream argv (list of str)
        "policy_path": _OPT_STR,  # the shim's --policy, absolute
        "instance": _OPT_STR,  # random per shim process; replayed observations are deduplicated by it
        "pid": _INT,
        "client_pid": _INT,
        # hook: session keys of the hook's ancestors, nearest first, up to the client; the daemon
        # picks the first known session (see bouncerd/server/hooks.py)
        "candidates": (list, type(None)),
    },
    # What the MCP client said about itself (initialize or server/discover or per-request _meta).
    "client": {
        "name": _OPT_STR,
        "version": _OPT_STR,
        "protocol": _OPT_STR,
        "capabilities": _OPT_MAP,
    },
    # A tools/list result from upstream (for pinning). Reply: {"changed": [names], "unpinned": [names]}.
    "tools": {"tools": _LIST},
    # One tools/call the client wants to make. Reply: see `verdict_reply`.
    "verdict": {
        "request_id": _ID,
        # The id's exact JSON text (ASCII), for the audit log: `request_id` is nil for ids msgpack
        # cannot carry (floats, integers past 64 bits, strings with lone surrogates).
        "request_id_json": _OPT_STR,
        "tool": _STR,
        "arguments": _MAP,
        # A 2026-07-28 retry: the requestState of the ask and the client's ElicitResult {action, content}.
        "request_state": _OPT_STR,
        "input_response": _OPT_MAP,
        # Set by the shim when the call cannot be checked (its arguments are not a JSON object): the
        # daemon denies it without deciding, so the refusal is audited like any other. `arguments`
        # is then {}.
        "invalid": _OPT_STR,
        # Absent or "tool" for a tools/call. Another request that carries data upstream (VERDICT_KINDS)
        # is judged too: `tool` is then its method and `arguments` its params.
        "kind": _OPT_STR,
        # A 2026-07-28 retry's inputResponses for the upstream's own input requests (the client's data
        # going upstream with the call): judged with it.
        "answers": _OPT_MAP,
    },
    # The calls the shim may forward before it asks (docs/how-it-works.md, "Decided before it is
    # asked"): `holding` is the epoch of the set it holds (nil: none; an acknowledged withdrawal).
    # Reply {"epoch": n, "tools": {tool: [argument names]}}, or tools nil: withdrawn. A request the
    # set does not change for waits for the next change; a newer request supersedes a waiting one.
    "fastpath": {"holding": (int, type(None))},
    # The verdict record of a call the shim forwarded under the set of epoch `epoch` (`seq`: per shim
    # instance, increasing). Judged and audited as a verdict is; replayed after a reconnect until
    # answered. Reply: see `verdict_reply`.
    "forwarded": {
        "request_id": _ID,
        "request_id_json": _OPT_STR,
        "tool": _STR,
        "arguments": _MAP,
        "epoch": _INT,
        "seq": _INT,
    },
    # What a person answered to an elicitation (docs/dev/approvals-protocol.md). Reply: a verdict reply.
    "answer": {"request_id": _ID, "code": _STR, "action": _STR, "choice": _OPT_STR},
    # One upstream output. `seq` is per shim instance, increasing; the daemon acks with the same seq and
    # ignores a seq it has already recorded (a replay after a reconnect). Reply: {"seq": n}.
    "observe": {
        "seq": _INT,
        "kind": _STR,  # "result" | "error" | "notification" | "request" | "other"
        "method": _OPT_STR,  # the request method this answers, or the notification/request method
        "tool": _OPT_STR,  # for a tools/call result: which tool
        "request_id": _ID,
        "payload": (bytes,),  # the raw JSON-RPC line as received from upstream
    },
    # A person's words, from a client hook (UserPromptSubmit): destinations in it are vouched for the
    # session of the hook's connection. Reply: {"vouched": n}.
    "vouch": {"text": _STR},
    # The output of one of the client's own tools (a hook's PostToolUse), recorded as untrusted like an
    # upstream output, under the server name `claude-code`. Reply: {"recorded": bool}.
    "observe_text": {"tool": _STR, "text": _STR, "request_id": _ID},
    # One call of the client's own network tool (a hook's PreToolUse: WebFetch, Bash), with the tool's
    # input as the client gave it. Reply: see `verdict_reply`.
    "check_builtin": {"tool": _STR, "input": _MAP, "request_id": _ID},
    # bouncerctl
    "status": {},
    "ping": {},
    "reload": {},  # reload policy.yaml; reply {"error": str|None}
    "pins": {"server": _OPT_STR},  # reply {"servers": [{name, upstream, tools: [{name, state, ...}]}]}
    "pins_accept": {"server": _STR, "tools": (list, type(None))},  # reply {"accepted": [names]}
    "pending": {},  # reply {"pending": [open codes: binding, question, expiry]}
    # reply: the open code's binding, question and expiry; with arguments: true also the call's
    # arguments while the daemon holds them (else arguments_missing says why)
    "approve_show": {"code": _STR, "arguments": _OPT_BOOL},
    "approve": {"code": _STR},  # grant one retry of the bound call; reply as approve_show + approved
    # a person accepts the loss of a damaged journal's state: the restricted state ends; reply
    # {"accepted": bool} (false when the daemon was not restricted)
    "accept_loss": {},
}

# ---- the requests, typed: one TypedDict per op, field for field as in OPS (a test holds them equal).
# A field `check_request` does not insist on is NotRequired.


class Request(TypedDict):
    op: str
    id: int


class HelloRequest(Request):
    version: int
    role: str
    session: NotRequired[str | None]
    server: NotRequired[str | None]
    upstream: NotRequired[list[Any]]
    policy_path: NotRequired[str | None]
    instance: NotRequired[str | None]
    pid: NotRequired[int]
    client_pid: NotRequired[int]
    candidates: NotRequired[list[Any] | None]


class ClientRequest(Request):
    name: NotRequired[str | None]
    version: NotRequired[str | None]
    protocol: NotRequired[str | None]
    capabilities: NotRequired[dict[str, Any] | None]


class ToolsRequest(Request):
    tools: list[Any]


class VerdictRequest(Request):
    request_id: NotRequired[str | int | None]
    request_id_json: NotRequired[str | None]
    tool: str
    arguments: dict[str, Any]
    request_state: NotRequired[str | None]
    input_response: NotRequired[dict[str, Any] | None]
    invalid: NotRequired[str | None]
    kind: NotRequired[str | None]
    answers: NotRequired[dict[str, Any] | None]


class FastpathRequest(Request):
    holding: NotRequired[int | None]


class ForwardedRequest(Request):
    request_id: NotRequired[str | int | None]
    request_id_json: NotRequired[str | None]
    tool: str
    arguments: dict[str, Any]
    epoch: int
    seq: int


class AnswerRequest(Request):
    request_id: NotRequired[str | int | None]
    code: NotRequired[str]
    action: NotRequired[str]
    choice: NotRequired[str | None]


class ObserveRequest(Request):
    seq: int
    kind: str
    method: NotRequired[str | None]
    tool: NotRequired[str | None]
    request_id: NotRequired[str | int | None]
    payload: bytes


class VouchRequest(Request):
    text: NotRequired[str]


class ObserveTextRequest(Request):
    tool: str
    text: str
    request_id: NotRequired[str | int | None]


class CheckBuiltinRequest(Request):
    tool: str
    input: dict[str, Any]
    request_id: NotRequired[str | int | None]


class StatusRequest(Request):
    pass


class PingRequest(Request):
    pass


class ReloadRequest(Request):
    pass


class PinsRequest(Request):
    server: NotRequired[str | None]


class AcceptLossRequest(Request):
    pass


class PinsAcceptRequest(Request):
    server: NotRequired[str]
    tools: NotRequired[list[Any] | None]


class PendingRequest(Request):
    pass


class ApproveShowRequest(Request):
    code: NotRequired[str]
    arguments: NotRequired[bool]  # also send the call's arguments, if this daemon still holds them


class ApproveRequest(Request):
    code: NotRequired[str]


REQUEST_TYPES: Final[Mapping[str, type[Request]]] = {
    "hello": HelloRequest,
    "client": ClientRequest,
    "tools": ToolsRequest,
    "verdict": VerdictRequest,
    "fastpath": FastpathRequest,
    "forwarded": ForwardedRequest,
    "answer": AnswerRequest,
    "observe": ObserveRequest,
    "vouch": VouchRequest,
    "observe_text": ObserveTextRequest,
    "check_builtin": CheckBuiltinRequest,
    "status": StatusRequest,
    "ping": PingRequest,
    "reload": ReloadRequest,
    "pins": PinsRequest,
    "pins_accept": PinsAcceptRequest,
    "pending": PendingRequest,
    "approve_show": ApproveShowRequest,
    "approve": ApproveRequest,
    "accept_loss": AcceptLossRequest,
}


# What a `verdict` judges: a tools/call, or another request that carries the agent's data upstream:
# resources/read and resources/subscribe ("resource"), prompts/get ("prompt"), completion/complete
# ("completion"), any other request with params ("message"), the client's answer to a server's sampling
# or elicitation request ("answer": `tool` is the server's method, `arguments` the result).
VERDICT_KINDS = ("tool", "resource", "prompt", "completion", "message", "answer")
OBSERVE_KINDS: Final = frozenset({"result", "error", "notification", "request", "other"})


# One packer for every frame: `msgpack.packb` builds (and frees) a packer and its buffer per call, which
# is half the cost of packing a small reply. Packing runs in C without releasing the GIL and calls no
# Python code (no `default` hook), so sharing it is safe even between threads.
_PACKER: Final = msgpack.Packer(use_bin_type=True)


def encode(message: Mapping[str, Any]) -> bytes:
    """One frame for one message. Raises ProtocolError if it would exceed MAX_FRAME_BYTES."""
    try:
        body: bytes = _PACKER.pack(message)
    except BaseException:
        _PACKER.reset()  # a refused value leaves the half-packed message in the shared buffer
        raise
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    return _HEADER.pack(len(body)) + body


def encode_parts(message: Mapping[str, Any]) -> list[bytes]:
    """`encode(message)` as buffers whose concatenation is that frame; large bytes values are not copied.

    An observation carries a raw upstream line of up to 64 MiB: packing it into a frame would copy it
    twice (msgpack's buffer, then the length prefix). Here each top-level bytes value of BLOB_MIN_BYTES
    or more is its own part, to be written with ``writev``. Raises ProtocolError like `encode`.
    """
    for value in message.values():  # a loop, not any(): this runs for every frame the shim sends
        if isinstance(value, bytes) and len(value) >= BLOB_MIN_BYTES:
            break
    else:
        return [encode(message)]
    packer = msgpack.Packer(use_bin_type=True)
    parts: list[bytes] = []
    head = bytearray(packer.pack_map_header(len(message)))
    for key, value in message.items():
        head += packer.pack(key)
        if isinstance(value, bytes) and len(value) >= BLOB_MIN_BYTES:
            head += _bin_header(len(value))
            parts += [bytes(head), value]
            head = bytearray()
        else:
            head += packer.pack(value)
    parts.append(bytes(head))
    length = sum(len(part) for part in parts)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    parts[0] = _HEADER.pack(length) + parts[0]
    return parts


def _bin_header(size: int) -> bytes:
    """msgpack's header for a bin value of `size` bytes (bin 8, bin 16 or bin 32)."""
    if size < 1 << 8:
        return b"\xc4" + struct.pack(">B", size)
    if size < 1 << 16:
        return b"\xc5" + struct.pack(">H", size)
    return b"\xc6" + struct.pack(">I", size)


class FrameDecoder:
    """Bytes in, messages out. See the module docstring for the one promise it keeps."""

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        self._max_frame = max_frame
        self._buf = bytearray()
        self._pos = 0
        self._need: int | None = None  # body length once the header is in
        self._broken: ProtocolError | None = None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._broken is not None:
            raise self._broken
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def bytes_wanted(self) -> int:
        """How many more bytes complete the frame in progress (for a reader that wants exact reads)."""
        if self._need is None:
            return max(HEADER_BYTES - self.buffered, 1)
        return max(self._need - self.buffered, 1)

    def next_message(self) -> dict[str, Any] | None:
        """The next whole message, or None if more bytes are needed."""
        if self._broken is not None:
            raise self._broken
        try:
            return self._next()
        except ProtocolError as exc:
            self._broken = exc
            raise

    def _next(self) -> dict[str, Any] | None:
        buffered = len(self._buf) - self._pos
        if self._need is None:
            if buffered < HEADER_BYTES:
                return None
            (length,) = _HEADER.unpack_from(self._buf, self._pos)
            if length > self._max_frame:
                raise ProtocolError(f"frame of {length} bytes announced; the limit is {self._max_frame}")
            if length == 0:
                raise ProtocolError("empty frame")
            self._pos += HEADER_BYTES
            self._need = length
            buffered -= HEADER_BYTES
        if buffered < self._need:
            return None
        start = self._pos
        self._pos += self._need
        self._need = None
        with memoryview(self._buf) as view:  # decoded in place: msgpack copies what it keeps
            message = decode_body(view[start : self._pos])
        if self._pos == len(self._buf):
            self._buf.clear()  # the common case: everything received is consumed
            self._pos = 0
        elif self._pos > 65536 and self._pos * 2 > len(self._buf):
            del self._buf[: self._pos]  # amortised: each byte is moved at most a constant number of times
            self._pos = 0
        return message


def decode_body(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    """One frame body (without its length prefix) to a message. Raises ProtocolError only."""
    try:
        obj = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types; all mean "not a frame"
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"a frame must hold a map, not {type(obj).__name__}")
    for key in obj:
        if not isinstance(key, str):
            raise ProtocolError("frame map keys must be strings")
    return obj


def check_request(message: Mapping[str, Any]) -> tuple[str, int]:
    """Validate a request frame against OPS; return (op, id). Raises ProtocolError."""
    op = message.get("op")
    rid = message.get("id")
    if not isinstance(rid, int) or isinstance(rid, bool) or rid < 0:
        raise ProtocolError("request without a valid id")
    if not isinstance(op, str) or op not in OPS:
        raise ProtocolError(f"unknown op {op!r}")
    fields = OPS[op]
    for key, value in message.items():
        if key in ("op", "id"):
            continue
        allowed = fields.get(key)
        if allowed is None:
            raise ProtocolError(f"{op}: unknown field {key!r}")
        if isinstance(value, bool) and bool not in allowed:
            raise ProtocolError(f"{op}: field {key!r} must not be a boolean")
        if not isinstance(value, allowed):
            raise ProtocolError(f"{op}: field {key!r} has type {type(value).__name__}")
    if op != "hello":  # a field that may not be nil must be there: a handler reads it unguarded
        for key, allowed in fields.items():
            if type(None) not in allowed and key not in message:
                raise ProtocolError(f"{op}: missing {key!r}")
    if op == "hello":
        for key in ("version", "role"):
            if key not in message:
                raise ProtocolError(f"hello: missing {key!r}")
        if message["role"] not in ROLES:
            raise ProtocolError(f"hello: unknown role {message['role']!r}")
    elif op == "verdict":
        for key in ("tool", "arguments"):
            if key not in message:
                raise ProtocolError(f"verdict: missing {key!r}")
        if message.get("kind") is not None and message["kind"] not in VERDICT_KINDS:
            raise ProtocolError(f"verdict: unknown kind {message['kind']!r}")
    elif op == "observe":
        for key in ("seq", "kind", "payload"):
            if key not in message:
                raise ProtocolError(f"observe: missing {key!r}")
        if message["kind"] not in OBSERVE_KINDS:
            raise ProtocolError(f"observe: unknown kind {message['kind']!r}")
    elif op in ("observe_text", "check_builtin"):
        for key in ("tool", "text") if op == "observe_text" else ("tool", "input"):
            if key not in message:
                raise ProtocolError(f"{op}: missing {key!r}")
    elif op == "tools" and "tools" not in message:
        raise ProtocolError("tools: missing 'tools'")
    return op, rid


def request(op: str, rid: int, **fields: Any) -> dict[str, Any]:
    return {"op": op, "id": rid, **fields}


def reply(rid: int, **fields: Any) -> dict[str, Any]:
    return {"id": rid, "ok": True, **fields}


def error_reply(rid: int, code: str, message: str) -> dict[str, Any]:
    return {"id": rid, "ok": False, "error": {"code": code, "message": message}}


def verdict_reply(
    rid: int,
    *,
    verdict: str,
    rule: str,
    reason: str,
    destination: str | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The daemon's answer to `verdict`. `reason` is safe to show the agent (no untrusted text)."""
    return reply(
        rid,
        verdict=verdict,
        rule=rule,
        reason=reason,
        destination=destination,
        provenance=dict(provenance) if provenance is not None else None,
    )
