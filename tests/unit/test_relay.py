"""The shim's interception state machine, driven with lines and daemon replies, no I/O.

Each test is named after the failure or attack it stops. `Rig` plays the pump: it feeds the relay,
collects its actions, decodes the frames it sends the daemon and answers them when told to.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from bouncer_shim import outbox
from bouncer_shim.actions import Diagnose, SendClient, SendDaemon, SendUpstream, Stop
from bouncer_shim.jsonrpc import LOST_REASON, UNREACHABLE_REASON
from bouncer_shim.lines import OversizedLine
from bouncer_shim.relay import Relay
from bouncer_shim.sync import LinkState
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd import wire

HELLO = {
    "version": wire.PROTOCOL_VERSION,
    "role": "shim",
    "session": "test",
    "server": "mail",
    "upstream": ["mail-server"],
    "policy_path": None,
    "instance": "abcd",
    "pid": 1,
    "client_pid": 2,
}


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def call(rid: Any, tool: str, arguments: Any = None, **extra: Any) -> bytes:
    params: dict[str, Any] = {"name": tool, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return line({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def request(rid: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return line(message)


def result(rid: Any, value: dict[str, Any]) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "result": value})


class Rig:
    """`listed`: the client lists the server's tools first (an empty list), so calls go straight to
    their verdicts; without it the shim lists them itself before the first call (selflist.py)."""

    def __init__(self, *, connect: bool = True, listed: bool = True, release_on_write: bool = True) -> None:
        self.relay = Relay(HELLO)
        self.release_on_write = release_on_write  # False: a daemon older than the one round trip
        self.to_client: list[bytes] = []
        self.to_upstream: list[bytes] = []
        self.requests: list[dict[str, Any]] = []  # every frame sent to the daemon, in order
        self.order: list[tuple[str, Any]] = []  # ("client", line) and ("daemon", op) in action order
        self.unanswered: list[dict[str, Any]] = []
        self.diagnostics: list[str] = []
        self.stops: list[Stop] = []
        if connect:
            self.relay.daemon_connected()
            self.pump()
            self.answer_all()
            assert self.relay.state is LinkState.UP
            if listed:
                self.client(request("rig-tools", "tools/list"))
                self.upstream(result("rig-tools", {"tools": []}))
                self.answer_all()
                for seen in (self.to_client, self.to_upstream, self.requests, self.diagnostics, self.order):
                    seen.clear()

    def pump(self) -> None:
        for action in self.relay.take_actions():
            if isinstance(action, SendClient):
                self.to_client.append(action.line)
                self.order.append(("client", action.line))
            elif isinstance(action, SendUpstream):
                self.to_upstream.append(action.line)
            elif isinstance(action, SendDaemon):
                decoder = wire.FrameDecoder()
                decoder.receive_data(action.frame)
                message = decoder.next_message()
                assert message is not None and decoder.buffered == 0
                wire.check_request(message)  # the real daemon validates every request this way
                self.requests.append(message)
                self.unanswered.append(message)
                self.order.append(("daemon", message["op"]))
            elif isinstance(action, Diagnose):
                self.diagnostics.append(action.message)
            elif isinstance(action, Stop):
                self.stops.append(action)

    def client(self, data: bytes) -> None:
        self.relay.client_line(data)
        self.pump()

    def upstream(self, data: bytes) -> None:
        self.relay.upstream_line(data)
        self.pump()

    def pending(self, op: str) -> list[dict[str, Any]]:
        return [m for m in self.unanswered if m["op"] == op]

    def answer(self, message: dict[str, Any], **fields: Any) -> None:
        self.unanswered.remove(message)
        reply = dict(fields) if fields.get("ok") is False else wire.reply(message["id"], **fields)
        reply["id"] = message["id"]
        self.relay.daemon_message(reply)
        self.pump()

    def verdict(self, message: dict[str, Any], verdict: str, reason: str = "because") -> None:
        self.answer(message, verdict=verdict, rule="test", reason=reason)

    def answer_all(self, verdict: str = "allow") -> None:
        while self.unanswered:
            message = self.unanswered[0]
            if message["op"] == "verdict":
                self.verdict(message, verdict)
            elif message["op"] == "observe":
                self.answer(message, seq=message["seq"])
            elif message["op"] == "hello":
                self.answer(message, release_on_write=self.release_on_write)  # as bouncerd answers
            else:
                self.answer(message)

    def lose_daemon(self) -> None:
        self.unanswered.clear()
        self.relay.daemon_lost()
        self.pump()

    def reconnect(self) -> list[dict[str, Any]]:
        start = len(self.requests)
        self.relay.daemon_connected()
        self.pump()
        return self.requests[start:]


def blocked_text(data: bytes) -> str:
    message = json.loads(data)
    assert message["result"]["isError"] is True
    text: str = message["result"]["content"][0]["text"]
    assert text.startswith("[bouncer blocked] ")
    return text


# ---- the gate ------------------------------------------------------------------------------------


def test_denied_call_never_reaches_upstream() -> None:
    rig = Rig()
    rig.client(call(7, "send_email", {"to": "attacker@evil.test"}))
    assert rig.to_upstream == []
    (asked,) = rig.pending("verdict")
    assert asked["tool"] == "send_email" and asked["arguments"] == {"to": "attacker@evil.test"}
    assert asked["request_id"] == 7
    rig.verdict(asked, "deny", "attacker@evil.test first appeared in output of mail/read_email")
    assert rig.to_upstream == []
    (answer,) = rig.to_client
    assert json.loads(answer)["id"] == 7
    assert "attacker@evil.test first appeared" in blocked_text(answer)


def test_ask_verdict_is_not_forwarded_until_asking_exists() -> None:
    rig = Rig()
    rig.client(call(1, "send_email", {"to": "new@x.test"}))
    rig.verdict(rig.pending("verdict")[0], "ask", "new@x.test is unproven")
    assert rig.to_upstream == []
    assert "unproven" in blocked_text(rig.to_client[0])


def test_unknown_verdict_is_a_refusal_not_an_allow() -> None:
    rig = Rig()
    rig.client(call(1, "send_email", {}))
    rig.verdict(rig.pending("verdict")[0], "maybe")
    assert rig.to_upstream == []
    blocked_text(rig.to_client[0])


def test_error_reply_to_a_verdict_refuses_the_call() -> None:
    rig = Rig()
    rig.client(call(1, "send_email", {}))
    rig.answer(rig.pending("verdict")[0], ok=False, error={"code": "internal", "message": "boom"})
    assert rig.to_upstream == []
    assert "could not decide" in blocked_text(rig.to_client[0])


def test_allowed_call_is_forwarded_byte_for_byte() -> None:
    rig = Rig()
    original = (
        b'{ "params" : {"arguments":{"b":2, "a":1}, "name":"echo"},"id":"x-1", '
        b'"method":"tools/call","jsonrpc":"2.0"}\r'
    )
    rig.client(original)
    rig.verdict(rig.pending("verdict")[0], "allow")
    assert rig.to_upstream == [original]


def test_missing_arguments_are_checked_as_an_empty_object() -> None:
    rig = Rig()
    rig.client(call(1, "list_things"))
    assert rig.pending("verdict")[0]["arguments"] == {}


@pytest.mark.parametrize("daemon_says", ["deny", "allow"])
@pytest.mark.parametrize("arguments", [[1, 2], "to=evil@x.test", 5, None])
def test_non_object_arguments_are_refused_and_audited_never_forwarded(
    arguments: Any, daemon_says: str
) -> None:
    """A call whose arguments cannot be checked is never forwarded, but the daemon hears of it (the
    reference design refused such calls without an audit line)."""
    rig = Rig()
    params = {"name": "send_email", "arguments": arguments}
    rig.client(line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
    (asked,) = rig.pending("verdict")
    assert asked["arguments"] == {} and "not a JSON object" in asked["invalid"]
    rig.verdict(asked, daemon_says, reason="the call's arguments are not a JSON object")
    assert rig.to_upstream == []
    assert "not a JSON object" in blocked_text(rig.to_client[0])


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_email",'
        b'"arguments":{"to":"evil@x.test"},"arguments":{"to":"me@x.test"}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping","params":{"name":"send_email"}}',
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping"}]',
    ],
)
def test_repeated_keys_cannot_make_the_server_see_another_message(data: bytes) -> None:
    """Python keeps the last of two equal keys; a server's parser may keep the first."""
    rig = Rig()
    rig.client(data)
    assert rig.pending("verdict") == [] and rig.to_upstream == []
    answer = json.loads(rig.to_client[0])
    assert answer["id"] is None and answer["error"]["code"] == -32600


