"""Destination tokens in folded text, and the index key of each.

Theory of operation
-------------------
Matching is on whole tokens: a token is a maximal run of the characters it can contain, so
`ana@x.com` is not found inside `dana@x.com` and `x.com` is not found inside `ana@x.com`. The
tokenizer never walks text character by character in Python: it maps the folded text to a byte mask
(one `bytes.translate`), finds *anchors* (`@`, `#`, a `.` inside a word, `://`) with literal scans
(byte scans for the rare `@` and `://`, literal-prefixed patterns for the rest), cuts the chunk around
each anchor at the nearest delimiter with `find`/`rfind`, and parses only those chunks. Digit runs
(phones, IBANs) are found in the same mask with literal-prefixed patterns, only where a digit appears.

Token classes and their keys (all in folded form; keys shorter than `MIN_KEY_CHARS` are dropped):
- **e-mail**: `local@domain`; `+tag` removed (the key of `a+tag@x.com` is `a@x.com`: the tag reaches
  the same mailbox); Gmail dots removed; the domain keyed as a host. The domain of an address is not a
  host token of its own (`x.com` is not tainted by `ana@x.com`).
- **URL** (`scheme://…`, `//host/…`, or `host/path`): the host, the host without `www.`, the host with
  its first `MAX_PATH_PREFIX_SEGMENTS` path segments, and the whole URL without its scheme (default
  ports dropped, percent-decoded, dot segments resolved); keys longer than `MAX_KEY_CHARS` end in a
  digest.
- **host** (`evil.com`, `10.0.0.1`): the host (and its `www.`-less form); the last label must not be
  numeric and must have two characters, unless the host is an IPv4 address.
- **phone** (8–15 digits, separators `space ( ) . - /`): the digits, and national forms (1–3 digits of
  country code dropped from a `+`/`00` number, the trunk `0` dropped from a national one). Runs shaped
  like dates (`2026-05-09`) are not phones.
- **IBAN** (mod-97 valid, optionally grouped by spaces): compact, lower case.
- **handle / channel** (`@bob.smith`, `#general` at the start of a chunk): the name without its sigil,
  so `channel: "general"` matches `#general`.
- a spelled-out `at` before a host (`attacker at evil.com`) is read as an e-mail address.

Short strings (most values of structured output: ids, dates, names, single addresses) recur across
outputs, so their keys are kept in a bounded process-wide cache (`SHORT_CACHE_ENTRIES`); those that
are ASCII without any decoding trigger skip `fold.views`, and a single address skips the chunk
machinery too. Cost model behind these choices (CPython, per MB of text): a one-character scan
(memchr) ~0.05 ms, a multi-character substring search or `bytes.translate` ~1 ms, a regex scan 2-5 ms;
a Python function call or regex call ~0.2 µs each. So scans are few, gated by cheap ones, and the
per-token Python work runs only on chunks around anchors.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import unquote

from bouncerd.core import fold

MIN_KEY_CHARS = 6  # shorter tokens ("a@b.c", "x.io") collide with ordinary text too often
MAX_KEY_CHARS = 320  # an e-mail is at most 254 characters; longer URL keys end in a digest
MAX_PATH_PREFIX_SEGMENTS = 3  # "host/a/b/c": enough to tell tenants of a shared host apart
PHONE_MIN_DIGITS = 8  # shorter digit runs are dates, amounts, ids
PHONE_MAX_DIGITS = 15  # E.164 maximum

DEFAULT_PORTS: dict[str, frozenset[str]] = {
    "http": frozenset({"80"}),
    "https": frozenset({"443"}),
    "ws": frozenset({"80"}),
    "wss": frozenset({"443"}),
    "ftp": frozenset({"21"}),
    "": frozenset({"80", "443"}),  # no scheme written: either web default
}
_GMAIL = frozenset({"gmail.com", "googlemail.com"})
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_SINGLE_LABEL = re.compile(r"[^\W_][\w-]*")
_NON_DIGITS = re.compile(r"\D+")


# ---- keys of one token -----------------------------------------------------------------------------


def host_key(host: str) -> str | None:
    """A folded host as a key (trailing dots removed, punycode decoded), or None if it is not a host.

    Callers pass hosts matched by `[\\w-]+(\\.[\\w-]+)*` (or an IPv6 literal).
    """
    if host.endswith("."):
        host = host.rstrip(".")
    if "xn--" in host:
        host = fold.fold_clean(host)
    dot = host.rfind(".")
    if dot < 0:
        if host.startswith("[") and host.endswith("]"):
            return host  # IPv6 literal
        return host if _SINGLE_LABEL.fullmatch(host) else None
    tld = host[dot + 1 :]
    if len(tld) < 2 or tld.isdigit() or (not tld.isalnum() and "-" not in tld):
        return host if _IPV4.fullmatch(host) else None
    return host


def host_keys(host: str) -> list[str]:
    """The keys of a host: itself and, for `www.` hosts, the host without it."""
    if host.startswith("www.") and host.count(".") >= 2:
        return [host, host[4:]]
    return [host]


def email_key(local: str, domain: str) -> str | None:
    local = local.strip(".'").split("+", 1)[0]
    host = host_key(domain)
    if not local or host is None or "." not in host:
        return None
    if host in _GMAIL:
        local, host = local.replace(".", ""), "gmail.com"
    return f"{local}@{host}"


def shorten(key: str) -> str:
    """Keys longer than `MAX_KEY_CHARS` end in a digest of the whole, the same on both sides."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    return key[: MAX_KEY_CHARS - 25] + "~" + digest


