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

The first request on a connection must be ``hello``. Every op is one row of `OP_TABLE`: its request
type (a TypedDict), the roles that may send it, how the daemon orders it among a connection's
requests, and whether it may read taint. `check_request` validates a request against the fields,
types, Literal values and required keys read off its request type, so the daemon never reads a field
whose type it did not check.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from types import UnionType
from typing import Any, Final, Literal, NotRequired, TypedDict, Union, get_args, get_origin, get_type_hints

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
Role = Literal["shim", "ctl", "hook"]

# What a `verdict` judges: a tools/call, or another request that carries the agent's data upstream:
# resources/read and resources/subscribe ("resource"), prompts/get ("prompt"), completion/complete
# ("completion"), any other request with params ("message"), the client's answer to a server's sampling
# or elicitation request ("answer": `tool` is the server's method, `arguments` the result).
VerdictKind = Literal["tool", "resource", "prompt", "completion", "message", "answer"]
VERDICT_KINDS: Final = get_args(VerdictKind)
ObserveKind = Literal["result", "error", "notification", "request", "other"]
OBSERVE_KINDS: Final = frozenset(get_args(ObserveKind))

# ---- the requests, typed: one TypedDict per op. The type is the check: `check_request` refuses a field
# the type does not name, a value of a type it does not allow, a value outside a Literal and a missing
# field the type requires, so a handler may read every required field unguarded. A field that may be
# nil is NotRequired: a peer may leave it out.


class Request(TypedDict):
    op: str
    id: int


class HelloRequest(Request):
    """First message of every connection."""

    version: int
    role: Role
    session: NotRequired[str | None]  # session key (shim, hook); ctl sends nil
    server: NotRequired[str | None]  # the shim's --name
    upstream: NotRequired[list[Any]]  # the upstream argv (list of str)
    policy_path: NotRequired[str | None]  # the shim's --policy, absolute
    instance: NotRequired[str | None]  # random per shim process; replayed observations are deduplicated by it
    pid: NotRequired[int]
    client_pid: NotRequired[int]
    # hook: session keys of the hook's ancestors, nearest first, up to the client; the daemon picks the
    # first known session (see bouncerd/server/hooks.py)
    candidates: NotRequired[list[Any] | None]


class ClientRequest(Request):
    """What the MCP client said about itself (initialize or server/discover or per-request _meta)."""

    name: NotRequired[str | None]
    version: NotRequired[str | None]
    protocol: NotRequired[str | None]
    capabilities: NotRequired[dict[str, Any] | None]


class ToolsRequest(Request):
    """A tools/list result from upstream (for pinning). Reply: {"changed": [names], "unpinned": [names]}."""

    tools: list[Any]


class VerdictRequest(Request):
    """One tools/call the client wants to make. Reply: see `verdict_reply`."""

    request_id: NotRequired[str | int | None]
    # The id's exact JSON text (ASCII), for the audit log: `request_id` is nil for ids msgpack cannot
    # carry (floats, integers past 64 bits, strings with lone surrogates).
    request_id_json: NotRequired[str | None]
    tool: str
    arguments: dict[str, Any]
    # A 2026-07-28 retry: the requestState of the ask and the client's ElicitResult {action, content}.
    request_state: NotRequired[str | None]
    input_response: NotRequired[dict[str, Any] | None]
    # Set by the shim when the call cannot be checked (its arguments are not a JSON object): the daemon
    # denies it without deciding, so the refusal is audited like any other. `arguments` is then {}.
    invalid: NotRequired[str | None]
    # Absent or "tool" for a tools/call. Another request that carries data upstream (VERDICT_KINDS) is
    # judged too: `tool` is then its method and `arguments` its params.
    kind: NotRequired[VerdictKind | None]
    # A 2026-07-28 retry's inputResponses for the upstream's own input requests (the client's data going
    # upstream with the call): judged with it.
    answers: NotRequired[dict[str, Any] | None]


class FastpathRequest(Request):
    """The calls the shim may forward before it asks (docs/how-it-works.md, "Decided before it is
    asked"): `holding` is the epoch of the set it holds (nil: none; an acknowledged withdrawal).
    Reply {"epoch": n, "tools": {tool: [argument names]}}, or tools nil: withdrawn. A request the set
    does not change for waits for the next change; a newer request supersedes a waiting one."""

    holding: NotRequired[int | None]


class ForwardedRequest(Request):
    """The verdict record of a call the shim forwarded under the set of epoch `epoch` (`seq`: per shim
    instance, increasing). Judged and audited as a verdict is; replayed after a reconnect until
    answered. Reply: see `verdict_reply`."""

    request_id: NotRequired[str | int | None]
    request_id_json: NotRequired[str | None]
    tool: str
    arguments: dict[str, Any]
    epoch: int
    seq: int


