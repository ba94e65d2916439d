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

Fetch sinks (`sink_kind: fetch`) are judged by `bouncerd.core.fetchgate`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bouncerd.core import canon, names, roles, typed
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


def where(prov: Provenance | None) -> str:
    """Where an untrusted destination was seen, as a reason says it ("in the output of mail/read_inbox
    (request 7, field body)"); the sink gate and the carried-destination gate both word it so."""
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
    results: list[Classified],
    arguments: Mapping[str, Any],
    trust: Trust,
    lookup: Callable[[str], Hit | None],
    seen: names.ScopeNames | None = None,
) -> list[Classified]:
    """Results with the destinations that pairs of arguments spell: a tainted one is refused like any
    other; a trusted one (`alice` + `corp.example` allowlisted as `alice@corp.example`) vouches for its
    parts; an unproven one adds nothing (its parts are judged on their own)."""
    extra: list[Classified] = []
    trusted_parts: dict[str, str] = {}
    for d in assembled(arguments):
        c = classify(d, trust, lookup, seen)
        if c.state in ("tainted", "tainted_identity", "tainted_named", "planted_name"):
            extra.append(c)
        elif c.state == "trusted":
            for p in d.parts:
                trusted_parts[p] = f"part of {d.value!r}, {c.why}"
    if trusted_parts:
        results = [
            replace(c, state="trusted", why=trusted_parts[c.dest.parameter])
            if c.dest.parameter in trusted_parts
            and c.state not in ("tainted", "tainted_identity", "tainted_named", "planted_name")
            else c
            for c in results
        ]
    return extra + results


@dataclass(frozen=True)
class Classified:
    dest: Destination
    state: str  # trusted | tainted | tainted_named | planted_name | tainted_identity | evicted | ambiguous
    # | unproven
    why: str | None = None  # for trusted: why
    provenance: Provenance | None = None


def classify(
    dest: Destination,
    trust: Trust,
    lookup: Callable[[str], Hit | None],
    seen: names.ScopeNames | None = None,
) -> Classified:
    """Strongest first: trusted (allowlisted, approved, typed by you); tainted in free text (planted);
    listed by your own directory; a plain name seen only inside prose (`names`: planted, or asked when
    that prose came from a source your prompt named); seen in a source your prompt named; seen only as
    a sender or participant; evicted; unproven (or ambiguous: more than one reading)."""
    why = trusted_reason(dest, trust)
    if why is not None:
        return Classified(dest, "trusted", why=why)
    if local_path(dest.value):  # `to_path` of a move: nothing leaves the machine
        return Classified(dest, "trusted", why="a path on this machine")
    hit = lookup(dest.value)
    if hit is not None and hit.state == "tainted" and not hit.identity_only:
        return Classified(dest, "tainted", provenance=hit.provenance)
    listed = listed_by(dest, trust)
    if listed is not None and (hit is None or hit.state == "tainted"):
        if roles.is_role_source(listed):  # "reply on ticket 42 to its reporter"
            return Classified(dest, "trusted", why=roles.shown(listed))
        return Classified(dest, "trusted", why=f"listed by {listed}, your own directory")
    if hit is None:
        if seen is not None and names.is_plain_name(dest.value):
            prov = seen.prose_only(dest.value)
            if prov is not None:
                state = "planted_name" if prov.named is None else "tainted_named"
                return Classified(dest, state, provenance=prov)
        return Classified(dest, "unproven" if canon.reading(dest.value).single else "ambiguous")
    if hit.state == "evicted":
        return Classified(dest, "evicted")
    if hit.provenance is not None and hit.provenance.named is not None:
        # A source the user named may be honest ("her address is on her website"), unless the address
        # sits in text of it that gives the agent orders to send there (`provenance.orders`): then
        # `send_verdict` denies it as the injection it is.
        return Classified(dest, "tainted_named", provenance=hit.provenance)
    return Classified(dest, "tainted_identity", provenance=hit.provenance)


def listed_by(dest: Destination, trust: Trust) -> str | None:
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
    seen: names.ScopeNames | None = None,
) -> Verdict:
    """The verdict on a send. `seen` is the scope's record of plain names (`names`): without it a plain
    name is unproven, as it is for a tool that reads no output."""
    dests, everything = destinations(arguments, sink_params, looks_like_destination)
    # The prompt asked for this object: only its title can be the text's; else any argument can.
    asked = (
        bool(sink_params)
        and not dests
        and (edits_in_place(tool) or _creates_what_you_asked(tool, trust) is not None)
    )
    dictated = _dictated(arguments, trust, seen, asked) if seen is not None and not dests else None
    if dictated is not None:  # before the object the prompt asked for: the text chose what it says
        return dictated
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
    results = [classify(d, trust, lookup, seen) for d in [*dests, *smuggling]]
    results = _with_assembled(results, arguments, trust, lookup, seen)
    for c in results:
        if c.state == "planted_name":
            return Verdict(
                "deny",
                "sink.planted_name",
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r} is a plain name that "
                f"appeared only inside text {where(c.provenance)}, never as a name a listing or a "
                f"directory gave and never typed by you: the agent can only have it from that text. If it "
                f"is really yours to send to, type it in your prompt",
                destination=c.dest.value,
                parameter=c.dest.parameter,
                provenance=c.provenance,
            )
    for c in results:
        if (c.state == "tainted" and on_tainted == "deny") or (
            c.state == "tainted_identity" and on_tainted_identity == "deny" and on_tainted == "deny"
        ):
            return Verdict(
                "deny",
                "sink.tainted_destination",
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r}{read_as(c.dest)} "
                f"first appeared {where(c.provenance)}{_inside_orders(c.provenance)}; sending there could "
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
                f"{where(c.provenance)}{_inside_orders(c.provenance)}: that is an injection in the source, "
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
                f"your prompt named ({c.provenance.named}), {where(c.provenance)}; that source may carry "
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
                f"{where(c.provenance)}; a person must confirm it",
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


def _dictated(
    arguments: Mapping[str, Any], trust: Trust, seen: names.ScopeNames, titles_only: bool
) -> Verdict | None:
    """A send with no destination to check whose content an untrusted text dictated: an argument copied
    verbatim from prose the prompt did not name is denied (the attacker wrote the call); from a source
    the prompt named, asked with that source. Content the user typed, or the agent wrote, is neither.
    `titles_only`: the prompt asked for this object, so only its title (`names.TITLE_WORDS`) is read."""
    for d in leaves(arguments):
        if titles_only and not names.TITLE_WORDS.intersection(words(d.parameter.rsplit(".", 1)[-1])[-1:]):
            continue
        if not names.is_content(d.value) or trusted_reason(d, trust) is not None:
            continue
        prov = seen.dictated(d.value)
        if prov is None:
            continue
        if prov.named is not None:
            return Verdict(
                "ask",
                "sink.no_destination",
                f"this call names no destination Bouncer can check, and argument {d.parameter!r} is "
                f"copied from a source your prompt named ({prov.named}), {where(prov)}; that source may "
                f"carry an injection too, so a person must confirm it",
                parameter=d.parameter,
                provenance=prov,
            )
        return Verdict(
            "deny",
            "sink.dictated_content",
            f"this call names no destination Bouncer can check, and argument {d.parameter!r} is copied "
            f"word for word from text {where(prov)} that your prompt did not point to: that text "
            f"dictated the call",
            parameter=d.parameter,
            provenance=prov,
        )
    return None
