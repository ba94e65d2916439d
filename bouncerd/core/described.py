"""Sources a prompt points to in words: "the message from Bob", "Bob's email", "the post Dana wrote".

Theory of operation
-------------------
A prompt names a source by a URL, an address or a file name it types (`Engine._named_argument`), or in
words: by who wrote it. "You can find the details in the message from Bob to Alice in Alice's inbox"
types no value of the call that reads it (`read_inbox(user="Alice")`), and that inbox holds other
people's messages too. So a source described by its author is not a call but a *record* of an output:
a mapping whose sender field (`sender`, `from`, `author`, `user`, `posted_by`, …) is, as a whole value,
a name the prompt gave as the author of a message (`described_keys`). What such a record says is read
as from a source the user named (`Provenance.named`): a destination taken from it is asked, with that
message in the question, never denied outright; orders to the agent inside it are denied as in any
named source (`orders`, `sink.named_source_orders`).

Every other record stays what it was. A message from someone the prompt did not name, a record inside
the named one that has a sender of its own (a forwarded message quoted in Bob's mail: its inner `From`
is whoever wrote it), and a record path that another view of the same output (`structuredContent` and
its text mirror) gives to an unnamed message are unnamed. A sender field an attacker can write (any mail
`From`) can claim the name the prompt gave: what that record says is then asked about, never allowed.

Author names are taken only as a person writes a name: one to `MAX_AUTHOR_WORDS` words each opening
with a capital letter (not a word that opens a sentence, `_NOT_NAMES`), or an address or a handle. A
lower-case "the mail from the bank" describes nobody: its record is read as before.

A document the prompt points to by its title ("the file called 'Q3 plan'", "the 'Q3 plan' deck") is
read whole, as a file name the prompt typed is (`titled_keys`, `is_titled`): the call whose argument is
that title, unless the tool searches (`SEARCH_VERBS`): a search returns whatever matches the title.

The names and titles are kept with the prompt's other vouched keys, behind `SOURCE_KEY_MARK` and
`TITLE_KEY_MARK` (no destination key can equal one), so they are journalled and restored with them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from bouncerd.core import shapes, taint, textrecords
from bouncerd.core.model import Provenance

SOURCE_KEY_MARK = "\x00from:"
MAX_AUTHOR_WORDS = 3  # "Bob", "Dora Smith", "Mary Ann Lee": a longer run of capitals is a title
MAX_AUTHORS = 64  # a prompt describes a few messages; more is a paste, and what it names stops there
MAX_SENDER_DEPTH = 3  # `from.emailAddress.name` (Graph): a sender value sits at most this deep
MAX_RECORD_DEPTH = 32  # nesting read for records, as the taint walk reads it
MAX_SHOWN_CHARS = 64  # the author as a question shows it
MAX_CACHED_SESSIONS = 256  # sessions whose described authors the engine keeps at hand (a cache)
MAX_READ_BYTES = 1 << 20  # a larger output is not parsed again for its records: read as before

# What a prompt calls one message: the words a person uses for something someone wrote.
_MESSAGE_WORDS = (
    r"(?i:messages?|mails?|e-?mails?|posts?|notes?|dms?|direct\s+messages?|texts?|letters?|repl(?:y|ies)"
    r"|comments?|memos?|invit(?:ation|e)s?|requests?|threads?|answers?|responses?|instructions?)"
)
_NAME_WORD = rf"(?:[A-Z][\w'’.-]*|{shapes.EMAIL_LOCAL}@{shapes.EMAIL_DOMAIN}|@[\w.-]+)"
_NAME_RUN = rf"{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,{MAX_AUTHOR_WORDS - 1}}}"
_EDITED = r"(?i:(?:(?:that|which)\s+)?(?:(?:was|were)\s+)?(?:sent|written|posted|forwarded|left|shared)\s+)"
# "the message from Bob", "the email sent by Dana Lee", "the note Bob left", "Bob's last message"
_FROM = re.compile(rf"\b{_MESSAGE_WORDS}\s+(?:{_EDITED})?(?i:from|by)\s+({_NAME_RUN})")
_POSSESSIVE = re.compile(
    rf"({_NAME_RUN})['’]s?\s+(?i:(?:last|latest|recent|newest|new|first|previous|earlier|most\s+recent)\s+)?"
    rf"{_MESSAGE_WORDS}\b"
)
_WROTE = re.compile(
    rf"\b{_MESSAGE_WORDS}\s+(?i:that\s+)?({_NAME_RUN})\s+(?i:sent|wrote|posted|forwarded|left|shared)\b"
)
# "the file called 'Q3 plan'", "the document titled Roadmap", "the 'Q3 plan' doc": a document by its
# title. A place many people write to (a channel, a thread, an inbox) is no one's document: not here.
_DOCUMENTS = (
    r"(?i:files?|documents?|docs?|pages?|sheets?|spreadsheets?|notes?|reports?|presentations?|decks?"
    r"|articles?|memos?|invoices?|bills?|contracts?|attachments?|pdfs?)"
)
_QUOTED = r"[\"'“‘]([^\"'“”‘’\n]{1,100})[\"'”’]"
_TITLED = re.compile(
    rf"\b{_DOCUMENTS}\s+(?i:called|named|titled|entitled)\s+(?:{_QUOTED}|([\w][\w-]{{1,63}}(?:\s+[A-Z][\w-]*){{0,3}}))"
)
_QUOTED_DOCUMENT = re.compile(rf"{_QUOTED}\s+{_DOCUMENTS}\b")
TITLE_KEY_MARK = "\x00titled:"
MAX_TITLES = 64  # as MAX_AUTHORS
# Verbs of a tool that finds many things by a word: its output is whatever matches, not the document.
SEARCH_VERBS = frozenset({"search", "find", "list", "query", "lookup", "filter", "browse"})
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,5}$")

# Capitalised words that open a sentence or a clause, never an author by themselves.
_NOT_NAMES = frozenset(
    {"the", "a", "an", "my", "our", "your", "his", "her", "their", "its", "this", "that", "these", "those",
     "i", "me", "we", "you", "he", "she", "they", "it", "and", "or", "in", "on", "to", "of", "for", "with",
     "please", "then", "also", "there", "here", "from", "by", "read", "find", "check", "open", "see",
     "someone", "somebody", "anyone", "everyone", "nobody", "user", "sender", "author"}
)  # fmt: skip

# The words of a field name that say who wrote a record (`from`, `sender`, `author`, `posted_by`).
_SENDER_PARTS = frozenset({"from", "sender", "author", "poster", "user", "username", "by", "creator"})
_NOT_SENDER_PARTS = frozenset({"to", "recipient", "recipients", "cc", "bcc", "date", "time", "id"})
_FIELD_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_NAME_AND_ADDRESS = re.compile(r"\s*\"?([^<>\"]*?)\"?\s*<([^<>\s]+)>\s*")


def normal(value: str) -> str:
    """An author as compared: case-folded, white space collapsed, a leading `@` dropped."""
    return " ".join(value.casefold().split()).lstrip("@").strip()


def _authors_in(run: str, keep_start: bool) -> Iterable[str]:
    """The names a run of capitalised words may be: each of its prefixes (after "from") or suffixes
    (before "'s"), whose edge word is no sentence word."""
    words = run.split()
    for n in range(1, len(words) + 1):
        part = words[:n] if keep_start else words[-n:]
        if part[0].casefold().strip("'’") in _NOT_NAMES or part[-1].casefold() in _NOT_NAMES:
            continue
        yield normal(" ".join(part).rstrip(".'’"))


def described_keys(prompt: str) -> set[str]:
    """The authors of messages a prompt points to, as vouched keys (`SOURCE_KEY_MARK` + the name)."""
    found: list[str] = []
    for pattern, keep_start in ((_FROM, True), (_WROTE, False), (_POSSESSIVE, False)):
        for m in pattern.finditer(prompt):
            run = m.group(1)
            found.extend(a for a in _authors_in(run, keep_start) if a)
    return {SOURCE_KEY_MARK + a for a in list(dict.fromkeys(a for a in found if len(a) >= 2))[:MAX_AUTHORS]}


def titled_keys(prompt: str) -> set[str]:
    """The titles of documents a prompt points to ("the file called 'Q3 plan'"), as vouched keys
    (`TITLE_KEY_MARK` + the title). An unquoted title is each of its leading runs of words."""
    found: list[str] = []
    for m in _TITLED.finditer(prompt):
        if m.group(1) is not None:
            found.append(normal(m.group(1)))
        else:
            words = m.group(2).split()
            found.extend(normal(" ".join(words[:n]).rstrip(".")) for n in range(1, len(words) + 1))
    found.extend(normal(m.group(1)) for m in _QUOTED_DOCUMENT.finditer(prompt))
    kept = [t for t in dict.fromkeys(found) if len(t) >= 2 and t not in _NOT_NAMES]
    return {TITLE_KEY_MARK + t for t in kept[:MAX_TITLES]}


def titles(vouched: Iterable[str]) -> frozenset[str]:
    """The described document titles among a session's vouched keys."""
    return frozenset(k[len(TITLE_KEY_MARK) :] for k in vouched if k.startswith(TITLE_KEY_MARK))


