"""Plain names in untrusted output: seen as a whole value, only inside prose, or not at all.

Theory of operation
-------------------
A user name, a channel, a hotel or any short name is not address-shaped, so the taint index holds no
key for it (it indexes identity values of at least `shapes.MIN_KEY_CHARS` whole, and destination
tokens). A send to such a name would be asked whatever its source. This module keeps, per taint scope,
a record of where plain names were seen, so the sink gate can tell three cases apart:

- *whole*: the name is the whole value of a field, a list item, a key or a header line of some output
  (a member list, a `name` field, a list of channels). A directory lists it: judged as before (asked,
  or whatever the identity and directory paths say).
- *prose only*: the name appears only inside longer text (a message body, a web page, a review), as
  whole words and case-insensitively ("Eve" in "ask Eve", never in "Steven" or "every"). Nobody typed
  it, no directory lists it: the agent can only have it from that text, so a send to it is planted
  (denied) -- unless that text came from a source the user's prompt named (asked, with where it came
  from), which wins over other prose that repeats the name. Inside such a source, the spans that give
  the agent orders (`orders.markers_in`) are kept apart with their marker: a name there is the
  injection's (denied, `sink.named_source_orders`). A message the prompt described by its author
  (`described`) is such a source, record by record.
- *unseen*: judged as before (asked).

The same record answers for the content of a send that names no checkable destination (a calendar
event with no participants): a title copied verbatim from prose the prompt did not name was dictated
by that prose (`dictated`).

The output of a call that echoes the call's own arguments ("message sent to Alice") does not count as
prose for those values (`called`).

Bounds: an output larger than `MAX_READ_BYTES` is not read, and its scope is marked *incomplete* (its
names may be whole values there); so is a scope whose whole values outgrew `MAX_WHOLE_NAMES`, and a
scope evicted (`MAX_SCOPES`) reads as incomplete. In an incomplete scope a name seen only in prose is
asked, never denied. Prose beyond `MAX_SCOPE_PROSE_CHARS` drops its oldest: a name seen only there is
unseen again (asked). Nothing here is journalled: after a restart every name is unseen, so asked
(never allowed).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from bouncerd.core import canon, described, orders
from bouncerd.core.model import JsonRpcId, Provenance
from bouncerd.core.taint import MAX_YAML_CHARS, field_is_identity, parse_structured

_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MIN_NAME_CHARS = 3  # "Bob", "Eve", "Dan": shorter values are initials, not names anyone sends to
MAX_NAME_CHARS = 64  # a channel, a user, a hotel; a longer value is text, judged as today
MAX_NAME_WORDS = 6  # "Riverside View Hotel", "The Grand Budapest Hotel": more words are a sentence
MAX_WHOLE_CHARS = 200  # a field value this long can be a title someone copies whole
MIN_DICTATED_CHARS = 16  # a title of a few words; shorter content ("Meeting") is said by anyone
MIN_DICTATED_WORDS = 3
MAX_DICTATED_CHARS = 512  # longer content is a body, read by the taint gate for what it carries
# What names an object the prompt asked for: a title the text chose ("the event title should be …") is
# the text's call; its other values (a location, a description) are facts an agent copies as it should.
TITLE_WORDS = frozenset({"title", "subject", "summary", "name", "topic", "headline"})
MAX_READ_BYTES = 1 << 20  # read on the event loop: a 1 MB output parses in a few milliseconds
MAX_SCOPE_PROSE_CHARS = 1 << 20  # prose kept per scope (the newest): a lookup searches it all, ~1 ms/MB
MAX_WHOLE_NAMES = 20_000  # whole values kept per scope: a member list of thousands, with room
MAX_SCOPES = 64  # scopes kept (least recently read out): at most 64 MB of prose in all
MAX_CALLS = 256  # calls per ledger whose arguments are kept to recognise their echo
MAX_ECHO_VALUES = 64  # argument values kept per call
MAX_WALK_DEPTH = 32  # nesting read in one output; deeper is read as prose of its parent (JSON dump)


def normal(value: str) -> str:
    """A name as compared: case-folded, whitespace runs collapsed, a leading `#` or `@` dropped."""
    return " ".join(value.casefold().split()).lstrip("#@").strip()


def is_plain_name(value: str) -> bool:
    """A value that names a party or place without an address: letters, a few words, one line."""
    if "\n" in value or "\r" in value:
        return False
    n = normal(value)
    if not MIN_NAME_CHARS <= len(n) <= MAX_NAME_CHARS or len(n.split(" ")) > MAX_NAME_WORDS:
        return False
    if not any(ch.isalpha() for ch in n):
        return False
    return canon.canonicalize(value.strip()).kind == "text"


def is_content(value: str) -> bool:
    """A content value long enough that finding it verbatim in prose says it was copied from there."""
    n = normal(value)
    return MIN_DICTATED_CHARS <= len(n) <= MAX_DICTATED_CHARS and len(n.split(" ")) >= MIN_DICTATED_WORDS


# A name glued to more of a token by these is part of it: `eve.example`, `eve-corp`, `origin/main`,
# `refs/heads/eve`, `C:\\eve`, `eve:secret`. The name itself is not mentioned there.
_GLUE_AFTER = "./-:\\"
_GLUE_BEFORE = ".-/\\"


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def contains_words(text: str, n: str) -> bool:
    """Whether folded text (`fold_prose`) holds the normal form `n` as whole words: "eve" is in "ask
    eve." and "@eve", never in "steven", "every", "eve@evil.example" (a mailbox, not a name) or
    "origin/main" (a path). A plain
    `str.find` scan, about a gigabyte a second: a lookup reads the scope's prose at each call."""
    start, end = 0, len(text)
    while True:
        i = text.find(n, start)
        if i < 0:
            return False
        j = i + len(n)
        before = text[i - 1] if i else " "
        if before in "@#" and i >= 2 and _word_char(text[i - 2]):
            before = "a"  # `bob@eve`: inside an address
        after = text[j] if j < end else " "
        if after in _GLUE_AFTER and j + 1 < end and _word_char(text[j + 1]):
            after = "a"  # `eve.example`, `eve-corp`, `origin/main`: part of a longer name or a path
        if not _word_char(before) and before not in _GLUE_BEFORE and not _word_char(after) and after != "@":
            return True
        start = i + 1


