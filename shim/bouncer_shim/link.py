"""The shim's connection to bouncerd: connect, autostart, reconnect with backoff, move frames.

Theory of operation
-------------------
`DaemonLink` owns one non-blocking Unix socket and knows nothing of JSON-RPC: the relay writes every
frame (hello included) and reads every reply, and ids are the relay's, so requests are pipelined and
replies may come in any order. The pump drives the link from its loop and the link reports three
events: `CONNECTED`, `LOST` and a decoded reply (a dict).

Connecting. Before each attempt the runtime directory is checked to be private (ours, 0700, not a
symlink): a socket in a directory someone else can write could be theirs, answering every verdict.
An attempt that finds no daemon does, the first time and unless ``BOUNCER_NO_AUTOSTART=1``, start
one: ``python -m bouncerd --foreground`` in its own session, stdin from /dev/null, output appended to
the daemon log. Two shims racing to autostart is fine, the daemon's instance lock makes the loser
exit. During the first AUTOSTART_WAIT_SECONDS the link retries every AUTOSTART_POLL_SECONDS and
reports nothing (the relay holds calls meanwhile); after that it reports LOST and retries with
exponential backoff. A connection that drops is reported LOST at once and retried the same way; a
daemon that died is autostarted again, at most once every AUTOSTART_INTERVAL_SECONDS. A daemon that
accepts but stops answering is dropped by the pump (see DAEMON_ACK_TIMEOUT_SECONDS there).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from bouncer_shim.fdio import PeerGoneError, Writer
from bouncerd import paths as bouncer_paths
from bouncerd import wire
from bouncerd.errors import BouncerError, ProtocolError

if TYPE_CHECKING:
    import subprocess

AUTOSTART_VARIABLE: Final = "BOUNCER_NO_AUTOSTART"

# A cold bouncerd (interpreter, imports, journal replay) listens within a second on a loaded machine;
# five bound the wait for one the shim started, during which calls and output are held, not refused.
AUTOSTART_WAIT_SECONDS: Final = 5.0
AUTOSTART_POLL_SECONDS: Final = 0.05
# A daemon the shim started that exits at once either failed or lost the start-up race to another
# daemon, which is then about to listen; the shim waits this much longer, not the whole window.
AUTOSTART_LOSER_GRACE_SECONDS: Final = 1.0
# A daemon that keeps dying is not restarted in a tight loop by every shim of every client.
AUTOSTART_INTERVAL_SECONDS: Final = 30.0

# Reconnect backoff: quick for a daemon restart (a service manager brings it back in well under a
# second), doubling to a ceiling so a daemon that stays away costs one connect() every 2 s.
RECONNECT_FIRST_DELAY_SECONDS: Final = 0.1
RECONNECT_MAX_DELAY_SECONDS: Final = 2.0

# Reads from the socket: replies are small (acks, verdicts); one read drains many.
SOCKET_READ_BYTES: Final = 256 * 1024

# The socket's send buffer is asked for this much (the kernel caps it at net.core.wmem_max, 208 KiB
# by default, 4 MiB on many distributions): a 10 MB observation then leaves in a few writes instead of
# fifty round trips through a 208 KiB buffer, each a wake-up of the shim and of the daemon.
SOCKET_SEND_BYTES: Final = 4 * 1024 * 1024


class Connected:
    __slots__ = ()


class Lost:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


CONNECTED: Final = Connected()
LinkEvent = Connected | Lost | dict[str, Any]


class DaemonLink:
    def __init__(self, environ: Mapping[str, str], *, now: float) -> None:
        self._environ = dict(environ)
        self._paths = bouncer_paths.resolve(environ)
        self._autostart = environ.get(AUTOSTART_VARIABLE, "") not in ("1", "true", "yes")
        self.sock: socket.socket | None = None
        self._writer: Writer | None = None
        self._decoder = wire.FrameDecoder()
        self._buf = bytearray(SOCKET_READ_BYTES)  # allocated once: a reply is read without a new buffer
        self._view = memoryview(self._buf)
        self._retry_at: float | None = now
        self._delay = RECONNECT_FIRST_DELAY_SECONDS
        self._starting_until: float | None = None  # end of the first-connect window
        self._first = True
        self._last_autostart: float | None = None
        self._daemon: subprocess.Popen[bytes] | None = None  # one we started, until reaped
        self._said: set[str] = set()  # diagnostics already given (each once)
        self.diagnostics: list[str] = []

    # ---- state for the pump ----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.sock is not None

    @property
    def pending(self) -> int:
        return self._writer.pending if self._writer is not None else 0

    @property
    def wants_write(self) -> bool:
        return self._writer is not None and self._writer.pending > 0

    def deadline(self) -> float | None:
        return self._retry_at

    # ---- connecting ------------------------------------------------------------------------------

    def poll(self, now: float) -> list[LinkEvent]:
        """Attempt a connection if one is due; reap an autostarted daemon that exited."""
        if self._daemon is not None and self.sock is None and self._daemon.poll() is not None:
            self._daemon = None  # reaped: it failed (its log says why) or lost the race to another one
            if self._starting_until is not None:
                self._starting_until = min(self._starting_until, now + AUTOSTART_LOSER_GRACE_SECONDS)
        if self.sock is not None or self._retry_at is None or now < self._retry_at:
            return []
        if self._connect():
            self._first = False
            self._starting_until = None
            self._retry_at = None  # the backoff is reset by the first reply, not by the connect
            return [CONNECTED]
        if self._first:
            if self._starting_until is None and self._maybe_autostart(now):
                self._starting_until = now + AUTOSTART_WAIT_SECONDS
            if self._starting_until is not None and now < self._starting_until:
                self._retry_at = now + AUTOSTART_POLL_SECONDS
                return []
            self._first = False
            self._schedule(now)
            return [Lost(self._unreachable())]
        self._maybe_autostart(now)
        self._schedule(now)
        return []

    def _schedule(self, now: float) -> None:
        self._retry_at = now + self._delay
        self._delay = min(self._delay * 2, RECONNECT_MAX_DELAY_SECONDS)

    def _connect(self) -> bool:
        try:
            bouncer_paths.check_private_dir(self._paths.runtime)
        except FileNotFoundError:
            return False
        except (BouncerError, OSError) as exc:
            self._say(f"not connecting to bouncerd: {exc}")
            return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BYTES)
        try:
            sock.setblocking(False)
            sock.connect(str(self._paths.socket))
        except OSError as exc:
            sock.close()
            if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN):
                self._say(f"cannot connect to {self._paths.socket}: {exc.strerror or exc}")
            return False
        self.sock = sock
        self._writer = Writer(sock.fileno())
        self._decoder = wire.FrameDecoder()
        return True

    def _maybe_autostart(self, now: float) -> bool:
        if not self._autostart or self._daemon is not None:
            return False
        if self._last_autostart is not None and now - self._last_autostart < AUTOSTART_INTERVAL_SECONDS:
            return False
        self._last_autostart = now
        import subprocess  # only here: it costs start-up time, and most shims find a daemon running

        try:
            bouncer_paths.ensure_private_dir(self._paths.state)
            log_fd = os.open(self._paths.daemon_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except (BouncerError, OSError) as exc:
            self._say(f"cannot start bouncerd: {exc}")
            return False
        try:
            self._daemon = subprocess.Popen(
                [sys.executable, "-m", "bouncerd", "--foreground"],
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                start_new_session=True,
                env=self._environ,
                cwd="/",  # a daemon outlives the shim; it must not pin the client's working directory
            )
        except OSError as exc:
            self._say(f"cannot start bouncerd: {exc}")
            return False
        finally:
            os.close(log_fd)
        self._say(f"started bouncerd (pid {self._daemon.pid}; log: {self._paths.daemon_log})")
        return True

    def _unreachable(self) -> str:
        if not self._autostart:
            return (
                f"bouncerd is not running at {self._paths.socket} (not starting one: {AUTOSTART_VARIABLE}=1)"
            )
        return f"bouncerd did not answer at {self._paths.socket} (see {self._paths.daemon_log})"

    # ---- moving frames ---------------------------------------------------------------------------

    def send(self, parts: list[bytes]) -> None:
        """Queue a frame (in parts); the pump's `flush` writes it (frames sent while down are the
        relay's bug)."""
        if self._writer is not None:
            for part in parts:
                self._writer.write(part)

    def flush(self, now: float) -> list[LinkEvent]:
        if self._writer is None:
            return []
        try:
            self._writer.flush()
        except (PeerGoneError, OSError) as exc:
            return self._drop(f"bouncerd connection lost: {exc}", now)
        return []

    def on_readable(self, now: float) -> list[LinkEvent]:
        if self.sock is None:
            return []
        try:
            got = self.sock.recv_into(self._buf)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError as exc:
            return self._drop(f"bouncerd connection lost: {exc}", now)
        if not got:
            return self._drop("bouncerd closed the connection", now)
        events: list[LinkEvent] = []
        try:
            self._decoder.receive_data(self._view[:got])  # the decoder copies what it buffers
            while (message := self._decoder.next_message()) is not None:
                events.append(message)
                self._delay = RECONNECT_FIRST_DELAY_SECONDS  # a daemon that answers is a healthy one
        except ProtocolError as exc:
            events.extend(self._drop(f"bouncerd sent an invalid frame: {exc}", now))
        return events

    def drop(self, reason: str, now: float) -> list[LinkEvent]:
        """Give up on the connection (a daemon that stopped answering) and reconnect."""
        return self._drop(reason, now)

    def _drop(self, reason: str, now: float) -> list[LinkEvent]:
        if self.sock is None:
            return []
        with contextlib.suppress(OSError):
            self.sock.close()
        self.sock = None
        self._writer = None
        self._schedule(now)  # a daemon that accepts and hangs up at once is not hammered
        return [Lost(reason)]

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None
            self._writer = None
        self._retry_at = None

    def _say(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            self.diagnostics.append(message)