def is_titled(value: str, known: frozenset[str]) -> bool:
    """Whether an argument value is a described title, as written or with a file extension added
    (`Q3 plan.pptx` for "the deck called 'Q3 plan'")."""
    n = normal(value)
    return n in known or _EXTENSION.sub("", n) in known


def authors(vouched: Iterable[str]) -> frozenset[str]:
    """The described authors among a session's vouched keys."""
    return frozenset(k[len(SOURCE_KEY_MARK) :] for k in vouched if k.startswith(SOURCE_KEY_MARK))


def is_sender_field(name: str) -> bool:
    """Whether a field's name says who wrote the record it is in (`from`, `sender`, `posted_by`)."""
    parts = {p.lower() for p in _FIELD_PARTS.findall(name)}
    return bool(parts & _SENDER_PARTS) and not parts & _NOT_SENDER_PARTS


def _sender_values(value: Any, depth: int = 0) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping) and depth < MAX_SENDER_DEPTH:
        for v in value.values():
            yield from _sender_values(v, depth + 1)


def _is_author(value: str, names: frozenset[str]) -> bool:
    if normal(value) in names:
        return True
    m = _NAME_AND_ADDRESS.fullmatch(value)
    return m is not None and (normal(m.group(1)) in names or normal(m.group(2)) in names)


