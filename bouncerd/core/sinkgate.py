"""The sink gate: where is this call sending data, and where did each destination come from?
(docs/how-it-works.md, "The decision", step 4)

Theory of operation
-------------------
1. *Which values are destinations* (`sinkdest`). A tool with `exfiltrating: true` declares its sink
   parameters. If it declares none, or any declared one is absent or empty in this call, the call is
   ambiguous and every argument becomes a sink (an attacker who puts the address in an undeclared field
   gains nothing). Dict keys and values, lists and nested objects are all walked, so
   `{"recipients": {"a@x.com": "Ann"}}` yields both the address and the display name.
2. *Classify each destination*, strongest first:
   trusted (allowlist, trusted domain, approved, vouched by the user) → allow. Trust beats taint: the
   user named it, and an attacker gains nothing by making you mail your own colleague;
   tainted (seen in untrusted output) → deny, or ask when it was seen only in identity fields (the
   sender of a mail you want to answer) or when the tool says `on_tainted: ask`;
   evicted (seen, provenance forgotten at the memory bound) → ask;
   unproven → ask.
3. *Combine*: any deny → deny; else any ask → ask; else allow. The reason names the first destination
   that decided it and where it was seen, and never repeats other untrusted text.

Fetch sinks (`sink_kind: fetch`) retrieve a URL instead of delivering to it: a URL fetched exactly as it
appeared carries nothing of the user's → allow; a URL on a tainted host with a path, query or fragment
that did not appear → deny (data smuggled into the URL); any other URL → allow (recorded in the audit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote, unquote_plus

from bouncerd.core import canon, shapes, tokens, typed, url
from bouncerd.core.fallback import words
from bouncerd.core.model import Provenance, Verdict
from bouncerd.core.sinkdest import SHOWN_DESTINATION_CHARS as SHOWN_DESTINATION_CHARS
from bouncerd.core.sinkdest import Destination as Destination
from bouncerd.core.sinkdest import assembled as assembled
from bouncerd.core.sinkdest import destination_shaped as destination_shaped
from bouncerd.core.sinkdest import destinations as destinations
from bouncerd.core.sinkdest import leaves as leaves
from bouncerd.core.sinkdest import local_path, read_as, smuggled_destinations
from bouncerd.core.sinkdest import readings_text as readings_text
from bouncerd.core.sinkdest import shown as shown
from bouncerd.core.taint import Hit


@dataclass(frozen=True)
class Trust:
    """Everything that makes a destination trusted for this call. Keys are canonical (canon.keys)."""

    destinations: frozenset[str]  # allowlist + approvals + vouched, as canonical keys
    domains: frozenset[str]  # trusted domains, lowercased, IDNA-decoded
    why: Mapping[str, str]  # canonical key -> "allowlisted" | "approved" | "vouched"
    # Wide keys a directory tool listed in identity fields (the user's contacts, members, attendees,
    # counterparties) -> that tool. Weaker than the rest: free text anywhere outranks it (`classify`).
    listed: Mapping[str, str] = field(default_factory=dict)


# A tool that changes an existing object of the user's (a scheduled payment, an event) sends nothing new
# when its call leaves the destination parameter out: the object keeps the recipient it has. A name
# that also says it sends (`update_and_notify`) is not one of these.
_EDIT_VERBS = frozenset({"update", "edit", "modify", "change", "set", "patch", "reschedule", "rename"})
_SENDING_WORDS = frozenset(
    {"send", "forward", "share", "invite", "notify", "post", "publish", "reply", "email", "mail", "message",
     "transfer", "pay", "deliver", "dispatch", "broadcast", "upload", "sms", "dm", "webhook", "callback"}
)  # fmt: skip


# Creating verbs: a new object's values are all the agent's, and may be the injection's ("create an
# event titled ..."). Without a destination such a call is allowed only when the user's prompt asked for
# that kind of object (`_creates_what_you_asked`).
_CREATE_VERBS = frozenset({"create", "add", "new", "make", "insert"})


# A resource-then-verb name (`calendar.events.insert`, `events.update`) has its verb last; more words
# than this before it are a phrase, not a resource path.
MAX_RESOURCE_WORDS = 3


def _verb_and_object(tool: str) -> tuple[str, list[str]]:
    """The verb of a tool's name and the words of what it acts on: the first word (`create_event`), or
    the last of a short resource path whose first word is no verb of ours (`calendar.events.insert`)."""
    parts = words(tool)
    if not parts:
        return "", []
    known = _CREATE_VERBS | _EDIT_VERBS
    if parts[0] not in known and len(parts) <= MAX_RESOURCE_WORDS and parts[-1] in known:
        return parts[-1], parts[:-1]
    return parts[0], parts[1:]


def _creates_what_you_asked(tool: str, trust: Trust) -> str | None:
    """`creates the event you asked for` when the tool's name creates something the user's prompt named
    (a word of the tool's object, singular or plural, typed: "add an event to my calendar"), else None."""
    verb, nouns = _verb_and_object(tool)
    if verb not in _CREATE_VERBS or _SENDING_WORDS.intersection(words(tool)):
        return None
    for noun in nouns:
        for form in (noun, noun.removesuffix("s"), noun + "s"):
            key = typed.typed_key(form)
            if len(form) > 2 and key is not None and key in trust.destinations:
                return f"creates the {noun} your prompt asked for"
    return None


def edits_in_place(tool: str) -> bool:
    """Whether a tool's name says it changes an existing object and says nothing of sending."""
    return _verb_and_object(tool)[0] in _EDIT_VERBS and not _SENDING_WORDS.intersection(words(tool))


def _where(prov: Provenance | None) -> str:
    if prov is None:
        return "in earlier untrusted output (details evicted from memory)"
    tool = f"/{prov.tool}" if prov.tool else ""
    field = f", field {prov.field}" if prov.field else ""
    return f"in the output of {prov.server}{tool} (request {prov.request_id!r}{field})"


def _inside_orders(prov: Provenance | None) -> str:
    """Where the sighting sat inside text giving the agent orders: the marker, in our own words (the
    text itself is the attacker's and is never repeated)."""
    if prov is None or prov.orders is None:
        return ""
    return f", inside text that gives the agent orders to send there (marker: {prov.orders!r})"


def trusted_reason(dest: Destination, trust: Trust) -> str | None:
    """Why the destination is trusted, or None. A value with more than one reading has no trust key, so
    only an approval of it exactly as written can trust it (`canon.keys(exact=True)`)."""
    for key in canon.keys(dest.value, exact=True):
        if key in trust.destinations:
            return trust.why.get(key, "allowlisted")
    typed_as = typed.typed_key(dest.value)  # a plain name, a channel, an account as the user typed it
    if typed_as is not None and typed_as in trust.destinations:
        return trust.why.get(typed_as, "typed by you")
    host = canon.domain(dest.value)
    if host is not None:
        for dom in trust.domains:
            if host == dom or host.endswith("." + dom):
                return "trusted domain"
    return None


def _with_assembled(
    results: list[Classified], arguments: Mapping[str, Any], trust: Trust, lookup: Callable[[str], Hit | None]
) -> list[Classified]:
    """Results with the destinations that pairs of arguments spell: a tainted one is refused like any
    other; a trusted one (`alice` + `corp.example` allowlisted as `alice@corp.example`) vouches for its
    parts; an unproven one adds nothing (its parts are judged on their own)."""
    extra: list[Classified] = []
    trusted_parts: dict[str, str] = {}
    for d in assembled(arguments):
        c = classify(d, trust, lookup)
        if c.state in ("tainted", "tainted_identity", "tainted_named"):
            extra.append(c)
        elif c.state == "trusted":
            for p in d.parts:
                trusted_parts[p] = f"part of {d.value!r}, {c.why}"
    if trusted_parts:
        results = [
            replace(c, state="trusted", why=trusted_parts[c.dest.parameter])
            if c.dest.parameter in trusted_parts
            and c.state not in ("tainted", "tainted_identity", "tainted_named")
            else c
            for c in results
        ]
    return extra + results


@dataclass(frozen=True)
class Classified:
    dest: Destination
    state: str  # trusted | tainted | tainted_named | tainted_identity | evicted | ambiguous | unproven
    why: str | None = None  # for trusted: why
    provenance: Provenance | None = None


def classify(dest: Destination, trust: Trust, lookup: Callable[[str], Hit | None]) -> Classified:
    """Strongest first: trusted (allowlisted, approved, typed by you); tainted in free text (planted);
    listed by your own directory; seen in a source your prompt named; seen only as a sender or
    participant; evicted; unproven (or ambiguous: more than one reading)."""
    why = trusted_reason(dest, trust)
    if why is not None:
        return Classified(dest, "trusted", why=why)
    if local_path(dest.value):  # `to_path` of a move: nothing leaves the machine
        return Classified(dest, "trusted", why="a path on this machine")
    hit = lookup(dest.value)
    if hit is not None and hit.state == "tainted" and not hit.identity_only:
        return Classified(dest, "tainted", provenance=hit.provenance)
    listed = _listed_by(dest, trust)
    if listed is not None and (hit is None or hit.state == "tainted"):
        return Classified(dest, "trusted", why=f"listed by {listed}, your own directory")
    if hit is None:
        return Classified(dest, "unproven" if canon.reading(dest.value).single else "ambiguous")
    if hit.state == "evicted":
        return Classified(dest, "evicted")
    if hit.provenance is not None and hit.provenance.named is not None:
        # A source the user named may be honest ("her address is on her website"), unless the address
        # sits in text of it that gives the agent orders to send there (`provenance.orders`): then
        # `send_verdict` denies it as the injection it is.
        return Classified(dest, "tainted_named", provenance=hit.provenance)
    return Classified(dest, "tainted_identity", provenance=hit.provenance)


def _listed_by(dest: Destination, trust: Trust) -> str | None:
    """The directory tool that listed this destination, if any. Only a plain ASCII value that reads one
    way: the listed keys are folded wide, and a look-alike must not borrow a contact's standing."""
    if not trust.listed:
        return None
    value = dest.value.strip()
    if not value.isascii() or not value.isprintable():
        return None
    c = canon.canonicalize(value)
    if c.kind != "text" and not canon.reading(value).single:
        return None
    return trust.listed.get(c.key)


def send_verdict(
    arguments: Mapping[str, Any],
    *,
    tool: str,
    sink_params: Sequence[str],
    trust: Trust,
    lookup: Callable[[str], Hit | None],
    on_tainted: str,
    on_tainted_identity: str,
    looks_like_destination: Callable[[str], bool] = lambda _name: False,
) -> Verdict:
    dests, everything = destinations(arguments, sink_params, looks_like_destination)
    if not dests and sink_params:
        updates = edits_in_place(tool)
        why = "changes an existing object" if updates else _creates_what_you_asked(tool, trust)
        if why is not None:
            return Verdict(
                "allow",
                "sink.no_new_destination",
                f"{tool} {why} and this call names no destination: its declared destination parameter "
                f"({', '.join(sink_params)}) is absent or empty and no other argument can name where data "
                f"goes",
            )
    if not dests:
        # A sending tool called with nothing we can read as a destination: we cannot tell where it goes.
        return Verdict(
            "ask",
            "sink.no_destination",
            f"{tool} sends data but this call names no destination Bouncer can check",
        )
    smuggling = smuggled_destinations(arguments, {d.parameter for d in dests})
    if isinstance(smuggling, Verdict):
        return smuggling
    results = [classify(d, trust, lookup) for d in [*dests, *smuggling]]
    results = _with_assembled(results, arguments, trust, lookup)
    for c in results:
        if (c.state == "tainted" and on_tainted == "deny") or (
            c.state == "tainted_identity" and on_tainted_identity == "deny" and on_tainted == "deny"
        ):
            return Verdict(
                "deny",
                "sink.tainted_destination",
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r}{read_as(c.dest)} "
                f"first appeared {_where(c.provenance)}{_inside_orders(c.provenance)}; sending there could "
                f"carry your data to whoever planted it. If this destination is really yours, add it to "
                f"trusted_destinations in your policy",
                destination=c.dest.value,
                parameter=c.dest.parameter,
                provenance=c.provenance,
            )
        if (
            c.state == "tainted_named"
            and on_tainted == "deny"
            and c.provenance is not None
            and c.provenance.orders is not None
        ):
            return Verdict(
                "deny",
                "sink.named_source_orders",
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r}{read_as(c.dest)} "
                f"appeared in a source your prompt named ({c.provenance.named}), "
                f"{_where(c.provenance)}{_inside_orders(c.provenance)}: that is an injection in the source, "
                f"not the destination you asked for. If this destination is really yours, add it to "
                f"trusted_destinations in your policy",
                destination=c.dest.value,
                parameter=c.dest.parameter,
                provenance=c.provenance,
            )
    for c in results:
        if c.state == "tainted_named" and c.provenance is not None:
            return Verdict(
                "ask",
                "sink.tainted_named_source",
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r} appeared in a source "
                f"your prompt named ({c.provenance.named}), {_where(c.provenance)}; that source may carry "
                f"an injection too, so a person must confirm it",
                destination=c.dest.value,
                parameter=c.dest.parameter,
                provenance=c.provenance,
            )
        if c.state in ("tainted", "tainted_identity"):
            rule = "sink.tainted_identity" if c.state == "tainted_identity" else "sink.tainted_ask"
            what = "appeared only as a sender/participant" if c.state == "tainted_identity" else "appeared"
            return Verdict(
                "ask",
                rule,
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r} {what} "
                f"{_where(c.provenance)}; a person must confirm it",
                destination=c.dest.value,
                parameter=c.dest.parameter,
                provenance=c.provenance,
            )
    for c in results:
        if c.state == "ambiguous":
            return Verdict(
                "ask",
                "sink.ambiguous_reading",
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r} can be read more "
                f"than one way ({readings_text(c.dest.value)}), so no allowlist can vouch for it; "
                f"a person must confirm it",
                destination=c.dest.value,
                parameter=c.dest.parameter,
            )
    for c in results:
        if c.state in ("evicted", "unproven"):
            rule = (
                "sink.evicted"
                if c.state == "evicted"
                else ("sink.ambiguous" if everything else "sink.unproven")
            )
            detail = {
                "sink.evicted": "was seen in untrusted output earlier (details no longer kept)",
                "sink.ambiguous": "is in a call whose destination parameter is missing or empty, so every "
                "argument is treated as a destination",
                "sink.unproven": "is not allowlisted, approved or typed by you",
            }[rule]
            return Verdict(
                "ask",
                rule,
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r} {detail}",
                destination=c.dest.value,
                parameter=c.dest.parameter,
            )
    first = results[0]
    return Verdict(
        "allow",
        "sink.trusted",
        f"every destination is trusted ({first.dest.parameter}: {first.why})",
        destination=first.dest.value,
        parameter=first.dest.parameter,
    )


