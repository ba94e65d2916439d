"""Each wire op is written once: one row of `wire.OP_TABLE` (request type, roles, order, whether it reads
taint), its field checks read off the request type, its handler in `Daemon.handlers`, checked against
the table when the daemon is built. A new op that misses one fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NotRequired, get_origin, get_type_hints

import pytest

from bouncerd import wire
from bouncerd.errors import BouncerError, ProtocolError
from bouncerd.paths import Paths
from bouncerd.server.connection import check_handler_table
from bouncerd.server.daemon import Daemon


def test_every_op_has_a_typed_request_with_exactly_its_fields() -> None:
    assert set(wire.REQUEST_TYPES) == set(wire.OPS) == set(wire.OP_TABLE)
    for op, typed in wire.REQUEST_TYPES.items():
        fields = set(get_type_hints(typed)) - {"op", "id"}
        assert fields == set(wire.OPS[op]), op


def test_fields_check_request_insists_on_are_required_in_the_type() -> None:
    required = {
        "hello": {"version", "role"},
        "verdict": {"tool", "arguments"},
        "answer": {"code", "action"},
        "observe": {"seq", "kind", "payload"},
        "vouch": {"text"},
        "observe_text": {"tool", "text"},
        "check_builtin": {"tool", "input"},
        "tools": {"tools"},
        "forwarded": {"tool", "arguments", "epoch", "seq"},
        "pins_accept": {"server"},
        "approve_show": {"code"},
        "approve": {"code"},
    }
    for op, typed in wire.REQUEST_TYPES.items():
        hints = get_type_hints(typed, include_extras=True)
        fields = {name for name, hint in hints.items() if get_origin(hint) is not NotRequired}
        assert fields - {"op", "id"} == required.get(op, set()), op
        assert set(wire.OP_TABLE[op].required) == required.get(op, set()), op


def _valid(op: str) -> dict[str, Any]:
    """A request of `op` with every required field, each of its first allowed type (a Literal's value)."""
    row = wire.OP_TABLE[op]
    sample: dict[type, Any] = {str: "x", int: 1, list: [], dict: {}, bytes: b"", bool: True}
    message: dict[str, Any] = {"op": op, "id": 1}
    for key in row.required:
        values = sorted(v for v in row.values.get(key, ()) if v is not None)
        message[key] = values[0] if values else sample[row.fields[key][0]]
    return message


@pytest.mark.parametrize("op", sorted(wire.OP_TABLE))
def test_a_request_missing_any_field_its_type_requires_is_refused(op: str) -> None:
    """A handler reads a required field unguarded: a frame without it must never reach the handler."""
    message = _valid(op)
    assert wire.check_request(message) == (op, 1)
    for key in wire.OP_TABLE[op].required:
        short = {k: v for k, v in message.items() if k != key}
        with pytest.raises(ProtocolError, match=f"missing '{key}'"):
            wire.check_request(short)


@pytest.mark.parametrize(
    ("op", "key", "value"),
    [("hello", "role", "root"), ("verdict", "kind", "tools/call"), ("observe", "kind", "stdout")],
)
def test_a_value_outside_the_literal_of_its_type_is_refused(op: str, key: str, value: str) -> None:
    """A role the daemon has no rules for, or a kind it would not judge, is a broken peer, not a default."""
    message = {**_valid(op), key: value}
    with pytest.raises(ProtocolError, match=f"unknown {key}"):
        wire.check_request(message)


def test_a_nil_where_the_type_allows_none_passes_and_elsewhere_is_refused() -> None:
    assert wire.check_request({**_valid("verdict"), "kind": None}) == ("verdict", 1)
    assert wire.check_request({**_valid("approve_show"), "arguments": None}) == ("approve_show", 1)
    with pytest.raises(ProtocolError, match="'tool' has type NoneType"):
        wire.check_request({**_valid("verdict"), "tool": None})


def test_only_bouncerctl_may_approve_or_accept_a_loss_and_every_other_op_is_any_roles() -> None:
    """The agent's side of the wire (a shim, a hook) never approves its own ask, nor lifts the restricted
    state of a damaged journal; no other op has a role check of its own, so none can disagree with the
    table."""
    restricted = {op for op, row in wire.OP_TABLE.items() if row.roles != wire.ROLES}
    assert restricted == {"pending", "approve_show", "approve", "accept_loss"}
    for op in restricted:
        assert wire.role_refusal(op, "ctl") is None
        for role in ("shim", "hook", None):
            refusal = wire.role_refusal(op, role)
            assert refusal is not None and refusal[0] == "not_ctl", (op, role)


def test_the_ops_that_wait_for_taint_are_the_lane_ops_that_judge_a_send() -> None:
    assert {op for op, row in wire.OP_TABLE.items() if row.reads_taint} == {"verdict", "check_builtin"}
    for row in wire.OP_TABLE.values():
        assert not row.reads_taint or row.order == "lane"


def _daemon(tmp_path: Path) -> Daemon:
    paths = Paths(runtime=tmp_path / "run", state=tmp_path / "state", config=tmp_path / "config")
    return Daemon(paths, str(tmp_path / "s"), expected_uid=0, now=0.0)


def test_every_op_but_hello_has_one_handler(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path)
    assert not set(daemon.handlers) & set(daemon.async_handlers)
    assert set(daemon.handlers) | set(daemon.async_handlers) == set(wire.OPS) - {"hello"}
    asynchronous = {op for op, row in wire.OP_TABLE.items() if row.order == "async"}
    assert set(daemon.async_handlers) == asynchronous


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda h, a: h.pop("approve"), "approve (order inline: handler False"),
        (lambda h, a: h.update(reload=h["ping"]), "reload (order async: handler True"),
        (lambda h, a: a.update(status=a["reload"]), "status (order inline: handler True, async handler True"),
        (lambda h, a: h.update(hello=h["ping"]), "hello (order first"),
        (lambda h, a: h.update(shutdown=h["ping"]), "shutdown (not an op of the wire)"),
    ],
)
def test_a_daemon_whose_handlers_disagree_with_the_table_does_not_start(
    tmp_path: Path, change: Any, named: str
) -> None:
    """An op the wire accepts but no handler serves would be an error reply at run time; a handler for
    an op the wire refuses is dead code. Both are caught when the daemon is built."""
    daemon = _daemon(tmp_path)
    handlers, async_handlers = dict(daemon.handlers), dict(daemon.async_handlers)
    check_handler_table(handlers, async_handlers)
    change(handlers, async_handlers)
    with pytest.raises(BouncerError, match=re.escape(named)):
        check_handler_table(handlers, async_handlers)
