"""The daemon's journal: an append-only file of checksummed records from which all engine state is rebuilt.

Theory of operation
-------------------
The file opens with `MAGIC` and is then a sequence of records: a 4-byte length, a 4-byte CRC-32 of
the length and the body, and the body, one msgpack map as a `bouncerd.wire` frame holds it (one codec
serves the socket and the disk). `append` encodes one entry and hands it to the kernel with a single
``write``/``writev`` on an ``O_APPEND`` descriptor; the daemon acknowledges a request only after that
call returns. An entry holding a large bytes value (a raw upstream output) is encoded around it
(`wire.encode_parts`): the value goes to the kernel from its own buffer instead of being copied into a
new frame first. Entry kinds (the ``k`` field) belong to the daemon and are described in
`bouncerd/server/observations.py` and `bouncerd/server/daemon.py`; this module only stores records.

A failed append (a full disk, an I/O error) may leave part of a record in the file. `append` cuts the
file back to where the record began before it raises, and if even that fails, the next append tries
the cut again first and raises rather than write after a torn record: a record is never written
after one that is not whole.

Durability (fsync policy)
- Each append: **no fsync**. Once ``write`` returns, the bytes are in the kernel's page cache and
  survive the death of this process (``kill -9``, a crash, an OOM kill), which is the failure this
  journal is for. They do not survive a power loss or kernel panic; fsync per observation would cap
  throughput at the disk's flush rate (milliseconds each) on the shim's hot path.
- Creation, compaction (`rewrite`) and clean shutdown: the new file is written to a temp file,
  ``fsync``-ed, moved over the old one with ``os.replace``, and the directory is fsync-ed, so a power
  loss leaves either the old journal or the new one, whole.

Recovery: `Journal.open` reads the file record by record and hands each entry to a visitor, and says
in `Recovery.state` what it found:
- ``clean``: every byte belongs to a whole record whose checksum holds.
- ``torn``: the last record is incomplete (its header or body runs past the end of the file). That is
  what a process killed inside ``write`` leaves, and such a record was never acknowledged, so cutting
  it loses nothing anyone was told was kept: the recovery is exact.
- ``damaged``: a whole record whose checksum fails or whose body does not decode, a length no writer
  of ours produces, an empty file or one that does not begin with `MAGIC` and is no journal of an
  earlier version either. Something other than a crash changed the file (a flipped bit, a truncation
  inside the file, a full disk under an earlier version, a person), and the state it held cannot be
  trusted to be whole; the daemon then starts restricted (`bouncerd/core/restricted.py`).
From the first bad byte on, everything is cut (it cannot be read as records any more), after being
copied to ``journal.bin.torn-<UTC time>`` or ``journal.bin.damaged-<UTC time>`` beside the journal.

A journal written before records carried checksums (wire frames only, no `MAGIC`) is read as such and
rewritten in this format at once (``legacy`` in `Recovery`); an undecodable frame in it is damage, an
incomplete last one a tear, as above, except that a file from which not one frame could be read is
damage (random bytes read as a frame length look like a tear).
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from bouncerd import wire
from bouncerd.atomicfile import replace_file
from bouncerd.errors import ProtocolError

# Frames holding a large bytes value are written around it (see wire.encode_parts); re-exported here
# because the journal is where that matters most.
from bouncerd.wire import BLOB_MIN_BYTES as BLOB_MIN_BYTES
from bouncerd.wire import encode_parts as encode_parts

JOURNAL_NAME = "journal.bin"

# The first bytes of every journal in this format: an empty file, or one that begins otherwise and is
# no earlier journal either, is a damaged one, never a fresh one (a fresh one has no file at all).
MAGIC: Final = b"BNCRJ\x002\n"

# A record's header: the body's length and the CRC-32 of the length's bytes and the body.
_RECORD = struct.Struct(">II")
RECORD_HEADER_BYTES: Final = _RECORD.size

# Reading in slices of this size keeps start-up memory to one slice plus the largest record.
READ_CHUNK_BYTES = 4 * 1024 * 1024

Entry = dict[str, Any]
State = Literal["clean", "torn", "damaged"]


def record_parts(entry: Mapping[str, Any]) -> list[bytes]:
    """The record for `entry` as buffers to write in one ``writev``: header, then the frame's body
    (large bytes values from their own buffers). Raises ProtocolError if it exceeds a frame."""
    parts = encode_parts(entry)
    first = parts[0]
    length = first[: wire.HEADER_BYTES]
    parts[0] = first[wire.HEADER_BYTES :]
    crc = zlib.crc32(length)
    for part in parts:
        crc = zlib.crc32(part, crc)
    return [length + struct.pack(">I", crc), *parts]


def _write_parts(fd: int, parts: list[bytes]) -> int:
    """Write all of `parts` (one writev when the kernel takes it whole, as it does for regular files)."""
    total = sum(len(part) for part in parts)
    written = os.writev(fd, parts) if len(parts) > 1 else os.write(fd, parts[0])
    if written < total:  # a signal, or a disk that filled: finish the record from where the kernel stopped
        rest = memoryview(b"".join(parts))[written:]
        while rest:
            rest = rest[os.write(fd, rest) :]
    return total


@dataclass(frozen=True)
class Recovery:
    entries: int  # good records read
    good_bytes: int  # where the last good record ends (in the file as it was found)
    torn_bytes: int  # bytes truncated after it (0 when the file was whole)
    problem: str | None  # why those bytes were dropped, or why the file is damaged
    aside: Path | None = None  # where the dropped bytes were copied
    state: State = "clean"
    legacy: bool = False  # a journal of the earlier format (no checksums), rewritten in this one

    @property
    def damaged(self) -> bool:
        return self.state == "damaged"

    def describe(self) -> str:
        if self.state == "damaged":
            kept = (
                f"; the bytes from offset {self.good_bytes} on are kept in {self.aside}" if self.aside else ""
            )
            return (
                f"journal: DAMAGED ({self.problem}); {self.entries} entries before the damage were read"
                f"{kept}; bouncerd starts restricted until a person accepts the loss"
            )
        if not self.torn_bytes:
            return f"journal: {self.entries} entries, {self.good_bytes} bytes"
        return (
            f"journal: {self.entries} entries; truncated a torn tail of {self.torn_bytes} bytes "
            f"at offset {self.good_bytes} ({self.problem}); the bytes are kept in {self.aside}"
        )


def scan(path: Path, visit: Callable[[Entry], None]) -> Recovery:
    """Feed every whole, checksummed record of the file at `path` to `visit`; say where the good part
    ends and whether what follows is a tear or damage."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return Recovery(0, 0, 0, None)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, len(MAGIC), 0)
        if size == 0:
            return Recovery(
                0, 0, 0, "the file is empty (a journal always begins with a header)", state="damaged"
            )
        if head == MAGIC:
            return _scan_records(fd, size, visit)
        if len(head) < len(MAGIC) and MAGIC.startswith(head):
            return Recovery(0, 0, size, "incomplete header", state="torn")
        return _scan_legacy(fd, size, visit)
    finally:
        os.close(fd)


