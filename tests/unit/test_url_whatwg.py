"""bouncerd.core.url against the URL Standard's attack spellings and against Node's own parser.

Node (`new URL`) is the oracle: for every input Node rejects we must fail, and for every input both
accept we must compute Node's hostname, scheme, port, path and userinfo. Failing where Node accepts is
allowed (the URL is then not trusted), but counted and bounded.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bouncerd.core import url, urlquirks, uts46
from bouncerd.core.url import Url, parse, parse_host, unicode_host
from bouncerd.core.urlquirks import quirks

ORACLE = Path(__file__).with_name("url_oracle.js")
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not on PATH: no oracle to compare with")

# The differential corpus: enough URLs that every generator feature below shows up hundreds of times.
CORPUS_SIZE = 12_000
# Inputs we reject although Node accepts them may not exceed this share of the corpus.
MAX_OVER_REJECTION = 0.02


def run_node(inputs: list[str]) -> list[dict[str, Any]]:
    assert NODE is not None
    proc = subprocess.run(
        [NODE, str(ORACLE)],
        input="".join(json.dumps(s) + "\n" for s in inputs).encode(),
        capture_output=True,
        check=True,
        timeout=120,
    )
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(rows) == len(inputs)
    return rows


# --- named attack spellings --------------------------------------------------------------------------

ATTACKS: list[tuple[str, str, str | None]] = [
    # (attack, input, host Node computes; None = Node throws)
    ("backslash_before_at", "https://hooks.evil.example\\@corp.example/x", "hooks.evil.example"),
    ("double_backslash_as_slashes", "https:\\\\evil.example\\x", "evil.example"),
    ("slash_backslash_as_slashes", "https:/\\evil.example/", "evil.example"),
    ("many_slashes", "http:////\\\\//evil.example/", "evil.example"),
    ("no_slashes_special", "http:evil.example/x", "evil.example"),
    ("one_slash_special", "http:/evil.example/x", "evil.example"),
    ("tab_inside_host", "https://corp.ex\tample.evil.example/", "corp.example.evil.example"),
    ("newline_inside_host", "https://corp\n.example/", "corp.example"),
    ("carriage_return_in_scheme", "ht\rtps://evil.example/", "evil.example"),
    ("userinfo_before_trusted_host", "https://corp.example@evil.example/", "evil.example"),
    ("userinfo_with_many_at_signs", "https://a@corp.example@evil.example/", "evil.example"),
    ("userinfo_with_password", "https://corp.example:443@evil.example/", "evil.example"),
    ("percent_encoded_at_stays_userinfo", "https://corp.example%40evil.example/", None),
    ("at_in_path_is_not_userinfo", "https://evil.example/@corp.example", "evil.example"),
    ("ipv4_hex_short_form", "http://0x7f.1/", "127.0.0.1"),
    ("ipv4_single_decimal", "http://2130706433/", "127.0.0.1"),
    ("ipv4_octal", "http://0177.0.0.1/", "127.0.0.1"),
    ("ipv4_mixed_bases", "http://0x7f.0.00.0x1/", "127.0.0.1"),
    ("ipv4_two_parts", "http://127.1/", "127.0.0.1"),
    ("ipv4_trailing_dot", "http://127.0.0.1./", "127.0.0.1"),
    ("ipv4_overflow", "http://4294967296/", None),
    ("ipv4_part_overflow", "http://256.0.0.1/", None),
    ("ipv4_five_parts", "http://1.2.3.4.5/", None),
    ("ipv4_bad_octal_digit", "http://08.0.0.1/", None),
    ("ipv4_ends_in_hex_number", "http://evil.0x7f/", None),
    ("ipv4_percent_encoded", "http://%31%32%37.1/", "127.0.0.1"),
    ("ipv4_full_width_digits", "http://１２７.０.０.１/", "127.0.0.1"),
    ("ipv6_mapped_ipv4", "http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]"),
    ("ipv6_redundant_zeros", "http://[0:0::1]/", "[::1]"),
    ("ipv6_upper_case", "http://[::FFFF:7F00:1]/", "[::ffff:7f00:1]"),
    ("ipv6_zone_id", "http://[fe80::1%25eth0]/", None),
    ("ipv6_double_compression", "http://[1::2::3]/", None),
    ("ipv6_unclosed", "http://[::1/", None),
    ("percent_encoded_dot", "http://evil%2eexample/", "evil.example"),
    ("percent_encoded_full_width_letter", "http://%ef%bd%85vil.example/", "evil.example"),
    ("percent_encoded_slash", "http://evil.example%2f.corp.example/", None),
    ("percent_encoded_nul", "http://evil%00.example/", None),
    ("invalid_percent_sequence", "http://evil%zz.example/", None),
    ("full_width_dots", "http://evil。example．corp｡example/", "evil.example.corp.example"),
    ("full_width_letters", "http://ｅｖｉｌ.example/", "evil.example"),
    ("upper_case_host", "HTTPS://EVIL.Example/", "evil.example"),
    ("trailing_dot_kept", "https://evil.example./", "evil.example."),
    ("empty_label_kept", "https://evil..example/", "evil..example"),
    ("default_port_dropped", "https://evil.example:443/", "evil.example"),
    ("leading_zero_port", "https://evil.example:00443/", "evil.example"),
    ("port_out_of_range", "https://evil.example:65536/", None),
    ("port_not_digits", "https://evil.example:44x/", None),
    ("port_sign", "https://evil.example:-1/", None),
    ("port_without_host", "https://:443/", None),
    ("nul_in_host", "http://evil\x00.example/", None),
    ("space_in_host", "http://evil .example/", None),
    ("forbidden_caret", "http://evil^.example/", None),
    ("forbidden_pipe", "http://evil|.example/", None),
    ("forbidden_angle", "http://evil<.example/", None),
    ("del_in_host", "http://evil\x7f.example/", None),
    ("leading_control_trimmed", "\x00\x1f https://evil.example/ \x01", "evil.example"),
    ("invalid_punycode", "http://xn--a.example/", None),
    ("empty_punycode", "http://xn--.example/", None),
    ("punycode_upper_case", "http://XN--FA-HIA.example/", "xn--fa-hia.example"),
    ("punycode_not_nfc", "http://xn--e-ufa.example/", "xn--e-ufa.example"),
    ("soft_hyphen_ignored", "http://ev\u00adil.example/", "evil.example"),
    ("zero_width_space_ignored", "http://ev\u200bil.example/", "evil.example"),
    ("zero_width_joiner_outside_virama", "http://ev\u200dil.example/", None),
    ("right_to_left_override", "http://evil\u202e.example/", None),
    ("cyrillic_lookalike", "http://соrp.example/", "xn--rp-emcl.example"),
    ("sharp_s_not_folded_to_ss", "http://faß.example/", "xn--fa-hia.example"),
    ("circled_letters", "http://ⓔⓥⓘⓛ.example/", "evil.example"),
    ("digit_full_stop_disallowed", "http://evil⒈example/", None),
    ("fullwidth_solidus_disallowed", "http://evil／corp.example/", None),
    ("ideographic_space_disallowed", "http://evil\u3000.example/", None),
    ("no_host_special", "http:///", None),
    ("no_scheme", "//evil.example/", None),
    ("file_host", "file://evil.example/etc/passwd", "evil.example"),
    ("file_localhost_dropped", "file://localhost/etc/passwd", ""),
    ("file_drive_letter_is_not_host", "file://C:/x", ""),
    ("non_special_opaque_host", "git+ssh://Evil.Example/x", "Evil.Example"),
    ("non_special_backslash_is_userinfo", "foo://evil.example\\@corp.example/", "corp.example"),
    ("non_special_backslash_in_host_forbidden", "foo://evil.example\\corp/", None),
    ("non_special_percent_kept", "foo://evil%2eexample/", "evil%2eexample"),
    ("mailto_has_no_host", "mailto:a@evil.example", ""),
]


@pytest.mark.parametrize(("text", "host"), [(t, h) for _, t, h in ATTACKS], ids=[a for a, _, _ in ATTACKS])
def test_attack_spelling(text: str, host: str | None) -> None:
    got = parse(text)
    if host is None:
        assert got is None
    else:
        assert got is not None
        assert got.host == host


@needs_node
def test_attack_spellings_agree_with_node() -> None:
    rows = run_node([t for _, t, _ in ATTACKS])
    for (attack, _, host), row in zip(ATTACKS, rows, strict=True):
        assert (row["hostname"] if row["ok"] else None) == host, attack


def test_userinfo_split_at_last_at_sign() -> None:
    got = parse("https://a@b:c@d@evil.example:8443/p")
    assert got is not None
    assert (got.username, got.password, got.host, got.port) == ("a%40b", "c%40d", "evil.example", 8443)
    assert got.has_credentials


def test_dot_segments_resolved() -> None:
    got = parse("http://h/a/./b/%2e%2E/../c/.%2e/d/%2e")
    assert got is not None
    assert got.path == "/d/"
    assert parse("http://h/..\\..\\x") == parse("http://h/x")


def test_query_and_fragment_split_off() -> None:
    got = parse("https://h\\p@q?x=@y\\#f@g")
    assert got is not None
    assert (got.host, got.path, got.query, got.fragment) == ("h", "/p@q", "x=@y\\", "f@g")


def test_opaque_path() -> None:
    got = parse("mailto:Ann@Evil.example?subject=hi")
    assert got is not None
    assert (got.scheme, got.host, got.path, got.query, got.special) == (
        "mailto", "", "Ann@Evil.example", "subject=hi", False,
    )  # fmt: skip


def test_parse_host_alone() -> None:
    assert parse_host("evil.example") == "evil.example"
    assert parse_host("0x7f.1") == "127.0.0.1"
    assert parse_host("[::1]") == "[::1]"
    assert parse_host("Evil.Example", special=False) == "Evil.Example"
    assert parse_host("") is None
    assert parse_host("", special=False) == ""


def test_unicode_host() -> None:
    assert unicode_host("xn--fa-hia.example") == "faß.example"
    assert unicode_host("xn--rp-emcl.example") == "соrp.example"
    assert unicode_host("127.0.0.1") == "127.0.0.1"
    assert unicode_host("[::1]") == "[::1]"
    assert unicode_host("xn--a.example") == "xn--a.example"


def test_overlong_input_fails() -> None:
    assert parse("https://evil.example/" + "a" * url.MAX_URL_CHARS) is None
    assert parse_host("a" * (url.MAX_HOST_CHARS + 1)) is None
    assert parse("https://" + "я" * (uts46.MAX_UNICODE_LABEL_CHARS + 1) + ".example/") is None


@pytest.mark.parametrize("host", ["1" * 10_000, "0x" + "f" * 10_000, "0" + "7" * 10_000, "9" * 10_000 + "a"])
def test_quirks_of_huge_numeric_hosts(host: str) -> None:
    assert isinstance(quirks("http://" + host + "/"), tuple)
    assert parse("http://" + host + "/") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://corp.example/x", ()),
        ("https://hooks.evil.example\\@corp.example/x", ("backslash", "at_in_path_or_query")),
        ("https://corp.example@evil.example/", ("userinfo",)),
        ("http://0x7f.1/", ("ipv4_non_decimal", "ipv4_short_form")),
        ("http://2130706433/", ("ipv4_short_form",)),
        ("http://0177.0.0.1/", ("ipv4_non_decimal",)),
        ("http://evil%2eexample/", ("percent_in_host",)),
        (" http://ev\til.example/", ("tab_or_newline", "c0_or_space_trimmed", "control_character")),
        ("http://evil\x00.example/", ("control_character",)),
        ("http://evil\x85.example/", ("control_character", "non_ascii_host")),
        ("http://соrp.example/", ("mixed_scripts", "non_ascii_host")),
        ("http://сорр.example/", ("non_ascii_host",)),
        ("http://日本語.jp/", ("non_ascii_host",)),
        ("http://evil.example./", ("trailing_dot",)),
        ("http://evil..example/", ("empty_label",)),
        ("https://evil.example/?to=a@b", ("at_in_path_or_query",)),
        ("mailto:a@evil.example", ("at_in_path_or_query",)),
        ("http://１２７。１/", ("ipv4_short_form", "non_ascii_host")),
        ("", ()),
    ],
)
def test_quirks(text: str, expected: tuple[str, ...]) -> None:
    assert quirks(text) == expected


# --- the differential corpus -------------------------------------------------------------------------

SCHEMES = ["http", "https", "ws", "wss", "ftp", "file", "foo", "smb", "git+ssh", "mailto", "sc", "data"]
SEPARATORS = ["//", "//", "//", "\\\\", "/\\", "\\/", "", "/", "///", ":", "//:", " //", "/\t/"]
USER_PIECES = ["user", "u:p", "a@b", "%40", "evil.example\\", "x:y:z", "", ":", "a b", "tr\tust", "ü",
               "us%3Ar", "corp.example", "@", "p^|`", "[x]", "a/b"]  # fmt: skip
WORDS = ["corp", "evil", "example", "com", "a", "b-c", "x1", "localhost", "www", "test", "münchen",
         "faß", "日本", "مثال", "דוגמה", "пример", "😀", "ς", "xn--fa-hia", "xn--e28h", "xn--4db",
         "xn--mnchen-3ya", "xn--a", "xn--", "xn--zz", "xn--abc-", "XN--FA-HIA", "☃", "ℌ", "İ",
         "\u212a", "e\u0301", "\u0301a", "क्\u200dष", "a\u200cb", "ب\u200cب", "ⓔ", "Ⴀ", "ẞ", "Σ"]  # fmt: skip
CYRILLIC = str.maketrans({"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "i": "і"})
INSERTS = ["\t", "\n", "\r", " ", "\x00", "\x01", "\x1f", "\x7f", "\x85", "\u00a0", "\u200b", "\u00ad",
           "\u200d", "\ufeff", "%", "%2e", "%00", "%zz", "%41", "%E2%80%AE", "\\", "@", ":", "^", "|",
           "<", "[", "]", "#", "?", "_", "$", "\u3002", "\uff0e", "\uff61", "\ud800"]  # fmt: skip
PORTS = ["", "80", "443", "21", "8080", "65535", "65536", "00080", "-1", "8o", "99999", "0", "1e3"]
SEGMENTS = ["a", "..", ".", "%2e", "%2E%2e", ".%2e", "@evil", "b\\c", "", "x y", "é", "%zz", "C|", "c:",
            "...", "%2e%2e%2f", "^`{}", "'\""]  # fmt: skip
QUERY_PIECES = ["a=b", "@", "x\\y", "'", "q=%40", " ", "é", "#", "?", "`"]


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" and c != "." else c for c in s)


def _ipv4(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.choice([1, 2, 3, 4, 4, 4, 5])):
        n = rng.choice([0, 1, 7, 8, 127, 255, 256, 4095, 65535, 16777216, 4294967295, 4294967296])
        if rng.random() < 0.5:
            n = rng.randrange(0, 300)
        form = rng.choice(["dec", "dec", "hex", "HEX", "oct", "bad"])
        if form == "dec":
            parts.append(str(n))
        elif form in ("hex", "HEX"):
            parts.append(("0x" if form == "hex" else "0X") + (f"{n:x}" if rng.random() < 0.7 else ""))
        elif form == "oct":
            parts.append(f"0{n:o}")
        else:
            parts.append(rng.choice(["09", "0x", "0xg", "", "1a", "00", "08"]))
    text = ".".join(parts)
    return text + ("." if rng.random() < 0.15 else "")


def _ipv6(rng: random.Random) -> str:
    pieces = [rng.choice(["0", "1", "ffff", "FFFF", "0000", "abcd", "12345", "g", "7f00"]) for _ in range(8)]
    count = rng.choice([1, 2, 3, 6, 7, 8, 8, 9])
    body = ":".join(pieces[:count])
    if rng.random() < 0.6:
        cut = rng.randrange(0, count + 1)
        body = ":".join(pieces[:cut]) + "::" + ":".join(pieces[cut : count - 1])
    if rng.random() < 0.25:
        body += rng.choice([":127.0.0.1", ":1.2.3", ".1", "::1.2.3.4", ":01.2.3.4", ":256.1.1.1"])
    return "[" + body + rng.choice(["]", "]", "]", "", "%25eth0]", "]x"]) + ""


def _domain(rng: random.Random) -> str:
    labels = [rng.choice(WORDS) for _ in range(rng.choice([1, 2, 2, 3, 4]))]
    text = ".".join(labels)
    roll = rng.random()
    if roll < 0.1:
        text = text.upper()
    elif roll < 0.2:
        text = "".join(c.upper() if rng.random() < 0.5 else c for c in text)
    elif roll < 0.3:
        text = _fullwidth(text)
    elif roll < 0.4:
        text = text.translate(CYRILLIC)
    if rng.random() < 0.15:
        text = text.replace(".", rng.choice(["\u3002", "\uff0e", "\uff61", ".."]))
    if rng.random() < 0.15:
        text += "."
    if rng.random() < 0.05:
        text = "." + text
    if rng.random() < 0.15:
        text = "".join(f"%{b:02{rng.choice('xX')}}" if rng.random() < 0.3 else chr(b) for b in text.encode()
                       if b < 0x80) or text  # fmt: skip
    return text


def _host(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.5:
        host = _domain(rng)
    elif roll < 0.7:
        host = _ipv4(rng)
    elif roll < 0.82:
        host = _ipv6(rng)
    elif roll < 0.9:
        host = (
            rng.choice(WORDS)
            + "."
            + "".join(rng.choice("0123456789abcdefx.") for _ in range(rng.randrange(1, 6)))
        )
    else:
        host = ""
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        at = rng.randrange(0, len(host) + 1)
        host = host[:at] + rng.choice(INSERTS) + host[at:]
    return host


def _url(rng: random.Random) -> str:
    scheme = rng.choice(SCHEMES)
    if rng.random() < 0.2:
        scheme = "".join(c.upper() if rng.random() < 0.5 else c for c in scheme)
    out = scheme + ":" + rng.choice(SEPARATORS)
    if rng.random() < 0.3:
        out += "".join(rng.choice(USER_PIECES) for _ in range(rng.randrange(1, 4))) + "@"
        if rng.random() < 0.3:
            out += rng.choice(USER_PIECES) + "@"
    out += _host(rng)
    if rng.random() < 0.3:
        out += ":" + rng.choice(PORTS)
    if rng.random() < 0.7:
        out += "".join(
            rng.choice(["/", "/", "\\"]) + rng.choice(SEGMENTS) for _ in range(rng.randrange(1, 5))
        )
    if rng.random() < 0.3:
        out += "?" + "&".join(rng.choice(QUERY_PIECES) for _ in range(rng.randrange(1, 4)))
    if rng.random() < 0.2:
        out += "#" + "".join(rng.choice(QUERY_PIECES) for _ in range(rng.randrange(1, 3)))
    if rng.random() < 0.1:
        out = rng.choice([" ", "\x00", "\t", "\x1f "]) + out + rng.choice([" ", "\x01", "\n", ""])
    if rng.random() < 0.1:
        at = rng.randrange(0, len(out) + 1)
        out = out[:at] + rng.choice(INSERTS) + out[at:]
    return out


def _plain_url(rng: random.Random) -> str:
    """What the fast path is for: a special scheme, an ASCII host, a simple path and query."""
    host = ".".join(rng.choice(["corp", "Example", "com", "a-b", "x1", "0x", "1", "xn--fa-hia", "9"])
                    for _ in range(rng.randrange(1, 4)))  # fmt: skip
    out = rng.choice(["http", "https", "ws", "wss", "ftp"]) + "://" + host + rng.choice(["", "", "."])
    if rng.random() < 0.3:
        out += ":" + rng.choice(["80", "443", "21", "8080", "65535", "99999"])
    out += "".join("/" + rng.choice(["a", "b.c", "", ".", "..", "%2e", "~u", "@x", "a:b", "%41"])
                   for _ in range(rng.randrange(0, 4)))  # fmt: skip
    if rng.random() < 0.3:
        out += "?" + rng.choice(["a=b", "q=%40&r=/", "", "x?y"])
    if rng.random() < 0.2:
        out += "#" + rng.choice(["f", "", "a/b?c", "x'y"])
    return out


def corpus() -> list[str]:
    rng = random.Random(20240611)
    generated = [_plain_url(rng) if rng.random() < 0.1 else _url(rng) for _ in range(CORPUS_SIZE)]
    return [t for _, t, _ in ATTACKS] + generated[: CORPUS_SIZE - len(ATTACKS)]


def _node_port(port: int | None) -> str:
    return "" if port is None else str(port)


def _node_part(prefix: str, value: str | None) -> str:
    return prefix + value if value else ""


def _mismatch(ours: Url, node: dict[str, Any]) -> str | None:
    pairs = [
        ("hostname", ours.host, node["hostname"]),
        ("protocol", ours.scheme + ":", node["protocol"]),
        ("port", _node_port(ours.port), node["port"]),
        ("pathname", ours.path, node["pathname"]),
        ("username", ours.username, node["username"]),
        ("password", ours.password, node["password"]),
        ("search", _node_part("?", ours.query), node["search"]),
        ("hash", _node_part("#", ours.fragment), node["hash"]),
    ]
    wrong = [f"{name}: ours {a!r} node {b!r}" for name, a, b in pairs if a != b]
    return "; ".join(wrong) or None


def _classify_over_rejection(node_hostname: str) -> str:
    """Why we fail on a host Node accepts, read off Node's own (punycode) hostname."""
    raw = node_hostname.split(".")
    decode = uts46._punycode_decode
    labels = [(decode(label[4:]) if label.startswith("xn--") else label) or "" for label in raw]
    if any(r.startswith("xn--") and label.isascii() for r, label in zip(raw, labels, strict=True)):
        return "punycode label that decodes to ASCII (UTS #46 since 15.1)"
    text = "".join(labels)
    if "\u200c" in text or "\u200d" in text:
        return "joiner context unknown to unicodedata"
    if any(unicodedata.bidirectional(c) in ("R", "AL", "AN") for c in text):
        return "bidi rule on every label (stricter than Node 20)"
    return "other"


