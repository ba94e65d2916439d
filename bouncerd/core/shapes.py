"""Destination shapes and their keys: the one grammar that output and arguments are both read by.

Theory of operation
-------------------
A destination is matched by key: the taint index records the keys of every destination token in
untrusted output (`tokens`, `taint`), and a sending tool's argument is looked up by the keys of its
readings (`canon`, `sinkgate`, and `shell_destinations` for a command line). Both sides must build a
key from the same spelling the same way, or a planted address goes unmatched. So every key function
lives here, and so do the shapes whose spellings two sides must agree on; each module imports them
and none writes its own.

The shapes and their keys (all in folded form; keys shorter than `MIN_KEY_CHARS` are dropped; how
each is found in text is `tokens`'):
- **e-mail** (`EMAIL_LOCAL` `@` `EMAIL_DOMAIN`): `local@domain`; `+tag` removed (the key of
  `a+tag@x.com` is `a@x.com`: the tag reaches the same mailbox); Gmail dots removed; the domain keyed
  as a host (`email_key`). The domain of an address is not a host token of its own (`domain_keys`
  records it as `@x.com`, for free text only, so a send to another mailbox at `x.com` never matches
  it). Each address of a `mailto:` list (`mailto:a@x.com,b@y.com?cc=c@z.com`) is one: `,` and `;`
  are delimiters, and `:` or `=` before a local part ends the token before it.
- **URL** (`scheme://…`, `//host/…`, or `host/path`; `smb://` and `file://` too): the host, the host
  without `www.`, the host with its first `MAX_PATH_PREFIX_SEGMENTS` path segments, and the whole URL
  without its scheme (default ports dropped, percent-decoded, dot segments resolved); keys longer than
  `MAX_KEY_CHARS` end in a digest. In a URL with a scheme, a host that `host_key` rejects or that has
  no dot is read as the WHATWG URL standard reads a host that ends in a number (`ipv4_number_host`):
  at most four parts in decimal, `0x` hex or leading-`0` octal, the last filling the remaining bytes,
  so `http://0x7f.0.0.1/`, `http://2130706433/` and `http://127.1/` have the host key `127.0.0.1`. An
  IPv6 host (`http://[2001:DB8:0::1]:8080/`) is keyed as WHATWG serialises it, in brackets
  (`[2001:db8::1]`: RFC 5952, hex groups only, so `[::ffff:10.0.0.1]` is `[::ffff:a00:1]`), and an
  IPv4-mapped one also by its IPv4 address (`10.0.0.1`).
- **host** (`evil.com`, `10.0.0.1`): the host (and its `www.`-less form); the last label must not be
  numeric and must have two characters, unless the host is an IPv4 address in dotted decimal (outside
  a URL, `3.14` is a number, not a host).
- **IPv6 address** written bare (`2001:db8::1`, `::ffff:10.0.0.1`, the full eight-group form): the
  keys of the same address as a URL host. A token is tried only if it has `::` or four groups in a
  row (`10:00:00` is a time), is at most `IPV6_MAX_CHARS` long and has a digit (`std::map` is code).
- **code repository** (`owner/repo`): a chunk that is exactly two names joined by one `/`, the owner
  `[a-z0-9][a-z0-9_-]*` (a dotted one is a host: `host/path`), the repository `[a-z0-9][a-z0-9_.-]*`
  without `..`, each at most `REPO_MAX_NAME` characters; not a media type (`text/html`,
  `multipart/form-data`: `MEDIA_TYPES`), not two numbers (`24/7`), and not two plain words of which
  one is shorter than `REPO_PLAIN_MIN_NAME` letters (`and/or`, `yes/no`, `his/her`); dates have two
  slashes. The key is the lower-case `owner/repo`. A URL on a code host (`CODE_HOSTS`:
  `github.com/owner/repo/…`, `api.github.com/repos/owner/repo`) and an scp-style git remote
  (`git@github.com:owner/repo.git`) add their `owner/repo` too (`.git` removed). Trade-off: two long
  plain words (`read/write`, `date/time`) and one-level relative paths (`debian/rules`,
  `src/main.py`) are keys as well (measured: 50-600 a MB in documentation text, none in mail-like
  text); a key costs memory, and a question only if that exact string is later a destination.
- **phone** (8–15 digits, separators `space ( ) . - /`): the digits, and national forms (1–3 digits of
  country code dropped from a `+`/`00` number, the trunk `0` dropped from a national one). Runs shaped
  like dates (`2026-05-09`) are not phones.
- **IBAN** (`iban_shaped_key`): two letters, two digits, then letters and digits, `IBAN_MIN_CHARS` to
  `IBAN_MAX_CHARS` in all, optionally grouped by single spaces (`DE89 3704 0044 0532 0130 00`), as a
  whole token; compact, lower case. A mod-97-valid one is always a key. One that fails the checksum
  (AgentDojo's `US133000000121212121212`, a mistyped account) is a key when the part after the check
  digits has a run of `IBAN_MIN_DIGIT_RUN` digits (every national format's bank or account number
  does) and its letters are not all `a`–`f` (that is a hex digest: `ab12cdef34567890…`). The country
  code is not checked against the registry (AgentDojo writes `US` and `UK`). The scan finds an IBAN
  from its first 8-digit run (or two 4-digit groups), at most `IBAN_SCAN_BACK` characters in.
  Trade-off: a mistyped IBAN whose bank code has only the letters a–f is missed (its bank would
  refuse it too); an order number shaped like an IBAN (`PO12 3456 7890 1234`) becomes a key.
- **an address's domain as a host**: `DOMAIN_PREFIX` + host (`domain_keys`, above).
- **a URL as written** (`exact_url_key`, `EXACT_PREFIX`): the narrow key the fetch gate allows on.

Intended asymmetries between the sides, each on purpose:

1. **Whole tokens in output, every run in a command line.** The output side finds an address only
   as a whole token (`EMAIL_IN_TEXT`: not right after a local-part character, so `ana@x.com` is not
   found inside `dana@x.com`, nor `d@e.example` glued to a previous address in `a@b.c'd@e.example`):
   a key read from inside another token would taint what nobody planted. The shell reader takes every
   address-shaped run of an argument (`EMAIL_RUN`): there a destination read too many is judged, one
   read too few is sent unjudged.
2. **Trailing dots.** An argument that is one address may end in dots (`a@x.com.`:
   `EMAIL_DESTINATION`), which a mail system ignores; the output side cuts them off the token before
   matching (`tokens._EDGE`), so both key `a@x.com`.
3. **Wide and narrow keys.** Taint keys (`email_key`) strip quotes and dots around the local part and
   fold the whole address (confusables, punycode): a false match costs a question. Trust keys
   (`canon.reading`) fold only what provably names the same mailbox (`mailbox_key`: `+tag`, Gmail
   dots) and ASCII case: a false match there lets data out.
4. **Readings of a quirky address.** `canon` also probes every `@`-joined run of the readings of an
   address with quotes, comments, several `@` or relay syntax (its `_EMAILS_INSIDE`, wider than
   `EMAIL_RUN`): alternatives only ever add probes, so wider is the safe direction.
5. **The domain of an address is a host only in free text.** `domain_keys` is recorded for free text
   alone (a sender's domain is not planted), and looked up only for hosts, never for another mailbox.
6. **A URL argument's host is anything up to a delimiter.** `URL_DESTINATION` takes every character
   a URL parser could put in a host (`[^/?#:@...]`, in any case, trailing dots allowed), where the
   output side's `URL` takes word characters, `.` and `-` (the rest end a token in prose). The
   argument is judged as a whole first, so a host the output side would cut short is still probed
   as a whole; the receiver's own reading (`url.parse`) is probed beside it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final, NamedTuple
from urllib.parse import unquote

from bouncerd.core import fold, url

MIN_KEY_CHARS: Final = 6  # shorter tokens ("a@b.c", "x.io") collide with ordinary text too often
# "Bob", "Eve", "@hsato": a member or contact is often named shorter than any key; such a value in an
# identity field is recorded for a directory to list (`listed_name`), never indexed as taint.
MIN_LISTED_NAME_CHARS: Final = 3
_LISTED_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9._-]*")
MAX_KEY_CHARS: Final = 320  # an e-mail is at most 254 characters; longer URL keys end in a digest
MAX_PATH_PREFIX_SEGMENTS: Final = 3  # "host/a/b/c": enough to tell tenants of a shared host apart
PHONE_MIN_DIGITS: Final = 8  # shorter digit runs are dates, amounts, ids
PHONE_MAX_DIGITS: Final = 15  # E.164 maximum
IBAN_MIN_CHARS: Final = 15  # Norway's IBANs, the shortest in the registry
IBAN_MAX_CHARS: Final = 34  # the registry's maximum (Saint Lucia has 32, Russia 33)
IBAN_MIN_DIGIT_RUN: Final = 8  # every national format has a bank or account number this long; ids rarely do
REPO_MAX_NAME: Final = 100  # GitHub's limit for a repository name (owner names: 39)
# Two plain words joined by "/" ("and/or", "his/her", "yes/no") are prose unless both are this long
# ("torvalds/linux"); a name with a digit, "-", "_" or "." is never prose ("evil-org/x1").
REPO_PLAIN_MIN_NAME: Final = 4

DEFAULT_PORTS: Final[dict[str, frozenset[str]]] = {
    "http": frozenset({"80"}),
    "https": frozenset({"443"}),
    "ws": frozenset({"80"}),
    "wss": frozenset({"443"}),
    "ftp": frozenset({"21"}),
    "": frozenset({"80", "443"}),  # no scheme written: either web default
}
# Hosts whose first two path segments name a repository, and how many segments come before them.
CODE_HOSTS: Final[dict[str, int]] = {
    "github.com": 0,
    "gitlab.com": 0,
    "bitbucket.org": 0,
    "codeberg.org": 0,
    "raw.githubusercontent.com": 0,
    "api.github.com": 1,  # api.github.com/repos/owner/repo
}
_IPV4: Final = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_SINGLE_LABEL: Final = re.compile(r"[^\W_][\w-]*")
_NON_DIGITS: Final = re.compile(r"\D+")
_HEX_LETTERS: Final = frozenset("abcdef")
_DIGITS: Final = frozenset("0123456789")
_DIGIT_RUN: Final = re.compile(rf"\d{{{IBAN_MIN_DIGIT_RUN}}}")

# ---- shapes --------------------------------------------------------------------------------------

EMAIL_LOCAL: Final = r"[\w.+'-]+"
EMAIL_DOMAIN: Final = r"[\w-]+(?:\.[\w-]+)+"
# One token that is exactly one address (groups: local part, domain).
EMAIL: Final = re.compile(rf"({EMAIL_LOCAL})@({EMAIL_DOMAIN})")
# One argument value that is exactly one address, trailing dots allowed (asymmetry 2).
EMAIL_DESTINATION: Final = re.compile(rf"({EMAIL_LOCAL})@({EMAIL_DOMAIN})\.*")
# Every address inside a token of output, as a whole token (asymmetry 1); possessive, so a long run
# of local-part characters without an "@" is given up in one step.
EMAIL_IN_TEXT: Final = re.compile(r"(?<![\w.+'-])([\w.+'-]++)@([\w-]++(?:\.[\w-]++)++)")
# Every address-shaped run in a command-line argument (asymmetry 1).
EMAIL_RUN: Final = re.compile(rf"{EMAIL_LOCAL}@{EMAIL_DOMAIN}")
GMAIL_HOSTS: Final = frozenset({"gmail.com", "googlemail.com"})
# One argument value that is exactly one URL, or one host with a path (asymmetry 6): groups as in
# `URL` and `HOSTPATH`.
URL_DESTINATION: Final = re.compile(
    r"(?:([a-z][a-z0-9+.-]{0,15}):)?//(?:[^/?#\s]*@)?(\[[0-9a-f:.]+\]|[^/?#:\s@\[\]]*)\.*(?::(\d{0,5}))?"
    r"([^?#\s]*)(?:\?([^#\s]*))?(?:#(\S*))?",
    re.IGNORECASE,
)
HOSTPATH_DESTINATION: Final = re.compile(
    r"([\w-]+(?:\.[\w-]+)+)\.*(?::(\d{1,5}))?(/[^?#\s]*)?(?:\?([^#\s]*))?(?:#(\S*))?"
)
# The key of an e-mail address's domain as a host: `@evil.example`. No other key starts with "@" (a
# handle is keyed without its sigil), so a send to another mailbox at the domain never probes it.
DOMAIN_PREFIX: Final = "@"
URL: Final = re.compile(
    r"(?:([a-z][a-z0-9+.-]{0,15}):)?//(?:[^/?#\s]*@)?(\[[0-9a-f:.]+\]|[\w.-]*)(?::(\d{0,5}))?"
    r"([^?#\s]*)(?:\?([^#\s]*))?(?:#(\S*))?"
)
# A host starts a chunk, or follows a word and a colon with no space (`website:evil.example`, and
# `https:evil.example` or `https:/evil.example`, which WHATWG reads as `https://evil.example`).
HOSTPATH: Final = re.compile(
    r"(?:(?<![\w@.:/-])|(?<=[^\W_]:)|(?<=[^\W_]:/))([\w-]++(?:\.[\w-]++)++)(?::(\d{1,5}))?(?![\w@-])(/[^?#\s]*)?(?:\?([^#\s]*))?(?:#(\S*))?"
)
# A sigil at the chunk's start or after a character that cannot end a local part, a path, an entity or


# ---- IP literals -----------------------------------------------------------------------------------


IPV4_MAX_DECIMAL_DIGITS: Final = 10  # 4294967295, the largest IPv4 number
_HEX_NUMBER: Final = re.compile(r"[0-9a-f]*")
_OCTAL_NUMBER: Final = re.compile(r"[0-7]+")
_DECIMAL_NUMBER: Final = re.compile(r"[0-9]+")


def _ipv4_part(part: str) -> int | None:
    """One part of a WHATWG IPv4 host: decimal, `0x` hex (`0x` alone is 0) or leading-`0` octal."""
    if part[:2] == "0x":
        digits = part[2:]
        return (int(digits, 16) if digits else 0) if _HEX_NUMBER.fullmatch(digits) else None
    if len(part) > 1 and part[0] == "0":
        return int(part[1:], 8) if _OCTAL_NUMBER.fullmatch(part, 1) else None
    if len(part) > IPV4_MAX_DECIMAL_DIGITS or not _DECIMAL_NUMBER.fullmatch(part):
        return None  # longer is over 2**32 (and int() refuses a hostile 5000-digit part)
    return int(part)


def ipv4_number_host(host: str) -> str | None:
    """The dotted form of a URL host that WHATWG reads as IPv4 (`0x7f.1`, `2130706433`), else None."""
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    last = parts[-1]
    if len(parts) > 4 or not (_DECIMAL_NUMBER.fullmatch(last) or last[:2] == "0x"):
        return None  # not a number host (WHATWG: "ends in a number"), or one it rejects
    nums: list[int] = []
    for part in parts:
        n = _ipv4_part(part) if part else None
        if n is None:
            return None
        nums.append(n)
    if any(n > 255 for n in nums[:-1]) or nums[-1] >= 256 ** (5 - len(nums)):
        return None
    value = nums[-1]
    for i, n in enumerate(nums[:-1]):
        value += n << (8 * (3 - i))
    return ".".join(str((value >> shift) & 255) for shift in (24, 16, 8, 0))


def ipv6_keys(literal: str) -> list[str]:
    """The keys of an IPv6 address (brackets optional): the bracketed form WHATWG serialises (`url`,
    the one IP reader: RFC 5952, IPv4-mapped written in hex as `[::ffff:a00:1]`), and for an IPv4-mapped
    address its IPv4 address too; [] if it is not one. A zone (`%eth0`) is dropped."""
    text = literal[1:-1] if literal[:1] == "[" and literal[-1:] == "]" else literal
    host = url.parse_host("[" + text.split("%", 1)[0] + "]")
    if host is None or not host.startswith("["):
        return []
    keys = [host]
    m = _MAPPED_IPV4.fullmatch(host)
    if m is not None:
        high, low = int(m.group(1), 16), int(m.group(2), 16)
        keys.append(f"{high >> 8}.{high & 255}.{low >> 8}.{low & 255}")
    return keys


_MAPPED_IPV4: Final = re.compile(r"\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]")


# ---- keys of one token -----------------------------------------------------------------------------


def host_key(host: str) -> str | None:
    """A folded host as a key (trailing dots removed, punycode decoded, an IPv6 literal in RFC 5952
    form), or None if it is not a host.

    Callers pass hosts matched by `[\\w-]+(\\.[\\w-]+)*` (or an IPv6 literal in brackets).
    """
    if host.endswith("."):
        host = host.rstrip(".")
    if "xn--" in host:
        host = fold.fold_clean(host)
    dot = host.rfind(".")
    if dot < 0:
        if host.startswith("["):
            return _ipv6_host(host)
        return host if _SINGLE_LABEL.fullmatch(host) else None
    tld = host[dot + 1 :]
    if len(tld) < 2 or tld.isdigit() or (not tld.isalnum() and "-" not in tld):
        if host.startswith("["):
            return _ipv6_host(host)  # with an IPv4 tail: [::ffff:10.0.0.1]
        return host if _IPV4.fullmatch(host) else None
    return host


def _ipv6_host(host: str) -> str | None:
    keys = ipv6_keys(host) if host.endswith("]") else []
    return keys[0] if keys else None


def host_keys(host: str) -> list[str]:
    """The keys of a host: itself and, for `www.` hosts, the host without it."""
    if host.startswith("www.") and host.count(".") >= 2:
        return [host, host[4:]]
    return [host]


def email_key(local: str, domain: str) -> str | None:
    local = local.strip(".'").split("+", 1)[0]
    host = host_key(domain)
    if not local or host is None or "." not in host:
        return None
    return mailbox_key(local, host)


def mailbox_key(local: str, host: str) -> str:
    """`local@host` with what reaches the same mailbox folded away: the `+tag`, and Gmail's dots
    (`googlemail.com` is `gmail.com`). Both the wide and the narrow keys of an address end here."""
    local = local.split("+", 1)[0]
    if host in GMAIL_HOSTS:
        local, host = local.replace(".", ""), "gmail.com"
    return f"{local}@{host}"


def shorten(key: str) -> str:
    """Keys longer than `MAX_KEY_CHARS` end in a digest of the whole, the same on both sides."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    return key[: MAX_KEY_CHARS - 25] + "~" + digest


