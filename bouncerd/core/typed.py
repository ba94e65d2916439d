"""What the user typed: the words of a prompt, matched against whole argument values.

Theory of operation
-------------------
A person names recipients in every shape the gate knows and in plain words: "DM Alice", "post it in
'general'", "the recipient is US122000000121212121212", "send 50 to account 4417-2290", "invite Dora
Smith". The destination-shaped words of a prompt are vouched on their narrow keys (`canon.keys`, in
`Engine.vouch`); the rest are vouched here, as *typed keys*: every run of one to
`MAX_WORDS_PER_PHRASE` words of the prompt, folded only as far as a person's own spelling varies
(`typed_key`: NFKC, case, white space, the quotes and brackets around a word, a leading `@` or `#`,
the spaces and hyphens that group the digits of an account or an IBAN).

A typed key trusts an argument value only when the *whole* value folds to it. So `Alice` typed trusts a
recipient `alice` and `@Alice`, never `alice@evil.example`, `alice.evil.example` or `Alice
<eve@evil.example>`: a planted address that merely contains or resembles a vouched word is judged as
it was before. A value with a control or invisible character has no typed key (it may not be read the
way it looks). Typed keys live beside the narrow ones in the session's vouched set, behind
`TYPED_KEY_MARK`, so no narrow key can equal one.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

TYPED_KEY_MARK: Final = "\x00typed:"
# "Alice Smith", "the New York office": a name a person types is a few words long.
MAX_WORDS_PER_PHRASE: Final = 4
# A prompt names a handful of recipients; a prompt that yields more phrases than this is a paste, and
# what it vouches stops there (the journal and the session's trust stay small).
MAX_TYPED_KEYS: Final = 4096
# A value longer than this is a body of text, not a name a person typed.
MAX_TYPED_VALUE_CHARS: Final = 200
# An account number or IBAN typed in groups: "DE89 3704 0044 0532 0130 00", "4417-2290".
_GROUPED_ACCOUNT: Final = re.compile(r"[a-z0-9]*\d[a-z0-9]*(?:[ -][a-z0-9]*\d[a-z0-9]*)+")
# Every group holds a digit: "1234 Elm Street" is a number and two words, not one account.
_ACCOUNT_RUN: Final = re.compile(r"\b[A-Za-z0-9]*\d[A-Za-z0-9]*(?:[ -][A-Za-z0-9]*\d[A-Za-z0-9]*){1,9}\b")
_PHRASE_ENDS: Final = (",", ";", ".", ":", "!", "?")
_CLOSERS: Final = "\"'`)]}”’»*"
_EDGES: Final = "\"'`()[]{}<>,;!?*“”‘’«»"
# Control, format (zero-width, bidi) and private-use characters: a value holding one may not be read
# the way it looks, so nothing typed vouches for it.
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})


def typed_key(value: str) -> str | None:
    """The key a whole argument value shares with what the user typed, or None (empty, too long, or
    holding a character that may not be read the way it looks)."""
    if len(value) > MAX_TYPED_VALUE_CHARS * 2:
        return None
    if any(unicodedata.category(ch) in _HIDDEN_CATEGORIES for ch in value if ch not in " \t"):
        return None
    text = " ".join(unicodedata.normalize("NFKC", value).casefold().split())
    text = text.strip(_EDGES).rstrip(".:").strip(_EDGES).lstrip("@#").strip()
    if not text or len(text) > MAX_TYPED_VALUE_CHARS:
        return None
    if _GROUPED_ACCOUNT.fullmatch(text):
        text = text.replace(" ", "").replace("-", "")
    return TYPED_KEY_MARK + text


def typed_keys(text: str) -> set[str]:
    """The typed keys of a prompt: every phrase of one to `MAX_WORDS_PER_PHRASE` words, and every run
    of digit groups (an IBAN or account number written with spaces), at most `MAX_TYPED_KEYS`."""
    out: set[str] = set()
    for m in _ACCOUNT_RUN.finditer(text):
        key = typed_key(m.group(0))
        if key is not None:
            out.add(key)
    words = text.split()
    for i in range(len(words)):
        for n in range(1, MAX_WORDS_PER_PHRASE + 1):
            if i + n > len(words) or len(out) >= MAX_TYPED_KEYS:
                break
            key = typed_key(" ".join(words[i : i + n]))
            if key is not None:
                out.add(key)
            if words[i + n - 1].rstrip(_CLOSERS).endswith(_PHRASE_ENDS):
                break  # "DM Alice, then post": a name does not run on past a comma or a full stop
    return out


def is_typed_key(key: str) -> bool:
    return key.startswith(TYPED_KEY_MARK)


def unmarked(key: str) -> str:
    """A vouched key as the person typed it (for the managed policy's deny_trust, and for display)."""
    return key.removeprefix(TYPED_KEY_MARK)
