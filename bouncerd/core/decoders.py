"""The decoders of untrusted text: what a string's encodings decode to, each found by its trigger.

Theory of operation
-------------------
`fold.views` reads every untrusted string as written and as its encodings decode (`decoded`, one level;
`views` decodes its readings again, in rounds, within a size budget): percent-encoding (also
`%uXXXX`), HTML entities, JSON/JS string escapes (`\\u0040`, `\\x40`, `\\u{40}`) and MIME
encoded-words (`=?utf-8?b?…?=`, `?q?`) in one chained pass (`decode_inline`: they are unambiguous);
CSS escapes in a reading of their own (`\\100` is `@` in C and `Ā` in CSS); quoted-printable in a pass
of its own (`decode_qp`: it garbles text that only looks like it); and base64 (or base64url) runs of at
least `MIN_BASE64_RUN` characters, line-wrapped runs joined, that decode to UTF-8 text
(`base64_runs`, `decode_base64_text`).

Each decoder runs only on strings holding its trigger (`%`, `&`, `\\`, `=?`, `=XX`, a long
base64-alphabet run), found with C-speed scans: one-character scans (memchr, ~20x cheaper than a
substring search) first, and a multi-character trigger through the occurrences of its rare character
(`contains`, which the folding and the tokenizer use too).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Final
from urllib.parse import unquote


def _load_native_readings() -> tuple[Callable[[str], list[str] | None], Callable[[str], bool | None]] | None:
    """The base64-run scans in C (`_readings.base64_runs`, `has_base64_run`: strings of one byte a
    character), built with the compiled scanner (bouncerd/native.py decides if they load)."""
    try:  # the module, not its names: the compiled build binds a function's imports module-wide
        from bouncerd.core import _readings
    except ImportError:
        return None
    return _readings.base64_runs, _readings.has_base64_run


_native_readings = _load_native_readings()
_native_base64_runs: Final = _native_readings[0] if _native_readings is not None else None
_native_has_base64_run: Final = _native_readings[1] if _native_readings is not None else None

MIN_BASE64_RUN: Final = 16  # 12 decoded bytes; shorter unpadded runs are ordinary words and ids far too often
MIN_PADDED_BASE64_RUN: Final = 8  # with `=` padding a shorter run is plainly base64: down to 4 bytes
# Decoded bytes must read as UTF-8 text: at least 80% of characters printable (random binary reaches
# about 40%; a word glued to the front of a run costs a few garbage characters).
BASE64_MIN_PRINTABLE: Final = 0.8

# A substring search costs about 1 ms per MB of text, a one-character scan (memchr) about 0.05 ms. So
# a needle with a rare character is found through that character's occurrences, checked one by one up
# to this many (prose has none or a few); past them a plain search is cheaper than a Python loop.
RARE_CHAR_CHECKS: Final = 8


def contains(text: str, needle: str, rare: int) -> bool:
    """`needle in text`, found through the occurrences of `needle[rare]`, its rarest character."""
    char = needle[rare]
    i = text.find(char, rare)
    for _ in range(RARE_CHAR_CHECKS):
        if i < 0:
            return False
        if text.startswith(needle, i - rare):
            return True
        i = text.find(char, i + 1)
    return i >= 0 and needle in text


_PCT: Final = re.compile(r"%[0-9A-Fa-f]{2}|%u[0-9A-Fa-f]{4}")
_PCT_U: Final = re.compile(r"%u([0-9A-Fa-f]{4})")
_ENTITY: Final = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
# JSON/JS escapes, Python's `\U0001F600`, C and shell octal escapes (`\100` is `@`), and the backslash
# escapes of markdown for the punctuation of an address (`eve\_x@evil\.example`, `evil\-corp`).
_JS_ESCAPE: Final = re.compile(
    r"\\(?:u[0-9A-Fa-f]{4}|u\{[0-9A-Fa-f]{1,6}\}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2}|[0-3][0-7]{2}|[/@._:*~+#-])"
)
_JS_UNITS: Final = re.compile(r"(?:\\u[0-9A-Fa-f]{4})+")
_JS_OTHER: Final = re.compile(
    r"\\(?:u\{([0-9A-Fa-f]{1,6})\}|U([0-9A-Fa-f]{8}))|\\x([0-9A-Fa-f]{2})|\\([/@._:*~+#-])|\\([0-3][0-7]{2})"
)
# CSS escapes of printable ASCII (`\40 `, `\2e`, `\000040`): hex, one space after them swallowed. A
# reading of its own: `\100` is `@` in C and `Ā` in CSS. Other code points are not read (`\d` in a
# Windows path is not a control character).
# (six hex digits end an escape whatever follows; fewer end at a character that is not a hex digit)
_CSS_ESCAPE: Final = re.compile(r"\\(?:0000([2-7][0-9A-Fa-f])|0{0,3}([2-7][0-9A-Fa-f])(?![0-9A-Fa-f])) ?")
_MIME_WORD: Final = re.compile(r"=\?([^?\s]{1,40})\?([bBqQ])\?([^?\s]*)\?=")
_MIME_GAP: Final = re.compile(r"(?<=\?=)\s+(?==\?)")
# Quoted-printable writes upper-case hex (RFC 2045); requiring it keeps URL queries such as "?ref=de"
# from being decoded as QP everywhere (decoding "=de" yields an invalid byte, then U+FFFD).
# A soft line break counts only after a character other than `=` and before more text on the next line:
# base64 padding at a line end is not QP (`…ZQ=\n\nFrom:` neither), an encoder may break a line
# anywhere else (inside a percent-escape, beside a space).
# One scan finds both: `=XX`, and `=` + line break before a word character (its left side is checked
# in Python).
_QP_TRIGGER: Final = re.compile(r"=(?:[0-9A-F]{2}|\r?\n(?=[^\r\n]))")
_B64_RUN_START: Final = b"b" * MIN_BASE64_RUN
_B64_RUN_REST: Final = re.compile(rb"b*=?=?(?:\r?\nb+=?=?)*")
_B64_MASK: Final = bytes(
    ord("b") if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "+/-_") else c if c in b"=\r\n" else 32
    for c in range(256)
)
# What `_as_text` counts as unprintable: ASCII control characters other than tab, CR and LF, and U+FFFD.
_CONTROL_BYTES: Final = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])


def _js_unescape(text: str) -> str:
    def units(m: re.Match[str]) -> str:
        run = m.group(0)
        raw = b"".join(int(run[i + 2 : i + 6], 16).to_bytes(2, "big") for i in range(0, len(run), 6))
        return raw.decode("utf-16-be", "replace")  # joins surrogate pairs, replaces lone halves

    def other(m: re.Match[str]) -> str:
        if m.group(1) or m.group(2):
            cp = int(m.group(1) or m.group(2), 16)
            return chr(cp) if cp < 0x110000 else "\ufffd"
        if m.group(3):
            return chr(int(m.group(3), 16))
        if m.group(4):
            return m.group(4)
        return chr(int(m.group(5), 8))

    return _JS_OTHER.sub(other, _JS_UNITS.sub(units, text))


def _mime_word(m: re.Match[str]) -> str:
    charset, enc, payload = m.group(1).split("*", 1)[0], m.group(2).lower(), m.group(3)
    try:
        if enc == "b":
            raw = base64.b64decode(payload + "=" * (-len(payload) % 4))
        else:
            raw = binascii.a2b_qp(payload.replace("_", " ").encode("ascii", "replace"))
    except (ValueError, binascii.Error):
        return m.group(0)
    try:
        codecs.lookup(charset)
    except LookupError:
        charset = "utf-8"
    return raw.decode(charset, "replace")


def decode_inline(text: str) -> str:
    """Percent-encoding, HTML entities, JSON/JS escapes and MIME encoded-words, where present."""
    if "%" in text and _PCT.search(text):
        if "%u" in text:
            text = _PCT_U.sub(lambda m: chr(int(m.group(1), 16)), text)
        text = unquote(text, errors="replace")
    if "&" in text and _ENTITY.search(text):
        text = html.unescape(text)
    if "\\" in text and _JS_ESCAPE.search(text):
        text = _js_unescape(text)
    if contains(text, "=?", 0) and _MIME_WORD.search(text):
        text = _MIME_WORD.sub(_mime_word, _MIME_GAP.sub("", text))
    return text


_QP_RUN: Final = re.compile(r"(?:=[0-9A-F]{2})+|=\r?\n")


def _qp_run(m: re.Match[str]) -> str:
    run = m.group(0)
    if run[1] in "\r\n":
        return ""  # soft line break
    return bytes.fromhex(run.replace("=", "")).decode("utf-8", "replace")


def decode_qp(text: str) -> str:
    """Quoted-printable `=XX` runs (as UTF-8) and soft line breaks; nothing else is touched."""
    if "=" not in text:
        return text
    for m in _QP_TRIGGER.finditer(text):
        left = text[m.start() - 1] if m.start() else ""
        if m.group(0)[1] not in "\r\n" or (left and left != "="):
            break
    else:
        return text
    return _QP_RUN.sub(_qp_run, text)


def _as_text(raw: bytes) -> str | None:
    """`raw` as text if it is mostly printable UTF-8 (so binary blobs are not indexed)."""
    text = raw.decode("utf-8", "replace")
    if not text:
        return None
    # An ASCII byte decodes to itself wherever it stands (invalid sequences around it become U+FFFD),
    # so the control characters are counted in `raw` (one C pass) and the replacements in `text`.
    bad = len(raw) - len(raw.translate(None, _CONTROL_BYTES)) + text.count("\ufffd")
    return text if bad <= len(text) * (1 - BASE64_MIN_PRINTABLE) else None


_URLSAFE: Final = bytes.maketrans(b"-_", b"+/")
_PADDING: Final = (b"", b"===", b"==", b"=")  # by length modulo 4 (a remainder of 1 is cut first)


def decode_base64_text(blob: str) -> str | None:
    """One base64 (or base64url) blob decoded, if it decodes to text."""
    body = "".join(blob.split()).rstrip("=")
    if not body.isascii():
        return _decode_base64_text_slowly(body)
    data = body.encode("ascii")
    if "-" in body or "_" in body:
        data = data.translate(_URLSAFE)  # what base64.b64decode does with altchars=b"-_"
    for skip in range(4):  # a run glued to a preceding word starts off the 4-character grid
        part = data[skip:]
        n = len(part)
        if n % 4 == 1:
            part, n = part[:-1], n - 1
        try:
            raw = binascii.a2b_base64(part + _PADDING[n % 4])
        except binascii.Error:
            continue
        text = _as_text(raw)
        if text is not None:
            return text
    return None


def _decode_base64_text_slowly(body: str) -> str | None:
    """`decode_base64_text` of a body with non-ASCII characters: only the offsets that skip them decode."""
    altchars = b"-_" if ("-" in body or "_" in body) else b"+/"
    for skip in range(4):
        part = body[skip:]
        if len(part) % 4 == 1:
            part = part[:-1]
        try:
            raw = base64.b64decode(part + "=" * (-len(part) % 4), altchars=altchars)
        except (binascii.Error, ValueError):
            continue
        text = _as_text(raw)
        if text is not None:
            return text
    return None


def has_base64_run(text: str) -> bool:
    """Whether `text` holds a run of the base64 alphabet of at least `MIN_BASE64_RUN` characters (in C
    for a string of one byte a character when the compiled build runs: `_readings.has_base64_run`)."""
    if _native_has_base64_run is not None:
        found = _native_has_base64_run(text)
        if found is not None:
            return found
    return _has_base64_run(text)


def _has_base64_run(text: str) -> bool:
    """`has_base64_run` in Python: the mask, then a search for the run."""
    return text.encode("ascii", "replace").translate(_B64_MASK).find(_B64_RUN_START) >= 0


def base64_runs(text: str) -> list[str]:
    """Every run of the base64 alphabet long enough to hide a destination (line-wrapped runs joined):
    `MIN_BASE64_RUN` characters, or `MIN_PADDED_BASE64_RUN` when `=` padding closes it. The compiled
    build scans a string of one byte a character in C (`_readings.base64_runs`): CPython's search
    for the mask's 16 `b`s is slow, as most bytes of the mask are `b`."""
    if _native_base64_runs is not None:
        runs = _native_base64_runs(text)
        if runs is not None:
            return runs
    return _base64_runs(text)