def _segments(path: str) -> list[str]:
    if "%" in path:
        path = unquote(path, errors="replace")
    if "." not in path:
        return [seg for seg in path.split("/") if seg]  # no "." or ".." segment to resolve
    out: list[str] = []
    for seg in path.split("/"):
        if seg == "..":
            if out:
                out.pop()
        elif seg and seg != ".":
            out.append(seg)
    return out


class UrlKeys(NamedTuple):
    hosts: list[str]  # the host, and the host without "www." (or an IPv4-mapped address's IPv4)
    prefixes: list[str]  # host+first path segments, shortest first
    whole: str  # host[:port]/path?query#fragment: the URL without its scheme

    def all(self) -> list[str]:
        return [*self.hosts, *self.prefixes, self.whole]


def url_keys(
    scheme: str, host: str, port: str | None, path: str, query: str | None, fragment: str | None
) -> UrlKeys | None:
    """The keys of one URL, or None if its host is not a host. With a scheme, a host that ends in a
    number is read as WHATWG reads it (`ipv4_number_host`)."""
    hkey = host_key(host)
    if scheme and (hkey is None or "." not in hkey or host[-1:].isdigit() or "0x" in host):
        hkey = ipv4_number_host(host) or hkey  # "0x7f.1", "2130706433", "0xcb.0x0.0x71.0x7"
    if hkey is None:
        return None
    if hkey.startswith("www."):
        hosts = host_keys(hkey)
        base = hosts[-1]
    elif hkey.startswith("["):
        hosts = ipv6_keys(hkey)  # and an IPv4-mapped address's IPv4 address
        base = hkey
    else:
        hosts = [hkey]
        base = hkey
    if port and port not in DEFAULT_PORTS.get(scheme, frozenset()):
        base = f"{base}:{port.lstrip('0') or '0'}"
    prefixes: list[str] = []
    whole = base
    if path and path != "/":
        segments = _segments(path)
        for seg in segments[:MAX_PATH_PREFIX_SEGMENTS]:
            whole = whole + "/" + seg
            prefixes.append(whole if len(whole) <= MAX_KEY_CHARS else shorten(whole))
        if len(segments) > MAX_PATH_PREFIX_SEGMENTS:
            whole += "/" + "/".join(segments[MAX_PATH_PREFIX_SEGMENTS:])
    if query:
        whole += "?" + (unquote(query, errors="replace") if "%" in query else query)
    if fragment:
        whole += "#" + (unquote(fragment, errors="replace") if "%" in fragment else fragment)
    if len(whole) > MAX_KEY_CHARS:
        whole = shorten(whole)
    if prefixes and prefixes[-1] == whole:
        prefixes.pop()
    return UrlKeys(hosts, prefixes, whole)


