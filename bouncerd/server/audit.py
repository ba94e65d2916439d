"""The audit log writer: one file, one writer (this daemon), one line per record, hash-chained, rotated.

Theory of operation
-------------------
`AuditLog.open` opens ``audit.jsonl`` with ``O_APPEND | O_CREAT`` and mode 0600 (the daemon also runs
under umask 077), then looks at the tail before anything is appended:

- the file is empty: the chain starts at `GENESIS`, or, if a rotated ``audit.jsonl.1`` exists (a
  rotation was cut short by a crash after the rename), at that file's last hash, with a rotation
  record written first;
- the last line is whole (ends in a newline and parses as a JSON object): the next record's ``prev``
  is that line's stored ``hash``. Its hash is not "repaired" even if it is wrong: an edited line is
  evidence, and `bouncerctl audit verify` reports it at its line;
- the last line is torn (no newline, or not JSON): a crash or power loss interrupted a write. The torn
  bytes are copied to ``audit.jsonl.torn-<UTC time>``, the log is truncated to the last newline, and
  a record with rule ``audit.repaired`` is appended that says how many bytes were moved where. Nothing
  is silently kept or silently lost.

`append` chains a record (`bouncerd.core.audit.chain`), encodes it as one line and writes it with a
single ``os.write``; with ``O_APPEND`` a line is never interleaved with another.

The log is held as a path *and* an inode. Before each write the path is looked up again: if it names
no file, or another file than the one open (deleted, moved, replaced while the daemon runs), records
would go to a file nobody finds. So a new file is started at the path (a file that replaced ours is
first moved aside to ``audit.jsonl.replaced-<UTC time>``), and its first record (rule `GAP_RULE`)
names what happened and links, by ``prev``, to the last hash this daemon wrote: `bouncerctl audit
verify` then reports the missing records as a break in the chain, never as an intact log. The daemon
also keeps the last hash it wrote in its journal (at every compaction and at a clean stop) and hands it
to `open`: a log that no longer holds that record was replaced or cut while the daemon was down, and
is set aside and continued the same way, instead of a forged or torn start being taken for a crash.

Rotation: once the live file reaches `ROTATE_AFTER_BYTES`, it is fsync-ed and renamed to
``audit.jsonl.1`` (``.1`` becomes ``.2`` and so on; `KEEP_ROTATED` files are kept, the oldest is
dropped), a new ``audit.jsonl`` is created, and its first record (rule ``audit.rotated``) has
``prev`` = the last hash of the old file: the chain runs on across files, and `bouncerctl audit
verify` walks them oldest first. The renames happen while the old file is still open, so a failure
part-way leaves the daemon appending to a file that is still in the chain (the error is logged and
rotation is tried again later).

Durability (fsync policy)
- Each record: **no fsync**. Once ``write`` returns, the line is in the kernel's page cache and
  survives the death of the daemon. A ``kill -9`` (or a crash, or an OOM kill) can cost at most the
  line being written at that instant: a large line may be cut short by the signal; the next start
  moves the torn bytes aside and records that (above). Every line whose ``write`` had returned is
  kept. A verdict is written before its reply is sent, so no call the agent was told about is missing.
- A **power loss** or kernel panic can cost the lines written since the kernel last flushed the file
  (on Linux, dirty pages are written back after about 30 seconds), and can leave a torn or
  zero-filled tail, which the next start moves aside and records like any torn line. The chain over
  what survived still verifies; only a head hash kept elsewhere shows the lost lines. Per-line fsync
  would put a disk flush (milliseconds) on the path of every tool call.
- Rotation fsyncs the old file before renaming it and fsyncs the directory after, and a clean
  shutdown (`close`) fsyncs: a rotated file is never torn, and a clean stop loses nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bouncerd.auditfiles import GAP_RULE as GAP_RULE
from bouncerd.auditfiles import chain_files as chain_files  # also named here: tests import them
from bouncerd.auditfiles import predecessors as predecessors
from bouncerd.auditfiles import rotated_path
from bouncerd.core import audit as chainlib
from bouncerd.core.auditrecords import DIGEST_FIELD, RECORD_FIELDS, AnyRecord, EventRecord

log = logging.getLogger("bouncerd")

# Rotate the live file once it reaches this size. At a few hundred bytes a record (arguments in
# digest form) that is around 100,000 records: a file `verify` checks in seconds and an editor opens.
ROTATE_AFTER_BYTES = 64 * 1024 * 1024

# Rotated files kept besides the live one. Bounds the log's disk use to about 9 x 64 MiB (576 MiB)
# while keeping close to a million typical records; older evidence is for the user to archive.
KEEP_ROTATED = 8

# After a failed rotation (a full disk, a permission problem), try again after this many more bytes
# rather than on every append.
ROTATE_RETRY_BYTES = 1024 * 1024

# Reading the tail backwards in slices of this size finds the start of the last line without reading
# a large log whole.
TAIL_CHUNK_BYTES = 64 * 1024


def utc_iso(ts: float) -> str:
    """``2025-01-31T12:34:56.789Z``: UTC, milliseconds, Z.

    Every verdict is stamped, so the formatting of the whole second is done once per second: the
    fraction is split off exactly as ``datetime.fromtimestamp`` does it (microseconds rounded half to
    even, carrying into the second), and the rest comes from a one-entry cache.
    """
    global _second_cache
    fraction, whole = math.modf(ts)
    micros = round(fraction * 1e6)
    if micros < 0:  # before 1970: not worth a fast path
        moment = dt.datetime.fromtimestamp(ts, tz=dt.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    if micros >= 1_000_000:
        micros -= 1_000_000
        whole += 1.0
    second, prefix = _second_cache
    if whole != second:
        prefix = dt.datetime.fromtimestamp(whole, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _second_cache = (whole, prefix)
    return f"{prefix}{micros // 1000:03d}Z"


_second_cache: tuple[float, str] = (math.nan, "")


def utc_stamp(ts: float) -> str:
    """``20250131T123456Z``: for file names."""
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")


@dataclass(frozen=True)
class TailRepair:
    moved_bytes: int
    aside: Path


@dataclass(frozen=True)
class Gap:
    """The live file was lost (deleted, moved, replaced) and a new one started after a gap record."""

    why: str
    aside: Path | None  # where a file that replaced ours was moved


class AuditLog:
    def __init__(self, path: Path, fd: int, head: str) -> None:
        self.path = path
        self._fd = fd
        self.head = head  # hash of the last line written
        self.records = 0  # written by this process
        st = os.fstat(fd)
        self.size = st.st_size
        self._ident = (st.st_dev, st.st_ino)  # the file the path must still name at each write
        self.gaps: list[Gap] = []  # lost live files this daemon noticed (for its log and status)
        self._gap_pending: str | None = None  # a gap record not yet written (the write failed)
        self.rotate_at = ROTATE_AFTER_BYTES
        # Called with each record as written and its line (no newline), after the write: audit export
        # (`bouncerd/server/export.py`) queues a copy. It must not block or raise.
        self.tap: Callable[[dict[str, Any], bytes], None] | None = None
        # Called with the head after a rotation: the daemon journals it, so the head it checks at the
        # next start (`open`'s `known_head`) is never older than the files rotation keeps.
        self.on_rotated: Callable[[str], None] | None = None

    @classmethod
    def open(
        cls, path: Path, now: float, known_head: str | None = None
    ) -> tuple[AuditLog, TailRepair | None]:
        """Open the log at `path` for appends. `known_head` is the last hash the daemon wrote before
        (from its journal), if it knows one: a log that does not hold that record was replaced or cut
        while the daemon was down, and is set aside and continued after a gap record."""
        if known_head is not None and known_head != chainlib.GENESIS and not _holds(path, known_head):
            aside = _set_aside(path, now)
            fd = _open_live(path)
            log = cls(path, fd, known_head)
            why = (
                f"{path.name} does not hold the last record bouncerd wrote to it ({known_head}): "
                f"the log was deleted, replaced or cut while bouncerd was not running"
            )
            log._note_gap(why, aside, now)
            return log, None
        fd = _open_live(path)
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o600)  # a log made by hand or by an older version: tighten it
            head, repair = _recover_tail(fd, path, now)
            continued = None
            if head == chainlib.GENESIS and os.fstat(fd).st_size == 0:
                continued = _continue_from(rotated_path(path, 1))
        except BaseException:
            os.close(fd)
            raise
        log = cls(path, fd, continued or head)
        if continued is not None:
            # A rotation renamed the old file but died before the new one got its first record.
            log.append(_rotation_record(path), now)
        if repair is not None:
            repaired: EventRecord = {
                "verdict": None,
                "rule": chainlib.REPAIRED_RULE,
                "reason": (
                    f"the last line of the audit log was torn (an interrupted write); "
                    f"moved {repair.moved_bytes} bytes to {repair.aside.name}"
                ),
            }
            log.append(repaired, now)
        return log, repair

    def append(self, fields: AnyRecord, now: float) -> dict[str, Any]:
        """Write one record (fields not given are null); return it as written, with prev and hash."""
        record: dict[str, Any] = {}
        for name in RECORD_FIELDS:
            if name == "arguments" and "arguments" not in fields and DIGEST_FIELD in fields:
                record[DIGEST_FIELD] = fields[DIGEST_FIELD]  # `audit_arguments: digest`: in its place
            else:
                record[name] = fields.get(name)
        record["ts"] = utc_iso(now)
        for name, value in fields.items():
            if name not in record:
                record[name] = value
        self._check_still_ours(now)
        if self._gap_pending is not None and fields.get("rule") != GAP_RULE:
            gap: EventRecord = {"verdict": None, "rule": GAP_RULE, "reason": self._gap_pending}
            self.append(gap, now)
        chained = chainlib.chain(record, self.head)
        line = chainlib.encode_line(chained)
        written = os.write(self._fd, line)
        if written != len(line):
            # A full disk. Cut the partial line off again so later lines do not follow a torn one.
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            raise OSError(f"short write to the audit log ({written} of {len(line)} bytes)")
        self.head = chained[chainlib.HASH_FIELD]
        if fields.get("rule") == GAP_RULE:
            self._gap_pending = None
        self.records += 1
        self.size += written
        if self.tap is not None:
            self.tap(chained, line[:-1])
        if self.size >= self.rotate_at:
            self.rotate(now)
        return chained

    def _check_still_ours(self, now: float) -> None:
        """Whether the path still names the open file; if not, start a new one after a gap record."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
            ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            ident = None
        if ident == self._ident:
            return
        what = "deleted or moved" if ident is None else "replaced by another file"
        aside = _set_aside(self.path, now) if ident is not None else None
        fd = _open_live(self.path)
        os.close(self._fd)
        st = os.fstat(fd)
        self._fd, self.size, self._ident = fd, st.st_size, (st.st_dev, st.st_ino)
        why = (
            f"{self.path.name} was {what} while bouncerd ran; the records written to it since it was last "
            f"rotated or opened are lost with it, and this file continues the chain from the last "
            f"record written ({self.head})"
        )
        self._note_gap(why, aside, now)

    def _note_gap(self, why: str, aside: Path | None, now: float) -> None:
        if aside is not None:
            why += f"; the file found at its place was moved to {aside.name}"
        self.gaps.append(Gap(why, aside))
        log.error("audit: %s", why)
        self._gap_pending = why  # written before any other record, even if this write fails
        gap: EventRecord = {"verdict": None, "rule": GAP_RULE, "reason": why}
        self.append(gap, now)

    def rotate(self, now: float) -> None:
        """Move the live file to ``.1`` (shifting older ones) and continue the chain in a new file."""
        try:
            os.fsync(self._fd)
            for n in range(KEEP_ROTATED - 1, 0, -1):
                older = rotated_path(self.path, n)
                if older.exists():
                    os.replace(older, rotated_path(self.path, n + 1))
            os.replace(self.path, rotated_path(self.path, 1))
            fd = _open_live(self.path)
            _fsync_dir(self.path.parent)
        except OSError as exc:
            log.error("audit: rotation failed, still appending to the current file: %s", exc)
            self.rotate_at = self.size + ROTATE_RETRY_BYTES
            return
        os.close(self._fd)
        st = os.fstat(fd)
        self._fd, self.size, self.rotate_at = fd, 0, ROTATE_AFTER_BYTES
        self._ident = (st.st_dev, st.st_ino)
        self.append(_rotation_record(self.path), now)
        if self.on_rotated is not None:
            self.on_rotated(self.head)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def _holds(path: Path, head: str) -> bool:
    """Whether the log at `path` (its rotated files included) holds the record whose hash is `head`."""
    needle = f'"{chainlib.HASH_FIELD}":"{head}"'.encode()
    files = list(reversed(chain_files(path)))  # newest first: the head is near the end
    return any(_contains(file, needle, tail_only=True) for file in files) or any(
        _contains(file, needle) for file in files
    )


