"""Asking a person through the relay, no I/O: elicitation, input_required retries, the code refusal.

Each test is named after the failure or attack it stops. The daemon's side is played by the `Rig` of
test_relay.py, answering with replies shaped exactly as bouncerd's (the form comes from the daemon's
own `elicitation_form`). Every message the shim makes is validated against the SDK's per-version
models (the shim may not import them; the tests may).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from bouncer_shim import asking
from bouncer_shim.asking import Asking, ClientProfile
from bouncer_shim.held import Held
from bouncer_shim.jsonrpc import UNREACHABLE_REASON, id_key
from hypothesis import given, settings
from mcp_types import _v2025_11_25 as legacy
from mcp_types import _v2026_07_28 as modern
from mcp_types import methods
from test_relay import Rig, blocked_text, call, json_values, line, request, result

from bouncerd.core import approvals as ap
from bouncerd.server.questions import code_hint, elicitation_form

CODE = "K7Q-F2M"
QUESTION = 'The agent wants to call send_email on mail.\nIt would send to:\n  to = "bob@partner.example"'
STATE = ap.STATE_PREFIX + "eyJiIjp7fX0.bWFj"
STAMP = {"name": "mail", "version": "3.1"}
LEGACY_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
HINT = re.compile(r"`bouncerctl approve ([0-9A-HJKMNP-TV-Z]{3}-[0-9A-HJKMNP-TV-Z]{3})`")


def ask_fields(**overrides: Any) -> dict[str, Any]:
    """What bouncerd adds to an ask (docs/dev/approvals-protocol.md §1)."""
    fields: dict[str, Any] = {
        "verdict": "ask",
        "rule": "sink.unproven",
        "reason": f"bob@partner.example is not trusted yet. {code_hint(CODE, 1e9)}",
        "destination": "bob@partner.example",
        "provenance": None,
        "code": CODE,
        "expires": 1e9,
        "timeout": 30,
        "question": QUESTION,
        "elicitation": elicitation_form(QUESTION, True),
        "request_state": STATE,
        "binding": {},
    }
    fields.update(overrides)
    return fields


def initialize(
    rig: Rig, version: str = "2025-11-25", capabilities: Any = None, negotiated: str | None = None
) -> None:
    params = {
        "protocolVersion": version,
        "clientInfo": {"name": "claude-code", "version": "2"},
        "capabilities": LEGACY_CAPABILITIES if capabilities is None else capabilities,
    }
    rig.client(request(0, "initialize", params))
    rig.upstream(
        result(0, {"protocolVersion": negotiated or version, "capabilities": {}, "serverInfo": STAMP})
    )
    rig.answer_all()
    rig.to_client.clear()
    rig.to_upstream.clear()


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": LEGACY_CAPABILITIES,
}


def discover(rig: Rig, capabilities: Any = None, stamp: dict[str, str] | None = STAMP) -> None:
    meta = dict(META)
    if capabilities is not None:
        meta["io.modelcontextprotocol/clientCapabilities"] = capabilities
    rig.client(request(0, "server/discover", {"_meta": meta}))
    discovered: dict[str, Any] = {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {},
        "resultType": "complete",
    }
    if stamp is not None:
        discovered["_meta"] = {"io.modelcontextprotocol/serverInfo": stamp}
    rig.upstream(result(0, discovered))
    rig.answer_all()
    rig.to_client.clear()
    rig.to_upstream.clear()


ARGS = {"to": "bob@partner.example", "subject": "minutes", "body": "attached"}


def modern_call(rid: Any, meta: dict[str, Any] = META, **params: Any) -> bytes:
    """A tools/call as the 2026-07-28 SDK client writes it (first call or retry)."""
    return call(rid, "send_email", ARGS, _meta=meta, **params)


def ask_about(rig: Rig, data: bytes, **overrides: Any) -> dict[str, Any]:
    """Send a call and have the daemon answer ask; returns the verdict request."""
    rig.client(data)
    (asked,) = rig.pending("verdict")
    rig.answer(asked, **{k: v for k, v in ask_fields(**overrides).items()})
    return asked


def sent_to_client(rig: Rig) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(rig.to_client[-1])
    return message


def elicited(rig: Rig) -> dict[str, Any]:
    message = sent_to_client(rig)
    assert message["method"] == "elicitation/create"
    return message


def client_says(rig: Rig, question: dict[str, Any], content: Any = None, action: str = "accept") -> None:
    answer: dict[str, Any] = {"action": action}
    if content is not None:
        answer["content"] = content
    rig.client(line({"jsonrpc": "2.0", "id": question["id"], "result": answer}))


# ---- elicitation (2025-06-18, 2025-11-25) -----------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_elicitation_is_valid_for_the_version_and_the_call_waits_for_the_person(version: str) -> None:
    rig = Rig()
    initialize(rig, version)
    ask_about(rig, call(7, "send_email", ARGS))
    question = elicited(rig)
    methods.parse_server_request("elicitation/create", version, question["params"])
    legacy.JSONRPCRequest.model_validate(question)
    params = question["params"]
    assert params["message"] == QUESTION
    choice = params["requestedSchema"]["properties"]["choice"]
    values = ["once", "session", "always", "deny"]
    if version == "2025-11-25":  # the specification's titled enum, not the legacy enumNames
        assert "enumNames" not in choice and "enum" not in choice
        assert [o["const"] for o in choice["oneOf"]] == values
        assert all(o["title"] for o in choice["oneOf"])
    else:  # 2025-06-18 has no titled enum: its own form of one
        assert "oneOf" not in choice
        assert choice["enum"] == values and len(choice["enumNames"]) == len(values)
    assert ("mode" in params) == (version == "2025-11-25")
    assert rig.to_upstream == [] and len(rig.to_client) == 1  # held: nothing upstream, no refusal yet


def test_person_allowing_once_forwards_the_original_call_after_the_daemon_agrees() -> None:
    rig = Rig()
    initialize(rig)
    original = call(7, "send_email", ARGS)
    ask_about(rig, original)
    client_says(rig, elicited(rig), {"choice": "once"})
    (answer,) = rig.pending("answer")
    assert {k: answer[k] for k in ("request_id", "code", "action", "choice")} == {
        "request_id": 7,
        "code": CODE,
        "action": "accept",
        "choice": "once",
    }
    assert rig.to_upstream == []  # the person's yes is not enough: the daemon's verdict decides
    rig.answer(answer, verdict="allow", rule="approval.elicited", reason="a person allowed this call")
    assert rig.to_upstream == [original]


def test_persons_answer_to_the_shims_question_never_reaches_the_server() -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    client_says(rig, elicited(rig), {"choice": "once"})
    rig.answer(rig.pending("answer")[0], verdict="deny", rule="approval.declined", reason="no")
    assert rig.to_upstream == []
    assert "no" in blocked_text(rig.to_client[-1])


@pytest.mark.parametrize(
    ("response", "action", "choice"),
    [
        ({"result": {"action": "decline"}}, "decline", None),
        ({"result": {"action": "cancel"}}, "cancel", None),
        ({"error": {"code": -32600, "message": "Elicitation not supported"}}, "cancel", None),
        ({"result": {"action": "accept", "content": {"choice": "yes please"}}}, "accept", None),
        ({"result": {"action": "accept", "content": {"choice": ["once"]}}}, "accept", None),
        ({"result": {"action": "accept"}}, "accept", None),
        ({"result": {"action": "maybe", "content": {"choice": "once"}}}, "cancel", None),
        ({"result": "once"}, "cancel", None),
        ({"result": {"action": "decline", "content": {"choice": "always"}}}, "decline", None),
    ],
)
def test_anything_but_a_clear_choice_is_never_passed_on_as_one(
    response: dict[str, Any], action: str, choice: str | None
) -> None:
    """A client's error, an unknown action or an invented choice can only ever deny."""
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    rig.client(line({"jsonrpc": "2.0", "id": elicited(rig)["id"], **response}))
    (answer,) = rig.pending("answer")
    assert (answer["action"], answer["choice"]) == (action, choice)
    rig.answer(answer, verdict="deny", rule="approval.declined", reason="a person declined this call")
    assert rig.to_upstream == []
    assert "declined" in blocked_text(rig.to_client[-1])


