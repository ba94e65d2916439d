"""Asking a person about a held call, sans I/O: the channel, the open questions, their deadlines, retries.

Theory of operation
-------------------
When bouncerd's verdict on a held ``tools/call`` is ``ask`` (docs/dev/approvals-protocol.md), the relay
hands the call and the reply to `Asking.ask_person`. The channel follows from what the client said about
itself (`ClientProfile`), never from the call:

- **elicitation**: a session negotiated at 2025-06-18 or 2025-11-25 whose client declared form
  elicitation. The shim sends the client ``elicitation/create`` with the daemon's ready-made form and
  keeps holding the call. The client answers in the id space the upstream's server→client requests
  use too, so the shim's ids are ``bouncer-<64 random bits>-<n>`` (`Asking.claims`): a response in
  that space is consumed, never forwarded upstream (even a late one), and an upstream request using
  it is refused. The client's result becomes an ``answer``: its action (anything else is ``cancel``)
  and, on accept, a known ``choice`` or nil. An error response is ``cancel``: a deny that leaves the
  code open. No result by the daemon's ``timeout`` (`Asking.expired`) is ``timeout``, and the client
  cancelling the held call ends the question as ``cancel`` (`Asking.drop`).
- **input_required**: a 2026-07-28 client that declared elicitation. The call is answered at once
  with an ``input_required`` result: the form under INPUT_KEY and the daemon's ``requestState``.
  The client's retry carries both back (`Asking.retry`). A state of Bouncer's (STATE_PREFIX) goes to
  the daemon with the call; if allowed, the call is forwarded without it (the server must never see
  Bouncer's state). A state that is not Bouncer's belongs to the upstream's own round: the call is
  judged like any other and forwarded unchanged. The rounds nest in either order: when Bouncer asks
  about a call that answers an upstream round, the upstream's state and responses are parked under
  Bouncer's state and put back into the retry that Bouncer's round allows.
- **code**: anything else. The call is refused with the daemon's reason, which names a one-time code
  for ``bouncerctl approve``.

Anything unusable (a reply without a form or a state, a message that cannot be written) falls back to
the code channel: an ask is never an allow. Deadlines need a clock; the pump passes ``now`` in.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from bouncer_shim import jsonrpc
from bouncer_shim.actions import daemon_frame
from bouncer_shim.held import Held, Retry
from bouncer_shim.jsonrpc import wire_id, wire_text

ELICITATION: Final = "elicitation"
INPUT_REQUIRED: Final = "input_required"
CODE: Final = "code"

# Revisions with server→client elicitation/create (added in 2025-06-18), and with input_required
# results (2026-07-28). Any other revision, known or not, gets the code channel.
ELICITING_VERSIONS: Final = frozenset({"2025-06-18", "2025-11-25"})
INPUT_REQUIRED_VERSIONS: Final = frozenset({"2026-07-28"})
MODE_VERSIONS: Final = frozenset({"2025-11-25"})  # elicitation params carry "mode" from here on

# The inputRequests key of Bouncer's question, and the prefix of the daemon's requestState.
INPUT_KEY: Final = "bouncer_approval"
STATE_PREFIX: Final = "bouncer1."
ID_PREFIX: Final = "bouncer-"
# Random bits in the shim's request ids: an upstream cannot guess them to shadow the shim's requests.
ID_RANDOM_BYTES: Final = 8
RESERVED_ID_MESSAGE: Final = "Invalid Request: ids starting with this prefix are reserved by bouncer-shim"

ACTIONS: Final = frozenset({"accept", "decline", "cancel"})
CHOICES: Final = frozenset({"once", "session", "always", "deny"})

# The daemon sends the policy's approval_timeout with every ask; these only guard against a reply
# without a usable one. 120 s is the policy default; an hour is the policy's own ceiling (clients time
# calls out long before).
DEFAULT_TIMEOUT_SECONDS: Final = 120.0
MAX_TIMEOUT_SECONDS: Final = 3600.0
NOW: Final = float("-inf")  # the deadline of a question whose clock has not started: due at once

# Upstream rounds parked while Bouncer asks about their retry. A client has one or two calls in such a
# round at a time; the bounds only matter for one that never retries. Past them the oldest is
# forgotten, and its retry reaches the upstream without its state (the upstream's round starts over).
MAX_PARKED_ROUNDS: Final = 64
MAX_PARKED_BYTES: Final = 8 * 1024 * 1024


class Question:
    """An elicitation/create of the shim's, awaiting the client's result."""

    __slots__ = ("code", "deadline", "held", "request_id", "timeout")

    def __init__(self, request_id: str, held: Held, code: str, timeout: float) -> None:
        self.request_id = request_id
        self.held = held
        self.code = code
        self.timeout = timeout
        self.deadline: float | None = None  # set by the first `expired` after it was put

    def answer(self, action: str, choice: str | None) -> dict[str, Any]:
        """The fields of the ``answer`` op that tells bouncerd what became of this question."""
        request_id = wire_id(self.held.request_id)
        return {"request_id": request_id, "code": self.code, "action": action, "choice": choice}


class ClientProfile:
    """What the MCP client said about itself, and so how a person can be asked through it."""

    __slots__ = ("fields", "modern", "negotiated")

    def __init__(self) -> None:
        self.fields: dict[str, Any] | None = None  # the last `client` op's fields
        self.modern = False  # the per-request-envelope era (2026-07-28 and later)
        self.negotiated: str | None = None  # the version in the upstream's initialize result

    def note(self, method: str, params: Any) -> dict[str, Any] | None:
        """Learn from one client request; the new `client` fields if they changed, else None."""
        if method == "initialize":
            self.modern = False
            self.negotiated = None
            if isinstance(params, dict):
                info, capabilities = params.get("clientInfo"), params.get("capabilities")
                return self._set(info, params.get("protocolVersion"), capabilities)
            return None
        if method == "server/discover":
            self.modern = True
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(meta, dict) or jsonrpc.PROTOCOL_VERSION_KEY not in meta:
            return None
        version = meta[jsonrpc.PROTOCOL_VERSION_KEY]
        if isinstance(version, str) and version not in jsonrpc.HANDSHAKE_VERSIONS:
            self.modern = True
        info, capabilities = meta.get(jsonrpc.CLIENT_INFO_KEY), meta.get(jsonrpc.CLIENT_CAPABILITIES_KEY)
        return self._set(info, version, capabilities)

    def _set(self, info: Any, protocol: Any, capabilities: Any) -> dict[str, Any] | None:
        info = info if isinstance(info, dict) else {}
        fields = {
            "name": wire_text(info.get("name")),
            "version": wire_text(info.get("version")),
            "protocol": wire_text(protocol),
            "capabilities": capabilities if isinstance(capabilities, dict) else None,
        }
        if fields["capabilities"] is not None and daemon_frame(fields) is None:
            fields["capabilities"] = None
        if fields == self.fields:
            return None
        self.fields = fields
        return fields

    def initialized(self, result: Any) -> None:
        """The upstream's initialize result: the version the session really speaks."""
        if isinstance(result, dict):
            self.negotiated = wire_text(result.get("protocolVersion"))

    @property
    def version(self) -> str | None:
        declared = self.fields.get("protocol") if self.fields is not None else None
        return declared if self.modern else self.negotiated or declared

    def channel(self) -> str:
        capabilities = self.fields.get("capabilities") if self.fields is not None else None
        elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
        if not isinstance(elicitation, dict) or (elicitation and "form" not in elicitation):
            return CODE  # none declared, or URL mode only: an empty object means form
        version = self.version
        if self.modern:
            return INPUT_REQUIRED if version in INPUT_REQUIRED_VERSIONS else CODE
        return ELICITATION if version in ELICITING_VERSIONS else CODE


