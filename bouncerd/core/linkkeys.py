"""Links as written: the narrow keys of URLs exactly as an output spells them, and as a reader clicks
them (`exact_url_keys`, `bare_url_keys`), beside the wide keys of `bouncerd.core.shapes`. The fetch
gate allows a URL as seen only on these (`bouncerd.core.taint_index.TaintIndex.seen_exactly`). Pure;
compiled with the scanner (`bouncerd.native.SCANNER`)."""

from __future__ import annotations

import re
from typing import Final

from bouncerd.core import decoders, fold
from bouncerd.core.shapes import EXACT_PREFIX, host_key, shorten

# ---- exact spellings of URLs ------------------------------------------------------------------------
# The keys above are wide on purpose (case, percent-encoding, empty segments and userinfo fold away), so
# a planted URL is found however it is re-spelt. "Fetched exactly as it appeared" must be narrow: every
# byte the receiver sees that the wide key drops could carry data to the planted host. So each URL of an
# untrusted string is also recorded as written (`exact_url_key`), and the fetch gate allows a URL as
# seen only on that (`bouncerd.core.taint.TaintIndex.seen_exactly`).
_SCHEME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_URL_TAIL: Final = re.compile(r"[^\s<>\"'`]*")
_RAW_URL_TRAIL: Final = ".,;:!?)]}*_'\""
_RAW_AUTHORITY: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,15}://[^/?#\\]*)(.*)", re.DOTALL)


def exact_url_key(text: str) -> str | None:
    """The narrow key of one URL: as written, but for the case of its scheme and authority (which no
    receiver reads), or None if it has no scheme and "//". Both sides use this one function, so a
    fetch matches a sighting only byte for byte past the host: cheap, and any other spelling (even
    one WHATWG would serialise the same) is judged by its host instead, which fails closed."""
    m = _RAW_AUTHORITY.match(text)
    if m is None:
        return None
    return shorten(EXACT_PREFIX + m.group(1).lower() + m.group(2))


def exact_url_keys(text: str) -> list[str]:
    """The narrow key of every URL written out in `text` (with a scheme and "//"), each as found, as a
    reader clicks it (`_link_spellings`: without a label glued on by `|`, the bracket that closes a
    Markdown link or trailing punctuation), and the same in each decoded reading of `text` a link may
    hide in (`_link_readings`: base64, quoted-printable, percent-encoding, entities). A URL the text
    spells some other way (wrapped lines) gets none: a fetch of it is judged by its host, which fails
    closed."""
    out: list[str] = []
    _written_url_keys(text, out)
    if may_encode_link(text):
        for reading in _link_readings(text):
            _written_url_keys(reading, out)
    return out


def _written_url_keys(text: str, out: list[str]) -> None:
    """Add to `out` the narrow keys of the URLs in `text` as written, with and without a scheme. Found
    from each "://" (a regex starting at every letter was half the indexing time)."""
    at = text.find("://")
    while at >= 0:
        start = at
        while start > 0 and at - start < 16 and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < at and not text[start].isalpha():
            start += 1
        m = _URL_TAIL.match(text, at + 3)
        end = m.end() if m is not None else at + 3
        if start < at and end > at + 3:
            raw = text[start:end]
            spellings = _link_spellings(raw)
            nested = raw.find("://", at + 3 - start)  # a second link glued on: `…/a,https://…`
            if nested >= 0:  # (or one the first carries: `https://web.archive.org/web/2024/https://…`)
                glued = nested
                while glued > 0 and raw[glued - 1] in _SCHEME_CHARS:
                    glued -= 1
                if glued > at + 3 - start:
                    spellings += _link_spellings(raw[:glued])
                end = start + glued  # the second is found on its own
            for spelling in spellings:
                key = exact_url_key(spelling)
                if key is not None and key not in out:
                    out.append(key)
        at = text.find("://", end)
    if "/" in text:
        for key in bare_url_keys(text):
            if key not in out:
                out.append(key)


# The characters that end a link in the wrappings servers print links in: Slack's `<url|label>`, a
# Markdown table cell, `[label](url)`, `(see url)`, `{url}` in a template. Cut only where the URL has
# not opened the bracket itself (`…/wiki/Mercury_(planet)` keeps its parenthesis).
_LINK_CLOSERS: Final = {")": "(", "]": "[", "}": "{"}