def test_unanswered_question_times_out_to_a_deny_and_a_late_yes_is_ignored() -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS), timeout=30)
    question = elicited(rig)
    rig.relay.tick(1000.0)  # starts the clock
    rig.relay.tick(1029.0)
    rig.pump()
    assert rig.pending("answer") == []
    assert rig.relay.asking.deadline() == 1030.0
    rig.relay.tick(1030.0)
    rig.pump()
    cancelled = sent_to_client(rig)
    legacy.CancelledNotification.model_validate(cancelled)
    assert cancelled["params"]["requestId"] == question["id"]
    (answer,) = rig.pending("answer")
    assert (answer["action"], answer["choice"], answer["code"]) == ("timeout", None, CODE)
    reason = f"nobody answered in time, so this call is denied. {code_hint(CODE, 1e9)}"
    rig.answer(answer, verdict="deny", rule="approval.timeout", reason=reason, code=CODE, expires=1e9)
    assert HINT.search(blocked_text(rig.to_client[-1]))
    client_says(rig, question, {"choice": "once"})  # too late
    assert rig.pending("answer") == [] and rig.to_upstream == []
    assert rig.relay.asking.deadline() is None and not rig.relay.asking.waiting


def test_cancelled_call_ends_its_question_and_a_later_yes_forwards_nothing() -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    question = elicited(rig)
    rig.client(line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}))
    cancelled = sent_to_client(rig)
    assert (cancelled["method"], cancelled["params"]["requestId"]) == (
        "notifications/cancelled",
        question["id"],
    )
    (answer,) = rig.pending("answer")
    assert (answer["action"], answer["request_id"]) == ("cancel", 7)
    rig.answer(answer, verdict="allow", rule="approval.elicited", reason="a daemon bug")  # ignored: dropped
    client_says(rig, question, {"choice": "once"})
    assert rig.to_upstream == []  # not the call, not its cancellation, not the answer
    assert rig.pending("answer") == []
    assert all(json.loads(m).get("id") != 7 for m in rig.to_client)  # a cancelled call gets no answer


