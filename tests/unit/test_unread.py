"""The barrier a verdict waits behind (bouncerd/server/unread.py), over real socket pairs.

The attack each case stops: a verdict judged while an observation another shim has already written
(so its client already shows the output) is still unread in the daemon's socket, or read but
waiting for room in the index.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import anyio
import pytest

from bouncerd.server.unread import Peers, unread_bytes


class FakePeer:
    """A connection as the barrier sees it: `read` plays the daemon reading its socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received = 0
        self.stalled = False
        self.gone = False
        self.read_to = 0

    def reached(self, position: int) -> bool:
        return self.gone or (self.received >= position and not self.stalled)

    def read_through(self, position: int) -> None:
        self.read_to = max(self.read_to, position)

    def read(self, limit: int = 1 << 20) -> None:
        self.received += len(self.sock.recv(limit))


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    yield made
    for a, b in made:
        a.close()
        b.close()


def connect(peers: Peers, pairs: list[tuple[socket.socket, socket.socket]]) -> tuple[FakePeer, socket.socket]:
    daemon_end, shim_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pairs.append((daemon_end, shim_end))
    peer = FakePeer(daemon_end)
    peers.add(daemon_end.fileno(), peer)
    return peer, shim_end


@pytest.mark.parametrize("sizes", [[1], [5, 9000], [70_000, 3, 100_000]])
def test_bytes_written_on_another_connection_are_waited_for_up_to_where_they_end(
    pairs: list[tuple[socket.socket, socket.socket]], sizes: list[int]
) -> None:
    peers = Peers()
    asking, _ = connect(peers, pairs)
    other, other_shim = connect(peers, pairs)
    other.received = 17  # what it had read before
    for size in sizes:
        other_shim.sendall(b"x" * size)
    marks = peers.barrier(asking)
    assert marks == [(other, 17 + sum(sizes))]
    while other.received < 17 + sum(sizes):
        assert not other.reached(17 + sum(sizes))
        other.read(4096)
    assert other.reached(17 + sum(sizes)) and peers.barrier(asking) == []


def test_bytes_written_after_the_verdict_arrived_are_not_waited_for(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    peers = Peers()
    asking, _ = connect(peers, pairs)
    other, other_shim = connect(peers, pairs)
    other_shim.sendall(b"before")
    ((peer, position),) = peers.barrier(asking)
    other_shim.sendall(b"after, streaming on")
    other.read(len(b"before"))
    assert peer.reached(position)  # a shim that keeps sending cannot hold a verdict for ever


def test_the_connection_the_verdict_came_on_is_not_waited_for(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    peers = Peers()
    asking, asking_shim = connect(peers, pairs)
    asking_shim.sendall(b"its own later requests")
    assert peers.barrier(asking) == []


def test_a_stalled_connection_is_waited_for_even_with_nothing_unread(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    peers = Peers()
    asking, _ = connect(peers, pairs)
    other, _ = connect(peers, pairs)
    other.received, other.stalled = 50, True
    peers.stalled.add(other)
    assert peers.barrier(asking) == [(other, 50)]
    other.stalled = False
    peers.stalled.discard(other)
    assert peers.barrier(asking) == []


def test_a_connection_that_closed_is_not_waited_for(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    peers = Peers()
    asking, _ = connect(peers, pairs)
    other, other_shim = connect(peers, pairs)
    other_shim.sendall(b"x" * 100)
    other_shim.close()
    ((peer, position),) = peers.barrier(asking)
    peers.remove(other.sock.fileno(), other)
    other.gone = True
    assert peer.reached(position) and peers.barrier(asking) == []


def test_wait_asks_a_paused_connection_to_read_on_and_returns_once_it_has(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    peers = Peers()
    asking, _ = connect(peers, pairs)
    other, other_shim = connect(peers, pairs)
    other_shim.sendall(b"y" * 3000)
    marks = peers.barrier(asking)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(peers.wait, marks)
            await anyio.sleep(0)
            assert other.read_to == 3000  # told to read through, even if paused for its replies
            while other.received < 3000:
                other.read(1000)
                peers.progressed()
                await anyio.sleep(0)

    anyio.run(main)


def test_unread_bytes_counts_what_the_kernel_holds(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    a, b = socket.socketpair()
    pairs.append((a, b))
    assert unread_bytes(a.fileno()) == 0
    b.sendall(b"z" * 1234)
    assert unread_bytes(a.fileno()) == 1234
    a.recv(1000)
    assert unread_bytes(a.fileno()) == 234


def test_a_restarted_daemon_waits_longer_than_a_shim_takes_to_retry() -> None:
    # The attack: a send through a shim that reconnected first, judged before another shim (retrying
    # on its own schedule) has replayed what it released while the daemon was away.
    from bouncer_shim import link

    from bouncerd.server import unread

    assert unread.RESYNC_SECONDS > link.RECONNECT_MAX_DELAY_SECONDS