def fold_prose(text: str) -> str:
    """Prose as it is searched: case-folded, whitespace runs collapsed (as `normal` folds a name), and
    the `\\n` a printed string shows for its line breaks read as one."""
    if "\\" in text:
        text = text.replace("\\n", " ").replace("\\t", " ")
    return " ".join(text.casefold().split())


@dataclass
class _Prose:
    text: str
    provenance: Provenance
    echoes: frozenset[str]  # normal forms of the producing call's own argument values


@dataclass
class ScopeNames:
    """The names of one taint scope."""

    whole: set[str] = field(default_factory=set)
    prose: deque[_Prose] = field(default_factory=deque)
    prose_chars: int = 0
    incomplete: bool = False  # something read here was not kept: prose-only is asked, never denied
    has_named: bool = False  # some prose came from a source the user named (a lookup reads it all)

    def prose_only(self, value: str) -> Provenance | None:
        """Where a plain name was seen inside prose, if it was seen nowhere as a whole value: an
        unnamed source's first (the plant), else a named source's. None when whole, unseen, or the
        scope is incomplete."""
        n = normal(value)
        if self.incomplete or n in self.whole:
            return None
        return self._in_prose(n)

    def dictated(self, value: str) -> Provenance | None:
        """Where content was seen verbatim inside prose (and not as a whole value)."""
        return self.prose_only(value) if is_content(value) else None

    def _in_prose(self, n: str) -> Provenance | None:
        """Orders to the agent in a source the user named that mention the name (the injection's), else
        that source's own text (a name the user's source gives is asked about even when other text
        repeats it: a page about the person the named message introduced), else the first other prose
        that mentions it (planted)."""
        named: Provenance | None = None
        unnamed: Provenance | None = None
        for entry in self.prose:
            if n in entry.echoes or not contains_words(entry.text, n):
                continue
            if entry.provenance.orders is not None:
                return entry.provenance
            if entry.provenance.named is not None:
                named = named or entry.provenance
            else:
                unnamed = unnamed or entry.provenance
                if not self.has_named:
                    break  # no named source in this scope: the first plant is the answer
        return named or unnamed

    def add(self, whole: set[str], prose: _Prose | None) -> None:
        self.whole |= whole
        if len(self.whole) > MAX_WHOLE_NAMES:
            self.whole.clear()
            self.incomplete = True
        if prose is not None:
            if len(prose.text) > MAX_SCOPE_PROSE_CHARS:
                prose.text = prose.text[-MAX_SCOPE_PROSE_CHARS:]
            self.prose.append(prose)
            self.prose_chars += len(prose.text)
            self.has_named = self.has_named or prose.provenance.named is not None
            while self.prose_chars > MAX_SCOPE_PROSE_CHARS:
                self.prose_chars -= len(self.prose.popleft().text)


