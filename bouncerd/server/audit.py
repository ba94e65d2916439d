"""The audit log writer: one file, one writer (this daemon), one line per record, hash-chained.

Theory of operation
-------------------
`AuditLog.open` opens ``audit.jsonl`` with ``O_APPEND | O_CREAT`` and mode 0600 (the daemon also runs
under umask 077), then looks at the tail before anything is appended:

- the file is empty: the chain starts at `GENESIS`;
- the last line is whole (ends in a newline and parses as a JSON object): the next record's ``prev``
  is that line's stored ``hash``. Its hash is not "repaired" even if it is wrong: an edited line is
  evidence, and `bouncerctl audit verify` reports it at its line;
- the last line is torn (no newline, or not JSON): a crash or power loss interrupted a write. The torn
  bytes are copied to ``audit.jsonl.torn-<UTC time>``, the log is truncated to the last newline, and
  a record with rule ``audit.repaired`` is appended that says how many bytes were moved where. Nothing
  is silently kept or silently lost.

`append` chains a record (`bouncerd.core.audit.chain`), encodes it as one line and writes it with a
single ``os.write``; with ``O_APPEND`` a line is never interleaved with another. There is no fsync per
line (see the fsync policy in `bouncerd/server/journal.py`); `close` fsyncs.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bouncerd.core import audit as chainlib

# Reading the tail backwards in slices of this size finds the start of the last line without reading
# a large log whole.
TAIL_CHUNK_BYTES = 64 * 1024

# Every record carries these fields, in this order (absent values are null), so readers see one shape.
RECORD_FIELDS = (
    "ts",
    "session",
    "client",
    "server",
    "request_id",
    "tool",
    "arguments",
    "verdict",
    "rule",
    "reason",
    "destination",
    "provenance",
)


def utc_iso(ts: float) -> str:
    """``2025-01-31T12:34:56.789Z``: UTC, milliseconds, Z."""
    moment = dt.datetime.fromtimestamp(ts, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def utc_stamp(ts: float) -> str:
    """``20250131T123456Z``: for file names."""
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")


@dataclass(frozen=True)
class TailRepair:
    moved_bytes: int
    aside: Path


class AuditLog:
    def __init__(self, path: Path, fd: int, head: str) -> None:
        self.path = path
        self._fd = fd
        self.head = head  # hash of the last line written
        self.records = 0  # written by this process

    @classmethod
    def open(cls, path: Path, now: float) -> tuple[AuditLog, TailRepair | None]:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o600)  # a log made by hand or by an older version: tighten it
            head, repair = _recover_tail(fd, path, now)
        except BaseException:
            os.close(fd)
            raise
        log = cls(path, fd, head)
        if repair is not None:
            log.append(
                {
                    "verdict": None,
                    "rule": "audit.repaired",
                    "reason": (
                        f"the last line of the audit log was torn (an interrupted write); "
                        f"moved {repair.moved_bytes} bytes to {repair.aside.name}"
                    ),
                },
                now,
            )
        return log, repair

    def append(self, fields: dict[str, Any], now: float) -> dict[str, Any]:
        """Write one record (fields not given are null); return it as written, with prev and hash."""
        record: dict[str, Any] = {name: fields.get(name) for name in RECORD_FIELDS}
        record["ts"] = utc_iso(now)
        for name, value in fields.items():
            if name not in record:
                record[name] = value
        chained = chainlib.chain(record, self.head)
        line = chainlib.encode_line(chained)
        written = os.write(self._fd, line)
        if written != len(line):
            # A full disk. Cut the partial line off again so later lines do not follow a torn one.
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            raise OSError(f"short write to the audit log ({written} of {len(line)} bytes)")
        self.head = chained[chainlib.HASH_FIELD]
        self.records += 1
        return chained

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def _recover_tail(fd: int, path: Path, now: float) -> tuple[str, TailRepair | None]:
    size = os.fstat(fd).st_size
    if size == 0:
        return chainlib.GENESIS, None
    last_byte = os.pread(fd, 1, size - 1)
    # Where the last line starts: after the last newline that is not the file's final byte.
    search_end = size - 1 if last_byte == b"\n" else size
    start = _line_start(fd, search_end)
    tail = _pread_all(fd, start, size - start)
    if last_byte == b"\n":
        parsed = chainlib.parse_line(tail)
        if parsed.record is not None and isinstance(parsed.record.get(chainlib.HASH_FIELD), str):
            return parsed.record[chainlib.HASH_FIELD], None
    aside = _unique_aside(path, now)
    out = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        _write_all(out, tail)
        os.fsync(out)
    finally:
        os.close(out)
    os.ftruncate(fd, start)
    os.fsync(fd)
    head = chainlib.GENESIS
    if start > 0:
        prev_start = _line_start(fd, start - 1)
        parsed = chainlib.parse_line(_pread_all(fd, prev_start, start - prev_start))
        if parsed.record is not None and isinstance(parsed.record.get(chainlib.HASH_FIELD), str):
            head = parsed.record[chainlib.HASH_FIELD]
    return head, TailRepair(len(tail), aside)


def _line_start(fd: int, end: int) -> int:
    """Offset just after the last newline before `end` (0 if none)."""
    pos = end
    while pos > 0:
        lo = max(0, pos - TAIL_CHUNK_BYTES)
        chunk = os.pread(fd, pos - lo, lo)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            return lo + idx + 1
        pos = lo
    return 0


def _pread_all(fd: int, offset: int, length: int) -> bytes:
    parts: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _unique_aside(path: Path, now: float) -> Path:
    base = path.with_name(f"{path.name}.torn-{utc_stamp(now)}")
    candidate, n = base, 0
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}.{n}")
    return candidate