def sender_of(record: Mapping[Any, Any], names: frozenset[str]) -> str | None:
    """For a record with a sender field: the sender as written when it is a described author, "" when
    it is someone else. None for a record with no sender field (it inherits its parent's reading)."""
    senders = [v for k, v in record.items() if isinstance(k, str) and is_sender_field(k) and v is not None]
    if not senders:
        return None
    found: list[str] = []
    for value in senders:  # every sender field names the author (a name, or a name and an address)
        matched = [s for s in _sender_values(value) if _is_author(s, names)]
        if not matched:
            return ""
        found.append(matched[0].strip()[:MAX_SHOWN_CHARS])
    return found[0]


def record_paths(views: Iterable[Any], names: frozenset[str]) -> tuple[dict[str, str], frozenset[str]]:
    """The field paths (as the taint walk spells them: `[0]`, `messages[3]`, `` for the output itself)
    of the records written by a described author, each with that author as written, and of the records
    with a sender field that is someone else. A path any view gives to someone else is someone else's."""
    named: dict[str, str] = {}
    other: set[str] = set()
    for view in views:
        stack: list[tuple[Any, str, int]] = [(view, "", 0)]
        while stack:
            node, path, depth = stack.pop()
            if depth > MAX_RECORD_DEPTH:
                continue
            if isinstance(node, Mapping):
                sender = sender_of(node, names)
                if sender:
                    named.setdefault(path, sender)
                elif sender is not None:
                    other.add(path)
                for k, v in node.items():
                    name = k if isinstance(k, str) else str(k)
                    stack.append((v, f"{path}.{name}" if path else name, depth + 1))
            elif isinstance(node, list):
                stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node))
    return {p: s for p, s in named.items() if p not in other}, frozenset(other)


