"""The sink gate (DESIGN §3.4): where is this call sending data, and where did each destination come from?

Theory of operation
-------------------
1. *Which values are destinations.* A tool with `exfiltrating: true` declares its sink parameters.
   If it declares none, or any declared one is absent or empty in this call, the call is ambiguous and
   every argument becomes a sink (an attacker who puts the address in an undeclared field gains
   nothing). Dict keys and values, lists and nested objects are all walked, so
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

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bouncerd.core import canon
from bouncerd.core.constraints import find_values
from bouncerd.core.model import Provenance, Verdict
from bouncerd.core.taint import Hit

# A destination longer than this is not a destination anyone types: it is a body of text that landed
# in a sink (the every-argument case). It is still classified, but shown truncated in reasons.
SHOWN_DESTINATION_CHARS = 120


@dataclass(frozen=True)
class Destination:
    parameter: str  # dotted path of the argument it came from, e.g. "to[1]" or "recipients.<key>"
    value: str


@dataclass(frozen=True)
class Trust:
    """Everything that makes a destination trusted for this call. Keys are canonical (canon.keys)."""

    destinations: frozenset[str]  # allowlist + approvals + vouched, as canonical keys
    domains: frozenset[str]  # trusted domains, lowercased, IDNA-decoded
    why: Mapping[str, str]  # canonical key -> "allowlisted" | "approved" | "vouched"


def destinations(
    arguments: Mapping[str, Any],
    sink_params: Sequence[str],
    looks_like_destination: Callable[[str], bool] = lambda _name: False,
) -> tuple[list[Destination], bool]:
    """The destinations of one call, and whether every argument had to be treated as a sink.

    Declared sink parameters that carry something are destinations, and so are undeclared top-level
    parameters whose *name* is destination-shaped (`recipients` next to a declared `to`: a pack that
    missed a parameter must not open a hole). If no declared sink carries anything (absent, null, "",
    [] or {}), the call is ambiguous and every argument is a destination.
    """
    found: list[Destination] = []
    for param in sink_params:
        for concrete, value in find_values(arguments, param):
            found.extend(_leaves(value, concrete))
    if not found:
        return list(_leaves(arguments, "")), True
    declared_tops = {p.split(".", 1)[0] for p in sink_params}
    for name, value in arguments.items():
        if name not in declared_tops and looks_like_destination(str(name)):
            found.extend(_leaves(value, str(name)))
    return found, False


def _leaves(value: Any, path: str) -> Iterator[Destination]:
    if isinstance(value, str):
        if value.strip():
            yield Destination(path or "(arguments)", value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if path and str(k).strip():  # top-level keys are parameter names, nested ones may be addresses
                yield Destination(f"{sub} (key)", str(k))
            yield from _leaves(v, sub)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        # Numbers can be destinations too (a phone number, an account id): compare their text.
        yield Destination(path or "(arguments)", str(value))


def shown(value: str) -> str:
    """A destination as it may appear in a reason: invisible characters made visible, length capped.

    A value that is not one destination (a message body that landed in a sink because the call named
    no destination) is not quoted at all: it may hold text the agent copied from hostile output, and
    the reason goes back to the agent (don't re-inject the injection)."""
    if canon.canonicalize(value).kind == "text":
        return f"(a {len(value)}-character text value)"
    text = canon.visible(value)
    if len(text) > SHOWN_DESTINATION_CHARS:
        text = text[: SHOWN_DESTINATION_CHARS - 1] + "…"
    return repr(text)


def _where(prov: Provenance | None) -> str:
    if prov is None:
        return "in earlier untrusted output (details evicted from memory)"
    tool = f"/{prov.tool}" if prov.tool else ""
    field = f", field {prov.field}" if prov.field else ""
    return f"in the output of {prov.server}{tool} (request {prov.request_id!r}{field})"


def trusted_reason(dest: Destination, trust: Trust) -> str | None:
    keys = canon.keys(dest.value)
    for key in keys:
        if key in trust.destinations:
            return trust.why.get(key, "allowlisted")
    host = canon.domain(dest.value)
    if host is not None:
        for dom in trust.domains:
            if host == dom or host.endswith("." + dom):
                return "trusted domain"
    return None


@dataclass(frozen=True)
class Classified:
    dest: Destination
    state: str  # trusted | tainted | tainted_identity | evicted | unproven
    why: str | None = None  # for trusted: why
    provenance: Provenance | None = None


def classify(dest: Destination, trust: Trust, lookup: Callable[[str], Hit | None]) -> Classified:
    why = trusted_reason(dest, trust)
    if why is not None:
        return Classified(dest, "trusted", why=why)
    hit = lookup(dest.value)
    if hit is None:
        return Classified(dest, "unproven")
    if hit.state == "evicted":
        return Classified(dest, "evicted")
    return Classified(dest, "tainted_identity" if hit.identity_only else "tainted", provenance=hit.provenance)


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
    if not dests:
        # A sending tool called with nothing we can read as a destination: we cannot tell where it goes.
        return Verdict(
            "ask",
            "sink.no_destination",
            f"{tool} sends data but this call names no destination Bouncer can check",
        )
    results = [classify(d, trust, lookup) for d in dests]
    for c in results:
        if (c.state == "tainted" and on_tainted == "deny") or (
            c.state == "tainted_identity" and on_tainted_identity == "deny" and on_tainted == "deny"
        ):
            return Verdict(
                "deny",
                "sink.tainted_destination",
                f"destination {shown(c.dest.value)} in argument {c.dest.parameter!r} first appeared "
                f"{_where(c.provenance)}; sending there could carry your data to whoever planted it. "
                f"If this destination is really yours, add it to trusted_destinations in your policy",
                destination=c.dest.value,
                parameter=c.dest.parameter,
                provenance=c.provenance,
            )
    for c in results:
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


def fetch_verdict(
    arguments: Mapping[str, Any],
    *,
    tool: str,
    sink_params: Sequence[str],
    trust: Trust,
    seen_exactly: Callable[[str], bool],
    host_hit: Callable[[str], Hit | None],
) -> Verdict:
    dests, _ = destinations(arguments, sink_params)
    for d in dests:
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
            return Verdict(
                "deny",
                "fetch.tainted_host_new_path",
                f"URL {shown(d.value)} in argument {d.parameter!r} is on a host that first appeared "
                f"{_where(hit.provenance)}, but with a path, query or fragment that did not appear there: "
                f"fetching it could smuggle your data out in the URL",
                destination=d.value,
                parameter=d.parameter,
                provenance=hit.provenance,
            )
    return Verdict(
        "allow",
        "fetch.allowed",
        f"{tool}: fetching URLs that carry nothing new",
        destination=dests[0].value if dests else None,
    )
