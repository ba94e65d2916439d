"""The relay's server-to-client half, sans I/O: each line the upstream writes, classified and emitted.

Theory of operation
-------------------
`ServerSide` is the part of `Relay` (relay.py) that reads the upstream's output; the relay inherits it
and owns the state it works on (the requests remembered by id, the link, the outbox, the shim's own
tools/list). Every line goes through the outbox (outbox.py) but the answers to the shim's own
tools/list: it is numbered, observed by bouncerd and released in order. A response is classified by
the request it answers (method, tool, whether it was a later page); a ``tools/list`` result is also
remembered for the resync and reported with the pages before it; an ``initialize`` result tells the
relay which protocol era the client and server speak. A server request that reuses an id the shim
reserved for its questions is refused, and ``notifications/tools/list_changed`` makes the next call
list the tools again and drops the fast-path set. Lines of ENVELOPE_ONLY_BYTES or more are classified
from their envelope (envelope.py), not parsed whole, unless they could hide a top-level ``method``
(`_may_hide_a_method`); a line past the splitter's limit is discarded
and the request it answers gets a JSON-RPC error.
"""

from __future__ import annotations

from typing import Any, Final

from bouncer_shim import jsonrpc
from bouncer_shim.actions import Action, Diagnose, SendUpstream
from bouncer_shim.asking import Asking, ClientProfile
from bouncer_shim.envelope import peek, peek_ends
from bouncer_shim.fastset import FastSet
from bouncer_shim.jsonrpc import IdKey, id_key, wire_id, wire_text
from bouncer_shim.lines import MAX_LINE_BYTES, OversizedLine
from bouncer_shim.outbox import Outbox, Output
from bouncer_shim.selflist import SelfLister
from bouncer_shim.sync import LinkSync

# Requests remembered to classify their responses. A client keeps a handful in flight; the bound only
# matters for one that never gets answers. Past it the oldest is forgotten (its response is still
# relayed and observed, only without its method).
MAX_TRACKED_REQUESTS: Final = 4096

# Upstream lines at least this long are classified from their envelope (see envelope.py) instead of a
# full parse: below it json.loads costs a few ms, above it the parse would dominate the relay's work.
ENVELOPE_ONLY_BYTES: Final = 1024 * 1024

# Server requests whose answers carry the client's data (the model's text, what a person typed)
# upstream: the answer is judged before it is passed on.
ANSWERS_GATED: Final = frozenset({"sampling/createMessage", "elicitation/create"})


# A line classified from its envelope must not hide a top-level "method" member. The walks from
# the two ends stop at the first structured value from each side, so a member between two
# structured ones is never seen (`{"id":1,"result":{...},"method":"sampling/createMessage",
# "params":{...}}`), while the client's parser takes that line for a server request and answers it,
# and the answer would pass upstream unjudged (ANSWERS_GATED). A JSON string that decodes to "method"
# is either spelled so or holds a \u escape, so a line with either goes to the full parse.
def _may_hide_a_method(line: bytes) -> bool:
    return b'"method"' in line or (b"\\" in line and b"\\u" in line)