def _segments(path: str) -> list[str]:
    if "%" in path:
        path = unquote(path, errors="replace")
    if "." not in path:
        return [seg for seg in path.split("/") if seg]  # no "." or ".." segment to resolve
    out: list[str] = []
    for seg in path.split("/"):
        if seg == "..":
            if out:
                out.pop()
        elif seg and seg != ".":
            out.append(seg)
    return out


class UrlKeys(NamedTuple):
    hosts: list[str]  # the host, and the host without "www."
    prefixes: list[str]  # host+first path segments, shortest first
    whole: str  # host[:port]/path?query#fragment: the URL without its scheme

    def all(self) -> list[str]:
        return [*self.hosts, *self.prefixes, self.whole]


def url_keys(
    scheme: str, host: str, port: str | None, path: str, query: str | None, fragment: str | None
) -> UrlKeys | None:
    """The keys of one URL, or None if its host is not a host."""
    hkey = host_key(host)
    if hkey is None:
        return None
    hosts = host_keys(hkey) if hkey.startswith("www.") else [hkey]
    base = hosts[-1]
    if port and port not in DEFAULT_PORTS.get(scheme, frozenset()):
        base = f"{base}:{port.lstrip('0') or '0'}"
    prefixes: list[str] = []
    whole = base
    if path and path != "/":
        segments = _segments(path)
        for seg in segments[:MAX_PATH_PREFIX_SEGMENTS]:
            whole = whole + "/" + seg
            prefixes.append(whole if len(whole) <= MAX_KEY_CHARS else shorten(whole))
        if len(segments) > MAX_PATH_PREFIX_SEGMENTS:
            whole += "/" + "/".join(segments[MAX_PATH_PREFIX_SEGMENTS:])
    if query:
        whole += "?" + (unquote(query, errors="replace") if "%" in query else query)
    if fragment:
        whole += "#" + (unquote(fragment, errors="replace") if "%" in fragment else fragment)
    if len(whole) > MAX_KEY_CHARS:
        whole = shorten(whole)
    if prefixes and prefixes[-1] == whole:
        prefixes.pop()
    return UrlKeys(hosts, prefixes, whole)


def phone_keys(token: str) -> list[str]:
    """The digits of a phone number and its national forms, or [] if it has too few or many digits."""
    digits = _NON_DIGITS.sub("", token)
    intl = token.lstrip()[:1] == "+"
    if digits.startswith("00"):
        digits, intl = digits[2:], True
    if not PHONE_MIN_DIGITS <= len(digits) <= PHONE_MAX_DIGITS:
        return []
    keys = [digits]
    if intl:
        keys += [digits[i:] for i in (1, 2, 3) if len(digits) - i >= PHONE_MIN_DIGITS]
    elif digits[0] == "0" and len(digits) - 1 >= PHONE_MIN_DIGITS:
        keys.append(digits[1:])
    return keys