def test_a_call_sent_as_a_notification_is_dropped_not_forwarded() -> None:
    rig = Rig()
    rig.client(line({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "send_email"}}))
    assert rig.to_upstream == [] and rig.to_client == [] and rig.pending("verdict") == []
    assert any("notification" in d for d in rig.diagnostics)


def test_call_without_a_tool_name_is_an_invalid_params_error() -> None:
    rig = Rig()
    rig.client(request(1, "tools/call", {"arguments": {}}))
    assert rig.to_upstream == []
    assert json.loads(rig.to_client[0])["error"]["code"] == -32602


@pytest.mark.parametrize("arguments", [{"n": 2**70}, {"s": "\ud800"}])
def test_arguments_the_daemon_cannot_receive_are_refused(arguments: dict[str, Any]) -> None:
    rig = Rig()
    rig.client(call(1, "send_email", arguments))
    assert rig.to_upstream == [] and rig.pending("verdict") == []
    assert "cannot be sent to bouncerd" in blocked_text(rig.to_client[0])


# ---- cancellation --------------------------------------------------------------------------------


def cancel(rid: Any) -> bytes:
    return line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})


def test_held_call_cancelled_is_never_forwarded() -> None:
    rig = Rig()
    rig.client(call(3, "send_email", {"to": "a@x.test"}))
    rig.client(cancel(3))
    assert rig.to_upstream == [] and rig.to_client == []
    rig.verdict(rig.pending("verdict")[0], "allow")
    assert rig.to_upstream == [] and rig.to_client == []


