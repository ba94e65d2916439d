"""The fetch gate: a call that retrieves a URL (`sink_kind: fetch`) instead of delivering to it.
(docs/how-it-works.md, "The decision", step 4)

A URL fetched exactly as it appeared carries nothing of the user's → allow; a URL on a tainted host
with a path, query or fragment that did not appear → deny (data smuggled into the URL); any other URL
→ allow (recorded in the audit). A fetch that carries more than its URL (a body, headers, a writing
method) is a send to it (`fetch_payload`), judged by the sink gate (`bouncerd.core.sinkgate`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, unquote_plus

from bouncerd.core import canon, shapes, tokens, url
from bouncerd.core.fallback import words
from bouncerd.core.model import Verdict
from bouncerd.core.sinkdest import Destination, assembled, destinations, read_as, readings_text, shown
from bouncerd.core.sinkgate import Trust, trusted_reason, where
from bouncerd.core.taint import Hit

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
                    f"source your prompt named ({hit.provenance.named}), {where(hit.provenance)}, with a "
                    f"path or query that did not appear there; a person must confirm it",
                    destination=d.value,
                    parameter=d.parameter,
                    provenance=hit.provenance,
                )
            return Verdict(
                "deny",
                "fetch.tainted_host_new_path",
                f"URL {shown(d.value)} in argument {d.parameter!r}{read_as(d)} is on a host that first "
                f"appeared {where(hit.provenance)}, but with a path, query or fragment that did not "
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
                        f"name, path or query), which first appeared {where(carried.provenance)}: {what} it "
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
