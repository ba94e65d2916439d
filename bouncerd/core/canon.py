"""Canonical forms of one destination: the keys to look up in the taint index, and the keys to trust.

Theory of operation
-------------------
A destination (one argument value of a sending tool) is compared two ways, with two different forms:

- **Taint: wide** (`canonicalize`, `canonical_keys`). Does this destination match anything seen in
  untrusted output? Here a false match costs a question or a refusal and a missed match costs the
  user's data, so the destination is folded exactly like output (`fold.fold`: case, NFKD, invisible
  characters, confusable skeletons, punycode) after percent-encoding, HTML entities and JSON escapes
  are decoded, and is then stripped of `mailto:`/`tel:`, a display name (`Ann <a@x.com>`), a `+tag`,
  trailing dots, a default port. A URL yields its whole key, its host+path prefixes and its host; an
  e-mail address also its `-`-cut local part (`a-tag@x.com` probes `a@x.com`). A value that is not one
  destination (`"a@x.com, b@y.com"`, a message body) probes its own folded text and every token in it.
- **Trust: narrow** (`keys`, `domain`). Is this destination the one the user allowlisted, approved or
  typed? Here a false match lets data out, so look-alikes are *not* merged: no confusable skeleton, no
  removal of invisible characters, URL paths keep their case. Only what provably names the same
  mailbox or host is folded: surrounding whitespace, `mailto:`, display names, `+tag`, ASCII case of
  addresses and hosts, NFKC and punycode of hostnames (as IDNA itself does), trailing dots, default
  ports, percent-encoding of URL paths.

Both sides build keys with the key functions of `shapes` (and read an address by its shapes), so
output and destinations agree by construction; `shapes` names where they differ on purpose.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal
from urllib.parse import unquote, urlsplit

from bouncerd.core import fold, shapes, tokens, url, urlquirks

Kind = Literal["email", "url", "host", "phone", "iban", "handle", "text"]

# A destination longer than this is a body of text that landed in a sink; it is probed by its tokens.
MAX_SINGLE_DESTINATION_CHARS = 2048
# One call asks for the same destination's forms several times (trust, taint, the reason, the question);
# distinct destinations per session are few, so a small cache serves them all.
CANONICAL_CACHE_ENTRIES = 1024
_parse_url = lru_cache(maxsize=CANONICAL_CACHE_ENTRIES)(url.parse)  # trust and taint read the same URL

_MAILTO = re.compile(r"^(?:mailto|tel|sms|callto):(?://)?", re.IGNORECASE)
_DISPLAY_NAME = re.compile(r"^[^<>]*<\s*([^<>\s]+)\s*>\s*$")
_TRAILING_COMMENT = re.compile(r"^(\S+)\s+\([^()]*\)$")
_EMAIL_WHOLE = shapes.EMAIL_DESTINATION
_URL_WHOLE = shapes.URL_DESTINATION
_HOSTPATH_WHOLE = shapes.HOSTPATH_DESTINATION
_HANDLE_WHOLE = re.compile(r"[@#]([^\W_][\w.-]*)")
_PHONE_WHOLE = re.compile(r"\+?[\d\s().\-/]+")
_IBAN_WHOLE = re.compile(r"[A-Za-z]{2}\d{2}[A-Za-z0-9 ]{11,40}")
_SPACES = re.compile(r"\s+")
# The commonest destinations, written plainly: a lower-case address, or an http(s) URL on a lower-case
# DNS name whose path and query hold no `.` `@` `%` `:` `#`. They read one way (the receiver's reading
# is the regex's), so `canonicalize` skips their other readings; a URL's tokens are still probed (a
# code host's URL names a repository).
_PLAIN = re.compile(
    r"[a-z0-9][a-z0-9._+-]{0,63}@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z][a-z0-9-]+"
    r"|https?://[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z][a-z0-9-]+(?:/[A-Za-z0-9_~/-]*)?(?:\?[A-Za-z0-9_=&-]*)?"
)
_HAS_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,31}:|//|\\\\", re.IGNORECASE)


@dataclass(frozen=True)
class Canonical:
    """One destination in folded form."""

    kind: Kind
    key: str  # the destination as a whole: what "seen exactly" compares
    probes: tuple[str, ...]  # taint index keys to look up, most specific first
    hosts: tuple[str, ...] = ()  # the host keys alone (URL and host destinations), for fetch sinks


def _unwrap(text: str) -> str:
    """`mailto:`, `tel:`, `Ann <a@x.com>`, `a@x.com (Ann)`, quotes and trailing dots removed."""
    text = text.strip().strip("\"'")
    if "<" in text:
        m = _DISPLAY_NAME.match(text)
        if m is not None:
            text = m.group(1)
    if ")" in text:
        m = _TRAILING_COMMENT.match(text)
        if m is not None:
            text = m.group(1)
    if ":" in text:
        text = _MAILTO.sub("", text, count=1)
    if "@" in text and "?" in text and "/" not in text:
        text = text.split("?", 1)[0]  # mailto:a@x.com?subject=...
    return text.strip().rstrip(".")


def _decoded(text: str) -> str:
    for _ in range(fold.MAX_DECODE_ROUNDS):
        nxt = fold.decode_inline(text)
        if nxt == text:
            break
        text = nxt
    return text


def _url_canonical(kind: Kind, got: shapes.UrlKeys) -> Canonical:
    hosts = [h for h in got.hosts if h != got.whole]
    probes = [got.whole, *reversed(got.prefixes), *hosts]
    return Canonical(kind, got.whole, tuple(probes), tuple(got.hosts))


def _single(folded: str) -> Canonical | None:
    """`folded` as exactly one destination, or None."""
    m = _EMAIL_WHOLE.fullmatch(folded)
    if m is not None:
        key = shapes.email_key(m.group(1), m.group(2))
        if key is not None:
            local, host = key.split("@", 1)
            email_probes = [key]
            if "-" in local.strip("-"):
                email_probes.append(local.split("-", 1)[0] + "@" + host)
            return Canonical("email", key, tuple(email_probes))
    m = _URL_WHOLE.fullmatch(folded)
    if m is not None and (m.group(1) or folded.startswith("//")):
        got = shapes.url_keys(
            (m.group(1) or "").lower(), m.group(2), m.group(3), m.group(4), m.group(5), m.group(6)
        )
        if got is not None:
            return _url_canonical("url", got)
    m = _HOSTPATH_WHOLE.fullmatch(folded)
    if m is not None:
        got = shapes.url_keys("", m.group(1), m.group(2), m.group(3) or "", m.group(4), m.group(5))
        if got is not None:
            return _url_canonical("host" if got.whole in got.hosts else "url", got)
    m = _HANDLE_WHOLE.fullmatch(folded)
    if m is not None:
        name = m.group(1).rstrip(".-")
        return Canonical("handle", name, (name,))
    compact = folded.replace(" ", "")
    if _IBAN_WHOLE.fullmatch(folded):
        iban = shapes.iban_key(compact)
        if iban is not None:
            return Canonical("iban", iban, (iban,))
    if _PHONE_WHOLE.fullmatch(folded):
        phones = shapes.phone_keys(folded)
        if phones:
            return Canonical("phone", phones[0], tuple(phones))
    return None


@lru_cache(maxsize=CANONICAL_CACHE_ENTRIES)
def _canonical_one(destination: str) -> Canonical:
    """The wide (taint) form of one reading of a destination value."""
    raw = destination if len(destination) <= MAX_SINGLE_DESTINATION_CHARS else ""
    unwrapped = _unwrap(_decoded(raw))
    folded = " ".join(fold.fold(unwrapped).split()) if raw else ""
    if folded:
        # folding can reveal a wrapper written in full-width forms ("ｍａｉｌｔｏ：", "＜…＞")
        single = _single(folded if unwrapped.isascii() else _unwrap(folded))
        if single is not None:
            return single
    embedded = sorted(tokens.text_keys(destination))
    whole = folded or shapes.shorten(_SPACES.sub(" ", fold.fold(destination[:MAX_SINGLE_DESTINATION_CHARS])))
    probes = [whole, *embedded] if len(whole) >= shapes.MIN_KEY_CHARS else embedded
    return Canonical("text", whole, tuple(dict.fromkeys(probes)))


@lru_cache(maxsize=CANONICAL_CACHE_ENTRIES)
def canonicalize(destination: str) -> Canonical:
    """The wide (taint) form of one destination value: the probes of every way it can be read.

    The receiver's reading comes first (a URL as a WHATWG parser such as Node's reads it), then the
    value as written, then its other readings (`reading`: parts around a control character, an address
    without its quotes or comments, …), then every destination token inside any decoded view of the
    value (`tokens.text_keys`), so a planted address hidden in a query string or a base64 run is probed.
    """
    if _PLAIN.fullmatch(destination) and "xn--" not in destination:
        one = _canonical_one(destination)  # one reading: the receiver's is the regex's
        if one.kind == "email":
            return one  # and no token but itself
        tokens_in = tuple(k for k in sorted(tokens.text_keys(destination)) if k not in one.probes)
        return dataclasses.replace(one, probes=one.probes + tokens_in) if tokens_in else one
    one = _canonical_one(destination)
    read = reading(destination)
    key, kind = one.key, one.kind
    probes: list[str] = []
    hosts: list[str] = []
    receiver = _receiver_url_keys(destination)
    if receiver is not None:
        if kind in ("url", "host", "text"):
            key = receiver.whole
            if kind == "text":
                kind = "url"
        probes += [receiver.whole, *reversed(receiver.prefixes), *receiver.hosts]
        hosts += receiver.hosts
    probes += one.probes
    hosts += one.hosts
    for alt in read.alternatives:
        other = _canonical_one(alt)
        probes += other.probes
        hosts += other.hosts
        extra = _receiver_url_keys(alt)
        if extra is not None:
            probes += [extra.whole, *extra.hosts]
            hosts += extra.hosts
    if len(destination) <= MAX_SINGLE_DESTINATION_CHARS:
        probes += sorted(tokens.text_keys(destination))
    return Canonical(kind, key, tuple(dict.fromkeys(probes)), tuple(dict.fromkeys(hosts)))


def canonical_keys(destination: str) -> list[str]:
    """The taint index keys to look up for one destination, most specific first."""
    return [k for k in canonicalize(destination).probes if len(k) >= shapes.MIN_KEY_CHARS]


def _receiver_url_keys(destination: str) -> shapes.UrlKeys | None:
    """The taint keys of a URL destination as the receiver's parser (WHATWG) reads it, or None."""
    text = _unwrap(destination)
    if not _HAS_SCHEME.match(text):
        return None
    if text.startswith(("\\\\", "//")):
        text = "file:" + text  # a UNC path (\\host\share) or a scheme-relative URL names a remote host
    got = _parse_url(text)
    if got is None or not got.host:
        return None
    host = fold.fold(url.unicode_host(got.host))
    port = str(got.port) if got.port is not None else None
    return shapes.url_keys(got.scheme, host, port, got.path, got.query, got.fragment)