def iban_key(token: str) -> str | None:
    """A compact IBAN, if the mod-97 check passes."""
    compact = "".join(token.split()).lower()
    if not (15 <= len(compact) <= 34 and compact.isascii() and compact.isalnum()):
        return None
    if not (compact[:2].isalpha() and compact[2:4].isdigit()):
        return None
    number = "".join(str(int(ch, 36)) for ch in compact[4:] + compact[:4])
    return compact if int(number) % 97 == 1 else None


# ---- the tokenizer ---------------------------------------------------------------------------------

# Byte mask of a folded text (non-ASCII characters count as word characters, "?" after encoding):
#   " " delimiters (whitespace, brackets, quotes, , ;)   "0" digits   "a" letters and "_"
#   "@" "." "#" "-" "/" "+" ":" themselves               "C" ASCII control characters   "w" the rest
_DELIMITERS = b' \t\n\r\x0b\x0c<>"`(){}[]|\\^,;'
_KEEP = b"@.#-/+:"


def _mask_byte(c: int) -> int:
    if c in _DELIMITERS:
        return ord(" ")
    if c in _KEEP:
        return c
    if 48 <= c <= 57:
        return ord("0")
    if chr(c).isascii() and (chr(c).isalpha() or c == ord("_")):
        return ord("a")
    if c < 32 or c == 127:
        return ord("C")
    return ord("w")


_MASK = bytes(_mask_byte(c) for c in range(256))
# Anchors in the mask: "@" before a non-delimiter (found by `_positions`, `_AT` past the loop limit), a
# "." before a token character, "#" before a word character.
_AT = re.compile(rb"@")
_DOT_ANCHOR = re.compile(rb"\.[^ .]")
_HASH_ANCHOR = re.compile(rb"#[a0w]")
_SCHEME_SEP = re.compile(r"://")
# A phone-shaped run starts at a digit that does not follow a digit: a match cannot start inside a digit
# run (the attempt at the run's first digit would have matched a superset), so those attempts are skipped.
_PHONE = re.compile(rb"0(?<!00)[0 .\-/]{%d,}0" % (PHONE_MIN_DIGITS - 2))
_IBAN = re.compile(rb"aa00(?: ?[a0]{4}){2,7}(?: ?[a0]{1,3})?")
_DATE = re.compile(rb"0000([-/.])00?\100?|00?([-/.])00?\2(?:00)?00")
_EDGE = ".:!?*'~=-"

_EMAIL_FULL = re.compile(r"([\w.+'-]+)@([\w-]+(?:\.[\w-]+)+)")
_EMAIL = re.compile(r"(?<![\w.+'-])([\w.+'-]++)@([\w-]++(?:\.[\w-]++)++)")
URL = re.compile(
    r"(?:([a-z][a-z0-9+.-]{0,15}):)?//(?:[^/?#\s]*@)?(\[[0-9a-f:.]+\]|[\w.-]*)(?::(\d{0,5}))?"
    r"([^?#\s]*)(?:\?([^#\s]*))?(?:#(\S*))?"
)
HOSTPATH = re.compile(
    r"(?<![\w@.:/-])([\w-]++(?:\.[\w-]++)++)(?::(\d{1,5}))?(?![\w@-])(/[^?#\s]*)?(?:\?([^#\s]*))?(?:#(\S*))?"
)
_HANDLE = re.compile(r"[@#]([^\W_](?:[\w.-]*[^\W_])?)")