def phone_keys(token: str) -> list[str]:
    """The digits of a phone number and its national forms, or [] if it has too few or many digits."""
    digits = _NON_DIGITS.sub("", token)
    intl = token.lstrip()[:1] == "+"
    if digits.startswith("00"):
        digits, intl = digits[2:], True
    if not PHONE_MIN_DIGITS <= len(digits) <= PHONE_MAX_DIGITS:
        return []
    keys = [digits]
    if intl:
        keys += [digits[i:] for i in (1, 2, 3) if len(digits) - i >= PHONE_MIN_DIGITS]
    elif digits[0] == "0" and len(digits) - 1 >= PHONE_MIN_DIGITS:
        keys.append(digits[1:])
    return keys


def _compact_iban(token: str) -> str | None:
    """`token` without spaces, lower case, if it has an IBAN's length, alphabet and prefix."""
    compact = "".join(token.split()).lower()
    if not (IBAN_MIN_CHARS <= len(compact) <= IBAN_MAX_CHARS and compact.isascii() and compact.isalnum()):
        return None
    if not (compact[:2].isalpha() and compact[2:4].isdigit()):
        return None
    return compact


def _mod97_valid(compact: str) -> bool:
    return int("".join(str(int(ch, 36)) for ch in compact[4:] + compact[:4])) % 97 == 1


