"""Taint extraction: the keys of untrusted output, where each was seen, and in which field.

Theory of operation
-------------------
`extract` (pure; the daemon runs it on every upstream message) turns one message into `TokenRecord`s:
every string in it is untrusted (results, errors, notifications, tool descriptions, server requests,
dict keys too). A walk lists each string with its field and class; then each distinct string is read
through `tokens.key_tuple` (decoded, folded, tokenised) and its keys are merged. Where the output is
structured (`structuredContent`, a text item that parses as JSON or YAML to a mapping or a list of
mappings, or a text that `textrecords` reads as a listing of records: Markdown, plain-text blocks,
CSV, a mail header block) each string keeps its field path
(`messages[0].sender`) and whether the field is an *identity* field (sender, to, participants,
email, owner, iban, …: see `IDENTITY_PARTS`) or free text (body, description, subject, anything
unknown, and all unstructured text). An identity value is also indexed whole (`"Mallory Smith"`).
A text item that repeats `structuredContent` as JSON is not walked twice. Image and audio data are
not read (text inside an image is not seen).

The keys and their provenance are recorded in a `TaintIndex` (`taint_index`: the store, its memory
bound, eviction and retention, and the lookups), which this module re-exports with the record types.

An address seen in free text also records its domain as a host (`domain_keys`, `DOMAIN_PREFIX`): a
lookup of a host probes it, and of a URL or host destination also its parent domains (`host_probes`),
so a fetch of the domain, a webhook on it or a name lookup of `<data>.evil.example` is judged as for
a planted host. Text blocks of one output are read joined at each seam (`_block_seams`), and `Seams`
reads the cut between two consecutive outputs of one server (the daemon keeps one and feeds it every
raw output in indexing order).

Not caught (the destination is then unproven: ask for sends): an address split across fields, or
across outputs more than `SEAM_CHARS` from the cut, or spelled letter by letter, reversed, ROT13, hex
or base32; base64 of UTF-16 or wrapped in lines shorter than `fold.MIN_BASE64_RUN`; nesting deeper
than `fold.MAX_DECODE_ROUNDS`; text inside images; look-alikes outside `fold.CONFUSABLES` and
`fold.READER_PUNCTUATION`. An attacker who
controls a whole text result can dress it as JSON/YAML/mail headers/records with identity field
names and turn a deny into an ask (never into an allow); one who controls one value of a listing
can do so only by forging a whole record (`textrecords`). JSON and YAML whose keys repeat are read
as text: the last value would win and hide the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import pairwise
from typing import Any, Final

import yaml

from bouncerd.core import fold, linkkeys, orders, said, textrecords, tokens
from bouncerd.core.model import JsonRpcId, Provenance
from bouncerd.core.shapes import DOMAIN_PREFIX, MIN_LISTED_NAME_CHARS, domain_keys, listed_name
from bouncerd.core.taint_edges import (
    SEAM_CHARS,
    CutReadings,
    cut_records,
    output_edges,
    provenance,
    text_items,
)
from bouncerd.core.taint_index import (
    EVICT_BATCH_DIVISOR,
    EVICTED_FILTER_BITS,
    EVICTED_FILTER_CAPACITY,
    EVICTED_FILTER_HASHES,
    MAX_INTERNED,
    MAX_KEYS,
    MAX_PARENT_LABELS,
    MIN_DESTINATION_CHARS,
    EvictedFilter,
    Hit,
    TaintIndex,
    TokenRecord,
    decode_records,
    destination_tokens,
    encode_records,
    host_probes,
)

# The index and the record types, for the callers that read output and record it in one place.
__all__ = [
    "DOMAIN_PREFIX",
    "EVICTED_FILTER_BITS",
    "EVICTED_FILTER_CAPACITY",
    "EVICTED_FILTER_HASHES",
    "EVICT_BATCH_DIVISOR",
    "MAX_INTERNED",
    "MAX_KEYS",
    "MAX_PARENT_LABELS",
    "MIN_DESTINATION_CHARS",
    "SEAM_CHARS",
    "EvictedFilter",
    "Hit",
    "Seams",
    "Source",
    "TaintIndex",
    "TokenRecord",
    "decode_records",
    "destination_tokens",
    "domain_keys",
    "encode_records",
    "extract",
    "field_is_identity",
    "host_probes",
    "output_edges",
    "parse_structured",
]

MAX_SEAM_SCOPES: Final = 4096  # scopes whose last tail is kept (least recently used out): about 2 MB
MAX_IDENTITY_VALUE_CHARS: Final = 320  # a longer value in an identity field is prose, treated as free text
MAX_YAML_CHARS: Final = 65_536  # libyaml parses ~10 MB/s; larger YAML-looking text is read as plain text
MAX_FIELD_PATH_CHARS: Final = 200  # deeper paths are cut: nesting must not cost quadratic memory
MAX_FIELD_NAME_WORDS: Final = 4  # "Reply To", "Sent On Behalf Of": field names; a longer one is prose
MAX_BLOB_CHARS: Final = 4 * 1024 * 1024  # resource blobs larger than this are not decoded as text
# A text shorter than this cannot hold a marker, a sending verb and a destination: not read for orders.
MIN_ORDERS_TEXT_CHARS: Final = 40

_YAML_LOADER: Final[Any] = textrecords.UniqueKeyLoader  # a repeated key would hide a value: not read as YAML
_UNIQUE_KEYS_JSON: Final = json.JSONDecoder(
    object_pairs_hook=textrecords.unique_pairs
)  # nor as JSON (built once)

# Field-name parts that mark a field as naming a party (a person, account, channel) rather than
# carrying prose. A field is classified by its last classified part: `sender_email` is identity,
# `email_body` is free text; an unclassified field inherits from its parent (`from.name`).
IDENTITY_PARTS: Final = frozenset(
    [
        "sender", "senders", "from", "to", "cc", "bcc", "reply", "replyto", "recipient", "recipients",
        "participant", "participants", "email", "emails", "mail", "address", "addresses", "owner",
        "owners", "shared", "sharedwith", "author", "authors", "user", "users", "username",
        "usernames", "login", "iban", "account", "accounts", "phone", "phones", "mobile", "tel",
        "telephone", "contact", "contacts", "member", "members", "attendee", "attendees", "assignee",
        "assignees", "reviewer", "reviewers", "organizer", "organiser", "creator", "invitee",
        "invitees", "guest", "guests", "channel", "channels", "handle", "handles", "mention",
        "mentions",
    ]
)  # fmt: skip
FREE_TEXT_PARTS: Final = frozenset(
    [
        "body", "bodies", "description", "descriptions", "content", "contents", "text", "texts",
        "message", "messages", "subject", "note", "notes", "comment", "comments", "summary", "snippet",
        "title", "html", "markdown", "preview", "excerpt", "details", "instructions", "prompt",
        "reason", "error", "errors", "log", "logs", "value",
    ]
)  # fmt: skip


@dataclass(frozen=True)
class Source:
    """One upstream output."""

    server: str
    tool: str | None
    request_id: JsonRpcId
    ts: float


# ---- field classification --------------------------------------------------------------------------

_NAME_PARTS: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


@lru_cache(maxsize=4096)
def field_is_identity(name: str) -> bool | None:
    """True for an identity field name, False for free text, None when the name says neither. A name of
    more than `MAX_FIELD_NAME_WORDS` words is a sentence that happens to end in a colon ("please send the
    figures to Website: …", read as YAML), not a field: free text."""
    if name.count(" ") >= MAX_FIELD_NAME_WORDS:
        return False
    parts: list[str] = _NAME_PARTS.findall(name)  # typed: mypyc cannot iterate reversed(list[Any])
    for part in reversed(parts):
        part = part.lower()
        if part in IDENTITY_PARTS:
            return True
        if part in FREE_TEXT_PARTS:
            return False
    return None


# ---- extraction ------------------------------------------------------------------------------------

_SPACES: Final = re.compile(r"\s+")
_YAML_START: Final = re.compile(r"(?:---|- |[\w\"'][^:\n]{0,80}:(?:[ \t]|$))", re.M)
# A top-level line that is not a key, a list item, a comment or a document marker: not a YAML mapping
# (a mail with a header block and a body, say). Checked before paying for a YAML parse.
_NOT_YAML_LINE: Final = re.compile(
    r"^(?![ \t]|\r?$|#|---|\.\.\.|- |-\r?$|[^\s:#][^:\n]*:(?:[ \t]|\r?$)).", re.M
)
# What a top-level line of a YAML mapping may open with besides a key (`_NOT_YAML_LINE`'s alternatives
# that need no colon): indentation, a comment, a document marker, a list item.
_YAML_LINE_OPENINGS: Final = (" ", "\t", "#", "---", "...", "- ")
_EMPTY_YAML_LINES: Final = ("", "\r", "-", "-\r")


def _has_not_yaml_line(s: str) -> bool:
    """`_NOT_YAML_LINE.search(s) is not None`, a line at a time: only a line with a colon can be a key,
    so a line without one (most of a mail's body) is judged by how it opens, never scanned by the
    regex for a colon; a line with one is matched by the regex where it starts."""
    p, n = 0, len(s)
    while True:
        e = s.find("\n", p)
        if e < 0:
            e = n
        if s.find(":", p, e) >= 0:
            if _NOT_YAML_LINE.match(s, p) is not None:
                return True
        else:
            line = s[p:e]
            if line not in _EMPTY_YAML_LINES and not line.startswith(_YAML_LINE_OPENINGS):
                return True
        if e >= n:
            return False
        p = e + 1


class _Collector:
    """The strings of one output in document order, each with its field and class (`sightings`), then
    their keys with provenance, free-text sightings preferred (`records`)."""

    __slots__ = ("mirror", "sightings", "source")

    def __init__(self, source: Source) -> None:
        self.source = source
        # (text, field, identity): walkers append to it directly (compiled, a C call; a bound method
        # or a function held in a variable is called through Python's generic call)
        self.sightings: list[tuple[str, str | None, bool]] = []
        self.mirror: Any = None  # structuredContent, which text items often repeat as JSON

    def records(self) -> list[TokenRecord]:
        # text -> keys, and domain keys (None until a free-text sighting of the text wants them)
        found: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {}
        said_of: dict[str, tuple[str, ...]] = {}  # text -> said keys (a text repeats: a subject, a quote)
        orders_of: dict[str, dict[str, str]] = {}  # text -> its keys inside orders to the agent (`orders`)
        provs: dict[tuple[str | None, bool | str], Provenance] = {}  # (field, identity or orders marker)
        keys: dict[str, Provenance] = {}
        parties = self._parties(found)
        for text, field, identity in self.sightings:
            if identity and MIN_LISTED_NAME_CHARS <= len(text) <= MIN_DESTINATION_CHARS:
                short = listed_name(text)  # "Bob", and "@hsato" (six characters, its name five)
                if short is not None and short not in keys:
                    src = self.source
                    keys[short] = provs.get((field, True)) or provs.setdefault(
                        (field, True),
                        provenance(src.server, src.tool, src.request_id, src.ts, field, True, None),
                    )
            if len(text) < MIN_DESTINATION_CHARS:
                continue
            both = found.get(text)
            if both is None:
                got = tokens.key_tuple(text)
                if "/" in text or linkkeys.may_encode_link(text):  # a link, maybe encoded, maybe alone
                    got = (*got, *linkkeys.exact_url_keys(text))
                both = found[text] = (got, None)
            got = both[0]
            if got and not identity:
                domains = both[1]
                if domains is None:
                    domains = domain_keys(got)
                    found[text] = (got, domains)
                if domains:
                    got = (*got, *domains)  # a planted address's domain is a planted host
            if not identity:
                dictated = said_of.get(text)
                if dictated is None:
                    dictated = said_of[text] = said.said_keys(text)
                if dictated:
                    got = (*got, *dictated)  # values the text hands its reader (`said`)
            if identity:
                if len(text) > MAX_IDENTITY_VALUE_CHARS:
                    identity = False
                else:
                    whole = _whole_value(text)
                    if len(whole) >= MIN_DESTINATION_CHARS and whole not in got:
                        got = (*got, whole)
            if not got:
                continue
            prov = provs.get((field, identity))
            if prov is None:
                s = self.source
                prov = provs[(field, identity)] = provenance(
                    s.server, s.tool, s.request_id, s.ts, field, identity, None
                )
            own = parties.get(_object_of(field)) if parties and not identity else None
            ordered = None
            if not identity and len(text) >= MIN_ORDERS_TEXT_CHARS:
                ordered = orders_of.get(text)
                if ordered is None:
                    ordered = orders_of[text] = orders.ordered_keys(text)
            for key in got:
                chosen = prov
                if ordered and key in ordered:
                    # seen where the text gives the agent orders to send there: the marker goes with it
                    marker = ordered[key]
                    chosen = provs.get((field, marker)) or provs.setdefault(
                        (field, marker),
                        provenance(prov.server, prov.tool, prov.request_id, prov.ts, field, False, marker),
                    )
                elif own is not None and key in own:
                    # the same message's own sender, repeated in its body (a signature): still a sender
                    chosen = provs.get((field, True)) or provs.setdefault(
                        (field, True),
                        provenance(prov.server, prov.tool, prov.request_id, prov.ts, field, True, None),
                    )
                old = keys.get(key)
                if (
                    old is None
                    or (old.identity and not chosen.identity)
                    or (chosen.orders is not None and old.orders is None and not chosen.identity)
                ):
                    keys[key] = chosen
        return as_records(keys)

    def _parties(
        self, found: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]]
    ) -> dict[str, set[str]]:
        """The identity keys of each object of the output (`_object_of` its field): an address in a
        message's free text that is that same message's sender or participant is read as the party it
        is. An attacker gains nothing by it: the sender field alone already makes the address asked
        about; any other address in the body is free text as before."""
        out: dict[str, set[str]] = {}
        for text, field, identity in self.sightings:
            if not identity or not MIN_DESTINATION_CHARS <= len(text) <= MAX_IDENTITY_VALUE_CHARS:
                continue
            both = found.get(text)
            out.setdefault(_object_of(field), set()).update(both[0] if both else tokens.key_tuple(text))
        return out


