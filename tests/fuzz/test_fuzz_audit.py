"""The audit encoder over anything a frame can carry: every line is strict JSON and verifies.

Arguments reach the audit log from msgpack frames, which carry bytes, non-string keys, 64-bit edges,
NaN and infinities (a client's ``{"x": NaN}`` is parsed by the shim and passed on). Invariants, over
generated records: `chain` + `encode_line` give one line (no newline inside) of valid UTF-8 that a
strict JSON parser reads (the fault: a ``NaN`` in a line made jq and every strict reader refuse the
log from that line on, so a hostile call could make the audit log unreadable to the tools that
watch it), and `parse_line` verifies its hash.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack
from _counts import ran
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bouncerd.core.audit import chain, encode_line, parse_line

EXAMPLES = 300

text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]), max_size=20
)  # msgpack carries no surrogates
leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), text, st.binary(max_size=20)
)
values = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(text, st.integers(), st.binary(max_size=5)), inner, max_size=4),
        st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=8)),
    ),
    max_leaves=20,
)


def strict(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(text, values, max_size=4), st.one_of(st.none(), text, st.integers(-(2**63), 2**64 - 1))
)
def test_every_audit_line_is_strict_json_one_line_and_verifies(
    arguments: dict[str, Any], request_id: Any
) -> None:
    ran("audit encoder (chain + encode_line)")
    record = {"ts": "2026-01-01T00:00:00.000Z", "request_id": request_id, "tool": "t", "arguments": arguments}
    line = encode_line(chain(record, "0" * 64))
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    json.loads(line.decode("utf-8"), parse_constant=strict)
    assert parse_line(line).problem is None


def test_a_nan_in_the_arguments_is_written_as_a_string_so_strict_readers_can_read_the_log() -> None:
    line = encode_line(chain({"arguments": {"x": float("nan"), "y": float("-inf")}}, "0" * 64))
    assert json.loads(line, parse_constant=strict)["arguments"] == {"x": "NaN", "y": "-Infinity"}
    assert parse_line(line).problem is None


def _reference_line(record: dict[str, Any], prev: str) -> bytes:
    """The line as the encoder wrote it before its fast paths (the isinstance walk, `json.dumps`, a
    hash over a copy without ``hash``): the format on disk and the hashes in it must not move."""
    import base64
    import hashlib
    import math
    from collections.abc import Mapping

    def plain(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr(value)]
        if value is None or isinstance(value, str | bool | int | float):
            return value
        if isinstance(value, bytes | bytearray | memoryview):
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
        if isinstance(value, Mapping):
            return {key(k): plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return str(value)

    def key(k: Any) -> str:
        if isinstance(k, str):
            return k
        converted = plain(k)
        return converted if isinstance(converted, str) else json.dumps(converted)

    out = plain({k: v for k, v in record.items() if k not in ("hash", "prev")})
    out["prev"] = prev
    body = json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    out["hash"] = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(text, values, max_size=4), values)
def test_the_encoder_writes_the_same_bytes_and_hashes_as_before_its_fast_paths(
    arguments: dict[str, Any], request_id: Any
) -> None:
    """A fast path that wrote a value differently would break `audit verify` across an upgrade (an
    old line re-hashed) and the report's reading of old logs."""
    ran("audit encoder against its reference")
    record = {"ts": "2026-01-01T00:00:00.000Z", "request_id": request_id, "tool": "t", "arguments": arguments}
    assert encode_line(chain(record, "0" * 64)) == _reference_line(record, "0" * 64)