def iban_key(token: str) -> str | None:
    """A compact IBAN, if the mod-97 check passes (for callers that must know it is a real account)."""
    compact = _compact_iban(token)
    return compact if compact is not None and _mod97_valid(compact) else None


def iban_shaped_key(token: str) -> str | None:
    """A compact IBAN-shaped token, checksum or not (see "IBAN" in the module docstring), or None."""
    compact = _compact_iban(token)
    if compact is None or _mod97_valid(compact):
        return compact
    bban = compact[4:]
    if _DIGIT_RUN.search(bban) is None:
        return None
    letters = set(bban) - _DIGITS
    if letters and letters <= _HEX_LETTERS:
        return None  # a hex digest that happens to start with two letters and two digits
    return compact


_REPO: Final = re.compile(
    rf"([a-z0-9][a-z0-9_-]{{0,{REPO_MAX_NAME - 1}}})/([a-z0-9][a-z0-9_.-]{{0,{REPO_MAX_NAME - 1}}})"
)
_PLAIN_NAME: Final = re.compile(r"[a-z]+")
# "text/html", "multipart/form-data": media types, not repositories
MEDIA_TYPES: Final = frozenset(
    {"application", "audio", "font", "image", "message", "model", "multipart", "text", "video"}
)


def repo_key(token: str) -> str | None:
    """`owner/repo` (folded) as a key, if `token` is one and does not read as two words of prose."""
    m = _REPO.fullmatch(token)
    if m is None:
        return None
    owner, repo = m.group(1), m.group(2)
    if owner in MEDIA_TYPES or ".." in repo:
        return None
    if _PLAIN_NAME.fullmatch(owner) and _PLAIN_NAME.fullmatch(repo):
        if len(owner) < REPO_PLAIN_MIN_NAME or len(repo) < REPO_PLAIN_MIN_NAME:
            return None  # "and/or", "his/her", "yes/no"
    elif owner.isdigit() and repo.isdigit():
        return None  # "24/7", "2023/2024"
    return token if len(token) >= MIN_KEY_CHARS else None