class ServerSide:
    """Server to client; `Relay` holds the state (its __slots__) and the client-to-server half."""

    __slots__ = ()

    _actions: list[Action]
    _fast: FastSet
    _lister: SelfLister
    _outbox: Outbox
    _profile: ClientProfile
    _requests: dict[IdKey, tuple[str, str | None, bool]]  # key -> (method, tool, paged)
    _server_info: Any
    _server_requests: dict[IdKey, str]  # server requests whose answers are judged
    _sync: LinkSync
    asking: Asking

    def upstream_line(self, line: bytes) -> None:
        if not line.strip():
            return
        out = Output(line)
        tools: list[Any] | None = None
        if len(line) >= ENVELOPE_ONLY_BYTES:
            envelope = peek(line)
            request_id = envelope.members.get("id")
            if (
                envelope.is_response
                and not self._answers_tools_list(request_id)
                and not _may_hide_a_method(line)
            ):
                self._classify_response(out, request_id, envelope.first_structured == "error")
                self._outbox.emit(out, None, self._sync.state)
                return
        message = jsonrpc.parse(line)
        if isinstance(message, dict):
            method = message.get("method")
            if isinstance(method, str):
                if (refusal := self.asking.refuse_shadowing(message)) is not None:
                    self._diagnose("refused a server request that used an id reserved by the shim")
                    self._actions.append(SendUpstream(refusal))
                    return
                if method == "notifications/tools/list_changed":
                    self._lister.tools.stale()  # the next call lists again (and sees what changed)
                    self._fast.drop()
                out.kind = "request" if "id" in message else "notification"
                out.method = wire_text(method)
                out.request_id = wire_id(message.get("id"))
                if method in ANSWERS_GATED and (key := id_key(message.get("id"))) is not None:
                    if len(self._server_requests) >= MAX_TRACKED_REQUESTS:
                        del self._server_requests[next(iter(self._server_requests))]
                    self._server_requests[key] = method
            elif "id" in message and ("result" in message or "error" in message):
                if self._lister.tools.claims(message["id"]):  # the shim's own: never relayed
                    self._lister.upstream_response(message, len(line))
                    return
                result = message.get("result")
                paged = self._classify_response(out, message["id"], "result" not in message)
                if out.method == "initialize":
                    self._profile.initialized(result)
                    self._lister.upstream_initialize("result" in message)
                if isinstance(result, dict):
                    meta = result.get("_meta")
                    if isinstance(meta, dict) and jsonrpc.SERVER_INFO_KEY in meta:
                        self._server_info = meta[jsonrpc.SERVER_INFO_KEY]
                    if out.method == "tools/list" and isinstance(result.get("tools"), list):
                        tools = self._sync.remember_tools(result["tools"], paged)
                        self._lister.tools.client_page(paged, result.get("nextCursor"))
        self._outbox.emit(out, tools, self._sync.state)

    def upstream_oversized(self, line: OversizedLine) -> None:
        envelope = peek_ends(line.head, line.tail)
        request_id = envelope.members.get("id")
        key = id_key(request_id) if "id" in envelope.members else None
        if self._lister.tools.claims(request_id):
            self._diagnose(f"discarded a {line.size}-byte tools/list answer (limit {MAX_LINE_BYTES})")
            self._lister.upstream_oversized(line.size)
            return
        if key is None or self._requests.pop(key, None) is None:
            self._diagnose(f"discarded a {line.size}-byte line from the server (limit {MAX_LINE_BYTES})")
            return
        message = (
            f"Internal error: the server response of {line.size} bytes exceeds the limit of {MAX_LINE_BYTES}"
        )
        self._diagnose(f"discarded a {line.size}-byte response from the server (limit {MAX_LINE_BYTES})")
        self._outbox.emit_made(jsonrpc.error_response(request_id, jsonrpc.INTERNAL_ERROR, message))

    def _answers_tools_list(self, request_id: Any) -> bool:
        key = id_key(request_id)
        if self._lister.tools.claims(request_id):
            return True
        return key is not None and self._requests.get(key, ("",))[0] == "tools/list"

    def _classify_response(self, out: Output, request_id: Any, is_error: bool) -> bool:
        key = id_key(request_id)
        method, tool, paged = self._requests.pop(key, (None, None, False)) if key else (None, None, False)
        out.kind = "error" if is_error else "result"
        # The client's spelling: a lone surrogate cannot cross the wire, and an observation that cannot
        # be sent is lost, which refuses every later call of this shim.
        out.method = wire_text(method)
        out.tool = wire_text(tool)
        out.request_id = wire_id(request_id)
        return paged

    def _diagnose(self, message: str) -> None:
        self._actions.append(Diagnose(message))
