"""The daemon's frame reader agrees with wire's FrameDecoder on every input, hostile or not."""

from __future__ import annotations

import socket
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd import wire
from bouncerd.errors import ProtocolError
from bouncerd.server.reader import FrameReader

MAX_FRAME = 4096  # small, so random headers do not make each example allocate megabytes

messages = st.dictionaries(
    st.text(max_size=5),
    st.one_of(
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.text(max_size=20),
        st.binary(max_size=300),
        st.none(),
    ),
    max_size=4,
)


def _decoder(data: bytes) -> tuple[list[dict[str, Any]], bool]:
    decoder = wire.FrameDecoder(max_frame=MAX_FRAME)
    out: list[dict[str, Any]] = []
    try:
        decoder.receive_data(data)
        while (msg := decoder.next_message()) is not None:
            out.append(msg)
    except ProtocolError:
        return out, True
    return out, False


def _reader(data: bytes, buffer_bytes: int) -> tuple[list[dict[str, Any]], bool]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(data)  # small enough for the socket buffer
        theirs.shutdown(socket.SHUT_WR)
        ours.setblocking(False)

        async def read_all() -> tuple[list[dict[str, Any]], bool]:
            reader = FrameReader(ours, max_frame=MAX_FRAME, buffer_bytes=buffer_bytes)
            out: list[dict[str, Any]] = []
            try:
                while (msg := await reader.next_message()) is not None:
                    out.append(msg)
            except ProtocolError:
                return out, True
            return out, False

        return anyio.run(read_all)


@settings(max_examples=150, deadline=None)
@given(
    frames=st.lists(messages, max_size=5),
    tail=st.binary(max_size=40),
    cut=st.integers(min_value=0, max_value=60),
    buffer_bytes=st.integers(min_value=4, max_value=300),
)
def test_reader_yields_the_same_frames_or_the_same_error_as_the_decoder(
    frames: list[dict[str, Any]], tail: bytes, cut: int, buffer_bytes: int
) -> None:
    """Whole frames, frames larger than the read buffer, torn frames and garbage after them."""
    data = b"".join(wire.encode(f) for f in frames) + tail
    data = data[: max(0, len(data) - cut)] if cut % 2 else data
    assert _reader(data, buffer_bytes) == _decoder(data)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=600), buffer_bytes=st.integers(min_value=4, max_value=64))
def test_arbitrary_bytes_parse_or_raise_protocol_error_only(data: bytes, buffer_bytes: int) -> None:
    assert _reader(data, buffer_bytes) == _decoder(data)