@dataclass(frozen=True)
class Output:
    """One upstream output, as the names ledger reads it."""

    server: str
    tool: str | None
    request_id: JsonRpcId
    ts: float
    named: str | None = None  # the source the user's prompt named that this output came from
    authors: frozenset[str] = frozenset()  # authors of messages the prompt described (`described`)


class NameLedger:
    """Per scope: the plain names seen in untrusted output (`ScopeNames`). Not journalled."""

    def __init__(self) -> None:
        self._scopes: OrderedDict[str, ScopeNames] = OrderedDict()
        self._calls: OrderedDict[tuple[str, str, str], frozenset[str]] = OrderedDict()
        self._decided: dict[str, int] = {}  # session -> calls decided since this ledger began

    def decided(self, session: str) -> None:
        """One more call of the session was decided (the engine counts the same, journalled)."""
        self._decided[session] = self._decided.get(session, 0) + 1

    def decided_in(self, session: str) -> int:
        return self._decided.get(session, 0)

    def has(self, scope: str) -> bool:
        return scope in self._scopes

    def scope(self, scope: str) -> ScopeNames:
        """The names of a scope; an empty, incomplete one if it was evicted or never read."""
        found = self._scopes.get(scope)
        return found if found is not None else ScopeNames(incomplete=True)

    def called(self, session: str, server: str, request_id: object, arguments: Mapping[str, Any]) -> None:
        """A call was made: its output repeating its own argument values is an echo, not prose."""
        values = frozenset(normal(v) for v in _strings(arguments, 0) if len(v) <= MAX_DICTATED_CHARS)
        key = (session, server, repr(request_id))
        self._calls[key] = frozenset(list(values)[:MAX_ECHO_VALUES])
        self._calls.move_to_end(key)
        while len(self._calls) > MAX_CALLS:
            self._calls.popitem(last=False)

    def read(self, scope: str, session: str, output: Output, payload: bytes, behind: bool = False) -> None:
        """Record the names of one raw output (a JSON-RPC line) in its scope. `behind`: the scope is new
        here but its sessions made calls this ledger never saw (before a restart, or since it was
        evicted), whose outputs may have listed names: it starts incomplete."""
        names = self._scopes.get(scope)
        if names is None:
            names = self._scopes[scope] = ScopeNames(incomplete=behind)
            if len(self._scopes) > MAX_SCOPES:
                self._scopes.popitem(last=False)
        self._scopes.move_to_end(scope)
        if len(payload) > MAX_READ_BYTES:
            names.incomplete = True
            return
        try:
            message: Any = json.loads(payload)
        except (ValueError, RecursionError):
            message = payload.decode("utf-8", "replace")
        whole: set[str] = set()
        texts: list[str] = []
        route = _Route(output.authors, texts) if output.authors and output.named is None else None
        _walk_message(message, whole, texts, route)
        echoes = self._calls.pop((session, output.server, repr(output.request_id)), frozenset())
        prov = Provenance(output.server, output.tool, output.request_id, output.ts, None, False, output.named)
        names.add({w for w in whole if w}, None)
        self._add_prose(names, " ".join(texts), prov, echoes)
        for author, said in (route.messages if route is not None else {}).items():
            shown = dataclasses.replace(prov, named=f"{output.tool}, the message from {author}")
            self._add_prose(names, " ".join(said), shown, echoes)

    @staticmethod
    def _add_prose(names: ScopeNames, text: str, prov: Provenance, echoes: frozenset[str]) -> None:
        """Prose of one source. Of a source the user named, the spans that give the agent orders
        (`orders.markers_in`) are kept apart with their marker: a name an injection in it names is
        denied as the injection's (`sink.named_source_orders`), not asked as the source's."""
        if prov.named is not None:
            text, ordered = _without_orders(text)
            for span, label in ordered:
                names.add(set(), _Prose(fold_prose(span), dataclasses.replace(prov, orders=label), echoes))
        folded = fold_prose(text)
        if folded:
            names.add(set(), _Prose(folded, prov, echoes))

    def forget(self, scope: str) -> None:
        self._scopes.pop(scope, None)

    def forget_session(self, session: str) -> None:
        self._decided.pop(session, None)

    def scopes(self) -> list[str]:
        return list(self._scopes)


