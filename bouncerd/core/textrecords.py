"""Text records: listings a server prints as Markdown, plain-text blocks or CSV, read field by field.

Theory of operation
-------------------
`read` (pure) turns one text item into the sightings `taint` records: (value, field path, identity).
It knows three shapes of record listing, each a sequence of records whose fields have names:

- **Markdown**: a heading (`### Onboarding`) or a rule opens each record, and field lines carry the
  fields (`- **from**: alice@…`, `**From:** …`, `* From: …`); the first field line sets the style,
  and a line in another style is prose.
- **Plain text**: blocks of `Name: value` lines, records apart by blank lines (a mail's header block,
  a blank line, its body, a blank line, the next header block). A single record is what a mail
  client prints for one message.
- **CSV**: a header row of field names (one of them an identity field), then rows of as many cells.

A prose line right after a field line continues that field's value; prose after a blank line is the
record's body (free text). Values of identity fields (`taint.field_is_identity`) are identity, the
rest free text, unless a check below says the record cannot be trusted.

Bound. An attacker who controls only one field's value (a body, a subject, a display name) and can
put newlines in it can add lines; the checks make every addition they can see read as free text:

- *a party field repeated* in a record (a second `From:` in a body): the record's identity values
  are read as free text;
- *records that differ* in their field names (a body that adds `- **email**: …`, or opens a fake
  record with other fields, a display name that adds a `Phone:` line, a CSV row with another number
  of cells): the listing is read as free text. Plain text whose later blocks name no party is a mail
  whose body has `Key: value` lines: its header block is read, the rest is body;
- *a party after a body-like free-text field* in a record of a listing of one, or in a mail's
  header block (`From` after `Body`): read as free text. In a mail's header block a subject or title
  may come first (`_MAY_PRECEDE_IDENTITY`);
- *a party value that is prose*: a value is identity only if each of its comma- or semicolon-
  separated parts is one token (an address, handle, number), a name with an address in angle
  brackets, or a few words with no address in them, spelled out or not (`is_party`).

Not caught (asked, as any identity value is, never allowed): a forged record complete with every
field of the listing's records, in their order; in a listing of one record or a mail's header block,
a newline in a value before its first body-like field. A CSV written without quoting can be forged
the same way, one whole row at a time. An attacker who controls the whole text can dress it as
records. YAML and JSON whose keys repeat are refused here (`UniqueKeyLoader`, `unique_pairs`): the
last value would win and the others would never be read.

Cost: a text pays a scan of its first `PROBE_CHARS` characters unless it looks like a listing. A
listing is parsed line by line, so this module is compiled with the scanner (bouncerd/native.py):
about 1.5x as fast on the mail listings of bench/taint.py.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from functools import partialmethod
from typing import Any, Final

import yaml

Sighting = tuple[str, str | None, bool]  # (text, field path, identity), as `taint._Collector.sightings` holds

MAX_RECORD_TEXT_CHARS: Final = 1024 * 1024  # a larger text is read as one free text: a parse per line costs
MAX_RECORDS: Final = 2000  # listings print pages; a text with more is not a listing of records
MAX_HEADER_LINES: Final = 64  # a header block longer than this is not a header block (as `taint`)
PROBE_CHARS: Final = 2048  # where a listing must show its first field line naming a party, or CSV header
MAX_FIELD_LINE_HEAD: Final = 56  # `- **Sender Email Address**:` and markup: a colon further in is prose
MAX_PARTY_WORDS: Final = 8  # "Dr. Anna Maria de la Cruz Lopez": a name; "please write to …": prose
MAX_NAME_WORDS: Final = 4  # as `taint.MAX_FIELD_NAME_WORDS`: a longer "name:" is a sentence, not a field

# Free-text fields that precede a sender in ordinary headers ("Subject:" before "From:"): one line by
# nature, unlike a body, so a record whose identity follows one of these is still read.
_MAY_PRECEDE_IDENTITY: Final = frozenset(["subject", "title", "summary"])

_HEADING: Final = re.compile(r"[ \t]{0,3}#{1,6}[ \t]+(.*?)[ \t#]*")
_HEADING_SEARCH: Final = re.compile(r"\n[ \t]{0,3}#{1,6}[ \t]+\S")  # in "\n" + text: skips to line starts
_RULE: Final = re.compile(r"[ \t]{0,3}(?:-[ \t]*){3,}|[ \t]{0,3}(?:\*[ \t]*){3,}|[ \t]{0,3}(?:_[ \t]*){3,}")
# A field line: `- **From**: v`, `**From:** v`, `* from: v`, `From: v` (prefix, name, colon and marks)
_PREFIX: Final = r"[ \t]{0,3}(?:[-*+][ \t]+)?(?:\*\*|__)?"
_NAME: Final = r"[A-Za-z][A-Za-z0-9 _.-]{0,40}?"
_COLON: Final = r"(?:\*\*|__)?[ \t]*:(?:\*\*|__)?"
_FIELD: Final = re.compile(f"({_PREFIX})({_NAME})({_COLON})(?:[ \t]+(.*)|[ \t]*)")
_FIELD_START: Final = re.compile(f"{_PREFIX}({_NAME}){_COLON}(?:[ \t]|$)")
_NEXT_BLOCK: Final = re.compile(f"\n[ \t]*\r?\n{_PREFIX}{_NAME}{_COLON}")  # a blank line, then a field line
_HEADER_LINE: Final = re.compile(r"([A-Za-z][A-Za-z0-9 _-]{0,40}):[ \t]*(.*)")  # a mail header: `Reply-To: …`
_KEYISH: Final = re.compile(r"[.\d]")
_CSV_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9 _.-]{0,40}")
_CSV_HEADER: Final = re.compile(
    r"[ \t]*[A-Za-z][A-Za-z0-9 _.-]{0,40}(?:,[ \t]*[A-Za-z][A-Za-z0-9 _.-]{0,40})+\r?(?:\n|$)"
)
# One party: an address in angle brackets after a name, one token, or a few words (no address, and not
# an address spelled out: `eve at evil dot com`).
_ANGLE: Final = re.compile(r"\"?[^\"<>@\n]{0,80}\"?[ \t]*<[^<>\s]{1,254}>")
_TOKEN: Final = re.compile(r"[^\s<>\"]{1,254}")
_WORDS: Final = re.compile(rf"[\w.'’()+-]+(?:[ \t]+[\w.'’()+-]+){{0,{MAX_PARTY_WORDS - 1}}}")
_SPELLED: Final = re.compile(r"(?i)(?:^|[\s(\[])(?:at|dot)(?:$|[\s)\]])")
_PARTS: Final = re.compile(r"[,;]")


def is_party(value: str) -> bool:
    """A value that names parties and says nothing else: `Alice Hart <alice@…>`, `alice@…, bob@…`,
    `@alice`, `+1 555 0100`, `Alice Hart`. Prose with an address in it is not."""
    if "\n" in value or not value.strip():
        return False
    for part in _PARTS.split(value) if "," in value or ";" in value else (value,):
        part = part.strip()
        if not part:
            continue
        if ("<" in part and _ANGLE.fullmatch(part)) or _TOKEN.fullmatch(part):  # (`_ANGLE` needs a "<")
            continue
        if _WORDS.fullmatch(part) and not _SPELLED.search(part):
            continue
        return False
    return True


def _names_a_party(text: str, is_identity: Callable[[str], bool | None]) -> bool:
    """Whether a line of the first `PROBE_CHARS` characters is a field line naming a party, as the
    first record of any listing shows. Only the lines with a colon near their start are matched."""
    end = min(len(text), PROBE_CHARS)
    i = text.find(":", 0, end)
    while i >= 0:
        start = text.rfind("\n", 0, i) + 1
        if i - start <= MAX_FIELD_LINE_HEAD:
            m = _FIELD_START.match(text, start)
            if m is not None and is_identity(m.group(1)):
                return True
        i = text.find(":", i + 1, end)
    return False


def _csv_header(text: str) -> bool:
    """Whether the first line is a CSV header row: names, comma-separated (one regex, no copy)."""
    start = len(text) - len(text[:PROBE_CHARS].lstrip("\r\n")) if text[:1] in "\r\n" else 0
    return _CSV_HEADER.match(text, start) is not None


_YamlBase: Final[type[yaml.SafeLoader]] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _construct_unique_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    mapping: dict[Any, Any] = _YamlBase.construct_mapping(loader, node, deep=deep)
    if len(mapping) != len(node.value):
        raise yaml.constructor.ConstructorError(None, None, "a mapping key repeats", node.start_mark)
    return mapping


# YAML as the safe loader reads it, but a mapping that would lose a value is refused: a key that
# repeats (`body: plant` then `body: hi`, the last one wins) or a merged key (`<<`) that an explicit
# one overrides. The text is then read as text, every value of it seen. Built with `type` and its
# method bound by `partialmethod`: this module is compiled (bouncerd/native.py), and a compiled class
# cannot derive from libyaml's C loader; a compiled function does not bind as a method by itself.
UniqueKeyLoader: Final[type[yaml.SafeLoader]] = type(
    "UniqueKeyLoader",
    (_YamlBase,),
    {"__module__": __name__, "construct_mapping": partialmethod(_construct_unique_mapping)},
)


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`' object hook: a JSON object whose key repeats would lose a value; refused."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a JSON object key repeats")
    return out


def is_header_mapping(value: Any) -> bool:
    """A mapping of a few scalars only: what a header block reads as YAML (`From: …` / `Body: …`)."""
    return (
        type(value) is dict
        and 2 <= len(value) <= MAX_HEADER_LINES
        and all(type(k) is str and not isinstance(v, dict | list) for k, v in value.items())
    )


def _may_be_key(name: str) -> bool:
    """A field name is text too (`- **evil.example**: x`): one with a dot or a digit can be a host, an
    address or an account number; the others (`From`, `Reply-To`) cannot be a destination."""
    return _KEYISH.search(name) is not None


class _Record:
    __slots__ = ("fields", "prose")

    def __init__(self) -> None:
        self.fields: list[list[str]] = []  # [name, value]
        self.prose: list[str] = []  # the heading, body paragraphs: free text

    def schema(self) -> tuple[str, ...]:
        return tuple(f[0].lower() for f in self.fields)


def read(text: str, is_identity: Callable[[str], bool | None]) -> list[Sighting] | None:
    """The sightings of a text that is a listing of records (`is_identity` classifies field names),
    or None: then the text is one free text. Every value of the text is in the sightings."""
    if len(text) > MAX_RECORD_TEXT_CHARS:
        return None
    if _csv_header(text):
        got = _read_csv(text, is_identity)
        if got is not None:
            return got
    if ":" not in text[:PROBE_CHARS] or not _names_a_party(text, is_identity):
        return None
    return _read_lines(text, is_identity)


def _read_lines(text: str, is_identity: Callable[[str], bool | None]) -> list[Sighting] | None:
    headed = "#" in text and _HEADING_SEARCH.search("\n" + text) is not None
    if not headed and not _NEXT_BLOCK.search(text):
        return _single_block(text, is_identity, subject_first=True)
    lines = text.split("\n")
    preamble, records = _split(lines, headed)
    if len(records) > MAX_RECORDS or not any(is_identity(f[0]) for r in records for f in r.fields):
        return None
    regular = len({r.schema() for r in records}) == 1 and (headed or len(records[0].fields) >= 2)
    if not regular:
        if headed or any(is_identity(f[0]) for r in records[1:] for f in r.fields):
            return None  # a listing with a record that differs (an addition): free text
        # a mail whose body has `Key: value` lines that name nobody: its header block
        return _single_block(text, is_identity, subject_first=True)
    out: list[Sighting] = [(p, None, False) for p in preamble]
    one = len(records) == 1
    for i, record in enumerate(records):
        path = f"records[{i}]"
        out.extend(_record_sightings(record, path, is_identity, strict_order=one))
    return out


def _split(lines: list[str], headed: bool) -> tuple[list[str], list[_Record]]:
    """The text before the first record, and the records: each opened by a heading or rule (Markdown)
    or by a field line after a blank line once the current record has fields (plain text)."""
    preamble: list[str] = []
    records: list[_Record] = []
    current: _Record | None = None
    style: tuple[str, str] | None = None
    after_blank = True
    last_was_field = False
    for raw in lines:
        line = raw.rstrip("\r")
        if not line.strip():
            after_blank = True
            last_was_field = False
            continue
        heading = _HEADING.fullmatch(line) if headed else None
        if heading is not None or (headed and _RULE.fullmatch(line)):
            current = _Record()
            records.append(current)
            if heading is not None and heading.group(1):
                current.prose.append(heading.group(1))
            after_blank = last_was_field = False
            continue
        # Prose: no regex. The colon a field line's name ends at is its first, and no "@" comes before it.
        colon = line.find(":", 0, MAX_FIELD_LINE_HEAD)
        m = _FIELD.fullmatch(line) if colon >= 0 and line.find("@", 0, colon) < 0 else None
        if m is not None and len(m.group(2).split()) > MAX_NAME_WORDS:
            m = None
        if m is not None and style is not None and (m.group(1), m.group(3)) != style:
            m = None  # another style than the listing's fields: prose
        if m is not None and style is None and (current is not None or not headed):
            style = (m.group(1), m.group(3))  # the first field line of a record, not a preamble's
        if m is not None:
            if current is None or (not headed and after_blank and current.fields):
                current = _Record()
                records.append(current)
            current.fields.append([m.group(2).strip(), m.group(4) or ""])
            last_was_field = True
        elif current is not None and last_was_field and current.fields:
            current.fields[-1][1] += "\n" + line.strip()  # continues the value
        elif current is not None:
            current.prose.append(line)
            last_was_field = False
        else:
            preamble.append(line)
        after_blank = False
    return preamble, records


def _single_block(
    text: str, is_identity: Callable[[str], bool | None], *, subject_first: bool
) -> list[Sighting] | None:
    """A text that opens with one header block (`From: …` / `To: …`, at least two lines, one naming a
    party) and goes on with free text: the mail a client prints. `subject_first`: a subject may come
    before the sender, as in mail headers; not when the text goes on with more field blocks that did
    not read as a listing (one of them may be a newline in that subject)."""
    lines = text.split("\n", MAX_HEADER_LINES + 1)
    headers: list[list[str]] = []
    i = 0
    for i, raw in enumerate(lines[: MAX_HEADER_LINES + 1]):  # noqa: B007 - `i` is where the body starts
        line = raw.rstrip("\r")
        if headers and line[:1] in (" ", "\t") and line.strip():
            headers[-1][1] += " " + line.strip()
            continue
        m = _HEADER_LINE.fullmatch(line)
        if m is None:
            break
        headers.append([m.group(1), m.group(2)])
    else:
        i = min(len(lines), MAX_HEADER_LINES + 1)
    if len(headers) < 2 or not any(is_identity(name) for name, _ in headers):
        return None
    record = _Record()
    record.fields = headers
    fields = _classify(record, is_identity, strict_order=True, subject_first=subject_first)
    out: list[Sighting] = [(value, name.lower(), trusted) for name, value, trusted in fields]
    out.extend((name, None, False) for name, _ in headers if _may_be_key(name))
    out.append(("\n".join(lines[i:]), None, False))  # the body
    return out


def _classify(
    record: _Record, is_identity: Callable[[str], bool | None], *, strict_order: bool, subject_first: bool
) -> list[tuple[str, str, bool]]:
    """Each field of a record as (name, value, read as identity)."""
    names = [f[0].lower() for f in record.fields]
    kinds = [is_identity(f[0]) for f in record.fields]
    repeated = any(k and names.count(n) > 1 for n, k in zip(names, kinds, strict=True))
    out: list[tuple[str, str, bool]] = []
    after_body = False
    for (name, value), kind, low in zip(record.fields, kinds, names, strict=True):
        trusted = bool(kind) and not repeated and not after_body and is_party(value)
        if strict_order and kind is False and not (subject_first and low in _MAY_PRECEDE_IDENTITY):
            after_body = True
        out.append((name, value, trusted))
    return out


def _record_sightings(
    record: _Record, path: str, is_identity: Callable[[str], bool | None], *, strict_order: bool
) -> list[Sighting]:
    out: list[Sighting] = [("\n".join(record.prose), path, False)] if record.prose else []
    fields = _classify(record, is_identity, strict_order=strict_order, subject_first=False)
    out.extend((value, f"{path}.{name.lower()}", trusted) for name, value, trusted in fields)
    out.extend((name, path, False) for name, _ in record.fields if _may_be_key(name))
    return out


def _read_csv(text: str, is_identity: Callable[[str], bool | None]) -> list[Sighting] | None:
    """A header row of field names, one naming a party, then rows of exactly as many cells."""
    start = len(text) - len(text.lstrip("\r\n"))
    first = text[start:].split("\n", 1)[0].rstrip("\r")
    if "," not in first or '"' in first:
        return None
    names = [c.strip() for c in first.split(",")]
    if len(names) < 2 or not all(_CSV_NAME.fullmatch(n) and len(n.split()) <= MAX_NAME_WORDS for n in names):
        return None
    kinds = [is_identity(n) for n in names]
    if not any(kinds):
        return None
    lowered = [n.lower() for n in names]
    if len(set(lowered)) != len(lowered):
        return None
    try:
        rows = list(csv.reader(text[start:].splitlines(keepends=True), strict=True))
    except csv.Error:
        return None
    rows = [r for r in rows[1:] if r]
    if not rows or len(rows) > MAX_RECORDS or any(len(r) != len(names) for r in rows):
        return None
    out: list[Sighting] = [(name, None, False) for name in names if _may_be_key(name)]
    for i, row in enumerate(rows):
        for name, kind, value in zip(lowered, kinds, row, strict=True):
            out.append((value, f"records[{i}].{name}", bool(kind) and is_party(value)))
    return out
