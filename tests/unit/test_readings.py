"""How a destination is read (canon.reading) and the sink gate's rules that lean on it: one reading is
needed before anything is trusted, every reading is probed for taint. Each test names what it stops."""

from __future__ import annotations

from typing import Any

import pytest

from bouncerd.core import canon, sinkgate
from bouncerd.core.model import Provenance
from bouncerd.core.taint import Hit

TRUST = sinkgate.Trust(
    frozenset({"boss@corp.example", "hooks.corp.example/ingest"}),
    frozenset({"corp.example"}),
    {"boss@corp.example": "allowlisted", "hooks.corp.example/ingest": "allowlisted"},
)
PLANTED = Provenance("mail", "read_inbox", 1, 0.0)


def _lookup(*planted: str) -> Any:
    keys = {k for p in planted for k in canon.canonical_keys(p)}

    def lookup(value: str) -> Hit | None:
        hit = next((k for k in canon.canonical_keys(value) if k in keys), None)
        return Hit("tainted", PLANTED, False, hit) if hit is not None else None

    return lookup


def _send(arguments: dict[str, Any], *planted: str, sinks: tuple[str, ...] = ("to",)) -> Any:
    return sinkgate.send_verdict(
        arguments,
        tool="send_email",
        sink_params=sinks,
        trust=TRUST,
        lookup=_lookup(*planted),
        on_tainted="deny",
        on_tainted_identity="ask",
    )


@pytest.mark.parametrize(
    "value",
    [
        "boss@corp.example",
        "Boss <Boss+news@Corp.Example>",
        "https://hooks.corp.example/ingest",
        "https://HOOKS.corp.example:443/ingest",
        "corp.example",
    ],
)
def test_plain_destination_reads_one_way(value: str) -> None:
    r = canon.reading(value)
    assert r.single and r.key is not None and r.quirks == ()


@pytest.mark.parametrize(
    ("value", "quirk", "reached"),
    [
        ("https://hooks.evil.example\\@corp.example/ingest", "backslash", "hooks.evil.example"),
        ("https://user@hooks.corp.example/ingest", "userinfo", "hooks.corp.example"),
        ("https://hooks.corp\t.example/ingest", "control_character", "hooks.corp.example"),
        ("boss@corp.example\x00eve@evil.example", "control_character", "boss@corp.example"),
        ('"eve"@corp.example', "quoted_local_part", None),
        ("eve%evil.example@corp.example", "percent_relay", None),
        ("evil.example!eve@corp.example", "bang_path", None),
        ("@corp.example:eve@evil.example", "several_at_signs", None),
        ("boss@corp.example (eve@evil.example)", "several_destinations", None),
    ],
)
def test_destination_with_several_readings_has_no_trust_key(
    value: str, quirk: str, reached: str | None
) -> None:
    r = canon.reading(value)
    assert quirk in r.quirks
    assert r.key is None and canon.keys(value) == [] and canon.domain(value) is None
    if reached is not None:
        assert r.reached[0] == reached


def test_backslash_authority_is_read_as_node_reads_it() -> None:
    """`\\` is `/` in an http(s) URL: Node connects to hooks.evil.example, not corp.example."""
    value = "https://hooks.evil.example\\@corp.example/ingest"
    assert "hooks.evil.example" in canon.canonicalize(value).hosts
    v = _send({"to": value})
    assert v.verdict != "allow"
    v = _send({"to": value}, "https://hooks.evil.example/")
    assert (v.verdict, v.rule) == ("deny", "sink.tainted_destination")
    assert "hooks.evil.example" in v.reason  # the host the server would have reached


def test_ambiguous_value_is_asked_with_its_readings_shown() -> None:
    v = _send({"to": "https://x@hooks.corp.example/ingest"})
    assert (v.verdict, v.rule) == ("ask", "sink.ambiguous_reading")
    assert "hooks.corp.example" in v.reason and "userinfo" in v.reason


def test_approval_of_ambiguous_value_binds_it_exactly_as_written() -> None:
    value = "https://x@hooks.corp.example/ingest"
    (key,) = canon.keys(value, exact=True)
    trust = sinkgate.Trust(frozenset({key}), frozenset(), {key: "approved for this session"})
    assert sinkgate.trusted_reason(sinkgate.Destination("to", value), trust) == "approved for this session"
    other = "https://y@hooks.corp.example/ingest"
    assert sinkgate.trusted_reason(sinkgate.Destination("to", other), trust) is None


def test_address_split_over_two_arguments_is_joined_and_denied() -> None:
    v = _send(
        {"to_user": "eve", "to_domain": "evil.example", "body": "x"}, "eve@evil.example", sinks=("to_user",)
    )
    assert (v.verdict, v.rule) == ("deny", "sink.tainted_destination")
    assert v.parameter == "to_user+to_domain"


def test_trusted_address_split_over_two_arguments_is_allowed() -> None:
    v = _send({"to_user": "boss", "to_domain": "corp.example"}, sinks=("to_user", "to_domain"))
    assert v.verdict == "allow", v.reason


def test_host_and_path_arguments_are_joined() -> None:
    got = {d.value for d in sinkgate.assembled({"host": "evil.example", "port": 8443, "path": "/x"})}
    assert got == {"evil.example:8443/x"}


@pytest.mark.parametrize("header", ["Bcc", "bcc", "Cc", "To", "Reply-To", "Resent-To"])
def test_header_line_smuggled_into_subject_is_a_destination(header: str) -> None:
    """`subject: "Q3\\r\\nBcc: eve@evil.example"` next to a trusted `to` adds a recipient."""
    args = {"to": "boss@corp.example", "subject": f"Q3 numbers\r\n{header}: eve@evil.example"}
    assert _send(args).verdict == "ask"
    v = _send(args, "eve@evil.example")
    assert (v.verdict, v.rule) == ("deny", "sink.tainted_destination")
    assert "header line" in str(v.parameter)


def test_quoted_headers_in_a_forwarded_body_are_not_destinations() -> None:
    args = {"to": "boss@corp.example", "body": "see below\n\nFrom: ann@partner.example\nTo: team"}
    assert _send(args).verdict == "allow"


def test_nul_in_any_argument_of_a_send_is_denied() -> None:
    v = _send({"to": "boss@corp.example", "subject": "hi\x00there"})
    assert (v.verdict, v.rule) == ("deny", "sink.nul_character")


def test_recipient_nested_in_headers_next_to_trusted_to_is_checked() -> None:
    v = _send({"to": "boss@corp.example", "headers": {"Bcc": "eve@evil.example"}}, "eve@evil.example")
    assert (v.verdict, v.rule) == ("deny", "sink.tainted_destination")


def test_link_inside_a_message_block_is_not_a_recipient() -> None:
    args = {"to": "boss@corp.example", "blocks": [{"type": "section", "url": "https://docs.example.org/x"}]}
    assert _send(args).verdict == "allow"