def test_cancel_names_the_id_exactly() -> None:
    """Cancelling "3" must not drop call 3 (and must reach the server, which may know "3")."""
    rig = Rig()
    rig.client(call(3, "send_email", {}))
    rig.client(cancel("3"))
    assert rig.to_upstream == [cancel("3")]
    rig.verdict(rig.pending("verdict")[0], "allow")
    assert rig.to_upstream[-1] == call(3, "send_email", {})


def test_cancel_of_a_forwarded_call_is_forwarded() -> None:
    rig = Rig()
    rig.client(call(3, "slow", {}))
    rig.verdict(rig.pending("verdict")[0], "allow")
    rig.client(cancel(3))
    assert rig.to_upstream == [call(3, "slow", {}), cancel(3)]


# ---- malformed client input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe{}", b'{"jsonrpc":"2.0","id":1,"method":"ping"', b"not json", b"[" * 100_000, b"1e999999x"],
)
def test_client_garbage_is_answered_with_a_parse_error_and_the_relay_goes_on(data: bytes) -> None:
    rig = Rig()
    rig.client(data)
    (answer,) = rig.to_client
    assert json.loads(answer) == {"jsonrpc": "2.0", "id": None, "error": json.loads(answer)["error"]}
    assert json.loads(answer)["error"]["code"] == -32700
    assert rig.to_upstream == []
    rig.client(request(2, "ping"))
    assert rig.to_upstream == [request(2, "ping")]


def test_utf16_json_is_not_accepted_as_json() -> None:
    """json.loads(bytes) would decode UTF-16; a server reading UTF-8 would see something else."""
    rig = Rig()
    rig.client(request(1, "tools/call", {"name": "x"}).decode().encode("utf-16"))
    assert json.loads(rig.to_client[0])["error"]["code"] == -32700
    assert rig.pending("verdict") == []


@pytest.mark.parametrize("data", [b"42", b'"tools/call"', b"null", b"[]"])
def test_json_that_is_not_a_message_is_an_invalid_request(data: bytes) -> None:
    rig = Rig()
    rig.client(data)
    assert json.loads(rig.to_client[0])["error"]["code"] == -32600
    assert rig.to_upstream == []


def test_blank_lines_are_ignored() -> None:
    rig = Rig()
    rig.client(b"")
    rig.client(b" \r")
    rig.upstream(b"\t")
    assert rig.to_client == [] and rig.to_upstream == [] and rig.pending("observe") == []


def test_oversized_client_line_is_refused_not_forwarded() -> None:
    rig = Rig()
    rig.relay.client_oversized(OversizedLine(size=70 << 20, head=call(1, "x", {})[:50], tail=b"}"))
    rig.pump()
    message = json.loads(rig.to_client[0])
    assert message["id"] is None and message["error"]["code"] == -32600
    assert rig.to_upstream == []