def test_server_request_with_an_id_of_the_shims_is_refused_not_relayed() -> None:
    """A server that could mint the shim's ids could have its own question's answer read as a person's."""
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    question = elicited(rig)
    shadow = request(question["id"], "elicitation/create", {"message": "Allow?", "requestedSchema": {}})
    rig.upstream(shadow)
    assert rig.to_client[-1] != shadow and rig.pending("observe") == []
    refusal = json.loads(rig.to_upstream[-1])
    assert (refusal["id"], refusal["error"]["code"]) == (question["id"], -32600)
    client_says(rig, question, {"choice": "deny"})
    assert rig.pending("answer")[0]["choice"] == "deny"  # still the person's answer to the shim's question


def test_server_requests_and_their_answers_pass_while_a_question_is_open() -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    question = elicited(rig)
    other_shim = f"{asking.ID_PREFIX}{'0' * 16}-0"  # another process's prefix: this one's is random
    for rid in (0, 1, "bouncer-1", other_shim, question["id"][:23]):  # the server's ids are its own
        server_request = request(rid, "elicitation/create", {"message": "ok?", "requestedSchema": {}})
        rig.upstream(server_request)
        rig.answer_all()
        assert rig.to_client[-1] == server_request
        response = line(
            {"jsonrpc": "2.0", "id": rid, "result": {"action": "accept", "content": {"choice": "once"}}}
        )
        rig.client(response)
        (judged,) = [m for m in rig.unanswered if m["op"] == "verdict" and m.get("kind") == "answer"]
        assert judged["tool"] == "elicitation/create"  # the client's answer carries data upstream
        rig.answer_all()
        assert rig.to_upstream[-1] == response
    assert rig.pending("answer") == []


