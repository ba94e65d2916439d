"""Values an untrusted text dictates: what an injection tells the agent to type into a call.

Theory of operation
-------------------
The taint index records destinations (addresses, hosts, IBANs, ...). A consequential call (one that
destroys, changes a credential, pays or books, or changes who has access: `consequence`) is judged
by where its *other* argument values came from too: a file id, a password, a hotel name that the
agent copied out of a mail body or a review. Those values are rarely destination-shaped, so free
text also yields *said keys*: the values a sentence hands to its reader, in the positions an
instruction puts them, keyed as a person's typing is (`typed.typed_key`) behind `SAID_MARK`:

- a quoted span of one to `MAX_SAID_WORDS` words (`'13'`, `"new_password"`, `“Riverside View”`);
- the word after an id word (`ID 13`, `file #13`, `number: 4417`): how a text names one object;
- a run of two to `MAX_SAID_WORDS` capitalised words, and every shorter run inside it (`Riverside
  View Hotel`): how a text names a place, a business or a person;
- a code-like word of `MIN_CODE_CHARS` or more, with a letter and a digit or underscore
  (`new_password`, `hunter22`): how a text dictates a secret.

A value that is the whole string of its field (a listing's name, a dictionary key, a table cell), or
a name that is the whole of its line (a list item), is not *said*: it is what the output lists, and
the agent choosing from a listing is not following an instruction. Short values (a file id `13`) are
said only in the first two positions: a number in prose (`at 13:00`, `13 people`) names nothing.

The compiled build finds the candidates of an ASCII text in C (`_scan.said_candidates`, held to
`candidates` by tests/unit/test_scanner_rewrites.py); other text, and every text without it, runs
`candidates`. Either way the candidates are folded here, so the keys are the same.

Said keys are recorded for free text only (never for identity fields), in the same index, with the
same provenance, retention and eviction as every destination key: there is one taint system.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Final

from bouncerd.core import typed


def _load_native_candidates() -> Callable[[str], list[str] | None] | None:
    """The candidate scan in C (`_scan.said_candidates`, ASCII text only), built with the compiled
    scanner (bouncerd/native.py decides if it loads)."""
    try:
        from bouncerd.core._scan import said_candidates
    except ImportError:
        return None
    return said_candidates


_native_candidates: Final = _load_native_candidates()

SAID_MARK: Final = "\x00said:"
MAX_SAID_WORDS: Final = 4  # "the Riverside View Hotel": a name in a sentence is a few words long
MAX_SAID_CHARS: Final = 80  # a longer quoted span is a quotation, not a value to type
MIN_CODE_CHARS: Final = 6
MAX_SAID_PER_TEXT: Final = 256  # a text that dictates more than this is a listing, not an instruction
# Candidates recur across texts (names, the word after "no" or "number"), and folding one
# (`typed.typed_key`: NFKC, casefold, a category per character) costs more than finding it. An entry
# (a value of at most a few hundred characters and its key) takes well under 1 KB: a few MB at most.
SAID_KEY_CACHE_ENTRIES: Final = 8192

# Each pattern starts on a rare character or is searched only where a cheap pattern found a start:
# Python's `re` is slow on patterns whose first character is common (see bench/taint.py).
_OPENING_QUOTES: Final = ("'", '"', "`", "‘", "“")
# No lookbehind: it would hide the quote characters the search can skip to (checked on the match).
_QUOTED: Final = re.compile(r"(['\"`‘“])([^'\"`‘’“”\n]{1,80}?)(['\"`’”])(?![\w'])")
# One pattern per id word, each starting with its literal (searched at C speed); the word boundary
# before it is checked on the match.
_ID_VALUE: Final = r"[ \t]*[:=#]?[ \t]*['\"`‘“]?([a-z0-9][\w.-]{0,39})"
_ID_REF: Final = re.compile(r"(?:ids|id|number|num|no)\b\.?" + _ID_VALUE)  # one pass over the text
_HASH_REF: Final = re.compile("#" + _ID_VALUE)
# `\b[A-Z]…` written with the word boundary checked after the capital (`(?<!\w[A-Z])`): a pattern that
# opens with a character class is searched by skipping to that class at C speed, one that opens with
# `\b` is tried at every position (the whole pure scan of a non-ASCII text took ~10x as long).
_CAPITAL_START: Final = re.compile(r"[A-Z](?<!\w[A-Z])[A-Za-z0-9_'&-]*[ \t]+[A-Z]")
_CAPITAL_RUN: Final = re.compile(r"[A-Z][\w'&-]*(?:[ \t]+[A-Z][\w'&-]*)+")
_CODE_CANDIDATE: Final = re.compile(r"\b[A-Za-z-]*[0-9_][\w-]*", re.ASCII)
_CODE_WORD: Final = re.compile(r"(?=[\w-]*[A-Za-z])[\w-]{6,64}")
_NOT_BEFORE_CODE: Final = frozenset("@./:-")
_NOT_AFTER_CODE: Final = frozenset("@/-")


_ID_WORD_STARTS: Final = ("id", "no", "nu")  # every word of `_ID_REF` starts with one of these


def _id_refs(low: str) -> list[re.Match[str]]:
    """`_ID_REF.finditer(low)`, tried only where an id word can start: the search would try the
    pattern at every "i" and "n" of the text (a few hundred times in a page of prose), while a
    substring search finds the few "id", "no" and "nu" at C speed. Tried in order, each after the
    last match's end, as `finditer` does (a match is never empty)."""
    found: list[re.Match[str]] = []
    nexts = [low.find(word) for word in _ID_WORD_STARTS]
    end = 0
    while True:
        p = -1
        which = 0
        for k in range(len(nexts)):
            if nexts[k] >= 0 and (p < 0 or nexts[k] < p):
                p, which = nexts[k], k
        if p < 0:
            return found
        nexts[which] = low.find(_ID_WORD_STARTS[which], p + 1)
        if p < end or not _may_start_id_word(low, p, which):
            continue
        m = _ID_REF.match(low, p)
        if m is not None:
            found.append(m)
            end = m.end()


