"""Reading wire frames from a connected socket with as few copies as the frame size deserves.

Theory of operation
-------------------
`bouncerd.wire.FrameDecoder` is the reference codec and is right for peers that read in pieces (the
shim, the CLI). The daemon reads every upstream output the shim relays, up to 64 MiB a frame, and
the shim waits for the ack: at 10 MB a frame, each extra copy into fresh memory costs milliseconds.
So the daemon reads frames itself, with the same rules and wire's own body decoder:

- Small frames are parsed out of one reusable `READ_BUFFER_BYTES` buffer that ``recv_into`` fills;
  many pipelined frames arrive in one read and are decoded straight from the buffer (msgpack copies
  what it keeps, so the buffer is reused safely).
- A frame larger than the buffer gets a buffer of exactly its announced size; the bytes already
  read are moved into it and the kernel writes the rest directly into place. One copy from the
  socket, one by msgpack for the payload, none in between.

The length is checked against `wire.MAX_FRAME_BYTES` (and zero is refused) as soon as the four
header bytes are in, before anything is allocated for the body. Malformed input raises exactly
`ProtocolError`; the end of the stream (or a reset) between or inside frames returns None. A peer can
make the daemon hold one buffer of at most MAX_FRAME_BYTES per connection, and only peers with the
daemon's own uid get this far.
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

_HEADER = struct.Struct(">I")


def decode_body(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    """wire's body decoder (msgpack map with string keys, or ProtocolError) over any buffer."""
    # msgpack reads any buffer; wire's signature says bytes only because that is what FrameDecoder has.
    return wire.decode_body(body)


class FrameReader:
    def __init__(
        self,
        sock: socket.socket,
        max_frame: int = wire.MAX_FRAME_BYTES,
        buffer_bytes: int = READ_BUFFER_BYTES,
    ) -> None:
        self._sock = sock
        self._max_frame = max_frame
        self._buf = bytearray(max(buffer_bytes, wire.HEADER_BYTES))
        self._view = memoryview(self._buf)
        self._start = 0  # first unread byte
        self._end = 0  # end of the bytes read so far

    async def next_message(self) -> dict[str, Any] | None:
        """The next frame's message, None at the end of the stream, ProtocolError if malformed."""
        if not await self._fill(wire.HEADER_BYTES):
            return None
        (length,) = _HEADER.unpack_from(self._buf, self._start)
        if length > self._max_frame:
            raise ProtocolError(f"frame of {length} bytes announced; the limit is {self._max_frame}")
        if length == 0:
            raise ProtocolError("empty frame")
        self._start += wire.HEADER_BYTES
        if length <= len(self._buf):
            if not await self._fill(length):
                return None
            body = self._view[self._start : self._start + length]
            self._start += length
            try:
                return decode_body(body)
            finally:
                body.release()
        return await self._read_large(length)

    async def _read_large(self, length: int) -> dict[str, Any] | None:
        big = bytearray(length)
        have = self._end - self._start
        big[:have] = self._view[self._start : self._end]
        self._start = self._end = 0
        with memoryview(big) as view:
            while have < length:
                got = await self._recv_into(view[have:])
                if not got:
                    return None
                have += got
        return decode_body(big)

    async def _fill(self, n: int) -> bool:
        """Make at least `n` unread bytes available in the buffer; False at the end of the stream."""
        if self._start == self._end:
            self._start = self._end = 0
        while self._end - self._start < n:
            if self._start and len(self._buf) - self._start < n:
                pending = bytes(self._view[self._start : self._end])
                self._buf[: len(pending)] = pending
                self._start, self._end = 0, len(pending)
            got = await self._recv_into(self._view[self._end :])
            if not got:
                return False
            self._end += got
        return True

    async def _recv_into(self, view: memoryview) -> int:
        while True:
            try:
                return self._sock.recv_into(view)
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
            except (ConnectionResetError, BrokenPipeError):
                return 0