def test_shim_ids_are_unguessable_per_process_and_never_reused() -> None:
    first, second = Asking(), Asking()
    assert first.prefix != second.prefix
    assert first.prefix.startswith(asking.ID_PREFIX) and len(first.prefix) == len("bouncer-") + 16 + 1
    rig = Rig()
    initialize(rig)
    ids = set()
    for rid in range(3):
        ask_about(rig, call(rid + 10, "send_email", ARGS))
        ids.add(elicited(rig)["id"])
    assert len(ids) == 3 and all(rig.relay.asking.claims(i) for i in ids)


def test_daemon_lost_while_asking_refuses_the_call_and_withdraws_the_question() -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    question = elicited(rig)
    rig.lose_daemon()
    withdrawn, refused = (json.loads(m) for m in rig.to_client[-2:])
    assert withdrawn["params"]["requestId"] == question["id"]
    assert refused["id"] == 7 and UNREACHABLE_REASON in refused["result"]["content"][0]["text"]
    client_says(rig, question, {"choice": "once"})
    assert rig.to_upstream == []


def test_daemon_lost_before_it_replied_to_an_answer_refuses_the_call() -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    client_says(rig, elicited(rig), {"choice": "once"})
    rig.lose_daemon()
    assert UNREACHABLE_REASON in blocked_text(rig.to_client[-1])
    assert rig.to_upstream == []


def test_client_closing_its_input_dismisses_the_question_and_refuses_the_call() -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    rig.relay.client_closed()
    rig.pump()
    (answer,) = rig.pending("answer")
    assert answer["action"] == "cancel"
    assert "closed its input" in blocked_text(rig.to_client[-1])
    assert rig.relay.held_bytes == 0  # the pump's shutdown need not wait for a person


def test_an_ask_in_reply_to_an_answer_is_a_refusal_not_a_second_question() -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    client_says(rig, elicited(rig), {"choice": "once"})
    rig.answer(rig.pending("answer")[0], **ask_fields())
    assert blocked_text(rig.to_client[-1]) and rig.to_upstream == []
    assert not rig.relay.asking.waiting


@pytest.mark.parametrize(
    "overrides",
    [
        {"elicitation": None},
        {"elicitation": {"message": "x"}},
        {"elicitation": {"message": 5, "requestedSchema": {"type": "object", "properties": {}}}},
        {"elicitation": {"message": "x", "requestedSchema": {"type": "array", "properties": {}}}},
        {"code": None},
        {
            "elicitation": {
                "message": "x",
                "requestedSchema": {"type": "object", "properties": {"n": float("nan")}},
            }
        },
    ],
)
def test_ask_without_a_usable_question_is_refused_with_the_code(overrides: dict[str, Any]) -> None:
    rig = Rig()
    initialize(rig)
    rig.client(call(7, "send_email", ARGS))
    rig.relay.daemon_message({"id": rig.pending("verdict")[0]["id"], "ok": True, **ask_fields(**overrides)})
    rig.pump()
    assert HINT.search(blocked_text(rig.to_client[-1])) and rig.to_upstream == []


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_answer_from_the_client_yields_a_valid_answer_op_and_nothing_upstream(value: Any) -> None:
    rig = Rig()
    initialize(rig)
    ask_about(rig, call(7, "send_email", ARGS))
    question = elicited(rig)
    for response in ({"result": value}, {"result": {"action": "accept", "content": value}}, {"error": value}):
        rig.client(line({"jsonrpc": "2.0", "id": question["id"], **response}))
        assert rig.to_upstream == []
    (answer,) = rig.pending("answer")  # the first response answers; the rest are late and dropped
    assert answer["action"] in {"accept", "decline", "cancel"}
    assert answer["choice"] is None or answer["choice"] in {"once", "session", "always", "deny"}


