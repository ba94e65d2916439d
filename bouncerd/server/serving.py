"""The daemon's socket: accept, check the peer, run a connection; bind the path again if it goes.

Theory of operation
-------------------
`Acceptor.accept` takes connections on the listener `Daemon.serve` hands it (bound or activated by
`bouncerd/server/listener.py`). Each accepted socket is checked (`peer.check_peer`: a peer of another
uid gets no reply) and then belongs to a `bouncerd.server.connection.Connection`, which asyncio owns
from accept to close; anyio runs the tasks. When the connection ends, `on_closed` tells the daemon
(its fast-path slot and its session's count of connections). `keep_socket` watches the socket file
this daemon bound (never an activated one, whose file is the service manager's): deleted, it is
bound again and the old listener's accept loop ends. `watch_signals` ends serving on SIGTERM or
SIGINT and hands SIGHUP to `on_hangup` (a policy reload).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc

from bouncerd.errors import PeerRejectedError, ProtocolError
from bouncerd.server import peer
from bouncerd.server.caller import Caller
from bouncerd.server.connection import Connection, ObservationGate, Ops
from bouncerd.server.listener import bind_socket, socket_identity
from bouncerd.server.unread import Peers

log = logging.getLogger("bouncerd")

# After accept() fails (out of file descriptors, usually), wait this long before trying again, so
# the loop does not spin while connections close and free descriptors.
ACCEPT_RETRY_SECONDS = 0.1

# A failing accept() is logged with its reason at most this often (with the count since the last
# line): at the descriptor limit it fails ten times a second, and the log must stay readable.
ACCEPT_LOG_INTERVAL_SECONDS = 60.0

# How often the daemon checks that its socket file is still there (a person or a cleaner may delete
# it: shims could then reach no daemon, and a new one would refuse to start while this one holds the
# lock). Within this long of the deletion it listens on the path again.
SOCKET_CHECK_SECONDS = 1.0


class Acceptor:
    def __init__(
        self,
        ops: Ops,
        observations: ObservationGate,
        peers: Peers,
        on_closed: Callable[[Caller], None],
        *,
        socket_path: str,
        expected_uid: int,
    ) -> None:
        self.ops = ops
        self.observations = observations
        self.peers = peers
        self.on_closed = on_closed
        self.socket_path = socket_path
        self.expected_uid = expected_uid  # the only uid whose connections are served
        # (device, inode) of the socket file this daemon bound (None for an activated socket, whose
        # file belongs to the service manager): `keep_socket` binds the path again if it goes.
        self.own_socket: tuple[int, int] | None = None

    def start(self, sock: socket.socket, tg: anyio.abc.TaskGroup) -> None:
        """Accept on `sock` (owned from now on) in `tg`, and keep its path bound if it is ours."""
        accepting = anyio.CancelScope()
        tg.start_soon(self.accept, sock, tg, accepting)
        if self.own_socket is not None:
            tg.start_soon(self.keep_socket, accepting, tg)

    async def accept(self, sock: socket.socket, tg: anyio.abc.TaskGroup, scope: anyio.CancelScope) -> None:
        """Accept connections on `sock` until `scope` is cancelled (by `keep_socket`) or the end; then
        close it. A failing accept is logged with its reason, at most once a minute with a count."""
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        failures, said_at = 0, -ACCEPT_LOG_INTERVAL_SECONDS
        with sock, scope:
            while True:
                try:
                    accepted, _ = await loop.sock_accept(sock)
                except OSError as exc:
                    failures += 1
                    now = time.monotonic()
                    if now - said_at >= ACCEPT_LOG_INTERVAL_SECONDS:
                        log.error("accept failed (%d time(s) since the last report): %s", failures, _why(exc))
                        failures, said_at = 0, now
                    await anyio.sleep(ACCEPT_RETRY_SECONDS)
                    continue
                tg.start_soon(self.handle, accepted)

    async def keep_socket(self, accepting: anyio.CancelScope, tg: anyio.abc.TaskGroup) -> None:
        """Bind the socket path again if its file was deleted while the daemon runs."""
        path = Path(self.socket_path)
        said_taken = False
        while True:
            await anyio.sleep(SOCKET_CHECK_SECONDS)
            found = socket_identity(path)
            if found == self.own_socket:
                continue
            if found is not None:  # something else is at the path: not ours to remove
                if not said_taken:
                    log.error(
                        "%s is no longer this daemon's socket (another file is there); not touching it", path
                    )
                    said_taken = True
                continue
            try:
                sock = bind_socket(path)
            except OSError as exc:
                log.error("the socket %s was deleted, and binding it again failed: %s", path, exc)
                continue
            self.own_socket = socket_identity(path)
            said_taken = False
            log.warning("the socket %s was deleted while bouncerd ran; listening on it again", path)
            accepting.cancel()  # the old socket's accept loop ends and closes it
            accepting = anyio.CancelScope()
            tg.start_soon(self.accept, sock, tg, accepting)

    async def handle(self, sock: socket.socket) -> None:
        try:
            cred = peer.check_peer(sock, self.expected_uid)
        except PeerRejectedError as exc:
            log.warning("refused a connection: %s", exc)
            sock.close()
            return
        except BaseException:
            sock.close()
            raise
        conn = Connection(self.ops, self.observations, sock, cred, self.peers)  # closes `sock`
        try:
            await conn.run()
        except ProtocolError as exc:
            log.info("dropped a connection from pid %s: %s", cred.pid, exc)
        except ConnectionError:
            pass
        except Exception:  # a bug must cost one connection, not the daemon
            log.exception("connection from pid %s failed", cred.pid)
        finally:
            self.on_closed(conn.caller)


async def watch_signals(
    tg: anyio.abc.TaskGroup,
    on_hangup: Callable[[], None],
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """End `tg` at SIGTERM or SIGINT; SIGHUP calls `on_hangup`."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        task_status.started()
        async for signum in signals:
            if signum == signal.SIGHUP:
                on_hangup()
                continue
            log.info("%s: shutting down", signal.Signals(signum).name)
            tg.cancel_scope.cancel()
            return


def _why(exc: BaseException) -> str:
    """What went wrong, even for an exception without a message of its own (anyio's wrappers)."""
    for candidate in (exc, exc.__cause__, exc.__context__):
        if candidate is not None and str(candidate):
            return f"{type(candidate).__name__}: {candidate}"
    return type(exc).__name__


def socket_display_path(sock: socket.socket, fallback: Path) -> str:
    """The path a listener is bound to (an activated one may live anywhere)."""
    try:
        name = sock.getsockname()
    except OSError:
        return str(fallback)
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return name if isinstance(name, str) and name else str(fallback)