class Asking:
    def __init__(self, token: bytes | None = None) -> None:
        random = token if token is not None else os.urandom(ID_RANDOM_BYTES)
        self.prefix = f"{ID_PREFIX}{random.hex()}-"
        self._count = 0
        self._open: dict[str, Question] = {}  # request id -> question awaiting the client
        self._parked: OrderedDict[str, tuple[Any, Any, int]] = OrderedDict()  # state -> round, size
        self._parked_bytes = 0

    # ---- introspection ---------------------------------------------------------------------------

    @property
    def waiting(self) -> bool:
        """Whether a question awaits the client (the pump then calls `expired` every turn)."""
        return bool(self._open)

    def claims(self, request_id: Any) -> bool:
        """Whether `request_id` is in the shim's own id space."""
        return isinstance(request_id, str) and request_id.startswith(self.prefix)

    def refuse_shadowing(self, request: Mapping[str, Any]) -> bytes | None:
        """The error for an upstream request whose id is in the shim's space (the client's answer to
        it would be taken for a person's), or None for any other request."""
        if not self.claims(request.get("id")):
            return None
        return jsonrpc.error_response(request["id"], jsonrpc.INVALID_REQUEST, RESERVED_ID_MESSAGE)

    def deadline(self) -> float | None:
        if not self._open:
            return None
        return min(a.deadline if a.deadline is not None else NOW for a in self._open.values())

    # ---- putting a question ----------------------------------------------------------------------

    def ask_person(
        self, held: Held, reply: Mapping[str, Any], profile: ClientProfile, server_info: Any
    ) -> tuple[bytes, bool] | None:
        """The line that asks the client about `held` and whether the call stays held (elicitation),
        or None if this client cannot be asked (then the call is refused with the reply's reason)."""
        if held.person_asked:  # asked already: a second ask is a refusal, never a second question
            return None
        held.person_asked = True
        channel = profile.channel()
        form = _form(reply.get("elicitation"))
        if channel == CODE or form is None:
            return None
        if channel == ELICITATION:
            code = reply.get("code")
            if not isinstance(code, str) or not code:
                return None
            # 2025-06-18 has no titled enum: its form of one is `enum` with `enumNames`
            form = {"mode": "form", **form} if profile.version in MODE_VERSIONS else _untitled_enums(form)
            request_id = f"{self.prefix}{self._count}"
            line = jsonrpc.request_line(request_id, "elicitation/create", form)
            if line is None:
                return None
            self._count += 1
            self._open[request_id] = Question(request_id, held, code, _timeout(reply.get("timeout")))
            return line, True
        state = reply.get("request_state")
        if not isinstance(state, str) or not state.startswith(STATE_PREFIX):
            return None
        requests = {INPUT_KEY: {"method": "elicitation/create", "params": {"mode": "form", **form}}}
        line = jsonrpc.input_required_result(held.request_id, requests, state, server_info)
        if line is None:
            return None
        if held.retry is not None and held.retry.upstream is not None:
            self._park(state, held.retry.upstream, len(held.line))
        return line, False

    # ---- the client's side -----------------------------------------------------------------------

    def answered(self, message: Mapping[str, Any]) -> tuple[Question, str, str | None] | None:
        """The question a client response (in the shim's id space) answers, with (action, choice);
        None for a response to a question already ended (late, after a timeout or cancel)."""
        question = self._open.pop(message["id"], None)  # a str: the relay asked `claims` first
        if question is None:
            return None
        result = message.get("result")
        if not isinstance(result, dict):
            return question, "cancel", None  # an error response
        action, content = result.get("action"), result.get("content")
        if not isinstance(action, str) or action not in ACTIONS:
            return question, "cancel", None  # a result nobody can read
        choice = content.get("choice") if action == "accept" and isinstance(content, dict) else None
        return question, action, choice if isinstance(choice, str) and choice in CHOICES else None

    def expired(self, now: float) -> list[Question]:
        """Questions past their deadline (removed); starts the clock of those put since the last call."""
        due: list[Question] = []
        for question in self._open.values():
            if question.deadline is None:
                question.deadline = now + question.timeout
            elif question.deadline <= now:
                due.append(question)
        for question in due:
            del self._open[question.request_id]
        return due

    def drop(self, held: Held) -> Question | None:
        """End the question about `held` (its call was cancelled), if one is open."""
        for question in self._open.values():
            if question.held is held:
                del self._open[question.request_id]
                return question
        return None

    def drop_all(self) -> list[Question]:
        questions = list(self._open.values())
        self._open.clear()
        return questions

    # ---- retries of input_required rounds ----------------------------------------------------------

    def retry(self, message: Mapping[str, Any], params: Mapping[str, Any]) -> Retry | None:
        """What a tools/call carries from an input_required round; None for a first call."""
        state = params.get("requestState")
        responses = params.get("inputResponses")
        if state is None and responses is None:
            return None
        if not (isinstance(state, str) and state.startswith(STATE_PREFIX)):
            # the upstream's round: its answers are the client's data going upstream, judged with the call
            answers = {"answers": responses} if isinstance(responses, dict) and responses else {}
            return Retry(answers, None, False, (state, responses))
        ours = responses.get(INPUT_KEY) if isinstance(responses, dict) else None
        fields = {"request_state": state, "input_response": ours if isinstance(ours, dict) else None}
        rest = {k: v for k, v in responses.items() if k != INPUT_KEY} if isinstance(responses, dict) else {}
        forwarded = {k: v for k, v in params.items() if k not in ("requestState", "inputResponses")}
        parked = self._parked.pop(state, None)
        if parked is not None:
            upstream_state, upstream_responses, size = parked
            self._parked_bytes -= size
            if upstream_state is not None:
                forwarded["requestState"] = upstream_state
            if upstream_responses is not None:
                forwarded["inputResponses"] = upstream_responses
        elif rest:
            forwarded["inputResponses"] = rest
        upstream_answers = forwarded.get("inputResponses")
        if isinstance(upstream_answers, dict) and upstream_answers:
            fields["answers"] = upstream_answers
        return Retry(fields, jsonrpc.dump({**message, "params": forwarded}), True, None)

    def _park(self, state: str, upstream: tuple[Any, Any], size: int) -> None:
        parked = self._parked
        if state in parked:
            self._parked_bytes -= parked.pop(state)[2]
        while parked and (len(parked) >= MAX_PARKED_ROUNDS or self._parked_bytes + size > MAX_PARKED_BYTES):
            self._parked_bytes -= parked.popitem(last=False)[1][2]
        if size <= MAX_PARKED_BYTES:
            parked[state] = (upstream[0], upstream[1], size)
            self._parked_bytes += size


