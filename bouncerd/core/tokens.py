"""Destination tokens in folded text, and the index key of each.

Theory of operation
-------------------
Matching is on whole tokens: a token is a maximal run of the characters it can contain, so
`ana@x.com` is not found inside `dana@x.com` and `x.com` is not found inside `ana@x.com`. The
tokenizer never walks text character by character in Python: it maps the folded text to a byte mask
(one `bytes.translate`), finds *anchors* (`@`, `#`, a `.` inside a word, `://`) with literal scans,
cuts the chunk around each anchor at the nearest delimiter with `find`/`rfind`, and parses only those
chunks. Digit runs (phones, IBANs) are found in the same mask with literal-prefixed patterns.

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

Short ASCII strings without any decoding trigger (most values of structured output) skip `fold.views`
and, when they are one address, the chunk machinery too.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple
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
    hosts = host_keys(hkey)
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
_ANCHORS = (re.compile(rb"@[^ ]"), re.compile(rb"\.[^ .]"), re.compile(rb"#[a0w]"))
_SCHEME_SEP = re.compile(r"://")
_PHONE = re.compile(rb"0[0 .\-/]{%d,}0" % (PHONE_MIN_DIGITS - 2))
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
        for m in [whole] if whole is not None else URL.finditer(chunk):
            got = url_keys(m.group(1) or "", m.group(2), m.group(3), m.group(4), m.group(5), m.group(6))
            if got is not None:
                out.update(got.all())
        if (
            whole is not None
            and "@" not in chunk
            and "." not in (whole.group(4) or "") + (whole.group(5) or "")
        ):
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
    n = len(mask)
    for m in _PHONE.finditer(mask):
        a, b = m.start(), m.end()
        if (a > 0 and mask[a - 1] in b"aw0") or (b < n and mask[b] in b"aw"):
            continue
        if _DATE.fullmatch(mask, a, b):
            continue  # 2026-05-09, 09/05/2026: dates, not phone numbers
        if a > 0 and mask[a - 1] == ord("+"):
            a -= 1
        out.update(phone_keys(text[a:b]))
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
            i = mask.find(needle, b)


def keys_in(text: str, out: set[str]) -> None:
    """Add the key of every destination token in one folded text to `out` (short keys included)."""
    if len(text) < MIN_KEY_CHARS:
        return
    mask = text.encode("ascii", "replace").translate(_MASK)
    if b"C" in mask:
        text = fold.ASCII_CONTROLS.sub("", text)
        mask = text.encode("ascii", "replace").translate(_MASK)
    anchors: list[int] = []
    for byte, pattern in zip(b"@.#", _ANCHORS, strict=True):
        if byte in mask:
            anchors += [m.start() for m in pattern.finditer(mask)]
    if "://" in text:
        anchors += [m.start() for m in _SCHEME_SEP.finditer(text)]
    anchors.sort()
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
    if b"00" in mask and mask.count(b"0") >= PHONE_MIN_DIGITS:
        _numeric_keys(text, mask, out)


# A short ASCII string with none of these has exactly one reading: itself, lower-cased (the fast path
# for the many small values of structured output: ids, dates, names, single addresses).
SHORT_TEXT_CHARS = 256
_READING_TRIGGERS = re.compile(
    r"[%&\\=\[({<]|xn--| dot | @ |hxxp|h\*\*p|[A-Za-z0-9+/_-]{" + str(fold.MIN_BASE64_RUN) + "}",
    re.IGNORECASE,
)
_TOKEN_CHARS = re.compile(r"[@.#/0-9]")


def text_keys(text: str) -> set[str]:
    """Every key found in every reading (`fold.views`) of one untrusted string."""
    out: set[str] = set()
    if len(text) <= SHORT_TEXT_CHARS and text.isascii() and not _READING_TRIGGERS.search(text):
        if not _TOKEN_CHARS.search(text):
            return out
        folded = text.lower()
        if "@" in folded and " " not in folded:
            m = _EMAIL_FULL.fullmatch(folded)
            if m is not None:
                key = email_key(m.group(1), m.group(2))
                if key is not None and len(key) >= MIN_KEY_CHARS:
                    out.add(key)
                return out
        keys_in(folded, out)
    else:
        for view in fold.views(text):
            keys_in(view, out)
    return {k for k in out if len(k) >= MIN_KEY_CHARS}