def record_of(field: str | None, paths: Mapping[str, str], unnamed: frozenset[str]) -> tuple[str, str] | None:
    """The record path and described author of the message that holds this field: the innermost record
    with a sender around it (`paths` named, `unnamed` someone else's) decides. None when no named
    record holds it."""
    if field is None:
        return None
    best: tuple[int, tuple[str, str] | None] = (-1, None)
    for path, author in [*paths.items(), *((p, None) for p in unnamed)]:
        inside = path == "" or field == path or field.startswith((path + ".", path + "["))
        if inside and len(path) > best[0]:
            best = (len(path), (path, author) if author is not None else None)
    return best[1]


def _views(payload: bytes) -> list[Any]:
    """The structured views of one raw output: its `structuredContent` and its text items that parse as
    JSON or YAML, as the taint walk reads them (so their field paths are the records' paths)."""
    try:
        message = json.loads(payload)
    except (ValueError, RecursionError):
        return []
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict):
        return []
    views: list[Any] = []
    if result.get("structuredContent") is not None:
        views.append(result["structuredContent"])
    printed: list[Any] = []
    for item in result.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            parsed = taint.parse_structured(item["text"])
            if parsed is not None:
                views.append(parsed)
            else:
                listing = printed_view(item["text"])
                if listing is not None:
                    printed.append(listing)
    # Printed listings all spell their paths `records[i]`: of two in one output, neither is read.
    return views + printed if len(printed) <= 1 else views


_PRINTED_FIELD = re.compile(r"(records\[\d+\])\.(.+)")
UNREADABLE_SENDER = "\x00unreadable"  # a sender field the listing reader did not trust: nobody's name


def printed_view(text: str) -> dict[str, Any] | None:
    """A listing printed as Markdown, plain-text blocks or CSV (`textrecords`), as the records the taint
    walk reads from it (`{"records": [{field: value}, …]}`, paths `records[i].field`), or None. A
    sender value the listing reader does not trust (a forged or repeated party line) names nobody."""
    sightings = textrecords.read(text, taint.field_is_identity)
    if not sightings:
        return None
    records: dict[str, dict[str, str]] = {}
    for value, field, identity in sightings:
        m = _PRINTED_FIELD.fullmatch(field or "")
        if m is None:
            continue
        name = m.group(2)
        trusted = identity or not is_sender_field(name)
        records.setdefault(m.group(1), {})[name] = value if trusted else UNREADABLE_SENDER
    ordered = sorted(records.items(), key=lambda kv: int(kv[0][len("records[") : -1]))
    if [int(k[len("records[") : -1]) for k, _ in ordered] != list(range(len(ordered))):
        return None  # not the listing the taint walk reads: its paths would not line up
    return {"records": [r for _, r in ordered]} if ordered else None


def _host_level(token: str) -> bool:
    """A host or an address's domain (`docs.example`, `@corp.example`), not one destination: a message
    whose author field anyone can write does not vouch for every path of a host it links (a URL with
    the user's data added to its query). Following its link as written needs no such vouching."""
    return token.startswith("@") or ("." in token and "/" not in token and "@" not in token)


def read_as_described(
    records: list[taint.TokenRecord], payload: bytes, names: frozenset[str]
) -> list[taint.TokenRecord]:
    """The records of one output, those in a message written by a described author read as from a source
    the user named (`Provenance.named`, asked about like any named source's free text)."""
    if not names or len(payload) > MAX_READ_BYTES:
        return records
    paths, others = record_paths(_views(payload), names)
    if not paths:
        return records
    out: list[taint.TokenRecord] = []
    shown: dict[tuple[Provenance, str], Provenance] = {}
    for record in records:
        prov = record.provenance
        found = None
        if not prov.identity and prov.named is None and not _host_level(record.token):
            found = record_of(prov.field, paths, others)
        if found is not None:
            path, author = found
            key = (prov, path)
            named = shown.get(key)
            if named is None:
                where = f"{prov.tool} {path}" if path else f"{prov.tool}"
                named = shown[key] = dataclasses.replace(
                    prov, identity=True, named=f"{where}, the message from {author}"
                )
            record = taint.TokenRecord(record.token, named)
        out.append(record)
    return out
