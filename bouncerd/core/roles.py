"""Recipients a prompt describes by their role in an object it names: "reply on ticket 42 to its reporter".

Theory of operation
-------------------
"Email the customer of order 1182 their invoice" types no address: the customer's is in the order the
agent reads (`orders.get` → `order.customer.email`). An identity field of an output is asked about before
a send (`sink.tainted_identity`) because anyone can file a ticket or place an order. But when the prompt
names the object by an id the user typed (`42`, `SUP-42`, `#1182`, `INV-7`) and the recipient by a role
in it ("its reporter", "the customer of", "whoever reported ENG-42"), the value of that role's identity
field in *that* object is the recipient the user chose: whoever filed ticket 42 is who they asked to
answer. `role_keys` keeps each (role, id) pair a prompt describes as a vouched key behind
`ROLE_KEY_MARK`; `role_listed` finds, in one output, the destinations that are such a value, which the
engine lists for the session as a directory's contacts are listed (`sinkgate.listed_by`: a plain ASCII
value with one reading, and never a key also seen in free text).

A value counts only when all of these hold, else it stays what it was (asked):
- it is an identity field's whole value as the taint walk read it (`Provenance.identity`; free text, a
  forged line of a printed listing, a "my new address is" in a comment never are);
- the record holding it carries the typed id as the whole value of its own id field (`id`, `key`,
  `number`, `order_id`, or a `name` spelt `#1182`), and no other record of that output carries it;
- the path from that record to the value names the role (`fields.reporter.emailAddress`,
  `customer.email`, `customer_email`) and crosses no list (a comment's author, a watcher in a list of
  them, belongs to a record of its own).
Roles come in classes of words that mean the same party (`ROLE_CLASSES`): the reporter of a ticket is
its requester and its creator; its assignee, a watcher or a commenter are other parties.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from bouncerd.core import described, taint

ROLE_KEY_MARK = "\x00role:"
ROLE_SOURCE_MARK = "role:"  # how a listed destination's source says it came from a described role
MAX_ROLES = 32  # a prompt describes a few recipients; more is a paste
MAX_RECORD_DEPTH = 32  # as `described`
MAX_READ_BYTES = 1 << 20  # as `described`
MAX_ID_CHARS = 32

# Words for one party of an object, by the field-name words that spell it. A role word of the prompt
# stands for its whole class, never for another class.
ROLE_CLASSES: tuple[tuple[str, ...], ...] = (
    ("reporter", "requester", "creator", "author", "submitter", "opener", "filer"),
    ("customer", "buyer", "purchaser", "client", "orderer"),
    ("sender", "from"),
    ("assignee",),
    ("owner",),
    ("organizer", "organiser"),
    ("payee", "vendor", "supplier", "seller"),
)
# Verbs for what a party did to the object: "whoever reported ENG-42", "the person who placed order 7".
_VERB_ROLES = {
    "reported": "reporter", "filed": "reporter", "opened": "reporter", "created": "reporter",
    "submitted": "reporter", "raised": "reporter", "wrote": "reporter", "placed": "customer",
    "ordered": "customer", "bought": "customer", "purchased": "customer", "sent": "sender",
    "organized": "organizer", "organised": "organizer",
}  # fmt: skip
_ROLE_WORDS = sorted({w for c in ROLE_CLASSES for w in c if w != "from"}, key=len, reverse=True)
_ROLE = rf"(?i:({'|'.join(_ROLE_WORDS)})s?)"
_NOUN = (
    r"(?i:tickets?|issues?|bugs?|cases?|requests?|orders?|invoices?|bills?|purchase\s+orders?|po|prs?|"
    r"pull\s+requests?|merge\s+requests?|mrs?|messages?|emails?|mails?|posts?|events?|meetings?|tasks?|"
    r"stories|story|incidents?|quotes?|receipts?|shipments?|transactions?|payments?|charges?|bookings?|"
    r"reservations?|threads?|conversations?|documents?|files?)"
)
# An id the user typed: a token with a digit (`42`, `SUP-42`, `#1182`, `INV-7`), no sentence punctuation.
_ID = rf"(#?(?=[\w-]*\d)[A-Za-z0-9][\w-]{{0,{MAX_ID_CHARS - 1}}})\b"
_OBJECT = rf"(?:(?P<noun>{_NOUN})\s+(?i:(?:no\.?|number|id)\s+)?)?{_ID}"
_OBJECT_NOUNED = rf"{_NOUN}\s+(?i:(?:no\.?|number|id)\s+)?{_ID}"
# "the reporter of ticket 42", "the customer on order #1182", "the assignee for SUP-42"
_ROLE_OF = re.compile(rf"\b{_ROLE}\s+(?i:of|on|for|in)\s+(?i:the\s+)?{_OBJECT}")
# "ticket 42's reporter"
_POSSESSIVE = re.compile(rf"\b{_OBJECT_NOUNED}['’]s\s+{_ROLE}\b")
# "reply on ticket 42 to its reporter": "its" ties to the object named just before, in the same clause
_ITS = re.compile(rf"\b{_OBJECT_NOUNED}(?P<gap>[^.;!?\n]{{0,60}}?)\b(?i:its|their)\s+{_ROLE}\b")
# "whoever reported ENG-42", "the person who placed order 1182"
_VERB = re.compile(
    rf"\b(?i:whoever|who|the\s+one\s+that)\s+(?i:({'|'.join(_VERB_ROLES)}))\s+(?i:the\s+)?{_OBJECT}"
)
_HAS_ID = re.compile(_ID)

_ID_PARTS = frozenset({"id", "key", "number", "identifier", "no", "num", "ref", "reference"})
# Whose id an id field is: the record's own (`id`, `order_id`, `issueKey`), never another's (`parent_id`,
# `customer_id`): only these words may stand beside an id word.
_ID_NOUNS = frozenset(
    {"ticket", "issue", "bug", "case", "request", "order", "invoice", "bill", "po", "pr", "pull", "merge",
     "mr", "message", "msg", "email", "mail", "post", "event", "meeting", "task", "story", "incident",
     "quote", "receipt", "shipment", "transaction", "payment", "charge", "booking", "reservation",
     "thread", "conversation", "document", "doc", "file", "record", "item", "entry"}
)  # fmt: skip
# Containers between a record and its parties (`fields.reporter` in Jira, `attributes.customer`).
_WRAPPERS = frozenset(
    {"fields", "attributes", "properties", "data", "details", "info", "node", "record", "item"}
)
# Words of a party's value (`email`, `defaultEmailAddress.emailAddress`, `login`): nothing that names
# another party or another time (`previous`, `manager`, `cc`).
_VALUE_PARTS = frozenset(
    {"email", "e", "mail", "address", "default", "primary", "login", "user", "username", "handle", "id",
     "account", "phone", "mobile", "number", "value", "upn", "principal", "name", "display", "uid"}
)  # fmt: skip
_FIELD_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_SEGMENT = re.compile(r"\.|(?=\[)")


def role_class(word: str) -> tuple[str, ...] | None:
    w = word.casefold()
    w = _VERB_ROLES.get(w, w)
    for c in ROLE_CLASSES:
        if w in c or (w.endswith("s") and w[:-1] in c):
            return c
    return None


def normal_id(value: str) -> str:
    return value.strip().lstrip("#").casefold()


def _canonical_role(word: str) -> str | None:
    c = role_class(word)
    return c[0] if c is not None else None


def role_keys(prompt: str) -> set[str]:
    """The (role, object id) pairs a prompt describes, as vouched keys (`ROLE_KEY_MARK` role NUL id)."""
    found: list[tuple[str, str]] = []
    for m in _ROLE_OF.finditer(prompt):
        if m.group("noun") is not None or not m.group(3).isdigit():  # "the sender of the 3 mails": a count
            found.append((m.group(1), m.group(3)))
    for m in _POSSESSIVE.finditer(prompt):
        found.append((m.group(2), m.group(1)))
    for m in _ITS.finditer(prompt):
        if _HAS_ID.search(m.group("gap")) is None:  # another object named in between: "its" is unclear
            found.append((m.group(3), m.group(1)))
    for m in _VERB.finditer(prompt):
        if m.group("noun") is not None or not m.group(3).isdigit():
            found.append((m.group(1), m.group(3)))
    keys: list[str] = []
    for word, ident in found:
        role = _canonical_role(word)
        if role is not None and normal_id(ident):
            keys.append(f"{ROLE_KEY_MARK}{role}\x00{normal_id(ident)}")
    return set(list(dict.fromkeys(keys))[:MAX_ROLES])


def described_roles(vouched: Iterable[str]) -> frozenset[tuple[str, str]]:
    """The (role, id) pairs among a session's vouched keys."""
    out: set[tuple[str, str]] = set()
    for k in vouched:
        if k.startswith(ROLE_KEY_MARK):
            role, _, ident = k[len(ROLE_KEY_MARK) :].partition("\x00")
            out.add((role, ident))
    return frozenset(out)


