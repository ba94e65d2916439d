"""Decoding and folding of untrusted text: every reading of a string that a capable reader could make.

Theory of operation
-------------------
An attacker who plants an address in tool output wants the agent to send to it while Bouncer fails
to recognise it. So every untrusted string is read the way the model could read it (`views`), and
`tokens` searches every reading for destinations:

1. *Decoding* (`decoders`): the string as written, then what its encodings decode to (percent,
   HTML entities, JS escapes, MIME words, CSS escapes, quoted-printable, base64 runs). A decoded
   reading is decoded again, up to `MAX_DECODE_ROUNDS`, within a size budget (`MAX_EXPANSION`), so
   base64 of percent-encoded text is read too.
2. *Folding* (`fold`), identical for output and destinations: invisible characters removed (every
   format control — zero-width, bidi, soft hyphen, tags — combining marks, Hangul fillers, ASCII control
   characters), NFKD (full-width and mathematical letters become ASCII), Latin look-alikes mapped to
   Latin (`CONFUSABLES`), NFC, case folded, punycode labels (`xn--`) decoded to Unicode and folded again
   (so punycode and Unicode spellings of a host fold to one key, whichever side used which).
3. *Assembled spellings* (`attacker[@]evil[.]com`, `evil dot com`, `(at)`, `{dot}`, `hxxp://`,
   `[:]//`) are rewritten in windows around their markers, and the windows are read as one more view.
   `attacker at evil.com` (a spelled-out "at" before an ordinary host) is recognised by the tokenizer.
4. *The reader's view* (`reader`) of a non-ASCII string: runs of letters of other scripts become a
   boundary, so an address glued to Chinese or Cyrillic words is read on its own, and punctuation a
   reader takes for `.` `:` `/` `-` beside Latin letters (`READER_PUNCTUATION`) is mapped there only.
   Markdown and HTML inside a token, and lines a client wrapped, are read by the tokenizer
   (`tokens._joined_keys`); markdown backslash, C octal, `\\U` and CSS escapes are decoded in `decoders`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from functools import cache
from typing import Final

# MIN_BASE64_RUN, decode_base64_text and decode_inline are read through this module by the readers
# outside the scanner (a text resource's blob, a destination's inline encodings).
from bouncerd.core.decoders import MIN_BASE64_RUN as MIN_BASE64_RUN
from bouncerd.core.decoders import contains, decoded
from bouncerd.core.decoders import decode_base64_text as decode_base64_text
from bouncerd.core.decoders import decode_inline as decode_inline

MAX_DECODE_ROUNDS: Final = 3  # base64 of percent-encoded text of HTML entities; deeper nesting is not read
MAX_EXPANSION: Final = (
    4  # decoded readings of one string total at most 4x its size (+ slack): no decode bombs
)
EXPANSION_SLACK: Final = 4096
ASSEMBLED_WINDOW_BEFORE: Final = 96  # an e-mail local part is at most 64 characters
ASSEMBLED_WINDOW_AFTER: Final = 192  # "evil dot example dot co dot uk" with spaces around every marker

# Look-alikes that NFKD does not fold, mapped to the Latin letter they imitate. Scope: the Cyrillic,
# Greek, Armenian and Cherokee capitals and small letters that pass for Latin ones, Latin small
# capitals and dotless/script letters, and the dot/slash/colon/hyphen look-alikes used inside hosts.
# Full-width and mathematical alphanumerics are not listed: NFKD already folds them. Not covered: the
# rest of Unicode's confusables.txt, multi-character skeletons ("rn" for "m"), and digit/letter pairs
# (0/o, 1/l), which would merge distinct legitimate addresses.
CONFUSABLES: Final[dict[int, str]] = {
    ord(k): v
    for k, v in {
        # Cyrillic
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
        "ѕ": "s", "һ": "h", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ү": "y", "ԍ": "g",
        "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
        "Т": "T", "Х": "X", "У": "Y", "Ѕ": "S", "І": "I", "Ј": "J", "Ԛ": "Q", "Ԝ": "W", "Ү": "Y",
        "Ӏ": "l", "Ԁ": "d",
        # Greek
        "α": "a", "ο": "o", "ν": "v", "ρ": "p", "ι": "i", "κ": "k", "υ": "u", "χ": "x", "γ": "y",
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
        "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
        # Armenian
        "օ": "o", "ս": "u", "հ": "h", "ո": "n", "ց": "g", "Օ": "O", "Ս": "U",
        # Cherokee (case folding maps its small letters to these capitals)
        "Ꭺ": "A", "Ᏼ": "B", "Ꮯ": "C", "Ꭼ": "E", "Ꮋ": "H", "Ꭻ": "J", "Ꮶ": "K", "Ꮇ": "M", "Ꮲ": "P",
        "Ꮪ": "S", "Ꭲ": "T", "Ꮃ": "W", "Ꮓ": "Z", "Ꮩ": "V", "Ꮮ": "L", "Ꮢ": "R", "Ꭰ": "D", "Ꮐ": "G",
        # Latin small capitals, dotless and script letters
        "ı": "i", "ȷ": "j", "ɑ": "a", "ɡ": "g", "ɩ": "i", "ɪ": "i", "ʟ": "l", "ᴀ": "a", "ʙ": "b",
        "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ɢ": "g", "ʜ": "h", "ᴊ": "j", "ᴋ": "k", "ᴍ": "m", "ɴ": "n",
        "ᴏ": "o", "ᴘ": "p", "ʀ": "r", "ꜱ": "s", "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y",
        "ᴢ": "z", "ɒ": "a", "ɛ": "e", "ʋ": "v",
        # Latin letters with a stroke or bar, which NFKD leaves whole: read as the plain letter
        "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "ħ": "h", "Ħ": "H", "ŧ": "t",
        "Ŧ": "T", "ƀ": "b", "ɨ": "i", "ʉ": "u", "ɍ": "r", "ƶ": "z", "ȼ": "c", "ɇ": "e", "ǥ": "g",
        "ɉ": "j", "ƚ": "l", "ɏ": "y", "ɵ": "o",
        # separators inside hosts and addresses
        "。": ".", "．": ".", "｡": ".", "∙": ".", "·": ".", "∕": "/", "⁄": "/", "∶": ":", "ː": ":",
        "꞉": ":", "‐": "-", "‑": "-", "‒": "-", "–": "-", "−": "-", "﹣": "-",
        # line breaks that are not ASCII (a renderer breaks the line there)
        "\x85": "\n", "\u2028": "\n", "\u2029": "\n",
    }.items()
}  # fmt: skip

# Punctuation a reader takes for `.`, `:`, `@`, `/` or `-` next to Latin letters, but which is ordinary
# punctuation in other scripts (`・` separates Japanese names, `۔` ends an Urdu sentence): mapped only in
# the reader's view (`reader`), where the letters of other scripts are gone.
READER_PUNCTUATION: Final[dict[int, str]] = {
    ord(k): v
    for k, v in {
        "⋅": ".", "‧": ".", "・": ".", "⸱": ".", "⸳": ".", "ꞏ": ".", "۔": ".", "܁": ".", "܂": ".",
        "ᐧ": ".", "•": ".", "։": ":", "׃": ":", "܃": ":", "܄": ":", "᠄": ":", "⁚": ":",
        "˸": ":", "ꓽ": ":", "⦂": ":", "፡": ":", "᛬": ":", "⧸": "/", "╱": "/", "⟋": "/", "〳": "/",
        "⁃": "-", "˗": "-",
    }.items()
}  # fmt: skip

# Invisible in every font: format controls (Cf: zero-width, bidi, soft hyphen, tags), combining marks
# (Mn, Me: accents are stripped on both sides), fillers that render as nothing, ASCII and C1 control
# characters other than whitespace and NEL. Removed before matching.
_INVISIBLE_FIXED: Final = "\u115f\u1160\u3164\uffa0\u2800"
ASCII_CONTROLS: Final = re.compile("[\x00-\x08\x0e-\x1f\x7f]+")


@cache
def _hidden() -> re.Pattern[str]:
    """Every Cf, Mn and Me code point, the fillers and ASCII controls, built once from unicodedata."""
    # Planes 0-1 and the tag/variation-selector block of plane 14 hold every Cf/Mn/Me code point;
    # scanning only them keeps the one-time cost near 40 ms.
    candidates = [*range(0x20000), *range(0xE0000, 0xE1000)]
    kinds = ("Cf", "Mn", "Me")
    hidden = [
        cp for cp in candidates if unicodedata.category(chr(cp)) in kinds or chr(cp) in _INVISIBLE_FIXED
    ]
    hidden += [*range(0, 9), *range(14, 32), 127, *range(0x80, 0x85), *range(0x86, 0xA0)]  # C0, C1
    hidden.sort()
    ranges: list[tuple[int, int]] = []
    for cp in hidden:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    body = "".join(re.escape(chr(a)) + ("" if a == b else "-" + re.escape(chr(b))) for a, b in ranges)
    return re.compile(f"[{body}]+")


def clean(text: str) -> str:
    """Non-ASCII text with invisible characters removed and look-alikes mapped; case is kept.

    ASCII text is returned as it is: its control characters are removed by `fold` and by the
    tokenizer (which finds them in its byte mask for free).
    """
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKD", text)
    text = _hidden().sub("", text)
    text = text.translate(CONFUSABLES)
    return unicodedata.normalize("NFC", text)


_XN_LABEL: Final = re.compile(r"xn--[\w-]+")


def _decode_label(m: re.Match[str]) -> str:
    try:
        return m.group(0)[4:].encode("ascii").decode("punycode")
    except (UnicodeError, ValueError):
        return m.group(0)


def fold_clean(text: str) -> str:
    """Fold text that `clean` already saw: case folded, punycode labels decoded."""
    if text.isascii():
        text = text.lower()
        if not contains(text, "xn--", 0):
            return text
    else:
        text = text.casefold().translate(CONFUSABLES)
    if "xn--" in text:
        unicode = _XN_LABEL.sub(_decode_label, text)
        if unicode != text:
            text = clean(unicode).casefold().translate(CONFUSABLES)
    return text


def fold(text: str) -> str:
    """The folded form of any text: what output and destinations are compared in."""
    folded = fold_clean(clean(text))
    return folded if folded.isprintable() else ASCII_CONTROLS.sub("", folded)  # controls are unprintable


# ---- assembled spellings ---------------------------------------------------------------------------

# (gate, marker): the marker regex runs only when its gate substring is present.
_MARKERS: Final = [
    (" dot ", re.compile(r" dot +(?=\w)")),  # these two count only after a word character
    (" @ ", re.compile(r" @ +(?=\w)")),
    ("[", re.compile(r"\[ *(?:at|@|dot|\.|:|://|/) *\]")),
    ("(", re.compile(r"\( *(?:at|@|dot|\.) *\)")),
    ("{", re.compile(r"\{ *(?:at|@|dot|\.) *\}")),
    ("<", re.compile(r"< *(?:at|dot) *>")),
    ("hxxp", re.compile(r"hxxps?\b")),
    ("*", re.compile(r"h\*\*ps?\b")),
]
_AS_AT: Final = re.compile(r" *(?:[\[({<] *(?:at|@) *[\])}>]|(?<=\w) +(?:at|@) +(?=\w)) *")
_AS_DOT: Final = re.compile(r" *(?:[\[({<] *(?:dot|\.) *[\])}>]|(?<=\w) +(?:dot|\.) +(?=\w)) *")
_AS_COLON: Final = re.compile(r"\[ *(:|://|/) *\]")
_AS_HXXP: Final = re.compile(r"\bh(?:xx|\*\*)p(s?)\b")


def _load_native_marker_gate() -> Callable[[str], bool | None] | None:
    """The marker gate in C (`_readings.marker_gate`: strings of one byte a character), built with the
    compiled scanner (bouncerd/native.py decides if it loads)."""
    try:
        from bouncerd.core._readings import marker_gate
    except ImportError:
        return None
    return marker_gate


_native_marker_gate: Final = _load_native_marker_gate()


def _has_marker(folded: str) -> bool:
    """`_any_marker_gate`, in C when the compiled build runs and the string is one byte a character."""
    if _native_marker_gate is not None:
        found = _native_marker_gate(folded)
        if found is not None:
            return found
    return _any_marker_gate(folded)


def _any_marker_gate(folded: str) -> bool:
    """Whether a gate of `_MARKERS` is present (the common answer is no): one byte scan per one-character
    gate, " @ " and "hxxp" found through their rare character, " dot " (no rare character) plainly."""
    return (
        " dot " in folded
        or "[" in folded
        or "(" in folded
        or "{" in folded
        or "<" in folded
        or "*" in folded
        or contains(folded, " @ ", 1)
        or contains(folded, "hxxp", 1)
    )


def assembled(folded: str) -> str | None:
    """Windows around "dot"/"[.]"/"(at)"/"hxxp" markers, rewritten to plain `@`, `.` and `http`."""
    if not _has_marker(folded):
        return None
    spans: list[tuple[int, int]] = []
    for gate, marker in _MARKERS:
        if gate in folded:
            for m in marker.finditer(folded):
                p = m.start()
                if gate[0] == " " and (p == 0 or not folded[p - 1].isalnum()):
                    continue
                spans.append((max(0, p - ASSEMBLED_WINDOW_BEFORE), m.end() + ASSEMBLED_WINDOW_AFTER))
    if not spans:
        return None
    spans.sort()
    merged = [spans[0]]
    for a, b in spans[1:]:
        if a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    out = []
    for a, b in merged:
        window = _AS_HXXP.sub(r"http\1", _AS_COLON.sub(r"\1", folded[a:b]))
        out.append(_AS_DOT.sub(".", _AS_AT.sub("@", window)))
    return "\n\n".join(out)  # a blank line: the tokenizer never joins across one


# ---- address syntax and smuggled text -----------------------------------------------------------------

# RFC 5322 lets an address carry a quoted local part (`"eve"@evil.example`) and comments next to the
# `@` (`eve(hi)@evil.example`, `eve@(hi)evil.example`); mail software delivers to `eve@evil.example`.
_QUOTED_LOCAL: Final = re.compile(r'"([^"\s@]{1,64})"\s*@')
_COMMENT_BEFORE_AT: Final = re.compile(r"\([^()]{0,64}\)\s*(?=@)")
_COMMENT_AFTER_AT: Final = re.compile(r"(?<=@)\s*\([^()]{0,64}\)")


def _may_have_address_syntax(folded: str) -> bool:
    """Whether an `@` of `folded` has a `"` or `)` before it or a `(` after it, across whitespace (`\\s`
    of a str pattern is `str.isspace`): each of the three patterns of `address_syntax` needs one, so
    without one none of them matches. A text quoted in JSON has many quotes and few addresses: one
    look at each `@` spares the three scans."""
    n = len(folded)
    i = folded.find("@")
    while i >= 0:
        j = i - 1
        while j >= 0 and folded[j].isspace():
            j -= 1
        if j >= 0 and folded[j] in '")':
            return True
        j = i + 1
        while j < n and folded[j].isspace():
            j += 1
        if j < n and folded[j] == "(":
            return True
        i = folded.find("@", i + 1)
    return False


def address_syntax(folded: str) -> str | None:
    """`folded` with quoted local parts unquoted and comments beside an `@` removed, if it has any."""
    if "@" not in folded or not ('"' in folded or "(" in folded) or not _may_have_address_syntax(folded):
        return None
    out = _COMMENT_AFTER_AT.sub("", _COMMENT_BEFORE_AT.sub("", _QUOTED_LOCAL.sub(r"\1@", folded)))
    return out if out != folded else None


# Invisible characters that carry text a model can read: Unicode tag characters (U+E0020-U+E007E mirror
# ASCII) and variation selectors used as bytes (VS1-VS16 are 0-15, VS17-VS256 are 16-255). Removed by
# `clean`, so they are decoded from the raw string, before cleaning.
_SMUGGLED: Final = re.compile("[\U000e0000-\U000e007f]+|[\ufe00-\ufe0f\U000e0100-\U000e01ef]+")


def _smuggled_run(m: re.Match[str]) -> str:
    run = m.group(0)
    if "\U000e0000" <= run[0] <= "\U000e007f":
        return " " + "".join(chr(ord(c) - 0xE0000) for c in run if 0xE0020 <= ord(c) <= 0xE007E) + " "
    data = bytes(ord(c) - 0xFE00 if ord(c) <= 0xFE0F else ord(c) - 0xE0100 + 16 for c in run)
    text = data.decode("utf-8", "replace") if len(data) >= 2 else ""
    return " " + text + " " if text and text.isprintable() else ""


def smuggled(raw: str) -> str | None:
    """The text hidden in tag characters or variation-selector bytes of `raw`, spliced in place."""
    if raw.isascii() or _SMUGGLED.search(raw) is None:
        return None
    out = _SMUGGLED.sub(_smuggled_run, raw)
    return out if out != raw else None


# ---- the reader's view of text in other scripts ------------------------------------------------------

# A run of letters of a script other than Latin (CJK, kana, Hangul, Cyrillic, Greek, Arabic, Thai, ...).
# Written without spaces, or glued to a word of such a run, an address ends where the Latin letters
# end for a reader (`发送到eve@evil.example。`, `пишитеeve@evil.example`). Latin letters (Latin-1 to
# Latin Extended-B, IPA, phonetic extensions, Latin Extended Additional, C, D and E) are not such a
# run: they are what `CONFUSABLES` folds.
_OTHER_SCRIPT_RUN: Final = re.compile(
    r"[^\W\d_\u0000-\u02af\u1d00-\u1dbf\u1e00-\u1eff\u2c60-\u2c7f\ua720-\ua7ff\uab30-\uab6f]+"
)
# What such a run becomes: a character that ends a host or an address but is not a delimiter, so digit
# groups around a word do not join into a phone number (`09.05.2026 в 15:00`), and a number glued to a
# word is not read as one on its own (`电话13800138000`).
WORD_BOUNDARY: Final = "\u00a6"


def reader(raw: str) -> str | None:
    """A non-ASCII string as a reader of its Latin parts sees it: compatibility forms folded (NFKD),
    punctuation read as `.` `:` `/` `-` beside Latin letters mapped (`READER_PUNCTUATION`), and every
    run of letters of another script replaced by `WORD_BOUNDARY`; None if that changes nothing."""
    text = unicodedata.normalize("NFKD", raw)
    out = _OTHER_SCRIPT_RUN.sub(WORD_BOUNDARY, text.translate(READER_PUNCTUATION))
    if out == text or not ("@" in out or "." in out or ":" in out or "/" in out):
        return None  # only a token with one of these can be a key a glued word hid
    return out


# ---- views -----------------------------------------------------------------------------------------


def views(text: str) -> Iterator[str]:
    """Every folded reading of one untrusted string: as written, decoded, and assembled."""
    budget = len(text) * MAX_EXPANSION + EXPANSION_SLACK
    frontier = [text]
    seen: set[str] | None = None  # the readings so far, built on the first decoded one (hashing costs)
    for round_ in range(MAX_DECODE_ROUNDS + 1):
        following: list[str] = []
        for raw in frontier:
            cleaned = clean(raw)
            folded = fold_clean(cleaned)
            yield folded
            rewritten = assembled(folded)
            if rewritten is not None:
                yield rewritten
            if "@" in folded:
                unquoted = address_syntax(rewritten or folded)
                if unquoted is not None:
                    yield unquoted
            if round_ == MAX_DECODE_ROUNDS:
                continue
            readings = decoded(cleaned)
            if not raw.isascii():
                extra = [r for r in (smuggled(raw), reader(raw)) if r is not None]
                if extra:
                    readings = (*extra, *readings)
            for d in readings:
                if seen is None:
                    seen = {text}
                if d not in seen and len(d) <= budget:
                    budget -= len(d)
                    seen.add(d)
                    following.append(d)
        if not following:
            return
        frontier = following