def code_host_repo(got: UrlKeys, out: set[str]) -> None:
    """The `owner/repo` of a URL on a code host (`CODE_HOSTS`)."""
    host = got.hosts[-1]
    skip = CODE_HOSTS.get(host)
    if skip is None:
        return
    rest = got.whole[len(host) :]
    if rest[:1] != "/":
        return  # no path, or a port
    parts = rest.split("?", 1)[0].split("#", 1)[0].split("/", 3 + skip)
    if len(parts) < 3 + skip or (skip and parts[1] != "repos"):
        return
    repo = parts[2 + skip]
    key = repo_key(parts[1 + skip] + "/" + (repo[:-4] if repo.endswith(".git") else repo))
    if key is not None:
        out.add(key)


EXACT_PREFIX: Final = (
    "="  # the narrow keys of links as written (`bouncerd.core.linkkeys`); no other key starts with it
)


def domain_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """The domain key (`DOMAIN_PREFIX` + host) of every e-mail address among `keys`. Recorded for free
    text only: an address planted in a body makes its domain a planted host (fetching it, a webhook on
    it, resolving it or a subdomain of it), while a sender's domain (an identity field) is not one,
    and a send to another mailbox at the domain is not judged by it (`lookup` probes domain keys only
    for hosts: `taint.TaintIndex.lookup`)."""
    out: list[str] = []
    for key in keys:
        at = key.find("@")
        if (
            at > 0
            and len(key) - at - 1 >= MIN_KEY_CHARS  # the domain, as long as a host key must be
            and "/" not in key
            and key[0] != EXACT_PREFIX
            and key.find("@", at + 1) < 0
        ):
            domain = DOMAIN_PREFIX + key[at + 1 :]
            if domain not in out:
                out.append(domain)
    return tuple(out)


def listed_name(text: str) -> str | None:
    """A party value shorter than a key ("Bob", "@eve", "hsato") as `canon` keys a plain name, for a
    directory to list; None for anything else (a number, two words, punctuation, a longer name)."""
    name = text.strip().lstrip("@")
    if len(name) >= MIN_KEY_CHARS or _LISTED_NAME.fullmatch(name) is None:
        return None
    return name.casefold()