def _scan_records(fd: int, size: int, visit: Callable[[Entry], None]) -> Recovery:
    reader = _Reader(fd, len(MAGIC))
    pos = len(MAGIC)
    count = 0
    problem: str | None = None
    state: State = "clean"
    while pos < size:
        header = reader.take(RECORD_HEADER_BYTES)
        if len(header) < RECORD_HEADER_BYTES:
            problem, state = "incomplete record header", "torn"
            break
        length, crc = _RECORD.unpack(header)
        if length == 0 or length > wire.MAX_FRAME_BYTES:
            problem, state = f"a record length of {length} bytes, which no writer produces", "damaged"
            break
        if pos + RECORD_HEADER_BYTES + length > size:
            problem, state = "incomplete last record", "torn"
            break
        body = reader.take(length)
        if zlib.crc32(body, zlib.crc32(header[:4])) != crc:
            problem, state = f"checksum mismatch in the record at offset {pos}", "damaged"
            break
        try:
            entry = wire.decode_body(body)
        except ProtocolError as exc:
            problem, state = f"the record at offset {pos} does not decode ({exc})", "damaged"
            break
        del body
        pos += RECORD_HEADER_BYTES + length
        count += 1
        visit(entry)
    return Recovery(count, pos, size - pos, problem, state=state)


class _Reader:
    """Sequential reads in `READ_CHUNK_BYTES` slices, so a journal of small records costs few calls."""

    def __init__(self, fd: int, offset: int) -> None:
        self._fd = fd
        self._offset = offset  # of the first byte not yet read from the file
        self._buf = b""
        self._pos = 0

    def take(self, n: int) -> bytes:
        """The next `n` bytes (fewer at the end of the file)."""
        if len(self._buf) - self._pos >= n:
            out = self._buf[self._pos : self._pos + n]
            self._pos += n
            return out
        parts = [self._buf[self._pos :]]
        have = len(parts[0])
        self._buf, self._pos = b"", 0
        while have < n:
            chunk = os.pread(self._fd, max(READ_CHUNK_BYTES, n - have), self._offset)
            if not chunk:
                break
            self._offset += len(chunk)
            need = n - have
            parts.append(chunk[:need])
            have += min(need, len(chunk))
            if len(chunk) > need:
                self._buf, self._pos = chunk, need
        return b"".join(parts)


