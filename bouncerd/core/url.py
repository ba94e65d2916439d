"""The WHATWG URL Standard's basic URL parser and host parser, computed the way Node's `new URL()` does.

Theory of operation
-------------------
Bouncer decides about a URL by its host, but the tool that receives the URL connects wherever *its*
parser says. If the two parsers disagree, an attacker writes a URL that Bouncer reads as a trusted host
while the tool goes elsewhere (`https://hooks.evil.example\\@corp.example/x` is `hooks.evil.example` to
Node: `\\` is `/` in special schemes). So this module transcribes the URL Standard
(url.spec.whatwg.org: basic URL parser without a base URL or state override, host parser, IPv4 and
IPv6 parsers, domain to ASCII) as Node 20 runs it (ada 2.9), and is tested against Node itself
(tests/unit/url_oracle.js, a differential corpus and a sweep over every code point it accepts).

- `parse` trims C0 controls and spaces at both ends, drops every tab and newline, reads the scheme,
  then walks the states of the standard as slices: authority (userinfo up to the *last* `@`, host,
  port), path (dot segments resolved, `\\` a separator for special schemes), query, fragment, each
  percent-encoded with its set. Plain `https://host/path` inputs take a precompiled fast path whose
  result the tests compare with the full one.
- `parse_host` does IPv6 (`[...]`), opaque hosts (non-special schemes), and for special schemes
  percent-decoding, domain to ASCII (UTS #46, nontransitional, no STD3 rules) and, when the result
  ends in a number, the IPv4 parser with its hex, octal and short forms.
- Domain to ASCII is `uts46`'s (UTS #46 as Node 20 computes it; with a Unicode version other than the
  one its tables were checked against, every non-ASCII host fails).

The rule for doubt: `None` (failure) is always safe, because the caller then never trusts the URL; a
wrong host never is. Wherever Node and the current standard differ (bidi rule, punycode labels that
decode to ASCII) this module fails if *either* fails, and it fails on joiners it cannot check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from bouncerd.core.uts46 import UNICODE_VERSION_CHECKED as UNICODE_VERSION_CHECKED
from bouncerd.core.uts46 import domain_to_ascii
from bouncerd.core.uts46 import unicode_host as unicode_host

# URL arguments of tool calls and links in tool output are well under this; parsing is linear, but a
# bound keeps one hostile argument from costing more than a few milliseconds. Longer input fails.
MAX_URL_CHARS: Final = 8192
# DNS names are at most 253 octets, so a longer host cannot resolve; the bound also caps IDNA work
# (a percent-encoded host is up to three times its decoded length).
MAX_HOST_CHARS: Final = 1024

SPECIAL_SCHEMES: Final[dict[str, int | None]] = {
    "ftp": 21,
    "file": None,
    "http": 80,
    "https": 443,
    "ws": 80,
    "wss": 443,
}


@dataclass(frozen=True)
class Url:
    scheme: str  # lower case, no ':'
    username: str  # as serialized by the standard (percent-encoded)
    password: str
    host: str  # '' if none; ASCII domain (punycode), dotted IPv4, or '[v6]'
    port: int | None  # None when absent or the scheme's default
    path: str  # '/a/b' for hierarchical paths; the opaque path otherwise
    query: str | None  # without '?'
    fragment: str | None  # without '#'
    special: bool

    @property
    def has_credentials(self) -> bool:
        return self.username != "" or self.password != ""


# --- input clean-up and percent-encoding -------------------------------------------------------------

C0_OR_SPACE: Final = "".join(chr(c) for c in range(0x21))
TAB_OR_NEWLINE: Final = re.compile(r"[\t\n\r]")
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+\-.]*):")
AUTHORITY_END: Final = re.compile(r"[/?#]")
AUTHORITY_END_SPECIAL: Final = re.compile(r"[/\\?#]")
_SPECIAL_PATH_SEPARATOR: Final = re.compile(r"[/\\]")
_PORT: Final = re.compile(r"[0-9]*")
_ASCII_DIGITS: Final = re.compile(r"[0-9]+")

# Node 20's percent-encode sets (ada 2.9; the standard has since added '^' to the path set).
_C0_CONTROL_SET: Final = re.compile(r"[\x00-\x1f\x7f-\U0010ffff]+")
_FRAGMENT_SET: Final = re.compile(r'[\x00-\x20"<>`\x7f-\U0010ffff]+')
_QUERY_SET: Final = re.compile(r'[\x00-\x20"#<>\x7f-\U0010ffff]+')
_SPECIAL_QUERY_SET: Final = re.compile(r"""[\x00-\x20"#'<>\x7f-\U0010ffff]+""")
_PATH_SET: Final = re.compile(r'[\x00-\x20"#<>?`{}\x7f-\U0010ffff]+')
_USERINFO_SET: Final = re.compile(r'[\x00-\x20"#/:;<=>?@\[\\\]^`{|}\x7f-\U0010ffff]+')

