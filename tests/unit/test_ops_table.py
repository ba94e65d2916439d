"""Each wire op is named once: its fields in `wire.OPS`, its type in `wire.REQUEST_TYPES`, its handler
in `Daemon.handlers`. A new op that misses one of the three fails here."""

from __future__ import annotations

from pathlib import Path
from typing import NotRequired, get_origin, get_type_hints

from bouncerd import wire
from bouncerd.paths import Paths
from bouncerd.server.daemon import Daemon


def test_every_op_has_a_typed_request_with_exactly_its_fields() -> None:
    assert set(wire.REQUEST_TYPES) == set(wire.OPS)
    for op, typed in wire.REQUEST_TYPES.items():
        fields = set(get_type_hints(typed)) - {"op", "id"}
        assert fields == set(wire.OPS[op]), op


def test_fields_check_request_insists_on_are_required_in_the_type() -> None:
    required = {
        "hello": {"version", "role"},
        "verdict": {"tool", "arguments"},
        "observe": {"seq", "kind", "payload"},
        "observe_text": {"tool", "text"},
        "check_builtin": {"tool", "input"},
        "tools": {"tools"},
        "forwarded": {"tool", "arguments", "epoch", "seq"},
    }
    for op, typed in wire.REQUEST_TYPES.items():
        hints = get_type_hints(typed, include_extras=True)
        fields = {name for name, hint in hints.items() if get_origin(hint) is not NotRequired}
        assert fields - {"op", "id"} == required.get(op, set()), op


def test_every_op_but_hello_has_one_handler(tmp_path: Path) -> None:
    paths = Paths(runtime=tmp_path / "run", state=tmp_path / "state", config=tmp_path / "config")
    daemon = Daemon(paths, str(tmp_path / "s"), expected_uid=0, now=0.0)
    assert not set(daemon.handlers) & set(daemon.async_handlers)
    assert set(daemon.handlers) | set(daemon.async_handlers) == set(wire.OPS) - {"hello"}
