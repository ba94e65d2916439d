"""fdio.Watcher, the pump's wait on its descriptors: names and ready events as `selectors` reports
them, over real pipes and sockets (epoll on Linux)."""

from __future__ import annotations

import os
import selectors
import socket

import pytest
from bouncer_shim.fdio import Watcher


def test_ready_descriptors_come_back_by_name_with_their_events() -> None:
    r, w = os.pipe()
    watcher = Watcher()
    try:
        watcher.register(r, selectors.EVENT_READ, "in")
        watcher.register(w, selectors.EVENT_WRITE, "out")
        assert watcher.select(0) == [("out", selectors.EVENT_WRITE)]
        os.write(w, b"x")
        assert sorted(watcher.select(0)) == [("in", selectors.EVENT_READ), ("out", selectors.EVENT_WRITE)]
        watcher.unregister(w)
        assert watcher.select(None) == [("in", selectors.EVENT_READ)]
        with pytest.raises(KeyError):
            watcher.register(r, selectors.EVENT_READ, "again")
    finally:
        watcher.close()
        os.close(r)
        os.close(w)


def test_a_hang_up_is_ready_for_what_was_asked_only() -> None:
    mine, theirs = socket.socketpair()
    watcher = Watcher()
    try:
        watcher.register(mine.fileno(), selectors.EVENT_READ, "daemon")
        assert watcher.select(0) == []
        theirs.close()
        assert watcher.select(0) == [("daemon", selectors.EVENT_READ)]
    finally:
        watcher.close()
        mine.close()


def test_a_descriptor_closed_before_it_is_unregistered_is_forgotten_quietly() -> None:
    r, w = os.pipe()
    watcher = Watcher()
    try:
        watcher.register(r, selectors.EVENT_READ, "in")
        os.close(r)
        watcher.unregister(r)  # the link closes a lost socket before the pump forgets it
        r2, w2 = os.pipe()  # the number may come back at once
        watcher.register(r2, selectors.EVENT_READ, "in")
        os.write(w2, b"x")
        assert watcher.select(0) == [("in", selectors.EVENT_READ)]
        os.close(r2)
        os.close(w2)
    finally:
        watcher.close()
        os.close(w)