def _is_id_field(name: str, value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return False
    parts = {p.lower() for p in _FIELD_PARTS.findall(name)}
    if parts & _ID_PARTS and parts <= _ID_PARTS | _ID_NOUNS:
        return True
    return parts == {"name"} and isinstance(value, str) and value.startswith("#")  # `"name": "#1182"`


def _records_by_id(views: Iterable[Any], ids: frozenset[str]) -> dict[str, set[str]]:
    """Per typed id, the paths of the records (in any view) whose own id field is that id."""
    out: dict[str, set[str]] = {}
    for view in views:
        stack: list[tuple[Any, str, int]] = [(view, "", 0)]
        while stack:
            node, path, depth = stack.pop()
            if depth > MAX_RECORD_DEPTH:
                continue
            if isinstance(node, Mapping):
                for k, v in node.items():
                    name = k if isinstance(k, str) else str(k)
                    if _is_id_field(name, v) and normal_id(str(v)) in ids:
                        out.setdefault(normal_id(str(v)), set()).add(path)
                    stack.append((v, f"{path}.{name}" if path else name, depth + 1))
            elif isinstance(node, list):
                stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node))
    return out


def _parts(segment: str) -> list[str]:
    return [p.lower() for p in _FIELD_PARTS.findall(segment)]


def names_role(relative: str, role: str) -> bool:
    """Whether the path from a record to one of its fields is that role's value: wrappers only
    (`fields.`), then a segment naming the role (`reporter`, `customer_email`), then only words of a
    value (`email`, `defaultEmailAddress.emailAddress`). A list, another party (`previous_reporter`,
    `customer.manager`) or a sub-object (`lastComment.author`) is not the role."""
    if "[" in relative:
        return False
    segments = relative.split(".")
    for i, segment in enumerate(segments):
        parts = _parts(segment)
        if any(_canonical_role(p) == role for p in parts if p != "from" or parts == ["from"]):
            rest = [p for p in parts if _canonical_role(p) != role]
            return set(rest) <= _VALUE_PARTS and all(
                set(_parts(s)) <= _VALUE_PARTS for s in segments[i + 1 :]
            )
        if segment.lower() not in _WRAPPERS:
            return False
    return False


