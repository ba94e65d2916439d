"""The shim's JSON-RPC interception, sans I/O: lines and daemon replies in, actions out.

Theory of operation
-------------------
`Relay` sits between the MCP client (stdin/stdout of the shim), the upstream server (a child
process) and bouncerd (frames over a socket). It never touches any of them: the pump feeds it what
arrived (`client_line`, `upstream_line`, `daemon_message`, `daemon_connected`, `daemon_lost`, ...)
and carries out what `take_actions` returns, in order: `SendClient`, `SendUpstream`, `SendDaemon`,
`Diagnose` (a line for stderr) and `Stop` (exit with a status).

Client to server. Each line is parsed once; a message the relay does not intercept is forwarded as
the original bytes. Lines that are not UTF-8 JSON, or repeat a key in an object (the server's parser
might read another message), are answered with a JSON-RPC error and never forwarded. ``initialize``,
``server/discover`` and a request's ``_meta`` describe the client: that goes to the daemon as a
``client`` op (again only when it changes). Requests are remembered by id so responses can be
classified. A ``tools/call`` is *held*: only the daemon's ``allow`` forwards the original line;
anything else answers with a ``[bouncer blocked]`` tool result and the server never sees the call (a
``tools/call`` without an id is dropped). A ``notifications/cancelled`` naming a held call drops the
call and itself. Batches (JSON arrays; removed from MCP in 2025-06-18) are split and each element
handled as if it came alone, so a batch cannot smuggle a call past the gate; those elements, and a
retry stripped of Bouncer's requestState, are the only things the relay re-serialises. A verdict of
``ask`` puts a question to a person (asking.py): ``elicitation/create`` (the call stays held until
the ``answer`` op's verdict), an ``input_required`` result, or a refusal naming a one-time code.

Server to client. Every line is an *output*: it gets a sequence number, is sent to the daemon as an
``observe`` (raw bytes), and waits in the outbox until acknowledged; outputs are released to the
client strictly in arrival order. A ``tools/list`` result is also sent as a ``tools`` op and waits
for that ack too. Observations are pipelined: nothing waits for one ack before sending the next.
Lines of a megabyte or more are classified from their envelope (envelope.py), not parsed whole.

The daemon link has four states (`LinkState`):

- CONNECTING (start-up, perhaps while autostarting a daemon): outputs and calls are held.
- SYNCING (connected): hello, the last client info, the last tools list and every observation not
  yet acknowledged (replayed ones first) are sent; verdicts wait until all of those are acked, so
  the daemon knows everything the client has seen before it judges a call. A refused hello (a bad
  ``--policy``) is a `Stop` with status 2.
- UP: calls are asked for as they come.
- DOWN: every call is refused at once (fail closed); outputs are released without an ack but kept
  for replay, up to MAX_REPLAY_BYTES / MAX_REPLAY_MESSAGES. Past that bound observations are lost
  and the relay refuses every call for the rest of its life.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping
from typing import Any, Final

from bouncer_shim import jsonrpc
from bouncer_shim.actions import Action, Diagnose, SendClient, SendDaemon, SendUpstream, Stop, daemon_frame
from bouncer_shim.asking import Ask, Asking, ClientProfile, Held
from bouncer_shim.envelope import peek, peek_ends
from bouncer_shim.jsonrpc import INVALID, IdKey, id_key, wire_id, wire_text
from bouncer_shim.lines import MAX_LINE_BYTES, OversizedLine
from bouncerd import wire

# Outputs released while the daemon is down are kept for replay up to these bounds: one maximal line,
# or many small ones. A daemon away through more output than this has missed something for good.
MAX_REPLAY_BYTES: Final = MAX_LINE_BYTES
MAX_REPLAY_MESSAGES: Final = 10_000

# Requests remembered to classify their responses. A client keeps a handful in flight; the bound only
# matters for one that never gets answers. Past it the oldest is forgotten (its response is still
# relayed and observed, only without its method).
MAX_TRACKED_REQUESTS: Final = 4096

# Tools remembered from the last tools/list (all its pages) to resend after a reconnect.
MAX_REMEMBERED_TOOLS: Final = 10_000

# Upstream lines at least this long are classified from their envelope (see envelope.py) instead of a
# full parse: below it json.loads costs a few ms, above it the parse would dominate the relay's work.
ENVELOPE_ONLY_BYTES: Final = 1024 * 1024

NOT_AN_OBJECT: Final = "Invalid Request: not a JSON-RPC object"


class LinkState(enum.Enum):
    CONNECTING = "connecting"
    SYNCING = "syncing"
    UP = "up"
    DOWN = "down"


class _Output:
    """One upstream line on its way to the client."""

    __slots__ = ("kind", "line", "method", "request_id", "sent", "seq", "tool", "waiting")

    def __init__(self, line: bytes, seq: int | None) -> None:
        self.line = line
        self.seq = seq  # None: made by the shim, nothing to observe
        self.kind = "other"
        self.method: str | None = None
        self.tool: str | None = None
        self.request_id: str | int | None = None
        self.waiting = 0  # acks still needed before release
        self.sent = False  # observe sent on the current connection


class _Pending:
    """A request to the daemon awaiting its reply."""

    __slots__ = ("op", "sync", "target")

    def __init__(self, op: str, target: _Output | Held | None, sync: bool) -> None:
        self.op = op
        self.target = target
        self.sync = sync  # part of the after-connect resend that verdicts wait for


class Relay:
    def __init__(self, hello: Mapping[str, Any], *, ask_token: bytes | None = None) -> None:
        self._hello = dict(hello)
        self.state = LinkState.CONNECTING
        self._actions: list[Action] = []
        self._next_rid = 0
        self._next_seq = 0
        self._pending: dict[int, _Pending] = {}
        self._acks_pending = 0  # entries of _pending that are not verdicts
        self._sync_left = 0
        self._outbox: deque[_Output] = deque()
        self._outbox_bytes = 0
        self._replay: dict[int, _Output] = {}  # seq -> output released while down, not yet acked
        self._replay_bytes = 0
        self.observations_lost = False
        self._waiting: list[Held] = []  # calls not yet asked (link not up)
        self._held: dict[IdKey, list[Held]] = {}
        self._held_bytes = 0
        self._requests: dict[IdKey, tuple[str, str | None, bool]] = {}  # key -> (method, tool, paged)
        self._profile = ClientProfile()
        self.asking = Asking(ask_token)
        self._tools: list[Any] | None = None
        self._server_info: Any = None

    # ---- outputs and introspection -------------------------------------------------------------

    def take_actions(self) -> list[Action]:
        actions, self._actions = self._actions, []
        return actions

    @property
    def unreleased_bytes(self) -> int:
        """Upstream bytes waiting for an ack (the pump stops reading upstream past a bound)."""
        return self._outbox_bytes

    @property
    def held_bytes(self) -> int:
        """Client bytes held for a verdict (the pump stops reading the client past a bound)."""
        return self._held_bytes

    @property
    def awaiting_acks(self) -> bool:
        """Whether a request other than a verdict awaits the daemon's reply (those should be quick;
        a verdict may legitimately wait for a person)."""
        return self._acks_pending > 0

    @property
    def modern(self) -> bool:  # the 2026-07-28 era: per-request envelopes, no server requests
        return self._profile.modern

    @property
    def is_flushed(self) -> bool:
        """Nothing from upstream is waiting to be released."""
        return not self._outbox

    # ---- the daemon link -------------------------------------------------------------------------

    def daemon_connected(self) -> None:
        if self.state is LinkState.DOWN:
            self._diagnose(f"reconnected to bouncerd; replaying {len(self._replay)} observations")
        self.state = LinkState.SYNCING
        self._sync_left = 0
        self._ask("hello", None, self._hello, sync=True)
        if self._profile.fields is not None:
            self._ask("client", None, self._profile.fields, sync=True)
        if self._tools is not None:
            self._ask("tools", None, {"tools": self._tools}, sync=True)
        for out in self._replay.values():
            self._observe(out, sync=True)
        for out in self._outbox:
            if out.seq is not None and not out.sent:
                out.waiting = 1
                self._observe(out, sync=True)
        self._check_synced()

    def daemon_lost(self) -> None:
        """The connection closed or could not be made: refuse calls, release outputs, keep them."""
        if self.state is LinkState.DOWN:
            return
        self.state = LinkState.DOWN
        self._diagnose("bouncerd is unreachable; tool calls are refused until it is back")
        pending, self._pending = self._pending, {}
        self._acks_pending = 0
        self._sync_left = 0
        for out in self._outbox:
            if out.seq is not None and (out.waiting or not out.sent):  # not acknowledged
                self._keep_for_replay(out)
            self._actions.append(SendClient(out.line))
        self._outbox.clear()
        self._outbox_bytes = 0
        for entry in pending.values():
            if entry.op in ("verdict", "answer") and isinstance(entry.target, Held):
                self._refuse_held(entry.target, jsonrpc.UNREACHABLE_REASON)
        for ask in self.asking.drop_all():  # nobody could take the answer: end the questions
            self._end_question(ask, "bouncerd is unreachable")
            self._refuse_held(ask.held, jsonrpc.UNREACHABLE_REASON)
        waiting, self._waiting = self._waiting, []
        for held in waiting:
            self._refuse_held(held, jsonrpc.UNREACHABLE_REASON)

    def daemon_message(self, message: Mapping[str, Any]) -> None:
        rid = message.get("id")
        entry = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if entry is None:
            self._diagnose(f"ignoring a bouncerd reply that answers nothing (id {rid!r})")
            return
        if entry.op != "verdict":
            self._acks_pending -= 1
        ok = message.get("ok") is True
        error = _error_text(message)
        if entry.op == "hello" and not ok:
            self._actions.append(Stop(f"bouncerd refused this shim: {error}", 2))
            return
        if entry.op in ("verdict", "answer") and isinstance(entry.target, Held):
            self._decided(entry.target, message if ok else None, error)
        elif entry.op == "observe" and isinstance(entry.target, _Output):
            if not ok:
                self._diagnose(f"bouncerd did not record an observation ({error})")
                self._lose_observations()
            self._acked(entry.target)
        elif entry.op == "tools":
            if not ok:
                self._diagnose(f"bouncerd refused a tools list ({error})")
            if isinstance(entry.target, _Output):
                self._acked(entry.target)
        elif not ok:
            self._diagnose(f"bouncerd refused {entry.op} ({error})")
        if entry.sync:
            self._sync_left -= 1
            self._check_synced()

    # ---- client to server ------------------------------------------------------------------------

    def client_line(self, line: bytes) -> None:
        if not line.strip():
            return
        message = jsonrpc.parse_client(line)
        if isinstance(message, dict):
            self._client_message(message, line)
        elif isinstance(message, list) and message:
            for element in message:
                if isinstance(element, dict):
                    self._client_message(element, jsonrpc.serialise(element))
                else:
                    self._answer_error(None, jsonrpc.INVALID_REQUEST, NOT_AN_OBJECT)
        elif message is INVALID:
            self._answer_error(None, jsonrpc.PARSE_ERROR, "Parse error: the line is not UTF-8 JSON")
        elif message is jsonrpc.REPEATED:
            self._answer_error(None, jsonrpc.INVALID_REQUEST, "Invalid Request: an object repeats a key")
        else:
            self._answer_error(None, jsonrpc.INVALID_REQUEST, NOT_AN_OBJECT)

    def client_oversized(self, line: OversizedLine) -> None:
        self._answer_error(
            None,
            jsonrpc.INVALID_REQUEST,
            f"Invalid Request: a message of {line.size} bytes exceeds the limit of {MAX_LINE_BYTES}",
        )

    def _client_message(self, message: dict[str, Any], line: bytes) -> None:
        method = message.get("method")
        if not isinstance(method, str):  # a response to a server request, or junk the server may judge
            if not self.asking.claims(message.get("id")):
                self._actions.append(SendUpstream(line))
            elif (answered := self.asking.answered(message)) is not None:  # else late: dropped
                self._answer(*answered, wait=True)
            return
        params = message.get("params")
        if "id" not in message:
            if method == "tools/call":  # a call nobody waits for is still a call: never unchecked
                self._diagnose("dropped a tools/call sent as a notification (no id)")
                return
            if method == "notifications/cancelled" and self._cancel(params):
                return
            self._actions.append(SendUpstream(line))
            return
        request_id = message["id"]
        key = id_key(request_id)
        if key is None:
            self._answer_error(None, jsonrpc.INVALID_REQUEST, "Invalid Request: bad id")
            return
        fields = self._profile.note(method, params)
        if fields is not None and self.state in (LinkState.UP, LinkState.SYNCING):
            self._ask("client", None, fields)
        if method == "tools/call":
            self._gate(key, request_id, message, line)
            return
        paged = method == "tools/list" and isinstance(params, dict) and params.get("cursor") is not None
        self._remember(key, method, None, paged)
        self._actions.append(SendUpstream(line))

    def _gate(self, key: IdKey, request_id: Any, message: dict[str, Any], line: bytes) -> None:
        params: Any = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str):
            self._answer_error(request_id, jsonrpc.INVALID_PARAMS, "Invalid params: tools/call needs a name")
            return
        arguments = params.get("arguments", {})
        self._remember(key, "tools/call", name, False)
        invalid = None
        if not isinstance(arguments, dict):  # asked anyway, so the refusal is audited
            arguments, invalid = {}, "the call's arguments are not a JSON object, so they cannot be checked."
        if self.observations_lost:
            reason = jsonrpc.LOST_REASON
        elif self.state is LinkState.DOWN:
            reason = jsonrpc.UNREACHABLE_REASON
        elif (retry := self.asking.retry(message, params)) is not None and retry.ours and not retry.forward:
            reason = "the call cannot be re-written without Bouncer's approval state, so it is not sent."
        else:
            held = Held(key, request_id, line, name, arguments, retry, invalid)
            self._held.setdefault(key, []).append(held)
            self._held_bytes += len(line)
            if self.state is LinkState.UP:
                self._ask_verdict(held)
            else:
                self._waiting.append(held)
            return
        self._refuse(key, request_id, reason)

    def _ask_verdict(self, held: Held) -> None:
        fields = {"request_id": wire_id(held.request_id), "tool": held.tool, "arguments": held.arguments}
        if held.invalid is not None:
            fields["invalid"] = held.invalid
        if held.retry is not None:
            fields.update(held.retry.fields)
        if not self._ask("verdict", held, fields):
            self._release_held(held)
            self._refuse(held.key, held.request_id, jsonrpc.UNENCODABLE_REASON)

    def _decided(self, held: Held, reply: Mapping[str, Any] | None, error: str) -> None:
        if held.dropped:
            return
        if reply is not None and reply.get("verdict") == "ask":
            question = self.asking.question(held, reply, self._profile, self._server_info)
            if question is not None:
                line, holds = question
                if not holds:  # answered with an input_required result: the retry is a new call
                    self._release_held(held)
                    self._requests.pop(held.key, None)
                self._actions.append(SendClient(line))
                return
        self._release_held(held)
        if reply is None:
            self._refuse(held.key, held.request_id, f"bouncerd could not decide on this call ({error}).")
        elif reply.get("verdict") == "allow" and held.invalid is None:
            self._actions.append(SendUpstream(held.upstream_line))
        else:
            reason = reply.get("reason")
            if not isinstance(reason, str) or not reason:
                reason = f"bouncerd refused this call (rule {reply.get('rule')!r})."
            self._refuse(held.key, held.request_id, reason)

    def _cancel(self, params: Any) -> bool:
        """Drop the held call a cancellation names; False if it names none (then it is forwarded)."""
        key = id_key(params.get("requestId")) if isinstance(params, dict) else None
        calls = self._held.pop(key, None) if key is not None else None
        if not calls:
            return False
        for held in calls:
            held.dropped = True
            self._held_bytes -= len(held.line)
            if (ask := self.asking.drop(held)) is not None:
                self._end_question(ask, "the call was cancelled")
                self._answer(ask, "cancel", None, wait=False)
        self._waiting = [h for h in self._waiting if not h.dropped]
        self._requests.pop(calls[0].key, None)
        return True

    def _release_held(self, held: Held) -> None:
        calls = self._held.get(held.key)
        if calls and held in calls:
            calls.remove(held)
            self._held_bytes -= len(held.line)
            if not calls:
                del self._held[held.key]

    def _refuse_held(self, held: Held, reason: str) -> None:
        if not held.dropped:
            self._release_held(held)
            self._refuse(held.key, held.request_id, reason)

    # ---- asking a person (the state is asking.py's) --------------------------------------------------

    def tick(self, now: float) -> None:
        """Time out questions nobody answered (the pump calls it while `asking.waiting`)."""
        for ask in self.asking.expired(now):
            self._end_question(ask, "nobody answered in time")
            self._answer(ask, "timeout", None, wait=True)

    def client_closed(self) -> None:
        """The client will send nothing more: its questions are dismissed (their codes stay open)."""
        for ask in self.asking.drop_all():
            self._answer(ask, "cancel", None, wait=False)
            self._refuse_held(ask.held, "the client closed its input before a person answered.")

    def _answer(self, ask: Ask, action: str, choice: str | None, *, wait: bool) -> None:
        """Tell the daemon what became of a question; `wait`: the held call goes by its reply."""
        if not self._ask("answer", ask.held if wait else None, ask.answer(action, choice)) and wait:
            self._refuse_held(ask.held, jsonrpc.UNENCODABLE_REASON)

    def _end_question(self, ask: Ask, reason: str) -> None:
        self._actions.append(SendClient(jsonrpc.cancelled_notification(ask.request_id, reason)))

    def _refuse(self, key: IdKey, request_id: Any, reason: str) -> None:
        self._requests.pop(key, None)
        line = jsonrpc.blocked_result(request_id, reason, modern=self.modern, server_info=self._server_info)
        self._actions.append(SendClient(line))

    def _answer_error(self, request_id: Any, code: int, message: str) -> None:
        self._actions.append(SendClient(jsonrpc.error_response(request_id, code, message)))

    def _remember(self, key: IdKey, method: str, tool: str | None, paged: bool) -> None:
        requests = self._requests
        requests.pop(key, None)
        if len(requests) >= MAX_TRACKED_REQUESTS:
            del requests[next(iter(requests))]
        requests[key] = (method, tool, paged)

    # ---- server to client ------------------------------------------------------------------------

    def upstream_line(self, line: bytes) -> None:
        if not line.strip():
            return
        out = _Output(line=line, seq=None)
        tools: list[Any] | None = None
        paged = False
        if len(line) >= ENVELOPE_ONLY_BYTES:
            envelope = peek(line)
            if envelope.is_response and not self._answers_tools_list(envelope.members["id"]):
                self._classify_response(out, envelope.members["id"], envelope.first_structured == "error")
                self._emit(out, None, False)
                return
        message = jsonrpc.parse(line)
        if isinstance(message, dict):
            method = message.get("method")
            if isinstance(method, str):
                if (refusal := self.asking.refuse_shadowing(message)) is not None:
                    self._diagnose("refused a server request that used an id reserved by the shim")
                    self._actions.append(SendUpstream(refusal))
                    return
                out.kind = "request" if "id" in message else "notification"
                out.method = wire_text(method)
                out.request_id = wire_id(message.get("id"))
            elif "id" in message and ("result" in message or "error" in message):
                result = message.get("result")
                paged = self._classify_response(out, message["id"], "result" not in message)
                if out.method == "initialize":
                    self._profile.initialized(result)
                if isinstance(result, dict):
                    meta = result.get("_meta")
                    if isinstance(meta, dict) and jsonrpc.SERVER_INFO_KEY in meta:
                        self._server_info = meta[jsonrpc.SERVER_INFO_KEY]
                    if out.method == "tools/list" and isinstance(result.get("tools"), list):
                        tools = result["tools"]
        self._emit(out, tools, paged)

    def upstream_oversized(self, line: OversizedLine) -> None:
        envelope = peek_ends(line.head, line.tail)
        request_id = envelope.members.get("id")
        key = id_key(request_id) if "id" in envelope.members else None
        if key is None or self._requests.pop(key, None) is None:
            self._diagnose(f"discarded a {line.size}-byte line from the server (limit {MAX_LINE_BYTES})")
            return
        message = (
            f"Internal error: the server response of {line.size} bytes exceeds the limit of {MAX_LINE_BYTES}"
        )
        self._diagnose(f"discarded a {line.size}-byte response from the server (limit {MAX_LINE_BYTES})")
        made = _Output(line=jsonrpc.error_response(request_id, jsonrpc.INTERNAL_ERROR, message), seq=None)
        made.sent = True
        self._outbox.append(made)
        self._outbox_bytes += len(made.line)
        self._release()

    def _answers_tools_list(self, request_id: Any) -> bool:
        key = id_key(request_id)
        return key is not None and self._requests.get(key, ("",))[0] == "tools/list"

    def _classify_response(self, out: _Output, request_id: Any, is_error: bool) -> bool:
        key = id_key(request_id)
        method, tool, paged = self._requests.pop(key, (None, None, False)) if key else (None, None, False)
        out.kind = "error" if is_error else "result"
        out.method = method
        out.tool = tool
        out.request_id = wire_id(request_id)
        return paged

    def _emit(self, out: _Output, tools: list[Any] | None, paged: bool) -> None:
        out.seq = self._next_seq
        self._next_seq += 1
        if tools is not None:
            self._tools = [*self._tools, *tools] if paged and self._tools is not None else list(tools)
            del self._tools[MAX_REMEMBERED_TOOLS:]
        if self.state is LinkState.DOWN:
            self._actions.append(SendClient(out.line))
            self._keep_for_replay(out)
            return
        self._outbox.append(out)
        self._outbox_bytes += len(out.line)
        if self.state is LinkState.CONNECTING:
            return
        out.waiting = 1
        if tools is not None and self._ask("tools", out, {"tools": tools}):
            out.waiting += 1
        self._observe(out)

    def _observe(self, out: _Output, *, sync: bool = False) -> None:
        out.sent = True
        fields = {
            "seq": out.seq,
            "kind": out.kind,
            "method": out.method,
            "tool": out.tool,
            "request_id": out.request_id,
            "payload": out.line,
        }
        if not self._ask("observe", out, fields, sync=sync):
            self._diagnose("an observation could not be encoded for bouncerd")
            self._lose_observations()
            self._acked(out)

    def _acked(self, out: _Output) -> None:
        if out.seq is not None and self._replay.pop(out.seq, None) is not None:
            self._replay_bytes -= len(out.line)
        if out.waiting:
            out.waiting -= 1
        self._release()

    def _release(self) -> None:
        outbox = self._outbox
        while outbox and outbox[0].waiting == 0 and outbox[0].sent:
            out = outbox.popleft()
            self._outbox_bytes -= len(out.line)
            self._actions.append(SendClient(out.line))

    def _keep_for_replay(self, out: _Output) -> None:
        if out.seq is None or out.seq in self._replay:
            return
        if (
            self.observations_lost
            or len(self._replay) >= MAX_REPLAY_MESSAGES
            or self._replay_bytes + len(out.line) > MAX_REPLAY_BYTES
        ):
            self._lose_observations()
            return
        out.waiting = 1
        out.sent = False
        self._replay[out.seq] = out
        self._replay_bytes += len(out.line)

    def _lose_observations(self) -> None:
        if not self.observations_lost:
            self.observations_lost = True
            self._diagnose("observations were lost; every tool call will be refused from now on")

    # ---- requests to the daemon ------------------------------------------------------------------

    def _ask(
        self, op: str, target: _Output | Held | None, fields: Mapping[str, Any], *, sync: bool = False
    ) -> bool:
        rid = self._next_rid
        frame = daemon_frame(wire.request(op, rid, **fields))
        if frame is None:
            return False
        self._next_rid += 1
        self._pending[rid] = _Pending(op, target, sync)
        if op != "verdict":
            self._acks_pending += 1
        if sync:
            self._sync_left += 1
        self._actions.append(SendDaemon(frame))
        return True

    def _check_synced(self) -> None:
        if self.state is LinkState.SYNCING and self._sync_left == 0:
            self.state = LinkState.UP
            waiting, self._waiting = self._waiting, []
            for held in waiting:
                if not held.dropped:
                    self._ask_verdict(held)

    def _diagnose(self, message: str) -> None:
        self._actions.append(Diagnose(message))


def _error_text(message: Mapping[str, Any]) -> str:
    error = message.get("error")
    if isinstance(error, dict):
        return f"{error.get('code', 'error')}: {error.get('message', '')}"
    return "no reason given"
