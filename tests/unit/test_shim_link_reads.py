"""Reading bouncerd's replies on the shim's link: every reply the daemon sent, and its hang-up behind
them, in one call (a dead daemon hidden behind its last replies would let a call be forwarded on a
set nobody holds), whether the pump's selector said the socket was readable or the pump reads it
unwatched (link.py, `on_readable`). The link runs against a real listening Unix socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bouncer_shim.link import Lost
from link_helpers import Pair, linked

from bouncerd import wire


@pytest.fixture
def link_and_peer(tmp_path: Path) -> Iterator[Pair]:
    with linked(tmp_path) as pair:
        yield pair


@pytest.mark.parametrize("ready", [True, False])
def test_nothing_to_read_is_no_event_and_the_link_stays_up(link_and_peer: Pair, ready: bool) -> None:
    link, _ = link_and_peer
    assert link.on_readable(1.0, ready=ready) == []
    assert link.connected


@pytest.mark.parametrize("ready", [True, False])
def test_replies_and_the_hang_up_behind_them_are_read_at_once(link_and_peer: Pair, ready: bool) -> None:
    link, peer = link_and_peer
    peer.sendall(wire.encode(wire.reply(1)) + wire.encode(wire.reply(2, seq=7)))
    peer.close()
    events = link.on_readable(1.0, ready=ready)
    assert events[:2] == [wire.reply(1), wire.reply(2, seq=7)]
    assert len(events) == 3 and isinstance(events[2], Lost)
    assert not link.connected


@pytest.mark.parametrize("ready", [True, False])
def test_a_frame_split_across_reads_is_handed_out_whole(link_and_peer: Pair, ready: bool) -> None:
    link, peer = link_and_peer
    frame = wire.encode(wire.reply(3, verdict="allow"))
    peer.sendall(frame[:5])
    assert link.on_readable(1.0, ready=ready) == []
    peer.sendall(frame[5:])
    assert link.on_readable(1.0, ready=ready) == [wire.reply(3, verdict="allow")]
    assert link.connected
