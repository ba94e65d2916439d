"""The shim's JSON-RPC interception, sans I/O: lines and daemon replies in, actions out.

Theory of operation
-------------------
`Relay` sits between the MCP client (stdin/stdout of the shim), the upstream server (a child
process) and bouncerd (frames over a socket). It never touches any of them: the pump feeds it what
arrived (`client_line`, `upstream_line`, `daemon_message`, `daemon_connected`, `daemon_lost`, ...)
and carries out what `take_actions` returns, in order: `SendClient`, `SendUpstream`, `SendDaemon`,
`Diagnose` (a line for stderr) and `Stop` (exit with a status).

The relay is the composition of smaller machines, and routes messages between them: `LinkSync`
(sync.py: the link's state, every request to bouncerd and its reply, the resync after a connect),
`Outbox` (outbox.py: server output numbered, observed, released in order, replayed), `FastSet`
(fastset.py: the calls forwarded before asking, and their records), `HeldCalls`
(held.py: calls waiting for a verdict), `SelfLister` (selflist.py: the shim's own tools/list) and
`Asking` (asking.py: questions to a person). Two kinds of
asking meet here, and the names keep them apart: the relay *requests* a verdict (or any op) from
bouncerd; a verdict of ``ask`` makes it *ask a person* through the client.

Client to server. Each line is parsed once; a message the relay does not intercept is forwarded as
the original bytes. Lines that are not UTF-8 JSON, or repeat a key in an object (the server's parser
might read another message), are answered with a JSON-RPC error and never forwarded. ``initialize``,
``server/discover`` and a request's ``_meta`` describe the client: that goes to the daemon as a
``client`` op (again only when it changes). Requests are remembered by id so responses can be
classified. A ``tools/call`` the daemon's fast-path set covers (fastset.py: a read whose verdict
cannot depend on history) is forwarded at once, its record sent to bouncerd without waiting. Any
other ``tools/call`` is *held*: only the daemon's ``allow`` forwards the original line;
anything else answers with a ``[bouncer blocked]`` tool result and the server never sees the call (a
``tools/call`` without an id is dropped). A call on a server whose tools the shim has not seen
listed (or that announced ``notifications/tools/list_changed`` since) waits while the shim lists them
itself (selflist.py), so bouncerd judges it against the server's full, current list. A
``notifications/cancelled`` naming a held call drops the
call and itself. Batches (JSON arrays; removed from MCP in 2025-06-18) are split and each element
handled as if it came alone, so a batch cannot smuggle a call past the gate; those elements, and a
retry stripped of Bouncer's requestState, are the only things the relay re-serialises. A verdict of
``ask`` puts a question to a person (asking.py): ``elicitation/create`` (the call stays held until
the ``answer`` op's verdict), an ``input_required`` result, or a refusal naming a one-time code.

Server to client (serverside.py, `ServerSide`, which `Relay` inherits). Every line goes through the
outbox but the answers to the shim's own tools/list; a ``tools/list`` result is also remembered for
the resync and reported with the pages before it. Lines of a megabyte or more are classified from
their envelope (envelope.py), not parsed whole, unless their bytes could hold a top-level
``method`` the envelope does not show (serverside.py).

The daemon away. While the link is CONNECTING calls are held and outputs queued. While it is
SYNCING calls wait for the resync. While it is DOWN every call is refused at once (fail closed) and
outputs are released unobserved, kept for replay up to a bound; past it (`observations_lost`) the
relay refuses every call for the rest of its life. A refused hello (a bad ``--policy``) is a `Stop`
with status 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bouncer_shim import jsonrpc
from bouncer_shim.actions import Action, SendClient, SendUpstream, Stop
from bouncer_shim.asking import Asking, ClientProfile, Question
from bouncer_shim.fastset import Ask, FastSet, Record
from bouncer_shim.held import Held, HeldCalls
from bouncer_shim.jsonrpc import INVALID, IdKey, id_key
from bouncer_shim.lines import MAX_LINE_BYTES, OversizedLine
from bouncer_shim.outbox import Outbox, Output
from bouncer_shim.selflist import RESERVED_ID_MESSAGE, SelfLister
from bouncer_shim.serverside import MAX_TRACKED_REQUESTS, ServerSide
from bouncer_shim.sync import LinkState, LinkSync

NOT_AN_OBJECT: Final = "Invalid Request: not a JSON-RPC object"

# Requests that carry the agent's data upstream other than tools/call, by the kind bouncerd judges
# them as (wire.VERDICT_KINDS). Any other request with params is judged as a "message", unless it is
# one of the requests below that only ask the server for its lists or state.
GATED_METHODS: Final = {
    "resources/read": "resource",
    "resources/subscribe": "resource",
    "prompts/get": "prompt",
    "completion/complete": "completion",
}
UNGATED_METHODS: Final = frozenset(
    {
        "initialize", "ping", "server/discover", "tools/list", "resources/list",
        "resources/templates/list", "prompts/list", "resources/unsubscribe", "logging/setLevel",
        "tasks/get", "tasks/list", "tasks/cancel", "tasks/result",
    }
)  # fmt: skip


# A held answer to a server request (serverside.ANSWERS_GATED) is keyed by its id's key with this prefix,
# so it cannot collide with a client request of the same id.
ANSWER_KEY_PREFIX: Final = "answer:"


def message_kind(method: str, params: Any) -> str | None:
    """The kind bouncerd judges a request as, or None when it carries nothing to a destination."""
    kind = GATED_METHODS.get(method)
    if kind is not None:
        return kind
    if method in UNGATED_METHODS or not params:
        return None
    if isinstance(params, dict) and set(params) <= {"_meta", "cursor"}:
        return None  # only the protocol's own fields (2026-07-28 sends _meta with every request)
    return "message"


class Relay(ServerSide):
    __slots__ = (
        "_actions",
        "_fast",
        "_held",
        "_lister",
        "_outbox",
        "_profile",
        "_requests",
        "_server_info",
        "_server_requests",
        "_sync",
        "asking",
        "daemon_down_note",
    )

    def __init__(self, hello: Mapping[str, Any], *, ask_token: bytes | None = None) -> None:
        self._actions: list[Action] = []  # shared with the machines below, emptied by take_actions
        self._sync = LinkSync(hello, self._actions)
        # Why no daemon is coming (the pump copies `DaemonLink.why_down`: failing starts and where
        # their log is, or autostart off), added to the refusal of calls made while it is down.
        self.daemon_down_note: str | None = None
        self._outbox = Outbox(self._sync.request, self._actions)
        self._held = HeldCalls(self._sync.request)
        self._fast = FastSet(self._sync)
        self._lister = SelfLister(self._sync, self._held, self._actions, self._refuse_held)
        self.asking = Asking(ask_token)
        self._profile = ClientProfile()
        self._requests: dict[IdKey, tuple[str, str | None, bool]] = {}  # key -> (method, tool, paged)
        self._server_requests: dict[IdKey, str] = {}  # server requests whose answers are judged
        self._server_info: Any = None

    # ---- outputs and introspection -------------------------------------------------------------

    def take_actions(self) -> list[Action]:
        actions = self._actions.copy()
        self._actions.clear()
        return actions

    @property
    def state(self) -> LinkState:
        return self._sync.state

    @property
    def observations_lost(self) -> bool:
        """Whether the daemon missed server output for good (then every call is refused)."""
        return self._outbox.observations_lost

    @property
    def unreleased_bytes(self) -> int:
        """Upstream bytes not yet released or not yet acknowledged (the pump stops reading upstream
        past a bound)."""
        return self._outbox.unreleased_bytes + self._outbox.unacked_bytes

    @property
    def held_bytes(self) -> int:
        """Client bytes held for a verdict (the pump stops reading the client past a bound)."""
        return self._held.held_bytes

    @property
    def awaiting_acks(self) -> bool:
        """Whether a request other than a verdict awaits the daemon's reply (those should be quick;
        a verdict may legitimately wait for a person)."""
        return self._sync.awaiting_acks

    @property
    def awaiting_verdict(self) -> bool:
        """Whether a verdict has been requested and not answered yet (the pump polls for it)."""
        return self._sync.awaiting_verdict

    @property
    def wake_for_daemon(self) -> bool:
        """Whether the pump should wake for bouncerd's next reply (`LinkSync.wake_for_replies`);
        always while an output is released only once bouncerd acknowledges it."""
        return not self._outbox.release_on_write or self._sync.wake_for_replies

    @property
    def modern(self) -> bool:  # the 2026-07-28 era: per-request envelopes, no server requests
        return self._profile.modern

    @property
    def is_released(self) -> bool:
        """Nothing from upstream is waiting to be released."""
        return self._outbox.is_released

    @property
    def is_flushed(self) -> bool:
        """Nothing from upstream is waiting to be released or acknowledged, and bouncerd has answered
        the record of every call forwarded before asking."""
        return self._outbox.is_flushed and not self._fast.unacked

    # ---- the daemon link -------------------------------------------------------------------------

    def daemon_connected(self) -> None:
        sync = self._sync
        if sync.state is LinkState.DOWN:
            self._diagnose(f"reconnected to bouncerd; replaying {self._outbox.replay_count} observations")
        self._outbox.release_on_write = False  # until this daemon's hello reply says otherwise
        self._fast.supported = False  # likewise
        sync.connected(self._profile.fields)
        self._fast.resend()  # the records of forwarded calls first: verdicts wait for them
        self._outbox.resend()
        if sync.check_synced():
            self._request_waiting_verdicts()

    def daemon_lost(self, refusal: str = jsonrpc.UNREACHABLE_REASON) -> None:
        """The connection closed or could not be made (or the pump gave up on a daemon that did not
        answer: `refusal` then says so): refuse calls, release outputs, keep them."""
        if self._sync.state is LinkState.DOWN:
            return
        pending = self._sync.lost()
        self._fast.link_lost()
        if refusal is jsonrpc.UNREACHABLE_REASON:
            self._diagnose("bouncerd is unreachable; tool calls are refused until it is back")
        self._outbox.lost()
        for entry in pending:
            if entry.op in ("verdict", "answer") and isinstance(entry.target, Held):
                self._refuse_held(entry.target, refusal)
        for question in self.asking.drop_all():  # nobody could take the answer: end the questions
            self._end_question(question, "bouncerd is unreachable")
            self._refuse_held(question.held, refusal)
        self._lister.link_lost()
        for held in (*self._held.take_waiting(), *self._held.take_unlisted()):
            self._refuse_held(held, refusal)

    def daemon_behind(self, behind: bool) -> None:
        """Whether bouncerd is behind (the pump's word, fastset.BEHIND_SECONDS): no fast path then."""
        self._fast.behind = behind

    def verdicts_overdue(self, now: float) -> bool:
        """Whether a verdict has waited past its bound (`sync.VERDICT_WAIT_SECONDS`)."""
        return self._sync.verdicts_overdue(now)

    def verdict_deadline(self) -> float | None:
        return self._sync.verdict_deadline()

    def daemon_message(self, message: Mapping[str, Any]) -> None:
        rid = message.get("id")
        entry = self._sync.replied(rid)
        if entry is None:
            self._diagnose(f"ignoring a bouncerd reply that answers nothing (id {rid!r})")
            return
        op, target = entry.op, entry.target
        ok = message.get("ok") is True
        error = "" if ok else _error_text(message)
        if op == "hello" and not ok:
            self._actions.append(Stop(f"bouncerd refused this shim: {error}", 2))
            return
        if op == "hello":
            self._outbox.daemon_releases_on_write(message.get("release_on_write") is True)
            self._fast.supported = message.get("fast_path") is True
        if op == "fastpath" and isinstance(target, Ask):
            if (note := self._fast.replied(target, ok, message)) is not None:
                self._diagnose(note)
        elif op == "forwarded" and isinstance(target, Record):
            self._fast.recorded(target)
            if not ok:  # the audit log misses a call that went through: refuse from now on
                self._diagnose(f"bouncerd did not record a forwarded call ({error})")
                self._outbox.lose_observations()
            elif message.get("rule") == "fastpath.late":
                self._diagnose(f"a forwarded call was recorded late: {message.get('reason')}")
        elif op in ("verdict", "answer") and isinstance(target, Held):
            self._decided(target, message if ok else None, error)
        elif op == "observe" and isinstance(target, Output):
            if ok:
                self._outbox.recorded(target)
            elif _error_code(message) == "io":  # kept and sent again until the daemon records it
                self._diagnose(f"bouncerd could not record an observation, sending it again ({error})")
                self._outbox.not_recorded(target)
            else:
                self._diagnose(f"bouncerd did not record an observation ({error})")
                self._outbox.lose_observations()
            self._outbox.acked(target)
        elif op == "tools" and target is self._lister:
            self._lister.reported(ok, error)
            self._fast.listing_answered()
        elif op == "tools":
            if not ok:
                self._diagnose(f"bouncerd refused a tools list ({error})")
            if isinstance(target, Output):
                self._outbox.acked(target)
            self._fast.listing_answered()
        elif not ok:
            self._diagnose(f"bouncerd refused {op} ({error})")
        if entry.sync and self._sync.sync_replied():
            self._request_waiting_verdicts()

    def _request_waiting_verdicts(self) -> None:
        """The link is up: request the verdicts of the calls held while it was not (and ask for the
        fast-path set)."""
        self._fast.link_up()
        held_calls = self._held
        for held in held_calls.take_waiting():
            if not held.dropped and not held_calls.request_verdict(held):
                self._refuse(held.key, held.request_id, jsonrpc.UNENCODABLE_REASON)

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
                if not self._gate_answer(message, line):
                    self._actions.append(SendUpstream(line))
            elif (answered := self.asking.answered(message)) is not None:  # else late: dropped
                self._report_answer(*answered, wait=True)
            return
        params = message.get("params")
        if "id" not in message:
            if method == "tools/call" or method in GATED_METHODS:  # still a call: never unchecked
                self._diagnose(f"dropped a {method} sent as a notification (no id)")
                return
            if method == "notifications/cancelled" and self._cancel(params):
                return
            self._actions.append(SendUpstream(line))
            if method == "notifications/initialized":
                self._lister.client_initialized()  # after it: the shim's own tools/list may go now
            return
        request_id = message["id"]
        key = id_key(request_id)
        if key is None or self._lister.tools.claims(request_id):  # the shim's own tools/list ids
            text = "Invalid Request: bad id" if key is None else RESERVED_ID_MESSAGE
            self._answer_error(None if key is None else request_id, jsonrpc.INVALID_REQUEST, text)
            return
        if method == "initialize":
            self._lister.client_initialize()
        fields = self._profile.note(method, params)
        if fields is not None and self._sync.state in (LinkState.UP, LinkState.SYNCING):
            self._sync.request("client", None, fields)
        if method == "tools/call":
            self._gate(key, request_id, message, line)
            return
        kind = message_kind(method, params)
        if kind is not None:
            self._gate_message(key, request_id, method, kind, params, line)
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
        if not isinstance(arguments, dict):  # judged anyway, so the refusal is audited
            arguments, invalid = {}, "the call's arguments are not a JSON object, so they cannot be checked."
        reason = self._link_refusal()
        if reason is None:
            if (retry := self.asking.retry(message, params)) is not None and retry.ours and not retry.forward:
                reason = "the call cannot be re-written without Bouncer's approval state, so it is not sent."
            else:
                held = Held(key, request_id, line, name, arguments, retry, invalid)
                if retry is None and invalid is None and self._forward_at_once(held):
                    return
                if self._lister.needed:  # the server's tools were never seen listed, or changed since
                    self._lister.wait(held, params.get("_meta"), modern=self.modern)
                else:
                    self._hold(held)
                return
        self._refuse(key, request_id, reason)

    def _forward_at_once(self, held: Held) -> bool:
        """A call the fast-path set covers goes upstream now, its record to bouncerd without waiting
        (fastset.py); False: it waits for its verdict."""
        if self._sync.state is not LinkState.UP or self._lister.needed:
            return False
        if not self._fast.allows(held.tool, held.arguments):
            return False
        if not self._fast.record(held.request_id, held.line, held.tool, held.arguments):
            return False
        self._actions.append(SendUpstream(held.line))
        return True

    def _link_refusal(self) -> str | None:
        """Why no verdict can be had now (observations lost, the daemon down), or None."""
        if self._outbox.observations_lost:
            return jsonrpc.LOST_REASON
        if self._outbox.unrecorded:
            return jsonrpc.UNRECORDED_REASON
        if self._sync.state is LinkState.DOWN:
            note = self.daemon_down_note
            return f"{jsonrpc.UNREACHABLE_REASON} ({note})" if note else jsonrpc.UNREACHABLE_REASON
        return None

    def _hold(self, held: Held) -> None:
        """Hold a request for its verdict; refused at once if the request cannot be encoded."""
        if not self._held.hold(held, link_up=self._sync.state is LinkState.UP):
            self._refuse(held.key, held.request_id, jsonrpc.UNENCODABLE_REASON)

    def _gate_message(
        self, key: IdKey, request_id: Any, method: str, kind: str, params: Any, line: bytes
    ) -> None:
        """Hold a request other than tools/call that carries data upstream until bouncerd allows it."""
        self._remember(key, method, None, False)
        invalid = None
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            params, invalid = {}, "the request's params are not a JSON object, so they cannot be checked."
        elif "_meta" in params:  # the protocol's own fields (versions, client info): not the agent's data
            params = {k: v for k, v in params.items() if k != "_meta"}
        reason = self._link_refusal()
        if reason is None:
            self._hold(Held(key, request_id, line, method, params, None, invalid, kind))
        else:
            self._refuse(key, request_id, reason)

    def _gate_answer(self, message: dict[str, Any], line: bytes) -> bool:
        """Hold the client's answer to a server request that carries its data upstream (a sampling
        result, what a person typed into an elicitation) until bouncerd allows it; False: not one."""
        key = id_key(message.get("id"))
        method = self._server_requests.pop(key, None) if key is not None else None
        result = message.get("result")
        if key is None or method is None or not isinstance(result, dict):
            return False
        fields = {k: v for k, v in result.items() if k != "_meta"}
        held = Held(
            (ANSWER_KEY_PREFIX + key[0], key[1]), message["id"], line, method, fields, None, None, "answer"
        )
        reason = self._link_refusal()
        if reason is not None or not self._held.hold(held, link_up=self._sync.state is LinkState.UP):
            self._refuse_answer(held, reason or jsonrpc.UNENCODABLE_REASON)
        return True

    def _refuse_answer(self, held: Held, reason: str) -> None:
        """The server's request gets an error in place of the client's answer (it must not hang)."""
        self._held.release(held)
        text = jsonrpc.BLOCKED_PREFIX + f"the client's answer to {held.tool} was not passed on: {reason}"
        self._actions.append(
            SendUpstream(jsonrpc.error_response(held.request_id, jsonrpc.BLOCKED_ERROR, text))
        )

    def _decided(self, held: Held, reply: Mapping[str, Any] | None, error: str) -> None:
        if held.dropped:
            return
        if held.kind == "answer":
            if reply is not None and reply.get("verdict") == "allow":
                self._held.release(held)
                self._actions.append(SendUpstream(held.line))
            else:
                reason = reply.get("reason") if reply is not None else None
                self._refuse_answer(
                    held, reason if isinstance(reason, str) and reason else error or "refused"
                )
            return
        if reply is not None and reply.get("verdict") == "ask" and held.kind == "tool":
            question = self.asking.ask_person(held, reply, self._profile, self._server_info)
            if question is not None:
                line, holds = question
                if not holds:  # answered with an input_required result: the retry is a new call
                    self._held.release(held)
                    self._requests.pop(held.key, None)
                self._actions.append(SendClient(line))
                return
        self._held.release(held)
        if reply is not None and self._outbox.observations_lost:  # refused after the verdict was asked
            self._refuse(held.key, held.request_id, jsonrpc.LOST_REASON)
        elif reply is not None and self._outbox.unrecorded:  # judged before an output was recorded
            self._refuse(held.key, held.request_id, jsonrpc.UNRECORDED_REASON)
        elif reply is None:
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
        calls = self._held.cancel(key) if key is not None else None
        if not calls:
            return False
        for held in calls:
            if (question := self.asking.drop(held)) is not None:
                self._end_question(question, "the call was cancelled")
                self._report_answer(question, "cancel", None, wait=False)
        self._requests.pop(calls[0].key, None)
        return True

    def _refuse_held(self, held: Held, reason: str) -> None:
        if not held.dropped:
            self._held.release(held)
            self._refuse(held.key, held.request_id, reason)

    # ---- asking a person (the state is asking.py's) --------------------------------------------------

    @property
    def ticking(self) -> bool:
        """Whether something waits on the clock (the pump then calls `tick` every turn)."""
        return self.asking.waiting or self._lister.tools.listing or bool(self._outbox.unrecorded)

    def deadline(self) -> float | None:
        rerecord = (self._outbox.rerecord_due or 0.0) if self._outbox.unrecorded else None
        due = [d for d in (self.asking.deadline(), self._lister.tools.deadline(), rerecord) if d is not None]
        return min(due) if due else None

    def tick(self, now: float) -> None:
        """Time out questions nobody answered and the shim's own tools/list, and send again what the
        daemon could not record (while `ticking`)."""
        self._outbox.retry_unrecorded(now)
        self._lister.tick(now)
        for question in self.asking.expired(now):
            self._end_question(question, "nobody answered in time")
            self._report_answer(question, "timeout", None, wait=True)

    def client_closed(self) -> None:
        """The client will send nothing more: its questions are dismissed (their codes stay open)."""
        for question in self.asking.drop_all():
            self._report_answer(question, "cancel", None, wait=False)
            self._refuse_held(question.held, "the client closed its input before a person answered.")

    def _report_answer(self, question: Question, action: str, choice: str | None, *, wait: bool) -> None:
        """Tell the daemon what became of a question; `wait`: the held call goes by its reply."""
        fields = question.answer(action, choice)
        if not self._sync.request("answer", question.held if wait else None, fields) and wait:
            self._refuse_held(question.held, jsonrpc.UNENCODABLE_REASON)

    def _end_question(self, question: Question, reason: str) -> None:
        self._actions.append(SendClient(jsonrpc.cancelled_notification(question.request_id, reason)))

    def _refuse(self, key: IdKey, request_id: Any, reason: str) -> None:
        remembered = self._requests.pop(key, None)
        if remembered is not None and remembered[0] != "tools/call":  # no tool result to put it in
            self._answer_error(request_id, jsonrpc.BLOCKED_ERROR, jsonrpc.BLOCKED_PREFIX + reason)
            return
        line = jsonrpc.blocked_result(request_id, reason, modern=self.modern, server_info=self._server_info)
        self._actions.append(SendClient(line))

    def upstream_gone(self, reason: str) -> None:
        """The server closed its output (it exited): no answer can come. Answer every client request
        still waiting on it with a JSON-RPC error, so no client is left waiting, and drop the calls
        held for their verdicts (there is no server to send them to)."""
        requests, self._requests = self._requests, {}
        for key in requests:
            for held in self._held.cancel(key) or ():
                if (question := self.asking.drop(held)) is not None:
                    self._end_question(question, reason)
            self._answer_error(key[1], jsonrpc.INTERNAL_ERROR, reason)

    def _answer_error(self, request_id: Any, code: int, message: str) -> None:
        self._actions.append(SendClient(jsonrpc.error_response(request_id, code, message)))

    def _remember(self, key: IdKey, method: str, tool: str | None, paged: bool) -> None:
        requests = self._requests
        requests.pop(key, None)
        if len(requests) >= MAX_TRACKED_REQUESTS:
            del requests[next(iter(requests))]
        requests[key] = (method, tool, paged)


def _error_code(message: Mapping[str, Any]) -> str | None:
    error = message.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _error_text(message: Mapping[str, Any]) -> str:
    error = message.get("error")
    if isinstance(error, dict):
        return f"{error.get('code', 'error')}: {error.get('message', '')}"
    return "no reason given"