# ---- clients that cannot ask ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "capabilities", "negotiated"),
    [
        ("2025-11-25", {}, None),  # no elicitation declared
        ("2025-11-25", {"elicitation": {"url": {}}}, None),  # URL mode only
        ("2025-11-25", {"elicitation": True}, None),
        ("2025-11-25", LEGACY_CAPABILITIES, "2025-03-26"),  # the server negotiated an era without it
        ("2024-11-05", {"elicitation": {}}, None),
        ("2099-01-01", {"elicitation": {}}, None),
    ],
)
def test_client_that_cannot_elicit_gets_the_code_to_copy(
    version: str, capabilities: Any, negotiated: str | None
) -> None:
    rig = Rig()
    initialize(rig, version, capabilities, negotiated)
    ask_about(rig, call(7, "send_email", ARGS))
    text = blocked_text(rig.to_client[-1])
    assert text.startswith("[bouncer blocked] bob@partner.example is not trusted yet.")
    match = HINT.search(text)
    assert match is not None and match.group(1) == CODE
    legacy.CallToolResult.model_validate(json.loads(rig.to_client[-1])["result"])
    assert not rig.relay.asking.waiting and rig.to_upstream == []


def test_client_that_never_said_who_it_is_gets_the_code() -> None:
    rig = Rig()
    ask_about(rig, call(7, "send_email", ARGS))
    assert HINT.search(blocked_text(rig.to_client[-1]))


def test_modern_client_without_elicitation_gets_the_code() -> None:
    rig = Rig()
    discover(rig, capabilities={})
    ask_about(rig, modern_call(7, {**META, "io.modelcontextprotocol/clientCapabilities": {}}))
    message = sent_to_client(rig)
    modern.CallToolResultResponse.model_validate(message)
    assert message["result"]["resultType"] == "complete"
    assert HINT.search(blocked_text(rig.to_client[-1]))


# ---- input_required (2026-07-28) --------------------------------------------------------------------


@pytest.mark.parametrize("stamp", [STAMP, None])
def test_modern_ask_is_a_valid_input_required_result_and_nothing_goes_upstream(
    stamp: dict[str, str] | None,
) -> None:
    rig = Rig()
    discover(rig, stamp=stamp)
    ask_about(rig, modern_call(7))
    message = sent_to_client(rig)
    response = modern.CallToolResultResponse.model_validate(message)
    assert isinstance(response.result, modern.InputRequiredResult)
    methods.validate_server_result("tools/call", "2026-07-28", message["result"])
    assert message["id"] == 7
    assert message["result"]["resultType"] == "input_required"
    assert message["result"]["requestState"] == STATE
    (key,) = message["result"]["inputRequests"]
    assert key == asking.INPUT_KEY
    inner = modern.ElicitRequest.model_validate(message["result"]["inputRequests"][key])
    assert isinstance(inner.params, modern.ElicitRequestFormParams)
    assert inner.params.message == QUESTION
    assert message["result"].get("_meta") == (
        {"io.modelcontextprotocol/serverInfo": stamp} if stamp else None
    )
    assert rig.to_upstream == [] and rig.relay.held_bytes == 0 and not rig.relay.asking.waiting


def retry(rid: Any, state: Any, responses: Any) -> bytes:
    return modern_call(rid, requestState=state, inputResponses=responses)


def test_retry_with_bouncers_state_is_judged_with_it_and_forwarded_without_it() -> None:
    rig = Rig()
    discover(rig)
    ask_about(rig, modern_call(7))
    answer = {"action": "accept", "content": {"choice": "once"}}
    rig.client(retry(8, STATE, {asking.INPUT_KEY: answer}))
    (judged,) = rig.pending("verdict")
    assert (judged["request_state"], judged["input_response"], judged["request_id"]) == (STATE, answer, 8)
    assert judged["arguments"] == ARGS and judged["tool"] == "send_email"
    rig.verdict(judged, "allow")
    (forwarded,) = (json.loads(x) for x in rig.to_upstream)
    assert "requestState" not in forwarded["params"] and "inputResponses" not in forwarded["params"]
    assert forwarded["params"] == {"name": "send_email", "arguments": ARGS, "_meta": META}
    assert forwarded["id"] == 8
    modern.CallToolRequest.model_validate(forwarded)


