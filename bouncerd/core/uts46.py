"""UTS #46 for URL hosts: domain to ASCII (and back, for display) as Node's URL parser computes it.

Theory of operation
-------------------
The URL Standard's host parser (`url.parse_host`) maps a special scheme's domain through UTS #46,
nontransitional, without STD3 rules. That needs Unicode's IDNA mapping table, which the standard
library lacks. It is derived here per code point from `unicodedata` (NFKC of the case fold, as the
table itself is derived) plus the short lists of code points where Node's table says otherwise,
found by the code point sweep in tests/unit/test_url_whatwg.py. Node's bidi and mark tables predate
Unicode 14, so characters added in 14.0 are refused, and so is every non-ASCII host when Python's
Unicode version is not the one the lists were checked against (`UNICODE_VERSION_CHECKED`).

The rule for doubt is url.py's: `None` (failure) is always safe; a wrong host never is. Where Node and
the current standard differ (bidi rule, punycode labels that decode to ASCII) this module fails if
*either* fails, and it fails on joiners it cannot check.
"""

from __future__ import annotations

import functools
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from typing import Final

# A non-ASCII label of more code points encodes to more than DNS's 63 octets, so it cannot resolve;
# the bound also caps punycode coding, which is quadratic in the length of a label.
MAX_UNICODE_LABEL_CHARS: Final = 63
# Distinct non-ASCII code points whose IDNA mapping is remembered; a script needs a few hundred.
MAP_CACHE_SIZE: Final = 4096
# The Unicode version of `unicodedata` that the IDNA exception lists below were checked against (by
# the code point sweep in tests/unit/test_url_whatwg.py); with any other, non-ASCII hosts fail.
UNICODE_VERSION_CHECKED: Final = "14.0.0"
_UNICODE_VERIFIED = unicodedata.unidata_version == UNICODE_VERSION_CHECKED


