"""Numeric tokens in folded text: phone numbers, IBANs and platform ids, and the key of each.

Theory of operation
-------------------
The tokenizer (`tokens.keys_in`) hands this module the folded text and its byte mask (`tokens._MASK`:
"0" digits, "a" letters and "_", "w" other word characters, " " delimiters, punctuation as itself), but
only when the mask holds a digit. Digit runs (phones, IBANs) and platform ids are found in the mask with
one literal-prefixed pattern (`_NUMERIC`; the compiled build runs the same scan in C,
`_scan.numeric_runs`), and only the runs are read in Python. The phone and IBAN shapes and their keys
are `shapes`' (`phone_keys`, `iban_shaped_key`); a run inside a word or a date is not a phone.

A **platform id** (Slack user, channel and team ids: `U04ABCDEF12`, `C0123ABCD`, `T0G9PQBBK`): one
of `PLATFORM_ID_TYPES` (u, c, w, g, t, d), a digit (every id Slack issues has one there), then
letters and digits, `PLATFORM_ID_MIN_CHARS` to `PLATFORM_ID_MAX_CHARS` in all, with at least two
digits and one letter after the type letter, as a whole token: at the start of the text or after a
delimiter, `@`, `#`, `:` or a symbol (not after `/`: a URL's path is keyed with its URL), and not
followed by a letter, digit, `@`, `+`, `-`, or by a `.` or `:` that goes on (`u04abcdef12.com` is a
host); the lower-case id. An id whose first digits are a phone-shaped run (`T01234567AB`) is found
too. Folding loses case, so a git short hash such as `c9af708b1a` is a key as well (measured: 15 a
MB in changelogs, none in mail-like text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from bouncerd.core.shapes import PHONE_MIN_DIGITS, iban_shaped_key, phone_keys


def _load_native_numeric_runs() -> Callable[[bytes], list[tuple[int, int, int]]] | None:
    """The digit-run scan in C (`_numeric_runs`), built with the compiled scanner
    (bouncerd/native.py decides if it loads)."""
    try:
        from bouncerd.core._scan import numeric_runs
    except ImportError:
        return None
    return numeric_runs


_native_numeric_runs: Final = _load_native_numeric_runs()

PLATFORM_ID_TYPES: Final = frozenset("ucwgtd")  # Slack: user, channel, enterprise user, group, team, DM
PLATFORM_ID_MIN_CHARS: Final = 9  # the shortest Slack ids (C0123ABCD, T0G9PQBBK)
PLATFORM_ID_MAX_CHARS: Final = 12  # the longest have 11 (U04ABCDEF12); one more leaves room for growth
IBAN_SCAN_BACK: Final = (
    24  # an IBAN's first 8-digit run starts at most this far in (country, bank letters, spaces)
)

# The rest of a platform id after the first digit that follows its type letter (group 1), as a whole
# token: not followed by a letter, digit, "@", "+", "-", or a "." or ":" that continues a host.
_PLATFORM_ID_REST: Final = rb"([a0]{%d,%d})(?![a0@+\-]|[.:][a0])" % (
    PLATFORM_ID_MIN_CHARS - 2,
    PLATFORM_ID_MAX_CHARS - 2,
)
_PLATFORM_ID_AT: Final = re.compile(rb"a0" + _PLATFORM_ID_REST)
_PLATFORM_ID_LEFT: Final = frozenset(b" @#:w")  # what may come before a type letter (not "/": URL paths)
# Digit runs, found from a digit that does not follow a digit (a match cannot start inside a run: the
# attempt at the run's first digit would have matched a superset, so those attempts are skipped): a
# phone-shaped run, else, when the digit follows a type letter at a token start, a platform id (group
# 1, in a lookahead: the scan goes on after the digit, so phone runs are cut exactly as without it).
_NUMERIC: Final = re.compile(
    rb"0(?<!00)(?:[0 .\-/]{%d,}0|(?<=[ @#:w]a0)(?=%s))" % (PHONE_MIN_DIGITS - 2, _PLATFORM_ID_REST)
)
_IBAN: Final = re.compile(rb"aa00(?: ?[a0]{4}){2,7}(?: ?[a0]{1,3})?")
_DATE: Final = re.compile(rb"0000([-/.])00?\100?|00?([-/.])00?\2(?:00)?00")


def _platform_id_at(text: str, mask: bytes, a: int, out: set[str]) -> None:
    """The platform id whose type letter is `text[a - 1]`, if there is one."""
    m = _PLATFORM_ID_AT.match(mask, a - 1)
    if m is not None:
        _platform_id(text, mask, a, m.end(), out)


def _platform_id(text: str, mask: bytes, a: int, b: int, out: set[str]) -> None:
    """The platform id `text[a - 1 : b]` (type letter, then letters and digits), if it is one."""
    if (
        text[a - 1] in PLATFORM_ID_TYPES
        and mask.count(b"0", a, b) >= 2
        and mask.find(b"a", a, b) >= 0
        and "_" not in text[a:b]
    ):
        out.add(text[a - 1 : b])


def _numeric_runs(mask: bytes) -> list[tuple[int, int, int]]:
    """(start, end, end of the platform id or -1) of every `_NUMERIC` match. The compiled build runs
    the same scan in C (`_scan.numeric_runs`)."""
    return [
        (m.start(), m.end(), m.end(1) if m.lastindex is not None else -1) for m in _NUMERIC.finditer(mask)
    ]


def numeric_keys(text: str, mask: bytes, out: set[str]) -> None:
    """Phone numbers, IBANs and platform ids. Only a text with two digits in a row is read for phones
    (so "1 2 3 4 5 6 7 8" alone is not a phone); that test costs a scan, so it runs only once a
    candidate is found."""
    n = len(mask)
    found: list[str] = []
    shaped = False  # whether any run is phone-shaped: every IBAN needle below lies inside such a run
    if mask[:2] == b"a0":
        _platform_id_at(text, mask, 1, out)  # one that starts the text
    runs = _native_numeric_runs(mask) if _native_numeric_runs is not None else _numeric_runs(mask)
    for a, b, id_end in runs:
        shaped = True
        if id_end >= 0:  # a platform id: its type letter is text[a - 1]
            _platform_id(text, mask, a, id_end, out)
            continue
        if (a > 0 and mask[a - 1] in b"aw0") or (b < n and mask[b] in b"aw"):
            if a > 1 and mask[a - 1] == 97 and mask[a - 2] in _PLATFORM_ID_LEFT:
                _platform_id_at(text, mask, a, out)  # not a phone: "t01234567ab" may be an id
            continue
        if _DATE.fullmatch(mask, a, b):
            continue  # 2026-05-09, 09/05/2026: dates, not phone numbers
        if a > 0 and mask[a - 1] == ord("+"):
            a -= 1
        found += phone_keys(text[a:b])
    if found and mask.find(b"00") >= 0:
        out.update(found)
    if not shaped:
        return
    # Every IBAN's account part has 8 digits in a row or two 4-digit groups: find those (memchr-fast),
    # then try the nearest "letters, digits" start before them that begins a token.
    for needle in (b"0000 0000", b"00000000"):
        i = mask.find(needle)
        while i >= 0:
            lo = max(0, i - IBAN_SCAN_BACK)
            start = mask.rfind(b"aa00", lo, i + 4)
            while start > lo and mask[start - 1] in b"a0":  # "gb29nwbk6016…": "bk60" is not the start
                start = mask.rfind(b"aa00", lo, start + 3)
            iban = _IBAN.match(mask, start) if start >= 0 else None
            if iban is None:
                i = mask.find(needle, i + len(needle))
                continue
            a, b = iban.start(), iban.end()
            if not ((a > 0 and mask[a - 1] in b"a0w") or (b < n and mask[b] in b"a0w")):
                key = iban_shaped_key(text[a:b])
                if key is not None:
                    out.add(key)
            i = mask.find(needle, max(b, i + len(needle)))  # the match can end before the needle
