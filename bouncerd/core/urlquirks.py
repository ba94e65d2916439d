"""The ambiguity features of a raw URL: what makes it readable more than one way.

`quirks` names what in a URL's text a reader could take two ways (a backslash, userinfo, a percent
sign or a non-decimal number in the host, mixed scripts in a label, ...), for the rules that refuse
to trust such a URL (`bouncerd.core.canon`) and for reports. It never fails: it reads the text the
way `bouncerd.core.url.parse` splits it (scheme, authority up to the first `/`, `?` or `#`, userinfo
up to the last `@`), but without parsing, so a URL that does not parse still has its quirks named.
Compiled with the scanner modules (`bouncerd.native.SCANNER`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from bouncerd.core.url import (
    AUTHORITY_END,
    AUTHORITY_END_SPECIAL,
    C0_OR_SPACE,
    PERCENT_BYTE,
    SPECIAL_SCHEMES,
    TAB_OR_NEWLINE,
    ends_in_number,
)

_CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_QUIRK_SPLIT: Final = re.compile(r"([A-Za-z][A-Za-z0-9+\-.]*):(.*)", re.DOTALL)
_LABEL_SEPARATOR: Final = re.compile(r"[.\u3002\uff0e\uff61]")
# Scripts that UTS #39's "highly restrictive" level lets share a label with each other and with Latin.
_HAN_FAMILY: Final = frozenset({"CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL", "BOPOMOFO"})


# What `quirks` can report, in the order it reports them.
QUIRK_NAMES: Final = (
    "backslash", "tab_or_newline", "c0_or_space_trimmed", "userinfo", "percent_in_host",
    "ipv4_non_decimal", "ipv4_short_form", "control_character", "mixed_scripts", "non_ascii_host",
    "trailing_dot", "empty_label", "at_in_path_or_query",
)  # fmt: skip


def _letter_scripts(label: str) -> set[str]:
    scripts: set[str] = set()
    for c in unicodedata.normalize("NFKC", label):
        if c.isascii():
            if c.isalpha():
                scripts.add("LATIN")
        elif unicodedata.category(c) in ("Lu", "Ll", "Lt", "Lo"):
            word = unicodedata.name(c, "").split(" ", 1)[0]
            scripts.add("HAN" if word in _HAN_FAMILY else word)
    return scripts


def _mixes_scripts(label: str) -> bool:
    scripts = _letter_scripts(label)
    return len(scripts) > 1 and not scripts <= {"HAN", "LATIN"}


def quirks(text: str) -> tuple[str, ...]:
    """The ambiguity features of a raw URL (see the names below), for rules and reports; never fails."""
    found: set[str] = set()
    if "\\" in text:
        found.add("backslash")
    if TAB_OR_NEWLINE.search(text):
        found.add("tab_or_newline")
    if text and (text[0] <= " " or text[-1] <= " "):
        found.add("c0_or_space_trimmed")
    if _CONTROL_CHARACTER.search(text):
        found.add("control_character")
    m = _QUIRK_SPLIT.match(TAB_OR_NEWLINE.sub("", text.strip(C0_OR_SPACE)))
    if m is not None:
        special = m.group(1).lower() in SPECIAL_SCHEMES
        rest = m.group(2)
        if special:
            rest = rest.lstrip("/\\")
        elif rest.startswith("//"):
            rest = rest[2:]
        else:
            rest = ""
            if "@" in m.group(2):
                found.add("at_in_path_or_query")
        end = (AUTHORITY_END_SPECIAL if special else AUTHORITY_END).search(rest)
        authority, after = (rest[: end.start()], rest[end.start() :]) if end else (rest, "")
        if "@" in after:
            found.add("at_in_path_or_query")
        if "@" in authority:
            found.add("userinfo")
            authority = authority.rpartition("@")[2]
        host = authority.split("]", 1)[0] + "]" if authority.startswith("[") else authority.split(":", 1)[0]
        _host_quirks(host, found)
    return tuple(name for name in QUIRK_NAMES if name in found)


def _host_quirks(host: str, found: set[str]) -> None:
    if not host or host.startswith("["):
        return
    if "%" in host:
        found.add("percent_in_host")
        host = PERCENT_BYTE.sub(
            lambda m: bytes((int(m.group(1), 16),)), host.encode("utf-8", "replace")
        ).decode("utf-8", "replace")
    labels = _LABEL_SEPARATOR.split(host)
    if len(labels) > 1 and labels[-1] == "":
        found.add("trailing_dot")
    if "" in labels[:-1]:
        found.add("empty_label")
    if not host.isascii():
        found.add("non_ascii_host")
        if any(_mixes_scripts(label) for label in labels):
            found.add("mixed_scripts")
    lowered = ".".join(labels).lower()
    if not lowered.isascii():
        lowered = unicodedata.normalize("NFKC", lowered)
    if lowered.isascii() and ends_in_number(lowered):
        parts = lowered.split(".")
        if parts[-1] == "" and len(parts) > 1:
            parts.pop()
        if any(len(p) > 1 and p[0] == "0" for p in parts):
            found.add("ipv4_non_decimal")
        if len(parts) < 4:
            found.add("ipv4_short_form")
