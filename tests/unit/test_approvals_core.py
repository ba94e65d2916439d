"""Approvals core: codes, grants, and the requestState that binds a 2026-07-28 retry to one call."""

from __future__ import annotations

import pytest

from bouncerd.core import approvals as ap

SECRET = b"k" * 32
B = ap.Binding("s1", "gmail", "send_email", "to", "bob@partner.example", ap.arguments_digest({"to": "bob"}))


def test_code_format_is_crockford_and_30_bits() -> None:
    codes = {ap.make_code(i.to_bytes(4, "big")) for i in range(0, 2**30, 2**30 // 997)}
    assert len(codes) > 990
    for code in codes:
        assert len(code) == 7 and code[3] == "-"
        assert all(c in ap.CODE_ALPHABET for c in code.replace("-", ""))


def test_typed_code_is_forgiving_about_case_dashes_and_lookalikes() -> None:
    assert ap.normalise_code(" k7q f2m ") == "K7Q-F2M"
    assert ap.normalise_code("K7QF2M") == "K7Q-F2M"
    assert ap.normalise_code("o1l-000") == "011-000"
    assert ap.normalise_code("K7Q-F2") is None
    assert ap.normalise_code("K7Q-F2U") is None  # U is not in Crockford's alphabet


def test_tampered_request_state_is_refused() -> None:
    state = ap.mint_state(SECRET, B, "n1", now=100.0)
    enc, mac = state[len(ap.STATE_PREFIX) :].split(".")
    flipped = ap.STATE_PREFIX + enc[:-2] + ("A" if enc[-2] != "A" else "B") + enc[-1] + "." + mac
    assert not ap.check_state(SECRET, flipped, B, {}, now=101.0).ok
    assert not ap.check_state(b"other-daemon-secret", state, B, {}, now=101.0).ok


def test_request_state_for_another_call_is_refused() -> None:
    """An approval for one message must not carry over to a different message to the same person."""
    state = ap.mint_state(SECRET, B, "n1", now=100.0)
    other = ap.Binding(
        B.session, B.server, B.tool, B.parameter, B.destination, ap.arguments_digest({"to": "eve"})
    )
    check = ap.check_state(SECRET, state, other, {}, now=101.0)
    assert not check.ok and "different call" in check.reason


def test_replayed_request_state_is_refused() -> None:
    state = ap.mint_state(SECRET, B, "n1", now=100.0)
    first = ap.check_state(SECRET, state, B, {}, now=101.0)
    assert first.ok and first.nonce == "n1"
    assert "replay" in ap.check_state(SECRET, state, B, {"n1": 700.0}, now=102.0).reason


def test_expired_request_state_is_refused() -> None:
    state = ap.mint_state(SECRET, B, "n1", now=100.0)
    assert not ap.check_state(SECRET, state, B, {}, now=100.0 + ap.STATE_TTL_SECONDS + 1).ok


@pytest.mark.parametrize("junk", ["", "bouncer1.", "bouncer1.a.b.c", "bouncer1.!!!.???", "v1.server-state"])
def test_garbage_request_state_never_raises(junk: str) -> None:
    assert not ap.check_state(SECRET, junk, B, {}, now=1.0).ok


def test_once_grant_is_used_up_and_state_replays_from_events() -> None:
    a = ap.Approvals()
    events = [
        ap.once_grant_event(B, asked=10.0, rule="sink.unproven", expires=10.0 + ap.ONCE_GRANT_TTL_SECONDS),
        {"ev": "grant", "scope": "session", "binding": B.as_dict()},
    ]
    for ev in events:
        a.apply(ev)
    assert a.once_grant("s1", "gmail", "send_email", B.digest, "sink.unproven", None, now=20.0)
    b = ap.Approvals()
    for ev in a.snapshot(now=20.0):
        b.apply(ev)
    assert b.once_grant("s1", "gmail", "send_email", B.digest, "sink.unproven", None, now=20.0)
    a.apply(
        {"ev": "grant_used", "session": "s1", "server": "gmail", "tool": "send_email", "digest": B.digest}
    )
    assert not a.once_grant("s1", "gmail", "send_email", B.digest, "sink.unproven", None, now=20.0)
    assert a.trusted_for("s1", "gmail", "send_email") == {"bob@partner.example"}
    c = ap.Approvals()
    for ev in a.snapshot(now=20.0):
        c.apply(ev)
    assert c.trusted_for("s1", "gmail", "send_email") == {"bob@partner.example"}
    assert not c.once_grant("s1", "gmail", "send_email", B.digest, "sink.unproven", None, now=20.0)


def test_once_grant_lapses_after_its_ttl_and_is_forgotten() -> None:
    """Fault: once grants never expired; an approval left unused matched the same call hours later."""
    a = ap.Approvals()
    a.apply(
        ap.once_grant_event(B, asked=10.0, rule="sink.unproven", expires=10.0 + ap.ONCE_GRANT_TTL_SECONDS)
    )
    late = 10.0 + ap.ONCE_GRANT_TTL_SECONDS
    assert a.once_grant("s1", "gmail", "send_email", B.digest, "sink.unproven", None, now=late - 1)
    assert a.once_grant("s1", "gmail", "send_email", B.digest, "sink.unproven", None, now=late) is None
    assert [ev for ev in a.snapshot(now=late) if ev["ev"] == "grant"] == []
    a.prune(now=late)
    assert a.once == {}


def test_once_grant_journalled_without_an_expiry_has_lapsed() -> None:
    """A grant from a journal written before grants expired cannot be told apart from a stale one."""
    a = ap.Approvals()
    a.apply({"ev": "grant", "scope": "once", "binding": B.as_dict()})
    assert a.once_grant("s1", "gmail", "send_email", B.digest, "", None, now=0.0) is None


def test_once_grant_does_not_cover_a_destination_tainted_after_the_question() -> None:
    """Fault: the person said yes to a send that was clean when asked; taint arrived meanwhile."""
    grant = ap.OnceGrant(asked=100.0, rule="sink.tainted_identity", expires=700.0)
    assert grant.covers("sink.tainted_identity", provenance_ts=50.0, now=200.0)  # what they were asked
    assert not grant.covers("sink.tainted_identity", provenance_ts=150.0, now=200.0)  # seen since
    assert not grant.covers("sink.unproven", provenance_ts=None, now=200.0)  # another question


def test_wrong_codes_are_rate_limited() -> None:
    a = ap.Approvals()
    for i in range(ap.MAX_WRONG_CODES):
        assert not a.rate_limited(now=10.0 + i)
        a.apply({"ev": "wrong_code", "ts": 10.0 + i})
    assert a.rate_limited(now=15.0)
    assert not a.rate_limited(now=10.0 + ap.WRONG_CODE_WINDOW_SECONDS + 5)
