"""Non-blocking reads and buffered writes on raw file descriptors.

Theory of operation
-------------------
The pump multiplexes stdin, stdout, the upstream's pipes and the daemon socket with one `selectors`
loop on one thread: no event-loop framework (asyncio alone costs more start-up time than the shim's
whole budget over a direct server) and no thread hop per message. Every descriptor is put in
non-blocking mode; a `Writer` keeps what could not be written yet as a queue of chunks and hands
them to ``os.writev`` as they fit, so a 50 MB line is never copied to be written and many small
lines leave in one system call. A `Reader` reads into one buffer allocated up front, so a small
message costs no fresh megabyte per read.

A descriptor that `select` cannot watch (a regular file on stdin or stdout: epoll refuses those) is
*always ready*: reads and writes on regular files never wait anyway, so the pump simply tries them.

`Watcher` is the part of `selectors` the pump uses (register a descriptor under a name, unregister
it, wait for the ready ones), on ``select.epoll`` directly where there is one: the pump starts and
stops watching bouncerd's socket on most calls, and `selectors` wraps each of those and every wait
in Python bookkeeping of its own. Elsewhere (kqueue, poll) it delegates to `selectors`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import selectors
from collections import deque
from typing import Final

# One read takes at most this much. Pipes hand out at most their buffer (64 KiB by default, 1 MiB once
# enlarged, see proc.py); a larger request costs nothing and drains an enlarged pipe in one call.
READ_BYTES: Final = 1024 * 1024

# Chunks given to one writev call. IOV_MAX is 1024 on Linux and macOS; half of it is plenty.
IOV_BATCH: Final = 512

NEWLINE: Final = b"\n"


class PeerGoneError(Exception):
    """The other end of a pipe or socket went away (EPIPE, ECONNRESET)."""


def make_nonblocking(fd: int) -> None:
    os.set_blocking(fd, False)


def watchable(fd: int) -> bool:
    """Whether `selectors` can watch `fd` (epoll refuses regular files and some devices)."""
    probe = selectors.DefaultSelector()
    try:
        probe.register(fd, selectors.EVENT_READ)
    except (OSError, ValueError):
        return False
    finally:
        probe.close()
    return True


class Reader:
    """Reads into one buffer allocated up front; each read returns a copy of exactly what came.

    ``os.read(fd, READ_BYTES)`` would allocate READ_BYTES for every read and shrink it afterwards:
    for a one-line message that is a fresh megabyte mapped, faulted in and unmapped on every turn of
    the loop. Here the kernel writes into memory that stays mapped, and only the bytes read are copied.
    The pump is single-threaded and consumes each read before the next, so one Reader serves every fd.
    """

    def __init__(self, size: int = READ_BYTES) -> None:
        self._buf = bytearray(size)
        self._view = memoryview(self._buf)

    def read(self, fd: int) -> bytes | None:
        """Up to the buffer's size from `fd`: b"" at end of file, None if nothing is available now."""
        try:
            n = os.readv(fd, (self._buf,))
        except BlockingIOError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ECONNRESET, errno.EIO):
                return b""
            raise
        return self._view[:n].tobytes()


class Writer:
    """Bytes queued for one descriptor; `flush` writes as much as the descriptor takes now."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._chunks: deque[bytes | memoryview] = deque()
        self.pending = 0  # bytes queued, not yet written
        self.queued = 0  # bytes ever queued: queued - pending have been written
        self.closed = False  # the peer is gone: further writes are discarded

    def write_line(self, line: bytes) -> None:
        if self.closed:
            return
        self._chunks.append(line)
        self._chunks.append(NEWLINE)
        self.pending += len(line) + 1
        self.queued += len(line) + 1

    def write(self, data: bytes) -> None:
        if self.closed or not data:
            return
        self._chunks.append(data)
        self.pending += len(data)
        self.queued += len(data)

    def flush(self) -> None:
        """Write until done or the descriptor would block. Raises PeerGoneError if the peer left."""
        chunks = self._chunks
        while chunks:
            batch = list(chunks) if len(chunks) <= IOV_BATCH else [chunks[i] for i in range(IOV_BATCH)]
            try:
                written = os.writev(self.fd, batch)
            except BlockingIOError:
                return
            except (BrokenPipeError, ConnectionResetError) as exc:
                self.discard()
                raise PeerGoneError(str(exc)) from None
            self.pending -= written
            if not self.pending:  # the common case: everything went in one call
                chunks.clear()
                return
            while written:
                head = chunks[0]
                if written >= len(head):
                    written -= len(head)
                    chunks.popleft()
                else:
                    chunks[0] = memoryview(head)[written:]
                    written = 0

    def discard(self) -> None:
        self.closed = True
        self._chunks.clear()
        self.pending = 0


class Watcher:
    """Descriptors watched for reading or writing (`selectors.EVENT_READ`, `EVENT_WRITE`), each with a
    name; `select` returns (name, ready events) as `selectors` returns (key, events)."""

    def __init__(self) -> None:
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._fallback = selectors.DefaultSelector() if self._epoll is None else None
        self._watched: dict[int, tuple[str, int]] = {}  # fd -> (name, events)

    def register(self, fd: int, events: int, name: str) -> None:
        if fd in self._watched:
            raise KeyError(f"{fd} is already watched")
        if self._epoll is not None:
            read = select.EPOLLIN if events & selectors.EVENT_READ else 0
            self._epoll.register(fd, read | (select.EPOLLOUT if events & selectors.EVENT_WRITE else 0))
        else:
            assert self._fallback is not None
            self._fallback.register(fd, events, name)
        self._watched[fd] = (name, events)

    def unregister(self, fd: int) -> None:
        del self._watched[fd]
        if self._epoll is not None:
            with contextlib.suppress(OSError):  # closed already (the link closes a lost socket first)
                self._epoll.unregister(fd)
        else:
            assert self._fallback is not None
            self._fallback.unregister(fd)

    def select(self, timeout: float | None = None) -> list[tuple[str, int]]:
        """The ready descriptors' names and events, waiting up to `timeout` (None: until one is)."""
        if self._epoll is None:
            assert self._fallback is not None
            return [(key.data, events) for key, events in self._fallback.select(timeout)]
        try:  # epoll rounds a timeout up to the millisecond, as selectors does
            polled = self._epoll.poll(-1 if timeout is None else max(timeout, 0.0))
        except InterruptedError:
            return []
        ready: list[tuple[str, int]] = []
        for fd, event in polled:
            watched = self._watched.get(fd)
            if watched is None:
                continue
            events = 0  # as selectors maps them: a hang-up or an error is ready both ways
            if event & ~select.EPOLLIN:
                events |= selectors.EVENT_WRITE
            if event & ~select.EPOLLOUT:
                events |= selectors.EVENT_READ
            ready.append((watched[0], events & watched[1]))
        return ready

    def close(self) -> None:
        self._watched.clear()
        if self._epoll is not None:
            self._epoll.close()
        elif self._fallback is not None:
            self._fallback.close()
