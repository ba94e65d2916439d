"""Lazy frames on the shim's daemon link: the record of a call forwarded before asking may wait for
the next frame (normally the call's own output) so the two wake the daemon once, but never behind a
frame that must go now, never behind a line for the client, and never past LAZY_FRAME_SECONDS.

The link runs against a real listening Unix socket; time is passed in, so nothing here sleeps."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from bouncer_shim.link import LAZY_FRAME_SECONDS, DaemonLink
from link_helpers import Pair, linked


@pytest.fixture
def link_and_peer(tmp_path: Path) -> Iterator[Pair]:
    with linked(tmp_path, blocking_peer=False) as pair:
        yield pair


def received(peer: socket.socket) -> bytes:
    try:
        return peer.recv(65536)
    except BlockingIOError:
        return b""


def flush_if_due(link: DaemonLink, now: float) -> None:
    if link.due(now):
        assert link.flush(now) == []


def test_a_lazy_frame_waits_for_its_time_and_no_longer(link_and_peer: Pair) -> None:
    link, peer = link_and_peer
    link.send([b"record"], lazy=True, now=10.0)
    assert not link.wants_write  # nothing wakes the daemon yet
    assert link.deadline() == pytest.approx(10.0 + LAZY_FRAME_SECONDS)  # the pump wakes for it
    flush_if_due(link, 10.0 + LAZY_FRAME_SECONDS / 2)
    assert received(peer) == b""
    flush_if_due(link, 10.0 + LAZY_FRAME_SECONDS)
    assert received(peer) == b"record"
    assert link.pending == 0 and link.deadline() is None


@pytest.mark.parametrize("lazy_first", [True, False])
def test_a_frame_that_must_go_takes_lazy_ones_along_in_order(
    link_and_peer: tuple[DaemonLink, socket.socket], lazy_first: bool
) -> None:
    # The attack this keeps shut: an output's observation waiting behind a held record, so another
    # shim's verdict is decided before bouncerd can read what the agent has already seen.
    link, peer = link_and_peer
    frames = [(b"record-1", True), (b"output", False), (b"record-2", True)]
    if not lazy_first:
        frames = frames[1:]
    for data, lazy in frames:
        link.send([data], lazy=lazy, now=10.0)
        if not lazy:
            assert link.wants_write
    assert link.wants_write  # a lazy frame behind one that must go is due with it
    flush_if_due(link, 10.0)
    assert received(peer) == b"".join(data for data, _ in frames)


def test_a_client_line_behind_a_lazy_frame_hurries_it(link_and_peer: Pair) -> None:
    link, peer = link_and_peer
    link.send([b"record"], lazy=True, now=10.0)
    link.hurry()  # what the pump does when a line for the client is queued behind it
    flush_if_due(link, 10.0)
    assert received(peer) == b"record"


def test_a_lost_connection_forgets_the_hold(link_and_peer: Pair) -> None:
    link, _ = link_and_peer
    link.send([b"record"], lazy=True, now=10.0)
    link.drop("test", 10.0)
    assert link.pending == 0
    assert link.deadline() != pytest.approx(10.0 + LAZY_FRAME_SECONDS)
