"""A bounded newline splitter: bytes in, whole lines (or "that line was too long") out.

Theory of operation
-------------------
MCP's stdio transport is newline-delimited JSON: one message a line, no length prefix. A peer can
therefore announce nothing and send a line of any length, and a splitter that buffers "until the
newline" holds whatever it is sent. `LineSplitter` keeps two promises:

- **Bounded memory.** A line longer than `max_line` bytes is never held whole. Once the bytes of the
  line in progress exceed the limit, the splitter switches to discarding: it keeps only the first and
  last `EXCERPT_BYTES` of the line (enough to find a JSON-RPC id at either end) and counts the rest,
  until the newline, where it hands out one `OversizedLine`.
- **Linear time.** Each chunk is searched for newlines once, from where the last search stopped; the
  pieces of a line that spans many chunks are kept in a list and joined once, when the newline comes.
  A 50 MB line arriving in 64 KiB reads costs one join, not 800 re-copies of a growing buffer.

Lines are handed out without their newline; a trailing ``\\r`` (CRLF senders) is kept, because JSON
treats it as whitespace and the relay forwards lines byte for byte. The splitter never touches I/O.
"""

from __future__ import annotations

from typing import Final

# The longest JSON-RPC line the shim relays. A tool result of 50 MB (a file read, a large query) must
# pass, with room for JSON escaping; anything beyond 64 MiB is refused rather than held in memory.
# bouncerd.wire.MAX_FRAME_BYTES is sized to carry one such line inside an observation.
MAX_LINE_BYTES: Final = 64 * 1024 * 1024

# How much of a discarded line is kept from each end. A JSON-RPC response's "id" sits in the first few
# members (Python SDK: jsonrpc, id, result) or the last (TypeScript SDK: result, jsonrpc, id); 4 KiB
# covers any sane id and the envelope around it.
EXCERPT_BYTES: Final = 4096

# Pieces smaller than this are gathered in one bytearray before they join the list of pieces, so a
# peer that writes a long line a byte at a time costs amortised O(1) per byte and a list of at most
# MAX_LINE_BYTES / 64 KiB entries (64 KiB is the default pipe buffer, i.e. a typical read).
COALESCE_BYTES: Final = 64 * 1024


class OversizedLine:
    """A line longer than the limit, discarded up to its newline."""

    __slots__ = ("head", "size", "tail")

    def __init__(self, size: int, head: bytes, tail: bytes) -> None:
        self.size = size  # bytes in the line, newline excluded
        self.head = head  # its first EXCERPT_BYTES
        self.tail = tail  # its last EXCERPT_BYTES

    def __repr__(self) -> str:
        return f"OversizedLine(size={self.size})"


class LineSplitter:
    """Feed chunks with `feed`; each call returns the lines completed by that chunk, in order."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._max_line = max_line
        self._parts: list[bytes] = []  # pieces of the line in progress, each >= COALESCE_BYTES
        self._small = bytearray()  # the latest small pieces, appended in place (see COALESCE_BYTES)
        self._size = 0  # bytes in the line in progress
        self._discarding = False
        self._head = b""
        self._tail = b""

    @property
    def buffered(self) -> int:
        """Bytes held for the line in progress (never more than the limit plus one read)."""
        return len(self._head) + len(self._tail) if self._discarding else self._size

    def feed(self, data: bytes) -> list[bytes | OversizedLine]:
        out: list[bytes | OversizedLine] = []
        start = 0
        find = data.find
        while (nl := find(b"\n", start)) >= 0:
            out.append(self._finish(data, start, nl))
            start = nl + 1
        if start < len(data):
            self._add(data[start:] if start else data)
        return out

    def close(self) -> bytes | OversizedLine | None:
        """End of input: the unterminated last line, if any (a peer may omit the final newline)."""
        if not self._discarding and not self._size:
            return None
        return self._finish(b"", 0, 0)

    def _finish(self, data: bytes, start: int, end: int) -> bytes | OversizedLine:
        size = self._size + (end - start)
        line: bytes | OversizedLine
        if self._discarding:
            self._keep(
                data[start : min(end, start + EXCERPT_BYTES)], data[max(start, end - EXCERPT_BYTES) : end]
            )
            line = OversizedLine(size=size, head=self._head, tail=self._tail)
        elif not self._size and size <= self._max_line:
            line = data[start:end]  # the common case: a line inside one chunk, one copy
        else:
            parts = self._held()
            parts.append(data[start:end])
            if size > self._max_line:
                line = OversizedLine(size=size, head=_first(parts), tail=_last(parts))
            else:
                line = b"".join(parts)
        self._reset()
        return line

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._discarding:
            self._keep(piece[:EXCERPT_BYTES], piece[-EXCERPT_BYTES:])
        elif self._size > self._max_line:
            parts = self._held()
            parts.append(piece)
            self._head, self._tail = _first(parts), _last(parts)
            self._parts = []
            self._small = bytearray()
            self._discarding = True
        elif len(piece) >= COALESCE_BYTES and not self._small:
            self._parts.append(piece)
        else:
            self._small += piece
            if len(self._small) >= COALESCE_BYTES:
                self._parts.append(bytes(self._small))
                self._small = bytearray()

    def _held(self) -> list[bytes]:
        parts = list(self._parts)
        if self._small:
            parts.append(bytes(self._small))
        return parts

    def _keep(self, first: bytes, last: bytes) -> None:
        """While discarding: top up the head (if the line began short of it) and slide the tail."""
        if len(self._head) < EXCERPT_BYTES:
            self._head += first[: EXCERPT_BYTES - len(self._head)]
        self._tail = (self._tail + last)[-EXCERPT_BYTES:]

    def _reset(self) -> None:
        self._parts = []
        self._small = bytearray()
        self._size = 0
        self._discarding = False
        self._head = b""
        self._tail = b""


def _first(parts: list[bytes]) -> bytes:
    """The first EXCERPT_BYTES of the concatenation of `parts`, joining only what is needed."""
    taken: list[bytes] = []
    size = 0
    for part in parts:
        if size >= EXCERPT_BYTES:
            break
        taken.append(part[: EXCERPT_BYTES - size])
        size += len(taken[-1])
    return b"".join(taken)


def _last(parts: list[bytes]) -> bytes:
    """The last EXCERPT_BYTES of the concatenation of `parts`, joining only what is needed."""
    taken: list[bytes] = []
    size = 0
    for part in reversed(parts):
        if size >= EXCERPT_BYTES:
            break
        taken.append(part[-(EXCERPT_BYTES - size) :])
        size += len(taken[-1])
    return b"".join(reversed(taken))
