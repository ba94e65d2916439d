"""The audit log's hash chain: pure functions over records and lines, shared by the daemon and the CLI.

Theory of operation
-------------------
Each audit line is one JSON object. Its ``hash`` is the SHA-256 (hex) of the *canonical* JSON of the
record with ``prev`` included and ``hash`` left out: ``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)``, UTF-8. ``prev`` is the ``hash`` of the line before, and
`GENESIS` (64 zeros) for the first line. Editing a line breaks its own hash; deleting or reordering
lines breaks the ``prev`` of the line that follows the gap; a torn (truncated) last line does not
parse. Dropping whole lines from the *end* leaves a valid shorter chain: only a head hash kept
elsewhere (`verify_lines(..., expected_head=...)`) can show that.

Values are made JSON-safe before hashing (`jsonable`: bytes become text, map keys become strings), so
the record that is hashed is exactly the record a reader parses back, and a verifier recomputes the
same hash from the line alone.

Rotation: the writer moves a full ``audit.jsonl`` to ``audit.jsonl.1`` (older ones shift up) and
starts a new file whose first record has rule `ROTATED_RULE` and ``prev`` = the old file's last hash,
so the chain runs on across files. `ChainWalker` walks several files in order (oldest first) as one
chain. The first line of the *first* file walked may be a rotation record whose predecessor is no
longer kept: its ``prev`` is then taken as the anchor (and reported), since there is nothing left
to check it against.

How a break is named (`ChainWalker`, first break only):

- ``truncated``: the last line has no newline (a torn write), or the log ends before a head hash
  recorded elsewhere;
- ``not_json``: a line is not a JSON object; ``malformed``: an object without ``prev``/``hash``;
- ``edited``: a line's content does not match its own hash;
- ``inserted``: a line's ``prev`` names a line seen *earlier* than the one before it (a line was
  inserted or repeated in between);
- ``reordered``: a line's ``prev`` names a line that appears *later* in the log;
- ``deleted``: a line's ``prev`` names a line that is nowhere in the log (lines were removed, or the
  line before was edited and its hash recomputed: the two cannot be told apart from the log alone).

To tell the last two apart the walker keeps reading after the break, looking only for the one
missing hash; it remembers the last `RECENT_HASHES` hashes to recognise an insertion. Memory stays
constant however long the log is.

The writer (file I/O, timestamps, rotation, repair of a torn tail) is `bouncerd/server/audit.py`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

GENESIS = "0" * 64

HASH_FIELD = "hash"
PREV_FIELD = "prev"

# Rules of the records the writer itself adds (not verdicts).
ROTATED_RULE = "audit.rotated"
REPAIRED_RULE = "audit.repaired"

# How many recent hashes the walker remembers (with their line) to recognise a line whose `prev` points
# a little way back: an inserted or repeated line. A few thousand covers any hand edit; an insertion
# further back is still reported at the right line, only named "deleted" instead of "inserted".
RECENT_HASHES = 4096

BreakKind = Literal["truncated", "not_json", "malformed", "edited", "inserted", "reordered", "deleted"]

# One encoder for every canonical form: building one per call costs more than the encoding itself.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# And one for the lines as written (keys in the record's order): `json.dumps` with options builds one
# per call.
_LINE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

# Types whose values `jsonable` returns as they are, checked by exact type first: a verdict record is
# mostly these, and one set lookup costs less than the isinstance chain below (subclasses take it).
_AS_IS: frozenset[type] = frozenset({str, int, bool, type(None)})


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def jsonable(value: Any) -> Any:
    """`value` with every part JSON can carry as it is, bytes as text, non-finite numbers as their
    JSON-ish spelling in a string (``"NaN"``), and every map key a string.

    Bytes that are UTF-8 become that text; others become ``"base64:" + base64``. The daemon receives
    arguments as msgpack, which can carry bytes and non-string keys that JSON cannot.
    """
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is dict:  # the record itself and most arguments: the same as the Mapping case below
        return {
            (k if type(k) is str else _key(k)): (v if type(v) in _AS_IS else jsonable(v))
            for k, v in value.items()
        }
    if isinstance(value, float) and not math.isfinite(value):
        # msgpack (and Python's json, reading a client's line) carry NaN and infinities; JSON has no
        # spelling for them, and a line holding `NaN` is one jq and every strict reader refuse.
        return _NON_FINITE[repr(value)]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(raw).decode("ascii")
    if isinstance(value, Mapping):
        return {_key(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    converted = jsonable(key)
    return converted if isinstance(converted, str) else json.dumps(converted)


def canonical(record: Mapping[str, Any]) -> bytes:
    """The bytes that are hashed: the record without ``hash``, keys sorted, no spaces, UTF-8."""
    body = {k: v for k, v in record.items() if k != HASH_FIELD}
    return _CANONICAL.encode(body).encode("utf-8")


def record_hash(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(record)).hexdigest()


def chain(record: Mapping[str, Any], prev: str) -> dict[str, Any]:
    """A JSON-safe copy of `record` with ``prev`` set to `prev` and ``hash`` computed."""
    out: dict[str, Any] = jsonable({k: v for k, v in record.items() if k not in (HASH_FIELD, PREV_FIELD)})
    out[PREV_FIELD] = prev
    # `out` has no hash yet, so its canonical form is `canonical(out)` without the copy that drops it.
    out[HASH_FIELD] = hashlib.sha256(_CANONICAL.encode(out).encode("utf-8")).hexdigest()
    return out


def encode_line(record: Mapping[str, Any]) -> bytes:
    """One audit line (with its newline) for a record that `chain` produced. Keys keep their order."""
    return _LINE.encode(record).encode("utf-8") + b"\n"


def loads_line(line: bytes) -> Any:
    """The JSON value of one line (its newline may be present), or None if it is not JSON."""
    try:
        return json.loads(line.decode("utf-8"))  # decoded here: json's own encoding sniffing is slower
    except (UnicodeDecodeError, ValueError):
        return None


@dataclass(frozen=True)
class ParsedLine:
    record: dict[str, Any] | None  # None when the line is not a JSON object
    problem: str | None  # why the line is not a valid audit record, None when it is


def parse_line(line: bytes) -> ParsedLine:
    """Parse one line (its newline may be present) and check its own hash; not its place in the chain."""
    obj = loads_line(line)
    if obj is None:
        return ParsedLine(None, "not a JSON object (torn or edited)")
    if not isinstance(obj, dict):
        return ParsedLine(None, "not a JSON object")
    stored = obj.get(HASH_FIELD)
    if not isinstance(stored, str) or not isinstance(obj.get(PREV_FIELD), str):
        return ParsedLine(obj, "missing 'prev' or 'hash'")
    if record_hash(obj) != stored:
        return ParsedLine(obj, "hash does not match the line's content (edited)")
    return ParsedLine(obj, None)


# ---- walking the chain --------------------------------------------------------------------------


@dataclass(frozen=True)
class Break:
    """The first line that breaks the chain: where, and how."""

    file: str
    line: int  # 1-based, within `file`
    kind: BreakKind
    detail: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def describe(self) -> str:
        return f"{self.where}: {self.kind}: {self.detail}"


@dataclass(frozen=True)
class ChainResult:
    ok: bool
    records: int  # lines read, over every file (a torn last line counts)
    files: tuple[str, ...]
    head: str  # hash of the last good line, GENESIS for an empty log
    broken: Break | None = None
    anchor: str | None = None  # the `prev` of a first line continuing a file no longer kept

    def describe(self) -> str:
        if self.broken is not None:
            return f"audit chain broken at {self.broken.describe()}"
        where = f"{len(self.files)} file{'s' if len(self.files) != 1 else ''}"
        text = f"audit chain intact: {self.records} records in {where}, head {self.head}"
        if self.anchor is not None:
            text += f" (starts from a rotated file no longer kept, whose last hash was {self.anchor})"
        return text


@dataclass
class _Pending:
    """A `prev` mismatch waiting to be named: does the line it wants appear later?"""

    file: str
    line: int
    wanted: str
    needle: bytes
    found: tuple[str, int] | None = None


@dataclass
class ChainWalker:
    """Feed it every line of every file, oldest first; `finish` says whether the chain is whole.

    `feed` returns the line's JSON value (a dict for a record) so a caller that also reads the records
    (the report) parses each line once. After the first break, lines are still parsed and returned,
    but no longer checked.
    """

    expected_head: str | None = None
    # The parser. A faster one may be given (the report's); a line it makes look edited is parsed
    # again with `loads_line`, the reference, before it is called edited.
    loads: Callable[[bytes], Any] = loads_line
    prev: str = GENESIS
    records: int = 0
    files: list[str] = field(default_factory=list)
    anchor: str | None = None
    broken: Break | None = None
    _line: int = 0
    _file: str = ""
    # Two generations of recent hashes: when the young one is full it becomes the old one. Each
    # lookup sees the last RECENT_HASHES / 2 to RECENT_HASHES lines, at O(1) per line.
    _young: dict[str, tuple[str, int]] = field(default_factory=dict)
    _old: dict[str, tuple[str, int]] = field(default_factory=dict)
    _pending: _Pending | None = None

    def begin_file(self, name: str) -> None:
        self.files.append(name)
        self._file = name
        self._line = 0

    def feed(self, line: bytes) -> Any:
        if not self.files:
            self.begin_file("audit.jsonl")
        self._line += 1
        self.records += 1
        obj = self.loads(line)
        if self.broken is not None or self._pending is not None:
            pending = self._pending
            if pending is not None and pending.found is None and pending.needle in line:
                pending.found = (self._file, self._line)
            return obj
        if not line.endswith(b"\n"):
            self._break("truncated", "the last line has no newline: a write was cut off (a torn line)")
        elif type(obj) is not dict:
            self._break("not_json", "the line is not a JSON object")
        else:
            self._check(obj, line)
        return obj

    def _check(self, obj: dict[str, Any], line: bytes) -> None:
        stored = obj.pop(HASH_FIELD, None)
        prev = obj.get(PREV_FIELD)
        if not isinstance(stored, str) or not isinstance(prev, str):
            if stored is not None:
                obj[HASH_FIELD] = stored
            self._break("malformed", "the line has no 'prev' or no 'hash': it is not an audit record")
            return
        # The canonical form without building a copy: take `hash` out, encode, put it back.
        computed = hashlib.sha256(_CANONICAL.encode(obj).encode("utf-8")).hexdigest()
        obj[HASH_FIELD] = stored
        if computed != stored and (self.loads is loads_line or record_hash(loads_line(line) or {}) != stored):
            self._break("edited", "its content does not match its hash: the line was edited")
            return
        if prev != self.prev:
            first_line_of_log = self.records == 1
            if first_line_of_log and obj.get("rule") == ROTATED_RULE:
                self.anchor = prev  # continues a rotated file that is no longer kept
            else:
                self._mismatch(prev)
                return
        young = self._young
        young[stored] = (self._file, self._line)
        if len(young) >= RECENT_HASHES // 2:
            self._old, self._young = young, {}
        self.prev = stored

    def _mismatch(self, prev: str) -> None:
        seen = self._young.get(prev) or self._old.get(prev)
        if prev == GENESIS:
            self._break("inserted", "its 'prev' says it is the first record of a log, but records precede it")
        elif seen is not None:
            self._break(
                "inserted",
                f"its 'prev' names the record at {seen[0]}:{seen[1]}, not the line before it: "
                "a line was inserted or repeated in between",
            )
        else:
            needle = f'"{HASH_FIELD}":"{prev}"'.encode()
            self._pending = _Pending(self._file, self._line, prev, needle)

    def _break(self, kind: BreakKind, detail: str) -> None:
        self.broken = Break(self._file, self._line, kind, detail)

    def finish(self) -> ChainResult:
        files = tuple(self.files)
        pending = self._pending
        if pending is not None and self.broken is None:
            if pending.found is not None:
                file, line = pending.found
                detail = f"its 'prev' names the record at {file}:{line}, which comes later: lines were moved"
                self.broken = Break(pending.file, pending.line, "reordered", detail)
            else:
                at_start = pending.line == 1 and len(files) > 1 and pending.file != files[0]
                detail = (
                    "its 'prev' does not match the last record of the file before: records were removed "
                    "from the end of that file or the start of this one"
                    if at_start
                    else "its 'prev' names a record that is not in the log: the line(s) before it were "
                    "deleted, or the line before was edited and its hash recomputed"
                )
                self.broken = Break(pending.file, pending.line, "deleted", detail)
        if self.broken is None and self.expected_head is not None and self.prev != self.expected_head:
            last = self.files[-1] if self.files else "audit.jsonl"
            self.broken = Break(
                last,
                self._line + 1,
                "truncated",
                f"the log ends at {self.prev}, but the head recorded elsewhere is {self.expected_head}: "
                "records were removed from the end",
            )
        if self.broken is not None:
            return ChainResult(False, self.records, files, self.prev, self.broken, self.anchor)
        return ChainResult(True, self.records, files, self.prev, None, self.anchor)


def walk(files: Iterable[tuple[str, Iterable[bytes]]], expected_head: str | None = None) -> ChainResult:
    """Walk several files (name, lines), oldest first, as one chain."""
    walker = ChainWalker(expected_head=expected_head)
    for name, lines in files:
        walker.begin_file(name)
        for line in lines:
            walker.feed(line)
    return walker.finish()


# ---- one file, the original interface ------------------------------------------------------------


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    lines: int  # lines read (a torn last line counts)
    first_bad_line: int | None  # 1-based number of the first line that breaks the chain
    problem: str | None
    head: str  # hash of the last good line, GENESIS for an empty log
    kind: BreakKind | None = None

    def describe(self) -> str:
        if self.ok:
            return f"audit chain intact: {self.lines} records, head {self.head}"
        return f"audit chain broken at line {self.first_bad_line}: {self.problem}"


def verify_lines(lines: Iterable[bytes], expected_head: str | None = None) -> VerifyResult:
    """Walk the chain of one file from its first line; name the first line that breaks it.

    Each item is one line as read from the file (a final item without its newline is a torn tail).
    `expected_head`, if given, is the hash the last line must carry (detects lines dropped at the end).
    """
    result = walk([("audit.jsonl", lines)], expected_head)
    if result.broken is None:
        return VerifyResult(True, result.records, None, None, result.head)
    b = result.broken
    return VerifyResult(False, result.records, b.line, f"{b.kind}: {b.detail}", result.head, b.kind)