def _chunk_keys(text: str, mask: bytes, a: int, b: int, out: set[str]) -> None:
    chunk = text[a:b].strip(_EDGE)
    if not chunk:
        return
    if "@" in chunk:
        m = _EMAIL_FULL.fullmatch(chunk)
        if m is not None:
            key = email_key(m.group(1), m.group(2))
            if key is not None:
                out.add(key)
                return
        for m in _EMAIL.finditer(chunk):
            key = email_key(m.group(1), m.group(2))
            if key is not None:
                out.add(key)
    if "//" in chunk and ("://" in chunk or chunk.startswith("//")):
        whole = URL.fullmatch(chunk)
        if whole is None:
            for m in URL.finditer(chunk):
                got = url_keys(m.group(1) or "", m.group(2), m.group(3), m.group(4), m.group(5), m.group(6))
                if got is not None:
                    out.update(got.all())
        else:
            scheme, host, port, path, query, fragment = whole.groups()
            got = url_keys(scheme or "", host, port, path, query, fragment)
            if got is not None:
                out.update(got.all())
            if "@" not in chunk and "." not in path and (query is None or "." not in query):
                return  # one URL with no host or address in its path or query
    if "." in chunk:
        for m in HOSTPATH.finditer(chunk):
            got = url_keys("", m.group(1), m.group(2), m.group(3) or "", m.group(4), m.group(5))
            if got is None:
                continue
            out.update(got.all())
            # "attacker at evil.com": a spelled-out "at" between a word and this host
            if (
                m.start() == 0
                and a >= 4
                and text[a - 4 : a] == " at "
                and mask[a - 5 : a - 4] in (b"a", b"0")
            ):
                start = mask.rfind(b" ", 0, a - 4) + 1
                key = email_key(text[start : a - 4], got.hosts[0])
                if key is not None:
                    out.add(key)
    if chunk[0] in "@#":
        m = _HANDLE.match(chunk)
        if m is not None:
            out.add(m.group(1))


def _numeric_keys(text: str, mask: bytes, out: set[str]) -> None:
    """Phone numbers and IBANs. Only a text with two digits in a row is read (so "1 2 3 4 5 6 7 8" alone
    is not a phone); that test costs a scan, so it runs only once a candidate is found."""
    n = len(mask)
    found: list[str] = []
    shaped = False  # whether any run is phone-shaped: every IBAN needle below lies inside such a run
    for m in _PHONE.finditer(mask):
        shaped = True
        a, b = m.start(), m.end()
        if (a > 0 and mask[a - 1] in b"aw0") or (b < n and mask[b] in b"aw"):
            continue
        if _DATE.fullmatch(mask, a, b):
            continue  # 2026-05-09, 09/05/2026: dates, not phone numbers
        if a > 0 and mask[a - 1] == ord("+"):
            a -= 1
        found += phone_keys(text[a:b])
    if found and b"00" in mask:
        out.update(found)
    if not shaped:
        return
    # Every IBAN's account part has 8 digits in a row or two 4-digit groups: find those (memchr-fast),
    # then try the nearest "letters, digits" start before them.
    for needle in (b"0000 0000", b"00000000"):
        i = mask.find(needle)
        while i >= 0:
            start = mask.rfind(b"aa00", max(0, i - 16), i + 4)
            iban = _IBAN.match(mask, start) if start >= 0 else None
            if iban is None:
                i = mask.find(needle, i + len(needle))
                continue
            a, b = iban.start(), iban.end()
            if not ((a > 0 and mask[a - 1] in b"a0w") or (b < n and mask[b] in b"a0w")):
                key = iban_key(text[a:b])
                if key is not None:
                    out.add(key)
            i = mask.find(needle, max(b, i + len(needle)))  # the match can end before the needle


# "@" and "://" are rare: their positions are found with byte scans, one at a time; past this many in
# one text a regex scan is cheaper than the Python loop.
MAX_ANCHOR_LOOP = 16


def _positions(haystack: str | bytes, needle: Any, pattern: re.Pattern[Any]) -> list[int]:
    """Start of every non-overlapping `needle` (which `pattern` matches exactly)."""
    found: list[int] = []
    i = haystack.find(needle)
    while i >= 0:
        if len(found) == MAX_ANCHOR_LOOP:
            return [m.start() for m in pattern.finditer(haystack)]
        found.append(i)
        i = haystack.find(needle, i + len(needle))
    return found


def _anchors(text: str, mask: bytes) -> list[int]:
    """Sorted positions of `@` and `#` before a token character, `.` inside a word, and `://`."""
    anchors = [p for p in _positions(mask, b"@", _AT) if mask[p + 1 : p + 2] not in (b" ", b"")]
    if b"." in mask:
        anchors += [m.start() for m in _DOT_ANCHOR.finditer(mask)]
    if b"#" in mask:
        anchors += [m.start() for m in _HASH_ANCHOR.finditer(mask)]
    if "://" in text:
        anchors += _positions(text, "://", _SCHEME_SEP)
    anchors.sort()
    return anchors


