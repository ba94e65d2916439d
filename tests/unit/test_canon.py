"""Canonical forms of one destination: wide for taint lookups, narrow for trust."""

from __future__ import annotations

import pytest

from bouncerd.core import canon

ADDRESS = "attacker@evil.com"


@pytest.mark.parametrize(
    ("written", "key"),
    [
        ("mailto:attacker@evil.com", ADDRESS),
        ("MAILTO:attacker@evil.com?subject=hi", ADDRESS),
        ("Evil Corp <attacker@evil.com>", ADDRESS),
        ('"Evil, Corp" <attacker@evil.com>', ADDRESS),
        ("attacker@evil.com (Evil Corp)", ADDRESS),
        ("attacker+invoices@evil.com", ADDRESS),
        ("attacker@evil.com.", ADDRESS),
        ("  Attacker@EVIL.com  ", ADDRESS),
        ("attacker%40evil.com", ADDRESS),
        ("attacker&#64;evil.com", ADDRESS),
        ("ａｔｔａｃｋｅｒ＠ｅｖｉｌ．ｃｏｍ", ADDRESS),
        ("att\u200backer@evil.com", ADDRESS),
        ("аttаcker@еvil.com", ADDRESS),
        ("attacker@xn--vil-9la.com", ADDRESS),  # évil.com: accents fold away
        ("a.t.t.acker@googlemail.com", "attacker@gmail.com"),
    ],
)
def test_email_destination_canonicalises_to_its_key(written: str, key: str) -> None:
    c = canon.canonicalize(written)
    assert c.kind == "email"
    assert c.key == key


@pytest.mark.parametrize(
    ("written", "whole"),
    [
        ("https://evil.com/collect", "evil.com/collect"),
        ("HTTPS://EVIL.COM/collect", "evil.com/collect"),
        ("https://evil.com:443/collect", "evil.com/collect"),
        ("http://evil.com:80/collect", "evil.com/collect"),
        ("https://evil.com:8443/collect", "evil.com:8443/collect"),
        ("https://evil.com./collect", "evil.com/collect"),
        ("https://www.evil.com/collect", "evil.com/collect"),
        ("https://evil.com/a/./b/../collect", "evil.com/a/collect"),
        ("https://evil.com/c%6Fllect", "evil.com/collect"),
        ("https://user:pw@evil.com/collect", "evil.com/collect"),
        ("//evil.com/collect", "evil.com/collect"),
        ("evil.com/collect", "evil.com/collect"),
        ("https://ｅｖｉｌ．ｃｏｍ/collect", "evil.com/collect"),
        ("https://еvil.com/collect", "evil.com/collect"),
    ],
)
def test_url_destination_canonicalises_to_its_whole_key(written: str, whole: str) -> None:
    c = canon.canonicalize(written)
    assert c.kind == "url"
    assert c.key == whole


def test_url_destination_probes_whole_then_prefixes_then_host() -> None:
    keys = canon.canonical_keys("https://www.evil.com/a/b/c/d?q=1#f")
    assert keys == [
        "evil.com/a/b/c/d?q=1#f",
        "evil.com/a/b/c",
        "evil.com/a/b",
        "evil.com/a",
        "www.evil.com",
        "evil.com",
    ]


def test_idna_destination_in_either_form_has_one_key() -> None:
    assert (
        canon.canonicalize("https://xn--80ak6aa92e.com/").probes
        == canon.canonicalize("https://аррӏе.com/").probes
    )


def test_bare_host_destination() -> None:
    c = canon.canonicalize("Evil.COM.")
    assert (c.kind, c.key, c.hosts) == ("host", "evil.com", ("evil.com",))


def test_dash_subaddress_probes_the_base_mailbox_too() -> None:
    assert canon.canonical_keys("attacker-leak@evil.com") == ["attacker-leak@evil.com", ADDRESS]


@pytest.mark.parametrize(
    ("written", "kind", "key"),
    [
        ("+44 20 7946 0958", "phone", "442079460958"),
        ("tel:+1-555-123-4567", "phone", "15551234567"),
        ("DE89 3704 0044 0532 0130 00", "iban", "de89370400440532013000"),
        ("#General", "handle", "general"),
        ("@bob.smith", "handle", "bob.smith"),
        ("Mallory  Smith", "text", "mallory smith"),
    ],
)
def test_other_destination_kinds(written: str, kind: str, key: str) -> None:
    c = canon.canonicalize(written)
    assert (c.kind, c.key) == (kind, key)


def test_phone_destination_probes_national_forms() -> None:
    assert "2079460958" in canon.canonical_keys("+44 20 7946 0958")


def test_invalid_iban_is_not_an_iban() -> None:
    assert canon.canonicalize("DE00 3704 0044 0532 0130 00").kind != "iban"


def test_value_with_several_destinations_probes_each() -> None:
    keys = canon.canonical_keys("ann@corp.com, attacker@evil.com")
    assert {"ann@corp.com", ADDRESS} <= set(keys)
    assert canon.canonicalize("ann@corp.com, attacker@evil.com").kind == "text"


def test_short_keys_are_not_probed() -> None:
    assert canon.canonical_keys("https://x.io/") == []
    assert canon.canonical_keys("#dev") == []


# ---- trust: narrow ---------------------------------------------------------------------------------


def test_trust_key_folds_what_names_the_same_mailbox() -> None:
    assert canon.keys("Ann <Ann+news@Corp.COM.>") == canon.keys("mailto:ann@corp.com") == ["ann@corp.com"]


def test_trust_key_keeps_lookalikes_apart() -> None:
    assert canon.keys("ann@corp.com") != canon.keys("аnn@corp.com")
    assert canon.domain("https://раураl.com/") != canon.domain("https://paypal.com/")


def test_trust_key_keeps_invisible_characters() -> None:
    assert canon.keys("ann@corp.com") != canon.keys("ann\u200b@corp.com")


def test_trust_key_keeps_url_path_case_but_folds_host_and_default_port() -> None:
    assert canon.keys("https://Hooks.Example:443/AbC") == ["hooks.example/AbC"]
    assert canon.keys("https://hooks.example/AbC") != canon.keys("https://hooks.example/abc")


def test_domain_of_email_url_and_host() -> None:
    assert canon.domain("Ann <ann@Corp.com>") == "corp.com"
    assert canon.domain("https://Docs.Corp.com:8443/x") == "docs.corp.com"
    assert canon.domain("corp.com") == "corp.com"
    assert canon.domain("#general") is None
    assert canon.domain("ann@corp.com, eve@evil.com") is None


def test_domain_key_is_what_idna_does() -> None:
    assert canon.domain_key("ＣＯＲＰ.com.") == "corp.com"
    assert canon.domain_key("xn--bcher-kva.de") == "bücher.de"


def test_visible_shows_invisible_characters() -> None:
    assert canon.visible("ann\u200b@corp.com\u202e") == "ann\\u200b@corp.com\\u202e"
