"""The journaled store: `apply` is a table, and an event it has no row for is refused.

Each test is named after the mistake it stops.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest

from bouncerd.core import events
from bouncerd.core.store import APPLY, Store


def _event_names() -> set[str]:
    names: set[str] = set()
    for cls in typing.get_args(events.EngineEvent):
        names.update(typing.get_args(typing.get_type_hints(cls)["ev"]))
    return names


def test_every_journal_event_has_exactly_one_row() -> None:
    """An event type added to `events.EngineEvent` without a row would be refused on replay (the
    daemon would not start on its own journal); a row for a name no event has is dead code."""
    assert set(APPLY) == _event_names()


def test_an_unknown_event_is_refused_and_changes_nothing() -> None:
    """A journal written by a newer or a tampered bouncerd holds an event this one does not know:
    replaying it must fail loudly, not skip it and rebuild a state that was never there."""
    store = Store()
    before = store.snapshot()
    with pytest.raises(ValueError, match="unknown engine event 'pin_forgiven'"):
        store.apply(typing.cast(Any, {"ev": "pin_forgiven", "server": "mail"}))
    assert store.snapshot() == before == []


def test_a_known_event_changes_the_state_and_survives_the_snapshot() -> None:
    """The benign twin: a row applies its event, and the snapshot carries what it did."""
    store = Store()
    store.apply(events.AttemptEvent(ev="attempt", session="s", server="mail", tool="send_email", n=2))
    store.apply(events.VouchEvent(ev="vouch", session="s", keys=["bob@example.com"]))
    assert store.sessions["s"].attempts[("mail", "send_email")] == 2
    rebuilt = Store()
    for ev in store.snapshot():
        rebuilt.apply(ev)
    assert rebuilt.sessions["s"].attempts == store.sessions["s"].attempts
    assert rebuilt.sessions["s"].vouched == {"bob@example.com"}
