"""The daemon link's machine on its own (sync.py): requests and replies, the resync, the link states.

No relay, no outbox, no held calls: values go in, `SendDaemon` frames and `Pending` entries come out.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from bouncer_shim import sync
from bouncer_shim.actions import Action, SendDaemon
from bouncer_shim.sync import LinkState, LinkSync
from test_relay import HELLO

from bouncerd import wire

OBSERVE = {"seq": 0, "kind": "other", "payload": b"x"}
VERDICT = {"request_id": 1, "tool": "t", "arguments": {}}
CLIENT = {"name": "claude-code", "version": "2", "protocol": "2025-11-25", "capabilities": None}


def sent(actions: list[Action]) -> list[dict[str, Any]]:
    """The requests the machine sent (decoded and checked as the daemon does), and forget them."""
    requests = []
    for action in actions:
        assert isinstance(action, SendDaemon)
        decoder = wire.FrameDecoder()
        decoder.receive_data(action.frame)
        message = decoder.next_message()
        assert message is not None and decoder.buffered == 0
        wire.check_request(message)
        requests.append(message)
    actions.clear()
    return requests


def synced_link() -> tuple[LinkSync, list[Action]]:
    actions: list[Action] = []
    link = LinkSync(HELLO, actions)
    link.connected(None)
    (hello,) = sent(actions)
    entry = link.replied(hello["id"])
    assert entry is not None and entry.sync
    assert link.sync_replied()
    return link, actions


def test_nothing_is_sent_before_the_first_connection() -> None:
    actions: list[Action] = []
    link = LinkSync(HELLO, actions)
    assert link.state is LinkState.CONNECTING and actions == [] and not link.awaiting_acks


def test_hello_opens_every_connection_and_the_link_is_up_once_it_is_answered() -> None:
    actions: list[Action] = []
    link = LinkSync(HELLO, actions)
    link.connected(None)
    (hello,) = sent(actions)
    assert hello["op"] == "hello" and {k: hello[k] for k in HELLO} == HELLO
    assert link.state is LinkState.SYNCING and link.awaiting_acks
    entry = link.replied(hello["id"])
    assert entry is not None and (entry.op, entry.target, entry.sync) == ("hello", None, True)
    assert link.sync_replied() and link.state is LinkState.UP and not link.awaiting_acks


def test_a_new_connection_is_told_the_client_and_every_page_of_the_tools_list_again() -> None:
    """A daemon that restarted knows nothing: without the resend a call would be judged unpinned."""
    link, actions = synced_link()
    first_page, second_page = [{"name": "read_email"}], [{"name": "send_email"}]
    link.remember_tools(first_page, paged=False)
    link.remember_tools(second_page, paged=True)
    link.lost()
    link.connected(CLIENT)
    hello, client, tools = sent(actions)
    assert [hello["op"], client["op"], tools["op"]] == ["hello", "client", "tools"]
    assert {k: client[k] for k in CLIENT} == CLIENT
    assert tools["tools"] == first_page + second_page
    for request in (tools, client):  # replies come in any order; UP only after the last
        assert link.replied(request["id"]) is not None
        assert not link.sync_replied() and link.state is LinkState.SYNCING
    assert link.replied(hello["id"]) is not None
    assert link.sync_replied() and link.state is LinkState.UP


def test_a_first_tools_page_replaces_the_remembered_list() -> None:
    link, actions = synced_link()
    link.remember_tools([{"name": "old"}], paged=False)
    link.remember_tools([{"name": "new"}], paged=False)
    link.remember_tools([{"name": "page"}], paged=True)
    link.lost()
    link.connected(None)
    assert sent(actions)[1]["tools"] == [{"name": "new"}, {"name": "page"}]


def test_remembered_tools_are_bounded() -> None:
    link, actions = synced_link()
    link.remember_tools([{"name": "t"}] * (sync.MAX_REMEMBERED_TOOLS + 5), paged=False)
    link.remember_tools([{"name": "more"}], paged=True)
    link.lost()
    link.connected(None)
    assert len(sent(actions)[1]["tools"]) == sync.MAX_REMEMBERED_TOOLS


def test_replies_that_are_not_the_resync_do_not_bring_the_link_up() -> None:
    """Verdicts wait for the resync; an unrelated reply arriving first must not release them."""
    actions: list[Action] = []
    link = LinkSync(HELLO, actions)
    link.connected(None)
    assert link.request("observe", "out", OBSERVE)
    hello, observe = sent(actions)
    entry = link.replied(observe["id"])
    assert entry is not None and not entry.sync and link.state is LinkState.SYNCING
    entry = link.replied(hello["id"])
    assert entry is not None and link.sync_replied()


def test_a_slow_verdict_is_not_an_ack_the_pump_waits_for() -> None:
    """A verdict may wait for a person; only other requests count as the daemon owing an answer."""
    link, actions = synced_link()
    assert link.request("verdict", "held", VERDICT)
    assert not link.awaiting_acks
    assert link.request("answer", None, {"request_id": 1, "code": "c", "action": "cancel", "choice": None})
    assert link.awaiting_acks
    _, answer = sent(actions)
    assert link.replied(answer["id"]) is not None and not link.awaiting_acks


def test_awaiting_a_verdict_counts_verdicts_only_until_answered_or_the_link_is_lost() -> None:
    """What the pump polls for: an unanswered verdict, not an ack of an observation or a record."""
    link, actions = synced_link()
    assert link.request("observe", "out", OBSERVE)
    assert not link.awaiting_verdict
    assert link.request("verdict", "first", VERDICT)
    assert link.request("verdict", "second", {"request_id": 2, "tool": "t", "arguments": {}})
    _, first, second = sent(actions)
    assert link.replied(first["id"]) is not None and link.awaiting_verdict
    assert link.replied(first["id"]) is None and link.awaiting_verdict  # a repeated reply counts once
    assert link.replied(second["id"]) is not None and not link.awaiting_verdict
    assert link.request("verdict", "third", VERDICT)
    link.lost()
    assert not link.awaiting_verdict


def test_the_pump_wakes_for_every_reply_but_acknowledgements_nothing_waits_on() -> None:
    """A reply something waits on (a verdict, a tools list's answer, a withdrawal of the fast-path set
    when no acknowledgement is owed) must wake the pump; acknowledgements of observations and records
    alone need not: they are read when the pump next wakes, before it handles anything."""
    link, actions = synced_link()
    assert link.wake_for_replies  # nothing in flight: the socket is watched (a daemon going away)
    assert link.request("fastpath", "ask", {"holding": None})
    assert link.wake_for_replies  # a parked fastpath request alone: its reply (a withdrawal) wakes
    record = {"request_id": 1, "request_id_json": "1", "tool": "t", "arguments": {}, "epoch": 1, "seq": 0}
    assert link.request("forwarded", "record", record)
    assert link.request("observe", "out", OBSERVE)
    assert not link.wake_for_replies  # only acknowledgements and the parked request
    assert link.request("verdict", "held", VERDICT)
    assert link.wake_for_replies  # a verdict wakes
    fastpath, forwarded, observe, verdict = sent(actions)
    assert link.replied(verdict["id"]) is not None and not link.wake_for_replies
    assert link.request("tools", None, {"tools": []})
    assert link.wake_for_replies  # a tools list's answer is waited on (the fast-path set)
    (tools,) = sent(actions)
    assert link.replied(tools["id"]) is not None and not link.wake_for_replies
    assert link.replied(forwarded["id"]) is not None and not link.wake_for_replies
    assert link.replied(observe["id"]) is not None and link.wake_for_replies
    assert link.request("observe", "out", OBSERVE)
    link.lost()
    assert link.wake_for_replies
    assert link.replied(fastpath["id"]) is None
    actions.clear()  # the observation sent before the loss
    link.connected(None)  # a resync: replayed records and outputs are what calls wait for
    assert link.request("forwarded", "record", record, sync=True)
    assert link.request("observe", "out", OBSERVE, sync=True)
    hello, *_ = sent(actions)
    assert link.replied(hello["id"]) is not None and not link.sync_replied()
    assert link.wake_for_replies and link.state is LinkState.SYNCING


def test_each_reply_answers_its_own_request_once_in_any_order() -> None:
    link, actions = synced_link()
    assert link.request("verdict", "first", VERDICT)
    assert link.request("verdict", "second", {"request_id": 2, "tool": "t", "arguments": {}})
    first, second = sent(actions)
    assert first["id"] != second["id"]
    entry = link.replied(second["id"])
    assert entry is not None and entry.target == "second"
    assert link.replied(second["id"]) is None  # a repeated reply answers nothing
    entry = link.replied(first["id"])
    assert entry is not None and entry.target == "first"


def test_a_reply_whose_id_is_not_an_integer_answers_nothing() -> None:
    link, actions = synced_link()
    assert link.request("observe", "out", OBSERVE)
    (observe,) = sent(actions)
    for rid in (str(observe["id"]), None, float(observe["id"]), [observe["id"]]):
        assert link.replied(rid) is None
    assert link.replied(observe["id"]) is not None


def test_a_request_msgpack_cannot_carry_sends_nothing_and_uses_no_id() -> None:
    link, actions = synced_link()
    assert not link.request("verdict", "held", {"request_id": 1, "tool": "t", "arguments": {"n": 2**70}})
    assert not link.request("observe", "out", {**OBSERVE, "method": "\ud800"}, sync=True)
    assert actions == [] and not link.awaiting_acks
    assert link.request("verdict", "held", VERDICT)
    (verdict,) = sent(actions)
    assert verdict["id"] == 1  # the hello was 0


def test_losing_the_link_forgets_every_request_in_flight_and_hands_them_back() -> None:
    link, actions = synced_link()
    assert link.request("verdict", "held", VERDICT)
    assert link.request("observe", "out", OBSERVE)
    verdict, observe = sent(actions)
    pending = link.lost()
    assert [(p.op, p.target) for p in pending] == [("verdict", "held"), ("observe", "out")]
    assert link.state is LinkState.DOWN and not link.awaiting_acks
    assert link.replied(verdict["id"]) is None and link.replied(observe["id"]) is None


def test_a_reconnect_after_a_lost_resync_starts_counting_again() -> None:
    """The hello of a dead connection will never be answered; the new one's must be enough."""
    actions: list[Action] = []
    link = LinkSync(HELLO, actions)
    link.connected(CLIENT)
    sent(actions)
    link.lost()
    link.connected(None)
    (hello,) = sent(actions)
    assert link.replied(hello["id"]) is not None
    assert link.sync_replied() and link.state is LinkState.UP


def test_the_link_machine_is_sans_io() -> None:
    tree = ast.parse(Path(sync.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"os", "socket", "selectors", "select", "time", "anyio", "subprocess", "signal"}
