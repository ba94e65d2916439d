"""The edges of an output and the cut between two consecutive outputs of one server (`taint.Seams`).

Theory of operation
-------------------
An address cut between two outputs of one server (`eve@evil.exa` | `mple`) is read from the text the
two outputs show joined at the cut: `SEAM_CHARS` from the end of the first and as many from the start
of the second (`output_edges`, read from a parsed message or from its raw line without parsing it).

A server that repeats its output (a poll, the same listing read again) shows the same cut again, and
reading the joined text is most of what a small output costs. `CutReadings` keeps what the last
`MAX_CUT_READINGS` distinct cuts read (each key, and the orders marker it was seen under), so a cut
seen again is answered from it with the new output's provenance; the records are the same ones the
cut gives when read afresh (tests/unit/test_taint_perf_equivalence.py holds it so). The cache holds
at most `MAX_CUT_READINGS` cuts of at most 2 x `SEAM_CHARS` characters and their keys.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from bouncerd.core.model import Provenance
from bouncerd.core.taint_index import TokenRecord

# An address cut between two text blocks, or between two consecutive outputs of one server, is read
# from this many characters on each side of the cut (an e-mail address has at most 254).
SEAM_CHARS: Final = 256
# Distinct cuts whose reading is kept per `Seams` (least recently stored out): a repeated output's cut
# is one entry; each is at most 2 x SEAM_CHARS characters and its keys, so a few hundred KB in all.
MAX_CUT_READINGS: Final = 128

# What one cut read: each key once, in the order read, with the orders marker it was seen under.
CutReading = tuple[tuple[str, str | None], ...]


class CutReadings:
    """The readings of the last `max_entries` distinct cuts, keyed by both sides of the cut (the same
    joined text cut elsewhere reads to other records: a key whole on either side is left out)."""

    __slots__ = ("_entries", "max_entries")

    def __init__(self, max_entries: int = MAX_CUT_READINGS) -> None:
        self.max_entries = max_entries
        self._entries: dict[tuple[str, str], CutReading] = {}

    def get(self, previous: str, head: str) -> CutReading | None:
        return self._entries.get((previous, head))

    def put(self, previous: str, head: str, records: list[TokenRecord]) -> None:
        if self.max_entries <= 0:
            return
        if len(self._entries) >= self.max_entries:
            del self._entries[next(iter(self._entries))]
        self._entries[(previous, head)] = tuple([(r.token, r.provenance.orders) for r in records])


# A provenance is made for each field of each output, thousands a MB: the dataclass's generated
# `__init__` (an `object.__setattr__` a field: it is frozen) was ~8% of indexing. `provenance`
# fills the same attributes in the same order from a template that `__init__` made (every other field
# at its default), so the object is the one `Provenance(...)` gives: equal, same hash, same repr
# (tests/unit/test_taint_perf_equivalence.py compares them). A Provenance with slots or a
# `__post_init__` is made by its constructor.
_TEMPLATE: Final = Provenance("", None, None, 0.0)
_PLAIN: Final = not hasattr(Provenance, "__slots__") and not hasattr(Provenance, "__post_init__")


def provenance(
    server: str,
    tool: str | None,
    request_id: Any,
    ts: float,
    field: str | None,
    identity: bool,
    orders: str | None,
) -> Provenance:
    """`Provenance(server, tool, request_id, ts, field, identity, orders=orders)`, built faster."""
    if not _PLAIN:
        return Provenance(server, tool, request_id, ts, field, identity, None, orders)
    made: Provenance = object.__new__(Provenance)
    attrs = made.__dict__
    attrs.update(_TEMPLATE.__dict__)
    attrs["server"] = server
    attrs["tool"] = tool
    attrs["request_id"] = request_id
    attrs["ts"] = ts
    attrs["field"] = field
    attrs["identity"] = identity
    attrs["orders"] = orders
    return made


def cut_records(
    reading: CutReading, server: str, tool: str | None, request_id: Any, ts: float
) -> list[TokenRecord]:
    """The records of a kept cut reading, with the provenance a fresh read of it would give: free text
    of no field, with the orders marker where the key was seen under one."""
    base = provenance(server, tool, request_id, ts, None, False, None)
    marked: dict[str, Provenance] = {}
    out: list[TokenRecord] = []
    for key, marker in reading:
        prov = base
        if marker is not None:
            got = marked.get(marker)
            if got is None:
                got = marked[marker] = provenance(server, tool, request_id, ts, None, False, marker)
            prov = got
        out.append(TokenRecord(key, prov))
    return out


def text_items(content: list[Any]) -> list[str]:
    """The text of each text item of a result's content, in order."""
    return [
        item["text"]
        for item in content
        if type(item) is dict and item.get("type") == "text" and type(item.get("text")) is str
    ]