def role_listed(
    records: list[taint.TokenRecord], payload: bytes, roles: frozenset[tuple[str, str]]
) -> dict[str, str]:
    """The destinations of one output that are the described role's identity value in the object the
    prompt named, each with the source a question or the audit log shows."""
    if not roles or len(payload) > MAX_READ_BYTES:
        return {}
    views = described._views(payload)
    located = _records_by_id(views, frozenset(i for _, i in roles))
    # Of two records carrying the same typed id (or one path per view that disagree), none is the one.
    paths = {i: next(iter(p)) for i, p in located.items() if len(p) == 1}
    if not paths:
        return {}
    out: dict[str, str] = {}
    for record in records:
        prov = record.provenance
        if not prov.identity or prov.named is not None or prov.orders is not None or prov.field is None:
            continue
        for role, ident in roles:
            path = paths.get(ident)
            if path is None:
                continue
            if path == "":
                relative = prov.field
            elif prov.field.startswith(path + "."):
                relative = prov.field[len(path) + 1 :]
            else:
                continue
            if not names_role(relative, role):
                continue
            out.setdefault(record.token, f"{source_of(role, ident)}, in {prov.tool}")
    return out


def source_of(role: str, ident: str) -> str:
    """How a listed destination's source names the described role (its tool is added after it)."""
    return f"{ROLE_SOURCE_MARK}the {role} of {ident} your prompt named"


def is_role_source(source: str) -> bool:
    return source.startswith(ROLE_SOURCE_MARK)


def shown(source: str) -> str:
    """A role source as a reason shows it: "the reporter of 42 your prompt named, in tickets_show"."""
    return source[len(ROLE_SOURCE_MARK) :]


def unsettled(found: Mapping[str, str], listed: Mapping[str, str]) -> dict[str, str]:
    """Of the destinations one output gives a described role, those to list: a role an earlier output
    already gave another destination in this session (a second ticket 42 elsewhere) gains none."""
    out: dict[str, str] = {}
    for key, source in found.items():
        prefix = source.rsplit(", in ", 1)[0]
        if any(
            k != key and s.rsplit(", in ", 1)[0] == prefix for k, s in listed.items() if is_role_source(s)
        ):
            continue
        if key not in listed:
            out[key] = source
    return out
