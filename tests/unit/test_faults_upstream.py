"""A server that exits with calls pending: each gets a JSON-RPC error, none is left unanswered.

Before, the shim exited with the server and a client waiting on a forwarded call (or on one held for
its verdict) got no answer at all, only a closed pipe."""

from __future__ import annotations

import json

from bouncer_shim import jsonrpc
from test_relay import Rig, call


def _errors(rig: Rig) -> dict[object, str]:
    out = {}
    for data in rig.to_client:
        message = json.loads(data)
        if "error" in message:
            out[message["id"]] = message["error"]["message"]
    return out


def test_forwarded_and_held_calls_are_answered_with_an_error_when_the_server_exits() -> None:
    rig = Rig()
    rig.client(call(1, "slow"))
    (first,) = rig.pending("verdict")
    rig.verdict(first, "allow")
    assert rig.to_upstream == [call(1, "slow")]  # forwarded; the server will never answer it
    rig.client(call(2, "other"))  # held: its verdict is still being asked
    (second,) = rig.pending("verdict")
    rig.relay.upstream_gone("the server exited before answering this request")
    rig.pump()
    errors = _errors(rig)
    assert set(errors) == {1, 2} and all("server exited" in text for text in errors.values())
    assert all(json.loads(d)["error"]["code"] == jsonrpc.INTERNAL_ERROR for d in rig.to_client)
    rig.verdict(second, "allow")  # the verdict that comes later sends nothing anywhere
    assert rig.to_upstream == [call(1, "slow")] and len(rig.to_client) == 2


def test_answered_calls_get_nothing_more() -> None:
    """The benign twin: a call the server answered is not answered again."""
    rig = Rig()
    rig.client(call(1, "echo"))
    rig.answer_all()
    rig.upstream(b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}')
    rig.answer_all()
    before = list(rig.to_client)
    rig.relay.upstream_gone("the server exited")
    rig.pump()
    assert rig.to_client == before