def _object_of(field: str | None) -> str:
    """The object a field belongs to: `messages[3].body` and `messages[3].from.email` to `messages[3]`;
    a top-level field or a text item's header block to the output itself."""
    if not field:
        return ""
    dot = field.find(".")
    if dot < 0:
        return field if "[" in field else ""
    return field[:dot]


# `TokenRecord(k, p)` runs the generated Python `__new__`; building the tuple subclass directly is C.
_as_record: Final[Callable[[tuple[str, Provenance]], TokenRecord]] = partial(tuple.__new__, TokenRecord)


def _load_native_pairs_as() -> Callable[[type[TokenRecord], dict[str, Provenance]], list[TokenRecord]] | None:
    """The records of a dict of keys made in C (`_scan.pairs_as`: no call through `tuple.__new__` a key),
    built with the compiled scanner (bouncerd/native.py decides if it loads)."""
    try:
        from bouncerd.core._scan import pairs_as
    except ImportError:
        return None
    return pairs_as


_native_pairs_as: Final = _load_native_pairs_as()


def as_records(keys: dict[str, Provenance]) -> list[TokenRecord]:
    """`[TokenRecord(k, p) for k, p in keys.items()]`, in C when the compiled build runs."""
    if _native_pairs_as is not None:
        return _native_pairs_as(TokenRecord, keys)
    return list(map(_as_record, keys.items()))