def _word_ends(low: str, q: int) -> bool:
    """Whether a word ends before `low[q]`: the pattern's word boundary after a letter (no word
    character, as `re` counts them, follows)."""
    return q >= len(low) or not (low[q].isalnum() or low[q] == "_")


def _may_start_id_word(low: str, p: int, which: int) -> bool:
    """Whether a word of `_ID_REF` ends at a word boundary from `p`, where `_ID_WORD_STARTS[which]`
    starts: without one the pattern cannot match there ("not", "did", "continue" are most of them)."""
    if which == 0:
        return _word_ends(low, p + 2) or (low.startswith("ids", p) and _word_ends(low, p + 3))
    if which == 1:
        return _word_ends(low, p + 2)
    return (low.startswith("num", p) and _word_ends(low, p + 3)) or (
        low.startswith("number", p) and _word_ends(low, p + 6)
    )


# A code-like word holds a digit or an underscore; the chunks (of `str.split()`) that hold one are
# found from it, not by splitting the whole text (a string object for every word).
_CODE_MARK: Final = re.compile(r"[0-9_]")


def _code_chunks(text: str) -> list[str]:
    """The whitespace-separated chunks of `text`, as `text.split()` cuts them, that hold a digit or an
    underscore, in order."""
    chunks: list[str] = []
    n = len(text)
    m = _CODE_MARK.search(text)
    while m is not None:
        a, b = m.start(), m.end()
        while a > 0 and not text[a - 1].isspace():
            a -= 1
        while b < n and not text[b].isspace():
            b += 1
        chunks.append(text[a:b])
        m = _CODE_MARK.search(text, b)
    return chunks


_LIST_MARKS: Final = " \t-*•·>#0123456789.):"


def _whole_line(text: str, start: int, end: int) -> bool:
    """Whether a match is all its line holds, but for a list mark before it and punctuation after."""
    head = text[text.rfind("\n", 0, start) + 1 : start]
    stop = text.find("\n", end)
    tail = text[end : len(text) if stop < 0 else stop]
    return not head.strip(_LIST_MARKS) and not tail.strip(" \t.,;:!?")


@lru_cache(maxsize=SAID_KEY_CACHE_ENTRIES)
def said_key(value: str) -> str | None:
    """The said key an argument value would have, or None (empty, too long, or hidden characters)."""
    key = typed.typed_key(value)
    return None if key is None else SAID_MARK + typed.unmarked(key)


def said_keys(text: str) -> tuple[str, ...]:
    """The said keys of one free-text string (see the module docstring), at most `MAX_SAID_PER_TEXT`."""
    found = _native_candidates(text) if _native_candidates is not None else None
    if found is None:  # no C scan, or a text with non-ASCII characters
        found = candidates(text)
    if not found:
        return ()  # most texts: nothing said, and no copy of the text stripped
    whole = text.strip()
    out: dict[str, None] = {}
    for value in dict.fromkeys(found):  # fold each candidate once
        if value == whole or not value:
            continue  # the whole string of its field: listed, not said
        key = said_key(value)
        if key is not None:
            out[key] = None
            if len(out) >= MAX_SAID_PER_TEXT:
                break
    return tuple(out)


def candidates(text: str) -> list[str]:
    """The values one text says, unfolded, in the order found: quoted spans, the values after id words
    and after `#`, capitalised runs and code-like words. The compiled build runs the same scan in C for
    ASCII text (`_scan.said_candidates`, one pass of C per position kind instead of Python loops)."""
    found: list[str] = []
    for m in _QUOTED.finditer(text) if any(q in text for q in _OPENING_QUOTES) else ():
        a = m.start()
        if a and (text[a - 1].isalnum() or text[a - 1] in "_'"):
            continue  # an apostrophe inside a word (`don't`), not an opening quote
        span = m.group(2).strip()
        if span and len(span) <= MAX_SAID_CHARS and len(span.split()) <= MAX_SAID_WORDS:
            found.append(span)
    low = text.lower()
    for m in _id_refs(low):
        a = m.start()
        if not (a and (low[a - 1].isalnum() or low[a - 1] == "_")):
            found.append(m.group(1).rstrip(".-"))
    for m in _HASH_REF.finditer(low) if "#" in low else ():
        found.append(m.group(1).rstrip(".-"))
    start = _CAPITAL_START.search(text)
    for m in _CAPITAL_RUN.finditer(text, start.start()) if start is not None else ():
        if _whole_line(text, m.start(), m.end()):
            continue  # a line of a listing (`- Riverside View Hotel`): listed, not said
        words = m.group(0).split()
        for n in range(2, min(MAX_SAID_WORDS, len(words)) + 1):
            found.extend(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
    for chunk in _code_chunks(text):  # a code-like word has a digit or an underscore
        if len(chunk) < MIN_CODE_CHARS:
            continue
        for m in _CODE_CANDIDATE.finditer(chunk):
            word, a, b = m.group(0), m.start(), m.end()
            if MIN_CODE_CHARS <= len(word) <= 64 and _CODE_WORD.fullmatch(word):
                if (a and chunk[a - 1] in _NOT_BEFORE_CODE) or (
                    b < len(chunk) and chunk[b] in _NOT_AFTER_CODE
                ):
                    continue  # part of an address, a URL or a path: the destination keys have it
                if b + 1 < len(chunk) and chunk[b] == "." and chunk[b + 1].isalnum():
                    continue
                found.append(word)
    return found