class AnswerRequest(Request):
    """What a person answered to an elicitation (docs/dev/approvals-protocol.md). Reply: a verdict reply."""

    request_id: NotRequired[str | int | None]
    code: str
    action: str
    choice: NotRequired[str | None]


class ObserveRequest(Request):
    """One upstream output. `seq` is per shim instance, increasing; the daemon acks with the same seq and
    ignores a seq it has already recorded (a replay after a reconnect). Reply: {"seq": n}."""

    seq: int
    kind: ObserveKind
    method: NotRequired[str | None]  # the request method this answers, or the notification/request method
    tool: NotRequired[str | None]  # for a tools/call result: which tool
    request_id: NotRequired[str | int | None]
    payload: bytes  # the raw JSON-RPC line as received from upstream


class VouchRequest(Request):
    """A person's words, from a client hook (UserPromptSubmit): destinations in it are vouched for the
    session of the hook's connection. Reply: {"vouched": n}."""

    text: str


class ObserveTextRequest(Request):
    """The output of one of the client's own tools (a hook's PostToolUse), recorded as untrusted like an
    upstream output, under the server name `claude-code`. Reply: {"recorded": bool}."""

    tool: str
    text: str
    request_id: NotRequired[str | int | None]


class CheckBuiltinRequest(Request):
    """One call of the client's own network tool (a hook's PreToolUse: WebFetch, Bash), with the tool's
    input as the client gave it. Reply: see `verdict_reply`."""

    tool: str
    input: dict[str, Any]
    request_id: NotRequired[str | int | None]


class StatusRequest(Request):
    pass


class PingRequest(Request):
    pass


class ReloadRequest(Request):
    """Reload policy.yaml; reply {"error": str|None}."""


class PinsRequest(Request):
    """Reply {"servers": [{name, upstream, tools: [{name, state, ...}]}]}."""

    server: NotRequired[str | None]


class AcceptLossRequest(Request):
    pass


class PinsAcceptRequest(Request):
    """Reply {"accepted": [names]}."""

    server: str
    tools: NotRequired[list[Any] | None]


class PendingRequest(Request):
    """Reply {"pending": [open codes: binding, question, expiry]}."""


class ApproveShowRequest(Request):
    """Reply: the open code's binding, question and expiry; with arguments: true also the call's arguments
    while the daemon holds them (else arguments_missing says why)."""

    code: str
    arguments: NotRequired[bool | None]


class ApproveRequest(Request):
    """Grant one retry of the bound call; reply as approve_show + approved."""

    code: str


# ---- the ops: one row each ------------------------------------------------------------------------

# How the daemon orders an op among the requests of its connection (bouncerd/server/ordering.py):
# - "first": hello, answered before anything else;
# - "observe": accepts an output: handled inline in arrival order, with back-pressure;
# - "lane": changes state a verdict reads: in arrival order behind any request still waiting there;
# - "inline": answered at once, changes nothing that orders with the above;
# - "async": answered by a task once its work off the event loop is done, while the connection goes on.
Order = Literal["first", "observe", "lane", "inline", "async"]

CTL_ONLY: Final = frozenset({"ctl"})


class Op:
    """One op of the wire. `roles` may send it (the others get an error reply, `role_refusal`);
    `reads_taint`: a lane op that may decide on taint, so waits for every output sent before it (the
    daemon's `needs_taint` says whether this request does). `fields` (name -> allowed Python types),
    `values` (name -> allowed values of a Literal) and `required` are read off `request`. (A plain
    class: `dataclasses` would cost the shim's start its import.)"""

    __slots__ = ("fields", "order", "reads_taint", "request", "required", "roles", "values")

    def __init__(
        self, request: type[Request], order: Order, roles: frozenset[str] = ROLES, reads_taint: bool = False
    ) -> None:
        self.request = request
        self.order = order
        self.roles = roles
        self.reads_taint = reads_taint
        self.fields, self.values, self.required = _fields_of(request)

    def __repr__(self) -> str:
        roles = sorted(self.roles)
        return f"Op({self.request.__name__}, {self.order!r}, roles={roles}, reads_taint={self.reads_taint})"