MAX_CARRIED_LABELS = 12  # host labels read for planted names inside them (a DNS name has at most 127)
MAX_CARRIED_QUERY_CHARS = 8192  # longer URLs are read by their tokens only (url.parse refuses them)
_QUERY_PARTS = re.compile(r"[&;=]")


def _nested_in_path(path: str) -> list[str]:
    """The keys of a URL or host named in a fetched URL's path, as reader and archive proxies take them
    (`r.jina.ai/https://evil.example/x`, `web.archive.org/save/…`, `proxy.example/evil.example/x`,
    `/u/https%3A%2F%2Fevil.example`): the proxy fetches that one, with whatever the agent put in it."""
    text = unquote(path) if "%" in path else path
    out: list[str] = []
    at = text.find("://")
    if at > 0:
        start = at
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
            start -= 1
        out += sorted(tokens.text_keys(text[start:]))
    for segment in text.split("/")[1:3]:  # a host as the first path segments: `/evil.example/x`
        if "." in segment and shapes.host_key(segment) is not None:
            out += sorted(tokens.text_keys(segment))
    return out


def carried_keys(value: str) -> list[str]:
    """The keys a fetched URL (or a looked-up host name) carries besides its own host and path: every
    run of two or more labels of its host (`x.evil.example.attacker.net` carries `evil.example` and
    `attacker.net`), and every destination token in its userinfo, path, query or fragment (decoded:
    a URL nested in a query parameter, an address in a path)."""
    c = canon.canonicalize(value)
    own = {*c.hosts, c.key}
    out: list[str] = []
    for host in c.hosts[:2]:
        if host.startswith("["):
            continue
        labels = host.split(".")[-MAX_CARRIED_LABELS:]
        for i in range(len(labels)):
            for j in range(i + 2, len(labels) + 1):
                run = ".".join(labels[i:j])
                if run != host and shapes.host_key(run) is not None:
                    out.append(run)
    prefixes = {k for k in c.probes if any(k.startswith(h + "/") or k.startswith(h + ":") for h in c.hosts)}
    out += [k for k in c.probes if k not in own and k not in prefixes]
    parsed = url.parse(value) if len(value) <= MAX_CARRIED_QUERY_CHARS else None
    if parsed is not None and parsed.path.startswith("/"):
        out += _nested_in_path(parsed.path)
    if parsed is not None and parsed.query:
        # `?next=https%3A%2F%2Fevil.example%2F`: each parameter read on its own, as its server decodes it
        for part in _QUERY_PARTS.split(parsed.query):
            if len(part) >= shapes.MIN_KEY_CHARS:
                out += sorted(tokens.text_keys(unquote_plus(part)))
    return [k for k in dict.fromkeys(out) if len(k) >= shapes.MIN_KEY_CHARS]