@dataclass
class _Route:
    """Where the text of a structured output goes: a message whose author the prompt described
    (`described.sender_of`) to that author's prose, a record with any other sender back to the
    output's own, a record with no sender where its parent's went."""

    authors: frozenset[str]
    unnamed: list[str]
    messages: dict[str, list[str]] = field(default_factory=dict)

    def texts_of(self, record: Mapping[Any, Any], texts: list[str]) -> list[str]:
        author = described.sender_of(record, self.authors)
        if author is None:
            return texts
        return self.messages.setdefault(author, []) if author else self.unnamed


def _without_orders(text: str) -> tuple[str, list[tuple[str, str]]]:
    """A named source's text without the spans that give the agent orders, and those spans, each with
    its marker's label (`orders.markers_in`, which reads the text behind a leading newline)."""
    spans = orders.markers_in(text)
    if not spans:
        return text, []
    text = "\n" + text
    kept: list[str] = []
    ordered: list[tuple[str, str]] = []
    at = 0
    for start, end, marker in spans:
        start = max(start, at)
        if end <= start:
            continue
        kept.append(text[at:start])
        ordered.append((text[start:end], marker.label[: orders.MAX_LABEL_CHARS]))
        at = end
    kept.append(text[at:])
    return " ".join(kept), ordered


def _strings(value: Any, depth: int) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping) and depth < MAX_WALK_DEPTH:
        for v in value.values():
            yield from _strings(v, depth + 1)
    elif isinstance(value, list | tuple) and depth < MAX_WALK_DEPTH:
        for v in value:
            yield from _strings(v, depth + 1)


def _whole(value: str, whole: set[str]) -> None:
    if len(value) <= MAX_WHOLE_CHARS and "\n" not in value:
        whole.add(normal(value))


def _walk_structured(
    value: Any, whole: set[str], texts: list[str], depth: int = 0, route: _Route | None = None
) -> None:
    """Every scalar of structured output is a whole value (when short and on one line) and text; with
    a `route`, the text of a described author's message is kept apart."""
    if isinstance(value, str):
        _whole(value, whole)
        if "," in value or "|" in value or ";" in value:
            _record_line(value, whole)  # `to: "Alice, Bob"`: a list in one string
        texts.append(value)
    elif depth >= MAX_WALK_DEPTH:
        texts.append(str(value))
    elif isinstance(value, Mapping):
        if route is not None:
            texts = route.texts_of(value, texts)
        for k, v in value.items():
            _whole(str(k), whole)
            texts.append(str(k))
            _walk_structured(v, whole, texts, depth + 1, route)
    elif isinstance(value, list | tuple):
        for v in value:
            _walk_structured(v, whole, texts, depth + 1, route)
    elif isinstance(value, bool):
        _whole(str(value), whole)  # `- True` in a printed member list: YAML reads the name as a boolean
    elif value is not None:
        texts.append(str(value))


_HEADER = re.compile(r"^[ \t]*([A-Za-z][A-Za-z0-9 _-]{0,40}):[ \t]*(\S[^\n]*?)[ \t]*$", re.M)


_YAML_LIST = re.compile(r"-[ \t]+\S")


