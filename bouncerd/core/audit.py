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

The writer (file I/O, timestamps, repair of a torn tail) is `bouncerd/server/audit.py`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GENESIS = "0" * 64

HASH_FIELD = "hash"
PREV_FIELD = "prev"


def jsonable(value: Any) -> Any:
    """`value` with every part JSON can carry as it is, bytes as text, and every map key a string.

    Bytes that are UTF-8 become that text; others become ``"base64:" + base64``. The daemon receives
    arguments as msgpack, which can carry bytes and non-string keys that JSON cannot.
    """
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
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def record_hash(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(record)).hexdigest()


def chain(record: Mapping[str, Any], prev: str) -> dict[str, Any]:
    """A JSON-safe copy of `record` with ``prev`` set to `prev` and ``hash`` computed."""
    out: dict[str, Any] = jsonable({k: v for k, v in record.items() if k not in (HASH_FIELD, PREV_FIELD)})
    out[PREV_FIELD] = prev
    out[HASH_FIELD] = record_hash(out)
    return out


def encode_line(record: Mapping[str, Any]) -> bytes:
    """One audit line (with its newline) for a record that `chain` produced. Keys keep their order."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


@dataclass(frozen=True)
class ParsedLine:
    record: dict[str, Any] | None  # None when the line is not a JSON object
    problem: str | None  # why the line is not a valid audit record, None when it is


def parse_line(line: bytes) -> ParsedLine:
    """Parse one line (its newline may be present) and check its own hash; not its place in the chain."""
    text = line[:-1] if line.endswith(b"\n") else line
    try:
        obj = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ParsedLine(None, "not a JSON object (torn or edited)")
    if not isinstance(obj, dict):
        return ParsedLine(None, "not a JSON object")
    stored = obj.get(HASH_FIELD)
    if not isinstance(stored, str) or not isinstance(obj.get(PREV_FIELD), str):
        return ParsedLine(obj, "missing 'prev' or 'hash'")
    if record_hash(obj) != stored:
        return ParsedLine(obj, "hash does not match the line's content (edited)")
    return ParsedLine(obj, None)


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    lines: int  # lines read (a torn last line counts)
    first_bad_line: int | None  # 1-based number of the first line that breaks the chain
    problem: str | None
    head: str  # hash of the last good line, GENESIS for an empty log

    def describe(self) -> str:
        if self.ok:
            return f"audit chain intact: {self.lines} records, head {self.head}"
        return f"audit chain broken at line {self.first_bad_line}: {self.problem}"


def verify_lines(lines: Iterable[bytes], expected_head: str | None = None) -> VerifyResult:
    """Walk the chain from the first line. Stops at the first line that breaks it.

    Each item is one line as read from the file (a final item without its newline is a torn tail).
    `expected_head`, if given, is the hash the last line must carry (detects lines dropped at the end).
    """
    prev = GENESIS
    count = 0
    for count, line in enumerate(lines, start=1):
        if not line.endswith(b"\n"):
            return VerifyResult(False, count, count, "last line has no newline (torn write)", prev)
        parsed = parse_line(line)
        if parsed.problem is not None:
            return VerifyResult(False, count, count, parsed.problem, prev)
        assert parsed.record is not None
        if parsed.record[PREV_FIELD] != prev:
            return VerifyResult(
                False,
                count,
                count,
                "'prev' does not match the line before (a line was deleted, inserted or moved)",
                prev,
            )
        prev = parsed.record[HASH_FIELD]
    if expected_head is not None and prev != expected_head:
        return VerifyResult(
            False, count, count + 1, f"the log ends at {prev}, expected {expected_head} (truncated)", prev
        )
    return VerifyResult(True, count, None, None, prev)