def test_batch_cannot_smuggle_a_call_past_the_gate() -> None:
    rig = Rig()
    batch = [json.loads(request(1, "ping")), json.loads(call(2, "send_email", {"to": "a@x.test"})), 5]
    rig.client(json.dumps(batch).encode())
    assert [json.loads(x) for x in rig.to_upstream] == [batch[0]]
    assert rig.pending("verdict")[0]["tool"] == "send_email"
    assert json.loads(rig.to_client[0])["error"]["code"] == -32600  # the 5
    rig.verdict(rig.pending("verdict")[0], "deny")
    assert len(rig.to_upstream) == 1
    blocked_text(rig.to_client[1])


def test_client_responses_to_server_requests_pass_unchanged() -> None:
    rig = Rig()
    answer = (
        b'{"jsonrpc":"2.0","id":"srv-1","result":{"role":"assistant","content":{"type":"text","text":"hi"}}}'
    )
    rig.client(answer)
    assert rig.to_upstream == [answer]


# ---- observation and release ---------------------------------------------------------------------


def test_output_is_released_in_order_right_after_its_observation_and_kept_until_acked() -> None:
    # One round trip per call: the client sees an output as soon as its observation is on its way to
    # bouncerd (the pump writes it to the daemon socket first), not after the ack.
    rig = Rig()
    rig.client(request(1, "resources/read", {"uri": "x"}))
    rig.order.clear()
    first = result(1, {"contents": []})
    second = line({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    rig.upstream(first)
    rig.upstream(second)
    observe_first, observe_second = rig.pending("observe")  # pipelined: both asked at once
    assert (observe_first["kind"], observe_first["method"], observe_first["request_id"]) == (
        "result",
        "resources/read",
        1,
    )
    assert observe_first["payload"] == first
    assert (observe_second["kind"], observe_second["method"]) == ("notification", "notifications/progress")
    assert rig.order == [("daemon", "observe"), ("client", first), ("daemon", "observe"), ("client", second)]
    assert not rig.relay.is_flushed  # kept: a daemon that dies before reading them gets them replayed
    rig.answer(observe_second, seq=observe_second["seq"])
    rig.answer(observe_first, seq=observe_first["seq"])
    assert rig.relay.is_flushed and rig.to_client == [first, second]


def test_a_daemon_that_does_not_read_other_connections_first_gets_each_output_only_after_its_ack() -> None:
    # Version skew: a daemon older than this shim (still running after an upgrade) judges a send
    # without first reading what other shims sent. Releasing on write would let the agent read an
    # output and send through another shim before that daemon had seen it; so the shim waits.
    rig = Rig(release_on_write=False)
    rig.client(request(1, "resources/read", {"uri": "x"}))
    first = result(1, {"contents": []})
    rig.upstream(first)
    (observed,) = rig.pending("observe")
    assert rig.to_client == []
    rig.answer(observed, seq=observed["seq"])
    assert rig.to_client == [first]


def test_tool_results_are_observed_with_their_tool() -> None:
    rig = Rig()
    rig.client(call(5, "read_email", {}))
    rig.answer_all()
    rig.upstream(line({"jsonrpc": "2.0", "id": 5, "error": {"code": 1, "message": "x"}}))
    (observed,) = rig.pending("observe")
    assert (observed["kind"], observed["method"], observed["tool"]) == ("error", "tools/call", "read_email")


def test_server_requests_and_invalid_json_are_observed_before_the_client_sees_them() -> None:
    rig = Rig()
    rig.order.clear()
    rig.upstream(request("s1", "sampling/createMessage", {"maxTokens": 1}))
    rig.upstream(b"\xff not json")
    kinds = [(m["kind"], m["method"], m["request_id"]) for m in rig.pending("observe")]
    assert kinds == [("request", "sampling/createMessage", "s1"), ("other", None, None)]
    sampling = request("s1", "sampling/createMessage", {"maxTokens": 1})
    assert rig.order == [
        ("daemon", "observe"),
        ("client", sampling),
        ("daemon", "observe"),
        ("client", b"\xff not json"),
    ]


def test_tools_list_result_is_sent_for_pinning_and_released_unchanged_after_both_requests() -> None:
    rig = Rig()
    rig.client(request(1, "tools/list"))
    rig.order.clear()
    tools = [{"name": "send_email", "inputSchema": {"type": "object"}}]
    listed = result(1, {"tools": tools})
    rig.upstream(listed)
    (pinned,) = rig.pending("tools")
    assert pinned["tools"] == tools
    assert rig.order == [("daemon", "tools"), ("daemon", "observe"), ("client", listed)]
    rig.answer(rig.pending("observe")[0], seq=0)
    assert not rig.relay.is_flushed  # the tools op is not acknowledged yet
    rig.answer(pinned, pinned_now=["send_email"], unpinned=[], changed=[])
    assert rig.relay.is_flushed and rig.to_client == [listed]


def test_large_result_is_classified_from_its_envelope() -> None:
    rig = Rig()
    rig.client(call("big", "read_file", {}))
    rig.answer_all()
    big = (
        b'{"result":{"content":[{"type":"text","text":"'
        + b"x" * (2 << 20)
        + b'"}]},"jsonrpc":"2.0","id":"big"}'
    )
    rig.upstream(big)
    (observed,) = rig.pending("observe")
    assert (observed["kind"], observed["tool"], observed["request_id"]) == ("result", "read_file", "big")
    assert observed["payload"] == big
    rig.answer_all()
    assert rig.to_client == [big]


def test_oversized_response_is_replaced_by_an_error_for_its_request() -> None:
    rig = Rig()
    rig.client(call(9, "read_file", {}))
    rig.answer_all()
    rig.relay.upstream_oversized(
        OversizedLine(
            size=70 << 20,
            head=b'{"result":{"content":[{"text":"xxxx',
            tail=b'xxx"}]},"jsonrpc":"2.0","id":9}',
        )
    )
    rig.pump()
    message = json.loads(rig.to_client[0])
    assert message["id"] == 9 and message["error"]["code"] == -32603


def test_oversized_line_answering_nothing_is_dropped_and_logged() -> None:
    rig = Rig()
    rig.relay.upstream_oversized(OversizedLine(size=70 << 20, head=b'{"method":"x","params":"', tail=b'"}'))
    rig.pump()
    assert rig.to_client == [] and any("discarded" in d for d in rig.diagnostics)


# ---- the client's identity -----------------------------------------------------------------------


def test_initialize_tells_the_daemon_who_the_client_is() -> None:
    rig = Rig()
    params = {
        "protocolVersion": "2025-06-18",
        "clientInfo": {"name": "claude-code", "version": "2.0"},
        "capabilities": {"elicitation": {}},
    }
    rig.client(request(0, "initialize", params))
    (told,) = rig.pending("client")
    assert (told["name"], told["version"], told["protocol"], told["capabilities"]) == (
        "claude-code",
        "2.0",
        "2025-06-18",
        {"elicitation": {}},
    )
    assert rig.to_upstream == [request(0, "initialize", params)]
    assert rig.relay.modern is False


def modern_meta(name: str = "c", version: str = "1") -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": name, "version": version},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def test_modern_client_info_is_sent_once_and_again_only_when_it_changes() -> None:
    rig = Rig()
    rig.client(request(1, "server/discover", {"_meta": modern_meta()}))
    rig.client(request(2, "tools/list", {"_meta": modern_meta()}))
    rig.client(request(3, "tools/list", {"_meta": modern_meta(version="2")}))
    assert [m["version"] for m in rig.requests if m["op"] == "client"] == ["1", "2"]
    assert rig.relay.modern is True


def test_modern_blocked_result_carries_result_type_and_the_server_stamp() -> None:
    rig = Rig()
    rig.client(request(1, "server/discover", {"_meta": modern_meta()}))
    stamp = {"name": "mail", "version": "3"}
    rig.upstream(
        result(
            1, {"supportedVersions": ["2026-07-28"], "_meta": {"io.modelcontextprotocol/serverInfo": stamp}}
        )
    )
    rig.answer_all()
    rig.client(call(2, "send_email", {"to": "a@x.test"}, _meta=modern_meta()))
    rig.verdict(rig.pending("verdict")[0], "deny")
    message = json.loads(rig.to_client[-1])
    assert message["result"]["resultType"] == "complete"
    assert message["result"]["_meta"] == {"io.modelcontextprotocol/serverInfo": stamp}


def test_discover_then_initialize_fallback_is_the_legacy_era() -> None:
    rig = Rig()
    rig.client(request(1, "server/discover", {"_meta": modern_meta()}))
    rig.client(
        request(
            2,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "clientInfo": {"name": "c", "version": "1"},
                "capabilities": {},
            },
        )
    )
    rig.client(call(3, "x", {}))
    rig.verdict(rig.pending("verdict")[0], "deny")
    assert "resultType" not in json.loads(rig.to_client[-1])["result"]


# ---- the daemon away -----------------------------------------------------------------------------


def test_daemon_absent_calls_are_refused_with_the_reason_and_the_rest_relayed() -> None:
    rig = Rig(connect=False)
    rig.lose_daemon()
    rig.client(request(1, "tools/list"))
    rig.client(call(2, "send_email", {}))
    assert rig.to_upstream == [request(1, "tools/list")]
    assert UNREACHABLE_REASON in blocked_text(rig.to_client[0])
    listed = result(1, {"tools": []})
    rig.upstream(listed)
    assert rig.to_client[-1] == listed  # released without an ack, kept for replay


def test_daemon_lost_with_a_verdict_pending_refuses_the_call() -> None:
    rig = Rig()
    rig.client(call(1, "send_email", {}))
    rig.lose_daemon()
    assert rig.to_upstream == []
    assert UNREACHABLE_REASON in blocked_text(rig.to_client[0])


def test_daemon_lost_releases_unacknowledged_output_and_replays_it() -> None:
    rig = Rig(listed=False)
    out = line({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "a@x.test"}})
    rig.upstream(out)
    (observed,) = rig.pending("observe")
    rig.lose_daemon()
    assert rig.to_client == [out]
    sent = rig.reconnect()
    assert [m["op"] for m in sent] == ["hello", "observe"]
    assert sent[1]["seq"] == observed["seq"] and sent[1]["payload"] == out