def _scan_legacy(fd: int, size: int, visit: Callable[[Entry], None]) -> Recovery:
    """A journal of wire frames without checksums (the format before this one)."""
    decoder = wire.FrameDecoder()
    fed = 0
    good = 0
    count = 0
    problem: str | None = None
    state: State = "clean"
    while problem is None:
        chunk = os.pread(fd, READ_CHUNK_BYTES, fed)
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
            problem, state = str(exc), "damaged"
    if good < size and problem is None:
        problem, state = "incomplete last frame", "torn"
    if count == 0 and state == "torn":
        problem, state = f"not a journal: no record could be read ({problem})", "damaged"
    return Recovery(count, good, size - good, problem, state=state, legacy=True)


class Journal:
    """An open journal file, positioned for appends."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size
        self._torn = False  # a failed append could not be cut back: cut before writing again

    @classmethod
    def open(cls, path: Path, visit: Callable[[Entry], None]) -> tuple[Journal, Recovery]:
        """Replay the journal at `path` through `visit`, cut off a torn or damaged tail (copied aside
        first), rewrite a journal of the earlier format in this one, and open it for appends."""
        recovery = scan(path, visit)
        if recovery.torn_bytes:
            kind = "damaged" if recovery.damaged else "torn"
            aside = _copy_tail_aside(path, recovery.good_bytes, kind)
            recovery = Recovery(
                recovery.entries,
                recovery.good_bytes,
                recovery.torn_bytes,
                recovery.problem,
                aside,
                recovery.state,
                recovery.legacy,
            )
        exists = path.exists()
        if recovery.legacy or not exists or recovery.good_bytes < len(MAGIC):
            size = _convert(path, recovery.good_bytes if recovery.legacy else 0)
        else:
            size = recovery.good_bytes
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        if os.fstat(fd).st_size != size:
            os.ftruncate(fd, size)
            os.fsync(fd)
        return cls(path, fd, size), recovery

    def append(self, entry: Mapping[str, Any]) -> None:
        """Write one entry with one system call. ProtocolError if it exceeds a frame, OSError on I/O;
        after an OSError the file is cut back to where the entry began (or the next append does it)."""
        parts = record_parts(entry)
        if self._torn:
            self._cut_back()
        try:
            written = _write_parts(self._fd, parts)
        except OSError:
            with contextlib.suppress(OSError):
                self._torn = True
                self._cut_back()
            raise
        self.size += written

    def _cut_back(self) -> None:
        """Truncate the file to the end of the last whole record (freeing space never needs space)."""
        os.ftruncate(self._fd, self.size)
        self._torn = False

    def rewrite(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Replace the journal with `entries` atomically and durably (temp file, fsync, rename).

        On any error the old journal stays in place and open, so no state is lost.
        """
        size = _write_new(self.path, (record_parts(entry) for entry in entries))
        new_fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        os.close(self._fd)
        self._fd = new_fd
        self.size = size
        self._torn = False

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _write_new(path: Path, records: Iterable[list[bytes]]) -> int:
    """Replace `path` with `MAGIC` and `records`, whole (`bouncerd.atomicfile.replace_file`: temp file,
    fsync, rename, directory fsync); return its size. On any error `path` is left as it was."""
    size = 0

    def write(fd: int) -> None:
        nonlocal size
        size = _write_parts(fd, [MAGIC])
        for parts in records:
            size += _write_parts(fd, parts)

    replace_file(path, write)
    return size


def _convert(path: Path, good_bytes: int) -> int:
    """Write the journal at `path` anew in this format: the frames of an earlier-format journal up to
    `good_bytes` become records (none when `good_bytes` is 0: a new or unreadable file)."""

    def records() -> Iterable[list[bytes]]:
        if not good_bytes:
            return
        decoder = wire.FrameDecoder()
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            pos = 0
            while pos < good_bytes:
                chunk = os.pread(fd, min(READ_CHUNK_BYTES, good_bytes - pos), pos)
                if not chunk:
                    break
                pos += len(chunk)
                decoder.receive_data(chunk)
                while (entry := decoder.next_message()) is not None:
                    yield record_parts(entry)
        finally:
            os.close(fd)

    return _write_new(path, records())


def _copy_tail_aside(path: Path, offset: int, kind: str) -> Path:
    """Copy the bytes of `path` from `offset` on to a new file beside it, durably; return its path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.{kind}-{stamp}")
    n = 0
    while True:
        try:
            out = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            break
        except FileExistsError:
            n += 1
            aside = path.with_name(f"{path.name}.{kind}-{stamp}.{n}")
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