# A fetch that carries more than its URL is a send to that URL: a request body, headers, form fields,
# a method that is not a plain read, or a URL the server will call back with its results.
PAYLOAD_WORDS = frozenset(
    {
        "body",
        "data",
        "json",
        "form",
        "payload",
        "headers",
        "header",
        "cookie",
        "cookies",
        "upload",
        "attachment",
        "attachments",
        "file",
        "files",
        "multipart",
        "post",
    }
)
READ_METHODS = frozenset({"", "get", "head", "options"})
CALLBACK_WORDS = frozenset({"webhook", "callback", "hook", "postback", "notify", "notification"})


def _has_value(value: Any) -> bool:
    return value not in (None, "", [], {}, False)


def fetch_payload(
    arguments: Mapping[str, Any],
    sink_params: Sequence[str],
    looks_like_destination: Callable[[str], bool] = lambda _name: False,
) -> str | None:
    """The parameter that makes a fetch a send (`PAYLOAD_WORDS`, a method other than `READ_METHODS`,
    a callback URL among its sink parameters, a recipient such as `to`), or None for a plain read."""
    sinks = {_top(p) for p in sink_params}
    for name in sinks:
        if CALLBACK_WORDS.intersection(words(name)) and _has_value(arguments.get(name)):
            return name
    for name, value in arguments.items():
        key = str(name)
        if key in sinks or not _has_value(value):
            continue
        named = words(key)
        if named and named[-1] == "method":
            if not isinstance(value, str) or value.strip().lower() not in READ_METHODS:
                return key
        elif PAYLOAD_WORDS.intersection(named) or looks_like_destination(key):
            return key
    return None