def keys_in(text: str, out: set[str]) -> None:
    """Add the key of every destination token in one folded text to `out` (short keys included)."""
    if len(text) < MIN_KEY_CHARS:
        return
    mask = text.encode("ascii", "replace").translate(_MASK)
    if b"C" in mask:
        text = fold.ASCII_CONTROLS.sub("", text)
        mask = text.encode("ascii", "replace").translate(_MASK)
    anchors = _anchors(text, mask)
    covered = -1
    for p in anchors:
        if p < covered:
            continue
        a = mask.rfind(b" ", 0, p) + 1
        b = mask.find(b" ", p)
        if b < 0:
            b = len(mask)
        covered = b
        _chunk_keys(text, mask, a, b, out)
    if b"0" in mask:
        _numeric_keys(text, mask, out)


# Strings up to this long are "short": cached, and read by the fast path below when they can be.
SHORT_TEXT_CHARS = 256
# Short strings recur across outputs (field names, dates, senders, status words), so their keys are
# cached, least recently used first out. An entry (string, key tuple, cache node) takes at most ~700
# bytes, so the cache stays under ~6 MB (~2 MB for typical 30-character values).
SHORT_CACHE_ENTRIES = 8192
_TRIGGER_CHARS = re.compile(r"[%&\\=\[({<]")
_TOKEN_CHARS = re.compile(r"[@.#/0-9]")


def _has_reading_trigger(low: str) -> bool:
    """Whether a lower-cased ASCII string may read as more than itself: it holds a decoder's trigger
    character (`% & \\ = [ ( { <`), an assembled-spelling marker (" dot ", " @ ", "hxxp", "h**p"), a
    punycode label or a run of `fold.MIN_BASE64_RUN` base64 characters. Each multi-character needle is
    searched only after a one-byte scan for one of its characters."""
    return (
        _TRIGGER_CHARS.search(low) is not None
        or ("-" in low and "xn--" in low)
        or (" " in low and (" dot " in low or " @ " in low))
        or ("x" in low and "hxxp" in low)
        or ("*" in low and "h**p" in low)
        or (len(low) >= fold.MIN_BASE64_RUN and fold.has_base64_run(low))
    )


def _general_keys(text: str) -> tuple[str, ...]:
    """The keys of every reading of `text` (`fold.views`)."""
    out: set[str] = set()
    for view in fold.views(text):
        keys_in(view, out)
    return tuple([k for k in out if len(k) >= MIN_KEY_CHARS])


@lru_cache(maxsize=SHORT_CACHE_ENTRIES)
def _short_keys(text: str) -> tuple[str, ...]:
    """The keys of a short string: ASCII without a reading trigger is read as itself, lower-cased."""
    if not text.isascii():
        return _general_keys(text)
    folded = text.lower()
    if "@" in folded and " " not in folded:
        m = _EMAIL_FULL.fullmatch(folded)
        if m is not None:  # one address (the commonest short value): of the triggers only these fit in one
            if fold.contains(folded, "xn--", 0) or "hxxp" in folded or fold.has_base64_run(folded):
                return _general_keys(text)
            key = email_key(m.group(1), m.group(2))
            return (key,) if key is not None and len(key) >= MIN_KEY_CHARS else ()
    if _has_reading_trigger(folded):
        return _general_keys(text)
    if not _TOKEN_CHARS.search(folded):
        return ()
    out: set[str] = set()
    keys_in(folded, out)
    return tuple([k for k in out if len(k) >= MIN_KEY_CHARS])


def key_tuple(text: str) -> tuple[str, ...]:
    """Every key found in every reading (`fold.views`) of one untrusted string, each once."""
    if len(text) <= SHORT_TEXT_CHARS:
        return _short_keys(text)
    return _general_keys(text)


def text_keys(text: str) -> set[str]:
    """Every key found in every reading (`fold.views`) of one untrusted string."""
    return set(key_tuple(text))