@needs_node
def test_differential_against_node() -> None:
    inputs = corpus()
    rows = run_node(inputs)
    accepted = sum(row["ok"] for row in rows)
    mismatches: list[str] = []
    over_rejected: list[tuple[str, str]] = []
    for text, row in zip(inputs, rows, strict=True):
        ours = parse(text)
        if not row["ok"]:
            if ours is not None:
                mismatches.append(f"{text!r}: Node rejects, we accept {ours}")
        elif ours is None:
            over_rejected.append((text, row["hostname"]))
        elif (why := _mismatch(ours, row)) is not None:
            mismatches.append(f"{text!r}: {why}")
    classes = Counter(_classify_over_rejection(host) for _, host in over_rejected)
    print(
        f"\ncorpus {len(inputs)}: Node accepts {accepted}, rejects {len(inputs) - accepted}; "
        f"we also reject {len(over_rejected)} that Node accepts: {dict(classes)}"
    )
    for text, host in over_rejected:
        if _classify_over_rejection(host) == "other":
            print("  over-rejected, unclassified:", repr(text), "Node host", repr(host))
    assert not mismatches, "\n".join(mismatches[:40])
    assert len(over_rejected) <= MAX_OVER_REJECTION * len(inputs)


# Each ambiguity feature must appear at least this often in the corpus for the comparison to count.
MIN_FEATURE_COUNT = 100