def _contains(path: Path, needle: bytes, *, tail_only: bool = False) -> bool:
    """Whether the file holds `needle` (in its last TAIL_CHUNK_BYTES only, the common case after a
    clean stop, with `tail_only`)."""
    try:
        with path.open("rb") as fh:
            if tail_only:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - TAIL_CHUNK_BYTES))
                return needle in fh.read()
            carry = b""
            while chunk := fh.read(4 * 1024 * 1024):
                if needle in carry + chunk:
                    return True
                carry = chunk[-len(needle) :]
    except OSError:
        return False
    return False


def _set_aside(path: Path, now: float) -> Path | None:
    """Move a file found at `path` that is not the daemon's log aside (kept as evidence); None if
    there is none or it is empty."""
    try:
        if os.stat(path, follow_symlinks=False).st_size == 0:
            os.unlink(path)
            return None
    except FileNotFoundError:
        return None
    base = path.with_name(f"{path.name}.replaced-{utc_stamp(now)}")
    candidate, n = base, 0
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}.{n}")
    os.replace(path, candidate)
    _fsync_dir(path.parent)
    return candidate


def _open_live(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def _rotation_record(path: Path) -> EventRecord:
    return {
        "verdict": None,
        "rule": chainlib.ROTATED_RULE,
        "reason": (
            f"the previous {path.name} was renamed {path.name}.1 (rotation by size); the chain continues "
            "from its last record"
        ),
    }


def _continue_from(previous: Path) -> str | None:
    """The last hash of a rotated file, if there is one to continue (None: start a new chain)."""
    try:
        fd = os.open(previous, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return None
        start = _line_start(fd, size - 1)
        parsed = chainlib.parse_line(_pread_all(fd, start, size - start))
    finally:
        os.close(fd)
    stored = parsed.record.get(chainlib.HASH_FIELD) if parsed.record is not None else None
    return stored if isinstance(stored, str) else None


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems refuse to fsync a directory; nothing to do
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