def _link_spellings(raw: str) -> list[str]:
    """The spellings of one URL as found (`raw`, up to white space or a quote) that a reader may mean:
    as found, without trailing punctuation (`.` at a sentence end, `),`), and up to the first `|` or
    unopened closing bracket (and its trailing punctuation). Each is a prefix of what was written, so
    a fetch that adds anything (a query string, a path) to what the text holds matches none of them."""
    out = [raw]
    cut = len(raw)
    bar = raw.find("|")
    if bar >= 0:
        cut = bar
    for close, open_ in _LINK_CLOSERS.items():
        at = raw.find(close, 0, cut)
        while at >= 0:
            if raw.count(open_, 0, at) <= raw.count(close, 0, at):  # this closer opened outside the URL
                cut = at
                break
            at = raw.find(close, at + 1, cut)
    for spelling in (raw.rstrip(_RAW_URL_TRAIL), raw[:cut], _trim_link(raw[:cut])):
        if spelling and spelling not in out:
            out.append(spelling)
    return out


def _trim_link(link: str) -> str:
    """`link` without the punctuation that ends the sentence around it, but for a closing bracket the
    link opened itself (`…/Mercury_(planet).` is `…/Mercury_(planet)`)."""
    end = len(link)
    while end > 0 and link[end - 1] in _RAW_URL_TRAIL:
        opener = _LINK_CLOSERS.get(link[end - 1])
        if opener is not None and link.count(opener, 0, end) >= link.count(link[end - 1], 0, end):
            break
        end -= 1
    return link[:end]


def may_encode_link(text: str) -> bool:
    """Whether `text` may hold a link only a decoded reading shows: it has a decoder's trigger (`%`
    `&` `=` `\\`) or a base64 run long enough to hide one. One C scan each: called for every string
    with a key."""
    return (
        "%" in text
        or "&" in text
        or "=" in text
        or "\\" in text
        or (len(text) >= fold.MIN_BASE64_RUN and decoders.has_base64_run(text))
    )


def _link_readings(text: str) -> list[str]:
    """The decoded readings of `text` (`fold.decoded`, iterated up to `fold.MAX_DECODE_ROUNDS`, within
    `fold.MAX_EXPANSION` of its size), case kept: the file a code host returns as base64, a body in
    quoted-printable, a link percent-encoded into another or written with `&amp;`."""
    budget = len(text) * fold.MAX_EXPANSION + fold.EXPANSION_SLACK
    seen = {text}
    out: list[str] = []
    frontier = [text]
    for _ in range(fold.MAX_DECODE_ROUNDS):
        following: list[str] = []
        for raw in frontier:
            for d in decoders.decoded(raw):
                if d not in seen and len(d) <= budget:
                    budget -= len(d)
                    seen.add(d)
                    following.append(d)
        if not following:
            break
        out += following
        frontier = following
    return out


_BARE_HOST_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
# The schemes a browser's address bar adds to a link written without one.
BARE_URL_SCHEMES: Final = ("https://", "http://")


def bare_url_keys(text: str) -> list[str]:
    """The narrow keys of every link written without a scheme (`www.example-docs.com/shared/123`), as
    the URLs a browser makes of it: with each scheme of `BARE_URL_SCHEMES` in front, byte for byte
    past the host. Found from each "/" after a host name; a link with a scheme is `exact_url_keys`'."""
    out: list[str] = []
    at = text.find("/")
    while at > 0:
        start = at
        while start > 0 and text[start - 1] in _BARE_HOST_CHARS:
            start -= 1
        host = text[start:at]
        before = text[start - 1] if start > 0 else " "
        if "." in host.strip(".") and before not in ":/@\\" and host_key(host.rstrip(".")) is not None:
            m = _URL_TAIL.match(text, at)
            end = m.end() if m is not None else at + 1
            for spelling in _link_spellings(text[start:end]):
                for scheme in BARE_URL_SCHEMES:
                    key = exact_url_key(scheme + spelling)
                    if key is not None and key not in out:
                        out.append(key)
            at = text.find("/", end)
        else:
            at = text.find("/", at + 1)
    return out