def test_corpus_covers_every_feature() -> None:
    inputs = corpus()
    seen = Counter(q for text in inputs for q in quirks(text))
    seen.update(
        name
        for text in inputs
        for name, present in [
            ("ipv6", "[" in text),
            ("punycode", "xn--" in text.lower()),
            ("full_width", any("\uff01" <= c <= "\uff5e" for c in text)),
            ("cyrillic", any("\u0400" <= c <= "\u04ff" for c in text)),
            ("nul", "\x00" in text),
            ("dot_segment", ".." in text or "%2e" in text.lower()),
            ("non_special", text.split(":", 1)[0].lower() in ("foo", "smb", "git+ssh", "sc", "data")),
            ("file", text.lower().startswith("file:")),
        ]
        if present
    )
    print("\ncorpus features:", dict(seen))
    for name in (*urlquirks.QUIRK_NAMES, "ipv6", "punycode", "full_width", "cyrillic", "nul", "dot_segment",
                 "non_special", "file"):  # fmt: skip
        assert seen[name] >= MIN_FEATURE_COUNT, name


def test_unknown_unicode_version_refuses_non_ascii_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uts46, "_UNICODE_VERIFIED", False)
    assert parse("https://münchen.example/") is None
    assert parse("https://xn--mnchen-3ya.example/") is None
    assert parse("https://muenchen.example/") is not None


