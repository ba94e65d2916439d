"""What the relay asks the pump to do: the actions `Relay.take_actions` returns.

Theory of operation
-------------------
The relay never performs I/O; it appends actions and the pump carries them out in order. There are
five: a line for the client (stdout), a line for the upstream (its stdin), a frame for bouncerd
(`daemon_frame` makes one, in parts so that a large payload is never copied into it), a diagnostic
for stderr, and a stop with an exit status. Lines are handed over without their newline so a 50 MB
line is never copied to append one. Actions compare by value, so tests can compare lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bouncerd import wire
from bouncerd.errors import ProtocolError


class _Action:
    """An instruction for the pump. Compared by value (tests compare action lists)."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        same = type(other) is type(self)
        return same and all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r:.80}" for f in self.__slots__)
        return f"{type(self).__name__}({fields})"


class SendClient(_Action):
    __slots__ = ("line",)

    def __init__(self, line: bytes) -> None:
        self.line = line  # without its newline


class SendUpstream(_Action):
    __slots__ = ("line",)

    def __init__(self, line: bytes) -> None:
        self.line = line  # without its newline


class SendDaemon(_Action):
    __slots__ = ("lazy", "parts")

    def __init__(self, parts: list[bytes], *, lazy: bool = False) -> None:
        self.parts = parts  # one frame, in pieces: a large payload is its own piece, never copied
        self.lazy = lazy  # nothing waits on it: it may wait for the next frame (link.LAZY_FRAME_SECONDS)

    @property
    def frame(self) -> bytes:
        """The frame as one bytes object (for tests; the pump writes the parts)."""
        return b"".join(self.parts)


class Diagnose(_Action):
    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


class Stop(_Action):
    __slots__ = ("message", "status")

    def __init__(self, message: str, status: int) -> None:
        self.message = message
        self.status = status


Action = SendClient | SendUpstream | SendDaemon | Diagnose | Stop


def daemon_frame(message: Mapping[str, Any]) -> list[bytes] | None:
    """`message` as the parts of one frame for SendDaemon, or None if msgpack cannot carry it (a lone
    surrogate, an integer beyond 64 bits, a frame over the size limit). The one bytes field of the
    wire is an observation's ``payload``: a large one is its own part (`wire.encode_parts`); any
    other frame is packed whole (`wire.encode`, the same bytes), without looking for blobs in it."""
    payload = message.get("payload")
    try:
        if isinstance(payload, bytes) and len(payload) >= wire.BLOB_MIN_BYTES:
            return wire.encode_parts(message)
        return [wire.encode(message)]
    except (ProtocolError, ValueError, TypeError, OverflowError):  # msgpack's refusals
        return None
