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

Both sides build keys with the `tokens.*_key` functions, so output and destinations agree by
construction.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from bouncerd.core import fold, tokens

Kind = Literal["email", "url", "host", "phone", "iban", "handle", "text"]

# A destination longer than this is a body of text that landed in a sink; it is probed by its tokens.
MAX_SINGLE_DESTINATION_CHARS = 2048

_MAILTO = re.compile(r"^(?:mailto|tel|sms|callto):(?://)?", re.IGNORECASE)
_DISPLAY_NAME = re.compile(r"^[^<>]*<\s*([^<>\s]+)\s*>\s*$")
_TRAILING_COMMENT = re.compile(r"^(\S+)\s+\([^()]*\)$")
_EMAIL_WHOLE = re.compile(r"([\w.+'-]+)@([\w-]+(?:\.[\w-]+)+)\.*")
_URL_WHOLE = re.compile(
    r"(?:([a-z][a-z0-9+.-]{0,15}):)?//(?:[^/?#\s]*@)?(\[[0-9a-f:.]+\]|[^/?#:\s@\[\]]*)\.*(?::(\d{0,5}))?"
    r"([^?#\s]*)(?:\?([^#\s]*))?(?:#(\S*))?",
    re.IGNORECASE,
)
_HOSTPATH_WHOLE = re.compile(
    r"([\w-]+(?:\.[\w-]+)+)\.*(?::(\d{1,5}))?(/[^?#\s]*)?(?:\?([^#\s]*))?(?:#(\S*))?"
)
_HANDLE_WHOLE = re.compile(r"[@#]([^\W_][\w.-]*)")
_PHONE_WHOLE = re.compile(r"\+?[\d\s().\-/]+")
_IBAN_WHOLE = re.compile(r"[A-Za-z]{2}\d{2}[A-Za-z0-9 ]{11,40}")
_SPACES = re.compile(r"\s+")


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


def _url_canonical(kind: Kind, got: tokens.UrlKeys) -> Canonical:
    hosts = [h for h in got.hosts if h != got.whole]
    probes = [got.whole, *reversed(got.prefixes), *hosts]
    return Canonical(kind, got.whole, tuple(probes), tuple(got.hosts))


def _single(folded: str) -> Canonical | None:
    """`folded` as exactly one destination, or None."""
    m = _EMAIL_WHOLE.fullmatch(folded)
    if m is not None:
        key = tokens.email_key(m.group(1), m.group(2))
        if key is not None:
            local, host = key.split("@", 1)
            email_probes = [key]
            if "-" in local.strip("-"):
                email_probes.append(local.split("-", 1)[0] + "@" + host)
            return Canonical("email", key, tuple(email_probes))
    m = _URL_WHOLE.fullmatch(folded)
    if m is not None and (m.group(1) or folded.startswith("//")):
        got = tokens.url_keys(
            (m.group(1) or "").lower(), m.group(2), m.group(3), m.group(4), m.group(5), m.group(6)
        )
        if got is not None:
            return _url_canonical("url", got)
    m = _HOSTPATH_WHOLE.fullmatch(folded)
    if m is not None:
        got = tokens.url_keys("", m.group(1), m.group(2), m.group(3) or "", m.group(4), m.group(5))
        if got is not None:
            return _url_canonical("host" if got.whole in got.hosts else "url", got)
    m = _HANDLE_WHOLE.fullmatch(folded)
    if m is not None:
        name = m.group(1).rstrip(".-")
        return Canonical("handle", name, (name,))
    compact = folded.replace(" ", "")
    if _IBAN_WHOLE.fullmatch(folded):
        iban = tokens.iban_key(compact)
        if iban is not None:
            return Canonical("iban", iban, (iban,))
    if _PHONE_WHOLE.fullmatch(folded):
        phones = tokens.phone_keys(folded)
        if phones:
            return Canonical("phone", phones[0], tuple(phones))
    return None


def canonicalize(destination: str) -> Canonical:
    """The wide (taint) form of one destination value."""
    raw = destination if len(destination) <= MAX_SINGLE_DESTINATION_CHARS else ""
    unwrapped = _unwrap(_decoded(raw))
    folded = " ".join(fold.fold(unwrapped).split()) if raw else ""
    if folded:
        # folding can reveal a wrapper written in full-width forms ("ｍａｉｌｔｏ：", "＜…＞")
        single = _single(folded if unwrapped.isascii() else _unwrap(folded))
        if single is not None:
            return single
    embedded = sorted(tokens.text_keys(destination))
    whole = folded or tokens.shorten(_SPACES.sub(" ", fold.fold(destination[:MAX_SINGLE_DESTINATION_CHARS])))
    probes = [whole, *embedded] if len(whole) >= tokens.MIN_KEY_CHARS else embedded
    return Canonical("text", whole, tuple(dict.fromkeys(probes)))


def canonical_keys(destination: str) -> list[str]:
    """The taint index keys to look up for one destination, most specific first."""
    return [k for k in canonicalize(destination).probes if len(k) >= tokens.MIN_KEY_CHARS]


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


def _narrow(destination: str) -> tuple[str, str | None]:
    """(trust key, domain) of one destination."""
    text = _unwrap(destination)
    m = _EMAIL_WHOLE.fullmatch(text)
    if m is not None:
        local = m.group(1).lower().split("+", 1)[0]
        host = domain_key(m.group(2))
        if host in ("gmail.com", "googlemail.com"):
            local, host = local.replace(".", ""), "gmail.com"
        return f"{local}@{host}", host
    m = _URL_WHOLE.fullmatch(text)
    if m is not None and (m.group(1) or text.startswith("//")):
        scheme, host, port, path, query = (
            (m.group(1) or "").lower(),
            m.group(2),
            m.group(3),
            m.group(4),
            m.group(5),
        )
    else:
        m = _HOSTPATH_WHOLE.fullmatch(text)
        if m is None or tokens.host_key(fold.fold(m.group(1))) is None:
            return _SPACES.sub(" ", text.lstrip("@#")).lower(), None
        scheme, host, port, path, query = "", m.group(1), m.group(2), m.group(3) or "", m.group(4)
    host = domain_key(unquote(host))
    base = host
    if port and port not in tokens.DEFAULT_PORTS.get(scheme, frozenset()):
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


def keys(destination: str) -> list[str]:
    """The narrow key of a destination, for comparing with allowlists, approvals and vouched values."""
    return [_narrow(destination)[0]]


def domain(destination: str) -> str | None:
    """The host a destination delivers to (e-mail domain or URL host), narrow form, or None."""
    return _narrow(destination)[1]


def visible(text: str) -> str:
    """Text with its invisible characters shown as `\\u....` escapes, so a reason cannot hide them."""
    return _INVISIBLE_SHOWN.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
