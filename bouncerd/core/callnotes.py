"""What the engine remembers of a session's recent calls, to read their outputs and their follow-ups.

Theory of operation
-------------------
An output is read knowing the call that produced it (same session, server and JSON-RPC id):

- *Echoes.* A send's reply that repeats where it went ("sent to bob@partner.example") does not taint
  that destination: the destinations of the call are left out of its output's records
  (`CallNote.sent_to`); anything else in the same output taints as usual.
- *Named sources.* A call whose argument is a URL, address, host or file name the user's prompt typed
  reads a source the user pointed to. Free text of its output is recorded as asked about
  (`Provenance.named`), not as planted: that page may carry an injection too, so a destination from
  it is asked, with the source in the question, and never denied outright.
- *Objects made for a trusted destination.* A creating call (a draft, a contact, a scheduled send)
  whose every destination was trusted leaves the ids its output names (`created_ids`) bound to those
  destinations. A later send on the same server that names no destination but one of those ids (send
  the draft) is trusted for them. Any other call that names the id and does not only read (an update
  of the draft) unbinds it: the object may now go elsewhere.

None of this is journalled. After a daemon restart the notes are gone and every output is read as
untrusted free text again, every object id as unknown: a loss only makes the gate stricter.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bouncerd.core import taint
from bouncerd.core.model import Provenance

MAX_CALL_NOTES = 256  # per session: a call's output follows it closely, a handful are in flight
MAX_OBJECTS = 256  # per session: drafts and contacts made for trusted recipients and not yet sent
MAX_ID_CHARS = 128  # an object id is short; a longer value is content
MAX_IDS_PER_OUTPUT = 16  # a creating call returns one object (or a few)
MAX_ID_SCAN_BYTES = 65_536  # a creating call's reply is small; a larger one is not read for ids
# A URL, an address, a host or a file name: what a prompt points at when it names a source.
POINTS_AT_SOMETHING = re.compile(r"[./@:\\]")
MAX_NAMED_ARGUMENT_CHARS = 2048  # longer values are text, not a source someone typed
# Verbs of a tool that makes an object to send later: a draft, a contact, a scheduled message.
CREATING_VERBS = frozenset(
    {"create", "draft", "add", "save", "compose", "new", "make", "prepare", "schedule"}
)
# A resource-then-verb name (`drafts.create`, `contacts.add`, as REST-style servers spell them) has its
# verb last; more words than this before it are a phrase, not a resource path.
MAX_RESOURCE_WORDS = 3


def creates_object(tool_words: list[str]) -> bool:
    """Whether a tool's name (its words) makes an object to send later: a creating verb first
    (`create_draft`, `save_contact`) or after the resource it makes (`drafts.create`)."""
    if not tool_words:
        return False
    return tool_words[0] in CREATING_VERBS or (
        len(tool_words) <= MAX_RESOURCE_WORDS and tool_words[-1] in CREATING_VERBS
    )


_ID_NAME = re.compile(r"(?:^|[^A-Za-z0-9])[Ii][Dd]$|[a-z]Id$")  # id, draft_id, draftId, "Draft id"
_ID_IN_TEXT = re.compile(r"\b(?:id|ID|Id)\b\s*[:=#]?\s*[\"'`]?([A-Za-z0-9][A-Za-z0-9_.:-]{0,127})")


@dataclass(frozen=True)
class CallNote:
    """One call, as its output needs it."""

    sent_to: frozenset[str]  # taint keys of the destinations it sent to
    named: str | None  # what of it the user named, shown in questions
    made_for: tuple[str, ...] = ()  # a creating call's trusted destinations (its output's ids bind them)
    why: str = ""  # why those destinations were trusted


@dataclass(frozen=True)
class MadeObject:
    destinations: tuple[str, ...]
    why: str


def request_key(request_id: object) -> str:
    """A JSON-RPC id as a key that keeps 1 and "1" apart."""
    return f"{type(request_id).__name__}:{request_id}"


class CallNotes:
    """Per session: notes of recent calls (by server and request id) and objects made for trusted
    destinations (by server and object id)."""

    def __init__(self) -> None:
        self._calls: dict[str, OrderedDict[tuple[str, str], CallNote]] = {}
        self._objects: dict[str, OrderedDict[tuple[str, str], MadeObject]] = {}

    def forget(self, session: str) -> None:
        self._calls.pop(session, None)
        self._objects.pop(session, None)

    def note(self, session: str, server: str, request_id: object, note: CallNote) -> None:
        calls = self._calls.setdefault(session, OrderedDict())
        key = (server, request_key(request_id))
        calls[key] = note
        calls.move_to_end(key)
        while len(calls) > MAX_CALL_NOTES:
            calls.popitem(last=False)

    def get(self, session: str, server: str, request_id: object) -> CallNote | None:
        calls = self._calls.get(session)
        return calls.get((server, request_key(request_id))) if calls is not None else None

    # ---- objects -------------------------------------------------------------------------------

    def made(self, session: str, server: str, request_id: object, payload: bytes) -> None:
        """The output of a call: if it was a creating call for trusted destinations, bind the ids its
        output names to them."""
        note = self.get(session, server, request_id)
        if note is None or not note.made_for:
            return
        objects = self._objects.setdefault(session, OrderedDict())
        for object_id in created_ids(payload):
            objects[(server, object_id)] = MadeObject(note.made_for, note.why)
            objects.move_to_end((server, object_id))
        while len(objects) > MAX_OBJECTS:
            objects.popitem(last=False)

    def object_named(
        self, session: str, server: str, arguments: Mapping[str, Any]
    ) -> tuple[str, MadeObject] | None:
        """The object one of these arguments names (a draft id), if it was made for trusted destinations."""
        objects = self._objects.get(session)
        if not objects:
            return None
        for value in _scalars(arguments):
            made = objects.get((server, value))
            if made is not None:
                return value, made
        return None

    def touched(self, session: str, server: str, arguments: Mapping[str, Any]) -> None:
        """A call that changes what it names: an object it names is no longer known to go where it was
        made to go."""
        objects = self._objects.get(session)
        if objects:
            for value in _scalars(arguments):
                objects.pop((server, value), None)


def read_as_noted(records: list[taint.TokenRecord], note: CallNote) -> list[taint.TokenRecord]:
    """The records of one call's output as its call explains them: the destinations it sent to, which
    the output repeats, are left out (anything else in it still taints); free text of a source the user
    named is recorded as asked about (`Provenance.named`), not as planted."""
    out: list[taint.TokenRecord] = []
    named: dict[Provenance, Provenance] = {}
    for record in records:
        if record.token in note.sent_to:
            continue
        prov = record.provenance
        if note.named is not None and not prov.identity:
            shown = named.get(prov)
            if shown is None:
                shown = named[prov] = dataclasses.replace(prov, identity=True, named=note.named)
            record = taint.TokenRecord(record.token, shown)
        out.append(record)
    return out


def _scalars(value: Any, depth: int = 0) -> Iterator[str]:
    """Every string and integer in arguments, as text (an id may be either)."""
    if depth > 6:
        return
    if isinstance(value, str):
        if 0 < len(value) <= MAX_ID_CHARS:
            yield value.strip()
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _scalars(v, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _scalars(v, depth + 1)


def created_ids(payload: bytes) -> list[str]:
    """The ids a creating call's reply names: values of fields named `id`, `*_id`, `*Id` in its
    structured content or JSON text, or `id: X` in plain text. Bounded (`MAX_ID_SCAN_BYTES`)."""
    if len(payload) > MAX_ID_SCAN_BYTES:
        return []
    try:
        message = json.loads(payload)
    except (ValueError, RecursionError):
        return []
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict) or result.get("isError"):
        return []
    found: list[str] = []
    _ids_in(result.get("structuredContent"), found, 0)
    for item in result.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            text = item["text"]
            parsed = taint.parse_structured(text)
            if parsed is not None:
                _ids_in(parsed, found, 0)
            else:
                found.extend(m.group(1).rstrip(".:") for m in _ID_IN_TEXT.finditer(text[:MAX_ID_SCAN_BYTES]))
    return list(dict.fromkeys(found))[:MAX_IDS_PER_OUTPUT]


def _ids_in(value: Any, found: list[str], depth: int) -> None:
    if depth > 6 or len(found) >= MAX_IDS_PER_OUTPUT:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and _ID_NAME.search(k) and not isinstance(v, bool):
                if isinstance(v, str) and v.split() and len(v.split()[0]) <= MAX_ID_CHARS:
                    found.append(v.split()[0].rstrip(".,;:"))  # "r-12 created." in a YAML-looking line
                elif isinstance(v, int):
                    found.append(str(v))
            _ids_in(v, found, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _ids_in(v, found, depth + 1)