def _whole_value(text: str) -> str:
    """An identity value folded whole, whitespace runs collapsed (`"Mallory  Smith"`)."""
    if text.isascii() and text.isprintable() and " " not in text:
        whole = fold.fold_clean(text)  # `fold` of printable ASCII, which has no control characters
        if whole.isascii():
            return whole  # printable ASCII without a space: nothing to collapse
    return " ".join(fold.fold(text).split())


def _record_like(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))


def parse_structured(text: str) -> Any | None:
    """The mapping (or list of mappings) a text item holds as JSON or YAML, else None."""
    s = text.lstrip()
    if not s:
        return None
    value: Any = None
    if s[0] in "{[":
        try:
            value = _UNIQUE_KEYS_JSON.decode(s)
        except (ValueError, RecursionError):
            value = None
    elif len(s) <= MAX_YAML_CHARS and _YAML_START.match(s) and not _has_not_yaml_line(s):
        try:
            value = yaml.load(s, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader (C or Python)
        except (yaml.YAMLError, RecursionError, ValueError, TypeError):
            value = None
    return value if _record_like(value) else None


def _walk_structured(value: Any, collector: _Collector) -> None:
    """Walk structured output in document order, each string with its field path and class (a
    string seen twice keeps where it was first seen).

    Values that cannot hold a key (None, booleans, strings shorter than a key and not a name in a
    party field) are not stacked."""
    stack: list[tuple[Any, str, bool]] = [(value, "", False)]
    seen: set[int] = set()  # YAML aliases share objects: walk each container once
    sightings = collector.sightings
    while stack:
        node, path, identity = stack.pop()
        if isinstance(node, str):
            sightings.append((node, path or None, identity))
        elif isinstance(node, dict):
            if id(node) in seen:
                continue
            seen.add(id(node))
            field = path or None
            deep = len(path) >= MAX_FIELD_PATH_CHARS
            children = []
            for k, v in node.items():
                name = k if type(k) is str else str(k)
                if len(name) >= MIN_DESTINATION_CHARS:
                    sightings.append((name, field, identity))
                if v is None or v is True or v is False:
                    continue
                if type(v) is str and len(v) < MIN_DESTINATION_CHARS:
                    # too short for a key, but a directory lists a short name ("Bob") in a party field
                    short_cls = field_is_identity(name) if len(v) >= MIN_LISTED_NAME_CHARS else False
                    if short_cls is True or (short_cls is None and identity):
                        children.append((v, path if deep else f"{path}.{name}" if path else name, True))
                    continue
                cls = field_is_identity(name)
                if cls is None and identity:
                    cls = _inherits_identity(v)
                child = path if deep else f"{path}.{name}" if path else name
                children.append((v, child, identity if cls is None else cls))
            children.reverse()
            stack += children
        elif isinstance(node, list):
            if id(node) in seen:
                continue
            seen.add(id(node))
            deep = len(path) >= MAX_FIELD_PATH_CHARS
            items = []
            for i, v in enumerate(node):
                if v is None or v is True or v is False:
                    continue
                if type(v) is str and len(v) < MIN_DESTINATION_CHARS:
                    if identity and len(v) >= MIN_LISTED_NAME_CHARS:  # `members: ["Bob", "Eve"]`
                        items.append((v, path if deep else f"{path}[{i}]", True))
                    continue
                items.append((v, path if deep else f"{path}[{i}]", identity))
            items.reverse()
            stack += items
        elif node is not None and not isinstance(node, bool):
            sightings.append((str(node), path or None, identity))


# `Alice Smith <alice@x.example>`: a display name and one address, a destination by itself.
_NAME_AND_ADDRESS: Final = re.compile(r"[^<>\n]{0,80}<[^<>\s]+>")


def _inherits_identity(value: Any) -> bool:
    """Whether a value under a field whose own name says neither identity nor free text (`remarks`,
    `bio`, `status`, `addr`) inherits the identity of the object it is in (`contact`, `user`, `owner`):
    yes for a destination by itself (one token, or a name and an address) and for words with no
    destination in them; no for prose around a destination ("Alice's new address is eve@…"), which
    is free text whatever object it sits under, since anyone who can write the field can write it."""
    if type(value) is not str:
        return True
    text = value.strip()
    if len(text.split(None, 1)) < 2 or _NAME_AND_ADDRESS.fullmatch(text) is not None:
        return True
    return not tokens.key_tuple(text)


def _text_item(text: str, collector: _Collector) -> None:
    parsed = parse_structured(text)
    if parsed is not None and text.lstrip()[:1] not in "{[" and textrecords.is_header_mapping(parsed):
        listing = textrecords.read(text, field_is_identity)  # a header block that is also YAML
        if listing is not None:
            collector.sightings.extend(listing)
            return
    if parsed is not None:
        if collector.mirror is None or parsed != collector.mirror:  # a mirror has the same keys and paths
            _walk_structured(parsed, collector)
        return
    listing = textrecords.read(text, field_is_identity)
    if listing is not None:
        collector.sightings.extend(listing)
        return
    collector.sightings.append((text, None, False))


def _blob_text(blob: Any) -> str | None:
    if not isinstance(blob, str) or len(blob) > MAX_BLOB_CHARS:
        return None
    return fold.decode_base64_text(blob)


def _block_seams(content: list[Any], collector: _Collector) -> None:
    """The seam between each two consecutive text blocks of one output, joined as a client shows them:
    an address cut at the boundary (`eve@evil.exa` | `mple`) is read whole. Each seam is at most
    `SEAM_CHARS` on either side and at most the two blocks, so seams add at most twice the text."""
    texts = text_items(content)
    for left, right in pairwise(texts):
        collector.sightings.append((left[-SEAM_CHARS:] + right[:SEAM_CHARS], None, False))


def _walk_message(payload: Any, collector: _Collector) -> None:
    stack: list[Any] = [payload]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            collector.sightings.append((node, None, False))
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            kind = node.get("type")
            if "structuredContent" in node:
                collector.mirror = node["structuredContent"]
            for k, v in node.items():
                name = k if type(k) is str else str(k)
                if len(name) >= MIN_DESTINATION_CHARS:
                    collector.sightings.append((name, None, False))
                if k == "content" and type(v) is list and len(v) > 1:
                    _block_seams(v, collector)
                if k == "structuredContent":
                    _walk_structured(v, collector)
                elif k == "text" and isinstance(v, str) and (kind == "text" or "uri" in node):
                    _text_item(v, collector)  # a text content item, or text resource contents
                elif k == "blob" and "uri" in node:
                    decoded = _blob_text(v)
                    if decoded is not None:
                        _text_item(decoded, collector)
                elif k == "data" and kind in ("image", "audio"):
                    continue  # binary media: not text a reader can follow
                else:
                    stack.append(v)
        elif node is not None and not isinstance(node, bool):
            collector.sightings.append((str(node), None, False))


def extract(payload: Any, source: Source) -> list[TokenRecord]:
    """Every destination key in one upstream message, with where it was seen."""
    collector = _Collector(source)
    _walk_message(payload, collector)
    return collector.records()


class Seams:
    """The tail of the last output of each scope (a session and server), so an address cut between two
    consecutive outputs of one server is still read (`records`). Pure: the daemon keeps one and calls
    `records` for each output in indexing order. Bound: `SEAM_CHARS` on each side of each cut, the
    tails of `MAX_SEAM_SCOPES` scopes, and what the last `taint_edges.MAX_CUT_READINGS` distinct cuts
    read (`CutReadings`: a repeated output's cut is read once)."""

    def __init__(self, max_scopes: int = MAX_SEAM_SCOPES, cuts: CutReadings | None = None) -> None:
        self.max_scopes = max_scopes
        self._tails: dict[tuple[str, str], str] = {}
        self._cuts = CutReadings() if cuts is None else cuts  # a repeated output's cut, read once

    def records(self, scope: tuple[str, str], payload: Any, source: Source) -> list[TokenRecord]:
        """The keys read across the cut between the scope's previous output and this one (free text,
        with this output's provenance), and this output's tail kept for the next."""
        head, tail = output_edges(payload)
        previous = self._tails.pop(scope, "")
        if tail:
            self._tails[scope] = tail
            if len(self._tails) > self.max_scopes:
                del self._tails[next(iter(self._tails))]
        elif previous:
            self._tails[scope] = previous  # an output without text does not cut anything
        if not previous or not head:
            return []
        kept = self._cuts.get(previous, head)
        if kept is not None:
            return cut_records(kept, source.server, source.tool, source.request_id, source.ts)
        found = self._read_cut(previous, head, source)
        self._cuts.put(previous, head, found)
        return found

    @staticmethod
    def _read_cut(previous: str, head: str, source: Source) -> list[TokenRecord]:
        collector = _Collector(source)
        collector.sightings.append((previous + head, None, False))
        found = collector.records()
        if not found:
            return found
        # Only what the cut split: a key whole on either side was read (with its own field and class)
        # with its own output, and must not come back here as free text of this one. Each side's said
        # keys are read only when the joined text has one: every said key begins with `said.SAID_MARK`.
        whole = set(tokens.key_tuple(previous)) | set(tokens.key_tuple(head))
        whole.update(domain_keys(whole))
        if any(r.token.startswith(said.SAID_MARK) for r in found):
            whole.update(said.said_keys(previous), said.said_keys(head))
        return [r for r in found if r.token not in whole]