# ---- trust: narrow ---------------------------------------------------------------------------------

_INVISIBLE_SHOWN = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    r"\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    r"\U000e0000-\U000e0fff]"
)


def domain_key(host: str) -> str:
    """A hostname as trusted_domains compares it: NFKC, case folded, punycode decoded, no trailing dot.

    This is what IDNA (UTS 46) does to a name before it is looked up, so it merges nothing that DNS
    would tell apart. Look-alikes (Cyrillic "а") stay distinct.
    """
    host = unicodedata.normalize("NFKC", host.strip()).casefold().rstrip(".")
    if "xn--" in host:
        labels = []
        for label in host.split("."):
            if label.startswith("xn--"):
                with contextlib.suppress(UnicodeError, ValueError):
                    label = label[4:].encode("ascii").decode("punycode")
            labels.append(label)
        host = unicodedata.normalize("NFKC", ".".join(labels)).casefold()
    return host


def _narrow_url(scheme: str, host: str, port: str | None, path: str, query: str | None) -> tuple[str, str]:
    """(trust key, domain) of a URL's parts: host folded as IDNA does, path case kept."""
    host = domain_key(unquote(host))
    base = host
    if port and port not in shapes.DEFAULT_PORTS.get(scheme, frozenset()):
        base = f"{host}:{port.lstrip('0') or '0'}"
    segments: list[str] = []
    for seg in unquote(path).split("/"):
        if seg == "..":
            if segments:
                segments.pop()
        elif seg and seg != ".":
            segments.append(seg)
    key = base + ("/" + "/".join(segments) if segments else "")
    if query:
        key += "?" + unquote(query)
    return key, host


