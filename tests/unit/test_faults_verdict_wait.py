"""Every verdict wait has a bound (sync.VERDICT_WAIT_SECONDS), counted per verdict from when it was sent.

Before, a shim whose only outstanding request was a verdict waited on a stopped daemon without bound,
and forwarded the call when the daemon came back, long after the client had given up."""

from __future__ import annotations

from bouncer_shim.actions import Action
from bouncer_shim.sync import VERDICT_WAIT_SECONDS, LinkSync
from test_relay_sync import VERDICT, sent, synced_link


def _verdict(link: LinkSync, actions: list[Action]) -> int:
    assert link.request("verdict", None, VERDICT)
    (request,) = sent(actions)
    rid: int = request["id"]
    return rid


def test_verdict_not_answered_in_time_is_overdue() -> None:
    link, actions = synced_link()
    _verdict(link, actions)
    assert link.verdict_deadline() == 0.0  # not yet timed: the pump must take a turn at once
    assert not link.verdicts_overdue(100.0)
    assert link.verdict_deadline() == 100.0 + VERDICT_WAIT_SECONDS
    assert not link.verdicts_overdue(100.0 + VERDICT_WAIT_SECONDS - 0.5)
    assert link.verdicts_overdue(100.0 + VERDICT_WAIT_SECONDS)


def test_answered_verdict_is_never_overdue() -> None:
    link, actions = synced_link()
    rid = _verdict(link, actions)
    assert not link.verdicts_overdue(100.0)
    assert link.replied(rid) is not None
    assert not link.verdicts_overdue(100.0 + 10 * VERDICT_WAIT_SECONDS)
    assert link.verdict_deadline() is None


def test_a_daemon_answering_later_verdicts_does_not_extend_an_older_ones_bound() -> None:
    """A slow drip of answers is progress, but not for the verdict still waiting: each has its own."""
    link, actions = synced_link()
    first = _verdict(link, actions)
    link.verdicts_overdue(100.0)
    second = _verdict(link, actions)
    link.verdicts_overdue(105.0)
    assert link.replied(second) is not None
    assert link.verdicts_overdue(100.0 + VERDICT_WAIT_SECONDS)  # the first is overdue all the same
    assert link.replied(first) is not None


def test_a_lost_link_forgets_every_verdict_timer() -> None:
    link, actions = synced_link()
    _verdict(link, actions)
    link.verdicts_overdue(100.0)
    link.lost()
    assert link.verdict_deadline() is None and not link.verdicts_overdue(1000.0)