def output_edges(payload: Any) -> tuple[str, str]:
    """The first and last `SEAM_CHARS` characters of the text an output shows (its text blocks joined),
    from a parsed message or its raw line. A raw line is not parsed: the first text string is read from
    a window of `SEAM_WINDOW_BYTES` at its start, and the last one from the last such window of the line
    (decoded whole only when it began before that window: C speed, about 2 ms a MB)."""
    if isinstance(payload, bytes | str):
        raw = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else payload
        m = _RAW_TEXT_VALUE.search(raw)
        if m is None:
            return "", ""
        head = _string_head(raw, m.end())
        start = max(m.start(), len(raw) - SEAM_WINDOW_BYTES)
        tail = _last_text(raw[start:].decode("utf-8", "replace"))
        if not tail and start > m.start():  # the last text string began before the window
            tail = _last_text(raw[m.start() :].decode("utf-8", "replace"))
        return head[:SEAM_CHARS], tail[-SEAM_CHARS:]
    result = payload.get("result", payload) if isinstance(payload, dict) else None
    content = result.get("content") if isinstance(result, dict) else None
    texts = text_items(content) if type(content) is list else []
    if not texts:
        return "", ""
    return texts[0][:SEAM_CHARS], texts[-1][-SEAM_CHARS:]


_TEXT_VALUE: Final = re.compile(r'"text"\s*:\s*(?=")')
_RAW_TEXT_VALUE: Final = re.compile(rb'"text"\s*:\s*(?=")')
_DECODER: Final = json.JSONDecoder()
SEAM_WINDOW_BYTES: Final = 64 * 1024  # a text string's first 256 characters take at most 256 x 12 bytes
MAX_RAW_TEXT_PROBES: Final = 8
MAX_ESCAPE_CHARS: Final = 12  # the longest JSON escape a window can cut: a surrogate pair, \ud83d\ude00


def _last_text(text: str) -> str:
    """The value of the last `"text"` member that starts in `text`, or ""."""
    i = len(text)
    for _ in range(MAX_RAW_TEXT_PROBES):  # `"type": "text"` names the kind, not the text
        i = text.rfind('"text"', 0, i)
        if i < 0:
            return ""
        m = _TEXT_VALUE.match(text, i)
        if m is not None:
            return _raw_text_at(text, m.end())
    return ""


def _string_head(raw: bytes, i: int) -> str:
    """The JSON string that starts at `raw[i]`, or its beginning if it is longer than the window."""
    text = raw[i : i + SEAM_WINDOW_BYTES].decode("utf-8", "replace")
    value = _raw_text_at(text, 0)
    if value or text[:2] == '""':
        return value
    for cut in range(MAX_ESCAPE_CHARS + 1):  # a window cut inside an escape: close the string earlier
        try:
            got = json.loads(text[: len(text) - cut] + '"')
        except ValueError:
            continue
        return got if isinstance(got, str) else ""
    return ""


def _raw_text_at(raw: str, i: int) -> str:
    """The JSON string that starts at `i` of a raw line, or "" if there is none."""
    try:
        value, _ = _DECODER.raw_decode(raw, i)
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""