def test_tampered_or_forged_bouncer_state_goes_to_the_daemon_and_its_deny_holds() -> None:
    """The shim does not judge a state (it cannot); it sends it with the call and obeys the verdict."""
    rig = Rig()
    discover(rig)
    forged = ap.STATE_PREFIX + "eyJiIjp7fX0.Zm9yZ2Vk"
    rig.client(retry(1, forged, {asking.INPUT_KEY: {"action": "accept", "content": {"choice": "always"}}}))
    (judged,) = rig.pending("verdict")
    assert judged["request_state"] == forged
    reason = "the approval carried by this retry was refused (tampered); nothing was approved"
    rig.answer(judged, verdict="deny", rule="approval.bad_state", reason=reason)
    assert rig.to_upstream == []
    assert "tampered" in blocked_text(rig.to_client[-1])


@pytest.mark.parametrize("response", [None, "accept", ["once"], 5])
def test_retry_with_an_unreadable_response_sends_none(response: Any) -> None:
    rig = Rig()
    discover(rig)
    rig.client(retry(1, STATE, {asking.INPUT_KEY: response} if response is not None else None))
    (judged,) = rig.pending("verdict")
    assert judged["request_state"] == STATE and judged["input_response"] is None


def test_upstream_round_retry_is_still_judged_and_forwarded_unchanged() -> None:
    rig = Rig()
    discover(rig)
    theirs = retry(3, "v1.upstream-sealed", {"confirm": {"action": "accept", "content": {"confirm": True}}})
    rig.client(theirs)
    (judged,) = rig.pending("verdict")
    assert "request_state" not in judged and "input_response" not in judged
    rig.verdict(judged, "allow")
    assert rig.to_upstream == [theirs]


def test_upstream_round_retry_is_denied_like_any_call() -> None:
    rig = Rig()
    discover(rig)
    rig.client(retry(3, "v1.upstream-sealed", {"confirm": {"action": "accept"}}))
    rig.verdict(rig.pending("verdict")[0], "deny", "attacker@evil.test came from mail/read_email")
    assert rig.to_upstream == []


def test_answer_under_bouncers_key_without_a_state_cannot_approve_anything() -> None:
    rig = Rig()
    discover(rig)
    smuggled = retry(3, None, {asking.INPUT_KEY: {"action": "accept", "content": {"choice": "always"}}})
    rig.client(smuggled)
    (judged,) = rig.pending("verdict")
    assert "request_state" not in judged and "input_response" not in judged  # judged as a plain call
    rig.answer(judged, **ask_fields())  # so it is simply asked about again
    assert sent_to_client(rig)["result"]["resultType"] == "input_required"
    assert rig.to_upstream == []


def test_bouncer_round_inside_an_upstream_round_puts_the_upstream_state_back() -> None:
    """The upstream asked first; Bouncer asks about the retry; the answered retry carries the upstream's
    state and responses again, so the upstream's round completes."""
    rig = Rig()
    discover(rig)
    theirs = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    ask_about(rig, retry(3, "v1.upstream-sealed", theirs))
    assert sent_to_client(rig)["result"]["requestState"] == STATE
    ours = {asking.INPUT_KEY: {"action": "accept", "content": {"choice": "once"}}}
    rig.client(retry(4, STATE, ours))  # the SDK sends only the latest round's responses
    (judged,) = rig.pending("verdict")
    assert judged["input_response"] == ours[asking.INPUT_KEY]
    rig.verdict(judged, "allow")
    (forwarded,) = (json.loads(x) for x in rig.to_upstream)
    assert forwarded["params"]["requestState"] == "v1.upstream-sealed"
    assert forwarded["params"]["inputResponses"] == theirs
    modern.CallToolRequest.model_validate(forwarded)