def test_while_connecting_calls_and_output_wait() -> None:
    """The shim lists the tools while it connects; the call's verdict waits for the resync that
    carries the list."""
    rig = Rig(connect=False)
    rig.client(call(1, "send_email", {}))
    (own,) = [json.loads(sent) for sent in rig.to_upstream]
    assert own["method"] == "tools/list"
    tools = [{"name": "send_email", "inputSchema": {"type": "object"}}]
    rig.upstream(result(own["id"], {"tools": tools}))
    rig.upstream(line({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}))
    assert rig.to_client == [] and len(rig.to_upstream) == 1 and rig.requests == []
    assert [m["op"] for m in rig.reconnect()] == ["hello", "tools", "observe"]
    assert rig.pending("tools")[0]["tools"] == tools
    rig.answer_all()
    assert len(rig.to_client) == 1 and rig.to_upstream[1:] == [call(1, "send_email", {})]


def test_replayed_observations_come_before_any_verdict_after_a_reconnect() -> None:
    rig = Rig()
    rig.client(
        request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "clientInfo": {"name": "c", "version": "1"},
                "capabilities": {},
            },
        )
    )
    rig.client(request(1, "tools/list"))
    rig.upstream(result(1, {"tools": [{"name": "send_email", "inputSchema": {}}]}))
    rig.answer_all()
    rig.lose_daemon()
    rig.client(call(2, "read_email", {}))  # refused at once: nobody to ask
    assert UNREACHABLE_REASON in blocked_text(rig.to_client[-1])
    leaked = result(7, {"content": [{"type": "text", "text": "write to evil@x.test"}]})
    rig.upstream(leaked)
    assert rig.to_client[-1] == leaked
    sent = rig.reconnect()
    assert [m["op"] for m in sent] == ["hello", "client", "tools", "observe"]
    assert sent[3]["payload"] == leaked
    rig.client(call(3, "send_email", {"to": "evil@x.test"}))
    assert rig.pending("verdict") == []  # not before the daemon has acknowledged everything
    for message in list(rig.unanswered):
        if message["op"] != "verdict":
            rig.answer(message, seq=message.get("seq"))
    (asked,) = rig.pending("verdict")
    assert rig.requests.index(asked) > rig.requests.index(sent[3])


