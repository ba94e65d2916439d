"""What other connections have sent that the daemon has not read yet: the barrier a verdict waits behind.

Theory of operation
-------------------
A shim releases an output to its client as soon as the output's observation is in the kernel on its
way to bouncerd (shim/bouncer_shim/outbox.py and pump.py): it does not wait for the ack, so a call
costs one round trip, not two. So when a verdict that reads taint arrives on one connection, an
observation that came before it in real time (the output the agent read before it made this call,
relayed by another shim) may still be unread in another connection's socket, or read but waiting for
room in the index (the connection is *stalled*).

`Peers.barrier` names, for every other connection that has unread bytes or is stalled, the position
in its byte stream the daemon must have read and dispatched: what it has received so far plus what
the kernel holds for it (FIONREAD). The verdict waits until each connection has got there
(`Peer.reached`), then until everything accepted by then is indexed (observations.py). Everything a
shim released before this verdict's request was sent lies before those positions: the shim wrote the
observation before releasing, the agent read the output before calling, the call's verdict request
was sent after that, and the daemon read the request before taking the positions. What is written
later lies after them, so a connection that keeps sending cannot hold a verdict up for ever.

Progress is guaranteed: a connection that stopped reading because its peer does not read its replies
is read up to the position anyway (`Peer.read_through`); a stalled one goes on once the indexer has
made room, which it does on its own; a connection that closes counts as reached.

After a restart the daemon has read nothing yet, and shims that were connected reconnect within
their retry interval (at most RECONNECT_MAX_DELAY_SECONDS) to replay what it had not acknowledged,
including outputs released while it was away. A verdict through a shim that came back first must
not be judged before the others have replayed. So a daemon that starts on a journal with
observations in it *settles* for RESYNC_SECONDS (`settle_for`): a verdict that reads taint waits
until then, and then behind the barrier as above. A fresh home (no observations yet) does not wait.

Cost: one poll(2) with a zero timeout over every connection's socket and one ioctl per readable
one, only for verdicts that read taint (a call on a tool that sends nothing does not wait at all).
"""

from __future__ import annotations

import array
import fcntl
import select
import termios
import time
from collections.abc import Iterable
from typing import Final, Protocol

import anyio

# How long a restarted daemon gives shims to reconnect and replay before it judges a send: their
# longest retry interval (shim/bouncer_shim/link.py, 2 s) and a margin for a loaded machine. Every
# send after a restart may wait this long, so no longer (bench/soak.py counts it in its windows).
RESYNC_SECONDS: Final = 2.5


class Peer(Protocol):
    """What the barrier needs of a connection (bouncerd/server/connection.py)."""

    @property
    def received(self) -> int:
        """Bytes read from the socket so far."""
        ...

    def reached(self, position: int) -> bool:
        """Whether every frame wholly before `position` has been dispatched (or the peer is gone)."""
        ...

    def read_through(self, position: int) -> None:
        """Read up to `position` even if reading is paused for the peer's unread replies."""
        ...


def unread_bytes(fd: int) -> int:
    """Bytes the kernel holds for `fd` that nobody has read yet (0 if it cannot tell)."""
    buf = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    except OSError:
        return 0
    return max(0, buf[0])


class Peers:
    def __init__(self) -> None:
        self._by_fd: dict[int, Peer] = {}
        self._poll = select.poll()
        # Connections whose frame already read waits for room in the index (frames behind it wait
        # too), kept up to date by the connections themselves.
        self.stalled: set[Peer] = set()
        self._progress: anyio.Event | None = None
        self._settle_until = 0.0  # time.monotonic()

    def settle_for(self, seconds: float) -> None:
        self._settle_until = time.monotonic() + seconds

    @property
    def settling(self) -> bool:
        return self._settle_until > 0.0 and time.monotonic() < self._settle_until

    async def settle(self) -> None:
        """Until shims that were connected before a restart have had time to replay."""
        left = self._settle_until - time.monotonic()
        if left > 0:
            await anyio.sleep(left)

    def add(self, fd: int, peer: Peer) -> None:
        self._by_fd[fd] = peer
        self._poll.register(fd, select.POLLIN)

    def remove(self, fd: int, peer: Peer) -> None:
        """Before the socket is closed (its number may be reused at once)."""
        if self._by_fd.get(fd) is peer:
            del self._by_fd[fd]
            self._poll.unregister(fd)
        self.stalled.discard(peer)
        self.progressed()

    def barrier(self, exclude: Peer) -> list[tuple[Peer, int]]:
        """The positions other connections must reach before a verdict that arrived on `exclude`."""
        marks: dict[Peer, int] = {}
        for fd, _events in self._poll.poll(0):
            peer = self._by_fd.get(fd)
            if peer is not None and peer is not exclude:
                marks[peer] = peer.received + unread_bytes(fd)
        for peer in self.stalled:
            if peer is not exclude and peer not in marks:
                marks[peer] = peer.received
        return [(peer, position) for peer, position in marks.items() if not peer.reached(position)]

    async def wait(self, marks: Iterable[tuple[Peer, int]]) -> None:
        """Until every connection has reached its mark."""
        left = list(marks)
        for peer, position in left:
            peer.read_through(position)
        while left := [(peer, position) for peer, position in left if not peer.reached(position)]:
            if self._progress is None:
                self._progress = anyio.Event()
            await self._progress.wait()

    def progressed(self) -> None:
        """A connection dispatched frames (or went away): waiting barriers look again."""
        if self._progress is not None:
            self._progress.set()
            self._progress = None
