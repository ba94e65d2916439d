"""The shim's link to bouncerd (`bouncer_shim.link.DaemonLink`) connected to a real listening Unix
socket that stands in for the daemon: the link's tests read and write the other end themselves."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bouncer_shim.link import CONNECTED, DaemonLink

Pair = tuple[DaemonLink, socket.socket]


@contextmanager
def linked(tmp_path: Path, *, blocking_peer: bool = True) -> Iterator[Pair]:
    """A connected link and the daemon's end of its socket, both closed afterwards."""
    home = tmp_path / "h"
    (home / "run").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(home / "run" / "bouncerd.sock"))
    listener.listen()
    link = DaemonLink({"BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1"}, now=0.0)
    assert link.poll(0.0) == [CONNECTED]
    peer, _ = listener.accept()
    listener.close()
    peer.setblocking(blocking_peer)
    try:
        yield link, peer
    finally:
        link.close()
        peer.close()