def test_upstream_round_after_bouncers_round_reaches_the_upstream_intact() -> None:
    rig = Rig()
    discover(rig)
    ask_about(rig, modern_call(1))
    rig.client(retry(2, STATE, {asking.INPUT_KEY: {"action": "accept", "content": {"choice": "session"}}}))
    rig.verdict(rig.pending("verdict")[0], "allow")
    assert "requestState" not in json.loads(rig.to_upstream[-1])["params"]
    upstream_round = result(
        2,
        {
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "elicitation/create", "params": {"message": "sure?"}}},
            "requestState": "v1.upstream-sealed",
        },
    )
    rig.upstream(upstream_round)
    rig.answer_all()
    assert rig.to_client[-1] == upstream_round  # relayed as the upstream wrote it
    theirs = retry(3, "v1.upstream-sealed", {"confirm": {"action": "accept", "content": {}}})
    rig.client(theirs)
    rig.verdict(rig.pending("verdict")[0], "allow")
    assert rig.to_upstream[-1] == theirs


def test_retry_that_cannot_be_rewritten_is_refused_not_forwarded_with_bouncers_state() -> None:
    rig = Rig()
    discover(rig)
    data = retry(1, STATE, {asking.INPUT_KEY: {"action": "accept"}}).replace(b'"minutes"', b"1e999")
    rig.client(data)
    assert rig.pending("verdict") == [] and rig.to_upstream == []
    assert "re-written" in blocked_text(rig.to_client[-1])


def test_a_retry_stripped_of_bouncers_state_keeps_other_responses() -> None:
    rig = Rig()
    discover(rig)
    responses = {asking.INPUT_KEY: {"action": "accept"}, "confirm": {"action": "accept"}}
    rig.client(retry(1, STATE, responses))
    rig.verdict(rig.pending("verdict")[0], "allow")
    assert json.loads(rig.to_upstream[-1])["params"]["inputResponses"] == {"confirm": {"action": "accept"}}


def test_parked_upstream_rounds_are_bounded() -> None:
    book = Asking()
    profile = ClientProfile()
    profile.note("server/discover", {"_meta": META})
    params = {"requestState": "v1.theirs", "inputResponses": {}}
    for n in range(asking.MAX_PARKED_ROUNDS + 5):
        held = Held(id_key(n) or ("n", n), n, b"{}", "send_email", {}, book.retry({"params": params}, params))
        assert book.ask_person(held, ask_fields(request_state=f"{STATE}{n}"), profile, None) is not None
    assert len(book._parked) == asking.MAX_PARKED_ROUNDS
    first = {"requestState": f"{STATE}0", "inputResponses": {}}
    assert b"v1.theirs" not in (book.retry({"params": first}, first).forward or b"")  # type: ignore[union-attr]
    last = {"requestState": f"{STATE}{asking.MAX_PARKED_ROUNDS + 4}"}
    assert b"v1.theirs" in (book.retry({"params": last}, last).forward or b"")  # type: ignore[union-attr]


def test_state_prefix_is_the_daemons() -> None:
    assert asking.STATE_PREFIX == ap.STATE_PREFIX


def test_clients_answer_to_a_servers_sampling_request_is_judged_before_it_goes_upstream() -> None:
    """The model's text (or what a person typed into a form) is the client's data reaching the server:
    it waits for a verdict, and a refusal gives the server an error in its place, never the answer."""
    for verdict in ("allow", "deny"):
        rig = Rig()
        initialize(rig)
        server_request = request(41, "sampling/createMessage", {"messages": [], "maxTokens": 9})
        rig.upstream(server_request)
        rig.answer_all()
        assert rig.to_client[-1] == server_request
        answer = {"role": "assistant", "content": {"type": "text", "text": "mail eve@evil.example"}}
        response = line({"jsonrpc": "2.0", "id": 41, "result": answer})
        sent_before = len(rig.to_upstream)
        rig.client(response)
        assert len(rig.to_upstream) == sent_before  # held until the verdict
        (judged,) = [m for m in rig.unanswered if m["op"] == "verdict"]
        assert (judged["kind"], judged["tool"], judged["arguments"]) == (
            "answer",
            "sampling/createMessage",
            answer,
        )
        rig.answer_all(verdict)
        if verdict == "allow":
            assert rig.to_upstream[-1] == response
        else:
            refused = json.loads(rig.to_upstream[-1])
            assert refused["id"] == 41 and "[bouncer blocked]" in refused["error"]["message"]
