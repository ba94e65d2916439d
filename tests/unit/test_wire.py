"""The frame codec: whole, byte by byte, with trailing data, and hostile input."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd import wire
from bouncerd.errors import ProtocolError


def _decode_all(chunks: list[bytes]) -> tuple[list[dict[str, object]], ProtocolError | None]:
    dec = wire.FrameDecoder()
    out: list[dict[str, object]] = []
    try:
        for chunk in chunks:
            dec.receive_data(chunk)
            while (msg := dec.next_message()) is not None:
                out.append(msg)
    except ProtocolError as exc:
        return out, exc
    return out, None


def test_roundtrip_whole_and_bytewise() -> None:
    msgs = [
        wire.request("hello", 0, version=1, role="shim"),
        wire.reply(0, daemon_pid=5),
        wire.request("observe", 1, seq=1, kind="result", payload=b"\x00\xff" * 10),
    ]
    data = b"".join(wire.encode(m) for m in msgs)
    assert _decode_all([data]) == (msgs, None)
    assert _decode_all([data[i : i + 1] for i in range(len(data))]) == (msgs, None)


def test_trailing_partial_frame_is_held_not_lost() -> None:
    data = wire.encode({"a": 1}) + wire.encode({"b": 2})[:3]
    assert _decode_all([data]) == ([{"a": 1}], None)


def test_oversized_frame_refused_before_body_is_buffered() -> None:
    """A peer announcing a 4 GB frame must not make the daemon wait for (or allocate) 4 GB."""
    dec = wire.FrameDecoder()
    dec.receive_data(struct.pack(">I", wire.MAX_FRAME_BYTES + 1))
    with pytest.raises(ProtocolError, match="limit"):
        dec.next_message()
    with pytest.raises(ProtocolError):  # stays broken: framing is lost
        dec.receive_data(b"x")


def test_non_map_frame_refused() -> None:
    body = msgpack.packb([1, 2])
    assert isinstance(_decode_all([struct.pack(">I", len(body)) + body])[1], ProtocolError)


def test_non_string_keys_refused() -> None:
    body = msgpack.packb({1: 2})
    assert isinstance(_decode_all([struct.pack(">I", len(body)) + body])[1], ProtocolError)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=1, max_value=7))
def test_any_bytes_parse_or_raise_protocol_error_only(data: bytes, step: int) -> None:
    """Invariant for untrusted input: the same frames or the same single ProtocolError, whole or split."""
    whole = _decode_all([data])
    split = _decode_all([data[i : i + step] for i in range(0, len(data), step)])
    assert whole[0] == split[0]
    assert (whole[1] is None) == (split[1] is None)
    if whole[1] is not None and split[1] is not None:
        assert str(whole[1]) == str(split[1])


@given(
    st.dictionaries(
        st.text(max_size=8),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(2**63), 2**63 - 1)
            | st.text(max_size=20)
            | st.binary(max_size=20),
            lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
            max_leaves=10,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_any_map_roundtrips(msg: dict[str, object]) -> None:
    assert _decode_all([wire.encode(msg)]) == ([msg], None)


@pytest.mark.parametrize(
    "bad",
    [
        {"op": "hello", "id": 1, "version": 1, "role": "root"},
        {"op": "hello", "id": 1, "role": "shim"},
        {"op": "verdict", "id": 2, "tool": "x"},
        {"op": "verdict", "id": 2, "tool": "x", "arguments": {}, "extra": 1},
        {"op": "observe", "id": 3, "seq": True, "kind": "result", "payload": b""},
        {"op": "observe", "id": 3, "seq": 1, "kind": "weird", "payload": b""},
        {"op": "nope", "id": 4},
        {"op": "status", "id": -1},
        {"op": "status", "id": True},
    ],
)
def test_check_request_refuses_malformed(bad: dict[str, object]) -> None:
    with pytest.raises(ProtocolError):
        wire.check_request(bad)


def test_check_request_accepts_valid() -> None:
    assert wire.check_request(wire.request("verdict", 7, request_id="a", tool="t", arguments={})) == (
        "verdict",
        7,
    )


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "pins_accept", "id": 1},  # server missing
        {"op": "vouch", "id": 1},  # text missing
        {"op": "observe_text", "id": 1, "tool": "WebFetch"},  # text missing
        {"op": "check_builtin", "id": 1, "tool": "Bash"},  # input missing
        {"op": "approve", "id": 1},  # code missing
        {"op": "answer", "id": 1, "code": "K7Q-F2M"},  # action missing
        {"op": "tools", "id": 1, "tools": b"raw bytes"},  # bytes where a list is read
    ],
)
def test_frame_missing_a_field_its_op_reads_is_a_protocol_error_not_a_crash(frame: dict[str, object]) -> None:
    """A frame that passed the check used to reach a handler that read the absent field and raised
    inside the daemon; every field that may not be nil is now required by the check itself."""
    with pytest.raises(ProtocolError):
        wire.check_request(frame)
