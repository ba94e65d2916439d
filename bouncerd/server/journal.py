"""The daemon's journal: an append-only file of wire frames from which all engine state is rebuilt.

Theory of operation
-------------------
The file is a sequence of `bouncerd.wire` frames (4-byte length + one msgpack map), so one codec
serves the socket and the disk. `append` encodes one entry and hands it to the kernel with a single
``write``/``writev`` on an ``O_APPEND`` descriptor; the daemon acknowledges a request only after that
call returns. An entry holding a large bytes value (a raw upstream output) is encoded around it
(`wire.encode_parts`): the frame's bytes are exactly `wire.encode`'s, but the value goes to the kernel from
its own buffer instead of being copied into a new frame first. Entry kinds (the ``k`` field) belong
to the daemon and are described in `bouncerd/server/observations.py` and `bouncerd/server/daemon.py`;
this module only stores frames.

Durability (fsync policy)
- Each append: **no fsync**. Once ``write`` returns, the bytes are in the kernel's page cache and
  survive the death of this process (``kill -9``, a crash, an OOM kill), which is the failure this
  journal is for. They do not survive a power loss or kernel panic; fsync per observation would cap
  throughput at the disk's flush rate (milliseconds each) on the shim's hot path.
- Compaction (`rewrite`) and clean shutdown: the new file is written to a temp file, ``fsync``-ed,
  moved over the old one with ``os.replace``, and the directory is fsync-ed, so a power loss leaves
  either the old journal or the new one, whole.

Recovery: `Journal.open` reads the file frame by frame and hands each entry to a visitor. A crash can
leave a torn last frame (a header without all of its body, or bytes that do not decode). Everything
from the end of the last good frame on is truncated away and reported in `Recovery`, so the next
append starts on a frame boundary. A frame in the middle cannot be torn by a crash (appends are
sequential), so the same check is all that is needed; should the disk itself corrupt one, everything
from it on is cut the same way. Cut bytes are never destroyed: they are first copied to
``journal.bin.torn-<UTC time>`` beside the journal.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bouncerd import wire
from bouncerd.atomicfile import replace_file
from bouncerd.errors import ProtocolError

# Frames holding a large bytes value are written around it (see wire.encode_parts); re-exported here
# because the journal is where that matters most.
from bouncerd.wire import BLOB_MIN_BYTES as BLOB_MIN_BYTES
from bouncerd.wire import encode_parts as encode_parts

JOURNAL_NAME = "journal.bin"

# Reading in slices of this size keeps start-up memory to one slice plus the largest frame.
READ_CHUNK_BYTES = 4 * 1024 * 1024

Entry = dict[str, Any]


def _write_parts(fd: int, parts: list[bytes]) -> int:
    """Write all of `parts` (one writev when the kernel takes it whole, as it does for regular files)."""
    total = sum(len(part) for part in parts)
    written = os.writev(fd, parts) if len(parts) > 1 else os.write(fd, parts[0])
    if written < total:  # a full disk or a signal: finish the frame from where the kernel stopped
        rest = memoryview(b"".join(parts))[written:]
        while rest:
            rest = rest[os.write(fd, rest) :]
    return total


@dataclass(frozen=True)
class Recovery:
    entries: int  # good frames read
    good_bytes: int  # where the last good frame ends
    torn_bytes: int  # bytes truncated after it (0 when the file was whole)
    problem: str | None  # why those bytes were dropped
    aside: Path | None = None  # where the dropped bytes were copied

    def describe(self) -> str:
        if not self.torn_bytes:
            return f"journal: {self.entries} entries, {self.good_bytes} bytes"
        return (
            f"journal: {self.entries} entries; truncated a torn tail of {self.torn_bytes} bytes "
            f"at offset {self.good_bytes} ({self.problem}); the bytes are kept in {self.aside}"
        )


def scan(path: Path, visit: Callable[[Entry], None]) -> Recovery:
    """Feed every whole frame of the file at `path` to `visit`; say where the good part ends."""
    decoder = wire.FrameDecoder()
    fed = 0
    good = 0
    count = 0
    problem: str | None = None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return Recovery(0, 0, 0, None)
    try:
        while problem is None:
            chunk = os.read(fd, READ_CHUNK_BYTES)
            if not chunk:
                break
            fed += len(chunk)
            try:
                decoder.receive_data(chunk)
                while (entry := decoder.next_message()) is not None:
                    good = fed - decoder.buffered
                    count += 1
                    visit(entry)
            except ProtocolError as exc:
                problem = str(exc)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if good < size and problem is None:
        problem = "incomplete last frame"
    return Recovery(count, good, size - good, problem)


class Journal:
    """An open journal file, positioned for appends."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size

    @classmethod
    def open(cls, path: Path, visit: Callable[[Entry], None]) -> tuple[Journal, Recovery]:
        """Replay the journal at `path` through `visit`, cut off a torn tail, and open it for appends."""
        recovery = scan(path, visit)
        if recovery.torn_bytes:
            aside = _copy_tail_aside(path, recovery.good_bytes)
            recovery = Recovery(
                recovery.entries, recovery.good_bytes, recovery.torn_bytes, recovery.problem, aside
            )
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        if recovery.torn_bytes:
            os.ftruncate(fd, recovery.good_bytes)
            os.fsync(fd)
        return cls(path, fd, recovery.good_bytes), recovery

    def append(self, entry: Mapping[str, Any]) -> None:
        """Write one entry with one system call. ProtocolError if it exceeds a frame, OSError on I/O."""
        self.size += _write_parts(self._fd, encode_parts(entry))

    def rewrite(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Replace the journal with `entries` atomically and durably (temp file, fsync, rename).

        On any error the old journal stays in place and open, so no state is lost.
        """
        size = 0

        def write(fd: int) -> None:
            nonlocal size
            for entry in entries:
                size += _write_parts(fd, encode_parts(entry))

        replace_file(self.path, write)
        new_fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        os.close(self._fd)
        self._fd = new_fd
        self.size = size

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _copy_tail_aside(path: Path, offset: int) -> Path:
    """Copy the bytes of `path` from `offset` on to a new file beside it, durably; return its path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.torn-{stamp}")
    n = 0
    while True:
        try:
            out = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            break
        except FileExistsError:
            n += 1
            aside = path.with_name(f"{path.name}.torn-{stamp}.{n}")
    src = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        pos = offset
        while chunk := os.pread(src, READ_CHUNK_BYTES, pos):
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view) :]
            pos += len(chunk)
        os.fsync(out)
    finally:
        os.close(src)
        os.close(out)
    return aside