def _base64_runs(text: str) -> list[str]:
    """`base64_runs` in Python: the mask, then a search for each long run and each `=` between them."""
    if len(text) < MIN_PADDED_BASE64_RUN:
        return []
    mask = text.encode("ascii", "replace").translate(_B64_MASK)
    runs: list[str] = []
    padded = "=" in text
    pos = 0
    start = mask.find(_B64_RUN_START)
    while True:
        if padded:  # short padded runs between the long ones: one scan for "=" per gap
            gap_end = start if start >= 0 else len(mask)
            q = mask.find(b"=", pos, gap_end)
            while q >= 0:
                q = _short_padded_run(text, mask, q, runs)
                q = mask.find(b"=", q, gap_end)
        if start < 0:
            return runs
        m = _B64_RUN_REST.match(mask, start + MIN_BASE64_RUN)
        end = m.end() if m is not None else start + MIN_BASE64_RUN
        runs.append(text[start:end])
        pos = end
        start = mask.find(_B64_RUN_START, end)


def _short_padded_run(text: str, mask: bytes, p: int, runs: list[str]) -> int:
    """If the `=` at `p` closes a run shorter than `MIN_BASE64_RUN` to a multiple of four characters,
    add the run to `runs`; return where to look for the next `=`."""
    end = p + 2 if mask[p + 1 : p + 2] == b"=" else p + 1
    # (p > 0 first: the compiled build raises on a bytes slice that ends before it starts, see native.py)
    if p > 0 and mask[p - 1 : p] == b"b" and mask[end : end + 1] not in (b"b", b"="):
        lo = max(0, p - MIN_BASE64_RUN)
        start = max(mask.rfind(c, lo, p) for c in (b" ", b"=", b"\r", b"\n")) + 1
        if p - start < MIN_BASE64_RUN and end - start >= MIN_PADDED_BASE64_RUN and (end - start) % 4 == 0:
            runs.append(text[start:end])
    return end


