"""Held calls on their own (held.py): holding, requesting the verdict, waiting for the link, cancelling.

No relay and no link: a `Recorder` plays `LinkSync.request`. What comes out is the requests made and
what `HeldCalls` hands back.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from bouncer_shim import held as held_mod
from bouncer_shim.held import Held, HeldCalls, Retry
from bouncer_shim.jsonrpc import id_key
from test_relay_outbox import Recorder


def call(rid: Any, tool: str = "send_email", arguments: dict[str, Any] | None = None, **extra: Any) -> Held:
    key = id_key(rid)
    assert key is not None
    line = b'{"jsonrpc":"2.0","id":%b,"method":"tools/call"}' % str(rid).encode()
    return Held(key, rid, line, tool, {} if arguments is None else arguments, **extra)


def test_a_call_held_with_the_link_up_has_its_verdict_requested_at_once() -> None:
    daemon = Recorder()
    calls = HeldCalls(daemon)
    held = call(7, arguments={"to": "a@x.test"})
    assert calls.hold(held, link_up=True)
    assert daemon.requests == [
        (
            "verdict",
            held,
            {"request_id": 7, "request_id_json": "7", "tool": "send_email", "arguments": {"to": "a@x.test"}},
            False,
        )
    ]
    assert calls.held_bytes == len(held.line) and calls.take_waiting() == []


def test_a_call_held_while_the_link_is_not_up_waits_and_nothing_is_sent() -> None:
    daemon = Recorder()
    calls = HeldCalls(daemon)
    first, second = call(1), call(2)
    assert calls.hold(first, link_up=False) and calls.hold(second, link_up=False)
    assert daemon.requests == [] and calls.held_bytes == len(first.line) + len(second.line)
    assert calls.take_waiting() == [first, second]
    assert calls.take_waiting() == []  # handed over once
    assert calls.request_verdict(first) and daemon.ops() == ["verdict"]


def test_the_verdict_request_says_why_a_call_cannot_be_checked_and_carries_its_retry() -> None:
    daemon = Recorder()
    retry = Retry({"request_state": "bouncer1.x", "input_response": None}, b"forwarded", True, None)
    held = call("r", invalid="not an object", retry=retry)
    HeldCalls(daemon).hold(held, link_up=True)
    ((_, _, fields, _),) = daemon.requests
    assert fields["invalid"] == "not an object" and fields["request_state"] == "bouncer1.x"
    assert "input_response" in fields and fields["request_id"] == "r"


def test_a_request_id_the_wire_cannot_carry_is_sent_as_nil() -> None:
    daemon = Recorder()
    HeldCalls(daemon).hold(call(2**70), link_up=True)
    assert daemon.requests[0][2]["request_id"] is None


def test_a_verdict_request_that_cannot_be_sent_releases_the_call() -> None:
    calls = HeldCalls(Recorder("verdict"))
    held = call(1)
    assert not calls.hold(held, link_up=True)
    assert calls.held_bytes == 0 and calls.cancel(held.key) is None


def test_a_cancel_drops_every_call_under_its_id_and_only_those() -> None:
    """Cancelling 3 drops both calls reusing id 3, never the one with id "3"."""
    calls = HeldCalls(Recorder())
    one, again, other = call(3), call(3), call("3")
    for held in (one, again, other):
        calls.hold(held, link_up=False)
    assert calls.cancel(one.key) == [one, again]
    assert one.dropped and again.dropped and not other.dropped
    assert calls.held_bytes == len(other.line)
    assert calls.take_waiting() == [other]  # a dropped call never has its verdict requested
    assert calls.cancel(one.key) is None


def test_a_cancel_naming_nothing_held_is_none() -> None:
    calls = HeldCalls(Recorder())
    calls.hold(call(1), link_up=True)
    key = id_key(2)
    assert key is not None and calls.cancel(key) is None


def test_releasing_a_call_twice_counts_its_bytes_once() -> None:
    calls = HeldCalls(Recorder())
    held, other = call(1), call(1)
    calls.hold(held, link_up=True)
    calls.hold(other, link_up=True)
    calls.release(held)
    calls.release(held)
    assert calls.held_bytes == len(other.line)
    calls.release(other)
    assert calls.held_bytes == 0 and calls.cancel(held.key) is None


def test_an_allowed_retry_forwards_its_rewritten_line() -> None:
    assert call(1).upstream_line == call(1).line
    rewritten = Retry({}, b"without bouncer state", True, None)
    assert call(1, retry=rewritten).upstream_line == b"without bouncer state"
    theirs = Retry({}, None, False, ("state", None))
    assert call(1, retry=theirs).upstream_line == call(1).line


def test_held_calls_are_sans_io() -> None:
    tree = ast.parse(Path(held_mod.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"os", "socket", "selectors", "select", "time", "anyio", "subprocess", "signal"}