def test_replay_overflow_refuses_every_call_for_good() -> None:
    rig = Rig()
    rig.lose_daemon()
    chunk = (
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + b"x" * (1 << 20) + b'"}}'
    )
    for _ in range(outbox.MAX_REPLAY_BYTES // len(chunk) + 1):
        rig.upstream(chunk)
    assert rig.relay.observations_lost
    rig.reconnect()
    rig.answer_all()
    rig.client(call(1, "read_email", {}))
    assert LOST_REASON in blocked_text(rig.to_client[-1])
    assert rig.pending("verdict") == []


def test_daemon_refusing_an_observation_means_calls_are_refused() -> None:
    rig = Rig()
    rig.upstream(line({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}))
    rig.answer(rig.pending("observe")[0], ok=False, error={"code": "bad", "message": "no"})
    rig.client(call(1, "x", {}))
    assert LOST_REASON in blocked_text(rig.to_client[-1])


def test_refused_hello_stops_the_shim_with_status_2() -> None:
    rig = Rig(connect=False)
    rig.reconnect()
    (hello,) = rig.pending("hello")
    assert {k: hello[k] for k in HELLO} == HELLO
    rig.answer(hello, ok=False, error={"code": "policy", "message": "policy.yaml:3: unknown key 'sinkz'"})
    (stop,) = rig.stops
    assert stop.status == 2 and "unknown key 'sinkz'" in stop.message


def test_reply_to_nothing_is_ignored() -> None:
    rig = Rig()
    rig.relay.daemon_message({"id": 999, "ok": True})
    rig.relay.daemon_message({"id": "x", "ok": True})
    rig.pump()
    assert rig.to_client == [] and len(rig.diagnostics) == 2


# ---- untrusted input never crashes the relay -----------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={
        "id": st.one_of(st.integers(), st.text(max_size=3), st.none(), st.booleans()),
        "method": st.sampled_from(["tools/call", "tools/list", "initialize", "notifications/cancelled", "x"]),
        "params": json_values,
        "result": json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.binary(max_size=40), messages.map(lambda m: json.dumps(m).encode())), max_size=6)
)
def test_any_client_or_upstream_lines_yield_actions_never_exceptions(lines: list[bytes]) -> None:
    rig = Rig()
    for data in lines:
        rig.client(data)
        rig.upstream(data)
        rig.answer_all("allow")
    for data in rig.to_client:
        if data not in lines:  # made by the shim: always valid JSON-RPC
            assert json.loads(data)["jsonrpc"] == "2.0"