def _fields_of(
    request: type[Request],
) -> tuple[dict[str, tuple[type, ...]], dict[str, frozenset[object]], tuple[str, ...]]:
    """The fields of a request type: allowed Python types, allowed values where a Literal says, and the
    fields that are not NotRequired. (Read off the hints: with postponed annotations, 3.11's TypedDict
    cannot tell NotRequired apart in `__required_keys__`.)"""
    fields: dict[str, tuple[type, ...]] = {}
    values: dict[str, frozenset[object]] = {}
    required: list[str] = []
    for name, hint in get_type_hints(request, include_extras=True).items():
        if name in ("op", "id"):
            continue
        if get_origin(hint) is NotRequired:
            (hint,) = get_args(hint)
        else:
            required.append(name)
        types: list[type] = []
        allowed: set[object] = set()
        literal = False
        for part in get_args(hint) if get_origin(hint) in (Union, UnionType) else (hint,):
            if part is type(None) or part is None:
                types.append(type(None))
            elif get_origin(part) is Literal:
                literal = True
                allowed.update(get_args(part))
                types.extend(t for t in {type(v) for v in get_args(part)} if t not in types)
            else:
                origin = get_origin(part) or part
                if not isinstance(origin, type):
                    raise TypeError(f"{request.__name__}.{name}: cannot check a value of type {hint}")
                types.append(origin)
        fields[name] = tuple(types)
        if literal:
            values[name] = frozenset(allowed | ({None} if type(None) in types else set()))
    return fields, values, tuple(required)


# Every op, one row: adding an op is one request type and one row here, one handler in the daemon's
# table (checked against this at start), and nothing else.
OP_TABLE: Final[Mapping[str, Op]] = {
    "hello": Op(HelloRequest, "first"),
    "client": Op(ClientRequest, "lane"),
    "tools": Op(ToolsRequest, "lane"),
    "verdict": Op(VerdictRequest, "lane", reads_taint=True),
    "fastpath": Op(FastpathRequest, "async"),
    "forwarded": Op(ForwardedRequest, "inline"),
    "answer": Op(AnswerRequest, "inline"),
    "observe": Op(ObserveRequest, "observe"),
    "vouch": Op(VouchRequest, "inline"),
    "observe_text": Op(ObserveTextRequest, "observe"),
    "check_builtin": Op(CheckBuiltinRequest, "lane", reads_taint=True),
    "status": Op(StatusRequest, "inline"),
    "ping": Op(PingRequest, "inline"),
    "reload": Op(ReloadRequest, "async"),
    "pins": Op(PinsRequest, "inline"),
    # Open to every role: a shim's connection accepts pins in tests and benchmarks, and the role is no
    # boundary (the uid is); accepting only lets a listed tool be called, and judged.
    "pins_accept": Op(PinsAcceptRequest, "inline"),
    # A person's approvals: never from the agent's side of the wire.
    "pending": Op(PendingRequest, "inline", roles=CTL_ONLY),
    "approve_show": Op(ApproveShowRequest, "inline", roles=CTL_ONLY),
    "approve": Op(ApproveRequest, "inline", roles=CTL_ONLY),
    # A person accepts the loss of a damaged journal's state (the restricted state ends); reply
    # {"accepted": bool} (false when the daemon was not restricted).
    "accept_loss": Op(AcceptLossRequest, "inline", roles=CTL_ONLY),
}

# op -> {field: allowed Python types}, read off the request types (`type(None)` in the tuple: may be nil).
OPS: Final[Mapping[str, Mapping[str, tuple[type, ...]]]] = {op: row.fields for op, row in OP_TABLE.items()}
REQUEST_TYPES: Final[Mapping[str, type[Request]]] = {op: row.request for op, row in OP_TABLE.items()}


def role_refusal(op: str, role: str | None) -> tuple[str, str] | None:
    """The error (code, message) for `op` sent on a connection of `role`, or None if the role may send it."""
    roles = OP_TABLE[op].roles
    if role in roles:
        return None
    if roles == CTL_ONLY:
        return "not_ctl", f"{op} is a person's act: bouncerctl (role ctl) only"
    return "wrong_role", f"{op} is not an op of role {role}"


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
    """Validate a request frame against its op's request type (`OP_TABLE`); return (op, id).
    Raises ProtocolError."""
    op = message.get("op")
    rid = message.get("id")
    if not isinstance(rid, int) or isinstance(rid, bool) or rid < 0:
        raise ProtocolError("request without a valid id")
    row = OP_TABLE.get(op) if isinstance(op, str) else None
    if row is None or not isinstance(op, str):
        raise ProtocolError(f"unknown op {op!r}")
    fields = row.fields
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
        values = row.values.get(key)
        if values is not None and value not in values:
            raise ProtocolError(f"{op}: unknown {key} {value!r}")
    for key in row.required:  # a handler reads it unguarded
        if key not in message:
            raise ProtocolError(f"{op}: missing {key!r}")
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