def _naive_url_host(text: str) -> str | None:
    """The host a regex reader (and the older design) sees in a URL: after the last `@` before a path."""
    m = _URL_WHOLE.fullmatch(text)
    if m is None or not (m.group(1) or text.startswith("//")):
        return None
    return domain_key(unquote(m.group(2)))


_AUTHORITY = re.compile(r"^[^:/?#\\]*:[/\\]*([^/?#\\]*)")
_AUTHORITY_SEPARATORS = re.compile(r"[@:;,\s]+")


def _authority_pieces(text: str) -> list[str]:
    """Everything a reader could take for the host in a URL's authority: userinfo names, the parts
    around every `@` (full-width ones folded), each piece percent-decoded. Only pieces that have more
    than the one host (a userinfo, several `@`) are returned: they are probed as readings."""
    m = _AUTHORITY.match(unicodedata.normalize("NFKC", unquote(text)))
    if m is None:
        return []
    pieces = [p for p in _AUTHORITY_SEPARATORS.split(m.group(1)) if p]
    return pieces if len(pieces) > 1 else []


def _python_url_host(text: str) -> str | None:
    """The host Python's `urllib.parse` (and the servers built on it) would connect to."""
    try:
        host = urlsplit(text).hostname
    except ValueError:
        return None
    return domain_key(host) if host else None


