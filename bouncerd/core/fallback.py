"""The fallback: how a tool that no pack and no policy names is gated, from its name and schema.

Theory of operation
-------------------
A server nobody wrote a pack for still has tools that send. The fallback reads two things the
server published (and the pins froze): the tool's name and its input schema.

*Destination-shaped parameters* are found by the parts of their names (split on `_`, `-`, `.` and
camelCase: `recipientEmail` is `recipient` + `email`) and by schema formats (`email`, `idn-email`,
`uri`, `uri-reference`, `iri`, `iri-reference`, `hostname`, `idn-hostname`), walking nested
objects, arrays of objects, `anyOf`/`oneOf`/`allOf` and local `$ref`s. A parameter whose schema only
allows booleans or numbers is never one. Some parts are *strong* (they name a person or an account:
`to`, `cc`, `recipient*`, `*email*`, `participants`, `attendees`, `invitee*`, `member*`, `iban`,
`phone`, `webhook*`, `share*`, `assignee*`, `reviewer*`, `forward`, and `address` in a mail
context); others are *weak* (they name a place that may just be read: `url`, `uri`, `link`, `host`,
`domain`, `channel*`, `user`, `user_id`, `endpoint`, `destination`).

*The tool's verb* is the first name part found in one of the verb lists:
- a sending verb (`send`, `post`, `reply`, `forward`, `share`, `invite`, `publish`, `upload`,
  `transfer`, `pay`, `notify`, `submit`, `push`, ...) gates the tool as a *send*, on all its
  destination-shaped parameters; with none found it declares no sinks, so every argument is one;
- a fetching verb (`fetch`, `browse`, `download`, `scrape`, `crawl`, `navigate`, `open`, ...), or a
  reading verb over a web noun (`get_webpage`, `read_url`), makes a *fetch* sink of its URL-shaped
  parameters; without a URL parameter it is a reading tool (`fetch_messages`);
- a reading verb (`get`, `read`, `list`, `search`, `find`, `show`, `view`, `query`, ...) is never
  gated: `read_channel_messages(channel)` must keep working;
- a mutating verb (`create`, `add`, `update`, `schedule`, ...) is gated as a send when it adds
  someone (`add_user_to_channel`, the `add ... to` form), when it writes a message-like thing
  (`conversations_add_message`), or when a *strong* destination parameter is present
  (`create_calendar_event(participants)`, `update_scheduled_transaction(recipient)`);
- no verb at all (`email(to, body)`, `echo(message)`) is gated as a send if any destination-shaped
  parameter is present: an unknown tool that takes an address is assumed to use it.
Names that are nouns as often as verbs (`email`, `message`, `text`, `dm`, `sms`, `tweet`,
`comment`, `chat`) count as sending verbs only when no other verb is in the name (`email_search`
reads).

Deletion-like tools are recognised by whole name parts (`delete`, `remove`, `drop`, `purge`,
`wipe`, `destroy`, `erase`, `truncate`, `trash`, ...), unless the verb is a reading one:
`delete_file` is a deletion, `get_permissions` and `list_deleted_items` are not.

Path-shaped parameters (`path`, `*_path`, `dir`, `directory`, `folder`, and the
`source`/`destination` of a move or copy) of non-reading tools become `write_params`, used only when
the user sets `allowed_path_prefixes` for the tool.

The result is a `ToolEntry` with source "fallback" and notes that say which parameter matched which
rule, so `policy check` can show its reasoning. Misjudgements go one way: a false positive costs an
ask; the lists are biased toward asking.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bouncerd.core.rules import FALLBACK_SOURCE, ToolEntry, ToolRule, resolve


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Input schemas nest; real ones go three or four levels deep. Deeper levels are not searched (a
# parameter buried further is still walked by the sink gate when the tool declares no sinks).
MAX_SCHEMA_DEPTH = 8
# `$ref` chains are followed this many hops; a cycle ends there.
MAX_REF_HOPS = 8

STRONG_SEND_VERBS = _set(
    "send post reply respond forward share invite publish upload transfer pay notify submit push broadcast "
    "announce deliver dispatch draft compose wire remit donate tip mention ping tell contact"
)
# Nouns at least as often as verbs: sending only when no other verb is in the name.
WEAK_SEND_VERBS = _set("email mail message msg text sms dm tweet comment chat")
FETCH_VERBS = _set("fetch browse download scrape crawl navigate visit open curl wget goto")
READ_VERBS = _set(
    "get read list search find show view query describe lookup look retrieve check count inspect peek "
    "preview summarize summarise history watch poll load select explain analyze analyse diff status "
    "info whoami print display echo test validate verify lint"
)
MUTATE_VERBS = _set(
    "create add update set edit modify change delete remove drop purge wipe destroy erase truncate move "
    "rename copy write append insert put patch upsert save store archive unarchive restore mark label tag "
    "toggle trigger run execute start stop cancel reschedule schedule book reserve merge close lock unlock "
    "assign unassign grant revoke approve reject enable disable install uninstall import convert compress "
    "gzip format apply resize reorder duplicate clear reset login logout manage dismiss rerun fork clone "
    "checkout commit make new join leave subscribe unsubscribe accept decline resolve react star pin "
    "unpin trash empty replace split batch generate render simulate"
)
# A mutating verb that writes one of these things is a send: `add_message`, `create_comment`.
SENT_THINGS = _set("message messages comment comments reply replies email mail post dm chat")
# The verbs that make a new thing; with a message-like noun they send it (`add_message`), while
# `modify_email` or `delete_message` act on one already there.
CREATING_VERBS = _set("add create write insert append put new make")
# `add X to Y`, `invite X to Y`: the verbs that put someone somewhere.
ADDING_VERBS = _set("add invite grant assign")
# A reading verb over one of these nouns reads the web: a fetch, not a read.
WEB_NOUNS = _set("url uri webpage web website page link http https html site")
DELETE_WORDS = _set("delete remove drop purge wipe destroy erase truncate trash unlink rm del shred")
# Verbs that take someone or something away: a person-shaped parameter there is not a destination.
REMOVING_VERBS = DELETE_WORDS | _set(
    "revoke unassign cancel leave unsubscribe decline reject dismiss clear reset"
)
PATH_WORDS = _set("path paths filepath filepaths dir dirs directory directories folder folders dirpath")
MOVE_VERBS = _set("move copy rename")
MOVE_PARAMS = _set("source destination dest target src")

STRONG_DEST_WORDS = _set(
    "cc bcc iban phone phones mobile sms recipient recipients participant participants attendee "
    "attendees guest guests invitee invitees member members webhook webhooks assignee assignees reviewer "
    "reviewers forward wallet"
)
STRONG_DEST_PREFIXES = ("recipient", "webhook", "share", "invitee", "member", "attendee", "participant")
WEAK_DEST_WORDS = _set(
    "url urls uri uris link links href host hostname hosts domain domains user users username usernames "
    "userid endpoint endpoints destination destinations dest"
)
WEAK_DEST_PREFIXES = ("channel",)
URL_WORDS = _set("url urls uri uris link links href")
MAIL_CONTEXT = _set("mail email emails message send reply forward transfer pay wallet")
DEST_FORMATS = _set("email idn-email uri uri-reference iri iri-reference hostname idn-hostname")
URL_FORMATS = _set("uri uri-reference iri iri-reference")
NON_TEXT_TYPES = frozenset({"boolean", "number", "integer", "null"})
# A destination word followed by one of these names a property of the message, not a place:
# `email_subject`, `recipient_count`, `emailMessage`.
CONTENT_SUFFIXES = _set(
    "message messages body subject text content html template format type types count enabled verified "
    "notification notifications label labels style length size limit status"
)

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def words(name: str) -> list[str]:
    """Name parts, lowercased: `sendSMS_to-user` -> send, sms, to, user."""
    return [w.lower() for part in _SPLIT.split(name) for w in _CAMEL.findall(part)]


@dataclass(frozen=True)
class Guess:
    entry: ToolEntry
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Param:
    path: str
    reason: str
    strong: bool
    url: bool


# ---- parameters ---------------------------------------------------------------------------------


def _name_reason(parts: list[str], mail_context: bool) -> tuple[str, bool] | None:
    """(why, strong) if a parameter name looks like it carries a destination."""
    if not parts or (len(parts) > 1 and parts[-1] in CONTENT_SUFFIXES):
        return None
    if parts[:3] == ["in", "reply", "to"]:
        return None  # a message id (`inReplyTo`), not an address
    if parts[0] == "to" or parts[-1] == "to":
        return "name part 'to'", True
    for p in parts:
        if p in STRONG_DEST_WORDS:
            return f"name part {p!r}", True
        if p.startswith(STRONG_DEST_PREFIXES):
            return f"name part {p!r}", True
        if "email" in p and parts[-1] not in ("id", "ids"):
            return f"name part {p!r} (contains 'email')", True
    if "address" in parts and (mail_context or MAIL_CONTEXT & set(parts)):
        return "name part 'address' in a mail context", True
    if "account" in parts and ({"number", "iban"} & set(parts)):
        return "name parts 'account' + 'number'", True
    if "user" in parts and "id" in parts:
        return "name parts 'user' + 'id'", False
    for p in parts:
        if p in WEAK_DEST_WORDS or p.startswith(WEAK_DEST_PREFIXES):
            return f"name part {p!r}", False
        if p.endswith("url") or p.endswith("uri"):
            return f"name part {p!r} (ends in 'url')", False
    return None


def looks_like_destination(name: str) -> bool:
    """Whether a parameter name alone looks like it carries a destination (for undeclared parameters
    next to declared sinks: `recipients` beside a declared `to`)."""
    return _name_reason(words(name), mail_context=False) is not None


def _deref(schema: Any, root: Mapping[str, Any]) -> Any:
    hops = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and hops < MAX_REF_HOPS:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if target is None:
            return schema
        schema = target
        hops += 1
    return schema


def _variants(schema: Any, root: Mapping[str, Any], depth: int = 0) -> Iterator[Mapping[str, Any]]:
    """The schema itself, its array items and its anyOf/oneOf/allOf alternatives, dereferenced."""
    schema = _deref(schema, root)
    if not isinstance(schema, Mapping) or depth > MAX_SCHEMA_DEPTH:
        return
    yield schema
    items = schema.get("items")
    for item in items if isinstance(items, list) else [items] if items is not None else []:
        yield from _variants(item, root, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        alts = schema.get(key)
        if isinstance(alts, list):
            for alt in alts:
                yield from _variants(alt, root, depth + 1)


def _format(schema: Any, root: Mapping[str, Any]) -> str | None:
    for variant in _variants(schema, root):
        fmt = variant.get("format")
        if isinstance(fmt, str) and fmt in DEST_FORMATS:
            return fmt
    return None


def _non_text(schema: Any, root: Mapping[str, Any]) -> bool:
    """True when every alternative of the schema is a boolean, number or null."""
    types: set[str] = set()
    for variant in _variants(schema, root):
        t = variant.get("type")
        if isinstance(t, str):
            types.add(t)
        elif isinstance(t, list):
            types.update(x for x in t if isinstance(x, str))
        elif not any(k in variant for k in ("anyOf", "oneOf", "allOf", "items")):
            return False  # untyped: could be anything
    return bool(types) and types <= NON_TEXT_TYPES


def destination_params(input_schema: Mapping[str, Any] | None, mail_context: bool = False) -> list[Param]:
    """Destination-shaped parameters of a schema, as dotted paths (lists are walked transparently)."""
    out: list[Param] = []
    if isinstance(input_schema, Mapping):
        _walk(input_schema, input_schema, "", 0, mail_context, out)
    return out


def _walk(
    schema: Any, root: Mapping[str, Any], path: str, depth: int, mail_context: bool, out: list[Param]
) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        return
    for variant in _variants(schema, root):
        props = variant.get("properties")
        if not isinstance(props, Mapping):
            continue
        for name, sub in props.items():
            if not isinstance(name, str) or any(p.path == (f"{path}.{name}" if path else name) for p in out):
                continue
            here = f"{path}.{name}" if path else name
            if _non_text(sub, root):
                continue
            parts = words(name)
            named = _name_reason(parts, mail_context)
            fmt = _format(sub, root)
            if named is not None:
                why, strong = named
                url = bool(URL_WORDS & set(parts)) or any(p.endswith(("url", "uri")) for p in parts)
                out.append(Param(here, why, strong, url or fmt in URL_FORMATS))
            elif fmt is not None:
                out.append(Param(here, f"schema format {fmt!r}", fmt.endswith("email"), fmt in URL_FORMATS))
            else:
                _walk(sub, root, here, depth + 1, mail_context, out)


def _path_params(input_schema: Mapping[str, Any] | None, verb: str | None) -> list[str]:
    if not isinstance(input_schema, Mapping):
        return []
    props = input_schema.get("properties")
    if not isinstance(props, Mapping):
        return []
    out: list[str] = []
    for name, sub in props.items():
        if not isinstance(name, str) or _non_text(sub, input_schema):
            continue
        parts = words(name)
        if not parts or "id" in parts or "ids" in parts:
            continue
        pathlike = bool(PATH_WORDS & set(parts)) or parts[-1].endswith("path")
        if pathlike or (verb in MOVE_VERBS and MOVE_PARAMS & set(parts)):
            out.append(name)
    return out


# ---- the tool -----------------------------------------------------------------------------------


def verb_of(parts: list[str]) -> tuple[str | None, str | None]:
    """(kind, verb): kind is send, fetch, read, mutate, or None when no verb is recognised."""
    for p in parts:
        if p in STRONG_SEND_VERBS:
            return "send", p
        if p in FETCH_VERBS:
            return "fetch", p
        if p in READ_VERBS:
            return "read", p
        if p in MUTATE_VERBS:
            return "mutate", p
    for p in parts:
        if p in WEAK_SEND_VERBS:
            return "send", p
    return None, None


def classify(tool_name: str, input_schema: Mapping[str, Any] | None) -> Guess:
    """The fallback's entry for a tool without one, and the notes that explain it."""
    parts = words(tool_name)
    kind, verb = verb_of(parts)
    mail_context = bool(MAIL_CONTEXT & set(parts))
    params = destination_params(input_schema, mail_context)
    notes = [f"parameter {p.path!r} matched {p.reason}" for p in params]
    deletion = kind != "read" and bool(DELETE_WORDS & set(parts))
    if deletion:
        notes.append(f"tool name part {sorted(DELETE_WORDS & set(parts))[0]!r} marks a deletion")
    writes = tuple(_path_params(input_schema, verb)) if kind != "read" else ()
    if input_schema is None:
        notes.append("no input schema: parameter names unknown")

    def entry(gate: bool, sink_kind: str = "send", sinks: list[Param] | None = None) -> ToolEntry:
        if not gate:
            return ToolEntry(exfiltrating=False, deletion=deletion, write_params=writes or None)
        return ToolEntry(
            exfiltrating=True,
            sink_kind="fetch" if sink_kind == "fetch" else "send",
            sink_params=tuple(p.path for p in sinks or []),
            deletion=deletion,
            write_params=writes or None,
        )

    url_params = [p for p in params if p.url]
    web_read = kind == "read" and bool(WEB_NOUNS & set(parts))
    if (kind == "fetch" or web_read) and url_params:
        notes.append(f"tool name verb {verb!r} fetches a URL: a fetch sink")
        return Guess(entry(True, "fetch", url_params), tuple(notes))
    if kind in ("read", "fetch"):
        if params:
            notes.append(f"tool name verb {verb!r} reads: not gated")
        return Guess(entry(False), tuple(notes))
    if kind == "send":
        if params:
            notes.append(f"tool name verb {verb!r} sends: gated on its destination parameters")
        else:
            notes.append(
                f"tool name verb {verb!r} sends, and no parameter looks like a destination: "
                f"every argument is a sink"
            )
        return Guess(entry(True, "send", params), tuple(notes))
    if kind == "mutate":
        strong = [p for p in params if p.strong]
        if verb in ADDING_VERBS and "to" in parts[1:]:
            notes.append(f"tool name {verb!r} ... 'to' adds someone somewhere: gated as a send")
            return Guess(entry(True, "send", params), tuple(notes))
        if verb in CREATING_VERBS and SENT_THINGS & set(parts):
            notes.append(f"tool name verb {verb!r} writes a message-like thing: gated as a send")
            return Guess(entry(True, "send", params), tuple(notes))
        if strong and verb not in REMOVING_VERBS:
            notes.append(f"tool name verb {verb!r} with a person-shaped parameter: gated as a send")
            return Guess(entry(True, "send", strong), tuple(notes))
        return Guess(entry(False), tuple(notes))
    if params:
        notes.append("no recognisable verb in the tool name, but destination-shaped parameters: a send")
        return Guess(entry(True, "send", params), tuple(notes))
    return Guess(entry(False), tuple(notes))


def fallback_rule(tool_name: str, input_schema: Mapping[str, Any] | None) -> ToolRule:
    """The fallback's verdict on its own, as a complete rule (source "fallback")."""
    guess = classify(tool_name, input_schema)
    return resolve(tool_name, [(FALLBACK_SOURCE, guess.entry)], guess.notes)