def _top(parameter: str) -> str:
    return re.split(r"[.\[]", parameter, maxsplit=1)[0]


def fetch_verdict(
    arguments: Mapping[str, Any],
    *,
    tool: str,
    sink_params: Sequence[str],
    trust: Trust,
    seen_exactly: Callable[[str], bool],
    host_hit: Callable[[str], Hit | None],
    key_hit: Callable[[str], Hit | None] | None = None,
    what: str = "fetching",
) -> Verdict:
    """A URL fetched exactly as it appeared is allowed; a new path, query or fragment on a host seen in
    output is denied, and so is a URL that carries a planted destination anywhere else (`carried_keys`,
    looked up with `key_hit`); a URL that reads more than one way is asked; any other URL is allowed."""
    dests, _ = destinations(arguments, sink_params)
    ambiguous: Destination | None = None
    for d in [*dests, *assembled(arguments)]:
        if trusted_reason(d, trust) is not None or seen_exactly(d.value):
            continue
        hit = host_hit(d.value)
        if hit is not None:
            if hit.state == "evicted":
                return Verdict(
                    "ask",
                    "fetch.evicted",
                    f"URL {shown(d.value)} in argument {d.parameter!r} is on a host seen in untrusted output "
                    f"earlier, with a path or query that did not appear there",
                    destination=d.value,
                    parameter=d.parameter,
                )
            if hit.identity_only and hit.provenance is not None and hit.provenance.named is not None:
                return Verdict(
                    "ask",
                    "fetch.named_source",
                    f"URL {shown(d.value)} in argument {d.parameter!r} is on a host that appeared in a "
                    f"source your prompt named ({hit.provenance.named}), {_where(hit.provenance)}, with a "
                    f"path or query that did not appear there; a person must confirm it",
                    destination=d.value,
                    parameter=d.parameter,
                    provenance=hit.provenance,
                )
            return Verdict(
                "deny",
                "fetch.tainted_host_new_path",
                f"URL {shown(d.value)} in argument {d.parameter!r}{read_as(d)} is on a host that first "
                f"appeared {_where(hit.provenance)}, but with a path, query or fragment that did not "
                f"appear there: {what} it could smuggle your data out in the URL",
                destination=d.value,
                parameter=d.parameter,
                provenance=hit.provenance,
            )
        if key_hit is not None:
            for key in carried_keys(d.value):
                carried = key_hit(key)
                if carried is not None and carried.state == "tainted":
                    return Verdict(
                        "deny",
                        "fetch.carries_tainted",
                        f"URL {shown(d.value)} in argument {d.parameter!r} carries {shown(key)} (in its host "
                        f"name, path or query), which first appeared {_where(carried.provenance)}: {what} it "
                        f"would hand that name, and whatever rides with it, to whoever planted it",
                        destination=d.value,
                        parameter=d.parameter,
                        provenance=carried.provenance,
                    )
        if ambiguous is None and not canon.reading(d.value).single:
            ambiguous = d
    if ambiguous is not None:
        return Verdict(
            "ask",
            "fetch.ambiguous_reading",
            f"URL {shown(ambiguous.value)} in argument {ambiguous.parameter!r} can be read more than one way "
            f"({readings_text(ambiguous.value)}); a person must confirm it",
            destination=ambiguous.value,
            parameter=ambiguous.parameter,
        )
    return Verdict(
        "allow",
        "fetch.allowed",
        f"{tool}: {what} URLs that carry nothing seen in untrusted output",
        destination=dests[0].value if dests else None,
    )