def _form(value: Any) -> dict[str, Any] | None:
    """The elicitation params of an ask reply: a message and an object schema, or None."""
    if not isinstance(value, dict):
        return None
    message, schema = value.get("message"), value.get("requestedSchema")
    if not isinstance(message, str) or not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    if not isinstance(schema.get("properties"), dict):
        return None
    return {"message": message, "requestedSchema": schema}


def _untitled_enums(form: dict[str, Any]) -> dict[str, Any]:
    """`form` with each titled single-select enum (``oneOf`` of ``const``/``title``, from 2025-11-25)
    written as 2025-06-18 wrote one: ``enum`` and ``enumNames``. Anything else is left as it is."""
    schema = form["requestedSchema"]
    properties = {}
    for name, prop in schema["properties"].items():
        options = prop.get("oneOf") if isinstance(prop, dict) else None
        if (
            isinstance(options, list)
            and options
            and all(
                isinstance(o, dict) and isinstance(o.get("const"), str) and isinstance(o.get("title"), str)
                for o in options
            )
        ):
            rest = {k: v for k, v in prop.items() if k != "oneOf"}
            prop = {**rest, "enum": [o["const"] for o in options], "enumNames": [o["title"] for o in options]}
        properties[name] = prop
    return {**form, "requestedSchema": {**schema, "properties": properties}}


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return DEFAULT_TIMEOUT_SECONDS
    return min(float(value), MAX_TIMEOUT_SECONDS)
