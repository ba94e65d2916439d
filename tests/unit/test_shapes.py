"""The destination shapes both sides read by (bouncerd/core/shapes.py), and each asymmetry it names.

Output (tokens, taint), arguments (canon, sinkgate) and the shell reader (shell_destinations) must
key one spelling the same way, or a planted address is missed; where they differ on purpose, the
difference is pinned here with the attack or the false match it is there for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bouncerd.core import canon, shapes, shell_destinations, tokens


@pytest.mark.parametrize(
    "written",
    [
        "Eve@Evil.example",
        "eve+leak@evil.example",
        "mailto:eve@evil.example",
        "Eve <eve@evil.example>",
        "eve@evil.example.",
        "e.v.e+x@googlemail.com",
    ],
)
def test_a_planted_address_is_keyed_alike_in_output_and_as_an_argument(written: str) -> None:
    """The attack: an address planted in output is sent to, spelt the way it was planted."""
    planted = tokens.text_keys(f"reply to {written} today")
    probes = canon.canonical_keys(written)
    assert probes[0] in planted


def test_the_wide_and_narrow_keys_fold_a_mailbox_the_same_way() -> None:
    """`mailbox_key` is the one place the `+tag` and Gmail's dots are folded: an allowlisted
    `annlee@gmail.com` is the same mailbox as the tagged, dotted spelling on both sides."""
    written = "Ann.Lee+news@GoogleMail.com"
    assert canon.keys(written) == ["annlee@gmail.com"]
    assert canon.canonical_keys(written)[0] == "annlee@gmail.com"
    assert shapes.mailbox_key("ann.lee+news", "googlemail.com") == "annlee@gmail.com"
    assert shapes.mailbox_key("ann.lee+news", "corp.example") == "ann.lee@corp.example"


def test_narrow_keys_keep_what_wide_keys_strip_asymmetry_3() -> None:
    """Trust must not merge what may be another mailbox: quotes inside the local part stay in the
    narrow key (an allowlisted `ann@corp.example` does not vouch for `ann'@corp.example`), while the
    taint probe strips them (a planted `ann@corp.example` is still found)."""
    assert canon.keys("'ann'@corp.example") == ["ann'@corp.example"]
    assert canon.canonical_keys("'ann'@corp.example")[0] == "ann@corp.example"


def test_an_address_glued_to_another_is_not_a_key_in_output_but_is_sent_to_by_a_shell_asymmetry_1() -> None:
    """Output keys whole tokens only, so `ana@x.example` inside `dana@x.example` taints nothing
    nobody planted; the shell reader takes every address-shaped run, so a command that would mail the
    glued address is judged for it (the gate then asks: it was never seen as a token)."""
    assert "ana@x.example" not in tokens.text_keys("write to dana@x.example")
    glued = "bob@corp.example'eve@evil.example"
    assert tokens.text_keys(f"contact {glued} now") == {"bob@corp.example"}
    sent = shell_destinations.command_destinations(f"mail {glued}")
    assert ("send", "'eve@evil.example") in sent
    assert canon.canonical_keys("'eve@evil.example")[0] == "eve@evil.example"


def test_trailing_dots_key_alike_on_both_sides_asymmetry_2() -> None:
    """A mail system ignores a trailing dot: `eve@evil.example.` as an argument must probe what
    `eve@evil.example.` at the end of a sentence in output recorded."""
    assert shapes.EMAIL_DESTINATION.fullmatch("eve@evil.example..") is not None
    assert shapes.EMAIL.fullmatch("eve@evil.example.") is None
    assert canon.canonical_keys("eve@evil.example.")[0] == "eve@evil.example"
    assert "eve@evil.example" in tokens.text_keys("write to eve@evil.example.")


def test_the_domain_of_a_planted_address_is_a_host_key_only_for_addresses_asymmetry_5() -> None:
    assert shapes.domain_keys(["eve@evil.example"]) == ("@evil.example",)
    # an exact URL key with an "@" in its path is not an address
    assert shapes.domain_keys([shapes.EXACT_PREFIX + "https://x.example/a@b.example"]) == ()
    assert shapes.domain_keys(["owner/repo", "evil.example"]) == ()


@pytest.mark.parametrize(
    "url_arg",
    [
        "https://evil.example/a",
        "//evil.example/x",
        "https://EVIL.example./a?b=c#d",
        "http://[2001:db8::1]:8080/",
    ],
)
def test_every_url_the_output_side_reads_as_a_whole_token_the_argument_side_reads_too_asymmetry_6(
    url_arg: str,
) -> None:
    """`URL_DESTINATION` is the wider of the two URL shapes: a URL found in output as one token is
    one URL as an argument too, so it is probed by its whole key and not as free text."""
    folded = url_arg.lower()
    if shapes.URL.fullmatch(folded) is not None:
        assert shapes.URL_DESTINATION.fullmatch(folded) is not None
    assert canon.canonicalize(url_arg).kind == "url"


def test_the_plain_fast_path_admits_only_what_the_address_shape_reads() -> None:
    """canon's `_PLAIN` skips the other readings of a plain address: every address it admits must be
    one `EMAIL_DESTINATION` reads, or the fast path would key a spelling the shapes do not."""
    for written in ["ann@corp.example", "a.b-c_d+tag@mail.corp-x.example", "x9@y.co"]:
        assert canon._PLAIN.fullmatch(written) is not None
        assert shapes.EMAIL_DESTINATION.fullmatch(written) is not None


def test_the_address_and_domain_shapes_are_written_only_in_shapes() -> None:
    """One grammar: a module that wrote its own copy of the address shape would drift from the other
    side (the e-mail shape used to be written four times, with differences nobody marked)."""
    root = Path(__file__).resolve().parents[2]
    local_part, domain = "[\\w.+'-]", "[\\w-]+(?:\\.[\\w-]+)+"
    copies = [
        str(path.relative_to(root))
        for folder in ("bouncerd", "shim", "cli")
        for path in (root / folder).rglob("*.py")
        if path.name != "shapes.py" and (local_part in (text := path.read_text()) or domain in text)
    ]
    assert copies == []
    shapes_source = (root / "bouncerd" / "core" / "shapes.py").read_text()
    assert local_part in shapes_source and domain in shapes_source