def _structured(text: str) -> Any | None:
    """What a text item holds as JSON or YAML: a mapping or a list, of strings too (`["Alice", "Bob"]`,
    `- general`: a list of members or channels), else None."""
    s = text.lstrip()
    if s[:1] in ("[", "{"):
        try:
            value: Any = json.loads(s)
        except (ValueError, RecursionError):
            value = _flow(s)  # `{'City Hub': '1-1-1 Nishi-Shinjuku'}`: a printed dict is YAML flow
        return value if isinstance(value, dict | list) else None
    if _YAML_LIST.match(s) and len(s) <= MAX_YAML_CHARS:
        try:
            value = yaml.load(s, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader (C or Python)
        except (yaml.YAMLError, RecursionError, ValueError, TypeError):
            return None
        return value if isinstance(value, list) else None
    return parse_structured(text)


def _flow(text: str) -> Any:
    """A text that opens like JSON but is not: a Python-printed dict or list parses as YAML flow."""
    if len(text) > MAX_YAML_CHARS:
        return None
    try:
        return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader (C or Python)
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None


def _text_item(
    text: str, whole: set[str], texts: list[str], mirror: Any, route: _Route | None = None
) -> None:
    """A text item: structured (JSON or YAML) is walked, unless it repeats `structuredContent` (walked
    on its own); a short one-line text is a whole value (a tool that answers with one name); a `From:
    Alice` line names a party; the rest is prose."""
    parsed = _structured(text)
    if parsed is not None:
        if mirror is None or parsed != mirror:
            _walk_structured(parsed, whole, texts, 0, route)
        return
    if route is not None:
        listing = described.printed_view(text)
        if listing is not None:  # the described author's records are kept apart too; all stays here
            _walk_structured(listing, set(), [], 0, _Route(route.authors, [], route.messages))
    if len(text) <= MAX_WHOLE_CHARS and "\n" not in text.strip():
        _whole(text.strip(), whole)
    for m in _HEADER.finditer(text):
        if field_is_identity(m.group(1)):
            for part in m.group(2).split(","):
                _whole(part.strip(), whole)
    for line in text[:MAX_LINES_READ_CHARS].splitlines():
        _record_line(line, whole)
    texts.append(text)


MAX_LINES_READ_CHARS = 256 * 1024  # lines read as records; a longer text's rest is prose only
_DECORATION = " \t#*>-|`_"
_CELL = re.compile(r"[|,;\t]")


def _record_line(line: str, whole: set[str]) -> None:
    """A line of a printed record: a Markdown heading or list item (`### Dora`, `- **username**: Dora`),
    a `Key: value` line, a table or CSV row (`| Dora | Bob |`, `Dora,Bob`). Its cells are whole values
    when every cell is short (a record, not a sentence). A line of prose of short clauses can pass for
    one: then a name in it is asked, as before, never allowed."""
    text = line.strip(_DECORATION)
    if not text or len(text) > MAX_WHOLE_CHARS:
        return
    key, sep, value = text.partition(":")
    if sep and value.strip() and len(key.split()) <= 3:
        text = value
    cells = [c.strip(_DECORATION) for c in _CELL.split(text)]
    if all(len(c.split()) <= MAX_NAME_WORDS for c in cells):
        for c in cells:
            if c:
                _whole(c, whole)


def _walk_message(message: Any, whole: set[str], texts: list[str], route: _Route | None = None) -> None:
    """A JSON-RPC message: text items read as `_text_item`, structured content walked, any other string
    (an error message, a notification) is prose."""
    stack: list[tuple[Any, int]] = [(message, 0)]
    mirror: Any = None
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            texts.append(node)
        elif isinstance(node, list) and depth < MAX_WALK_DEPTH:
            stack.extend((v, depth + 1) for v in reversed(node))
        elif isinstance(node, dict) and depth < MAX_WALK_DEPTH:
            if "structuredContent" in node:
                mirror = node["structuredContent"]
            for k, v in node.items():
                if k == "structuredContent":
                    _walk_structured(v, whole, texts, 0, route)
                elif k == "text" and isinstance(v, str):
                    _text_item(v, whole, texts, mirror, route)
                elif k in ("type", "jsonrpc", "mimeType", "uri", "data", "blob"):
                    continue
                else:
                    stack.append((v, depth + 1))