def test_fast_path_agrees_with_full_parser() -> None:
    taken = 0
    for text in [*corpus(), "https://Example.COM:8443/a/b?c=d#e", "http://a.b./", "ftp://h:21/x"]:
        fast = url._parse_fast(text)
        if fast is not None:
            taken += 1
            assert fast == url._parse_full(text), text
    assert taken > 100


# --- every code point we let into a host -------------------------------------------------------------

# Contexts that let each kind of code point through Node: inside a Latin label, alone (where NFC
# composition with a neighbour cannot hide it), and inside a Hebrew label (right-to-left classes).
CONTEXTS = [("a", "b.com"), ("", ".com"), ("\u05d0", "\u05d0.com")]
# Large blocks of uniform letters (CJK, Hangul syllables, Tangut, ...) are sampled, one in this many;
# everything else is checked code point by code point.
UNIFORM_BLOCK_STRIDE = 8
UNIFORM_BLOCKS_START = 0x3400


def _sweep_inputs() -> list[str]:
    inputs = []
    for cp in range(0x80, 0x110000):
        c = chr(cp)
        category = unicodedata.category(c)
        if category in ("Cn", "Co", "Cs"):
            continue
        if category == "Lo" and cp >= UNIFORM_BLOCKS_START and cp % UNIFORM_BLOCK_STRIDE:
            continue
        for before, after in CONTEXTS:
            host = before + c + after
            if parse_host(host) is not None:
                inputs.append(host)
    return inputs