def test_a_wedged_daemon_is_noticed_by_its_missing_acks_but_a_slow_verdict_is_not() -> None:
    """The pump drops a daemon that leaves acks unanswered; a verdict may wait for a person."""
    rig = Rig()
    assert not rig.relay.awaiting_acks
    rig.client(call(1, "send_email", {}))
    assert not rig.relay.awaiting_acks
    rig.upstream(line({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}))
    assert rig.relay.awaiting_acks
    rig.answer(rig.pending("observe")[0], seq=0)
    assert not rig.relay.awaiting_acks
    rig.lose_daemon()
    assert not rig.relay.awaiting_acks


@pytest.mark.parametrize("raw_id", ["1e999", "-1e999", "NaN", "Infinity"])
def test_refused_call_with_a_non_finite_id_is_answered_not_a_crash(raw_id: str) -> None:
    """`1e999` parses as infinity, which JSON cannot write back: the refusal answers with id null (as for
    an unreadable request) instead of stopping the shim and every call in flight with it."""
    rig = Rig()
    rig.lose_daemon()  # every call is refused at once
    call_line = (
        b'{"jsonrpc":"2.0","id":' + raw_id.encode() + b',"method":"tools/call","params":{"name":"t"}}\n'
    )
    rig.client(call_line)
    rig.client(request(2, "tools/call", {"name": "t", "arguments": {}}))
    assert rig.to_upstream == []
    answers = [json.loads(x) for x in rig.to_client]
    assert [a["id"] for a in answers] == [None, 2]
    assert all(a["result"]["isError"] is True for a in answers)


# Issue 15 item 7: these ids reached the audit log as request_id null. The wire carries only strings
# and 64-bit integers, so the shim also sends the id's exact JSON text.
ODD_IDS = [
    (b"1.50", "1.50"),
    (b"1e999", "1e999"),
    (b"-0.0", "-0.0"),
    (str(2**70).encode(), str(2**70)),
    (b'"a\\ud800b"', '"a\\ud800b"'),
    (b"null", "null"),
    (b'"plain"', '"plain"'),
    (b"7", "7"),
]


@pytest.mark.parametrize(("raw", "text"), ODD_IDS)
def test_odd_request_ids_reach_the_daemon_as_their_exact_json_text_not_null(raw: bytes, text: str) -> None:
    rig = Rig()
    rig.client(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"tools/call","params":{"name":"t"}}')
    (asked,) = rig.pending("verdict")
    assert asked["request_id_json"] == text
    assert text.isascii()