_FORBIDDEN_HOST: Final = re.compile(r"[\x00\t\n\r #/:<>?@\[\\\]^|]")
_FORBIDDEN_DOMAIN: Final = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f-\U0010ffff]")
PERCENT_BYTE: Final = re.compile(rb"%([0-9A-Fa-f]{2})")


def _percent_encode_run(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8"))


def _encode(text: str, encode_set: re.Pattern[str]) -> str:
    return encode_set.sub(_percent_encode_run, text)


def _to_scalar_values(text: str) -> str:
    """What JavaScript's USVString conversion does: pairs join, lone surrogates become U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


# --- the fast path -----------------------------------------------------------------------------------

_FAST_URL: Final = re.compile(
    r"(https?|wss?|ftp)://"
    r"([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?)"
    r"(?::([0-9]{1,5}))?"
    r"(/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*)?"
    r"(?:\?([A-Za-z0-9\-._~!$&()*+,;=:@%/?]*))?"
    r"(?:#([A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*))?"
)
_FAST_HOST_NEEDS_FULL: Final = re.compile(r"xn--|(?:^|\.)(?:[0-9]+|0x[0-9a-f]*)\.?$")
_DOT_SEGMENT: Final = re.compile(r"(?:^|/)(?:\.|%2[eE]){1,2}(?=/|$)")


def _parse_fast(text: str) -> Url | None:
    """The common case, or None to take the full parser (never a failure by itself)."""
    m = _FAST_URL.fullmatch(text)
    if m is None:
        return None
    scheme, host, port_text, path, query, fragment = m.groups()
    host = host.lower()
    if _FAST_HOST_NEEDS_FULL.search(host) or (path is not None and _DOT_SEGMENT.search(path)):
        return None
    port: int | None = None
    if port_text is not None:
        port = int(port_text)
        if port > 0xFFFF:
            return None
        if port == SPECIAL_SCHEMES[scheme]:
            port = None
    return Url(scheme, "", "", host, port, path or "/", query, fragment, True)


# --- the basic URL parser ----------------------------------------------------------------------------


def parse(text: str) -> Url | None:
    """The basic URL parser (no base URL): a `Url`, or None where Node's `new URL(text)` throws."""
    if len(text) > MAX_URL_CHARS:
        return None
    return _parse_fast(text) or _parse_full(text)


def _parse_full(text: str) -> Url | None:
    if _SURROGATE.search(text):
        text = _to_scalar_values(text)
    text = TAB_OR_NEWLINE.sub("", text.strip(C0_OR_SPACE))
    m = _SCHEME.match(text)
    if m is None:
        return None  # "no scheme" without a base URL
    scheme = m.group(1).lower()
    rest = text[m.end() :]
    if scheme == "file":
        return _parse_file(rest)
    if scheme in SPECIAL_SCHEMES:
        # special authority slashes, then special authority ignore slashes: any run of / and \
        return _parse_authority(scheme, rest, len(rest) - len(rest.lstrip("/\\")), True)
    if rest.startswith("//"):
        return _parse_authority(scheme, rest, 2, False)
    path_text, query, fragment = _split_query_and_fragment(rest)
    if rest.startswith("/"):
        segments: list[str] = []
        _parse_path(path_text[1:], False, False, segments)
        path = _serialize_path(segments)
    else:
        path = _encode(path_text, _C0_CONTROL_SET)  # an opaque path (mailto:, data:, ...)
    return Url(scheme, "", "", "", None, path, _encode_query(query, False), _encode_fragment(fragment), False)


def _parse_authority(scheme: str, rest: str, start: int, special: bool) -> Url | None:
    end_match = (AUTHORITY_END_SPECIAL if special else AUTHORITY_END).search(rest, start)
    end = end_match.start() if end_match else len(rest)
    authority = rest[start:end]
    username = password = ""
    at = authority.rfind("@")
    if at >= 0:
        # Each '@' flushes the buffer into the userinfo, earlier ones percent-encoded; the first ':'
        # of the whole userinfo separates the password. So the host starts after the last '@'.
        user, _, secret = authority[:at].partition(":")
        username, password = _encode(user, _USERINFO_SET), _encode(secret, _USERINFO_SET)
        authority = authority[at + 1 :]
        if not authority:
            return None
    colon = _port_colon(authority)
    if colon >= 0:
        host_text, port_text = authority[:colon], authority[colon + 1 :]
        if not host_text or not _PORT.fullmatch(port_text):
            return None
    else:
        host_text, port_text = authority, ""
        if special and not host_text:
            return None
    host = parse_host(host_text, special)
    if host is None:
        return None
    port: int | None = None
    if port_text:
        digits = port_text.lstrip("0") or "0"
        if len(digits) > 5 or int(digits) > 0xFFFF:
            return None
        port = None if int(digits) == SPECIAL_SCHEMES.get(scheme) else int(digits)
    path_text, query, fragment = _split_query_and_fragment(rest[end:])
    segments: list[str] = []
    if special:
        if path_text.startswith(("/", "\\")):
            path_text = path_text[1:]
        _parse_path(path_text, True, False, segments)
    elif path_text:
        _parse_path(path_text[1:], False, False, segments)
    return Url(
        scheme,
        username,
        password,
        host,
        port,
        _serialize_path(segments),
        _encode_query(query, special),
        _encode_fragment(fragment),
        special,
    )


def _parse_file(rest: str) -> Url | None:
    host = ""
    path_text = rest
    if rest.startswith(("/", "\\")):
        if rest[1:2] in ("/", "\\"):
            end_match = AUTHORITY_END_SPECIAL.search(rest, 2)
            end = end_match.start() if end_match else len(rest)
            buffer = rest[2:end]
            if _is_windows_drive_letter(buffer):
                path_text = rest[2:]  # the drive letter is the path's first segment, not a host
            else:
                if buffer:
                    parsed = parse_host(buffer, True)
                    if parsed is None:
                        return None
                    host = "" if parsed == "localhost" else parsed
                path_text = rest[end:]
                if path_text.startswith(("/", "\\")):
                    path_text = path_text[1:]
        else:
            path_text = rest[1:]
    path_text, query, fragment = _split_query_and_fragment(path_text)
    segments: list[str] = []
    _parse_path(path_text, True, True, segments)
    return Url(
        "file", "", "", host, None, _serialize_path(segments), _encode_query(query, True),
        _encode_fragment(fragment), True,
    )  # fmt: skip


def _port_colon(authority: str) -> int:
    """Where the host state meets a ':' outside brackets, or -1."""
    if "[" not in authority:
        return authority.find(":")
    inside = False
    for i, c in enumerate(authority):
        if c == "[":
            inside = True
        elif c == "]":
            inside = False
        elif c == ":" and not inside:
            return i
    return -1


def _split_query_and_fragment(rest: str) -> tuple[str, str | None, str | None]:
    fragment = query = None
    hash_at = rest.find("#")
    if hash_at >= 0:
        rest, fragment = rest[:hash_at], rest[hash_at + 1 :]
    question = rest.find("?")
    if question >= 0:
        rest, query = rest[:question], rest[question + 1 :]
    return rest, query, fragment


def _encode_query(query: str | None, special: bool) -> str | None:
    return None if query is None else _encode(query, _SPECIAL_QUERY_SET if special else _QUERY_SET)


def _encode_fragment(fragment: str | None) -> str | None:
    return None if fragment is None else _encode(fragment, _FRAGMENT_SET)


_SINGLE_DOT: Final = frozenset({".", "%2e", "%2E"})
_DOUBLE_DOT: Final = frozenset(a + b for a in _SINGLE_DOT for b in _SINGLE_DOT)


def _is_windows_drive_letter(text: str) -> bool:
    return len(text) == 2 and text[0].isascii() and text[0].isalpha() and text[1] in ":|"


def _parse_path(text: str, special: bool, file: bool, segments: list[str]) -> None:
    """The path state over `text` (its leading slash already consumed), appending to `segments`."""
    parts = _SPECIAL_PATH_SEPARATOR.split(text) if special else text.split("/")
    last = len(parts) - 1
    for i, part in enumerate(parts):
        if part in _DOUBLE_DOT:
            shortened = bool(segments) and not (
                file and len(segments) == 1 and _starts_with_normalized_drive(segments[0])
            )
            if shortened:
                segments.pop()
            # The standard appends '' here in any case; Node 20 does so for non-special schemes
            # only if a segment was removed ("foo://h/.." has the path "", not "/").
            if i == last and (special or shortened):
                segments.append("")
        elif part in _SINGLE_DOT:
            if i == last:
                segments.append("")
        else:
            if file and not segments and _is_windows_drive_letter(part):
                part = part[0] + ":"
            segments.append(_encode(part, _PATH_SET))


def _starts_with_normalized_drive(segment: str) -> bool:
    # The standard keeps a lone normalized drive letter ("C:") from `..`; Node 20 keeps any single
    # segment that merely starts with one ("x:y@h").
    return len(segment) >= 2 and segment[0].isascii() and segment[0].isalpha() and segment[1] == ":"


def _serialize_path(segments: Sequence[str]) -> str:
    return "".join("/" + s for s in segments)


# --- the host parser ---------------------------------------------------------------------------------


def parse_host(text: str, special: bool = True) -> str | None:
    """The host parser: the serialized host ('' for an empty opaque host), or None on failure."""
    if len(text) > MAX_HOST_CHARS:
        return None
    if _SURROGATE.search(text):
        text = _to_scalar_values(text)
    if text.startswith("["):
        if len(text) < 2 or not text.endswith("]"):
            return None
        pieces = _parse_ipv6(text[1:-1])
        return None if pieces is None else "[" + _serialize_ipv6(pieces) + "]"
    if not special:
        return None if _FORBIDDEN_HOST.search(text) else _encode(text, _C0_CONTROL_SET)
    domain: str | None = text
    if "%" in text:
        domain = _percent_decode(text)
    if not domain:
        return None
    ascii_domain = domain_to_ascii(domain)
    if not ascii_domain or _FORBIDDEN_DOMAIN.search(ascii_domain):
        return None
    if ends_in_number(ascii_domain):
        return _parse_ipv4(ascii_domain)
    return ascii_domain


def _percent_decode(text: str) -> str | None:
    raw = PERCENT_BYTE.sub(lambda m: bytes((int(m.group(1), 16),)), text.encode("utf-8"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None  # decoding would yield U+FFFD, which IDNA disallows


def ends_in_number(domain: str) -> bool:
    parts = domain.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    return bool(_ASCII_DIGITS.fullmatch(last)) or _ipv4_number(last) is not None


_IPV4_DIGITS: Final = {10: re.compile(r"[0-9]+"), 16: re.compile(r"[0-9A-Fa-f]+"), 8: re.compile(r"[0-7]+")}


def _ipv4_number(part: str) -> int | None:
    if part == "":
        return None
    radix = 10
    if len(part) >= 2 and part[0] == "0" and part[1] in "xX":
        part, radix = part[2:], 16
    elif len(part) >= 2 and part[0] == "0":
        part, radix = part[1:], 8
    if part == "":
        return 0
    if not _IPV4_DIGITS[radix].fullmatch(part):
        return None
    return int(part, radix)


def _parse_ipv4(domain: str) -> str | None:
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        return None
    numbers: list[int] = []
    for part in parts:
        n = _ipv4_number(part)
        if n is None:
            return None
        numbers.append(n)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    address = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        address += n * 256 ** (3 - i)
    return ".".join(str((address >> shift) & 0xFF) for shift in (24, 16, 8, 0))


_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _parse_ipv6(text: str) -> list[int] | None:
    address = [0] * 8
    piece = 0
    compress: int | None = None
    i = 0
    n = len(text)
    if text[:1] == ":":
        if text[1:2] != ":":
            return None
        i = 2
        piece = 1
        compress = 1
    while i < n:
        if piece == 8:
            return None
        if text[i] == ":":
            if compress is not None:
                return None
            i += 1
            piece += 1
            compress = piece
            continue
        value = length = 0
        while length < 4 and i < n and text[i] in _HEX:
            value = value * 16 + int(text[i], 16)
            i += 1
            length += 1
        if i < n and text[i] == ".":
            if length == 0:
                return None
            i -= length
            if piece > 6:
                return None
            numbers_seen = 0
            while i < n:
                ipv4_piece: int | None = None
                if numbers_seen > 0:
                    if text[i] == "." and numbers_seen < 4:
                        i += 1
                    else:
                        return None
                if i >= n or not ("0" <= text[i] <= "9"):
                    return None
                while i < n and "0" <= text[i] <= "9":
                    digit = ord(text[i]) - 48
                    if ipv4_piece is None:
                        ipv4_piece = digit
                    elif ipv4_piece == 0:
                        return None
                    else:
                        ipv4_piece = ipv4_piece * 10 + digit
                    if ipv4_piece > 255:
                        return None
                    i += 1
                assert ipv4_piece is not None
                address[piece] = address[piece] * 0x100 + ipv4_piece
                numbers_seen += 1
                if numbers_seen in (2, 4):
                    piece += 1
            if numbers_seen != 4:
                return None
            break
        if i < n and text[i] == ":":
            i += 1
            if i >= n:
                return None
        elif i < n:
            return None
        address[piece] = value
        piece += 1
    if compress is not None:
        swaps = piece - compress
        piece = 7
        while piece != 0 and swaps > 0:
            address[piece], address[compress + swaps - 1] = address[compress + swaps - 1], address[piece]
            piece -= 1
            swaps -= 1
    elif piece != 8:
        return None
    return address


def _serialize_ipv6(address: Sequence[int]) -> str:
    best_start, best_len, run_start, run_len = -1, 1, -1, 0
    for i, value in enumerate((*address, 1)):
        if value == 0:
            if run_len == 0:
                run_start = i
            run_len += 1
        else:
            if run_len > best_len:
                best_start, best_len = run_start, run_len
            run_len = 0
    if best_start < 0:
        return ":".join(f"{v:x}" for v in address)
    head = ":".join(f"{v:x}" for v in address[:best_start])
    tail = ":".join(f"{v:x}" for v in address[best_start + best_len :])
    return head + "::" + tail
