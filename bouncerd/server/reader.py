"""Reading wire frames with as few copies as the frame size deserves: a buffer the kernel fills.

Theory of operation
-------------------
`bouncerd.wire.FrameDecoder` is the reference codec and is right for peers that read in pieces (the
shim, the CLI). The daemon reads every upstream output the shim relays, up to 64 MiB a frame, and
the shim waits for the ack: at 10 MB a frame, each extra copy into fresh memory costs milliseconds.
So the daemon frames its reads itself, with the same rules and wire's own body decoder.

`FrameBuffer` is the sans-I/O part, shaped for `asyncio.BufferedProtocol` (the daemon's connections,
see connection.py): the reader asks it where to put the next bytes (`get_buffer`), says how many
arrived (`updated`) and takes whole messages out (`next_message`).

- Small frames are parsed out of one reusable `READ_BUFFER_BYTES` buffer; many pipelined frames
  arrive in one read and are decoded straight from the buffer (msgpack copies what it keeps, so the
  buffer is reused safely).
- A frame larger than the buffer gets a buffer of its own (the spare one left by an earlier large
  frame when it is big enough, see SPARE_MAX_BYTES); the bytes already read are moved into it and
  the kernel writes the rest directly into place. One copy from the socket, one by msgpack for the
  payload, none in between.

The length is checked against `wire.MAX_FRAME_BYTES` (and zero is refused) as soon as the four
header bytes are in, before anything is allocated for the body. Malformed input raises exactly
`ProtocolError`, and the buffer stays broken afterwards (framing is lost). A peer can make the daemon
hold one buffer of at most MAX_FRAME_BYTES per connection, and only peers with the daemon's own uid
get this far.

`FrameReader` drives a `FrameBuffer` from a non-blocking socket with ``recv_into`` and
`anyio.wait_readable`; the end of the stream (or a reset) between or inside frames returns None.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import anyio

from bouncerd import wire
from bouncerd.errors import ProtocolError

# One read from the kernel takes up to this much: a Unix socket's default buffer is ~200 KiB, so a
# read rarely returns more, and a burst of pipelined small frames fits in one.
READ_BUFFER_BYTES = 256 * 1024

# Unread bytes are moved to the front of the buffer once less than this is free behind them, so a read
# always has room for a useful amount (moving a partial frame is cheaper than a read of a few bytes).
MIN_FREE_BYTES = 64 * 1024

# One buffer for frames larger than READ_BUFFER_BYTES is kept between frames, up to this size. A fresh
# 10 MB buffer costs more than reading 10 MB into it (Python zero-fills it, and every page of it is
# faulted in), so a daemon that relays large outputs reuses one; 16 MiB is one large output's worth.
SPARE_MAX_BYTES = 16 * 1024 * 1024

_HEADER = struct.Struct(">I")


class _Spare:
    """The daemon-wide spare buffer for large frames (one event loop, so no locking)."""

    buffer: bytearray | None = None

    @classmethod
    def take(cls, length: int) -> bytearray:
        spare = cls.buffer
        if spare is not None and len(spare) >= length:
            cls.buffer = None
            return spare
        return bytearray(length)

    @classmethod
    def give(cls, buffer: bytearray) -> None:
        if len(buffer) <= SPARE_MAX_BYTES and (cls.buffer is None or len(buffer) > len(cls.buffer)):
            cls.buffer = buffer


def decode_body(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    """wire's body decoder (msgpack map with string keys, or ProtocolError) over any buffer."""
    # msgpack reads any buffer; wire's signature says bytes only because that is what FrameDecoder has.
    return wire.decode_body(body)


class FrameBuffer:
    def __init__(self, max_frame: int = wire.MAX_FRAME_BYTES, buffer_bytes: int = READ_BUFFER_BYTES) -> None:
        self._max_frame = max_frame
        self._buf = bytearray(max(buffer_bytes, wire.HEADER_BYTES))
        self._view = memoryview(self._buf)
        self._start = 0  # first unread byte
        self._end = 0  # end of the bytes read so far
        self._min_free = min(MIN_FREE_BYTES, len(self._buf))
        self._big: bytearray | None = None  # holds the body of a frame larger than the buffer
        self._big_view: memoryview | None = None  # exactly that body's length of it, being filled
        self._big_have = 0
        self._broken: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out as messages."""
        return self._big_have if self._big is not None else self._end - self._start

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the peer go (never empty while a frame is incomplete)."""
        if self._big_view is not None:
            return self._big_view[self._big_have :]
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._buf) - self._end < self._min_free and self._start:
            pending = self._end - self._start
            self._buf[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def updated(self, nbytes: int) -> None:
        """`nbytes` were written at the start of the last `get_buffer`."""
        if self._big is not None:
            self._big_have += nbytes
        else:
            self._end += nbytes

    def next_message(self) -> dict[str, Any] | None:
        """The next whole message, None if more bytes are needed. Raises ProtocolError."""
        if self._broken is not None:
            raise self._broken
        try:
            return self._next()
        except ProtocolError as exc:
            self._broken = exc
            raise

    def _next(self) -> dict[str, Any] | None:
        big, view = self._big, self._big_view
        if big is not None and view is not None:
            if self._big_have < len(view):
                return None
            self._big = self._big_view = None
            self._big_have = 0
            try:
                return decode_body(view)  # only bytes read for this frame: the view ends with it
            finally:
                view.release()
                _Spare.give(big)
        start = self._start
        if self._end - start < wire.HEADER_BYTES:
            return None
        (length,) = _HEADER.unpack_from(self._buf, start)
        if length > self._max_frame:
            raise ProtocolError(f"frame of {length} bytes announced; the limit is {self._max_frame}")
        if length == 0:
            raise ProtocolError("empty frame")
        body_start = start + wire.HEADER_BYTES
        if wire.HEADER_BYTES + length > len(self._buf):  # it cannot fit the buffer with its header
            self._start_big(body_start, length)
            return self._next()
        end = body_start + length
        if end > self._end:
            return None
        self._start = end
        with self._view[body_start:end] as body:
            return decode_body(body)

    def _start_big(self, body_start: int, length: int) -> None:
        big = _Spare.take(length)
        view = memoryview(big)[:length]
        have = self._end - body_start
        view[:have] = self._view[body_start : self._end]
        self._start = self._end = 0
        self._big, self._big_view, self._big_have = big, view, have


class FrameReader:
    """Messages from a non-blocking socket, one `FrameBuffer` deep."""

    def __init__(
        self,
        sock: socket.socket,
        max_frame: int = wire.MAX_FRAME_BYTES,
        buffer_bytes: int = READ_BUFFER_BYTES,
    ) -> None:
        self._sock = sock
        self._frames = FrameBuffer(max_frame, buffer_bytes)

    async def next_message(self) -> dict[str, Any] | None:
        """The next frame's message, None at the end of the stream, ProtocolError if malformed."""
        while (message := self._frames.next_message()) is None:
            got = await self._recv_into(self._frames.get_buffer())
            if not got:
                return None
            self._frames.updated(got)
        return message

    async def _recv_into(self, view: memoryview) -> int:
        while True:
            try:
                return self._sock.recv_into(view)
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
            except (ConnectionResetError, BrokenPipeError):
                return 0
