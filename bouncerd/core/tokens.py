"""Destination tokens in folded text, and the index key of each.

Theory of operation
-------------------
Matching is on whole tokens: a token is a maximal run of the characters it can contain, so
`ana@x.com` is not found inside `dana@x.com` and `x.com` is not found inside `ana@x.com`. The
tokenizer never walks text character by character in Python: it maps the folded text to a byte mask
(one `bytes.translate`), finds *anchors* (`@`, `#`, a `.` inside a word, a `:` before `//`, `:` or
IPv6 groups) with literal scans (a byte scan for the rare `@`, literal-prefixed patterns for the
rest), cuts the chunk around each anchor at the nearest delimiter with `find`/`rfind`, and parses only
those chunks. A `/` in a chunk that no anchor reached is found with a byte scan that skips the chunks
already read (only `owner/repo` can be a key there); UNC paths are found from the rare `\\\\`. Digit
runs (phones, IBANs) and platform ids are found in the same mask with one literal-prefixed pattern,
only where a digit appears.

Token classes and their keys (all in folded form; keys shorter than `MIN_KEY_CHARS` are dropped): the
e-mail, URL, host, IPv6, repository, phone and IBAN shapes and their keys are `shapes`' (its docstring
says what each key is; the argument side and the shell reader use the same ones). This module finds
them in text, and these, which only output has:
- **UNC path** (`\\\\evil.example\\share\\file`, starting a token): the keys of the URL
  `//evil.example/share/file`. A host without a share (`"\\\\n"` in escaped code) is not one, nor is
  a `\\\\` after a drive letter (`c:\\\\users`). A single-label host counts (`\\\\nas01\\share`).
- **platform id** (Slack user, channel and team ids: `U04ABCDEF12`): `numeric_tokens`, with the
  phones and IBANs.
- **handle / channel** (`@bob.smith`, `#general`) anywhere in a chunk, at its start or after a
  character that cannot end a local part, a path, an entity or a sigil (`cc:@bob`, `to=#ops-2`, not
  `x@bob`, `/#top`, `&#64;`, `sym@@ver`): the name without its sigil, so `channel: "general"` matches
  `#general`. A `#` followed by a hex colour (`#c0c0c0`) is not a channel.
- a spelled-out `at` before a host (`attacker at evil.com`) is read as an e-mail address.
- as a reader sees a token: a host after a word and a colon (`website:evil.example`, `https:evil.example`,
  `https:/evil.example`); markdown emphasis at a chunk's ends or beside `@` and `.` (`_x_`,
  `eve@**evil**.example`: `_EMPHASIS`); and an anchor chunk joined with the chunks that a gap a reader
  does not see separates from it (`_joined_keys`: a line break or tab where a client wrapped the line,
  backticks, inline HTML tags and comments), each join read, at most `MAX_JOINS` on a side, never
  across a blank line, and across a line break only after a separator, an address, or before a chunk
  that starts with `.` or `@` on the left, and not after a number on the right.

Short strings (most values of structured output: ids, dates, names, single addresses) recur across
outputs, so their keys are kept in a bounded process-wide cache (`SHORT_CACHE_ENTRIES`); those that
are ASCII without any decoding trigger skip `fold.views`, and a single address skips the chunk
machinery too. Cost model behind these choices (CPython, per MB of text): a one-character scan
(memchr) ~0.05 ms, a multi-character substring search or `bytes.translate` ~1 ms, a regex scan 2-5 ms
(1 ms with a one-character literal prefix); a Python function call or regex call ~0.2 µs each. So
scans are few, gated by cheap ones, and the per-token Python work runs only on chunks around anchors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final

from bouncerd.core import decoders, fold
from bouncerd.core.numeric_tokens import PLATFORM_ID_MIN_CHARS, numeric_keys
from bouncerd.core.shapes import (
    CODE_HOSTS,
    EMAIL_LOCAL,
    HOSTPATH,
    IBAN_MIN_CHARS,
    MIN_KEY_CHARS,
    PHONE_MIN_DIGITS,
    URL,
    email_key,
    ipv6_keys,
    repo_key,
    url_keys,
)
from bouncerd.core.shapes import EMAIL as _EMAIL_FULL
from bouncerd.core.shapes import EMAIL_IN_TEXT as _EMAIL
from bouncerd.core.shapes import code_host_repo as _code_host_repo


def _load_native_anchors() -> Callable[[bytes], list[int]] | None:
    """The anchor scan in C, built with the compiled scanner (bouncerd/native.py decides if it loads)."""
    try:
        from bouncerd.core._scan import anchors
    except ImportError:
        return None
    return anchors


_native_anchors: Final = _load_native_anchors()

_HAS_DIGIT: Final = re.compile(r"\d")


# ---- the tokenizer ---------------------------------------------------------------------------------

# Byte mask of a folded text (non-ASCII characters count as word characters, "?" after encoding):
#   " " delimiters (whitespace, brackets, quotes, , ;)   "0" digits   "a" letters and "_"
#   "@" "." "#" "-" "/" "+" ":" themselves               "C" ASCII control characters   "w" the rest
_DELIMITERS: Final = b' \t\n\r\x0b\x0c<>"`(){}[]|\\^,;'
_KEEP: Final = b"@.#-/+:"


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


_MASK: Final = bytes(_mask_byte(c) for c in range(256))
# Mask bytes tested for with `in` as ints: `byte in mask` is one memchr, while `b"." in mask` first
# tries the operand as an int and pays for a TypeError before it searches.
_DOT_BYTE: Final = ord(".")
_HASH_BYTE: Final = ord("#")
_COLON_BYTE: Final = ord(":")
_DIGIT_BYTE: Final = ord("0")
_CONTROL_BYTE: Final = ord("C")
# Anchors in the mask: "@" before a non-delimiter (found by `_positions`, `_AT` past the loop limit), a
# "." before a token character, "#" before a word character, and a ":" before "//" (a URL), before ":"
# or before three more IPv6 groups (an IPv6 address: a time such as "10:00:00" is not one).
_AT: Final = re.compile(rb"@")
_DOT_ANCHOR: Final = re.compile(rb"\.[^ .]")
_HASH_ANCHOR: Final = re.compile(rb"#[a0w]")
_COLON_ANCHOR: Final = re.compile(rb":(?://|:|[0a]{1,4}:[0a]{1,4}:[0a]{1,4}:)")
_EDGE: Final = ".:!?*'~=-"
_IP_EDGE: Final = ".!?*'~=-"  # an IPv6 address can begin or end with "::"
IPV6_MAX_CHARS: Final = 45  # ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255

# another sigil ("sym@@glibcxx_3.4" is a symbol version, "&#64;" an entity).
_HANDLE: Final = re.compile(r"(?<![\w.+'/&@-])[@#]([^\W_](?:[\w.-]*[^\W_])?)")
_HEX_COLOR: Final = re.compile(r"#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})")
_IPV6: Final = re.compile(r"(?:[0-9a-f]{0,4}:){2,7}(?:[0-9a-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?")
_SCP_GIT: Final = re.compile(r"[\w.-]+@([\w.-]+):/?([\w.-]+/[\w.-]+?)(?:\.git)?/?")
# `\\host\share`, and WebDAV's `\\host@SSL\…` / `\\host@8080\…` (Windows' WebClient reaches the host
# over HTTPS or on that port)
_UNC: Final = re.compile(
    r"\\\\([\w-]+(?:\.[\w-]+)*)(?:@(?:SSL|ssl|\d{1,5})(?:@\d{1,5})?)?((?:\\[^\s\\\"'`<>(){}\[\]|^,;]+)+)"
)


# Markdown emphasis and strike-through marks a renderer removes from a token: a run at either end
# (`_eve@evil.example_`, `__x__`), beside an `@` or `.` (`eve@**evil**.example`, `eve@_evil_.example`),
# or `*`/`~` inside a word (`ev**il**`). `_` inside a word is not emphasis (CommonMark): `eve_x` stays.
_EMPHASIS: Final = re.compile(
    r"^[_*~]+|[_*~]+$|(?<=[\w-])[_*~]+(?=[.@])|(?<=[.@])[_*~]+(?=[\w-])|(?<=[^\W_])[*~]+(?=[^\W_])"
)


# The local part a reader sees in the word before a spelled-out "at": the run of address characters at
# its end, after markup or punctuation (`**attacker at …`, `to:attacker at …`, `=attacker at …`).
_SPELLED_LOCAL: Final = re.compile(rf"{EMAIL_LOCAL}$")


def spelled_addresses(word: str, host: str, ends_in_a_word: bool, out: set[str]) -> None:
    """`attacker at evil.com`: the word before the "at" (`ends_in_a_word`: its last character a letter
    or digit) as written, and as a reader sees it with markup around it and punctuation before it
    dropped (`**attacker at evil.com**`, `_attacker_ at evil.com`, `to:attacker at evil.com`)."""
    if ends_in_a_word:
        key = email_key(word, host)
        if key is not None:
            out.add(key)
    m = _SPELLED_LOCAL.search(word.rstrip("*_~"))
    local = m.group(0).lstrip("_") if m is not None else ""
    if local and local != word and local[-1].isalnum():
        key = email_key(local, host)
        if key is not None:
            out.add(key)


def _chunk_keys(text: str, mask: bytes, a: int, b: int, out: set[str]) -> None:
    raw = text[a:b]
    chunk = raw.strip(_EDGE)
    if not chunk:
        return
    if ("_" in chunk or "*" in chunk or "~" in chunk) and _EMPHASIS.search(chunk) is not None:
        shown = _EMPHASIS.sub("", chunk)  # as a markdown renderer shows it; as written is read below
        if shown:
            _chunk_keys(shown, shown.encode("ascii", "replace").translate(_MASK), 0, len(shown), out)
    sigil = False
    if "@" in chunk:
        sigil = True
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
        if ":" in chunk:
            m = _SCP_GIT.fullmatch(chunk)  # git@github.com:owner/repo.git
            if m is not None and m.group(1) in CODE_HOSTS:
                key = repo_key(m.group(2))
                if key is not None:
                    out.add(key)
    if "//" in chunk and ("://" in chunk or chunk.startswith("//")):
        whole = URL.fullmatch(chunk)
        if whole is None:
            for m in URL.finditer(chunk):
                got = url_keys(m.group(1) or "", m.group(2), m.group(3), m.group(4), m.group(5), m.group(6))
                if got is not None:
                    out.update(got.all())
                    if got.hosts[-1] in CODE_HOSTS:
                        _code_host_repo(got, out)
        else:
            scheme, host, port, path, query, fragment = whole.groups()
            got = url_keys(scheme or "", host, port, path, query, fragment)
            if got is not None:
                out.update(got.all())
                if got.hosts[-1] in CODE_HOSTS:
                    _code_host_repo(got, out)
            if "@" not in chunk and "." not in path and (query is None or "." not in query):
                return  # one URL with no host or address in its path or query
    else:
        if "/" in chunk:
            key = repo_key(chunk)
            if key is not None:
                out.add(key)
        if ":" in raw and raw.count(":") >= 2:
            m = _IPV6.fullmatch(raw.strip(_IP_EDGE))
            if m is not None and len(m.group(0)) <= IPV6_MAX_CHARS and _HAS_DIGIT.search(m.group(0)):
                out.update(ipv6_keys(m.group(0)))
    if "." in chunk:
        for m in HOSTPATH.finditer(chunk):
            got = url_keys("", m.group(1), m.group(2), m.group(3) or "", m.group(4), m.group(5))
            if got is None:
                continue
            out.update(got.all())
            if got.hosts[-1] in CODE_HOSTS:
                _code_host_repo(got, out)
            # "attacker at evil.com": a spelled-out "at" between a word and this host
            if m.start() == 0 and a >= 5 and text[a - 4 : a] == " at ":  # (a word before " at ")
                start = mask.rfind(b" ", 0, a - 4) + 1
                spelled_addresses(text[start : a - 4], got.hosts[0], mask[a - 5 : a - 4] in (b"a", b"0"), out)
    if sigil or "#" in chunk:
        for m in _HANDLE.finditer(chunk):
            if m.group(0)[0] == "@" or not _HEX_COLOR.fullmatch(m.group(0)):  # "#c0c0c0" is a colour
                out.add(m.group(1))


# What a reader does not see inside a token, between two chunks: a line break or tab where a client
# wrapped the line (`evil.exam\nple`, `eve@\nevil.example`, `evil\n.example`; not a blank line), code marks
# (eve@`evil`.example), an inline HTML tag or comment (`eve@evil<b></b>.example`,
# `<span>eve</span>@evil.example`). At most `MAX_JOINS` gaps are joined on each side of a chunk.
_INLINE_TAGS: Final = (
    "a|abbr|b|bdi|bdo|big|cite|code|data|del|dfn|em|font|i|ins|kbd|mark|q|s|samp|small|span|strike|"
    "strong|sub|sup|time|tt|u|var|wbr"
)
_MARKUP_GAP: Final = rf"`+|<!--[^<>]{{0,200}}?-->|</?(?:{_INLINE_TAGS})\b[^<>]{{0,200}}>"
_BREAK_GAP: Final = r"[ ]{0,4}(?:\r?\n|\t)[ \t]{0,4}"
_GAP: Final = re.compile(rf"(?:{_MARKUP_GAP}|{_BREAK_GAP})+")
_MARKUP_PIECE: Final = re.compile(_MARKUP_GAP)
_GAP_AFTER: Final = "`<\r\n\t"
_GAP_BEFORE: Final = "`>\r\n\t"
_BREAKS: Final = ("\r", "\n", "\t", " ")
MAX_JOINS: Final = 4  # an address cut into five pieces is still read; a sixth piece is not
MAX_GAP_CHARS: Final = 256
_NUMBER: Final = re.compile(r"[\d.,:+-]+")


def _gap_start(text: str, i: int) -> int:
    """Where the gap (`_GAP`) that ends at `i` starts (`i` if there is none), read backwards piece by
    piece: whitespace with at most one line break, backticks, inline tags and comments."""
    start = i
    lo = max(0, i - MAX_GAP_CHARS)
    while i > lo:
        c = text[i - 1]
        if c in " \t\r\n":
            h = i - 1
            while h > lo and text[h - 1] in " \t\r\n":
                h -= 1
            if text.count("\n", h, i) > 1 or not ("\n" in text[h:i] or "\t" in text[h:i]):
                return start
            i = start = h
        elif c == "`":
            while i > lo and text[i - 1] == "`":
                i -= 1
            start = i
        elif c == ">":
            h = text.rfind("<", lo, i)
            if h < 0 or _MARKUP_PIECE.fullmatch(text, h, i) is None:
                return start
            i = start = h
        else:
            return start
    return start


def _joined_keys(text: str, mask: bytes, a: int, b: int, out: set[str]) -> None:
    """The keys of the anchor chunk `text[a:b]` joined with the chunks that a gap a reader does not see
    (`_GAP`) separates from it."""
    n = len(text)
    lefts, rights = [""], [""]  # the chunks joined on each side, nearest first
    number = _NUMBER.fullmatch(text, a, b) is not None  # "Total: 12.50\nDate:" is not one token
    j, joins = b, 0
    while joins < MAX_JOINS and j < n and (text[j] in _GAP_AFTER or text[j] == " "):
        m = _GAP.match(text, j, j + MAX_GAP_CHARS)
        if m is None:
            break
        k = m.end()
        if k >= n or mask[k] == 32:
            break
        e = mask.find(b" ", k)
        if e < 0:
            e = n
        gap = m.group(0)
        if not gap.strip(" \r\n\t") and (gap.count("\n") > 1 or number or text[e - 1] == ":"):
            break  # a blank line ends a paragraph: no client wraps a token across one; nor a number,
            # nor before a header name ("eve@evil.example\nTo: …")
        rights.append(rights[-1] + text[k:e])
        j, joins = e, joins + 1
    i = a
    while joins < MAX_JOINS and i > 0 and text[i - 1] in _GAP_BEFORE:
        g = _gap_start(text, i)
        if g <= 0 or g == i or mask[g - 1] == 32:
            break
        gap = text[g:i]
        if not gap.strip(" \r\n\t") and "\t" not in gap and text[i] not in ".@" and text[g - 1] not in ".@-/":
            break  # prose before a line: joined only where a separator ends or starts the cut
        h = mask.rfind(b" ", 0, g) + 1
        lefts.append(text[h:g] + lefts[-1])
        i, joins = h, joins + 1
    for left in lefts:  # every join: the token may end at any of the gaps (`evil.exa\nmple\nThanks`)
        for right in rights:
            if left or right:
                joined = left + text[a:b] + right
                _chunk_keys(joined, joined.encode("ascii", "replace").translate(_MASK), 0, len(joined), out)


def _chunk_bounds(mask: bytes, p: int) -> tuple[int, int]:
    """The chunk around position `p`: from after the delimiter before it to the delimiter after it."""
    b = mask.find(b" ", p)
    return mask.rfind(b" ", 0, p) + 1, b if b >= 0 else len(mask)


def _slash_chunk_keys(text: str, mask: bytes, i: int, out: set[str]) -> int:
    """The `owner/repo` of the chunk around the "/" at `i`, which no anchor reached
    (`evil-org/exfil-repo`); returns the next "/" after that chunk (`len(mask)` if none)."""
    a, b = _chunk_bounds(mask, i)
    key = repo_key(text[a:b].strip(_EDGE))
    if key is not None:
        out.add(key)
    i = mask.find(b"/", b)
    return i if i >= 0 else len(mask)


def _unc_keys(text: str, mask: bytes, out: set[str]) -> None:
    """`\\\\host\\share\\path` at the start of a token, keyed as the URL `//host/share/path`. A `\\\\`
    after a drive letter (`c:\\\\users`, an escaped Windows path) or inside a word is not one."""
    i = text.find("\\\\")
    while i >= 0:
        m = None
        if i == 0 or (mask[i - 1] == 32 and text[i - 1] != "\\"):
            m = _UNC.match(text, i)
            if m is not None:
                got = url_keys("file", m.group(1), None, m.group(2).replace("\\", "/"), None, None)
                if got is not None:
                    out.update(got.all())
        i = text.find("\\\\", m.end() if m is not None else i + 2)


# "@" is rare: its positions are found with byte scans, one at a time; past this many in one text a
# regex scan is cheaper than the Python loop.
MAX_ANCHOR_LOOP: Final = 16


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


def _anchors(mask: bytes) -> list[int]:
    """Sorted positions of `@` and `#` before a token character, `.` inside a word, and `:` before
    `//`, `:` or IPv6 groups (one colon pattern costs less than a search for "://" alone). The
    compiled build runs the same scan in C (`_scan.anchors`, one pass instead of four)."""
    anchors = [p for p in _positions(mask, b"@", _AT) if mask[p + 1 : p + 2] not in (b" ", b"")]
    if _DOT_BYTE in mask:
        anchors += [m.start() for m in _DOT_ANCHOR.finditer(mask)]
    if _HASH_BYTE in mask:
        anchors += [m.start() for m in _HASH_ANCHOR.finditer(mask)]
    if _COLON_BYTE in mask:
        anchors += [m.start() for m in _COLON_ANCHOR.finditer(mask)]
    anchors.sort()
    return anchors


def keys_in(text: str, out: set[str]) -> None:
    """Add the key of every destination token in one folded text to `out` (short keys included)."""
    if len(text) < MIN_KEY_CHARS:
        return
    mask = text.encode("ascii", "replace").translate(_MASK)
    if _CONTROL_BYTE in mask:
        # A control character either hides inside a token (`ev\x00e@evil.example`, read by a model as
        # `eve@…`) or separates two (`eve@evil.example\x00ann@corp.example`, where C code stops): both.
        keys_in(fold.ASCII_CONTROLS.sub(" ", text), out)
        text = fold.ASCII_CONTROLS.sub("", text)
        mask = text.encode("ascii", "replace").translate(_MASK)
    n = len(mask)
    slash = mask.find(b"/")  # the next "/" not read yet (n: none)
    if slash < 0:
        slash = n
    bracket = "[" in text
    covered = -1
    for p in _native_anchors(mask) if _native_anchors is not None else _anchors(mask):
        if p < covered:
            continue
        a = mask.rfind(b" ", 0, p) + 1
        b = mask.find(b" ", p)
        if b < 0:
            b = n
        elif bracket and text[b] == "[" and (text[b - 2 : b] == "//" or text[b - 1] == "@"):
            close = text.find("]", b, b + IPV6_MAX_CHARS + 2)  # http://[2001:db8::1]:8080/: one chunk
            if close > 0:
                b = mask.find(b" ", close + 1)
                if b < 0:
                    b = n
        covered = b
        if (b < n and (text[b] in _GAP_AFTER or (text[b] == " " and text[b + 1 : b + 2] in _BREAKS))) or (
            a > 0 and text[a - 1] in _GAP_BEFORE
        ):
            _joined_keys(text, mask, a, b, out)
        if slash < b:
            while slash < a:  # a "/" in a chunk that no anchor reached
                slash = _slash_chunk_keys(text, mask, slash, out)
            if slash < b:  # this chunk's own "/" (read by `_chunk_keys`)
                slash = mask.find(b"/", b)
                if slash < 0:
                    slash = n
        _chunk_keys(text, mask, a, b, out)
    while slash < n:
        slash = _slash_chunk_keys(text, mask, slash, out)
    if "\\" in text:
        _unc_keys(text, mask, out)
    if _DIGIT_BYTE in mask:
        numeric_keys(text, mask, out)


# Strings up to this long are "short": cached, and read by the fast path below when they can be.
SHORT_TEXT_CHARS: Final = 256
# Short strings recur across outputs (field names, dates, senders, status words), so their keys are
# cached, least recently used first out. An entry (string, key tuple, cache node) takes at most ~700
# bytes, so the cache stays under ~6 MB (~2 MB for typical 30-character values).
SHORT_CACHE_ENTRIES: Final = 8192
_TRIGGER_CHARS: Final = re.compile(r"[%&\\=\[({<]")
_QUOTE_BEFORE_AT: Final = re.compile(
    r'"\s*@'
)  # as fold's quoted local part is read: any run of spaces between
_TOKEN_CHARS: Final = re.compile(r"[@.#/0-9]")
# Without an anchor character or a "/", only digit runs can be keys (phones, IBANs, platform ids), and
# the shortest of those has this many characters: a shorter string ("m1234-0", an id) has none.
_CHUNK_CHARS: Final = re.compile(r"[@.#/:]")
_SHORTEST_NUMERIC_KEY: Final = min(PHONE_MIN_DIGITS, IBAN_MIN_CHARS, PLATFORM_ID_MIN_CHARS)


def _has_reading_trigger(low: str) -> bool:
    """Whether a lower-cased ASCII string may read as more than itself: it holds a decoder's trigger
    character (`% & \\ = [ ( { <`), an assembled-spelling marker (" dot ", " @ ", "hxxp", "h**p"), a
    punycode label or a run of `decoders.MIN_BASE64_RUN` base64 characters. Each multi-character needle is
    searched only after a one-byte scan for one of its characters."""
    return (
        _TRIGGER_CHARS.search(low) is not None
        or ("-" in low and "xn--" in low)
        or (" " in low and (" dot " in low or " @ " in low))
        or ("x" in low and "hxxp" in low)
        or ('"' in low and _QUOTE_BEFORE_AT.search(low) is not None)  # quoted local part: "eve" @evil.ex
        or ("*" in low and "h**p" in low)
        or (len(low) >= decoders.MIN_BASE64_RUN and decoders.has_base64_run(low))
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
            if decoders.contains(folded, "xn--", 0) or "hxxp" in folded or decoders.has_base64_run(folded):
                return _general_keys(text)
            key = email_key(m.group(1), m.group(2))
            if key is not None:
                return (key,) if len(key) >= MIN_KEY_CHARS else ()
            # not an address as written (`_eve@evil.example_`): the tokenizer reads its renderings
    if _has_reading_trigger(folded):
        return _general_keys(text)
    if not _TOKEN_CHARS.search(folded):
        return ()
    if len(folded) < _SHORTEST_NUMERIC_KEY and _CHUNK_CHARS.search(folded) is None:
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