@dataclass(frozen=True)
class Reading:
    """One destination value as its receiver reads it, and whether it can be read only that way.

    `key` and `domain` are the narrow trust forms of the receiver's reading; both are None when the value
    has more than one plausible reading (`quirks` names why), so no allowlist or vouch can trust it.
    `reached` lists what each reading delivers to (the receiver's first), for reasons and questions;
    `alternatives` are the other readings as text, probed in the taint index too."""

    key: str | None
    domain: str | None
    reached: tuple[str, ...]
    quirks: tuple[str, ...]
    alternatives: tuple[str, ...]
    exact: str  # the value as written: what an approval of an ambiguous value is bound to

    @property
    def single(self) -> bool:
        return not self.quirks


# urlquirks.quirks that make a URL readable more than one way (docs/how-it-works.md, "Reading a destination
# the way its receiver will"). Trailing dots, non-ASCII hosts (IDNA-mapped the same by every resolver)
# and an `@` in a path are not among them.
URL_AMBIGUOUS_QUIRKS = frozenset(
    {
        "backslash",
        "tab_or_newline",
        "c0_or_space_trimmed",
        "userinfo",
        "percent_in_host",
        "ipv4_non_decimal",
        "ipv4_short_form",
        "control_character",
        "mixed_scripts",
        "empty_label",
    }
)
# Any control character inside a destination: C mail code stops at a NUL, a header parser at a line
# break, a model reads past both. Tab included: it has no place inside an address or a host.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_QUOTED_LOCAL = re.compile(r'"([^"]*)"(?=\s*@)')
_COMMENT = re.compile(r"\([^()]*\)")
_PERCENT_HACK = re.compile(r"^([^@%!]+)%([^@%!]+)@[^@]+$")  # user%host@relay: the relay forwards to host
_BANG_PATH = re.compile(r"^(?:[^@!]+!)*([^@!]+)!([^@!]+)@[^@]+$")  # host!user@relay (UUCP)
_SOURCE_ROUTE = re.compile(r"^@[^:]+:(.+@.+)$")  # @relay1,@relay2:user@host (RFC 5321 source route)
_EMAILS_INSIDE = re.compile(r"[^\s@<>()\"',;:\\]+@[^\s@<>()\"',;:\\]+")


def _email_alternatives(text: str) -> tuple[list[str], list[str]]:
    """(quirks, other readings) of an e-mail-shaped value whose syntax is not a plain address."""
    quirks: list[str] = []
    alts: list[str] = []
    if '"' in text:
        quirks.append("quoted_local_part")
        alts.append(_QUOTED_LOCAL.sub(lambda m: m.group(1), text))  # "eve"@x → eve@x
        alts.append(text.replace('"', ""))
    if "(" in text:
        quirks.append("comment")
        alts.append(_COMMENT.sub("", text))
    if "\\" in text:
        quirks.append("backslash")
        alts += [text.replace("\\", ""), *text.split("\\")]
    if text.count("@") > 1:
        quirks.append("several_at_signs")
        m = _SOURCE_ROUTE.match(text)
        if m is not None:
            alts.append(m.group(1))
        local, _, dom = text.rpartition("@")
        alts += [local, local.split("@", 1)[0] + "@" + dom, text.split("@", 1)[1]]
    m = _PERCENT_HACK.match(text)
    if m is not None:
        quirks.append("percent_relay")
        alts.append(f"{m.group(1)}@{m.group(2)}")
    m = _BANG_PATH.match(text)
    if m is not None:
        quirks.append("bang_path")
        alts.append(f"{m.group(2)}@{m.group(1)}")
    for alt in list(alts):
        alts += _EMAILS_INSIDE.findall(alt)
    return quirks, alts