def _ranges(pairs: Sequence[tuple[int, int]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(a for a, _ in pairs), tuple(b for _, b in pairs)


def _in_ranges(cp: int, table: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
    i = bisect_right(table[0], cp) - 1
    return i >= 0 and cp <= table[1][i]


# Code points the IDNA table ignores (deletes): soft hyphen, combining grapheme joiner, variation
# selectors, zero width space, word joiner, invisible plus, BOM, shorthand format controls.
_IGNORED: Final = _ranges(
    [(0xAD, 0xAD), (0x34F, 0x34F), (0x180B, 0x180D), (0x180F, 0x180F), (0x200B, 0x200B),
     (0x2060, 0x2060), (0x2064, 0x2064), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0x1BCA0, 0x1BCA3),
     (0xE0100, 0xE01EF)]
)  # fmt: skip
# Code points that NFKC of the case fold accepts but Node's IDNA table disallows: Cyrillic palochka,
# Georgian capitals, Hangul fillers, Khmer inherent vowels, Mongolian todo soft hyphen, turned F,
# reversed C, ideographic description characters, U+FFFC/U+FFFD, five flawed CJK compatibility
# ideographs; and U+1734, whose bidi class changed in Unicode 14.
_DISALLOWED: Final = _ranges(
    [(0x4C0, 0x4C0), (0x10A0, 0x10C5), (0x115F, 0x1160), (0x1734, 0x1734), (0x17B4, 0x17B5),
     (0x1806, 0x1806), (0x2132, 0x2132), (0x2183, 0x2183), (0x2FF0, 0x2FFB), (0x3164, 0x3164),
     (0xFFA0, 0xFFA0), (0xFFFC, 0xFFFD), (0x2F868, 0x2F868), (0x2F874, 0x2F874), (0x2F91F, 0x2F91F),
     (0x2F95F, 0x2F95F), (0x2F9BF, 0x2F9BF)]
)  # fmt: skip
# Characters added in Unicode 14.0 (gaps of unassigned code points merged). Python 3.11 knows them;
# Node 20's IDNA bidi and mark tables (Unicode 13) do not, so how Node judges a label holding one is
# not something unicodedata can tell us.
_UNICODE_14_ADDITIONS: Final = _ranges(
    [(0x61D, 0x61D), (0x870, 0x89F), (0x8B5, 0x8B5), (0x8C8, 0x8D2), (0xC3C, 0xC3C), (0xC5D, 0xC5D),
     (0xCDD, 0xCDD), (0x170D, 0x170D), (0x1715, 0x171F), (0x180F, 0x180F), (0x1AC1, 0x1ACE),
     (0x1B4C, 0x1B4C), (0x1B7D, 0x1B7E), (0x1DFA, 0x1DFA), (0x20C0, 0x20C0), (0x2C2F, 0x2C2F),
     (0x2C5F, 0x2C5F), (0x2E53, 0x2E5D), (0x9FFD, 0x9FFF), (0xA7C0, 0xA7C1), (0xA7D0, 0xA7F4),
     (0xFBC2, 0xFBC2), (0xFD40, 0xFD4F), (0xFDCF, 0xFDCF), (0xFDFE, 0xFDFF), (0x10570, 0x105BC),
     (0x10780, 0x107BA), (0x10F70, 0x10F89), (0x11070, 0x11075), (0x110C2, 0x110C2),
     (0x116B9, 0x116B9), (0x11740, 0x11746), (0x11AB0, 0x11ABF), (0x12F90, 0x12FF2),
     (0x16A70, 0x16AC9), (0x1AFF0, 0x1AFFE), (0x1B11F, 0x1B122), (0x1CF00, 0x1CFC3),
     (0x1D1E9, 0x1D1EA), (0x1DF00, 0x1DF1E), (0x1E290, 0x1E2AE), (0x1E7E0, 0x1E7FE),
     (0x1F6DD, 0x1F6DF), (0x1F7F0, 0x1F7F0), (0x1F979, 0x1F979), (0x1F9CC, 0x1F9CC),
     (0x1FA7B, 0x1FA7C), (0x1FAA9, 0x1FAAC), (0x1FAB7, 0x1FABA), (0x1FAC3, 0x1FAC5),
     (0x1FAD7, 0x1FAF6), (0x2A6DE, 0x2A6DF), (0x2B735, 0x2B738)]
)  # fmt: skip
# Deviation characters stay as they are in nontransitional processing.
_DEVIATIONS: Final = frozenset("\u00df\u03c2\u200c\u200d")
_JOINERS: Final = frozenset("\u200c\u200d")
# The full stops that map to '.' and so separate labels (U+FF0E does so through NFKC too).
_DOTS: Final = frozenset("\u3002\uff0e\uff61")
# Categories the IDNA table never lets through (format characters other than the ignored ones and
# the deviations, controls, unassigned, private use, surrogates, separators).
_NEVER_VALID_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Zs", "Zl", "Zp"})
# ASCII a mapping may not produce: the separators and every forbidden domain code point. ('.' only
# comes from the full stops above; Node disallows '⒈' → '1.' and the like.)
_MAPPED_ASCII_DISALLOWED: Final = frozenset(chr(c) for c in range(0x21)) | frozenset(".#%/:<>?@[\\]^|\x7f")


@functools.lru_cache(maxsize=MAP_CACHE_SIZE)
def _map_code_point(c: str) -> str | None:
    """The IDNA mapping of one non-ASCII code point: itself if valid, its mapping, '' if ignored, or
    None if disallowed or not known well enough."""
    if c in _DEVIATIONS:
        return c
    if c in _DOTS:
        return "."
    cp = ord(c)
    if _in_ranges(cp, _IGNORED):
        return ""
    if (
        unicodedata.category(c) in _NEVER_VALID_CATEGORIES
        or _in_ranges(cp, _DISALLOWED)
        or _in_ranges(cp, _UNICODE_14_ADDITIONS)
    ):
        return None
    mapped = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", c).casefold())
    if mapped == c:
        return c
    for x in mapped:
        if x < "\x80":
            if x in _MAPPED_ASCII_DISALLOWED:
                return None
        elif _map_code_point(x) != x:
            return None
    return mapped


def _is_valid_code_point(c: str) -> bool:
    return c < "\x80" or _map_code_point(c) == c


def domain_to_ascii(domain: str) -> str | None:
    """The ASCII form of a special URL's domain (lower case, punycode), or None if UTS #46 (or Node's
    older reading of it) refuses it."""
    if domain.isascii():
        lowered = domain.lower()
        if "xn--" not in lowered:
            return lowered
        labels = lowered.split(".")
        unicode_labels: list[str] = []
        for label in labels:
            if label.startswith("xn--"):
                decoded = _decode_label(label)
                if decoded is None:
                    return None
                unicode_labels.append(decoded)
            else:
                unicode_labels.append(label)
        return lowered if _satisfies_bidi_rule(unicode_labels) else None
    if not _UNICODE_VERIFIED:
        return None
    mapped_chars: list[str] = []
    for c in domain:
        if c < "\x80":
            mapped_chars.append(c.lower())
            continue
        mapped = _map_code_point(c)
        if mapped is None:
            return None
        mapped_chars.append(mapped)
    labels = unicodedata.normalize("NFC", "".join(mapped_chars)).split(".")
    ascii_labels: list[str] = []
    unicode_labels = []
    for label in labels:
        if label.startswith("xn--"):
            decoded = _decode_label(label) if label.isascii() else None
            if decoded is None:
                return None
            ascii_labels.append(label)
            unicode_labels.append(decoded)
        elif label.isascii():
            ascii_labels.append(label)
            unicode_labels.append(label)
        else:
            if len(label) > MAX_UNICODE_LABEL_CHARS or not _label_is_valid(label):
                return None
            ascii_labels.append("xn--" + label.encode("punycode").decode("ascii"))
            unicode_labels.append(label)
    return ".".join(ascii_labels) if _satisfies_bidi_rule(unicode_labels) else None


def _decode_label(label: str) -> str | None:
    """An `xn--` label's Unicode form if it is one IDNA itself could have produced, else None."""
    decoded = _punycode_decode(label[4:])
    if (
        not decoded
        or decoded.isascii()  # UTS #46 since 15.1 (Node 20 accepts them; the standard does not)
        or decoded.startswith("xn--")
        or len(decoded) > MAX_UNICODE_LABEL_CHARS
        or unicodedata.normalize("NFC", decoded) != decoded
        or not all(_is_valid_code_point(c) for c in decoded)
    ):
        return None
    return decoded if _UNICODE_VERIFIED and _label_is_valid(decoded) else None


def _label_is_valid(label: str) -> bool:
    """UTS #46 validity of a non-ASCII label (NFC, mapped), less the bidi rule, which is per domain."""
    if unicodedata.category(label[0]).startswith("M"):
        return False
    for i, c in enumerate(label):
        if c < "\x80":
            continue
        if c in _JOINERS:
            # ContextJ: after a virama, both are fine. ZWNJ is also fine between certain joining
            # types, which unicodedata does not know; those labels fail.
            if i == 0 or unicodedata.combining(label[i - 1]) != 9:
                return False
        elif not _is_valid_code_point(c):
            return False
    return any(unicodedata.bidirectional(c) != "NSM" for c in label)


_RTL: Final = frozenset({"R", "AL", "AN"})
_RTL_ALLOWED: Final = frozenset({"R", "AL", "AN", "EN", "ES", "CS", "ET", "ON", "BN", "NSM"})
_RTL_END: Final = frozenset({"R", "AL", "EN", "AN"})
_LTR_ALLOWED: Final = frozenset({"L", "EN", "ES", "CS", "ET", "ON", "BN", "NSM"})
_LTR_END: Final = frozenset({"L", "EN"})


def _satisfies_bidi_rule(labels: Sequence[str]) -> bool:
    """RFC 5893's rule on every label of a Bidi domain name (one with an R, AL or AN character).

    Node 20 checks only the labels that hold such characters, and those more loosely; failing where
    either fails keeps us on the safe side of both."""
    classes = [[unicodedata.bidirectional(c) for c in label] for label in labels if not label.isascii()]
    if not any(_RTL.intersection(cs) for cs in classes):
        return True
    for label in labels:
        if not label:
            continue
        dirs = [unicodedata.bidirectional(c) for c in label]
        while dirs and dirs[-1] == "NSM":
            dirs.pop()
        if not dirs:
            return False
        if dirs[0] in ("R", "AL"):
            if not _RTL_ALLOWED.issuperset(dirs) or dirs[-1] not in _RTL_END:
                return False
            if "EN" in dirs and "AN" in dirs:
                return False
        elif dirs[0] == "L":
            if not _LTR_ALLOWED.issuperset(dirs) or dirs[-1] not in _LTR_END:
                return False
        else:
            return False
    return True


# Punycode (RFC 3492) as Node decodes it: lower-case digits only, 32-bit overflow is an error.
_BASE, _TMIN, _TMAX, _SKEW, _DAMP = 36, 1, 26, 38, 700
_MAXINT: Final = 0x7FFFFFFF


def _punycode_digit(c: str) -> int:
    if "a" <= c <= "z":
        return ord(c) - 97
    if "0" <= c <= "9":
        return ord(c) - 22
    return -1


def _adapt(delta: int, points: int, first: bool) -> int:
    delta = delta // _DAMP if first else delta // 2
    delta += delta // points
    k = 0
    while delta > ((_BASE - _TMIN) * _TMAX) // 2:
        delta //= _BASE - _TMIN
        k += _BASE
    return k + ((_BASE - _TMIN + 1) * delta) // (delta + _SKEW)


def _punycode_decode(text: str) -> str | None:
    out: list[int] = []
    end = text.rfind("-")
    if end >= 0:
        out = [ord(c) for c in text[:end]]
        text = text[end + 1 :]
    n, i, bias, pos = 0x80, 0, 72, 0
    while pos < len(text):
        old_i, w, k = i, 1, _BASE
        while True:
            if pos >= len(text):
                return None
            digit = _punycode_digit(text[pos])
            pos += 1
            if digit < 0 or digit > (_MAXINT - i) // w:
                return None
            i += digit * w
            t = _TMIN if k <= bias else _TMAX if k >= bias + _TMAX else k - bias
            if digit < t:
                break
            if w > _MAXINT // (_BASE - t):
                return None
            w *= _BASE - t
            k += _BASE
        bias = _adapt(i - old_i, len(out) + 1, old_i == 0)
        if i // (len(out) + 1) > _MAXINT - n:
            return None
        n += i // (len(out) + 1)
        i %= len(out) + 1
        if n < 0x80 or n > 0x10FFFF or 0xD800 <= n <= 0xDFFF:
            return None
        out.insert(i, n)
        i += 1
    return "".join(map(chr, out))


def unicode_host(host: str) -> str:
    """`host` with its `xn--` labels decoded, for display and folding; IP addresses unchanged."""
    if "xn--" not in host.lower() or host.startswith("["):
        return host
    labels = host.split(".")
    for i, label in enumerate(labels):
        if label[:4].lower() == "xn--":
            decoded = _decode_label(label.lower())  # labels IDNA would not produce stay encoded
            if decoded:
                labels[i] = decoded
    return ".".join(labels)