@needs_node
def test_every_accepted_code_point_maps_like_node() -> None:
    hosts = _sweep_inputs()
    rows = run_node(["http://" + h + "/" for h in hosts])
    wrong = []
    for host, row in zip(hosts, rows, strict=True):
        ours = parse_host(host)
        if not row["ok"] or row["hostname"] != ours:
            wrong.append(f"{host!r}: ours {ours!r} node {row['hostname'] if row['ok'] else None!r}")
    print(f"\ncode point sweep: {len(hosts)} hosts accepted by us, {len(wrong)} differ from Node")
    assert not wrong, "\n".join(wrong[:40])


# --- untrusted input never makes the parser fail -----------------------------------------------------

SETTINGS = settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
url_like = st.builds(
    lambda a, b, c, d, e: a + b + c + d + e,
    st.sampled_from(["http://", "https:", "HTTP:\\\\", "file://", "foo://", "mailto:", "", "ws:/"]),
    st.text(max_size=40),
    st.sampled_from(["", "@", ":", "[", "]", "%", ".", "/", "\\", "?", "#", "xn--", "\ud800", "%ff"]),
    st.text(alphabet=st.characters(), max_size=40),
    st.sampled_from(["", "[::1.2.3.4]", ":65536", "\udfff\ud83d", "xn--a", "0x.0", "。"]),
)


@SETTINGS
@given(st.one_of(st.text(max_size=200), url_like))
def test_parse_never_raises(text: str) -> None:
    got = parse(text)
    assert got is None or isinstance(got, Url)
    assert isinstance(quirks(text), tuple)
    for special in (True, False):
        host = parse_host(text, special)
        assert host is None or isinstance(host, str)
    assert isinstance(unicode_host(text), str)