def _read_one(text: str) -> tuple[str, str | None, list[str], list[str], list[str]]:
    """(trust key, domain, reached, quirks, alternatives) of one control-free value."""
    text = _unwrap(text)
    m = _EMAIL_WHOLE.fullmatch(text)
    if m is not None:
        host = domain_key(m.group(2))
        key = shapes.mailbox_key(m.group(1).lower(), host)
        return key, key.rsplit("@", 1)[1], [key], [], []
    if _HAS_SCHEME.match(text):
        target = "file:" + text if text.startswith(("\\\\", "//")) else text
        got = _parse_url(target)
        quirks = sorted(set(urlquirks.quirks(target)) & URL_AMBIGUOUS_QUIRKS)
        if got is None:
            naive = _naive_url_host(text)
            pieces = _authority_pieces(target)
            return _lowered(text), None, [naive] if naive else [], ["unreadable_url", *quirks], pieces
        if not got.host:
            return _lowered(text), None, [], quirks, []
        port = str(got.port) if got.port is not None else None
        key, host = _narrow_url(got.scheme, url.unicode_host(got.host), port, got.path, got.query)
        reached = [host]
        for other in (_naive_url_host(target), _python_url_host(target)):
            if other is not None and other not in reached:
                reached.append(other)
        if len(reached) > 1:
            quirks.append("parsers_disagree")
        return key, host, reached, quirks, [*reached[1:], *_authority_pieces(target)]
    m = _HOSTPATH_WHOLE.fullmatch(text)
    if m is not None and shapes.host_key(fold.fold(m.group(1))) is not None:
        key, host = _narrow_url("", m.group(1), m.group(2), m.group(3) or "", m.group(4))
        got = url.parse("http://" + text)
        receiver = domain_key(url.unicode_host(got.host)) if got is not None else None
        if receiver != host:
            return key, host, [host, *([receiver] if receiver else [])], ["parsers_disagree"], []
        return key, host, [host], [], []
    if "@" in text:
        quirks, alts = _email_alternatives(text)
        if quirks:
            return _lowered(text), None, [a.lower() for a in alts if "@" in a][:4], quirks, alts
    return _lowered(text), None, [], [], []


def _lowered(text: str) -> str:
    return _SPACES.sub(" ", text.lstrip("@#")).lower()


@lru_cache(maxsize=CANONICAL_CACHE_ENTRIES)
def reading(destination: str) -> Reading:
    """How the receiver reads one destination value, and every other way it could be read."""
    text = destination.strip()
    quirks: list[str] = []
    alts: list[str] = []
    if _CONTROL.search(text):
        # C code stops at the NUL, a header parser at the line break, a model reads straight through,
        # a URL parser drops tabs and line breaks: each is a reading. The receiver's comes first.
        parts = [p for p in (q.strip() for q in _CONTROL.split(text)) if p]
        alts = [*parts, _CONTROL.sub("", text)]
        quirks.append("control_character")
        if not _HAS_SCHEME.match(_unwrap(text)):
            text = parts[0] if parts else ""
    key, dom, reached, more_quirks, more_alts = _read_one(text)
    quirks += more_quirks
    alts += more_alts
    if not quirks and "@" in text and key.count("@") == 1 and not _PLAIN.fullmatch(text):
        # `alice@corp.example (eve@evil.example)`: a second address hides in a comment or display name
        own = set(_canonical_one(text).probes)
        if any("@" in k and k not in own for k in tokens.text_keys(destination)):
            quirks.append("several_destinations")
    for alt in alts:
        if alt and alt != text:
            other = _read_one(alt)[2]
            reached += [r for r in other if r not in reached]
    if quirks:
        return Reading(
            None,
            None,
            tuple(dict.fromkeys(reached)),
            tuple(dict.fromkeys(quirks)),
            tuple(dict.fromkeys(a for a in alts if a)),
            destination.strip(),
        )
    return Reading(key, dom, tuple(reached), (), (), destination.strip())


# Approvals of a value with several readings are keyed as written, behind a NUL: no read key holds one
# (a value with a control character has no read key at all).
EXACT_KEY_MARK = "\x00exact:"


def keys(destination: str, *, exact: bool = False) -> list[str]:
    """The narrow key of a destination, for comparing with allowlists, approvals and vouched values.

    A value with more than one reading has no key (allowlists and vouches never trust it); with
    `exact`, for approvals (a person saw the readings and said yes), it is keyed as written instead."""
    r = reading(destination)
    if r.key is not None:
        return [r.key]
    return [EXACT_KEY_MARK + r.exact] if exact else []


def domain(destination: str) -> str | None:
    """The host a destination delivers to (e-mail domain or URL host), narrow form, or None (also when
    the value can be read more than one way)."""
    return reading(destination).domain


def visible(text: str) -> str:
    """Text with its invisible characters shown as `\\u....` escapes, so a reason cannot hide them."""
    return _INVISIBLE_SHOWN.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