def _css_char(m: re.Match[str]) -> str:
    return chr(int(m.group(1) or m.group(2), 16))


def decode_css(text: str) -> str:
    """CSS hex escapes (`\40 `, `\2e`) decoded, where present."""
    if "\\" not in text:
        return text
    return _CSS_ESCAPE.sub(_css_char, text)


# A text is decoded twice in a row: `fold.views` reads its decoded readings for keys, and then
# `linkkeys` reads them again for links as written (ASCII text is its own cleaned form, so both decode
# the same string). The readings of the last few strings up to this long are kept: at most about
# `DECODED_MEMO_ENTRIES` x `DECODED_MEMO_CHARS` x (1 + `fold.MAX_EXPANSION`) characters.
DECODED_MEMO_ENTRIES: Final = 8
DECODED_MEMO_CHARS: Final = 256 * 1024


def decoded(text: str) -> tuple[str, ...]:
    """The decoded readings of one cleaned string (one level: `views` iterates)."""
    return _memo_decoded(text) if len(text) <= DECODED_MEMO_CHARS else tuple(_decoded(text))


def _decoded(text: str) -> Iterator[str]:
    inline = decode_inline(text)
    if inline != text:
        yield inline
    if "\\" in text:
        css = decode_css(text)
        if css != text and css != inline:
            yield css
    qp = decode_qp(text)
    if qp != text:
        yield qp
    parts = [d for d in map(decode_base64_text, base64_runs(text)) if d is not None]
    if parts:
        yield "\n\n".join(parts)  # a blank line: the tokenizer never joins across one


@lru_cache(maxsize=DECODED_MEMO_ENTRIES)
def _memo_decoded(text: str) -> tuple[str, ...]:
    return tuple(_decoded(text))
